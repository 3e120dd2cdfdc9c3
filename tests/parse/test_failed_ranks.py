"""Failed ranks from launchers' and runtimes' own reports, read by shape: records of fields and
single lines naming who, where and how it ended (values ours, formats as each case says)."""

from __future__ import annotations

from typing import Any

from medic.parse.failed_ranks import FAILED_RANKS, FailedRankParser
from medic.testing.builders import batch, log

KEEP = ["rank", "local_rank", "host", "exit_code", "signal", "end", "primary"]


def parse(*messages: str, job_id: str | None = "100") -> list[dict[str, Any]]:
    rows = [log(0.001 * i, m, job_id=job_id) for i, m in enumerate(messages)]
    out = FailedRankParser().parse(batch("logs", rows))
    if out is None:
        return []
    assert out.data.schema == FAILED_RANKS
    return out.frame.select(KEEP).to_dicts()


def test_torchrun_summary_names_the_root_cause_first_and_skips_stopped_ranks() -> None:
    """torch/distributed/elastic/multiprocessing/errors: one record of fields per failure."""
    rows = parse(
        "Failures:",
        "[1]:",
        "  time      : 2026-12-04_08:12:31",
        "  host      : gpu-b09",
        "  rank      : 22 (local_rank: 6)",
        "  exitcode  : -15 (pid: 91871)",
        "  traceback : Signal 15 (SIGTERM) received by PID 91871",
        "[2]:",
        "  host      : gpu-b10",
        "  rank      : 30 (local_rank: 6)",
        "  exitcode  : 1 (pid: 91872)",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  host      : gpu-b09",
        "  rank      : 21 (local_rank: 5)",
        "  exitcode  : -9 (pid: 91870)",
        "  traceback : Signal 9 (SIGKILL) received by PID 91870",
    )
    assert rows == [
        dict(rank=30, local_rank=6, host="gpu-b10", exit_code=1, signal=None, end="exit code 1",
             primary=0),
        dict(rank=21, local_rank=5, host="gpu-b09", exit_code=-9, signal="SIGKILL",
             end="SIGKILL", primary=1),
    ]  # fmt: skip


def test_mpi_process_names_in_both_runtimes_forms() -> None:
    """Open MPI's ``[[job,vpid],rank]`` and PRRTE's ``[nspace@job,rank]`` under "The first
    process to do so was:"."""
    rows = parse(
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[41872,1],6]",
        "  Exit code:    1",
        "----",
        "thus causing the job to be terminated. The first process to do so was:",
        "   Process name: [prterun-gpu-b02-81234@1,12]",
        "   Exit code:    134",
    )
    assert [(r["rank"], r["exit_code"], r["primary"]) for r in rows] == [(6, 1, 1), (12, 134, 1)]


def test_an_mpich_abort_names_the_process_and_the_code_it_gave() -> None:
    # MPICH and its family (Cray MPICH prefixes its own header) name the process that called
    # MPI_Abort by its rank in MPI_COMM_WORLD, after the error code it gave
    rows = parse(
        "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3",
        "MPICH ERROR [Rank 47] [job id 57.0] [nid04069] - Abort(2) (rank 47 in comm 432): "
        "application called MPI_Abort(comm=0xC4000001, 2) - process 47",
        "application called MPI_Abort(MPI_COMM_WORLD, 0) - process 5",
    )
    assert [(r["rank"], r["exit_code"]) for r in rows] == [(3, 1), (47, 2)]


def test_single_lines_name_who_where_and_how() -> None:
    rows = parse(
        "mpirun noticed that process rank 33 with PID 98239 on node dgx-b200-014 exited on "
        "signal 9 (Killed).",
        "srun: error: gpu-a05: tasks 8-9: Exited with exit code 2",
        "srun: error: dgx-b200-003: task 17: Segmentation fault (core dumped)",
    )
    assert [(r["rank"], r["host"], r["end"]) for r in rows] == [
        (33, "dgx-b200-014", "SIGKILL"),
        (8, "gpu-a05", "exit code 2"),
        (9, "gpu-a05", "exit code 2"),
        (17, "dgx-b200-003", "segmentation fault"),
    ]


def test_clean_ends_stopped_ranks_and_ranks_without_an_end_are_none() -> None:
    assert (
        parse(
            "rank 3 finished training in 7214.2 s",
            "worker rank 2 exited with exit code 0",
            "process rank 1 exited normally (exit code 0)",
            "  Process name: [[41873,1],4]",
            "  Exit code:    0",
            "srun: error: nid002888: tasks 0-57,59-63: Terminated",
            "gpu-a01:1234:1234 [3] NCCL INFO comm 0x5 rank 3 nranks 8 cudaDev 3 - Init COMPLETE",
            "  exitcode  : 1 (pid: 4411)",
        )
        == []
    )


def test_lines_of_no_job_are_not_read() -> None:
    assert parse("srun: error: gpu-a05: task 8: Exited with exit code 2", job_id=None) == []


def test_a_local_rank_alone_is_read_and_more_wordings_of_an_end() -> None:
    rows = parse(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 "
        "(pid: 16) of binary: /opt/conda/bin/python",
        "[launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=4'] "
        "exits with return code = 1",
        "worker rank 3 (pid 170) terminated with code 1",
        "srun: error: gpu-a04: task 4: Out Of Memory",
        # a launcher's status of its container, then the code it ended with (Paddle's shape)
        "Container rank 6 status failed cmd ['python3', '-u', 'train.py'] code 2 log log/w.6",
        "rank 7 failed with code 3",
        # torch.distributed.elastic's warning about a child that wrote no error file
        "Child process 4711 (local_rank 2) FAILED (exitcode 1)",
    )
    assert [(r["rank"], r["local_rank"], r["end"]) for r in rows] == [
        (None, 0, "SIGABRT"),
        (None, 4, "exit code 1"),
        (3, None, "exit code 1"),
        (4, None, "out of memory"),
        (6, None, "exit code 2"),
        (7, None, "exit code 3"),
        (None, 2, "exit code 1"),
    ]


def test_the_process_torch_multiprocessing_spawn_reports_is_a_local_rank() -> None:
    # torch/multiprocessing/spawn.py: the index of the process that failed on this node
    raised = (
        "torch.multiprocessing.spawn.ProcessRaisedException:",
        "",
        "-- Process 5 terminated with the following error:",
    )
    ends = {
        raised: (5, "terminated with the following error"),
        ("process 2 terminated with exit code 1",): (2, "exit code 1"),
        ("process 3 terminated with signal SIGSEGV",): (3, "SIGSEGV"),
    }
    for lines, (local, end) in ends.items():
        assert [(r["rank"], r["local_rank"], r["end"]) for r in parse(*lines)] == [
            (None, local, end)
        ]


def test_a_windows_status_as_an_exit_code_is_said_in_the_end_only() -> None:
    # Windows ends a process with an NTSTATUS as its exit code (0xC0000094, an integer
    # division by zero: 3221225620), beyond what the int32 columns hold
    line = "process 0 terminated with exit code 3221225620"
    [row] = parse(line)
    assert (row["local_rank"], row["exit_code"], row["end"]) == (0, None, "exit code 3221225620")
    [row] = parse("local_rank: 4294967296 (pid: 7) exitcode: 1")
    assert (row["local_rank"], row["exit_code"]) == (None, 1)


def test_a_rank_list_as_python_prints_it_and_a_childs_negative_code() -> None:
    # PaddlePaddle's launchers (python/paddle/distributed/fleet/launch_utils.py: the aborted
    # trainers' ranks, a list; launch/job/container.py: a container's str, with its process's
    # exit code, negative for a signal as Python's subprocess reports one)
    rows = parse(
        "ERROR 2024-03-02 10:00:01,000 launch_utils.py:545] ABORT!!! Out of all 8 trainers, the "
        "trainer process with rank=[2, 5] was aborted. Please check its log.",
        "LAUNCH ERROR 2024-03-02 10:00:02,000 Container rank 1 status failed cmd ['python', "
        "'-u', 'train.py'] code -11 log log/workerlog.1",
        "LAUNCH INFO 2024-03-02 10:00:03,000 Container rank 0 status running cmd ['python'] "
        "code 0 log log/workerlog.0",
        "rank 4: the data loader returned code 3 after a retry",
    )
    assert [(r["rank"], r["end"]) for r in rows] == [(2, "aborted"), (5, "aborted"), (1, "SIGSEGV")]


def test_only_lines_near_an_end_are_read_and_distant_runs_do_not_join() -> None:
    # A rank field more than BEFORE lines above the exit code is no part of its record.
    far = ["  rank      : 5 (local_rank: 5)", *(f"  field{i}  : x" for i in range(12))]
    assert parse(*far, "  exitcode  : 1 (pid: 77)") == []
    assert parse("Epoch 3: perplexity 12.1, default lr", "rank 3 step 100") == []


def test_batches_read_in_one_call_each_get_what_they_give_alone() -> None:
    """``parse_apart`` (a replay's read-ahead): a record cut by a batch boundary stays cut, as
    when each batch is parsed alone; a batch with nothing gets None."""
    lines = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  host      : gpu-b09",
        "  rank      : 21 (local_rank: 5)",
        "  exitcode  : -9 (pid: 91870)",
        "srun: error: gpu-b10: task 30: Exited with exit code 1",
        "step 10 loss 2.0",
        "  rank      : 22 (local_rank: 6)",
        "  exitcode  : 1 (pid: 91871)",
        "process rank 3 with PID 11 on node gpu-b11 exited on signal 11 (Segmentation fault).",
    ]
    rows = [log(0.5 * i, m, job_id="100" if i % 4 else "200") for i, m in enumerate(lines)]
    cuts = [(0, 3), (3, 6), (6, 7), (7, 10)]
    batches = [batch("logs", rows[lo:hi]) for lo, hi in cuts]
    parser = FailedRankParser()
    apart = parser.parse_apart(batches)
    alone = [parser.parse(b) for b in batches]
    assert [a is None for a in apart] == [a is None for a in alone] == [True, False, True, False]
    for one, each in zip(apart, alone, strict=True):
        if one is not None and each is not None:
            assert one.data.schema == FAILED_RANKS
            assert one.frame.equals(each.frame)
    assert apart[1] is not None and apart[1].frame.get_column("rank").to_list() == [30]


def test_a_line_whose_first_colon_is_in_brackets_is_a_report_of_its_own() -> None:
    # torchrun's agent stops the other workers, then reports the one that died: its
    # "failed (exitcode: -9)" is no field of the SIGTERM line's record
    rows = parse(
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4410 closing"
        " signal SIGTERM",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3"
        " (pid: 4411) of binary: /opt/venv/bin/python",
    )
    assert [(r["rank"], r["local_rank"], r["end"]) for r in rows] == [(None, 3, "SIGKILL")]
