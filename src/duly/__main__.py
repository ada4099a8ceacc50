"""``python -m duly`` = the ``duly`` command."""

from duly._cli import main

if __name__ == "__main__":  # not when a child process of an isolated task imports it
    main()
