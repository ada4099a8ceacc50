"""``python -m duly`` = the ``duly`` command."""

from duly._cli import main

main()
