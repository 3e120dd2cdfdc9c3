"""Reading a node check's output: DCGM's diagnostic table (the 3.x and 4.x layouts, our own
values) and any other check's last line."""

from __future__ import annotations

from pathlib import Path

from medic.actions.check_output import read_check

DCGM_3 = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.6                                          |
| Driver Version Detected   | 550.90.07                                      |
| GPU Device IDs Detected   | 2330,2330,2330,2330                            |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| NVML Library              | Pass                                           |
| Persistence Mode          | Pass                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Fail - GPU: 2                                  |
| Warning                   | GPU 2 PCIe replay rate 41 exceeds the limit    |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
+---------------------------+------------------------------------------------+
"""

DCGM_4 = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Fail                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Fail                                     |
+---------------------------+------------------------------------------------+
"""


def test_dcgm_3_failed_tests_are_named(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text(DCGM_3)
    assert read_check(path).failed_tests == ("PCIe: Fail - GPU: 2",)


def test_dcgm_4_failed_tests_name_their_gpus(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text(DCGM_4)
    said = read_check(path)
    assert said.failed_tests == ("memory: Fail", "memory: GPU1: Fail")
    assert said.detail == "memory: Fail; memory: GPU1: Fail"


def test_a_passing_table_and_other_checks_read_as_their_last_line(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text(DCGM_3.replace("Fail - GPU: 2", "Pass - All"))
    assert read_check(path).failed_tests == ()
    path.write_text("# Avg bus bandwidth    : 361.2\n\n")
    assert read_check(path).detail == "# Avg bus bandwidth    : 361.2"
    assert read_check(tmp_path / "missing").detail == ""
