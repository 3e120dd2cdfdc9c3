"""``python -m medic``: the same entry point as the ``medic`` command.

Run from a clone by an interpreter that lacks medic's dependencies (the system Python, where
``./scripts/demo`` or ``./scripts/test`` installed them into the clone's ``.venv``), it runs
again under the ``.venv``'s Python; with no such ``.venv`` it says in one line what is missing,
instead of a traceback."""

import os
import sys
from pathlib import Path

AGAIN = "MEDIC_IN_CLONE_VENV"
"""Set in the environment of the run under the clone's ``.venv``: it never runs again."""

try:
    from medic.cli import main
except ModuleNotFoundError as missing:
    venv = Path(__file__).resolve().parent.parent / ".venv"
    python = venv / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != venv.resolve() and AGAIN not in os.environ:
        os.execve(python, [str(python), "-m", "medic", *sys.argv[1:]], {**os.environ, AGAIN: "1"})
    sys.exit(
        f"medic: error: this Python ({sys.executable}) lacks {missing.name}, which medic needs: "
        "use .venv/bin/medic after ./scripts/demo, or pip install the package"
    )

main()
