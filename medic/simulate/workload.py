"""Draws the jobs a cluster runs: frameworks, speeds, logging and checkpoint cadences, sizes."""

from __future__ import annotations

import numpy as np

from medic.simulate.frameworks import FRAMEWORK_NAMES
from medic.simulate.plan import TrainSpec

# Typical seconds per optimizer step of each framework's usual jobs (log-uniform range).
STEP_RANGE = {
    "megatron": (1.0, 15.0),
    "torchtitan": (0.8, 8.0),
    "deepspeed": (0.5, 6.0),
    "hf_trainer": (0.3, 3.0),
    "lightning": (0.3, 2.0),
}
LOG_EVERY = (1, 5, 10, 20, 50, 100)
PG_TIMEOUTS_S = (600, 600, 600, 300, 900, 1200, 1800)


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def draw_spec(rng: np.random.Generator, framework: str, step_s: float | None = None) -> TrainSpec:
    """A plausible training configuration for ``framework``."""
    if framework not in FRAMEWORK_NAMES:
        raise ValueError(f"unknown framework {framework!r} (known: {', '.join(FRAMEWORK_NAMES)})")
    step = step_s if step_s is not None else log_uniform(rng, *STEP_RANGE[framework])
    # Log at least every step, at most every fifteen minutes.
    choices = [n for n in LOG_EVERY if n * step <= 900] or [1]
    log_every = int(rng.choice(choices))
    ckpt_interval = rng.uniform(600, 2400)
    ckpt_every = max(log_every, round(ckpt_interval / step / log_every) * log_every)
    big = rng.random() < 0.6
    evals = rng.random() < 0.6
    eval_every = (
        max(log_every, round(rng.uniform(900, 2700) / step / log_every) * log_every) if evals else 0
    )
    hours = rng.uniform(3, 30)
    return TrainSpec(
        step_s=step,
        jitter=rng.uniform(0.01, 0.08),
        log_every=log_every,
        ckpt_every=ckpt_every,
        ckpt_s=(60.0, 360.0) if big else (10.0, 60.0),
        eval_every=eval_every,
        eval_s=(30.0, 600.0),
        total_steps=int(hours * 3600 / step),
        global_batch=int(2 ** rng.integers(8, 13)),
        seq_len=int(rng.choice([2048, 4096, 8192])),
        tflops=rng.uniform(150.0, 450.0),
        loss0=rng.uniform(10.0, 11.2),
        loss_floor=rng.uniform(1.8, 2.6),
        lr=float(rng.choice([1e-4, 1.5e-4, 3e-4, 6e-4])),
        mem_mib=float(rng.uniform(40_000, 79_000)),
        power_w=rng.uniform(540.0, 690.0),
        startup_s=rng.uniform(60.0, 480.0),
    )


def step_durations(
    rng: np.random.Generator, spec: TrainSpec, count: int, slow: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-step wall times (log-normal jitter) and which steps stall 1.5-3x (a data loader
    hiccup, garbage collection) with the GPUs idle meanwhile."""
    durations = spec.step_s * slow * rng.lognormal(0.0, spec.jitter, count)
    stalls = rng.random(count) < 0.004
    durations[stalls] *= rng.uniform(1.5, 3.0, int(stalls.sum()))
    return durations, stalls


def pick_framework(rng: np.random.Generator) -> str:
    return str(rng.choice(FRAMEWORK_NAMES))
