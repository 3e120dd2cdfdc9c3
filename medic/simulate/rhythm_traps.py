"""Healthy traps in a job's own rhythm: silences that recur, or that are long for the job, and
are no hang. None of them is labelled.

- ``silent_pauses``: a training loop that, every N steps, evaluates and then saves from rank 0
  alone (nanoGPT's ``train.py`` runs ``estimate_loss()`` and ``torch.save`` under
  ``if iter_num % eval_interval == 0 and master_process``), while every other rank goes on to
  the next step and waits for rank 0 in its gradient all-reduce, NCCL kernels spinning. Nothing
  is printed when the pause begins: the evaluation's result comes when it is over, and the
  frameworks' own "saving" lines are INFO-level messages that their default log level hides
  (the Hugging Face Trainer's ``log_level="passive"`` keeps transformers at WARNING; Lightning's
  ``ModelCheckpoint`` prints only with ``verbose=True``). About 45 s every few minutes.
- ``sparse_printing``: a job that prints its progress every 4 to 6.5 minutes (Megatron-LM's
  ``--log-interval`` of 100 iterations at a few seconds each), saving from rank 0 with the
  others in the save's closing barrier (Lightning's ``strategy.barrier`` after
  ``save_checkpoint``), unannounced, between two of its lines.
- ``loader_stalls``: one rank's input pipeline stalls for 30 to 120 s at a time (a slow shard on
  network storage; PyTorch's ``DataLoader`` waits for its workers without a timeout by default,
  ``timeout=0``): that rank's GPU sits idle while every other rank spins in the next collective.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from medic.simulate.plan import Holdup, Run
from medic.simulate.workload import LOG_EVERY, log_uniform
from medic.simulate.world import World


def silent_pauses(world: World, run: Run, at_min: float | None = None) -> None:
    """Rank 0 evaluates, then saves, every 4-8 minutes of training (about 45 s in all), while
    the other ranks wait in the next collective; only the evaluation's result is printed."""
    rng = world.rng
    job = run.job
    spec = job.spec
    step = spec.step_s * job.user_slow
    log_every = max([n for n in LOG_EVERY if n * step <= 30.0] or [1])
    every = log_every * max(1, round(rng.uniform(240.0, 480.0) / step / log_every))
    job.spec = dataclasses.replace(spec, log_every=log_every, eval_every=every, ckpt_every=every)
    run.eval_pauses = rng.uniform(24.0, 32.0, run.eval_pauses.size)
    run.ckpt_pauses = rng.uniform(14.0, 20.0, run.ckpt_pauses.size)
    _rank0_saves(run)
    run.solo_eval = True
    run.invalidate()
    job.traps.append("silent_pauses")


def sparse_printing(world: World, run: Run, at_min: float | None = None) -> None:
    """The job prints a progress line every 233-392 s and saves unannounced from rank 0 every
    few lines, 30-90 s at a time."""
    rng = world.rng
    job = run.job
    spec = job.spec
    step = spec.step_s * job.user_slow
    log_every = max(1, round(rng.uniform(233.0, 392.0) / step))
    job.spec = dataclasses.replace(
        spec, log_every=log_every, ckpt_every=log_every * int(rng.integers(2, 4)), eval_every=0
    )
    run.ckpt_pauses = rng.uniform(30.0, 90.0, run.ckpt_pauses.size)
    _rank0_saves(run)
    run.invalidate()
    job.traps.append("sparse_printing")


def loader_stalls(world: World, run: Run, at_min: float | None = None) -> None:
    """One rank's data loader stalls 30-120 s at a time, every 2-6 minutes of training."""
    rng = world.rng
    rank = int(rng.integers(run.world_size))
    ends = run.schedule.ends
    if ends.size == 0:
        return
    gaps = rng.uniform(120.0, 360.0, 64)
    times = max(0.0, run.train_start) + np.cumsum(gaps)
    indices = np.unique(np.searchsorted(ends, times[times < ends[-1]]))
    stalls = [Holdup(int(i), log_uniform(rng, 30.0, 120.0), rank) for i in indices]
    for stall in stalls:
        run.durations[stall.index] += stall.seconds
    run.holdups = sorted([*run.holdups, *stalls], key=lambda h: h.index)
    run.invalidate()
    run.job.traps.append("loader_stalls")


def _rank0_saves(run: Run) -> None:
    """Saves from global rank 0, the other ranks in the closing barrier, announced by nothing."""
    run.ckpt_style = "barrier"
    run.writers = "rank0"
    run.job.announces = False
