"""``python -m medic``: the same entry point as the ``medic`` command."""

from medic.cli import main

main()
