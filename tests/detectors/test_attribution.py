"""Root-cause attribution across the evidence detectors, through the real pipeline: one
incident gives one detection per job, naming the earliest hardware-evidenced node; the
collateral complaints of peers blame nobody."""

from __future__ import annotations

from medic.detectors.attribution import Evidence, JobEvidence, root_cause
from medic.testing.builders import at
from tests.detectors.scenarios import Job, detect, kernel, seconds

# hiyouga/LlamaFactory#6849
NCCL_ABORT = (
    "[rank{rank}]:[E207 19:37:09.983600771 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID "
    "0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: NCCL "
    "error: remote process exited or there was a network error, NCCL version 2.21.5"
)
XID_79 = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"


def test_one_xid_and_a_thousand_collateral_nccl_errors_give_one_detection_naming_one_node() -> None:
    job = Job(nodes=[f"n{i:02d}" for i in range(16)], gpus=8)
    logs = job.progress(0, 120)
    logs.append(kernel(50.0, "n07", XID_79))
    # every rank complains, many times over: 128 ranks x 8 lines = 1024 collateral errors
    for repeat in range(8):
        logs += job.rank_logs(50.2 + repeat * 1.5, NCCL_ABORT)
    sched = [job.start(), job.end(70, "FAILED", 1)]
    found = detect(120, logs, job.telemetry(0, 120), sched)
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n07",), "100")]
    assert seconds(found[0].detected_at) <= 51


def test_collateral_errors_arriving_before_the_xid_do_not_steal_the_incident() -> None:
    job = Job()
    logs = job.progress(0, 120)
    logs += job.rank_logs(49.0, NCCL_ABORT)
    logs.append(kernel(50.5, "n2", XID_79))
    found = detect(120, logs, job.telemetry(0, 120), [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n2",))]


def test_a_dead_node_is_blamed_though_its_peers_crash_and_fail_the_job_first() -> None:
    job = Job(stopped={("n3", None): 60})
    logs = job.progress(0, 60)  # no rank completes a step after n3 died
    logs += job.rank_logs(62.0, NCCL_ABORT, ranks=[r for r in job.ranks if job.node_of(r) != "n3"])
    sched = [job.start(), job.end(70, "FAILED", 1)]
    found = detect(200, logs, job.telemetry(0, 200, extra_nodes=["idle1"]), sched)
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert seconds(found[0].detected_at) <= 82


def test_software_errors_blame_no_node_and_name_the_root_rank() -> None:
    job = Job()
    logs = job.progress(0, 120)
    logs += job.rank_logs(
        40.0, "[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory.", ranks=[21]
    )
    logs += job.rank_logs(40.6, NCCL_ABORT, ranks=[r for r in job.ranks if r != 21])
    found = detect(120, logs, job.telemetry(0, 120), [job.start(), job.end(45, "FAILED", 1)])
    assert [(d.kind, d.culprits, d.ranks) for d in found] == [("crash", (), (21,))]


def test_two_jobs_hit_by_one_node_each_get_one_detection() -> None:
    first, second = Job(nodes=["a1", "a2"], job_id="7"), Job(nodes=["a2", "a3"], job_id="8")
    first.gpus = second.gpus = 4
    logs = first.progress(0, 90) + second.progress(0, 90)
    logs.append(kernel(40.0, "a2", XID_79))
    gpu = first.telemetry(0, 90) + [r for r in second.telemetry(0, 90) if r["node"] == "a3"]
    found = detect(90, logs, gpu, [first.start(), second.start()])
    assert sorted((d.job_id, d.kind, d.culprits) for d in found) == [
        ("7", "gpu_fault", ("a2",)),
        ("8", "gpu_fault", ("a2",)),
    ]


def test_the_root_is_the_earliest_hardware_evidence_whatever_came_before() -> None:
    oom = Evidence(at(1), "oom", "n1", rank=3, role="root")
    collateral = Evidence(at(0.5), "nccl", "n4", rank=9, role="collateral")
    late_xid = Evidence(at(3), "xid 79", "n2", gpu=1, hardware=True)
    early_silence = Evidence(at(2), "silent", "n5", hardware=True)
    assert root_cause([oom, collateral, late_xid, early_silence]) == early_silence
    assert root_cause([collateral, oom]) == oom
    assert root_cause([collateral]) == collateral
    incident = JobEvidence("100")
    incident.add([collateral, oom])
    assert (incident.culprits(), incident.ranks()) == ((), (3,))
    incident.add([late_xid])
    assert (incident.culprits(), incident.onset) == (("n2",), at(0.5))


def test_an_incident_keeps_a_bounded_sample_of_its_evidence_and_counts_the_rest() -> None:
    incident = JobEvidence("100")
    incident.add(
        [Evidence(at(i), "nccl", "n1", rank=i, role="collateral") for i in range(1000)], 1000
    )
    incident.add([Evidence(at(2000), "xid", "n9", hardware=True)])
    assert len(incident.evidence) <= 32 and incident.count == 1001
    assert incident.culprits() == ("n9",)
    assert "1000 more signs followed" in incident.summary("GPU fault")


def test_a_software_crash_during_a_telemetry_gap_elsewhere_is_still_a_crash() -> None:
    # n4's exporter pauses for 100 s; meanwhile rank 5 runs out of memory and its peers abort
    job = Job()
    gpu = [
        r
        for r in job.telemetry(0, 300, extra_nodes=["idle1"])
        if not (r["node"] == "n4" and at(50) <= r["time"] < at(150))
    ]
    logs = job.progress(0, 60)
    logs += job.rank_logs(60.0, "[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory.", [5])
    logs += job.rank_logs(60.5, NCCL_ABORT, ranks=[r for r in job.ranks if r != 5])
    found = detect(300, logs, gpu, [job.start(), job.end(70, "FAILED", 1)])
    assert [(d.kind, d.culprits, d.ranks) for d in found] == [("crash", (), (5,))]


def test_an_incidents_score_grows_with_its_evidence() -> None:
    incident = JobEvidence("7")
    incident.add([Evidence(at(10), "job FAILED with exit code 1", role="context")])
    alone = incident.confidence()
    incident.add([Evidence(at(9), "Traceback", rank=3, role="root")])
    own_error = incident.confidence()
    incident.add([Evidence(at(8), "Xid 79", node="n2", role="root", hardware=True)])
    hardware = incident.confidence()
    incident.add([Evidence(at(11), "NCCL timeout", rank=5, role="collateral")], total=40)
    assert 0.0 < alone < own_error < hardware < incident.confidence() < 1.0
    assert round(alone, 6) == 0.3 and round(hardware, 6) == round(1 - 0.7 * 0.3 * 0.2, 6)


def test_a_line_that_opens_a_report_gives_way_to_the_line_that_names_the_failure() -> None:
    opener = Evidence(time=1, what="'Traceback (most recent call last):'", rank=0)
    failure = Evidence(time=2, what="'ValueError: bad shape'", rank=0)
    assert root_cause([opener, failure]) == failure
    assert root_cause([opener]) == opener
    incident = JobEvidence("7", [opener, failure], count=2)
    assert incident.summary("Job 7 crashed") == (
        "Job 7 crashed: 'ValueError: bad shape' at rank 0; 1 more sign followed"
    )


def test_a_failure_read_by_its_words_names_the_rank_that_printed_it_first() -> None:
    # no entry matched: the lines are context; the first one's printer is the rank named
    incident = JobEvidence("100")
    incident.add(
        [
            Evidence(at(1), "Abort(88) (rank 21 in comm 0): Fatal error", rank=21, role="context"),
            Evidence(at(1.2), "zork: other error", rank=4, role="context"),
            Evidence(at(1.3), "MPIDI_OFI_handle_cq_error: OFI poll failed", role="context"),
        ]
    )
    assert incident.ranks() == (21,)
