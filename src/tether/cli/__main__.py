"""``python -m tether.cli``: the same as the ``tether`` command."""

from tether.cli import main

main()
