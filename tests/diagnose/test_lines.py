"""What diagnose makes of raw files: kind, job, node, rank and source of each line."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from medic.diagnose.lines import (
    DiagnoseError,
    LogText,
    file_kind,
    lines_frame,
    node_from_path,
    read_paths,
)
from medic.timeutil import iso


@pytest.mark.parametrize(
    ("name", "node"),
    [
        ("gpu-b17/dmesg.txt", "gpu-b17"),
        ("dmesg-gpu-b17.log", "gpu-b17"),
        ("node-c3.kern.log", "node-c3"),
        ("logs/kern.log", ""),
        ("journal.txt", ""),
        ("output.log", ""),  # a file's own name, not a host's: hosts are numbered
        ("runs/stdout.txt", ""),
    ],
)
def test_a_node_log_is_named_after_its_host(name: str, node: str) -> None:
    assert node_from_path(name) == node


def test_files_are_told_apart_by_name_then_by_their_lines() -> None:
    assert file_kind(LogText("slurmctld.log", ""), ["x"]) == "slurm"
    assert file_kind(LogText("kern.log", ""), ["x"]) == "system"
    kernel = ["[ 1.0] NVRM: loading", "[ 2.0] mlx5_core 0000:41:00.0: up"]
    assert file_kind(LogText("capture.txt", ""), kernel) == "system"
    assert file_kind(LogText("capture.txt", ""), ["step 1 loss 2.0"]) == "app"


def test_job_node_rank_and_source_of_each_line() -> None:
    frame = lines_frame(
        [
            LogText(
                "gpu-a7/slurm-4242.out",
                "[rank3]: boom at 2026-11-30T04:00:00\n"
                "5: gpu-a1:12:13 [5] NCCL WARN x\n\n"
                "  host      : gpu-a2\n",
            ),
            LogText("run.log", "*** JOB 777 ON gpu-a1 CANCELLED AT 2026-11-30T05:00:00 ***"),
            LogText("journal.txt", "Nov 30 04:00:01 gpu-a9 kernel: NVRM: Xid (PCI:0000:1b:00): 79"),
            LogText(
                "slurmctld.log",
                "[2026-11-30T04:00:02] Killing JobId=4242 on failed node x\n"
                "[2026-11-30T04:00:03] requeue job 4243 due to failure of node x\n"
                "[2026-11-30T04:00:04] error: Nodes x not responding",
            ),
        ]
    )
    rows = frame.sort("order", "line").select("line", "job_id", "node", "rank", "source").rows()
    assert rows == [
        (1, "4242", "gpu-a7", 3, "app"),
        (2, "4242", "gpu-a1", 5, "app"),
        (4, "4242", "gpu-a2", None, "app"),
        (1, "777", "", None, "app"),
        (1, None, "gpu-a9", None, "system"),
        (1, "4242", "", None, "slurm"),
        (2, "4243", "", None, "slurm"),
        (3, None, "", None, "slurm"),
    ]


def test_a_slurmd_line_s_job_is_its_step_s_as_the_step_daemon_writes_it() -> None:
    # slurmstepd leads its lines in slurmd.log with the step it runs ([job.step], after the
    # time); a step's id and its "*** STEP" report name the job too; a time is no step
    text = (
        "[2026-11-30T04:00:01.100] launch task StepId=5151.0 request from UID:1 GID:1\n"
        "[2026-11-30T04:00:02.200] [5152.extern] done with job\n"
        "[2026-11-30T04:00:03.300] [5153.0] error: *** STEP 5153.0 ON gpu-b2 CANCELLED AT x\n"
        "[2026-11-30T04:00:04.400] error: *** STEP 5154.0 STEPD TERMINATED ON gpu-b2 AT x\n"
        "[2026-11-30T04:00:05.500] [2026-11-30] debug: nothing of a job\n"
    )
    frame = lines_frame([LogText("slurmd.log", text)]).sort("line")
    assert frame.get_column("job_id").to_list() == ["5151", "5152", "5153", "5154", None]


def test_a_kernel_line_s_time_since_boot_names_no_job() -> None:
    # dmesg's "[seconds.micros]" has the step daemon's "[job.step]" form; Slurm's words in a
    # system log still name the job
    text = (
        "[588912.611023] NVRM: zork\n[588913.100000] zork: *** JOB 5155 ON gpu-b2 CANCELLED AT x\n"
    )
    frame = lines_frame([LogText("dmesg.log", text)]).sort("line")
    assert frame.get_column("job_id").to_list() == [None, "5155"]


def test_folders_are_read_recursively_and_missing_paths_are_one_line_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "dmesg.txt").write_text("a\n")
    (tmp_path / "slurm-1.out").write_text("b\n")
    assert [Path(t.name).name for t in read_paths([tmp_path])] == ["dmesg.txt", "slurm-1.out"]
    with pytest.raises(DiagnoseError, match="nope: no such file"):
        read_paths([tmp_path / "nope"])


def test_a_log_without_any_year_is_dated_from_its_file_not_the_year_2000(tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    journal.write_text(
        "Dec 31 23:59:58 gpu-a9 kernel: NVRM: Xid (PCI:0000:1b:00): 79\n"
        "Jan  1 00:00:03 gpu-a9 kernel: NVRM: GPU has fallen off the bus\n"
    )
    written = dt.datetime(2027, 1, 1, 0, 5, tzinfo=dt.UTC).timestamp()
    os.utime(journal, (written, written))
    frame = lines_frame(read_paths([journal])).sort("line")
    assert [iso(t) for t in frame.get_column("time")] == [
        "2026-12-31T23:59:58Z",
        "2027-01-01T00:00:03Z",
    ]
    text = LogText("pasted", "Nov 30 04:00:01 gpu-a9 kernel: NVRM: Xid (PCI:0000:1b:00): 79")
    (pasted,) = lines_frame([text]).get_column("time")
    assert pasted <= time.time_ns() // 1000 + 86_400 * 10**6
    assert iso(pasted) > "2025"


def test_a_command_that_reports_on_its_machine_is_about_the_prompt_s_host() -> None:
    # bash's default prompts (Red Hat's, Debian's behind a conda environment); a file shown with
    # cat is about wherever it was written; a container's id is no node
    text = (
        "[root@gpu-b17 ~]# nvidia-smi\n"
        "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
        "(base) zork@gpu-c07:~/run$ sudo dmesg -T | tail\n"
        "[Mon Nov 30 02:11:09 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
        "[zork@login01 ~]$ cat slurm-5155.out\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "root@3f2a9c1d7b6e:/workspace# nvidia-smi\n"
        "No devices were found\n"
    )
    frame = lines_frame([LogText("terminal.txt", text)]).sort("line")
    assert frame.get_column("node").to_list() == [
        "gpu-b17", "gpu-b17", "gpu-c07", "gpu-c07", "", "", "", "",
    ]  # fmt: skip
