"""The node_failure detector: silent nodes, Slurm node failures and NODE_FAIL job ends."""

from __future__ import annotations

import pytest

from medic.config import ConfigError, from_dict
from medic.detectors.base import Detection
from medic.detectors.node_failure import (
    JobPower,
    NodeFailureConfig,
    NodeFailureDetector,
    failed_state,
)
from medic.ingest.replay import Delay, ReplayConfig
from medic.parse.gpu_latest import GpuLatestParser
from medic.parse.progress import ProgressParser
from medic.slurm import NODE_FAILED_STATES
from medic.testing.builders import at, batch, log
from medic.timeutil import US
from tests.detectors.scenarios import Job, detect, kernel, seconds
from tests.detectors.training import megatron_line


def scenario(job: Job, duration: int = 200) -> tuple[list[dict], list[dict], list[dict]]:
    return (
        job.progress(0, duration),
        job.telemetry(0, duration, extra_nodes=["idle1"]),
        [job.start()],
    )


def node_row(t: float, node: str, state: str, reason: str | None = None) -> dict:
    return {"time": at(t), "kind": "node", "node": node, "state": state, "reason": reason}


def test_a_node_silent_in_telemetry_and_logs_is_detected_well_before_slurm() -> None:
    job = Job(stopped={("n3", None): 60})
    logs, gpu, sched = scenario(job)
    logs = [r for r in logs if not (r["node"] == "n3" and r["time"] >= at(60))]
    logs += chatty(job, 0, 60, every=10.0)  # rank 0's training steps, until its peer died
    sched += [node_row(360, "n3", "DOWN+NOT_RESPONDING", "Not responding")]
    found = detect(400, logs, gpu + job.telemetry(200, 400), sched)
    suspect, confirmed = suspected_then_confirmed(found, "n3")
    assert 75 <= seconds(suspect.detected_at) <= 82
    assert seconds(confirmed.onset or 0) == pytest.approx(59)


def suspected_then_confirmed(found: list[Detection], node: str) -> tuple[Detection, Detection]:
    """A node's silence that only its job's quiet or its peers' stall corroborates, as a pause
    of the job's would: a suspect, confirmed ``quiet_confirm_s`` after its onset, not before
    and not long after (the silence is measured at each watermark)."""
    assert [(d.kind, d.culprits, d.tier) for d in found] == [
        ("node_failure", (node,), "suspect"),
        ("node_failure", (node,), "confirmed"),
    ]
    suspect, confirmed = found
    assert confirmed.onset == suspect.onset
    bound = NodeFailureConfig().quiet_confirm_s
    waited = seconds(confirmed.detected_at) - seconds(confirmed.onset or 0)
    assert bound <= waited <= bound + 8
    return suspect, confirmed


def chatty(job: Job, start: int, end: int, node: str = "n1", every: float = 1.0) -> list[dict]:
    """Megatron-LM step lines of rank 0 only (on ``node``), every ``every`` seconds."""
    count = round((end - start) / every)
    return [
        log(start + i * every, f"[rank0]:{megatron_line(i + 1, every * 1000)}", node=node)
        for i in range(count)
    ]


def test_an_exporter_restart_on_a_node_that_never_logs_is_not_a_failure() -> None:
    # telemetry of n3 pauses 35 s; the job (which only logs from rank 0 on n1) keeps going
    job = Job()
    gpu = [
        r
        for r in job.telemetry(0, 200, extra_nodes=["idle1"])
        if not (r["node"] == "n3" and at(60) <= r["time"] < at(95))
    ]
    assert detect(200, chatty(job, 0, 200), gpu, [job.start()]) == []


def test_a_dead_node_whose_job_only_went_quiet_waits_for_a_long_silence() -> None:
    # A job's steps stop for a hang, a checkpoint or its start-up as well: only the silence's
    # length (or its peers' complaints, or their stalled GPUs) confirms a node of it died.
    job = Job(stopped={("n3", None): 60})
    logs = chatty(job, 0, 61)
    found = detect(300, logs, job.telemetry(0, 300, ["idle1"]), [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert 235 <= seconds(found[0].detected_at) <= 250
    assert "the silence lasts" in found[0].summary


def test_peer_errors_confirm_a_silent_node_at_once() -> None:
    job = Job(stopped={("n3", None): 60})
    rare = chatty(job, 0, 61, every=15.0)
    # hiyouga/LlamaFactory#6849: a peer's NCCL error names no node, but confirms the silence
    errors = rare + job.rank_logs(
        65.0,
        "[rank{rank}]:[E207 ProcessGroupNCCL.cpp:1895] Process group watchdog thread terminated "
        "with exception: NCCL error: remote process exited or there was a network error",
        ranks=[0],
    )
    found = detect(200, errors, job.telemetry(0, 200, ["idle1"]), [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert 78 <= seconds(found[0].detected_at) <= 81


def test_aborts_on_a_stall_older_than_the_silence_do_not_confirm_a_node_died() -> None:
    # The job hung at 60 s (its steps stop, its GPUs spin); NCCL's watchdog times the collective
    # out ten minutes on and every rank aborts, n3's first, as n3's exporter restarts. The
    # peers' aborts complain of the stall they timed, which began long before n3 went quiet.
    job = Job()
    job.gpu_fields = {**power(job, 600.0, 0, 61), **power(job, 230.0, 61, 720)}
    timeout = (
        "[rank{rank}]:[E1204 10:10:02.1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9120, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out."
    )
    down = (
        "[rank{rank}]:[E1204 10:10:02.2 ProcessGroupNCCL.cpp:698] [Rank {rank}] To avoid data "
        "inconsistency, we are taking the entire process down."
    )
    on_n3, others = range(16, 24), [*range(16), *range(24, 32)]
    logs = chatty(job, 0, 61, every=10.0)
    for ranks, t in ((on_n3, 660.0), (others, 663.0)):
        logs += job.rank_logs(t, timeout, ranks) + job.rank_logs(t + 0.5, down, ranks)
    gpu = [
        r
        for r in job.telemetry(0, 720, ["idle1"])
        if not (r["node"] == "n3" and at(661) <= r["time"] < at(700))
    ]
    found = detect(720, logs, gpu, [job.start()])
    assert [d for d in found if d.kind == "node_failure" and d.confirmed] == []
    # the same aborts of a stall that began as n3 went silent complain of its death
    job = Job(stopped={("n3", None): 661})
    job.gpu_fields = {**power(job, 600.0, 0, 661), **power(job, 230.0, 661, 720)}
    logs = chatty(job, 0, 661, every=10.0)
    logs += job.rank_logs(690.0, timeout.replace("600041", "28950"), others)
    logs += job.rank_logs(690.5, down, others)
    found = detect(720, logs, job.telemetry(0, 720, ["idle1"]), [job.start()])
    failed = [d for d in found if d.kind == "node_failure" and d.confirmed]
    assert [d.culprits for d in failed] == [("n3",)] and "losing a peer" in failed[0].summary


def power(job: Job, watts: float, start: int, end: int) -> dict[tuple[str, int, int], dict]:
    return {
        (node, gpu, second): {"power_w": watts}
        for node in job.nodes
        for gpu in range(job.gpus)
        for second in range(start, end)
    }


def test_a_dead_node_is_confirmed_when_the_other_gpus_of_its_job_stall() -> None:
    # the job logs once a minute; its GPUs draw 600 W, then 230 W spinning in NCCL
    job = Job(stopped={("n3", None): 60})
    job.gpu_fields = {**power(job, 600.0, 0, 61), **power(job, 230.0, 61, 200)}
    logs = chatty(job, 0, 61, every=60.0)
    found = detect(200, logs, job.telemetry(0, 200, ["idle1"]), [job.start()])
    suspect, confirmed = suspected_then_confirmed(found, "n3")
    assert 78 <= seconds(suspect.detected_at) <= 81
    assert "stalled" in confirmed.summary


def test_a_node_seen_waiting_with_its_job_before_its_exporter_restarts_is_no_dead_node() -> None:
    # A rank hangs at 60 s: every GPU of the job, n3's too, spins at 230 W in the collective
    # that waits for it. n3's exporter restarts at 90 s and is back at 170 s; the job prints
    # nothing (hung). n3 was seen alive in the wait: its peers did not stall on its death.
    job = Job()
    job.gpu_fields = {**power(job, 600.0, 0, 60), **power(job, 230.0, 60, 300)}
    logs = chatty(job, 0, 60, every=10.0)
    assert detect(300, logs, without_n3(job, 90, 170), [job.start()]) == []
    # n3 dying at 90 s while the job works is a dead node: the others stall from then on.
    job.gpu_fields = {**power(job, 600.0, 0, 90), **power(job, 230.0, 90, 300)}
    job.stopped = {("n3", None): 90}
    found = detect(
        300, chatty(job, 0, 90, every=10.0), job.telemetry(0, 300, ["idle1"]), [job.start()]
    )
    assert "stalled" in suspected_then_confirmed(found, "n3")[1].summary


def test_a_node_last_heard_with_its_gpus_off_work_while_its_peers_wait_was_alive() -> None:
    # Rank 0 (on n3) prints a step a second, then writes its first checkpoint from 60 s to
    # 120 s: n3's GPUs idle (60 W, 0%) while the others spin in the barrier (230 W, 95%).
    # n3's exporter restarts at 63 s and is back at 110 s. The job never paused before, so
    # nothing bounds the pause, but n3 was heard alive in it, its GPUs off work.
    job = Job()
    idle = {
        (node, gpu, second): {"power_w": 60.0, "util": 0.0} if node == "n3" else {}
        for node in job.nodes
        for gpu in range(job.gpus)
        for second in range(60, 120)
    }
    job.gpu_fields = {
        **power(job, 600.0, 0, 300),
        **{k: {"power_w": 230.0} for k in idle if k[0] != "n3"},
        **{k: v for k, v in idle.items() if v},
    }
    logs = chatty(job, 0, 60, node="n3") + [
        log(t, f"[rank0]:{megatron_line(61 + i, 1000)}", node="n3")
        for i, t in enumerate(range(120, 300))
    ]
    assert detect(300, logs, without_n3(job, 63, 110), [job.start()]) == []
    # n3 dying at 63 s with its GPUs at work is a dead node: its peers stall from then on.
    job.gpu_fields = {**power(job, 600.0, 0, 63), **power(job, 230.0, 63, 300)}
    found = detect(300, chatty(job, 0, 63, node="n3"), without_n3(job, 63, 300), [job.start()])
    suspected_then_confirmed(found, "n3")


def test_a_writer_heard_in_its_save_is_measured_by_the_work_before_the_save() -> None:
    # Two nodes scraped every 30 s; the job trains (600 W a GPU) until its last step at 60 s,
    # then rank 0 (a GPU 0) writes while every other GPU spins in the barrier (230 W), and
    # node a's last scrape comes at 150 s: all the minute before it was the save. Measured by
    # the power before the job's last step, a's last sample shows rank 0 off work.
    power = JobPower(keep_us=300 * US)
    parser = GpuLatestParser()
    for second in range(0, 181, 30):
        rows = []
        for node in ("a", "b"):
            if node == "a" and second > 150:
                continue
            for gpu in range(8):
                saving = second > 60
                writer = saving and (node, gpu) == ("a", 0)
                watts = 60.0 if writer else 230.0 if saving else 600.0
                rows.append(
                    {
                        "time": at(second),
                        "node": node,
                        "gpu": gpu,
                        "job_id": "7",
                        "power_w": watts,
                        "util": 0.0 if writer else 95.0,
                    }
                )
        latest = parser.parse(batch("gpu", rows))
        assert latest is not None
        power.observe(latest.frame)
    assert not power.idle_when_heard("7", "a", at(150), 0.6, 80.0)
    assert power.idle_when_heard("7", "a", at(150), 0.6, 80.0, worked_until=at(60))
    # a node last heard at work is no writer, whenever the job stepped last
    assert not power.idle_when_heard("7", "a", at(60), 0.6, 80.0, worked_until=at(60))


def without_n3(job: Job, start: int, end: int) -> list[dict]:
    """The job's telemetry (and an idle node's) over 300 s, none from n3 in [start, end)."""
    return [
        r
        for r in job.telemetry(0, 300, extra_nodes=["idle1"])
        if not (r["node"] == "n3" and at(start) <= r["time"] < at(end))
    ]


def test_an_exporter_restart_while_the_job_works_on_is_not_a_failure() -> None:
    job = Job()
    job.gpu_fields = power(job, 600.0, 0, 300)
    gpu = without_n3(job, 60, 170)
    assert detect(300, chatty(job, 0, 300, every=60.0), gpu, [job.start()]) == []


def test_a_rank_pausing_while_its_nodes_exporter_restarts_and_peers_work_on_is_healthy() -> None:
    # Rank 0 (on n3) prints every 10 s, then pauses 50 s for an evaluation nobody announces,
    # while n3's exporter restarts; the other GPUs of the job draw full power all along.
    job = Job()
    job.gpu_fields = power(job, 600.0, 0, 300)
    gpu = without_n3(job, 62, 110)
    logs = chatty(job, 0, 60, node="n3", every=10.0) + [
        log(t, f"[rank0]:{megatron_line(7 + i, 10_000)}", node="n3")
        for i, t in enumerate(range(110, 300, 10))
    ]
    assert detect(300, logs, gpu, [job.start()]) == []
    # The same silence with the job's GPUs stalled from then on is a dead node.
    job.gpu_fields = {**power(job, 600.0, 0, 63), **power(job, 230.0, 63, 300)}
    stalled = without_n3(job, 62, 300)
    found = detect(300, chatty(job, 0, 60, node="n3", every=10.0), stalled, [job.start()])
    suspected_then_confirmed(found, "n3")


def test_a_node_silent_for_minutes_while_its_job_completes_steps_is_alive() -> None:
    # n3's exporter is down from 100 to 320 s, past the long silence, and n3 prints nothing;
    # the job completes a step every 5 s all along: each waited on n3's ranks too.
    job = Job()
    job.gpu_fields = power(job, 600.0, 0, 400)
    gpu = [
        r
        for r in job.telemetry(0, 400, ["idle1"])
        if not (r["node"] == "n3" and at(100) <= r["time"] < at(320))
    ]
    assert detect(400, chatty(job, 0, 400, every=5.0), gpu, [job.start()]) == []
    # The job pauses at 200 s (a save, announced or not), its other GPUs spinning in the wait,
    # while n3's exporter is still away: without n3's telemetry that looks like a dead n3, so
    # only the silence's length (or a peer's complaint) would confirm one.
    job.gpu_fields = {**power(job, 600.0, 0, 200), **power(job, 230.0, 200, 280)}
    job.gpu_fields |= power(job, 600.0, 280, 500)
    gpu = [
        r
        for r in job.telemetry(0, 500, ["idle1"])
        if not (r["node"] == "n3" and at(100) <= r["time"] < at(300))
    ]
    logs = chatty(job, 0, 200, every=5.0) + chatty(job, 280, 500, every=5.0)
    assert detect(500, logs, gpu, [job.start()]) == []
    # n3 dies at 200 s instead, its exporter never back: the others stall in their next
    # collective, and the silence confirms it, counted from the job's last step.
    job.gpu_fields = {**power(job, 600.0, 0, 200), **power(job, 230.0, 200, 500)}
    gpu = [
        r
        for r in job.telemetry(0, 500, ["idle1"])
        if not (r["node"] == "n3" and at(100) <= r["time"])
    ]
    found = detect(500, chatty(job, 0, 200, every=5.0), gpu, [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert 195 + 180 <= seconds(found[0].detected_at) <= 195 + 200  # from its last step
    assert "the silence lasts" in found[0].summary


def test_a_node_quiet_in_logs_but_alive_in_telemetry_is_healthy() -> None:
    job = Job()
    logs, gpu, sched = scenario(job, 900)
    logs = [r for r in logs if r["time"] < at(30)]
    assert detect(900, logs, gpu, sched) == []


def test_a_cluster_wide_telemetry_outage_is_not_a_node_failure() -> None:
    job = Job(stopped={(node, None): 60 for node in ("n1", "n2", "n3", "n4", "idle1")})
    logs, gpu, sched = scenario(job)
    assert detect(200, [r for r in logs if r["time"] < at(60)], gpu, sched) == []


@pytest.mark.parametrize("state", ["IDLE+NOT_RESPONDING", "DOWN*", "MIXED+FAIL", "down"])
def test_slurm_failing_a_node_of_a_running_job_is_reported_at_once(state: str) -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    found = detect(200, logs, gpu, [*sched, node_row(90, "n2", state, "Not responding")])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n2",))]
    assert seconds(found[0].detected_at) == pytest.approx(90, abs=0.5)
    assert "Not responding" in found[0].summary


@pytest.mark.parametrize("state", ["MIXED+DRAIN", "DRAINING", "DRAINED", "IDLE", "ALLOCATED"])
def test_admin_drains_and_healthy_states_are_not_failures(state: str) -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    assert detect(200, logs, gpu, [*sched, node_row(90, "n2", state, "admin: firmware")]) == []


def test_slurm_failing_an_idle_node_concerns_no_job() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    assert detect(200, logs, gpu, [*sched, node_row(90, "idle1", "DOWN", "Not responding")]) == []


def test_a_node_fail_job_end_blames_the_node_that_went_silent() -> None:
    job = Job(stopped={("n4", None): 60})
    logs, gpu, sched = scenario(job)
    logs = [r for r in logs if r["time"] < at(60)]
    found = detect(200, logs, gpu, [*sched, job.end(66, "NODE_FAIL")])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n4",))]
    assert seconds(found[0].detected_at) == pytest.approx(66, abs=0.5)


def test_srun_naming_the_failed_node_is_enough() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    # nebius/soperator#854
    logs.append(log(120, "srun: error: Node failure on n1", node="n2"))
    found = detect(200, logs, gpu, sched)
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n1",))]


def test_silence_of_a_node_whose_job_completed_is_not_a_failure() -> None:
    job = Job(stopped={("n3", None): 60})
    logs, gpu, sched = scenario(job)
    logs = [r for r in logs if r["time"] < at(60)]
    assert detect(200, logs, gpu, [*sched, job.end(59.5, "COMPLETED", 0)]) == []


def test_node_state_flags_are_parsed_as_slurm_prints_them() -> None:
    assert failed_state("IDLE+NOT_RESPONDING", NODE_FAILED_STATES) == "NOT_RESPONDING"
    assert failed_state("down*", NODE_FAILED_STATES) == "DOWN"
    assert failed_state("MIXED+DRAIN", NODE_FAILED_STATES) is None


def test_state_is_bounded_and_freed() -> None:
    job = Job()
    detector = NodeFailureDetector()
    detector.update(batch("scheduler", [job.start()]))
    detector.update(batch("gpu", job.telemetry(0, 5)))
    detector.update(batch("logs", job.progress(0, 5)))
    # a phase announced by a job that never trained
    saving = "[rank0]: saving checkpoint at iteration     121 to /ckpt in torch format"
    progress = ProgressParser().parse(batch("logs", [log(5, saving, job_id="7")]))
    assert progress is not None
    detector.update(progress)
    assert detector.phases == {"7": at(5)}
    detector.update(batch("scheduler", [job.end(6, "FAILED", 1)]))
    detector.advance(at(4 * 3600))
    assert detector.state_size() == 0


def test_an_exporter_restart_during_a_checkpoint_save_is_not_a_failure() -> None:
    # the job logs once a minute; at 61 s it saves a checkpoint (GPUs idle at 90 W) while the
    # exporter of n3 restarts for 40 s: power fell, but nothing spins waiting for a peer
    job = Job()
    job.gpu_fields = {
        **power(job, 600.0, 0, 61),
        **{
            (node, gpu, second): {"power_w": 90.0, "util": 0.0}
            for node in job.nodes
            for gpu in range(job.gpus)
            for second in range(61, 200)
        },
    }
    gpu = [
        r
        for r in job.telemetry(0, 200, ["idle1"])
        if not (r["node"] == "n3" and at(62) <= r["time"] < at(102))
    ]
    assert detect(200, chatty(job, 0, 200, every=60.0), gpu, [job.start()]) == []


def test_a_burst_of_lines_does_not_make_a_node_that_pauses_look_chatty() -> None:
    # start-up chatter: a line every 19 s, a burst of warnings, then 65 s to the first step;
    # the exporter restarts for 37 s in that pause
    job = Job()
    times = [0.0, 19.0, 38.0, 39.0, 40.0, 41.0, 42.0, 59.0, 78.0, 143.0, 153.0, 163.0]
    logs = [log(t, "[rank0]: starting", node="n3") for t in times]
    gpu = [
        r
        for r in job.telemetry(0, 200, ["idle1"])
        if not (r["node"] == "n3" and at(84) <= r["time"] < at(121))
    ]
    assert detect(200, logs, gpu, [job.start()]) == []


def test_a_job_that_logs_every_few_minutes_does_not_confirm_an_exporter_gap() -> None:
    # rank 0 prints every 190 s; the exporter of n3 is away for 165 s in between
    job = Job()
    gpu = [
        r
        for r in job.telemetry(0, 700, extra_nodes=["idle1"])
        if not (r["node"] == "n3" and at(400) <= r["time"] < at(565))
    ]
    assert detect(700, chatty(job, 0, 700, every=190.0), gpu, [job.start()]) == []


def test_two_lines_then_an_exporter_restart_on_the_printing_node_is_not_a_failure() -> None:
    # rank 0 on n3 prints a step, then its save 44 s later, and nothing for minutes (it prints
    # every few minutes); the exporter of n3 restarts for 66 s: two lines are no rhythm
    job = Job()
    logs = [
        log(10, f"[rank0]:{megatron_line(1, 6000.0)}", node="n3"),
        log(54, "[rank0]: successfully saved checkpoint from iteration 1", node="n3"),
    ]
    gpu = [
        r
        for r in job.telemetry(0, 300, extra_nodes=["idle1"])
        if not (r["node"] == "n3" and at(130) <= r["time"] < at(196))
    ]
    found = detect(300, logs, gpu, [job.start()])
    assert [d for d in found if d.kind == "node_failure"] == []


def test_peers_that_worked_on_after_a_node_went_silent_were_not_waiting_on_it() -> None:
    # the exporter of n3 stops at 61 s; the job's GPUs work on at 600 W for 30 s, then spin
    # at 230 W while rank 0 on n3 saves: a dead node would have blocked them at once
    job = Job()
    job.gpu_fields = {**power(job, 600.0, 0, 91), **power(job, 230.0, 91, 300)}
    gpu = [
        r
        for r in job.telemetry(0, 300, extra_nodes=["idle1"])
        if not (r["node"] == "n3" and at(61) <= r["time"] < at(161))
    ]
    found = detect(300, chatty(job, 0, 300, every=60.0), gpu, [job.start()])
    assert [d for d in found if d.kind == "node_failure"] == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"stall_ratio": 1.5}, r"stall_ratio' must be in \(0, 1\)"),
        ({"spin_util": 120.0}, r"spin_util' must be in \[0, 100\]"),
        ({"silence_s": 30.0, "long_silence_s": 10.0}, "long_silence_s must be at least silence_s"),
        ({"quiet_confirm_s": 10.0}, "quiet_confirm_s must lie between silence_s and long_sil"),
    ],
)
def test_a_wrong_config_is_a_one_line_error(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        from_dict(NodeFailureConfig, table, "detectors.node_failure")
    assert "\n" not in str(error.value)


def test_job_power_keeps_one_mean_per_job_and_batch_in_order_across_folds() -> None:
    power = JobPower(keep_us=30 * US)
    parser = GpuLatestParser()
    for second in range(40):
        rows = [
            {"time": at(second), "node": "a", "gpu": g, "job_id": "7", "power_w": 100.0 + g}
            for g in range(2)
        ]
        rows.append({"time": at(second), "node": "b", "gpu": 0, "job_id": None, "power_w": 50.0})
        latest = parser.parse(batch("gpu", rows))
        assert latest is not None
        power.observe(latest.frame)
    assert not power.stalled("7", at(35), at(39), 0, 0.5, 0.0)
    history = power.history("7", at(0), at(40))
    assert [s.time for s in history] == [at(s) for s in range(9, 40)]
    assert {s.power for s in history} == {100.5} and len(power) == 1
    assert {(s.peak, s.nodes) for s in history} == {(101.0, frozenset({"a"}))}


def every_node_logs(job: Job, start: int, end: int, every: int = 3) -> list[dict]:
    """A line from every node every few seconds (every rank prints its progress)."""
    return [
        log(second, f"[rank{r}]: iteration {second}", node=job.node_of(r))
        for second in range(start, end, every)
        for r in range(0, len(job.ranks), job.gpus)
    ]


def test_nodes_scraped_every_30_s_with_logs_shipped_late_are_alive() -> None:
    # NVIDIA's Prometheus guide scrapes dcgm-exporter every 30 s (each node at its own phase),
    # and Fluent Bit / Vector / Promtail ship each node's lines 1-30 s after they were written:
    # a node 25 s past its last sample, whose newest line that arrived is 25 s old, is alive.
    job = Job()
    gpu = scraped_every_30_s(job, 0, 400)
    late = ReplayConfig(delays=(Delay("logs", 1.0, 30.0),))
    assert detect(400, every_node_logs(job, 0, 400), gpu, [job.start()], replay=late) == []


def test_a_dead_node_is_still_found_when_its_logs_arrived_late() -> None:
    job = Job(stopped={("n3", None): 100})
    logs = [r for r in every_node_logs(job, 0, 300) if r["node"] != "n3" or r["time"] < at(100)]
    logs += chatty(job, 0, 100, every=3.0)
    late = ReplayConfig(delays=(Delay("logs", 1.0, 30.0),))
    found = detect(300, logs, job.telemetry(0, 300, ["idle1"]), [job.start()], replay=late)
    suspect, _ = suspected_then_confirmed(found, "n3")
    assert seconds(suspect.detected_at) <= 100 + 90  # its shipping lag, then 3 spacings


def test_every_node_of_a_job_silent_at_once_is_no_single_node_failure() -> None:
    # What the nodes share (a collector, the job's telemetry relabelling) stopped; idle1 reports
    job = Job(stopped={(node, None): 60 for node in ("n1", "n2", "n3", "n4")})
    logs, gpu, sched = scenario(job)
    assert detect(200, [r for r in logs if r["time"] < at(60)], gpu, sched) == []


def test_an_exporter_restart_as_a_job_ends_its_start_up_chatter_is_not_a_failure() -> None:
    # Every rank prints NCCL's start-up lines, then the job builds its model and data for
    # minutes, printing nothing; n3's exporter restarts for 50 s in that pause. No training
    # step was printed: the job's pace is unknown, and its start-up chatter is not one.
    job = Job()
    chatter = [
        line
        for t in range(0, 21)
        for line in job.rank_logs(t, "n{rank}:2041:2041 [0] NCCL INFO Bootstrap : Using ib0")
        if not (line["node"] == "n3" and line["time"] >= at(12))
    ]
    gpu = [
        r
        for r in job.telemetry(0, 200, ["idle1"])
        if not (r["node"] == "n3" and at(20) <= r["time"] < at(70))
    ]
    assert detect(200, chatter, gpu, [job.start()]) == []


def test_an_exporter_restart_right_after_a_nodes_start_up_lines_is_not_a_failure() -> None:
    # Every rank prints start-up lines each second for 40 s; n3's exporter restarts for 90 s
    # a second after its last one, while the job builds its model and prints nothing for
    # minutes. The job has printed no training step: its start-up bursts are no cadence.
    job = Job()
    chatter = [
        line
        for t in range(0, 40)
        for line in job.rank_logs(t, "n{rank}:2041:2041 [0] NCCL INFO Using network IB")
    ]
    gpu = [
        r
        for r in job.telemetry(0, 300, ["idle1"])
        if not (r["node"] == "n3" and at(40) <= r["time"] < at(130))
    ]
    steps = [r | {"time": r["time"] + at(240) - at(0)} for r in chatty(job, 0, 60)]
    assert detect(300, chatter + steps, gpu, [job.start()]) == []


def saving(job: Job, writer: str, spinning: bool) -> tuple[list[dict], list[dict]]:
    """Megatron-LM's rank 0 steps every second, then announces a save at 120 s and writes
    for 60 s (no step lines meanwhile) while ``writer``'s exporter restarts; the other GPUs
    work on, or spin at 230 W in the barrier."""
    if spinning:
        job.gpu_fields = {**power(job, 600.0, 0, 300), **power(job, 230.0, 121, 180)}
    logs = [
        *chatty(job, 0, 120),
        log(120.2, "[rank0]: saving checkpoint at iteration     121 to /ckpt in torch format"),
        *[r | {"time": r["time"] + at(180) - at(0)} for r in chatty(job, 0, 120)],
    ]
    gpu = [
        r
        for r in job.telemetry(0, 300, ["idle1"])
        if not (r["node"] == writer and at(119) <= r["time"] < at(175))
    ]
    return logs, gpu


@pytest.mark.parametrize(("writer", "spinning"), [("n3", False), ("n1", True)])
def test_an_exporter_restart_while_the_job_saves_a_checkpoint_is_not_a_failure(
    writer: str, spinning: bool
) -> None:
    # the pause is the announced checkpoint's, even where the job pauses for the first time,
    # its writer's exporter away and the other GPUs waiting for it as they would for a dead node
    job = Job()
    logs, gpu = saving(job, writer, spinning)
    assert detect(300, logs, gpu, [job.start()]) == []


def test_without_its_announcement_a_first_save_is_a_suspect_until_it_lasts() -> None:
    # A first pause, the writer's exporter away and its peers waiting, looks like a dead node:
    # a suspect, confirmed only by a silence past ``quiet_confirm_s`` (the save ends first).
    job = Job()
    logs, gpu = saving(job, "n1", spinning=True)
    logs = [r for r in logs if "saving" not in r["message"]]
    [found] = detect(300, logs, gpu, [job.start()])
    assert (found.kind, found.culprits, found.tier) == ("node_failure", ("n1",), "suspect")
    # the node dead instead: the same silence, on, is confirmed
    logs = [r for r in logs if r["time"] < at(121)]
    gpu = [r for r in gpu if not (r["node"] == "n1" and r["time"] >= at(119))]
    suspected_then_confirmed(detect(300, logs, gpu, [job.start()]), "n1")


def test_torchruns_traceback_after_a_peers_abort_does_not_explain_that_abort() -> None:
    # n3 dies; a rank on n2 aborts on the NCCL error and its torchrun agent prints the
    # ChildFailedError traceback (the abort's consequence, not an error of the job's own)
    job = Job(stopped={("n3", None): 60})
    agent = [
        "E0101 00:01:06.120000 48213 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: -6) local_rank: 0 (pid: 48250) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ]
    logs = [
        *chatty(job, 0, 61, every=15.0),
        *job.rank_logs(
            65.0,
            "[rank{rank}]:[E101 ProcessGroupNCCL.cpp:1895] Process group watchdog thread "
            "terminated with exception: NCCL error: remote process exited or there was a "
            "network error",
            ranks=[8],
        ),
        *[log(66.0 + i * 0.01, line, node="n2") for i, line in enumerate(agent)],
    ]
    gpu = job.telemetry(0, 200, ["idle1"])
    found = detect(200, logs, gpu, [job.start()], detectors=["node_failure"])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert seconds(found[0].detected_at) <= 81
    assert "losing a peer" in found[0].summary


def scraped_every_30_s(job: Job, start: int, end: int) -> list[dict]:
    """dcgm-exporter scraped every 30 s (NVIDIA's Prometheus guide), each node at its own phase."""
    phase = {node: 7 * i for i, node in enumerate([*job.nodes, "idle1"])}
    return [
        r
        for r in job.telemetry(start, end, extra_nodes=["idle1"])
        if (r["time"] // US - phase[r["node"]]) % 30 == 0
    ]


def test_nodes_with_one_sample_each_are_not_overdue_before_any_scrape_interval_is_known() -> None:
    # The first scrape of each node lands 0-28 s into the replay; 21 s after n2's only sample
    # nothing yet says how often nodes report, whatever the job's GPUs draw.
    job = Job()
    job.gpu_fields = {**power(job, 600.0, 0, 8), **power(job, 230.0, 8, 120)}
    found = detect(
        120, chatty(job, 0, 120, every=5.0), scraped_every_30_s(job, 0, 120), [job.start()]
    )
    assert found == []


def test_a_node_dead_after_its_first_scrape_is_found_once_the_others_show_the_interval() -> None:
    # Every rank prints; n3 dies right after its first scrape (at 14 s), and the job's steps
    # stop with it. It is overdue once the other nodes' second scrapes show the 30 s interval:
    # 30 s after its sample, then 20 s.
    job = Job(stopped={("n3", None): 15})
    logs = [r for r in every_node_logs(job, 0, 200) if r["node"] != "n3" or r["time"] < at(15)]
    logs += chatty(job, 0, 15, every=3.0)
    found = detect(200, logs, scraped_every_30_s(job, 0, 200), [job.start()])
    suspect, _ = suspected_then_confirmed(found, "n3")
    assert 14 + 30 + 20 <= seconds(suspect.detected_at) <= 14 + 30 + 20 + 7


def test_kernel_context_events_of_the_failed_node_are_attached_to_its_failure() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs += [
        kernel(70.0, "n2", "nvme nvme0: controller is down; will reset: CSTS=0xffffffff"),
        kernel(71.0, "n1", "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:7711]"),
    ]
    found = detect(200, logs, gpu, [*sched, node_row(90, "n2", "DOWN*", "Not responding")])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n2",))]
    assert "nvme_controller_reset" in found[0].evidence["signatures"]
    assert "cpu_soft_lockup" not in found[0].evidence["signatures"]


def test_peers_waiting_on_rank_0_at_work_while_a_nodes_scrape_fails_are_not_stalled() -> None:
    # Scraped every 30 s (n1 at 0, 30, ..., n3 at 14, 44, ...). Rank 0 (n1, GPU 0) evaluates
    # from 100 s to 150 s, unannounced, at 400 W while every other GPU spins at 230 W in the
    # next collective; n3's scrape at 104 s fails. Only n1's scrape at 120 s shows rank 0 at
    # work: the peers wait on it, alive, not on n3.
    job = Job()
    spin = {**power(job, 600.0, 0, 100), **power(job, 230.0, 100, 150)}
    job.gpu_fields = {
        **spin,
        **power(job, 600.0, 150, 300),
        **{("n1", 0, t): {"power_w": 400.0} for t in range(100, 150)},
    }
    gpu = [r for r in scraped_every_30_s(job, 0, 300) if r["node"] != "n3" or r["time"] != at(104)]
    logs = chatty(job, 0, 100, every=10.0) + chatty(job, 150, 300, every=10.0)
    assert detect(300, logs, gpu, [job.start()]) == []
    # Rank 0 spinning with the others, and n3 gone from 75 s: a dead node.
    job.gpu_fields = {**spin, **power(job, 230.0, 150, 300)}
    job.stopped = {("n3", None): 75}
    logs = chatty(job, 0, 100, every=10.0)
    found = detect(300, logs, scraped_every_30_s(job, 0, 300), [job.start()])
    _, confirmed = suspected_then_confirmed(found, "n3")
    assert "stalled" in confirmed.summary


def test_a_pause_the_job_took_before_while_a_nodes_exporter_restarts_is_not_a_failure() -> None:
    # Rank 0 (n1) prints a step every 5 s. Its data loader stalls from 100 to 160 s, every
    # other GPU spinning at 230 W in the next collective; at 240 s it stalls again, and n1's
    # exporter restarts from 240 to 290 s. A dead node looks the same for as long as the job
    # has paused before; the exporter comes back first.
    job = Job()
    stall = {**power(job, 230.0, 100, 160), **power(job, 230.0, 240, 290)}
    job.gpu_fields = {**power(job, 600.0, 0, 400), **stall}
    logs = chatty(job, 0, 100, every=5.0) + chatty(job, 160, 240, every=5.0)
    logs += chatty(job, 290, 400, every=5.0)
    gpu = [
        r
        for r in job.telemetry(0, 400, ["idle1"])
        if not (r["node"] == "n1" and at(240) <= r["time"] < at(290))
    ]
    assert detect(400, logs, gpu, [job.start()]) == []
    # n3 dead at 240 s instead: confirmed once the job's pause is twice its longest (60 s)
    job.stopped = {("n3", None): 240}
    job.gpu_fields = {**power(job, 600.0, 0, 400), **stall, **power(job, 230.0, 290, 400)}
    logs = chatty(job, 0, 100, every=5.0) + chatty(job, 160, 240, every=5.0)
    found = detect(400, logs, job.telemetry(0, 400, ["idle1"]), [job.start()])
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n3",))]
    assert 240 + 2 * 60 <= seconds(found[0].detected_at) <= 240 + 2 * 60 + 10
    assert "stalled" in found[0].summary


def test_a_first_pause_a_little_longer_than_the_jobs_steps_is_not_a_failure() -> None:
    # Rank 0 (n1) prints a step every 15 s; after the one at 135 s it evaluates for 28 s,
    # unannounced, the other GPUs spinning at 230 W, while n1's exporter restarts. The job has
    # paused no longer than a step before: less than twice that is still a pause.
    job = Job()
    job.gpu_fields = {**power(job, 600.0, 0, 300), **power(job, 230.0, 136, 163)}
    logs = chatty(job, 0, 150, every=15.0) + chatty(job, 163, 300, every=15.0)
    gpu = [
        r
        for r in job.telemetry(0, 300, ["idle1"])
        if not (r["node"] == "n1" and at(133) <= r["time"] < at(180))
    ]
    assert detect(300, logs, gpu, [job.start()]) == []


def test_job_power_forgets_jobs_gone_quiet_and_samples_older_than_it_keeps() -> None:
    power = JobPower(keep_us=30 * US)
    parser = GpuLatestParser()
    for second in range(40):
        rows = [{"time": at(second), "node": "a", "gpu": 0, "job_id": "7", "power_w": 100.0}]
        if second < 10:
            rows.append({"time": at(second), "node": "b", "gpu": 0, "job_id": "8", "power_w": 9.0})
        latest = parser.parse(batch("gpu", rows))
        assert latest is not None
        power.observe(latest.frame)
    power.forget_before(at(20))
    assert len(power) == 1 and power.history("8", at(0), at(40)) == []
    assert [s.time for s in power.history("7", at(0), at(40))] == [at(s) for s in range(9, 40)]
