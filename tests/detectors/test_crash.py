"""The crash detector: fatal errors on ranks and failed jobs, never blaming a node."""

from __future__ import annotations

import pytest

from medic.config import ConfigError, from_dict
from medic.detectors.crash import CrashConfig, CrashDetector
from medic.parse.gpu_latest import GpuLatestParser
from medic.parse.signatures import SignatureParser
from medic.testing.builders import at, batch, log
from tests.detectors.scenarios import Job, detect, kernel, seconds

JOB = Job()
NCCL_ABORT = (
    "[rank{rank}]:[E207 19:37:09.983600771 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID "
    "0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: NCCL "
    "error: remote process exited or there was a network error, NCCL version 2.21.5"
)


def running(duration: int = 120) -> tuple[list[dict], list[dict], list[dict]]:
    return JOB.progress(0, duration), JOB.telemetry(0, duration), [JOB.start()]


def test_oom_on_one_rank_is_a_crash_blaming_no_node_reported_after_the_hold() -> None:
    logs, gpu, sched = running()
    # murong-xu/CADS#4, on rank 13
    logs += JOB.rank_logs(
        40.2,
        "[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. "
        "GPU 0 has a total capacity of 31.47 GiB of which 12.73 GiB is free.",
        ranks=[13],
    )
    logs += JOB.rank_logs(41.0, NCCL_ABORT, ranks=[r for r in JOB.ranks if r != 13])
    found = detect(120, logs, gpu, [*sched, JOB.end(50, "FAILED", 1)])
    assert len(found) == 1
    crash = found[0]
    assert (crash.kind, crash.culprits, crash.ranks, crash.job_id) == ("crash", (), (13,), "100")
    assert 43.2 <= seconds(crash.detected_at) <= 45.0
    assert seconds(crash.onset or 0) == pytest.approx(40.2)
    assert "CUDA out of memory" in crash.summary and "rank 13 on n2" in crash.summary


def test_a_traceback_the_program_survives_is_not_a_crash() -> None:
    logs, gpu, sched = running(200)
    # NVIDIA/nccl#1928 (first line of a traceback), then training goes on
    logs += JOB.rank_logs(30, "[rank{rank}]: Traceback (most recent call last):", ranks=[2])
    logs += JOB.rank_logs(30.1, "[rank{rank}]: KeyError: 'loss_scale'", ranks=[2])
    assert detect(200, logs, gpu, [*sched, JOB.end(190, "COMPLETED", 0)]) == []


def test_a_traceback_confirmed_by_the_worker_death_is_a_crash() -> None:
    logs, gpu, sched = running()
    logs += JOB.rank_logs(30, "[rank{rank}]: Traceback (most recent call last):", ranks=[5])
    logs += JOB.rank_logs(
        30.1, "[rank{rank}]: ValueError: NaN values found in loss_gen_all", ranks=[5]
    )
    # TuSimple/centerformer#4: the elastic agent sees the worker exit
    logs.append(
        log(
            30.8,
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: "
            "5 (pid: 44260) of binary: /usr/bin/python",
            node="n1",
        )
    )
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.ranks, d.culprits) for d in found] == [("crash", (5,), ())]
    assert 33.8 <= seconds(found[0].detected_at) <= 35.0


def test_a_failed_job_without_any_log_sign_is_a_crash_at_its_end() -> None:
    _, gpu, sched = running()
    found = detect(120, [], gpu, [*sched, JOB.end(60, "FAILED", 93)])
    assert [(d.kind, d.culprits) for d in found] == [("crash", ())]
    assert 63 <= seconds(found[0].detected_at) <= 65
    assert "nvidia-resiliency-ext" in found[0].summary


@pytest.mark.parametrize(
    ("marker", "state"),
    [
        # qiskit-community/spank-plugins#17: a user's scancel
        ("slurmstepd: error: *** JOB 100 ON n1 CANCELLED AT 2026-03-01T10:01:00 ***", "CANCELLED"),
        # marbl/canu#1052
        (
            "slurmstepd: error: *** JOB 100 ON n1 CANCELLED AT 2026-03-01T10:01:00 DUE TO TIME "
            "LIMIT ***",
            "TIMEOUT",
        ),
    ],
)
def test_errors_after_a_deliberate_end_are_its_consequence(marker: str, state: str) -> None:
    logs, gpu, sched = running()
    logs.append(
        log(59.9, "slurmstepd: error: *** STEP 100.0 ON n1 CANCELLED AT 2026-03-01T10:01:00 ***")
    )
    logs.append(log(60.0, marker, node="n1"))
    logs += JOB.rank_logs(60.5, "[rank{rank}]: Traceback (most recent call last):")
    logs += JOB.rank_logs(61.0, NCCL_ABORT)
    assert detect(120, logs, gpu, [*sched, JOB.end(66, state, 0)]) == []


def test_healthy_ends_never_fire() -> None:
    logs, gpu, sched = running()
    for state, code in (("COMPLETED", 0), ("CANCELLED", 0), ("TIMEOUT", 0), ("PREEMPTED", 0)):
        assert detect(120, logs, gpu, [*sched, JOB.end(80, state, code)]) == [], state


def test_collateral_errors_alone_blame_no_node() -> None:
    logs, gpu, sched = running()
    logs += JOB.rank_logs(50, NCCL_ABORT)
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits, d.ranks) for d in found] == [("crash", (), ())]
    assert found[0].score < 1.0


def test_one_detection_per_job_until_it_runs_again() -> None:
    logs, gpu, sched = running(400)
    oom = "[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory."
    logs += JOB.rank_logs(20, oom, ranks=[1])
    logs += JOB.rank_logs(40, oom, ranks=[2])
    logs += JOB.rank_logs(320, oom, ranks=[3])
    sched += [JOB.end(30, "FAILED", 1), JOB.start(300)]
    found = detect(400, logs, gpu, sched, detectors=("crash",))
    assert [(seconds(d.detected_at) // 10, d.ranks) for d in found] == [(2, (1,)), (32, (3,))]


def test_each_job_in_a_burst_keeps_its_root_error_behind_more_peer_errors_than_kept() -> None:
    # Two jobs fail in the same second: 40 ranks of each report the collateral NCCL abort
    # (more than an incident keeps) before the root error of one rank arrives.
    other = Job(nodes=("n5", "n6", "n7", "n8"), job_id="200")
    oom = "[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory."
    logs, gpu, sched = running()
    logs += other.progress(0, 120)
    gpu += other.telemetry(0, 120)
    sched.append(other.start())
    for job, root in ((JOB, 13), (other, 7)):
        peers = [r for r in job.ranks if r != root]
        logs += job.rank_logs(41.0, NCCL_ABORT, ranks=peers) * 2
        logs += job.rank_logs(41.5, oom, ranks=[root])
    sched += [JOB.end(50, "FAILED", 1), other.end(50, "FAILED", 1)]
    found = detect(120, sorted(logs, key=lambda row: row["time"]), gpu, sched)
    assert sorted((d.job_id, d.kind, d.ranks) for d in found) == [
        ("100", "crash", (13,)),
        ("200", "crash", (7,)),
    ]
    for crash in found:
        assert "CUDA out of memory" in crash.summary
        assert crash.evidence["evidence"] == 2 * 31 + 1


def test_state_is_freed_when_jobs_end() -> None:
    detector = CrashDetector()
    detector.update(batch("scheduler", [JOB.start()]))
    latest = GpuLatestParser().parse(batch("gpu", JOB.telemetry(0, 3)))
    assert latest is not None
    detector.update(latest)
    signs = SignatureParser().parse(
        batch("logs", JOB.rank_logs(4, "[rank{rank}]: KeyError: 'x'", ranks=[1]))
    )
    assert signs is not None
    detector.update(signs)
    detector.update(batch("scheduler", [JOB.end(5, "COMPLETED", 0)]))
    assert detector.state_size() > 0
    detector.advance(at(3600 * 2))
    assert detector.state_size() == 0


def test_errors_after_hardware_evidence_are_its_consequence_however_late() -> None:
    # a GPU falls off the bus; the NCCL watchdog only fires 30 minutes later (pg timeout)
    logs, gpu, sched = running(2400)
    logs.append(kernel(60, "n2", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"))
    logs += JOB.rank_logs(60 + 1800, NCCL_ABORT)
    found = detect(2400, logs, gpu, [*sched, JOB.end(1870, "FAILED", 1)])
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n2",))]


def test_config_is_typed_and_validated() -> None:
    config = from_dict(CrashConfig, {"hold_s": 1, "gap_wait_s": 10.0})
    assert (config.hold_s, config.gap_wait_s) == (1.0, 10.0)
    with pytest.raises(ConfigError):
        from_dict(CrashConfig, {"hold_s": -1.0})
    with pytest.raises(ConfigError):
        from_dict(CrashConfig, {"hold": 1.0})


def test_torchruns_traceback_after_a_rank_aborted_on_a_dead_peer_is_no_crash() -> None:
    # n3 dies at 60 s; rank 9 on n2 aborts on the NCCL error, and the torchrun agent of n2
    # (no rank) then prints its ChildFailedError traceback: the node failed, the job did not.
    # No rank completes a step after n3 died.
    job = Job(stopped={("n3", None): 60})
    logs = job.progress(0, 60)
    logs += job.rank_logs(64.0, NCCL_ABORT, ranks=[9])
    agent = [
        "E0207 19:37:12.500000 52731 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: -6) local_rank: 1 (pid: 52790) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ]
    logs += [log(65.0 + i * 0.01, line, node="n2") for i, line in enumerate(agent)]
    found = detect(200, logs, job.telemetry(0, 200, ["idle1"]), [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]


def test_a_death_no_signature_describes_takes_the_kind_its_first_line_reads_as() -> None:
    logs, gpu, sched = running()
    # our own wording, in no catalogue entry: a fabric error, then the worker's death
    logs += JOB.rank_logs(
        30, "[rank{rank}]: ERROR zorkfab: link down on hca 2, transport retry count exceeded", [3]
    )
    logs += JOB.rank_logs(30.5, "[rank{rank}]: zork worker killed by signal 9", [3])
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits, d.tier) for d in found] == [
        ("node_failure", (JOB.node_of(3),), "suspect")
    ]
    assert found[0].evidence["no_signature"] is True
    assert found[0].evidence["signatures"] == ["unmatched:fabric", "unmatched:general"]


@pytest.mark.parametrize(
    "announcement",
    [
        "{peer}:811:811 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.9<0>",
        # no entry reads it: the interface bound to its address says whose it is
        "{peer}: zork transport up on hsn0:10.0.0.9 (mtu 4096)",
        None,
    ],
)
def test_a_line_no_signature_describes_about_a_peers_address_blames_that_peer(
    announcement: str | None,
) -> None:
    logs, gpu, sched = running()
    peer = JOB.node_of(6)
    announced = announcement is not None
    if announcement is not None:  # a start-up line: the peer's host holds 10.0.0.9
        logs.append(log(1, announcement.format(peer=peer)))
    logs += JOB.rank_logs(
        30, "[rank{rank}]: ERROR zorkfab: transport retry count exceeded to peer 10.0.0.9", [3]
    )
    logs += JOB.rank_logs(30.5, "[rank{rank}]: zork worker killed by signal 9", [3])
    found = detect(120, logs, gpu, sched)
    # the node that printed the line (rank 3's) is never the one blamed
    blamed = (peer,) if announced else ()
    assert [(d.kind, d.culprits, d.tier) for d in found] == [("node_failure", blamed, "suspect")]


def test_a_death_no_signature_describes_reading_as_a_crash_stays_a_confirmed_crash() -> None:
    logs, gpu, sched = running()
    logs += JOB.rank_logs(30, "[rank{rank}]: zork: cannot open shard 7: ENOSPC", [3])
    logs += JOB.rank_logs(30.5, "[rank{rank}]: zork worker killed by signal 9", [3])
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits, d.tier) for d in found] == [("crash", (), "confirmed")]


@pytest.mark.parametrize(
    ("first", "after_s", "kind"),
    [
        # an end that says only that it ended, then (in the same report) what ended it
        ("zork: command terminated with exit code 137", 0.3, "node_failure"),
        # what failed seconds later follows from the end
        ("zork: command terminated with exit code 137", 5.0, "crash"),
        # an error that names nothing is no end: the report's first line keeps its reading
        ("[ERROR] zork: 2 root error(s) found", 0.3, "crash"),
    ],
)
def test_an_end_naming_nothing_takes_the_reading_of_the_report_line_that_names_it(
    first: str, after_s: float, kind: str
) -> None:
    # our wording: a launcher reports the exit code, then that its agent on a node was lost
    logs, gpu, sched = running()
    logs += JOB.rank_logs(30, "[rank{rank}]: " + first, [3])
    logs += JOB.rank_logs(
        30 + after_s, "[rank{rank}]: zorkrun has lost communication with a remote daemon", [3]
    )
    logs += JOB.rank_logs(36, "[rank{rank}]: zork worker killed by signal 9", [3])
    found = detect(120, logs, gpu, sched)
    assert [d.kind for d in found] == [kind]


@pytest.mark.parametrize(("after_s", "kind"), [(0.4, "hang"), (5.0, "crash")])
def test_an_error_its_next_line_explains_as_a_timeout_reads_as_a_hang(
    after_s: float, kind: str
) -> None:
    # our wording: a runtime's failed call, then (in the same report) the wait that ran out;
    # a timeout seconds later follows from the failure instead
    logs, gpu, sched = running()
    logs += JOB.rank_logs(30, "[rank{rank}]: [ERROR] zork call to the device api failed", [3])
    logs += JOB.rank_logs(
        30 + after_s, "[rank{rank}]: [Error]: the execution of the internal task times out", [3]
    )
    logs += JOB.rank_logs(36, "[rank{rank}]: zork worker killed by signal 9", [3])
    found = detect(120, logs, gpu, sched)
    assert [d.kind for d in found] == [kind]
