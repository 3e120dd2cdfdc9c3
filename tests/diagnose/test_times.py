"""Event times read from the timestamps real logs carry."""

from __future__ import annotations

import polars as pl

from medic.diagnose.times import event_times, first_year
from medic.timeutil import iso


def times(files: dict[str, list[str]], year: int = 2026) -> list[str]:
    rows = [(name, m) for name, lines in files.items() for m in lines]
    lines = pl.DataFrame(rows, schema=["file", "message"], orient="row")
    return [iso(t) for t in event_times(lines, year)]


def test_each_format_gives_its_time() -> None:
    got = times(
        {
            "a": [
                "2026-11-30 04:13:00,123 - INFO - python logging",
                "[2026-11-30T04:13:01.5] slurmd: launch",
                "2026-11-30T04:13:01.750000+0000 gpu-a1 kernel: journal short-iso",
                "Nov 30 04:13:02 gpu-a1 kernel: syslog",
                "[Mon Nov 30 04:13:03 2026] NVRM: dmesg -T",
                "[rank6]:[E1130 04:13:04.220419337 ProcessGroupNCCL.cpp:632] glog",
                "3: [rank3]:[W1130 04:13:05.000001000 socket.cpp:1] glog behind a label",
                "E1130 04:13:06.118000 9001 torch/distributed/elastic/api.py:869] elastic",
                "[rank2]:[E602 04:13:07.5 ProcessGroupNCCL.cpp:632] c10's date, month unpadded",
            ]
        }
    )
    assert [t[11:23] for t in got] == [
        "04:13:00.123",
        "04:13:01.500",
        "04:13:01.750",
        "04:13:02Z",
        "04:13:03Z",
        "04:13:04.220",
        "04:13:05.000",
        "04:13:06.118",
        "04:13:07.500",
    ]
    assert got[-1].startswith("2026-06-02")


def test_numbers_that_make_no_date_are_no_stamp_and_no_error() -> None:
    # a glog-like letter and numbers in a line's text (month 12, day 34), a date that never
    # was (February 30th), a second past 59: the line takes its predecessor's time
    got = times(
        {
            "a": [
                "2026-11-30 04:13:00 - INFO - start",
                "build F1234 12:00:00 firmware string",
                "2026-02-30 10:00:00 - INFO - typed by hand",
                "W1130 04:13:61.5 zork.cc:1] a minute and a second",
            ]
        }
    )
    assert got == [
        "2026-11-30T04:13:00Z",
        "2026-11-30T04:13:00.000001Z",
        "2026-11-30T04:13:00.000002Z",
        "2026-11-30T04:13:00.000003Z",
    ]


def test_unstamped_lines_follow_their_stamped_predecessor_in_order() -> None:
    got = times({"a": ["[2026-11-30T04:00:00] error", "  traceback line", "  another"]})
    assert got == [
        "2026-11-30T04:00:00Z",
        "2026-11-30T04:00:00.000001Z",
        "2026-11-30T04:00:00.000002Z",
    ]


def test_a_line_stamped_to_the_second_keeps_its_place_after_finer_stamps() -> None:
    # PyTorch's C++ logging stamps to the microsecond, an application's own format to the second
    got = times(
        {
            "a": [
                "[W1130 04:00:01.823833318 socket.cpp:460] [c10d] waitForInput timed out",
                "[2026-11-30 04:00:01 TP1] Scheduler hit an exception: Traceback",
                "[2026-11-30 04:00:03 TP1] next second",
            ]
        }
    )
    assert got == [
        "2026-11-30T04:00:01.823833Z",
        "2026-11-30T04:00:01.823834Z",
        "2026-11-30T04:00:03Z",
    ]


def test_boot_times_and_unstamped_files_are_placed_from_the_earliest_absolute_time() -> None:
    got = times(
        {
            "job": ["2026-11-30T04:00:00 start", "2026-11-30T04:00:05 end"],
            "dmesg": ["[ 100.000000] a", "[ 102.500000] b"],
            "plain": ["x", "y"],
        }
    )
    assert got[2:] == [
        "2026-11-30T04:00:00Z",
        "2026-11-30T04:00:02.500000Z",
        "2026-11-30T04:00:00Z",
        "2026-11-30T04:00:00.001000Z",
    ]


def test_the_year_comes_from_a_full_date_in_the_inputs() -> None:
    messages = pl.Series(["E1130 04:00:00.1 x", "[Tue Dec  1 10:00:00 2026] y"])
    assert first_year(messages) == 2026
    assert first_year(pl.Series(["no date"])) is None
