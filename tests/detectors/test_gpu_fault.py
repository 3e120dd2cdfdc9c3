"""The gpu_fault detector: hardware evidence against a GPU, reported at once, blaming its node."""

from __future__ import annotations

import pytest

from medic.detectors.gpu_fault import GpuFaultDetector
from medic.parse.gpu_latest import GpuLatestParser
from medic.testing.builders import at, batch, log
from medic.timeutil import US
from tests.detectors.scenarios import Job, detect, kernel, seconds

# formats of leptonai/gpud#46 and NVIDIA/NVSentinel#155, our own values
XID_79 = "NVRM: Xid (PCI:0000:5d:00): 79, GPU has fallen off the bus"
XID_GSP = (
    "NVRM: Xid (PCI:0000:cb:00): 119, pid=402211, name=python3, Timeout after 6s of waiting "
    "for RPC response from GPU5 GSP! Expected function 10 (FREE) (0x5c000021 0x0)."
)
XID_CTXSW = (
    "NVRM: Xid (PCI:0000:cb:00): 109, pid={pid}, name=pt_main_thread, Ch 00000011, "
    "errorString CTX SWITCH TIMEOUT, Info 0x3c041"
)


def scenario(job: Job, duration: int = 120) -> tuple[list[dict], list[dict], list[dict]]:
    return (
        job.progress(0, duration),
        job.telemetry(0, duration, extra_nodes=["idle1"]),
        [job.start()],
    )


def test_a_fatal_xid_in_the_kernel_log_blames_its_node_at_once() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs.append(kernel(50.3, "n3", XID_GSP))
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n3",), "100")]
    assert seconds(found[0].detected_at) == pytest.approx(50.3, abs=0.5)
    assert "Xid 119 (GSP_RPC_TIMEOUT)" in found[0].summary


def test_an_application_level_xid_is_hardware_only_when_jobs_keep_raising_it() -> None:
    job = Job(nodes=("n3", "n4"))
    logs, gpu, sched = scenario(job, duration=60)
    logs.append(kernel(30.0, "n3", XID_CTXSW.format(pid=5001)))
    logs.append(kernel(31.0, "n3", XID_CTXSW.format(pid=5001)))
    # the job's workers restarted (torchrun) raise it again: the same code, the same bug
    logs.append(kernel(45.0, "n3", XID_CTXSW.format(pid=6120)))
    sched.append(job.end(50.0, "FAILED", 1))
    assert detect(120, logs, gpu, sched, detectors=("gpu_fault",)) == []
    # another job placed on the GPU raises it too: the GPU, whatever runs on it
    other = Job(nodes=("n3", "n4"), job_id="200")
    logs += [kernel(112.0, "n3", XID_CTXSW.format(pid=7300))]
    sched.append(other.start(60.0))
    found = detect(120, logs, gpu + other.telemetry(60, 120), sched, detectors=("gpu_fault",))
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n3",), "200")]
    assert seconds(found[0].detected_at) == pytest.approx(112.0, abs=0.5)


def test_the_pci_address_is_mapped_to_the_gpu_that_telemetry_shows_the_xid_on() -> None:
    # a row remap recorded (Xid 63) in both the kernel log and telemetry teaches the mapping;
    # the double-bit ECC error later is reported by the kernel only
    job = Job(gpu_fields={("n2", 5, 20): {"xid": 63}})
    logs, gpu, sched = scenario(job)
    logs.append(kernel(20.4, "n2", "NVRM: Xid (PCI:0000:44:00): 63, pid=5127, Row Remapper"))
    logs.append(kernel(60.2, "n2", "NVRM: Xid (PCI:0000:44:00): 48, pid=5127, DBE"))
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n2",))]
    assert "Xid 48 (GPU_ECC_DBE) at n2 GPU 5" in found[0].summary


@pytest.mark.parametrize(
    "line",
    [
        # row remapping recorded, excessive corrected errors: NVIDIA says ignore
        "NVRM: Xid (PCI:0000:2a:00): 63, pid=5127, Row Remapper: New row marked for remapping, "
        "reset gpu to activate.",
        "NVRM: Xid (PCI:0000:2a:00): 92, pid=5127, excessive SBE interrupts",
        # an application fault (NVIDIA: restart the app), format of leptonai/gpud#46
        "NVRM: Xid (PCI:0000:4c:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
        "Exception on (GPC 2, TPC 5, SM 1): Illegal Instruction Parameter",
        # NVLink5 warning, format of leptonai/gpud#1160
        "NVRM: Xid (PCI:0000:19:00): 144, SAW_MVB Nonfatal XC0 i0 Link 3 (0x00000002 "
        "0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
    ],
)
def test_informational_and_application_xids_do_not_fire(line: str) -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs.append(kernel(50, "n2", line))
    assert detect(120, logs, gpu, sched) == []


def test_an_xid_on_an_idle_node_concerns_no_job() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs.append(kernel(50, "idle1", XID_79))
    assert detect(120, logs, gpu, sched) == []


def test_a_rise_of_uncorrectable_ecc_is_a_gpu_fault_and_corrected_ecc_is_not() -> None:
    corrected = {("n1", g, s): {"ecc_sbe": s} for g in range(8) for s in range(120)}
    job = Job(gpu_fields={**corrected, **{("n4", 2, s): {"ecc_dbe": 1} for s in range(70, 120)}})
    logs, gpu, sched = scenario(job)
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n4",))]
    assert seconds(found[0].detected_at) == pytest.approx(70, abs=0.5)
    assert "n4 GPU 2" in found[0].summary


def test_an_nvlink_error_burst_is_a_fault_and_a_trickle_is_not() -> None:
    trickle = {("n1", 0, s): {"nvlink_errors": s // 10} for s in range(120)}
    burst = {("n3", 6, s): {"nvlink_errors": 5000} for s in range(90, 120)}
    logs, gpu, sched = scenario(Job(gpu_fields=trickle))
    assert detect(120, logs, gpu, sched) == []
    logs, gpu, sched = scenario(Job(gpu_fields={**trickle, **burst}))
    assert [(d.kind, d.culprits) for d in detect(120, logs, gpu, sched)] == [("gpu_fault", ("n3",))]
    # a link degrading: one error a second from t=30 s on, 50 within the window by t=80 s
    climb = {("n2", 1, s): {"nvlink_errors": max(0, s - 30)} for s in range(120)}
    logs, gpu, sched = scenario(Job(gpu_fields={**trickle, **climb}))
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n2",))]
    assert seconds(found[0].detected_at) == pytest.approx(80, abs=0.5)


def test_a_link_that_bursts_again_under_the_next_job_is_reported_again() -> None:
    # The count stays at 5000 after the first burst: the second job's burst is the rise from there.
    counts = {("n3", 6, s): {"nvlink_errors": 5000 if s < 150 else 5060} for s in range(90, 200)}
    first, second = Job(job_id="100"), Job(job_id="200")
    gpu = [
        *first.telemetry(0, 100, extra_nodes=["idle1"]),
        *Job(job_id="200", gpu_fields=counts).telemetry(100, 200),
    ]
    for row in gpu:
        row.update(counts.get((row["node"], row["gpu"], round(seconds(row["time"]))), {}))
    sched = [first.start(), first.end(99.5, "FAILED", 1), second.start(100.5)]
    found = detect(200, [], gpu, sched, detectors=("gpu_fault",))
    assert [(d.job_id, d.culprits) for d in found] == [("100", ("n3",)), ("200", ("n3",))]
    assert seconds(found[1].detected_at) == pytest.approx(150, abs=0.5)


def test_a_gpu_whose_telemetry_vanishes_while_its_node_reports_is_a_fault() -> None:
    job = Job(stopped={("n2", 3): 40})
    logs, gpu, sched = scenario(job)
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n2",))]
    assert 48 <= seconds(found[0].detected_at) <= 51
    assert seconds(found[0].onset or 0) == pytest.approx(39)


def test_a_node_whose_exporter_stops_while_it_logs_is_not_a_fault() -> None:
    job = Job(stopped={("n2", None): 40})
    logs, gpu, sched = scenario(job)
    logs += job.progress(40, 120, every=2)
    assert detect(120, logs, gpu, sched) == []


def test_a_gpu_that_leaves_with_its_job_is_not_a_fault() -> None:
    job = Job(stopped={("n2", 3): 60})
    logs, gpu, sched = scenario(job)
    assert detect(120, logs, gpu, [*sched, job.end(59.5, "COMPLETED", 0)]) == []


def test_state_is_bounded_and_freed() -> None:
    job = Job()
    detector = GpuFaultDetector()
    detector.update(batch("scheduler", [job.start()]))
    detector.update(batch("gpu", job.telemetry(0, 5)))
    assert detector.state_size() > 0
    detector.update(batch("scheduler", [job.end(6, "FAILED", 1)]))
    detector.advance(at(4 * 3600))
    assert detector.state_size() == 0


def test_counters_are_compared_per_gpu_whatever_order_the_batches_list_them_in() -> None:
    ecc = {("n4", 2, s): {"ecc_dbe": 1} for s in range(70, 120)}
    logs, gpu, sched = scenario(Job(gpu_fields=ecc))
    # Every other second lists the GPUs in reverse.
    reordered = sorted(gpu, key=lambda r: (r["time"], (-1) ** (r["time"] // US) * r["gpu"]))
    for rows in (gpu, reordered):
        found = detect(120, logs, rows, sched)
        assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n4",))]
        assert seconds(found[0].detected_at) == pytest.approx(70, abs=0.5)


def test_a_node_met_after_another_was_pruned_starts_its_counters_afresh() -> None:
    detector, parser = GpuFaultDetector(), GpuLatestParser()

    def report(t: float, node: str, ecc: int) -> list:
        row = {"time": at(t), "node": node, "gpu": 0, "job_id": "7", "ecc_dbe": ecc}
        latest = parser.parse(batch("gpu", [row]))
        assert latest is not None
        return detector.update(latest) + detector.advance(at(t) + 1)

    assert report(0, "a", 5) == []
    assert detector.advance(at(4000)) == [] and detector.liveness.prunes == 1
    assert report(4001, "b", 5) == []  # b is given the id a had
    found = report(4002, "b", 6)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("b",))]


def test_counters_of_a_gpu_with_a_garbled_index_are_still_compared() -> None:
    detector, parser = GpuFaultDetector(), GpuLatestParser()
    found = []
    for t, ecc in ((0, 1), (1, 1), (2, 2)):
        row = {"time": at(t), "node": "a", "gpu": 9000, "job_id": "7", "ecc_dbe": ecc}
        latest = parser.parse(batch("gpu", [row, {**row, "gpu": 0, "ecc_dbe": 0}]))
        assert latest is not None
        found += detector.update(latest)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("a",))]


SOFT_LOCKUP = "watchdog: BUG: soft lockup - CPU#12 stuck for 26s! [pt_main_thread:40117]"
NVME_RESET = "nvme nvme1: I/O tag 14 (300e) opcode 0x1 (I/O Cmd) QID 9 timeout, reset controller"


def test_kernel_context_events_alone_are_no_fault() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs += [kernel(40.0, "n3", SOFT_LOCKUP), kernel(41.0, "n3", NVME_RESET)]
    assert detect(120, logs, gpu, sched) == []


def test_context_events_of_the_faulty_node_are_attached_to_its_fault() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs += [
        # the node announcing its address at start-up: no event of it
        log(1.0, "n3:811:811 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.3<0>"),
        log(1.0, "n3:811:811 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.3<0>"),
        kernel(40.0, "n3", SOFT_LOCKUP),  # the faulty node, before its fault: attached
        kernel(41.0, "n2", NVME_RESET),  # another node: not attached
        kernel(50.3, "n3", XID_GSP),
    ]
    found = detect(120, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("gpu_fault", ("n3",))]
    assert found[0].evidence["signatures"] == ["cpu_soft_lockup", "xid"]
    assert found[0].evidence["nodes"] == ["n3"]
