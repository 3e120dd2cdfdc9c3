"""The straggler detector's rank-share vote: ranks' printed shares of a step against their
peers' (NVRx scores and warnings, Megatron-LM's per-rank timers)."""

from __future__ import annotations

import math

from medic.detectors.straggler import StragglerDetector
from medic.testing.builders import at
from medic.timeutil import US
from tests.detectors.training import COMPUTE, GPUS_PER_NODE, NODES, Job, constant, run

ONSET = 600.0
RANKS = len(NODES) * GPUS_PER_NODE
REPORT_S = 20.0


def megatron_timers(job: Job, t: float, compute_ms: dict[int, float], wall_ms: float) -> None:
    """One ``--timing-log-option all`` record (megatron/core/timers.py), from the last rank:
    forward-backward (the same on every rank: it holds the all-reduce) then forward-compute."""
    job.say(t, "times across ranks (ms):")
    job.say(t, "  forward-backward:")
    for rank in range(RANKS):
        job.say(t, f"     rank {rank:2d}: {wall_ms:.2f}")
    job.say(t, "  forward-compute:")
    for rank in range(RANKS):
        job.say(t, f"     rank {rank:2d}: {compute_ms[rank]:.2f}")


def megatron_arguments(job: Job, t: float, stages: int = 1) -> Job:
    """Rank 0's arguments dump at start-up (megatron/training/arguments.py ``_print_args``): the
    name, dots padding it to 48 characters, the value."""
    job.say(t, f"{'-' * 24} arguments {'-' * 24}")
    for name, value in (("pipeline_model_parallel_size", stages), ("world_size", RANKS)):
        job.say(t, f"  {name} {'.' * (48 - len(name))} {value}")
    job.say(t, f"{'-' * 20} end of arguments {'-' * 21}")
    return job


def jitter(rank: int, report: int) -> float:
    """A healthy rank's compute time from report to report: within about 2%."""
    return 1.0 + 0.02 * math.sin(1.7 * rank + 2.3 * report)


def timed_job(slow_rank: int | None, factor: float, wall_factor: float = 1.0) -> Job:
    job = megatron_arguments(Job().start(), 5.0)
    job.steps(10, ONSET).steps(ONSET, 1000, slowdown=wall_factor)
    job.telemetry(0, 1000, constant(COMPUTE))
    t, report = 30.0, 0
    while t < 1000:
        compute = {r: 600.0 * jitter(r, report) for r in range(RANKS)}
        if slow_rank is not None and t >= ONSET:
            compute[slow_rank] *= factor
        megatron_timers(job, t, compute, 2000.0 * (wall_factor if t >= ONSET else 1.0))
        t, report = t + REPORT_S, report + 1
    return job


def test_a_rank_whose_own_compute_time_exceeds_its_peers_is_named_with_its_node() -> None:
    """A host-side slowdown (CPU contention on n2): no GPU telemetry sign, the job's wall time
    per step equal on every rank, only rank 6's printed compute time stands out."""
    (found,) = run(StragglerDetector(), [timed_job(6, 1.3, wall_factor=1.2)], 1000)
    assert found.kind == "straggler"
    assert found.culprits == ("n2",) and found.ranks == (6,)
    assert found.evidence["feature"] == "rank_share"
    assert "rank 6" in found.summary and "forward-compute 1.3" in found.summary
    assert (found.detected_at - at(ONSET)) / US <= 120


def test_a_rank_slow_from_the_first_step_is_found_without_the_job_slowing() -> None:
    job = megatron_arguments(Job().start(), 5.0).steps(10, 1000)
    job.telemetry(0, 1000, constant(COMPUTE))
    for report, t in enumerate(range(30, 1000, 20)):
        compute = {r: 600.0 * jitter(r, report) * (1.25 if r == 13 else 1.0) for r in range(16)}
        megatron_timers(job, float(t), compute, 2000.0)
    (found,) = run(StragglerDetector(), [job], 1000)
    assert found.culprits == ("n4",) and found.ranks == (13,)


def test_equal_wall_times_and_compute_jitter_give_no_vote() -> None:
    assert run(StragglerDetector(), [timed_job(None, 1.0)], 1000) == []


def test_one_odd_report_is_not_a_straggler() -> None:
    job = megatron_arguments(Job().start(), 5.0).steps(10, 1000)
    job.telemetry(0, 1000, constant(COMPUTE))
    for report, t in enumerate(range(30, 1000, 20)):
        compute = {r: 600.0 * jitter(r, report) for r in range(RANKS)}
        if report == 20:
            compute[3] *= 1.8
        megatron_timers(job, float(t), compute, 2000.0)
    assert run(StragglerDetector(), [job], 1000) == []


def nvrx_report(job: Job, t: float, scores: dict[int, float]) -> None:
    """The NVRx PTL callback's relative and individual score blocks, from rank 0
    (nvidia-resiliency-ext ptl_resiliency/straggler_det_callback.py, _format_gpu_scores)."""
    for block in ("relative", "individual"):
        job.say(t, f"GPU {block} performance:", node=NODES[0])
        for rank, score in sorted(scores.items(), key=lambda item: item[1]):
            node = NODES[rank // GPUS_PER_NODE]
            shown = score if block == "relative" else 0.99
            job.say(t, f"  Rank={rank} Node={node} Score={shown:.2f}", node=NODES[0])


def nvrx_job(slow_rank: int | None, score: float) -> Job:
    job = Job().start().steps(10, 1000).telemetry(0, 1000, constant(COMPUTE))
    for report, t in enumerate(range(60, 1000, 60)):
        scores = {r: 1.0 - 0.04 * abs(math.sin(r + 1.3 * report)) for r in range(RANKS)}
        if slow_rank is not None and t >= ONSET:
            scores[slow_rank] = score
        nvrx_report(job, float(t), scores)
    return job


def test_a_low_relative_score_names_the_rank_and_the_node_nvrx_prints() -> None:
    (found,) = run(StragglerDetector(), [nvrx_job(9, 0.62)], 1000)
    assert found.culprits == ("n3",) and found.ranks == (9,)
    assert "nvrx gpu_relative 1.61x" in found.summary


def test_relative_scores_jittering_within_their_normal_spread_are_not_a_straggler() -> None:
    assert run(StragglerDetector(), [nvrx_job(None, 1.0)], 1000) == []


def test_nvrx_warnings_repeated_name_the_rank_and_its_node() -> None:
    job = Job().start().steps(10, 1000).telemetry(0, 1000, constant(COMPUTE))
    for t in range(ONSET_WARN := 400, 1000, 100):
        job.say(
            float(t),
            "STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. "
            "Affected ranks: {StragglerId(rank=2, node='n1')}",
            node=NODES[0],
        )
    (found,) = run(StragglerDetector(), [job], 1000)
    assert found.culprits == ("n1",) and found.ranks == (2,)
    assert (found.detected_at - at(ONSET_WARN)) / US >= 200


def test_a_frameworks_own_slow_rank_report_repeated_names_the_rank() -> None:
    job = Job().start().steps(10, 1000).telemetry(0, 1000, constant(COMPUTE))
    for t in range(400, 1000, 100):
        job.say(float(t), "Rank r2 input wait was 199.7ms vs median rank r0 at 10.4ms.")
    (found,) = run(StragglerDetector(), [job], 1000)
    # the node is not named: one line says nothing of how the job's ranks lie on its nodes
    assert (found.kind, found.ranks, found.culprits) == ("straggler", (2,), ())
    assert "log_report compared 19.20x" in found.summary
    # once is no straggler: healthy ranks' figures jitter from one report to the next
    job = Job().start().steps(10, 1000).telemetry(0, 1000, constant(COMPUTE))
    job.say(400.0, "Rank r2 input wait was 199.7ms vs median rank r0 at 10.4ms.")
    assert run(StragglerDetector(), [job], 1000) == []


def test_many_ranks_standing_out_blame_nobody() -> None:
    job = megatron_arguments(Job().start(), 5.0).steps(10, 1000)
    job.telemetry(0, 1000, constant(COMPUTE))
    for report, t in enumerate(range(30, 1000, 20)):
        compute = {r: 600.0 * jitter(r, report) * (1.3 if r < 6 else 1.0) for r in range(16)}
        megatron_timers(job, float(t), compute, 2000.0)
    assert run(StragglerDetector(), [job], 1000) == []


def staged_job(stages: int | None, slow_rank: int | None, nodes: tuple[str, ...] = NODES) -> Job:
    """Megatron timers of a job in ``stages`` pipeline stages (None: its arguments were not
    seen; four stages then), whose last stage computes 20% longer by design (output layer and
    loss)."""
    job = Job(nodes=nodes).start()
    if stages is not None:
        megatron_arguments(job, 5.0, stages)
    job.steps(10, 1000).telemetry(0, 1000, constant(COMPUTE))
    last_stage = RANKS - RANKS // (stages or 4)
    for report, t in enumerate(range(30, 1000, 20)):
        compute = {
            r: 600.0
            * jitter(r, report)
            * (1.2 if r >= last_stage else 1.0)
            * (1.3 if r == slow_rank else 1.0)
            for r in range(RANKS)
        }
        megatron_timers(job, float(t), compute, 2000.0)
    return job


def test_a_last_pipeline_stage_slower_by_design_is_not_a_straggler() -> None:
    assert run(StragglerDetector(), [staged_job(4, None)], 1000) == []


def test_a_slow_rank_is_found_among_the_ranks_of_its_own_stage() -> None:
    (found,) = run(StragglerDetector(), [staged_job(4, 5)], 1000)
    assert found.culprits == ("n2",) and found.ranks == (5,)


def test_without_its_layout_a_slow_rank_is_found_among_the_ranks_of_its_node() -> None:
    # The job started before medic: its arguments were never seen. Its stages span whole
    # nodes (four ranks each), so a node's ranks are one stage's.
    (found,) = run(StragglerDetector(), [staged_job(None, 5)], 1000)
    assert found.culprits == ("n2",) and found.ranks == (5,)


def test_without_its_layout_a_last_stage_of_whole_nodes_is_not_a_straggler() -> None:
    assert run(StragglerDetector(), [staged_job(None, None)], 1000) == []


def test_a_one_node_job_is_not_compared_before_its_layout_is_known() -> None:
    # Sixteen ranks on one node: its pipeline stages split the node.
    assert run(StragglerDetector(), [staged_job(None, 5, nodes=("n1",))], 1000) == []


def test_a_first_report_before_the_jobs_nodes_are_known_still_counts() -> None:
    # A job running since before medic started, no layout seen, printing its timers every ten
    # minutes, the first with its first step line: its GPUs are not watched yet (no pace), nor
    # does Slurm list its nodes, so only the next windows tell which node a rank is on.
    job = Job()
    job.steps(600, 1900).telemetry(0, 1900, constant(COMPUTE), every=30)
    for report, t in enumerate((600.0, 1200.0, 1800.0)):
        compute = {r: 600.0 * jitter(r, report) * (1.3 if r == 5 else 1.0) for r in range(RANKS)}
        megatron_timers(job, t, compute, 2000.0)
    (found,) = run(StragglerDetector(), [job], 1900)
    assert found.culprits == ("n2",) and found.ranks == (5,)
    assert at(1800) <= found.detected_at <= at(1900)


STALL = (
    "[2026-12-11 10:04:20.000000: W /tmp/pip-req-build-a1/horovod/common/stall_inspector.cc:107]"
    " One or more tensors were submitted to be reduced, gathered or broadcasted by subset of"
    " ranks and are waiting for remainder of ranks for more than 60 seconds."
)


def stalled_job(stalls: list[tuple[float, float | None]], late_rank: int = 5) -> Job:
    """Steps every 2 s but for each stall (from, to): the stall inspector's warning and its
    missing rank a minute into it, training going on at ``to`` (None: it never does)."""
    job = Job().start().telemetry(0, 1000, constant(COMPUTE))
    t = 10.0
    for start, end in stalls:
        job.steps(t, start)
        job.say(start + 60, STALL, node=NODES[0])
        job.say(start + 60, "Missing ranks:", node=NODES[0])
        job.say(start + 60, f"{late_rank}: [allreduce.layer3.weight]", node=NODES[0])
        if end is None:
            return job
        t = end
    job.steps(t, 1000)
    return job


def test_a_rank_late_in_stalls_training_got_over_is_a_suspect_straggler() -> None:
    # three stalls of 70 to 90 s, training going on after each: rank 5 was late, not dead
    job = stalled_job([(200, 270), (400, 490), (600, 680)])
    (found,) = run(StragglerDetector(), [job], 1000)
    # no node: a stall report names the late ranks alone, not how many ranks the job has
    assert (found.kind, found.ranks, found.culprits) == ("straggler", (5,), ())
    assert found.tier == "suspect"  # a rank late by the job's design reads the same
    assert "stall_report stall" in found.summary
    assert found.detected_at >= at(680)


def test_one_long_stall_or_a_stall_that_never_ends_is_no_straggler() -> None:
    # one stall warned of three times counts once
    job = Job().start().telemetry(0, 1000, constant(COMPUTE)).steps(10, 200)
    for t in (260.0, 320.0, 380.0):
        job.say(t, STALL, node=NODES[0])
        job.say(t, "Missing ranks:", node=NODES[0])
        job.say(t, "5: [allreduce.layer3.weight]", node=NODES[0])
    job.steps(400, 1000)
    assert run(StragglerDetector(), [job], 1000) == []
    # stalls training never got over: the hang detector's
    job = stalled_job([(200, 270), (400, 490), (600, None)])
    assert run(StragglerDetector(), [job], 1000) == []
