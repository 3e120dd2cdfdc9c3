"""``python -m medic``: the same entry point as the ``medic`` command.

Run by an interpreter that lacks medic's dependencies (the system Python in a clone whose
``.venv`` holds them), it says so in one line instead of a traceback."""

import sys

try:
    from medic.cli import main
except ModuleNotFoundError as missing:
    sys.exit(
        f"medic: error: this Python ({sys.executable}) lacks {missing.name}, which medic needs: "
        "use .venv/bin/medic after ./scripts/demo, or pip install the package"
    )

main()
