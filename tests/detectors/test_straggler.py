from __future__ import annotations

from typing import Any

import pytest

from medic.config import ConfigError, from_dict
from medic.detectors.straggler import StragglerConfig, StragglerDetector
from medic.testing.builders import at, log
from medic.timeutil import US
from tests.detectors.scenarios import kernel
from tests.detectors.training import (
    COMPUTE,
    GPUS_PER_NODE,
    NODES,
    GpuState,
    Job,
    constant,
    megatron_line,
    run,
)

ONSET = 600.0
HOT = {"sm_clock_mhz": 1350.0, "temp_c": 89.0, "power_w": 480.0, "throttle_reasons": 0x40}


def one_gpu(node: str, gpu: int, changed: dict[str, Any], since: float = ONSET) -> GpuState:
    def state(t: float, n: str, g: int) -> dict[str, Any]:
        return COMPUTE | changed if (n, g) == (node, gpu) and t >= since else COMPUTE

    return state


def job_slowing(slowdown: float, telemetry: GpuState, until: float = 1000.0, **job: Any) -> Job:
    return (
        Job(**job)
        .start()
        .steps(10, ONSET)
        .steps(ONSET, until, slowdown=slowdown)
        .telemetry(0, until, telemetry)
    )


def test_a_throttled_gpu_that_slows_the_job_is_found_within_minutes() -> None:
    job = job_slowing(1.4, one_gpu("n2", 3, HOT))
    (found,) = run(StragglerDetector(), [job], 1000)
    assert found.kind == "straggler"
    assert found.culprits == ("n2",)
    assert (found.detected_at - at(ONSET)) / US <= 180
    assert 1.35 <= found.evidence["slowdown"] <= 1.45 and "n2 GPU 3" in found.summary


def test_pcie_replays_on_one_gpu_name_its_node() -> None:
    def replaying(t: float, node: str, gpu: int) -> dict[str, Any]:
        rising = (node, gpu) == ("n4", 0) and t >= ONSET
        return COMPUTE | {"pcie_replay": int(40 * (t - ONSET)) if rising else 0}

    (found,) = run(StragglerDetector(), [job_slowing(1.3, replaying)], 1000)
    assert found.culprits == ("n4",)
    assert "PCIe" in found.summary


def test_a_uniformly_slow_job_is_not_a_straggler() -> None:
    def everyone_slower(t: float, node: str, gpu: int) -> dict[str, Any]:
        return COMPUTE | ({"sm_clock_mhz": 1500.0, "power_w": 500.0} if t >= ONSET else {})

    assert run(StragglerDetector(), [job_slowing(1.4, everyone_slower)], 1000) == []


def test_a_gpu_that_always_differed_is_learned_and_not_blamed() -> None:
    def hot_slot(t: float, node: str, gpu: int) -> dict[str, Any]:
        everyone = {"sm_clock_mhz": 1500.0} if t >= ONSET else {}
        return COMPUTE | everyone | ({"temp_c": 80.0} if (node, gpu) == ("n1", 0) else {})

    assert run(StragglerDetector(), [job_slowing(1.4, hot_slot)], 1000) == []


def test_an_odd_gpu_without_a_slowdown_is_not_a_straggler() -> None:
    assert run(StragglerDetector(), [job_slowing(1.0, one_gpu("n2", 3, HOT))], 1000) == []


def test_a_small_slowdown_within_the_ratio_is_ignored() -> None:
    assert run(StragglerDetector(), [job_slowing(1.05, one_gpu("n2", 3, HOT))], 1000) == []


def test_too_few_gpus_make_no_peer_group() -> None:
    job = job_slowing(1.4, one_gpu("n1", 1, HOT), nodes=("n1",))
    config = from_dict(StragglerConfig, {"min_gpus": 5})
    assert run(StragglerDetector(config), [job], 1000) == []


def test_it_fires_once_and_not_again_while_the_job_stays_slow() -> None:
    job = job_slowing(1.4, one_gpu("n2", 3, HOT), until=1800)
    assert len(run(StragglerDetector(), [job], 1800)) == 1


def test_state_is_freed_when_the_job_ends() -> None:
    job = job_slowing(1.4, one_gpu("n2", 3, HOT), until=900).end(901)
    detector = StragglerDetector()
    assert len(run(detector, [job], 1000)) == 1
    assert detector.state_size() == 1  # only the ended job's tombstone, until forget_after_s


def test_pace_comes_from_throughput_when_no_step_time_is_printed() -> None:
    job = Job().start()
    step = 0
    t = 10.0
    while t < 1000:
        step += 1
        tps = 5000 if t < ONSET else 3500
        job.say(t, f"[rank0]: step: {step}  loss:  9.1234  memory: 45GiB(48%)  tps: {tps:,}")
        t += 2.0 * 5000 / tps
    job.telemetry(0, 1000, one_gpu("n3", 0, HOT))
    detector = StragglerDetector()
    (found,) = run(detector, [job], 1000)
    assert found.culprits == ("n3",)
    assert "throughput pace" in found.summary


def test_a_job_printing_every_minute_is_judged_from_its_averaged_step_times() -> None:
    # Megatron-LM prints once per log interval (here 30 iterations of 2 s, averaged).
    job = Job().start()
    t, step = 10.0, 0
    while t < 1000:
        slowdown = 1.3 if t >= ONSET else 1.0
        step += 30
        job.say(t, megatron_line(step, 2000.0 * slowdown))
        t += 60.0 * slowdown
    job.telemetry(0, 1000, one_gpu("n4", 2, HOT))
    (found,) = run(StragglerDetector(), [job], 1000)
    assert found.culprits == ("n4",)
    assert (found.detected_at - at(ONSET)) / US <= 240


def test_config_is_typed_and_checked() -> None:
    assert from_dict(StragglerConfig, {"z_threshold": 5}).z_threshold == 5.0
    with pytest.raises(ConfigError, match="persistence"):
        from_dict(StragglerConfig, {"peer_k": 5, "peer_n": 4}, "detectors.straggler")


CAPPED = {"sm_clock_mhz": 1590.0, "power_w": 400.0, "throttle_reasons": 0x4}
"""A GPU power-capped below its peers (``nvidia-smi -pl``): the SW power-cap clocks-event reason,
its clock and power held down while it computes."""


def slow_from_the_start(telemetry: GpuState, until: float = 900.0) -> Job:
    return Job().start().steps(10, until, every=2.6).telemetry(0, until, telemetry)


def test_a_gpu_power_capped_from_the_first_step_is_found() -> None:
    (found,) = run(StragglerDetector(), [slow_from_the_start(one_gpu("n3", 1, CAPPED, 0))], 900)
    assert found.culprits == ("n3",)
    assert found.detected_at <= at(300)
    assert "since its first steps" in found.summary and "n3 GPU 1" in found.summary
    assert 0.5 < found.score < 1.0


def test_a_gpu_throttled_for_a_minute_or_two_after_the_start_is_no_straggler_from_it() -> None:
    # A thermal blip three windows long, two minutes into a job (or its requeue): within the
    # GPU's first windows, held low by a slowdown reason, yet over before it could be the way
    # the GPU always ran; the job never slows.
    blip = {**HOT, "sm_clock_mhz": 1600.0}

    def blipping(t: float, node: str, gpu: int) -> dict[str, Any]:
        return COMPUTE | blip if (node, gpu) == ("n3", 1) and 120 <= t < 210 else COMPUTE

    assert run(StragglerDetector(), [slow_from_the_start(blipping)], 900) == []


def test_pcie_replays_from_the_first_step_are_found() -> None:
    # One GPU's PCIe link replays from the job's start: the slowness is in the job's baseline,
    # yet the retries themselves stand out from its peers.
    def replaying(t: float, node: str, gpu: int) -> dict[str, Any]:
        return COMPUTE | {"pcie_replay": int(40 * t) if (node, gpu) == ("n4", 0) else 0}

    (found,) = run(StragglerDetector(), [slow_from_the_start(replaying)], 900)
    assert found.culprits == ("n4",) and found.detected_at <= at(300)
    assert "since its first steps" in found.summary and "PCIe" in found.summary


def test_a_node_throttled_from_the_first_step_is_found() -> None:
    slowdown = {"sm_clock_mhz": 1410.0, "power_w": 520.0, "throttle_reasons": 0x8}

    def throttled_node(t: float, node: str, gpu: int) -> dict[str, Any]:
        return COMPUTE | slowdown if node == "n2" else COMPUTE

    (found,) = run(StragglerDetector(), [slow_from_the_start(throttled_node)], 900)
    assert found.culprits == ("n2",)


def test_a_cap_that_binds_at_every_printed_step_is_found_after_a_light_phase() -> None:
    # One GPU is capped from the first step. After a minute the job evaluates for six minutes,
    # printing nothing, at a power no cap holds down, so the cap stops showing; it shows again
    # once training resumes. Every step line came while that GPU stood out: the job's pace has
    # no baseline free of it to look slow against.
    light = {"power_w": 350.0}

    def capped(t: float, node: str, gpu: int) -> dict[str, Any]:
        if 60 <= t < 420:
            return COMPUTE | light
        return COMPUTE | CAPPED if (node, gpu) == ("n3", 1) else COMPUTE

    job = Job().start().steps(10, 60, every=2.6).steps(420, 1200, every=2.6)
    (found,) = run(StragglerDetector(), [job.telemetry(0, 1200, capped)], 1200)
    assert found.culprits == ("n3",) and found.detected_at <= at(660)
    # The same job with no GPU capped: nothing.
    job = Job().start().steps(10, 60, every=2.6).steps(420, 1200, every=2.6)
    job.telemetry(0, 60, constant(COMPUTE)).telemetry(60, 420, constant(COMPUTE | light))
    assert run(StragglerDetector(), [job.telemetry(420, 1200, constant(COMPUTE))], 1200) == []


def test_a_gpu_that_always_clocks_lower_for_no_reason_is_not_blamed_from_the_start() -> None:
    # A slower part of the same SKU: lower clock, same power, no clocks-event reason set.
    slower_part = {"sm_clock_mhz": 1830.0}
    job = slow_from_the_start(one_gpu("n1", 2, slower_part, 0))
    assert run(StragglerDetector(), [job], 900) == []


def test_every_gpu_capped_alike_is_no_straggler() -> None:
    assert run(StragglerDetector(), [slow_from_the_start(constant(COMPUTE | CAPPED))], 900) == []


def link_down(job: Job, t: float, node: str) -> None:
    """mlx5e_update_carrier()'s line as the kernel log ships it (Linux
    drivers/net/ethernet/mellanox/mlx5/core/en_main.c)."""
    job.logs.append(kernel(t, node, "mlx5_core 0000:4b:00.0 ibp75s0: Link down"))
    job.logs.append(kernel(t + 7, node, "mlx5_core 0000:4b:00.0 ibp75s0: Link up"))


def test_a_node_whose_infiniband_port_flaps_is_named() -> None:
    job = slow_from_the_start(constant(COMPUTE))
    link_down(job, 200, "n2")
    link_down(job, 420, "n2")
    job.logs.sort(key=lambda r: r["time"])
    (found,) = run(StragglerDetector(), [job], 900)
    assert found.culprits == ("n2",)
    assert at(420) <= found.detected_at <= at(460)
    assert "network link drops" in found.summary


def test_a_flapping_node_of_a_job_started_before_medic_is_named() -> None:
    # The job ran before medic started: Slurm never said where, but its GPUs' samples carry
    # its id (dcgm-exporter's job mapping), and so does every line its ranks print.
    job = slow_from_the_start(constant(COMPUTE))
    job.scheduler.clear()
    link_down(job, 200, "n2")
    link_down(job, 420, "n2")
    job.logs.sort(key=lambda r: r["time"])
    (found,) = run(StragglerDetector(), [job], 900)
    assert found.culprits == ("n2",) and "network link drops" in found.summary


def test_one_link_drop_without_a_slowdown_is_no_straggler() -> None:
    job = slow_from_the_start(constant(COMPUTE))
    link_down(job, 200, "n2")
    job.logs.sort(key=lambda r: r["time"])
    assert run(StragglerDetector(), [job], 900) == []


def test_the_lines_of_one_drop_count_once() -> None:
    # The kernel's line and NCCL's async event from each of the node's ranks: one drop.
    job = slow_from_the_start(constant(COMPUTE))
    link_down(job, 200, "n2")
    for rank in range(4, 8):
        event = (
            f"n2:4242:4250 [{rank - 4}] NCCL WARN NET/IB : mlx5_1:1 Got async event : port error"
        )
        job.logs.append(log(200.4, event, "n2", "100", rank=rank))
    job.logs.sort(key=lambda r: r["time"])
    assert run(StragglerDetector(), [job], 900) == []


def test_a_gpu_drawing_odd_power_at_its_peers_clock_flags_nothing() -> None:
    # Healthy GPUs hit their power limit now and then (NVML's SW power cap reason set, power
    # held at the cap) at the clock their peers run: they keep pace, so however far their
    # power or reasons stand out, a job slowed by its data mix has no straggler.
    capped_at_peer_clock = {"power_w": 450.0, "throttle_reasons": 0x4}
    job = job_slowing(1.15, one_gpu("n2", 3, capped_at_peer_clock))
    assert run(StragglerDetector(), [job], 1000) == []


def test_a_job_wide_drift_becomes_the_jobs_pace() -> None:
    # The step time rises 15% everywhere (longer sequences); no GPU stands out, so the new
    # pace is learned: a GPU slowing ten minutes later is judged against it.
    drift = ONSET - 300
    job = (
        Job()
        .start()
        .steps(10, drift)
        .steps(drift, ONSET, slowdown=1.15)
        .steps(ONSET, 1200, slowdown=1.15 * 1.3)
        .telemetry(0, 1200, one_gpu("n2", 3, HOT))
    )
    (found,) = run(StragglerDetector(), [job], 1200)
    assert found.culprits == ("n2",) and 1.2 <= found.evidence["slowdown"] <= 1.4


@pytest.mark.parametrize(("slowdown", "clock"), [(1.25, 1830.0), (1.10, 1860.0)])
def test_a_clock_dip_too_small_for_the_jobs_slowdown_is_not_its_straggler(
    slowdown: float, clock: float
) -> None:
    # The job slows everywhere (a heavier data mix) as one GPU at its power limit runs 6-8%
    # below its peers' clock (NVML's SW power cap reason): every rank waits for the slowest
    # in each collective, so that GPU makes a step at most 6-8% slower, neither the 1.25x the
    # job lost nor the 1.07x that counts as slow.
    dipping = {"sm_clock_mhz": clock, "power_w": 700.0, "throttle_reasons": 0x4}
    job = job_slowing(slowdown, one_gpu("n2", 3, dipping))
    assert run(StragglerDetector(), [job], 1000) == []


def test_a_thermal_blip_across_three_windows_during_a_slowdown_is_no_straggler() -> None:
    # The facility caps the job's power and it slows 15% everywhere; 45 s later one GPU
    # touches its thermal limit for 57 s, 20% below its peers' clock: low on average in the
    # three windows it reaches, but back at its peers' clock as the third ends.
    blip = {"sm_clock_mhz": 1595.0, "power_w": 560.0, "throttle_reasons": 0x20}
    start = ONSET + 45 + 28  # 17 s before a window ends, over the next, 10 s into the third

    def blipping(t: float, node: str, gpu: int) -> dict[str, Any]:
        on = (node, gpu) == ("n2", 3) and start <= t < start + 57
        return COMPUTE | (blip if on else {})

    assert run(StragglerDetector(), [job_slowing(1.15, blipping, until=1200)], 1200) == []


def test_a_gpu_dipping_deep_half_the_time_is_still_its_jobs_straggler() -> None:
    # A failing power brake: one GPU falls to 60% of its peers' clock every other second,
    # any part of a window as low as the rest; the job runs 1.3x slower
    def braking(t: float, node: str, gpu: int) -> dict[str, Any]:
        low = (node, gpu) == ("n2", 3) and t >= ONSET and int(t) % 2 == 0
        return COMPUTE | ({"sm_clock_mhz": 1190.0, "throttle_reasons": 0x80} if low else {})

    (found,) = run(StragglerDetector(), [job_slowing(1.3, braking)], 1000)
    assert found.culprits == ("n2",)
    assert (found.detected_at - at(ONSET)) / US <= 180


def test_nvlink_errors_on_one_gpu_name_its_node() -> None:
    # NVML's NVLink CRC/replay error counters climb on one GPU; its link retries slow it
    def retrying(t: float, node: str, gpu: int) -> dict[str, Any]:
        rising = (node, gpu) == ("n3", 2) and t >= ONSET
        return COMPUTE | {"nvlink_errors": int(25 * (t - ONSET)) if rising else 0}

    (found,) = run(StragglerDetector(), [job_slowing(1.25, retrying)], 1000)
    assert found.culprits == ("n3",)
    assert "NVLink" in found.summary


AT_LIMIT = {"sm_clock_mhz": 1830.0, "power_w": 700.0, "throttle_reasons": 0x4}
"""A GPU at its power limit for the instant of a reading: NVML's SW power cap reason set, the
clock a few bins down (healthy: the firmware moves it back and forth many times a second)."""


def test_gpus_of_one_node_dipping_in_turn_are_no_straggler() -> None:
    # Each GPU of n2 reads low for a minute in turn while the job slows 10% everywhere (its
    # data mix): the node's worst GPU is a different one each window, none of them is slow.
    def in_turn(t: float, node: str, gpu: int) -> dict[str, Any]:
        dipping = node == "n2" and t >= ONSET and gpu == int(t // 60) % 4
        return COMPUTE | (AT_LIMIT if dipping else {})

    assert run(StragglerDetector(), [job_slowing(1.10, in_turn)], 1200) == []


SPARSE_DIPS = (True, True, False, True, False, False, False, False)
"""Which of each eight 30 s readings of one GPU fall on a power-cap dip: three of four in a
row now and then, three of eight over four minutes."""


def test_a_few_low_readings_at_a_sparse_cadence_are_no_straggler() -> None:
    def now_and_then(t: float, node: str, gpu: int) -> dict[str, Any]:
        low = (node, gpu) == ("n2", 3) and t >= ONSET and SPARSE_DIPS[int(t // 30) % 8]
        return COMPUTE | (AT_LIMIT if low else {})

    job = (
        Job()
        .start()
        .steps(10, ONSET)
        .steps(ONSET, 1500, slowdown=1.10)
        .telemetry(0, 1500, now_and_then, every=30)
    )
    assert run(StragglerDetector(), [job], 1500) == []


def test_a_throttled_gpu_is_found_at_a_sparse_cadence() -> None:
    job = (
        Job()
        .start()
        .steps(10, ONSET)
        .steps(ONSET, 1500, slowdown=1.4)
        .telemetry(0, 1500, one_gpu("n2", 3, HOT), every=30)
    )
    (found,) = run(StragglerDetector(), [job], 1500)
    assert found.culprits == ("n2",)
    assert (found.detected_at - at(ONSET)) / US <= 360


def test_a_job_back_at_its_pace_is_not_slowed() -> None:
    # One GPU runs 8% below its peers' clock from the onset, while the job does not slow;
    # a job-wide stall of three minutes (a shared file system) slows every rank alike and
    # passes: once the job is back at its baseline pace, nothing is slowed to explain.
    job = (
        Job()
        .start()
        .steps(10, ONSET)
        .steps(ONSET, ONSET + 180, slowdown=1.5)
        .steps(ONSET + 180, 1500)
        .telemetry(0, 1500, one_gpu("n2", 3, AT_LIMIT))
    )
    assert run(StragglerDetector(), [job], 1500) == []


def test_scattered_low_readings_do_not_keep_a_rare_printers_baseline_from_being_learned() -> None:
    # A job logs every 180 iterations (Megatron-LM's --log-interval: one line every six
    # minutes, with the interval's mean step time; the first, after a checkpoint, is no fair
    # sample) and is scraped every 30 s: some GPU reads a
    # power-cap dip in every window (each GPU in one of sixteen), none persistently, so the
    # job's pace is learned, and PCIe replays that start later on one GPU, slowing the job,
    # are found.
    onset = 1200.0

    def scattered(t: float, node: str, gpu: int) -> dict[str, Any]:
        index = NODES.index(node) * GPUS_PER_NODE + gpu
        low = index == int(t // 30) % 16
        rising = (node, gpu) == ("n4", 0) and t >= onset
        replays = {"pcie_replay": int(40 * (t - onset)) if rising else 0}
        return COMPUTE | (AT_LIMIT if low else {}) | replays

    job = Job().start().telemetry(0, 2100, scattered, every=30)
    job.say(300, "saving checkpoint at iteration     150 to /ckpt in torch_dist format")
    job.say(330, "  successfully saved checkpoint from iteration     150 to /ckpt")
    for line in range(5):
        t = 450.0 + 360.0 * line
        step_ms = 2000.0 * (1.3 if t > onset else 1.0) * (1 + 0.02 * (-1) ** line)
        job.say(t, megatron_line((line + 2) * 180, step_ms))
    (found,) = run(StragglerDetector(), [job], 2100)
    assert found.culprits == ("n4",) and "PCIe" in found.summary


def torchtitan_line(step: int, tps: int) -> str:
    # torchtitan's metrics line (torchtitan/components/metrics.py), colour codes left out.
    return (
        f"[rank0]:[titan] 2026-03-18 17:40:45,482 - root - INFO - step: {step}  loss:  9.4854"
        f"  memory: 49.79GiB(62.94%)  tps: {tps:,}  tflops: 230.81  mfu: 23.34%"
    )


def sparse_printer(slowdown: float, onset: float) -> Job:
    # One line every 83 steps of ~5.8 s (eight minutes), telemetry every 5 s; PCIe replays
    # rise on n4 GPU 0 from the onset, which falls between the job's first and second lines,
    # late enough that the GPU is flagged only once the job's pace is watched.
    def replaying(t: float, node: str, gpu: int) -> dict[str, Any]:
        rising = (node, gpu) == ("n4", 0) and t >= onset
        return COMPUTE | {"pcie_replay": int(4 * (t - onset)) if rising else 0}

    job = Job().start().telemetry(0, 3000, replaying, every=5)
    job.say(
        15, "[rank0]:[titan] 2026-03-18 17:34:21,162 - root - INFO - Training starts at step 1."
    )
    t, step = 20.0, 0
    while t < 3000:
        slowed = slowdown if t > onset else 1.0
        step += 83
        t += 83 * 5.8 * slowed
        job.say(t, torchtitan_line(step, round(19_000 / slowed)))
    return job


def test_a_rare_printers_first_line_is_its_baseline() -> None:
    # The only line before the slowdown is the job's first, after the start-up lines: no fair
    # sample of the time between lines, but torchtitan's tps counts from the start, so it is
    # no faster than the job's usual pace and is learned.
    (found,) = run(StragglerDetector(), [sparse_printer(1.25, 850.0)], 3000)
    assert found.culprits == ("n4",) and "PCIe" in found.summary


def test_a_rare_printer_that_does_not_slow_is_no_straggler() -> None:
    assert run(StragglerDetector(), [sparse_printer(1.0, 850.0)], 3000) == []


def saving_printer(slowdown: float, paused_ms: float = 0.0) -> Job:
    # Megatron-LM logging every 100 iterations of ~8 s and saving a checkpoint right after
    # each line (save interval = log interval), so every line but the first follows a save;
    # PCIe replays rise on n4 GPU 0 from 2000 s, between two lines. Megatron's interval timer
    # stops around the save: the printed time is the steps' alone (``paused_ms``: a timer that
    # ran through the pause before the line, spread over its interval).
    def replaying(t: float, node: str, gpu: int) -> dict[str, Any]:
        rising = (node, gpu) == ("n4", 0) and t >= 2000
        return COMPUTE | {"pcie_replay": int(4 * (t - 2000)) if rising else 0}

    job = Job().start().telemetry(0, 5000, replaying, every=15)
    t = 30.0
    for line in range(1, 7):
        slowed = slowdown if t > 2000 else 1.0
        t += 100 * 8.0 * slowed
        job.say(t, megatron_line(100 * line, 8000.0 * slowed + (paused_ms if line > 1 else 0)))
        job.say(t, f"saving checkpoint at iteration {100 * line:7d} to /ckpt in torch_dist format")
        t += 40.0
        job.say(t, f"  successfully saved checkpoint from iteration {100 * line:7d} to /ckpt")
    return job


def test_a_printer_saving_after_every_line_is_judged_by_the_times_it_prints() -> None:
    (found,) = run(StragglerDetector(), [saving_printer(1.35)], 5000)
    assert found.culprits == ("n4",) and "PCIe" in found.summary
    assert 1.3 <= found.evidence["slowdown"] <= 1.4


def test_a_printed_time_that_ran_through_the_pause_is_no_pace() -> None:
    # a timer that held each save (a six-minute one, spread over the interval: 5.5 times the
    # steps' own time) says nothing of the steps, and the replays slow nothing
    assert run(StragglerDetector(), [saving_printer(1.0, paused_ms=4.5 * 8000.0)], 5000) == []


def test_the_scores_scaled_features_are_the_detectors_flaps_and_rank_shares() -> None:
    from medic.detectors.straggler import FLAPS, RANK_SHARE
    from medic.detectors.straggler_score import SCALED_ALREADY

    assert frozenset({*FLAPS, RANK_SHARE}) == SCALED_ALREADY


def test_link_drops_logged_on_every_node_at_once_are_their_switchs() -> None:
    job = slow_from_the_start(constant(COMPUTE))
    for node, skew in (("n1", 0.0), ("n2", 1.5), ("n3", -2.0), ("n4", 0.7)):
        link_down(job, 200 + skew, node)  # a leaf switch reboots: every port on it goes down
    link_down(job, 420, "n2")
    job.logs.sort(key=lambda r: r["time"])
    assert run(StragglerDetector(), [job], 900) == []


def test_a_gpu_dipping_at_its_power_limit_is_not_blamed_for_a_slower_job() -> None:
    # One GPU's clock 8% below its peers' (the SW power-cap reason, as parts that reach their
    # limit first show) while the job runs 1.12x slower for a reason of its own: within the
    # healthy spread, its clock explains no slowdown. Twice as far below, it does.
    assert run(StragglerDetector(), [job_slowing(1.12, one_gpu("n2", 3, AT_LIMIT))], 1000) == []
    (found,) = run(StragglerDetector(), [job_slowing(1.2, one_gpu("n2", 3, CAPPED))], 1000)
    assert found.culprits == ("n2",)
