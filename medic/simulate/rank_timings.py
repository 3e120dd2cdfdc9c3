"""Per-rank timings a job prints (the straggler detector's rank-share evidence), and the faults
that show in them: a rank slowed on its host (CPU contention from a stray process on its cores,
a slow data loader), which GPU telemetry does not show, and a GPU straggler whose job also
prints them.

Two printers, each in its framework's real format:

* Megatron-LM jobs log their timers with ``--timing-log-option all`` (``megatron/core/timers.py``
  ``_get_all_ranks_time_string``, printed by the last rank each log interval, milliseconds per
  iteration): ``forward-backward`` holds the gradient all-reduce, where every rank waits for the
  slowest, so it is the same on every rank; ``forward-compute``, ``backward-compute`` and
  ``batch-generator`` are each rank's own work;
* other jobs run NVIDIA Resiliency Extension's straggler detection (its PTL callback,
  ``ptl_resiliency/straggler_det_callback.py``): every ``report_s`` rank 0 logs the relative and
  individual GPU performance scores (``Rank=.. Node=.. Score=..``, the worst and best three when
  more than six ranks) and, for a relative score under 0.75 (``gpu_rel_threshold``), a
  ``STRAGGLER DETECTION WARNING`` naming the ranks as ``StragglerId(rank=.., node='..')``.

A Megatron-LM job splits its ranks into pipeline stages (``pipeline_model_parallel_size``, which
rank 0 prints with its other arguments at start-up, ``_print_args``): stage = rank // (world
size / stages), the pipeline outermost in Megatron's rank order. The stages do different work by
design: the last one also computes the output layer and the loss (the imbalance Megatron's
``--account-for-loss-in-pipeline-split`` exists to even out), and only the first and last load
batches (``get_batch`` in ``pretrain_gpt.py`` returns at once on the others), so a healthy last
stage's compute timers read 8-25% above the others' and the middle stages' ``batch-generator``
near zero.

Healthy ranks' own times differ by about a percent (a fixed offset per rank: the parts and
their slots) and jitter by 1-2% from one report to the next; Megatron-LM's StragglerDetector
README example shows 0.4% between its fastest and slowest rank's compute over 32 ranks.
"""

from __future__ import annotations

import numpy as np

from medic.simulate.cluster import GPUS_PER_NODE
from medic.simulate.faults import fault_time, pick_culprit, slow_down, thermal
from medic.simulate.frameworks import Lines, logged
from medic.simulate.plan import RankTimings, Run
from medic.simulate.world import World

MEGATRON_TIMERS = (
    ("forward-backward", 0.92),
    ("forward-compute", 0.27),
    ("backward-compute", 0.55),
    ("batch-generator", 0.01),
)
"""Timers printed and their share of a healthy step."""
OWN_WORK = 0.83
"""Share of a healthy step that is each rank's own work (forward, backward, data): a rank whose
own work takes f times longer makes each step about 1 + 0.83 (f - 1) times longer."""
NVRX_THRESHOLD = 0.75
NVRX_SHOWN = 3


def printing(world: World, run: Run) -> RankTimings:
    """The run prints per-rank timings (the style its framework uses); none slow yet. NVRx's
    scores time CUDA kernels: a rank slowed on its host keeps its score, only Megatron's timers
    (host wall time around the rank's own work) show it."""
    style = "megatron_timers" if run.job.framework == "megatron" else "nvrx"
    timings = RankTimings(
        style,
        int(world.rng.integers(1 << 31)),
        report_s=float(world.rng.choice([60.0, 120.0, 300.0])),
    )
    if style == "megatron_timers":
        layout = np.random.default_rng(timings.seed + 3)
        stages = [p for p in (1, 2, 4) if run.world_size % p == 0 and run.world_size // p >= 8]
        timings.stages = int(layout.choice(stages))
        timings.last_stage_extra = float(layout.uniform(0.08, 0.25))
    run.rank_timings = timings
    run.job.traps.append("rank_timings")
    return timings


def healthy(world: World, run: Run, at_min: float | None) -> None:
    """A healthy job printing per-rank timings: equal wall times, own times within spread."""
    printing(world, run)


def host_straggler(world: World, run: Run, slowdown: float | None, at_min: float | None) -> None:
    """One or two ranks of one node slowed on the host (a stray process on their cores, a slow
    data loader): their own work takes longer, every GPU waits alike (no GPU looks unlike its
    peers), the job slows; mid-job or from the first step."""
    rng = world.rng
    timings = printing(world, run)
    bad = pick_culprit(world, run)
    factor = slowdown or float(rng.uniform(1.1, 1.4))
    early = bool(rng.random() < 0.4)
    t = run.train_start - 1.0 if early else fault_time(world, run, 900, at_min)
    ranks = [bad.rank]
    if rng.random() < 0.5:
        neighbour = bad.rank + 1 if bad.gpu + 1 < GPUS_PER_NODE else bad.rank - 1
        ranks.append(neighbour)
    own = 1.0 + (factor - 1.0) / OWN_WORK
    timings.slow = dict.fromkeys(ranks, own)
    timings.since = t
    slow_down(run, t, factor, [])
    onset = world.first_sample([bad.node], max(0.0, t, run.train_start))
    cause = str(rng.choice(["CPU contention on its cores", "a slow data loader"]))
    note = f"ranks {ranks} slowed on the host ({cause}), job {factor:.2f}x slower"
    world.label(run.job, "straggler", onset, [bad.node], ranks, note)


def gpu_straggler(world: World, run: Run, slowdown: float | None, at_min: float | None) -> None:
    """A GPU straggler (thermal throttling) in a job that prints per-rank timings."""
    timings = printing(world, run)
    thermal(world, run, slowdown, at_min)
    label = world.labels[-1]
    (rank,) = label["culprit_ranks"]
    since, factor = run.slowdowns[-1]
    timings.slow = {int(rank): 1.0 + (factor - 1.0) / OWN_WORK}
    timings.since = since


def arguments(run: Run) -> Lines:
    """Megatron's arguments as rank 0 prints them before training (a few of them, sorted,
    dots padding each name to 48 characters)."""
    timings = run.rank_timings
    assert timings is not None
    values = {
        "micro_batch_size": 1,
        "pipeline_model_parallel_size": timings.stages,
        "tensor_model_parallel_size": 1,
        "timing_log_option": "all",
        "world_size": run.world_size,
    }
    at = max(0.0, run.train_start - 30.0)
    body = [(at, f"  {name} {'.' * (48 - len(name))} {value}") for name, value in values.items()]
    rule = "-" * 24
    return [
        (at, f"{rule} arguments {rule}"),
        *body,
        (at, f"{'-' * 20} end of arguments {'-' * 21}"),
    ]


def lines(world: World, run: Run) -> tuple[int, Lines]:
    """The printing rank and what it prints of the run's ranks' timings."""
    timings = run.rank_timings
    assert timings is not None
    rng = np.random.default_rng(timings.seed)
    if timings.style == "megatron_timers":
        return run.world_size - 1, _megatron(run, timings, rng)
    return 0, _nvrx(world, run, timings, rng)


def _own_factors(run: Run, timings: RankTimings, at: np.ndarray) -> np.ndarray:
    """Per report (rows) and rank (columns): each rank's own work over a healthy step's."""
    ranks = run.world_size
    fixed = np.random.default_rng(timings.seed + 1).normal(0.0, 0.01, ranks)
    noise = np.random.default_rng(timings.seed + 2).normal(0.0, 0.015, (at.size, ranks))
    factors: np.ndarray = np.exp(fixed + noise)
    for rank, slower in timings.slow.items():
        factors[at >= timings.since, rank] *= slower
    return factors


def _megatron(run: Run, timings: RankTimings, rng: np.random.Generator) -> Lines:
    _, ends, mean = logged(run)
    step_s = run.job.spec.step_s
    own = _own_factors(run, timings, ends)
    per_stage = run.world_size // timings.stages
    stage = np.arange(run.world_size) // per_stage
    design = {
        "forward-compute": np.where(
            stage == timings.stages - 1, 1.0 + timings.last_stage_extra, 1.0
        ),
        "backward-compute": np.where(
            stage == timings.stages - 1, 1.0 + timings.last_stage_extra, 1.0
        ),
        "batch-generator": np.where((stage == 0) | (stage == timings.stages - 1), 1.0, 0.02),
    }
    out: Lines = []
    for i, end in enumerate(ends):
        at = float(end) + 0.002
        out.append((at, "times across ranks (ms):"))
        for name, part in MEGATRON_TIMERS:
            out.append((at, f"  {name}:"))
            if name == "forward-backward":
                wall = mean[i] * part * 1000.0
                values = wall * (1.0 + rng.normal(0.0, 0.0005, run.world_size))
            else:
                values = step_s * part * 1000.0 * own[i] * design[name]
            out.extend((at, f"     rank {r:2d}: {v:.2f}") for r, v in enumerate(values))
    return out


def _nvrx(world: World, run: Run, timings: RankTimings, rng: np.random.Generator) -> Lines:
    start = run.train_start + timings.report_s
    times = np.arange(start, min(run.exit_at, run.progress_end), timings.report_s)
    own = _own_factors(run, timings, times)
    hosts = [world.host(run.rank_node(r)) for r in range(run.world_size)]
    out: Lines = []
    for i, t in enumerate(times):
        relative = own[i].min() / own[i]
        individual = 1.0 / (1.0 + np.abs(rng.normal(0.0, 0.01, run.world_size)))
        for block, scores in (("relative", relative), ("individual", individual)):
            out.append((float(t), "INFO:nemo_logger.StragglerDetectionCallback:"))
            out.append((float(t), f"GPU {block} performance:"))
            out.extend((float(t), text) for text in _scores(scores, hosts))
        slow = np.flatnonzero(relative < NVRX_THRESHOLD)
        if slow.size:
            ids = ", ".join(f"StragglerId(rank={r}, node='{hosts[r]}')" for r in slow)
            out.append(
                (
                    float(t) + 0.001,
                    "STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. "
                    f"Affected ranks: {{{ids}}}",
                )
            )
    return out


def _scores(scores: np.ndarray, hosts: list[str]) -> list[str]:
    """``_format_gpu_scores``: all ranks worst first, or the worst and best three."""
    order = np.argsort(-scores, kind="stable")
    count = scores.size

    def row(r: int) -> str:
        return f"  Rank={r} Node={hosts[r]} Score={scores[r]:.2f}"

    if count <= 2 * NVRX_SHOWN:
        return [row(int(r)) for r in order[::-1]]
    return [
        f" Worst performing {NVRX_SHOWN}/{count} ranks:",
        *(row(int(r)) for r in order[-NVRX_SHOWN:][::-1]),
        f" Best performing {NVRX_SHOWN}/{count} ranks:",
        *(row(int(r)) for r in order[:NVRX_SHOWN]),
    ]
