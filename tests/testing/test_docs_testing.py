"""docs/testing.md's worked example runs, and passes, as written."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_the_worked_example_in_docs_testing_md_passes(tmp_path: Path) -> None:
    text = DOC.read_text()
    [code] = re.findall(r"```python\n(.*?)```", text.split("## A worked example", 1)[1], re.S)
    namespace: dict[str, Any] = {"__name__": "site_tests"}
    exec(compile(code, str(DOC), "exec"), namespace)
    tests = {name: f for name, f in namespace.items() if name.startswith("test_")}
    assert len(tests) == 3
    for test in tests.values():
        wanted = inspect.signature(test).parameters
        test(**({"tmp_path": tmp_path} if "tmp_path" in wanted else {}))
