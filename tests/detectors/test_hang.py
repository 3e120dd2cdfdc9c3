from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from medic.config import ConfigError, from_dict
from medic.detectors.base import Detection
from medic.detectors.hang import HangConfig, HangDetector, _by_job
from medic.detectors.hang_policy import report_tier
from medic.detectors.telemetry import Window
from medic.ingest.replay import Delay
from medic.testing.builders import at, log
from medic.timeutil import US
from tests.detectors.training import COMPUTE, EVAL, IDLE, SPIN, Job, constant, megatron_line, run


def suspected(found: list[Detection]) -> Detection:
    """The first of a hang's detections when nothing but silence and waiting GPUs shows it: a
    suspect, then the same hang confirmed, with the suspect's onset, once the silence passed
    the job's conservative bound."""
    suspect, confirmed = found
    assert (suspect.tier, confirmed.tier) == ("suspect", "confirmed")
    assert confirmed.onset == suspect.onset and confirmed.detected_at > suspect.detected_at
    return suspect


def healthy_until(t: float, **job: Any) -> Job:
    return Job(**job).start().steps(10, t).telemetry(0, t, constant(COMPUTE))


def silence_s(job: Job, detected_at: int) -> float:
    return (detected_at - job.logs[-1]["time"]) / US


def test_gpus_spinning_in_a_wait_fire_within_a_minute_and_blame_no_node() -> None:
    job = healthy_until(400).telemetry(400, 700, constant(SPIN))
    found = suspected(run(HangDetector(), [job], 700))
    assert found.kind == "hang" and found.job_id == "100"
    assert found.culprits == ()
    assert 45 <= silence_s(job, found.detected_at) <= 60
    assert "no node at fault" in found.summary
    assert 0.8 <= found.score < 0.85  # the GPUs corroborate the silence at its threshold


def test_one_gpu_idle_while_the_others_spin_names_the_stuck_rank_and_no_node() -> None:
    # A rank stuck in host code (a dead NFS mount, a Python deadlock) leaves its GPU idle
    # while its peers wait in the collective: nothing against its node, so no node is named.
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n3", 2) else SPIN

    job = healthy_until(400).telemetry(400, 700, stuck)
    found = suspected(run(HangDetector(), [job], 700))
    assert (found.kind, found.culprits) == ("hang", ())
    # Past a data-loader stall's length, as the GPUs showed it (from the first telemetry
    # window in which the rank's GPU was idle, 400-410 s).
    assert 90 <= (found.detected_at - at(410)) / US <= 100
    assert "n3 GPU 2 went idle while the others wait" in found.summary
    assert "no node at fault" in found.summary


def test_when_every_rank_of_the_node_prints_the_stuck_rank_is_named() -> None:
    job = healthy_until(400)
    for rank in range(8, 12):  # n3's ranks print their steps too (the n-th on its n-th GPU)
        job.logs.append(log(399, megatron_line(job.step, 2000.0), "n3", "100", rank=rank))

    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n3", 2) else SPIN

    job.telemetry(400, 700, stuck)
    job.logs.sort(key=lambda r: r["time"])
    found = suspected(run(HangDetector(), [job], 700))
    assert (found.culprits, found.ranks) == ((), (10,))


def test_a_gpu_that_stopped_without_reporting_itself_idle_names_its_node() -> None:
    # No kernels run, yet NVML does not report the GPU-idle reason and the clocks stay up:
    # something holds the GPU itself.
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        held = {"util": 0.0, "power_w": 92.0, "sm_clock_mhz": 1980.0, "throttle_reasons": 0}
        return held if (node, gpu) == ("n3", 2) else SPIN

    job = healthy_until(400).telemetry(400, 700, stuck)
    (found,) = run(HangDetector(), [job], 700)
    assert found.culprits == ("n3",)
    assert "looks stuck" in found.summary


def test_telemetry_every_15_s_still_shows_the_idle_rank() -> None:
    # Each GPU sampled every 15 s (dcgm-exporter's interval), GPUs out of phase: a 10 s window
    # holds two thirds of them, yet the idle one is still seen and the silence is not taken
    # for a deadlock (every GPU spinning) at 45 s.
    def stalled(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n2", 1) else SPIN

    job = healthy_until(400).telemetry(400, 700, stalled)
    job.gpu = [r for r in job.gpu if (r["time"] // US + 3 * r["gpu"] + len(r["node"])) % 15 == 0]
    found = suspected(run(HangDetector(), [job], 700))
    assert found.evidence["gpus"] == "rank stopped"
    assert silence_s(job, found.detected_at) >= 90


def test_a_data_loader_stall_of_a_minute_is_healthy() -> None:
    # One rank waits on its input pipeline (its GPU idle, saying so); the others spin in the
    # next collective until it joins them.
    def stalled(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n2", 1) else SPIN

    job = healthy_until(400).telemetry(400, 462, stalled)
    job.steps(462, 900).telemetry(462, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900) == []


def test_a_hardware_error_in_the_kernel_log_names_the_node() -> None:
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n3", 2) else SPIN

    job = healthy_until(400).telemetry(400, 700, stuck)
    job.say(420, "NVRM: Xid (PCI:0000:c3:00): 119, pid=4242, name=python, Timeout", "n3", "kernel")
    (found,) = run(HangDetector(), [job], 700)
    assert found.culprits == ("n3",)
    assert "kernel logged" in found.summary


@pytest.mark.parametrize("last", ["xid", "gpu_fallen_off_bus"])
def test_of_two_kernel_errors_logged_in_the_same_microsecond_the_later_line_is_named(
    last: str,
) -> None:
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n3", 2) else SPIN

    lines = {
        "xid": "NVRM: Xid (PCI:0000:c3:00): 79, pid=4242, name=python, GPU has fallen off the bus.",
        "gpu_fallen_off_bus": "NVRM: GPU at PCI:0000:c3:00: GPU has fallen off the bus.",
    }
    job = healthy_until(400).telemetry(400, 700, stuck)
    for signature in sorted(lines, key=lambda name: name == last):
        job.say(420, lines[signature], "n3", "kernel")
    (found,) = run(HangDetector(), [job], 700)
    assert found.summary.endswith(f"its kernel logged {last}")


def test_a_gpu_pegged_at_idle_power_while_the_others_spin_names_its_node() -> None:
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"power_w": 75.0} if (node, gpu) == ("n1", 0) else SPIN

    job = healthy_until(400).telemetry(400, 700, stuck)
    (found,) = run(HangDetector(), [job], 700)
    assert found.culprits == ("n1",)


def test_a_gpu_stuck_half_way_between_two_printed_steps_is_timed_from_the_last_step() -> None:
    # A job printing every 60 s trains unprinted between its lines; its GPUs at work until the
    # hang do not put the next step off, so the silence runs from the last step, not from the
    # end of that work.
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"power_w": 75.0} if (node, gpu) == ("n1", 0) else SPIN

    job = Job().start().steps(10, 1200, every=60.0)
    last = (job.logs[-1]["time"] - at(0)) / US
    job.telemetry(0, last + 30, constant(COMPUTE)).telemetry(last + 30, last + 400, stuck)
    (found,) = run(HangDetector(), [job], last + 400)
    assert 1.5 * 60 <= silence_s(job, found.detected_at) <= 1.5 * 63 + 2
    assert found.culprits == ("n1",)


def test_a_node_whose_telemetry_stops_is_a_node_failure() -> None:
    job = healthy_until(400)
    job.telemetry(400, 700, lambda t, node, gpu: SPIN)
    job.gpu = [row for row in job.gpu if row["node"] != "n4" or row["time"] < at(400)]
    (found,) = run(HangDetector(), [job], 700)
    assert (found.kind, found.culprits) == ("node_failure", ("n4",))
    assert "telemetry stopped" in found.summary


def test_a_node_whose_telemetry_stops_within_the_jobs_longest_pause_is_not_yet_a_failure() -> None:
    # The job paused 150 s before (an unannounced save, the others spinning): a node's exporter
    # restarting during its next such pause looks the same until the pause is twice as long.
    job = healthy_until(400).telemetry(400, 550, writer_saves)
    job.steps(550, 800).telemetry(550, 800, constant(COMPUTE))
    job.telemetry(800, 1200, constant(SPIN))
    job.gpu = [row for row in job.gpu if row["node"] != "n4" or row["time"] < at(800)]
    found = [d for d in run(HangDetector(), [job], 1200) if d.confirmed]
    assert [(d.kind, d.culprits) for d in found] == [("node_failure", ("n4",))]
    assert silence_s(job, found[0].detected_at) > 2 * 150


def test_a_node_scraped_every_minute_is_not_stopped_between_its_scrapes() -> None:
    # dcgm-exporter scraped every minute, the nodes' scrapes spread over it: a node missing
    # from the last half minute of windows is due later, not stopped.
    job = Job().start().steps(10, 400)
    job.telemetry(0, 400, constant(COMPUTE), every=60)
    job.telemetry(400, 900, constant(SPIN), every=60)
    offsets = {node: 15 * i for i, node in enumerate(job.nodes)}
    for row in job.gpu:
        row["time"] += offsets[row["node"]] * US
    found = run(HangDetector(), [job], 900)
    assert found and all(d.kind == "hang" and d.culprits == () for d in found)
    # ... while one that stops reporting is blamed once it is overdue
    job.gpu = [row for row in job.gpu if row["node"] != "n2" or row["time"] < at(400)]
    found = run(HangDetector(), [job], 900)
    assert [(d.kind, d.culprits) for d in found if d.confirmed] == [("node_failure", ("n2",))]


def test_gpus_scraped_every_minute_keep_their_values_until_their_next_scrape() -> None:
    # carry_s (35 s) is raised to the cluster's spacing and half a window: the stuck GPU,
    # sampled once a minute, is judged in every window, not one window in six
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"power_w": 75.0} if (node, gpu) == ("n1", 0) else SPIN

    job = Job().start().steps(10, 400)
    job.telemetry(0, 400, constant(COMPUTE), every=60).telemetry(400, 1200, stuck, every=60)
    offsets = {node: 15 * i for i, node in enumerate(job.nodes)}
    for row in job.gpu:
        row["time"] += offsets[row["node"]] * US
    detector = HangDetector()
    (found,) = run(detector, [job], 1200)
    assert detector.carrying.carry_s == 65.0
    assert (found.kind, found.tier, found.culprits) == ("hang", "confirmed", ("n1",))
    assert silence_s(job, found.detected_at) < 80


@pytest.mark.parametrize(
    ("stopped", "why"),
    [
        (360.0, "its ranks finished steps after it"),
        (425.0, "its own GPUs were seen waiting with the others"),
        (500.0, "its peers waited before it stopped"),
    ],
)
def test_a_node_whose_telemetry_stopped_apart_from_the_hang_is_no_culprit(
    stopped: float, why: str
) -> None:
    # An exporter restart or a missed scrape: a node alive without reporting is no evidence
    # that confirms a hang.
    job = healthy_until(400)
    job.telemetry(400, 700, constant(SPIN))
    job.gpu = [row for row in job.gpu if row["node"] != "n4" or row["time"] < at(stopped)]
    found = run(HangDetector(), [job], 700)
    suspected(found)  # silence alone, confirmed only past the bound
    assert [(d.kind, d.culprits) for d in found] == [("hang", ())] * 2, why
    assert not any("telemetry stopped" in d.summary for d in found)


def test_hardware_counters_rising_during_the_silence_name_their_node() -> None:
    def replays(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"pcie_replay": int(50 * (t - 400)) if (node, gpu) == ("n2", 1) else 0}

    job = healthy_until(400).telemetry(400, 700, replays)
    (found,) = run(HangDetector(), [job], 700)
    assert found.culprits == ("n2",)


def test_a_counter_rise_long_after_the_job_stopped_names_no_node() -> None:
    # What stopped the job shows in the first samples after it stopped: a corrected PCIe replay
    # on another node 90 s into the hang (before it is confirmed) did not stop it.
    def replays(t: float, node: str, gpu: int) -> dict[str, Any]:
        late = (node, gpu) == ("n2", 1) and t >= 490
        return SPIN | {"pcie_replay": int(50 * (t - 490)) if late else 0}

    job = healthy_until(400).telemetry(400, 700, replays)
    found = run(HangDetector(), [job], 700)
    assert silence_s(job, found[-1].detected_at) > 95  # confirmed after the rise began
    assert [d.culprits for d in found] == [()] * len(found)


def test_without_telemetry_the_silence_floor_applies() -> None:
    job = Job().start().steps(10, 400)
    found = suspected(run(HangDetector(), [job], 700))
    assert 60 <= silence_s(job, found.detected_at) <= 62
    assert found.culprits == ()
    assert 0.5 <= found.score < 0.55  # the silence alone, just past its threshold


def test_a_silence_whose_gpus_cannot_be_seen_is_confirmed_only_twice_as_late() -> None:
    # The job's GPUs reported until 30 s into its save, then nothing (a scrape gap through a
    # long save that would have shown its writers idle): silence alone confirms at twice the
    # floor.
    job = healthy_until(400).telemetry(400, 430, writer_saves)
    other = Job(nodes=("m1", "m2"), job_id="200").start().steps(10, 1000)
    other.telemetry(0, 1000, constant(COMPUTE))
    found = [d for d in run(HangDetector(), [job, other], 1000) if d.job_id == job.job_id]
    suspect = suspected(found)
    assert suspect.evidence["gpus"] == "no telemetry"
    assert 2 * 180 <= silence_s(job, found[1].detected_at) <= 2 * 180 + 2
    # A job never seen (no exporter on its nodes) has only its silence: the floor applies.
    unseen = Job().start().steps(10, 400)
    confirmed = [d for d in run(HangDetector(), [unseen, other], 1000) if d.confirmed]
    assert 180 <= silence_s(unseen, confirmed[0].detected_at) <= 182


def test_a_job_whose_lines_and_gpus_vanish_together_is_not_confirmed_hung() -> None:
    # Its steps and every GPU of it stop reporting at once, the scheduler's end not seen: a
    # job that ended (a hung job's processes hold their GPUs, which go on reporting it).
    job = Job().start().steps(10, 400).telemetry(0, 400, constant(COMPUTE))
    other = Job(nodes=("m1", "m2"), job_id="200").start().steps(10, 1200)
    other.telemetry(0, 1200, constant(COMPUTE))
    found = run(HangDetector(), [job, other], 1200)
    assert not [d for d in found if d.job_id == job.job_id and d.confirmed]


def test_long_step_gaps_scale_the_allowance() -> None:
    job = Job().start().steps(10, 1200, every=30.0)
    found = suspected(run(HangDetector(), [job], 1500))
    # p99 of ~30 s gaps -> three of them before it is improbable.
    assert 90 <= silence_s(job, found.detected_at) <= 100


def test_a_cold_model_waits_for_the_cold_silence() -> None:
    job = Job().start().steps(10, 16)
    (found,) = run(HangDetector(), [job], 700)
    assert 600 <= silence_s(job, found.detected_at) <= 602


def test_a_cold_model_waits_for_the_step_time_a_line_states() -> None:
    # one line saying its step took 1300 s: silence is measured against three of those
    job = Job().start()
    job.say(10, megatron_line(1, 1_300_000.0))
    assert run(HangDetector(), [job], 3800) == []
    (found,) = run(HangDetector(), [job], 4100)
    assert 3900 <= silence_s(job, found.detected_at) <= 3902


def test_gpus_still_working_without_printing_hold_the_alarm() -> None:
    job = healthy_until(400).telemetry(400, 2300, constant(COMPUTE))
    (found,) = run(HangDetector(), [job], 2300)
    assert 1800 <= silence_s(job, found.detected_at) <= 1802


STALL = (
    "W zork/stall_inspector.cc:107] One or more tensors were submitted to be reduced, gathered or"
    " broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60"
    " seconds."
)
"""Horovod's stall inspector's warning (our path), every minute while a stall lasts."""


def test_a_stall_warning_of_a_minute_is_a_suspect_until_the_stall_outlasts_the_bound() -> None:
    # GPUs at work through the silence (rank 0 saving, the others' tensors waiting): no silence
    # alarm, only the job's own warnings
    def warned(*times: float) -> Job:
        job = healthy_until(400).telemetry(400, 900, constant(COMPUTE))
        job.logs.extend(log(t, STALL, node="n1", job_id="100") for t in times)
        return job

    resumed = warned(470).steps(520, 900)
    [suspect] = run(HangDetector(), [resumed], 900)
    assert (suspect.kind, suspect.tier, suspect.onset) == ("hang", "suspect", at(410))
    assert suspect.score < 0.5 and "suspect: a warning" in suspect.summary
    # a stall warned of for three minutes (the confirm floor; a job paused no longer than 10 s)
    found = run(HangDetector(), [warned(470, 530, 590, 650)], 900)
    assert [(d.tier, d.onset, d.detected_at) for d in found] == [
        ("suspect", at(410), at(470)),
        ("confirmed", at(410), at(590)),
    ]
    # ... as in a job that prints no step medic reads and whose GPUs are not seen
    silent = Job().start()  # nor any telemetry
    silent.logs.extend(log(t, STALL, node="n1", job_id="100") for t in (470, 530, 590, 650))
    found = run(HangDetector(), [silent], 900)
    assert [(d.tier, d.onset, d.detected_at) for d in found] == [
        ("suspect", at(410), at(470)),
        ("confirmed", at(410), at(590)),
    ]
    # a collective's timeout (past the floor) confirms at once
    timeout = STALL.replace("more than 60", "more than 300")
    job = healthy_until(400).telemetry(400, 900, constant(COMPUTE))
    job.logs.append(log(710, timeout, node="n1", job_id="100"))
    [confirmed] = run(HangDetector(), [job], 900)
    assert (confirmed.tier, confirmed.onset, confirmed.score) == ("confirmed", at(410), 1.0)


def test_nccl_ras_declaring_a_process_dead_is_a_suspect_naming_its_node() -> None:
    # our line, in the shape of NCCL's RAS monitor: a process unreachable for a minute, which
    # one that exited normally also is to a peer still running, so no action on it alone
    dead = "[2026-05-02 03:11:07] PEER_DEAD: Process 7001 on node n3 managing GPU 2 "
    job = healthy_until(400).telemetry(400, 900, constant(COMPUTE))
    job.logs.append(log(470, dead, node="n1", job_id="100"))
    [suspect] = run(HangDetector(), [job.steps(520, 900)], 900)
    assert (suspect.kind, suspect.tier, suspect.onset, suspect.culprits) == (
        "hang",
        "suspect",
        at(410),
        (),
    )
    assert "process(es) reported stuck or dead on n3" in suspect.summary
    assert suspect.evidence["hosts"] == ["n3"]

    # the job stays silent, its other GPUs waiting: a process lost, confirmed at once
    def lost(at_s: float, *lines: str) -> list[Detection]:
        job = healthy_until(400).telemetry(400, 900, constant(SPIN))
        job.logs.extend(log(at_s, line, node="n1", job_id="100") for line in lines)
        return run(HangDetector(), [job], 900)

    suspect, confirmed = lost(470, dead)
    assert (suspect.tier, confirmed.tier) == ("suspect", "confirmed")
    assert confirmed.onset == suspect.onset and confirmed.culprits == ()
    assert at(470) <= confirmed.detected_at <= at(472)  # the next check after the line
    assert "confirmed: NCCL's RAS declared 1 process(es) dead on n3 while" in confirmed.summary
    # most of the job declared dead is what a normal exit leaves to a rank still at work
    everyone = [dead.replace("7001", str(pid)) for pid in range(7001, 7040)]
    assert [d.tier for d in lost(470, *everyone)] == ["suspect", "confirmed"]
    assert lost(470, *everyone)[-1].detected_at == at(578)  # the silence's bound, 180 s
    # GPUs at work (rank 0 saving the last checkpoint) hear of a dead peer: no evidence
    job = healthy_until(400).telemetry(400, 900, constant(COMPUTE))
    job.logs.append(log(470, dead, node="n1", job_id="100"))
    assert [d.tier for d in run(HangDetector(), [job], 900)] == ["suspect"]


def test_a_reported_stall_is_judged_against_the_jobs_own_pauses() -> None:
    config = HangConfig()
    assert report_tier(config, 600 * US, 0, 0).tier == "confirmed"  # a collective's timeout
    assert report_tier(config, None, 0, 0).tier == "confirmed"  # a report of no length
    # a job that paused 200 s before: its warnings must span twice that
    short = report_tier(config, 60 * US, 300 * US, 200 * US)
    assert (short.tier, short.bound_us) == ("suspect", 400 * US)
    assert report_tier(config, 60 * US, 400 * US, 200 * US).tier == "confirmed"


def test_an_evaluation_that_prints_nothing_is_healthy() -> None:
    job = healthy_until(400).telemetry(400, 580, constant(EVAL)).steps(580, 900)
    job.telemetry(580, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900) == []


def test_the_next_step_after_a_quiet_evaluation_is_due_from_its_end() -> None:
    # No healthy baseline yet (telemetry starts with the evaluation): when the GPUs go back to
    # training, the step that follows 25 s later is on time.
    job = Job().start().steps(10, 400).telemetry(400, 580, constant(EVAL))
    job.telemetry(580, 900, constant(COMPUTE)).steps(605, 900)
    assert run(HangDetector(), [job], 900) == []


def test_a_six_minute_checkpoint_that_prints_nothing_is_healthy() -> None:
    job = healthy_until(400).telemetry(400, 760, constant(IDLE)).steps(760, 1000)
    job.telemetry(760, 1000, constant(COMPUTE))
    assert run(HangDetector(), [job], 1000) == []


def test_a_six_minute_checkpoint_is_healthy() -> None:
    job = healthy_until(400)
    job.say(401, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(400, 761, constant(IDLE))
    job.say(761, "  successfully saved checkpoint from iteration     200 to /ckpt")
    job.steps(762, 1000).telemetry(761, 1000, constant(COMPUTE))
    assert run(HangDetector(), [job], 1000) == []


def test_an_evaluation_phase_is_healthy() -> None:
    job = Job().start().steps(10, 400)
    job.say(401, "Evaluating on 5120 samples")
    job.say(641, " validation loss at iteration 200 | lm loss value: 2.1 | lm loss PPL: 8.2 |")
    job.steps(642, 900)
    assert run(HangDetector(), [job], 900) == []


def test_a_gpu_stuck_inside_an_evaluation_ends_its_allowance() -> None:
    # The evaluation starts at 401 s; at 430 s one GPU hangs, pegged at idle power while its
    # peers wait in the next collective. An evaluating rank computes (or idles, and says so):
    # the evaluation's allowance ends once the GPU has looked stuck for spin_hold_s.
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"power_w": 75.0} if (node, gpu) == ("n1", 0) else SPIN

    job = healthy_until(400).say(401, "Evaluating on 5120 samples")
    job.telemetry(400, 430, constant(EVAL)).telemetry(430, 1200, stuck)
    (found,) = run(HangDetector(), [job], 1200)
    assert (found.kind, found.tier, found.culprits) == ("hang", "confirmed", ("n1",))
    assert 430 + 120 <= (found.detected_at - at(0)) / US <= 430 + 150
    # Every GPU waiting in a collective (spinning) is no stuck GPU, but no rank is evaluating
    # either: the allowance lapses once every GPU has waited spin_hold_s, and the spell
    # confirms past the floor (180 s), not at the evaluation's cold allowance (600 s).
    job = healthy_until(400).say(401, "Evaluating on 5120 samples")
    job.telemetry(400, 430, constant(EVAL)).telemetry(430, 1200, constant(SPIN))
    suspect, confirmed = run(HangDetector(), [job], 1200)
    assert suspect.tier == "suspect" and confirmed.onset == suspect.onset
    assert 430 + 180 <= (confirmed.detected_at - at(0)) / US <= 430 + 195
    assert "confirmed: every GPU waiting" in confirmed.summary


def test_a_hang_inside_a_checkpoint_still_fires_after_the_allowance() -> None:
    job = Job().start().steps(10, 400)
    job.say(401, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    (found,) = run(HangDetector(), [job], 1200)
    assert 600 <= silence_s(job, found.detected_at) <= 602


def test_a_job_whose_gpus_report_no_job_or_another_one_has_ended() -> None:
    # No scheduler feed tells the end: telemetry that names jobs does (dcgm-exporter's job
    # mapping). A minute after its last step (its processes exiting), the job's GPUs idle
    # for no job, or run the next job.
    for after in (None, "101"):
        job = healthy_until(400).telemetry(400, 1200, constant(IDLE))
        job.scheduler.clear()
        for row in job.gpu:
            if row["time"] >= at(460):
                row["job_id"] = after
        assert run(HangDetector(), [job], 1200) == [], after
    # ... while a hung job's processes hold its GPUs, and telemetry that names no job says
    # nothing of where jobs run
    hung = healthy_until(400).telemetry(400, 1200, constant(IDLE))
    hung.scheduler.clear()
    assert [d.kind for d in run(HangDetector(), [hung], 1200) if d.confirmed] == ["hang"]
    for row in hung.gpu:
        row["job_id"] = None
    assert [d.kind for d in run(HangDetector(), [hung], 1200) if d.confirmed] == ["hang"]


def test_jobs_that_finish_or_are_cancelled_are_not_hangs() -> None:
    done = healthy_until(300).say(301, "[after training is done] datetime: 2026-03-01 10:05:01")
    done.telemetry(301, 500, constant(IDLE)).end(500)
    cancelled = healthy_until(300, nodes=("n5", "n6"), job_id="101")
    cancelled.say(302, "slurmstepd: error: *** JOB 101 ON n5 CANCELLED AT 2026-03-01T10:05 ***")
    cancelled.telemetry(302, 450, constant(IDLE)).end(450, "CANCELLED by 1000")
    detector = HangDetector()
    assert run(detector, [done, cancelled], 900) == []
    assert detector.watch == {} and len(detector.jobs.progress) == 0
    assert detector.state_size() == 2  # the two ended jobs' tombstones, until forget_after_s


def test_late_lines_of_an_ended_job_start_no_watch() -> None:
    job = healthy_until(300).end(301)
    job.steps(303, 304)
    detector = HangDetector()
    assert run(detector, [job], 700) == []
    assert detector.watch == {}


def test_fires_once_per_silence_and_again_after_progress_resumes() -> None:
    job = Job().start().steps(10, 400).steps(500, 800)
    found = run(HangDetector(), [job], 1000)
    assert len(found) == 2
    assert found[0].detected_at < at(500) < found[1].detected_at


def test_a_job_printing_no_progress_is_watched_through_its_gpus() -> None:
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n2", 3) else SPIN

    job = Job().start().telemetry(0, 200, constant(COMPUTE)).telemetry(200, 600, stuck)
    found = suspected(run(HangDetector(), [job], 600))
    assert found.culprits == ()
    # The first snapshot to look hung samples 240-270 s: spin_hold_s is timed from 240 s, not
    # from the full windows that begin when that snapshot's period closes (300 s).
    assert found.onset == at(240)
    assert found.detected_at == at(240 + 120)
    assert "prints no progress" in found.summary and "n2 GPU 3 went idle" in found.summary


def test_the_gpus_of_a_light_job_printing_no_progress_are_seen_spinning() -> None:
    # A small model keeps its GPUs busy 84% of the time at 375 W. Hung, they peg at 100% and
    # draw 205 W: 55% of its power, yet less than half of what its work would draw pegged.
    # Read as work, those snapshots would become its baseline within minutes.
    light = {"util": 84.0, "power_w": 375.0, "temp_c": 60.0, "sm_clock_mhz": 1980.0}
    hung = {"util": 100.0, "power_w": 205.0, "temp_c": 55.0, "sm_clock_mhz": 1980.0}
    job = Job().start().telemetry(0, 300, constant(light)).telemetry(300, 1200, constant(hung))
    found = run(HangDetector(), [job], 1200)
    assert found and "prints no progress" in found[0].summary
    assert (found[0].detected_at - at(300)) / US <= 300
    healthy = Job().start().telemetry(0, 1200, constant(light))
    assert run(HangDetector(), [healthy], 1200) == []


def test_a_save_announced_before_the_jobs_first_step_line_is_held_as_a_checkpoint() -> None:
    # A job resumed from a checkpoint saves before it prints any step (rank 0 writes for five
    # minutes while the others wait in the barrier): the open phase holds it, as it would
    # after a step; once its allowance runs out the spell is a hang.
    job = Job().start().telemetry(0, 200, constant(COMPUTE))
    job.say(201, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(200, 500, writer_saves).telemetry(500, 700, constant(COMPUTE))
    assert run(HangDetector(), [job], 700) == []
    stuck = Job().start().telemetry(0, 200, constant(COMPUTE))
    stuck.say(201, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    (found,) = run(HangDetector(), [stuck.telemetry(200, 1000, writer_saves)], 1000)
    assert found.detected_at >= at(201 + 600)


def test_a_gpu_stuck_in_a_save_before_the_jobs_first_step_line_ends_its_allowance() -> None:
    # A job resumed from a checkpoint saves before its first step line; at 230 s one GPU
    # hangs, pegged at idle power while its peers wait: no save leaves a GPU stuck, so the
    # save's cold allowance (600 s) ends once it has looked stuck for spin_hold_s, as it does
    # after a step (a job that printed no step is looked at from its first silent windows).
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"power_w": 75.0} if (node, gpu) == ("n1", 3) else SPIN

    job = Job().start().telemetry(0, 200, constant(COMPUTE))
    job.say(201, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(200, 230, writer_saves).telemetry(230, 1000, stuck)
    (found,) = run(HangDetector(), [job], 1000)
    assert (found.kind, found.tier, found.culprits) == ("hang", "confirmed", ("n1",))
    assert at(230 + 120) <= found.detected_at <= at(230 + 200) < at(201 + 600)


def test_a_save_ended_before_the_jobs_first_step_line_restarts_the_spin_clock() -> None:
    # The job's line closing the save is a sign of life: the GPUs spinning in the barrier
    # before it were the save, not a hang of a job that has printed no step yet.
    job = Job().start().telemetry(0, 200, constant(COMPUTE))
    job.say(201, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(200, 440, writer_saves)
    job.say(441, "successfully saved checkpoint from iteration     200 to /ckpt")
    job.telemetry(440, 460, writer_saves).telemetry(460, 800, constant(COMPUTE))
    assert run(HangDetector(), [job], 800) == []


def test_an_unannounced_save_before_the_first_step_line_is_held_as_a_save() -> None:
    # Rank 0 writes for four minutes while the others wait, before the job's first step line,
    # and nothing announces it: a save's allowance, as after a step; past it, a hang.
    job = Job().start().telemetry(0, 200, constant(COMPUTE)).telemetry(200, 440, writer_saves)
    job.telemetry(440, 800, constant(COMPUTE))
    assert run(HangDetector(), [job], 800) == []
    stuck = Job().start().telemetry(0, 200, constant(COMPUTE))
    (found,) = run(HangDetector(), [stuck.telemetry(200, 1000, writer_saves)], 1000)
    assert at(200 + 600) <= found.detected_at <= at(200 + 700)


def test_gpus_of_a_silent_job_idling_are_no_hang() -> None:
    job = Job().start().telemetry(0, 200, constant(COMPUTE)).telemetry(200, 900, constant(IDLE))
    assert run(HangDetector(), [job], 900) == []


def writer_saves(t: float, node: str, gpu: int) -> dict[str, Any]:
    """A synchronous save: the writer's GPU idles while it writes, every other rank waits in
    a barrier, GPUs pegged at low power (NCCL kernels busy-wait)."""
    return IDLE if (node, gpu) == ("n1", 0) else SPIN


def test_a_synchronous_checkpoint_spinning_in_a_barrier_is_healthy() -> None:
    job = healthy_until(400)
    for start in (400, 1000):
        job.say(start + 1, "Saving model checkpoint to /out/checkpoint-500")
        job.telemetry(start, start + 300, writer_saves)
        job.steps(start + 300, start + 600).telemetry(start + 300, start + 600, constant(COMPUTE))
    assert run(HangDetector(), [job], 1600) == []


def test_a_hang_inside_an_open_checkpoint_waits_for_the_cold_allowance() -> None:
    job = healthy_until(400).say(401, "Saving model checkpoint to /out/checkpoint-500")
    job.telemetry(400, 1200, writer_saves)
    (found,) = run(HangDetector(), [job], 1200)
    assert found.culprits == ()
    assert at(401 + 600) <= found.detected_at <= at(401 + 620)


def test_the_checkpoint_allowance_is_learned_from_the_jobs_own_saves() -> None:
    # The first save took 60 s; the second never ends: three of those, not the cold 600 s.
    job = healthy_until(400)
    job.say(401, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(400, 461, writer_saves)
    job.say(461, "  successfully saved checkpoint from iteration     200 to /ckpt")
    job.steps(462, 800).telemetry(461, 800, constant(COMPUTE))
    job.say(801, "saving checkpoint at iteration     400 to /ckpt in torch_dist format")
    job.telemetry(800, 1500, writer_saves)
    (found,) = run(HangDetector(), [job], 1500)
    assert at(801 + 180) <= found.detected_at <= at(801 + 200)


def test_an_unannounced_spell_of_spinning_that_ended_by_itself_is_learned() -> None:
    # A checkpoint that prints nothing, every 600 s: the first costs a false alarm (nothing
    # tells it from a hang), the next ones are within the job's learned spell allowance.
    job = healthy_until(400)
    for start in (400, 1000, 1600):
        job.telemetry(start, start + 90, writer_saves)
        job.steps(start + 90, start + 600).telemetry(start + 90, start + 600, constant(COMPUTE))
    found = run(HangDetector(), [job], 2200)
    assert [seconds for seconds in (f.detected_at for f in found) if seconds > at(1000)] == []


def test_config_is_typed_and_checked() -> None:
    config = from_dict(HangConfig, {"min_silence_s": 90, "grace_gaps": 4}, "detectors.hang")
    assert HangDetector(config).config.min_silence_s == 90.0
    with pytest.raises(ConfigError, match="gap_quantile"):
        from_dict(HangConfig, {"gap_quantile": 2.0}, "detectors.hang")


def test_a_job_printing_every_ten_minutes_is_not_hung_after_ten_minutes_of_silence() -> None:
    # one gap learned (610 s): the cold model waits three of those, not cold_silence_s
    job = Job().start().steps(10, 700, every=610.0).telemetry(0, 1240, constant(COMPUTE))
    job.telemetry(1240, 1290, constant(IDLE))
    assert run(HangDetector(), [job], 1290) == []
    (found,) = run(HangDetector(), [job.telemetry(1290, 2800, constant(IDLE))], 2800)
    assert silence_s(job, found.detected_at) >= 3 * 610


def test_a_job_that_logged_its_own_crash_is_not_hung() -> None:
    # A rank dies of an illegal memory access (the line PyTorch prints); its GPU keeps its
    # context, pegged at idle power, while the launcher tears the job down: the crash
    # detector's business, not a stuck GPU.
    def dying(t: float, node: str, gpu: int) -> dict[str, Any]:
        return {**SPIN, "power_w": 70.0} if (node, gpu) == ("n2", 5) else SPIN

    job = healthy_until(400).telemetry(400, 700, dying)
    job.logs.append(
        log(
            401,
            "[rank13]: RuntimeError: CUDA error: an illegal memory access was encountered",
            node="n2",
            job_id="100",
        )
    )
    assert run(HangDetector(), [job], 700) == []


def test_one_rank_per_node_idle_while_the_others_wait_is_a_save_not_a_hang() -> None:
    # Megatron-LM's legacy checkpoint: one writer rank per node busy on its host (its GPU idle)
    # while the other ranks wait in the barrier, for minutes, printing nothing.
    def writing(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if gpu == 0 else SPIN

    job = healthy_until(400).telemetry(400, 700, writing)
    assert run(HangDetector(), [job], 700) == []


def test_gpus_back_at_full_power_beside_a_node_still_spinning_is_a_wait_ending() -> None:
    # An unannounced barrier ends: every rank resumes, but n4's newest samples still show it
    # spinning while the others compute at full power (exporters sample at their own moments).
    # A GPU pegged at low power is stuck only while its peers wait for it. Step lines come 20 s
    # late (a log shipper's batching).
    def resuming(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN if node == "n4" else COMPUTE

    job = healthy_until(400).telemetry(400, 435, constant(SPIN)).telemetry(435, 455, resuming)
    job.steps(435, 700).telemetry(455, 700, constant(COMPUTE))
    assert run(HangDetector(), [job], 700, delays=(Delay("logs", 20.0, 20.0),)) == []


def test_ranks_back_at_work_end_the_wait_whatever_older_samples_still_show() -> None:
    # A synchronous save: n1's GPU 0 rank writes (idle) for 80 s while the others wait in the
    # barrier, then every rank resumes. Telemetry every 30 s, n1's exporter 20 s after the
    # others': for 20 s its newest samples still show the save while the others are back at
    # work, which they could not be had the wait not ended. Step lines come 30 s late.
    job = healthy_until(400).telemetry(400, 480, writer_saves)
    job.steps(480, 800).telemetry(480, 800, constant(COMPUTE))
    job.gpu = [r for r in job.gpu if (r["time"] // US - 20 * (r["node"] == "n1")) % 30 == 0]
    assert run(HangDetector(), [job], 800, delays=(Delay("logs", 30.0, 30.0),)) == []


def test_a_quiet_save_after_a_quiet_evaluation_is_timed_from_its_start() -> None:
    # Ten minutes of evaluation that print nothing (GPUs working at evaluation load), then a
    # five-minute save that prints nothing (GPUs idle): the idle allowance runs from the end of
    # the evaluation, not from the last training step.
    job = healthy_until(400).telemetry(400, 1000, constant(EVAL))
    job.telemetry(1000, 1300, constant(IDLE)).steps(1300, 1600)
    job.telemetry(1300, 1600, constant(COMPUTE))
    assert run(HangDetector(), [job], 1600) == []
    # A job that stays idle still fires once the idle allowance has run out.
    stuck = healthy_until(400).telemetry(400, 1000, constant(EVAL))
    (found,) = run(HangDetector(), [stuck.telemetry(1000, 1600, constant(IDLE))], 1600)
    assert at(1000 + 480) <= found.detected_at <= at(1000 + 500)


def rank_stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
    """A rank that is not the writer stuck in host code: its GPU idle, the others waiting."""
    return IDLE if (node, gpu) == ("n3", 2) else SPIN


def test_a_first_save_by_rank_zero_that_prints_nothing_is_not_a_hang() -> None:
    # A single-writer save (Lightning's global rank 0, the Hugging Face Trainer's process zero,
    # torch.save under `if rank == 0`) longer than a data-loader stall, announced by no line:
    # only rank 0's GPU (n1 GPU 0, the allocation's first node) is out of the wait.
    job = healthy_until(400).telemetry(400, 590, writer_saves)
    job.steps(590, 900).telemetry(590, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900, delays=(Delay("logs", 15.0, 15.0),)) == []
    # Never ending, it fires once the cold save allowance has run out.
    stuck = healthy_until(400).telemetry(400, 1200, writer_saves)
    (found,) = run(HangDetector(), [stuck], 1200)
    assert at(400 + 600) <= found.detected_at <= at(400 + 620)
    assert "n1 GPU 0 went idle while the others wait" in found.summary


def test_a_data_loader_stall_as_training_resumes_after_a_save_is_its_tail() -> None:
    # Rank 0 saves for four minutes, announced by no line; as training resumes another rank
    # waits 45 s on its input pipeline. The silence (285 s) is the save's and its tail's, as
    # an announced save's phase holds it until the next step. A rank stuck there for good
    # fires once the save's cold allowance has run out.
    job = healthy_until(400).telemetry(400, 640, writer_saves).telemetry(640, 685, rank_stuck)
    job.steps(685, 900).telemetry(685, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900) == []
    stuck = healthy_until(400).telemetry(400, 640, writer_saves).telemetry(640, 1200, rank_stuck)
    (found,) = run(HangDetector(), [stuck], 1200)
    assert at(400 + 600) <= found.detected_at <= at(400 + 620)


def test_a_first_save_by_rank_zero_of_a_job_the_scheduler_never_listed_is_not_a_hang() -> None:
    # medic started after the job (or reads no scheduler feed): rank 0's node is the first,
    # in Slurm's order, of the nodes the job's GPUs report from
    job = Job().steps(10, 400).telemetry(0, 400, constant(COMPUTE))
    job.telemetry(400, 590, writer_saves).steps(590, 900).telemetry(590, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900) == []
    stuck = Job().steps(10, 400).telemetry(0, 400, constant(COMPUTE))
    (found,) = run(HangDetector(), [stuck.telemetry(400, 1200, writer_saves)], 1200)
    assert at(400 + 600) <= found.detected_at <= at(400 + 620)


def test_the_save_allowance_is_learned_from_the_writers_earlier_saves() -> None:
    # The first save took 100 s (its step line delivered 30 s late, after the telemetry showed
    # the GPUs back at work); the second never ends: three of those, not the cold 600 s.
    job = healthy_until(400).telemetry(400, 500, writer_saves)
    job.steps(501, 800).telemetry(500, 800, constant(COMPUTE))
    job.telemetry(800, 1500, writer_saves)
    (found,) = run(HangDetector(), [job], 1500, delays=(Delay("logs", 30.0, 30.0),))
    assert at(800 + 300) <= found.detected_at <= at(800 + 320)


def test_a_save_by_rank_zero_does_not_stretch_the_hold_of_another_rank_left_idle() -> None:
    # A rank other than the writer idle while the others wait is no single-writer save: held
    # only as a data-loader stall, however long the job's saves were.
    job = healthy_until(400).telemetry(400, 530, writer_saves)
    job.steps(530, 800).telemetry(530, 800, constant(COMPUTE))
    job.telemetry(800, 1100, rank_stuck)
    found = suspected(run(HangDetector(), [job], 1100))
    assert 90 <= (found.detected_at - at(810)) / US <= 100
    assert "n3 GPU 2 went idle while the others wait" in found.summary


def test_a_glimpse_of_spinning_gpus_does_not_cut_a_cold_jobs_allowance() -> None:
    # A job printing every 65 s (DeepSpeed's steps_per_print) before its step model is trusted,
    # its input pipeline keeping the GPUs at a third of their time: a data-loader stall leaves
    # the others spinning for a window, which says nothing of a job whose rhythm is unknown.
    loading = {"util": 30.0, "power_w": 250.0, "temp_c": 50.0, "sm_clock_mhz": 1980.0}

    def stall(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if (node, gpu) == ("n2", 1) and t < 466 else SPIN

    job = Job().start().steps(10, 400, every=65.0).telemetry(0, 400, constant(COMPUTE))
    job.telemetry(400, 460, constant(loading)).telemetry(460, 470, stall)
    job.telemetry(470, 600, constant(COMPUTE)).steps(475, 600, 65.0)
    assert run(HangDetector(), [job], 600) == []


def test_a_telemetry_feed_that_stops_as_a_whole_says_nothing_of_a_saving_job() -> None:
    # The collector stops (or the replay ends) during a save: every GPU of every job goes
    # missing at once; the job keeps the save's allowance rather than losing it to "no
    # telemetry".
    job = healthy_until(400).telemetry(400, 470, writer_saves)
    assert run(HangDetector(), [job], 560) == []


def test_the_last_of_one_writer_per_node_still_writing_is_the_save() -> None:
    # Megatron-LM's legacy format writes from one rank per node; the nodes finish at different
    # times, and the last writer (not rank 0's node) keeps its GPU apart alone for minutes.
    def leaders(t: float, node: str, gpu: int) -> dict[str, Any]:
        writing = gpu == 0 and (t < 460 or node == "n3")
        return IDLE if writing else SPIN

    job = healthy_until(400).telemetry(400, 640, leaders)
    job.steps(640, 900).telemetry(640, 900, constant(COMPUTE))
    assert run(HangDetector(), [job], 900) == []


@pytest.mark.parametrize("every", [1, 30])
def test_writers_copying_in_bursts_on_several_nodes_are_a_save(every: int) -> None:
    # The same save, each writer's GPU copying its shard off in bursts (busy a quarter of the
    # time: neither idle nor at work) and sampled every second or every 30 s; the last writer
    # (not rank 0's node) alone for its last four minutes. No line announces it.
    copying = {"util": 25.0, "power_w": 150.0, "temp_c": 50.0, "sm_clock_mhz": 1980.0}

    def leaders(t: float, node: str, gpu: int) -> dict[str, Any]:
        writing = gpu == 0 and (t < 460 or node == "n3")
        return copying if writing else SPIN

    job = Job().start().steps(10, 400).telemetry(0, 400, constant(COMPUTE), every)
    job.telemetry(400, 700, leaders, every)
    job.steps(700, 900).telemetry(700, 900, constant(COMPUTE), every)
    assert run(HangDetector(), [job], 900) == []


def test_rank_zero_blocked_on_a_dead_nfs_server_is_no_save() -> None:
    # Rank 0 blocked on NFS looks like its save until its kernel says the server stopped
    # answering (the NFS client's major timeout): then it is no save, and the silence fires, a
    # suspect (a server failing over answers again) confirmed once the rank has been apart for
    # stall_silence_s (the spell began at 400 s), keeping the suspect's onset.
    job = healthy_until(400).telemetry(400, 1200, writer_saves)
    nfs = "kernel: nfs: server filer02 not responding, still trying"
    for job_id in (None, "100"):  # a collector may label a node's lines with its job
        lines = [*job.logs, log(470, nfs, "n1", job_id, source="system")]
        shipped = Job(logs=sorted(lines, key=lambda r: r["time"]), gpu=job.gpu)
        suspect, found = run(HangDetector(), [shipped.start()], 1200)
        assert suspect.tier == "suspect" and at(470) <= suspect.detected_at <= at(475)
        assert "suspect: a rank apart until 90s" in suspect.summary
        assert found.tier == "confirmed" and found.onset == suspect.onset
        assert at(490) <= found.detected_at <= at(505)
        assert "n1 GPU 0 went idle while the others wait" in found.summary


def test_a_rank_left_idle_on_a_node_blocked_on_nfs_is_not_held_as_a_data_loader_stall() -> None:
    # Its kernel reports the NFS server not responding 50 s in: the rank apart there waits on
    # storage, not on a stall of a minute, so the silence fires without the stall's hold, a
    # suspect confirmed once the rank has been apart stall_silence_s; the kernel reporting the
    # task blocked past its hung-task timeout confirms at once. The same lines on another
    # node than the idle rank's change nothing.
    nfs = "kernel: nfs: server filer02 not responding, still trying"
    hung = "kernel: INFO: task pt_main_thread:7712 blocked for more than 122 seconds."
    cases = (
        ("n3", nfs, ("suspect", 450, 455), ("confirmed", 490, 505)),
        ("n3", hung, ("confirmed", 450, 455), None),
        ("n2", nfs, ("suspect", 500, 510), ("confirmed", 570, 590)),
    )
    for node, line, first, then in cases:
        job = healthy_until(400).telemetry(400, 700, rank_stuck)
        lines = [*job.logs, log(450, line, node, None, source="system")]
        shipped = Job(logs=sorted(lines, key=lambda r: r["time"]), gpu=job.gpu)
        found = run(HangDetector(), [shipped.start()], 700)
        expected = [first, then] if then else [first]
        assert [d.tier for d in found] == [tier for tier, _, _ in expected]
        for detection, (_, low, high) in zip(found, expected, strict=True):
            assert at(low) <= detection.detected_at <= at(high)
        assert (
            found[0].culprits,
            "n3 GPU 2 went idle while the others wait" in found[0].summary,
        ) == (
            (),
            True,
        )


def test_an_xid_nvidia_says_to_ignore_during_the_silence_names_no_node() -> None:
    # Xid 63 (a row remapping recorded; NVIDIA's catalogue: IGNORE) on another node while a rank
    # is stuck in host code is no evidence against that node.
    def stuck(t: float, node: str, gpu: int) -> dict[str, Any]:
        values = rank_stuck(t, node, gpu)
        return {**values, "xid": 63} if (node, gpu, t) == ("n2", 1, 450.0) else values

    job = healthy_until(400).telemetry(400, 700, stuck)
    found = suspected(run(HangDetector(), [job], 700))
    assert (found.kind, found.culprits) == ("hang", ())
    # An Xid that says the GPU failed still names its node.
    fallen = healthy_until(400).telemetry(
        400,
        700,
        lambda t, n, g: {
            **rank_stuck(t, n, g),
            **({"xid": 79} if (n, g, t) == ("n2", 1, 450.0) else {}),
        },
    )
    (named,) = run(HangDetector(), [fallen], 700)
    assert named.culprits == ("n2",)


def test_gpus_seen_in_a_save_do_not_corroborate_the_silence_after_its_end_line() -> None:
    # A torch_dist save (every rank writes its shards, n4's ranks the slowest, the others
    # waiting in the closing collective) ends; its end line comes 30 s late (a log shipper's
    # batching) and the telemetry feed stops with it (a collector restart, the end of a
    # replay). What the GPUs showed before the line was the save, not a stuck rank after it.
    def n4_writes(t: float, node: str, gpu: int) -> dict[str, Any]:
        return IDLE if node == "n4" else SPIN

    job = healthy_until(400)
    job.say(401, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
    job.telemetry(400, 600, n4_writes)
    job.say(600, "  successfully saved checkpoint from iteration     200 to /ckpt")
    assert run(HangDetector(), [job], 620, delays=(Delay("logs", 30.0, 30.0),)) == []


def test_a_node_whose_exporter_restarts_while_a_rank_elsewhere_is_stuck_is_not_blamed() -> None:
    # A rank stuck in host code (n3 GPU 2 idle, saying so; the others spin in the collective);
    # a minute in, n4's exporter restarts and its samples stop for 100 s. The job waits on the
    # stuck rank, not on n4: a hang of that rank, no node failure.
    job = healthy_until(400).telemetry(400, 700, rank_stuck)
    job.gpu = [r for r in job.gpu if r["node"] != "n4" or not at(460) <= r["time"] < at(560)]
    found = suspected(run(HangDetector(), [job], 700))
    assert (found.kind, found.culprits) == ("hang", ())
    assert "n3 GPU 2 went idle while the others wait" in found.summary


def test_a_deadlock_inside_a_checkpoint_with_no_rank_writing_fires_before_the_allowance() -> None:
    # Every rank, writers included, spins in the wait during the save: nobody is writing (a
    # save always has writers out of the wait, and once the last joins, the collective
    # completes), so the save's cold allowance no longer holds once the GPUs have shown it for
    # spin_hold_s: from the save line on, or from when the writer (rank 0) joined the wait.
    for writer_until in (400, 450):
        job = healthy_until(400)
        job.say(401, "saving checkpoint at iteration     200 to /ckpt in torch_dist format")
        job.telemetry(400, writer_until, writer_saves).telemetry(writer_until, 1200, constant(SPIN))
        found = suspected(run(HangDetector(), [job], 1200))
        assert found.culprits == ()
        began = max(401, writer_until)
        assert at(began + 120) <= found.detected_at <= at(began + 150)


def test_an_announced_save_whose_writer_is_blocked_on_a_dead_nfs_server_is_a_hang() -> None:
    # Rank 0 writes its save to an NFS server that stops answering: the kernel's "not
    # responding" line ends the save's allowance (a hard mount retries until the server is
    # back), where the announced save alone would hold the silence for the cold 600 s.
    nfs = "kernel: nfs: server filer02 not responding, still trying"
    job = healthy_until(400).say(401, "Saving model checkpoint to /out/checkpoint-500")
    job.telemetry(400, 900, writer_saves)
    lines = [*job.logs, log(480, nfs, "n1", None, source="system")]
    shipped = Job(logs=sorted(lines, key=lambda r: r["time"]), gpu=job.gpu)
    suspect, found = run(HangDetector(), [shipped.start()], 900)
    assert suspect.tier == "suspect" and at(480) <= suspect.detected_at <= at(490)
    assert found.tier == "confirmed" and at(490) <= found.detected_at <= at(505)
    assert "n1 GPU 0 went idle while the others wait" in found.summary


def test_silence_alone_is_a_suspect_confirmed_past_the_jobs_own_bound() -> None:
    # Steps every 2 s and one pause of about 100 s, which is suspected and never confirmed
    # (the job went on by itself). The hang after it is suspected at the step model's
    # threshold and confirmed once it lasts twice the job's longest pause (above the 180 s
    # floor), keeping the suspect's onset.
    job = Job().start().steps(10, 300).steps(400, 600)
    pause, suspect, confirmed = run(HangDetector(), [job], 1200)
    assert pause.tier == "suspect" and "until 180s" in pause.summary
    assert suspect.tier == "suspect" and "suspect: silence alone until 204s" in suspect.summary
    assert 60 <= silence_s(job, suspect.detected_at) <= 62
    assert confirmed.tier == "confirmed" and confirmed.onset == suspect.onset
    assert 204 <= silence_s(job, confirmed.detected_at) <= 206
    assert "confirmed: silent past 204s" in confirmed.summary


def test_evidence_against_a_node_confirms_at_once() -> None:
    def replays(t: float, node: str, gpu: int) -> dict[str, Any]:
        return SPIN | {"pcie_replay": int(50 * (t - 400)) if (node, gpu) == ("n2", 1) else 0}

    job = healthy_until(400).telemetry(400, 700, replays)
    (found,) = run(HangDetector(), [job], 700)
    assert (found.tier, found.culprits) == ("confirmed", ("n2",))
    assert found.evidence["confirmed_by"] == ["evidence against n2"]


def test_the_confirmation_bound_is_configurable() -> None:
    job = Job().start().steps(10, 400)
    config = HangConfig(confirm_floor_s=90.0)
    suspect, confirmed = run(HangDetector(config), [job], 700)
    assert suspect.tier == "suspect"
    assert 90 <= silence_s(job, confirmed.detected_at) <= 92


def one_idle(node: str, gpu: int) -> Any:
    """GPU ``gpu`` of ``node`` idle (saying so) while every other GPU spins in the wait."""
    return lambda t, n, g: IDLE if (n, g) == (node, gpu) else SPIN


def evaluated_for_300_s() -> Job:
    """A job that evaluated for 300 s printing nothing (its GPUs at work), then trained on
    until 1000 s: silence alone confirms only past 600 s."""
    job = healthy_until(400).telemetry(400, 700, constant(EVAL))
    return job.steps(700, 1000).telemetry(700, 1000, constant(COMPUTE))


def test_a_rank_apart_past_the_floor_confirms_whatever_the_jobs_long_pauses() -> None:
    # Silence alone would confirm only past 600 s. A rank apart while its peers wait is
    # evidence once it lasts past the floor, the job having no stall of its own to say such
    # spells end by themselves.
    job = evaluated_for_300_s().telemetry(1000, 1400, one_idle("n3", 2))
    suspect, confirmed = run(HangDetector(), [job], 1400)
    assert suspect.tier == "suspect"
    assert "a rank apart until 180s, silence alone until 6" in suspect.summary
    assert confirmed.tier == "confirmed" and confirmed.onset == suspect.onset
    # Timed on the telemetry: from the first window showing the rank apart (1000-1010 s).
    assert 180 <= (confirmed.detected_at - at(1010)) / US <= 190
    assert confirmed.evidence["confirmed_by"][0].startswith("a rank apart from its waiting")


def test_a_rank_apart_no_longer_than_the_jobs_own_stalls_confirms_nothing() -> None:
    # A data-loader stall of 150 s that ended by itself: another rank apart is no evidence
    # until it lasts twice that (the job's learned allowance for such spells holds it longer).
    job = healthy_until(400).telemetry(400, 550, one_idle("n2", 1))
    job.steps(550, 900).telemetry(550, 900, constant(COMPUTE))
    job.telemetry(900, 1400, one_idle("n3", 2))
    stall, hang = run(HangDetector(), [job], 1400)
    assert stall.tier == "suspect" and stall.detected_at < at(550)
    assert hang.tier == "confirmed" and (hang.detected_at - at(910)) / US >= 300
    assert "n3 GPU 2 went idle" in hang.summary
    assert hang.evidence["confirmed_by"][0].startswith("a rank apart from its waiting")


def test_a_waiting_gpus_power_noise_does_not_restart_the_spell_of_a_rank_apart() -> None:
    # One peer's samples now and then draw a little over half the job's progressing power
    # while it waits (a spinning GPU's power is noisy about that level): no GPU went back to
    # work, so the rank apart is timed from when it stopped, not afresh from each such sample.
    def noisy(t: float, node: str, gpu: int) -> dict[str, Any]:
        if (node, gpu) == ("n3", 2):
            return IDLE
        if (node, gpu) == ("n1", 0) and int(t) % 40 < 10:
            return SPIN | {"power_w": 330.0}
        return SPIN

    job = evaluated_for_300_s().telemetry(1000, 1400, noisy)
    suspect, confirmed = run(HangDetector(), [job], 1400)
    assert suspect.tier == "suspect"
    assert 180 <= (confirmed.detected_at - at(1010)) / US <= 190
    assert confirmed.evidence["confirmed_by"][0].startswith("a rank apart from its waiting")


def spins_then_trains(job: Job, t0: float, t1: float, until: float) -> Job:
    """Every GPU spinning in the wait from ``t0`` to ``t1`` printing nothing (rank 0 evaluating
    or saving unannounced, as its peers' GPUs show it), then steps again until ``until``."""
    job.telemetry(t0, t1, constant(SPIN))
    return job.steps(t1, until).telemetry(t1, until, constant(COMPUTE))


# A job's learned spell allowance (phase_factor times its longest spell of spinning GPUs) would
# hold the silence past the bound below: held to one such spell, the tier is what decides.
SHORT_ALLOWANCE = HangConfig(phase_factor=1.0)


def test_a_recurring_all_waiting_pause_the_job_recovered_from_confirms_nothing() -> None:
    # Every GPU waited 150 s and the job went on; the next such pause lasts 250 s, past the
    # 180 s floor but within twice the job's own (300 s): suspected, never confirmed.
    job = spins_then_trains(healthy_until(400), 400, 550, 900)
    job = spins_then_trains(job, 900, 1150, 1400)
    found = run(HangDetector(SHORT_ALLOWANCE), [job], 1400)
    assert [d.tier for d in found] == ["suspect", "suspect"]
    second = found[1]
    assert at(900) < second.detected_at < at(1150)
    assert second.evidence["confirmed_by"] == []


def test_a_first_all_waiting_spell_past_the_floor_confirms_whatever_the_jobs_long_pauses() -> None:
    # Silence alone would confirm only past 600 s (the job evaluated for 300 s); every GPU in
    # the wait, with no such spell the job recovered from, is evidence past the 180 s floor.
    job = evaluated_for_300_s().telemetry(1000, 1400, constant(SPIN))
    suspect, confirmed = run(HangDetector(), [job], 1400)
    assert suspect.tier == "suspect" and "silence alone until 6" in suspect.summary
    assert confirmed.tier == "confirmed" and confirmed.onset == suspect.onset
    # Timed on the telemetry: from the first window showing every GPU waiting (1000-1010 s).
    assert 180 <= (confirmed.detected_at - at(1000)) / US <= 190
    assert confirmed.evidence["confirmed_by"][0].startswith("every GPU waiting for 18")
    assert "confirmed: every GPU waiting" in confirmed.summary


def test_an_all_waiting_spell_past_twice_the_longest_recovered_one_confirms() -> None:
    # A 150 s spell of every GPU waiting that the job recovered from, then a 300 s unprinted
    # evaluation (silence alone: 600 s). A spell of every GPU waiting that goes on is evidence
    # past twice the job's longest such spell (300 s), not before, and long before 600 s.
    job = spins_then_trains(healthy_until(400), 400, 550, 900)
    job.telemetry(900, 1200, constant(EVAL)).steps(1200, 1500).telemetry(
        1200, 1500, constant(COMPUTE)
    )
    job.telemetry(1500, 2200, constant(SPIN))
    found = run(HangDetector(SHORT_ALLOWANCE), [job], 2200)
    confirmed = found[-1]
    assert [d.tier for d in found[-2:]] == ["suspect", "confirmed"]
    # Both spells timed on the telemetry, from the first window in which every GPU waited
    # (the one after the last step's samples): 140 s learned, so past 280 s, 290 s into it.
    assert 280 <= (confirmed.detected_at - at(1510)) / US <= 290
    assert confirmed.evidence["confirmed_by"] == ["every GPU waiting for 280s, past 280s"]


def test_a_window_is_split_by_job_whatever_the_order_of_its_rows() -> None:
    gpus = pl.DataFrame(
        {
            "job_id": ["10", "10", "7", "9", "9"],
            "node": ["a", "b", "c", "d", "e"],
            "gpu": pl.Series([0, 1, 0, 0, 1], dtype=pl.Int16),
        }
    )

    def split(rows: pl.DataFrame) -> list[tuple[str, list[tuple[Any, ...]]]]:
        return [(job, part.rows()) for job, part in _by_job(Window(0, 10, rows))]

    expected = [
        ("10", [("10", "a", 0), ("10", "b", 1)]),
        ("7", [("7", "c", 0)]),
        ("9", [("9", "d", 0), ("9", "e", 1)]),
    ]
    assert split(gpus) == expected  # sorted by job, as a window comes
    assert split(gpus.reverse()) == [(job, rows[::-1]) for job, rows in expected]
    assert split(gpus.head(0)) == []
