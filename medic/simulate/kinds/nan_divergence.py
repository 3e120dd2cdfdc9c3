"""A training run whose loss diverges: it goes NaN at once (a bad batch, an overflow in bf16
attention) or climbs tenfold every print or two until it overflows to inf and reads NaN (a
learning rate too high for the model). The job runs on at full speed, printing its loss:
nothing else shows it, and no node is at fault.

With ``restart``, its user or an auto-restart script requeues it minutes later: it resumes
from its last checkpoint on other nodes and diverges again at the same step, since the weights
and the data are the same. Each divergence is a label of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import numpy as np

from medic.simulate.faults import fault_time
from medic.simulate.frameworks import framework
from medic.simulate.plan import Run
from medic.simulate.recipe import Fault, Scenario, inject_with
from medic.simulate.world import World

PRINTS_LOSS = ("megatron", "torchtitan", "hf_trainer", "lightning")
"""Frameworks whose progress lines carry the loss (the simulated DeepSpeed engine's do not)."""


@dataclass(frozen=True)
class NanDivergence(Fault):
    sudden: bool | None = None
    """The loss reads NaN at once (default: from the seed; otherwise it climbs tenfold every
    few logged steps, overflows to inf and then reads NaN)."""
    restart: bool = False
    """The job is requeued minutes later, resumes from its checkpoint and diverges again at
    the same step."""


OVERFLOW = 1e6
"""A diverging loss past this is printed as inf, and as NaN from the next step on."""


def diverged(steps: np.ndarray, loss: np.ndarray, start: int, decade: int) -> np.ndarray:
    """``loss`` diverging from step ``start``: tenfold every ``decade`` steps until it overflows
    (the first step past ``OVERFLOW`` prints inf, every later one NaN: the weights are NaN by
    then); NaN at once when ``decade`` is 0. Every attempt that reaches ``start`` diverges
    there (the same weights, the same data)."""
    past = steps >= start
    if decade <= 0:
        return np.where(past, np.nan, loss)
    grown = np.where(past, loss * 10.0 ** ((steps - start + 1) / decade), loss)
    over = past & (grown > OVERFLOW)
    first = over & ~np.concatenate(([False], over[:-1]))
    result: np.ndarray = np.where(first, np.inf, np.where(over, np.nan, grown))
    return result


def nan_divergence(
    world: World,
    run: Run,
    sudden: bool | None,
    restart: bool | None,
    at_min: float | None,
) -> None:
    """From a time drawn as for any fault, ``run``'s job's loss diverges at the next step."""
    rng = world.rng
    job = run.job
    if job.framework not in PRINTS_LOSS:
        job.framework = str(rng.choice(PRINTS_LOSS))
    again = bool(restart)
    t = fault_time(world, run, 1200.0 if again else 600.0, at_min)
    step = run.schedule.last_step_before(t)[0] + 1
    every = job.spec.log_every
    saved = [p.step for p in run.schedule.pauses if p.kind == "ckpt" and p.end < t]
    if again:
        # A restart replays the steps since the checkpoint it resumes from: a divergence a few
        # prints after the last save (or the checkpoint the attempt began from), so that the
        # replay fits in the recording.
        soon = (saved[-1] if saved else run.first_step) + every * int(rng.integers(2, 6))
        printed = _first_print_from(run, soon)
        if soon < step and printed is not None and printed >= max(60.0, run.train_start):
            step = soon
    sudden = bool(rng.random() < 0.4) if sudden is None else sudden
    decade = 0 if sudden else every * int(rng.integers(1, 3))
    curve = partial(diverged, start=step, decade=decade)
    job.spec = dataclasses.replace(job.spec, loss_curve=curve)
    onset = _first_print_from(run, step)
    if onset is None or onset >= world.seconds:
        return
    how = "NaN at once" if sudden else f"tenfold every {decade} steps, then inf and NaN"
    world.label(job, "nan_divergence", onset, note=f"loss diverges from step {step}: {how}")
    if again:
        _requeue(world, run, onset + float(rng.uniform(180.0, 420.0)), step, how)


def _first_print_from(run: Run, step: int) -> float | None:
    """When ``run`` first prints its loss at or after ``step`` (None: never)."""
    sched = run.schedule
    every = framework(run.job.framework).loss_every(run.job.spec)
    printed = (sched.steps >= step) & (sched.steps % every == 0) & (sched.ends < run.stop)
    if not printed.any():
        return None
    return float(sched.ends[printed.argmax()])


def _requeue(world: World, run: Run, at: float, step: int, how: str) -> None:
    """The job is requeued at ``at`` and resumes from its last checkpoint before ``step``."""
    if at > world.seconds - 300.0:
        return
    job = run.job
    world.finish(run, at, "REQUEUED", None, "requeue", exit_at=at + 0.6)
    world.slurm.job(at + 1.0, job.job_id, "PENDING", reason="BeginTime")
    restart = at + float(world.rng.uniform(121.0, 200.0))
    nodes = world.pool.allocate(len(run.nodes), restart)
    if nodes is None:
        return
    saved = [p.step for p in run.schedule.pauses if p.kind == "ckpt" and p.step < step]
    again = world.add_run(job, nodes, restart, first_step=saved[-1] if saved else run.first_step)
    onset = _first_print_from(again, step)
    if onset is not None and onset < world.seconds:
        world.label(job, "nan_divergence", onset, note=f"diverges again from step {step} ({how})")


SCENARIO = Scenario(
    "nan_divergence",
    "The training loss of a job goes NaN, or climbs by orders of magnitude to inf and NaN, "
    "while it runs on at full speed; often requeued, it diverges again at the same step.",
    "nan_divergence",
    NanDivergence,
    inject_with(nan_divergence, "sudden", "restart"),
    # A job alone, long enough for its requeued attempt to diverge again.
    datasets=((2, {"jobs": 0, "job_nodes": 2, "duration_min": 40.0, "restart": True}),),
)
