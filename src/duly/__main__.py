"""``python -m duly`` = the ``duly`` command."""

from duly.cli import main

main()
