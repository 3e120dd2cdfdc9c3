"""What a node check's output says: DCGM's diagnostic table read for failed tests, else the
last line the check printed.

``dcgmi diag -r N`` prints a table of ``| <test> | <result> |`` rows under section rows
(``|-----  Deployment  ---...``), and in DCGM 4 a row per GPU under each test
(``|            | GPU0: Fail |``); a result that starts with ``Fail`` is a failed test
(formats as pasted in NVIDIA/DCGM issues #55, #198, #253 and NVIDIA/go-dcgm#52). A check job
whose output holds a failed DCGM test fails even when its exit status is 0, as tools that trusted
the status alone learned (IBM/autopilot#68).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROW = re.compile(r"^\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>[^|]*?)\s*\|$")
MAX_DETAIL = 200


@dataclass(frozen=True)
class CheckOutput:
    failed_tests: tuple[str, ...]
    """DCGM tests whose result starts with Fail (``memory: GPU0: Fail``)."""
    last_line: str

    @property
    def detail(self) -> str:
        text = "; ".join(self.failed_tests) if self.failed_tests else self.last_line
        return text[:MAX_DETAIL]


def read_check(path: Path) -> CheckOutput:
    """The check's output file read; an unreadable file reads as empty."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        lines = []
    failed: list[str] = []
    test = ""
    for line in lines:
        row = ROW.match(line)
        if row is None:
            continue
        test = row["test"] or test
        if row["result"].startswith("Fail") or ": Fail" in row["result"]:
            failed.append(f"{test}: {row['result']}")
    last = next((line for line in reversed(lines) if line), "")
    return CheckOutput(tuple(failed), last[:MAX_DETAIL])
