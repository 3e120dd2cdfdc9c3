"""Builds one recording from a scenario: lays out the cluster and its jobs, injects the
scenario's fault(s) and traps, then renders logs, telemetry, scheduler rows and labels."""

from __future__ import annotations

import dataclasses
import zlib
from functools import partial
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema
from medic.config import ConfigError, to_dict
from medic.recording import Recording, make_meta
from medic.simulate import delivery, traps
from medic.simulate.joblogs import render_run
from medic.simulate.phases import phase_effects
from medic.simulate.plan import GpuEffect, Run, paint_modes
from medic.simulate.recipe import TRAPS, Common, Scenario
from medic.simulate.scenarios import FAULTS, Mixed
from medic.simulate.telemetry import GpuPlan, Holding, render_gpu
from medic.simulate.variation import Variation
from medic.simulate.world import World
from medic.timeutil import US

SIZES = np.array([2, 4, 8, 16, 32, 64, 128])
SIZE_WEIGHTS = np.array([0.3, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02])


def seeded(name: str, seed: int) -> np.random.Generator:
    """The generator of one (scenario, seed): stable across processes and platforms."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])


def compose(scenario: Scenario, seed: int, params: Common, perturbed: bool = False) -> Recording:
    """One recording of ``scenario``: every random choice comes from (scenario, seed), in a
    fixed order, so the same inputs give the same tables. ``perturbed`` draws the realistic
    variation from a generator of its own, leaving the plain draws as they were."""
    rng = seeded(scenario.name, seed)
    seconds = round((params.duration_min or rng.uniform(20.0, 90.0)) * 60)
    featured_nodes = params.job_nodes or _featured_size(rng)
    forced = set(params.traps if params.traps is not None else scenario.default_traps)
    chosen = forced | {t for t in TRAPS if rng.random() < 0.25}
    endings = sum(1 for t in traps.ENDINGS if t in forced)
    jobs = params.jobs if params.jobs is not None else max(int(rng.integers(1, 4)), 2 * endings)
    faulty: list[int] = []
    if isinstance(params, Mixed):
        count = params.faults if params.faults is not None else int(rng.integers(2, 4))
        faulty = [_size(rng, max(2, min(8, featured_nodes))) for _ in range(count)]
    if params.cluster_nodes:
        cluster = params.cluster_nodes
        background = None if params.jobs is None else [_size(rng, 8) for _ in range(jobs)]
    else:
        background = [_size(rng, max(2, min(8, featured_nodes))) for _ in range(jobs)]
        cluster = featured_nodes + sum(faulty) + sum(background) + int(rng.integers(1, 3))
    world = World(rng, seconds, cluster)
    if perturbed:
        world.variation = Variation.draw(seeded(f"{scenario.name}/perturbed", seed), world)

    featured = _featured(world, featured_nodes, params, "long_startup" in chosen)
    if featured is None:
        raise ConfigError(
            f"{scenario.name}: cluster_nodes={cluster} is too small for job_nodes={featured_nodes}"
        )
    if scenario.inject is not None:
        _shape_for_fault(world, featured)
        scenario.inject(world, featured, params)
    elif "checkpoint_pause" in chosen or "evaluation" in chosen:
        _long_pauses(world, featured, "evaluation" in chosen)
    _mixed_faults(world, faulty)
    _background(world, background, chosen)
    _cluster_traps(world, chosen)
    if world.variation is not None:
        world.variation.after_plan(world)
    return _render(world, scenario, seed, params)


def _size(rng: np.random.Generator, cap: int) -> int:
    allowed = cap >= SIZES
    weights = SIZE_WEIGHTS[allowed] / SIZE_WEIGHTS[allowed].sum()
    return int(rng.choice(SIZES[allowed], p=weights))


def _featured_size(rng: np.random.Generator) -> int:
    return int(rng.integers(2, 9)) if rng.random() < 0.85 else int(rng.integers(9, 17))


def _featured(world: World, nodes: int, params: Common, long_startup: bool) -> Run | None:
    rng = world.rng
    if long_startup or rng.random() < 0.45:
        start = float(rng.uniform(0.0, world.seconds * 0.12))
    else:
        start = -float(rng.uniform(600.0, 3 * 3600.0))
    run = world.new_job(nodes, start, framework=params.framework)
    if run is not None and long_startup:
        spec = run.job.spec
        run.job.spec = dataclasses.replace(spec, startup_s=float(rng.uniform(300.0, 480.0)))
        world.move_start(run, run.start)
        run.job.traps.append("long_startup")
    return run


def _shape_for_fault(world: World, run: Run) -> None:
    """Leave the fault room: training must be under way well before the recording ends."""
    latest_start = world.seconds * 0.35 - run.job.spec.startup_s
    if run.start > latest_start:
        world.move_start(run, max(-run.job.spec.startup_s - 600.0, latest_start))


def _long_pauses(world: World, run: Run, evaluation: bool) -> None:
    """Checkpoints every 8-15 minutes taking 1-6 minutes each (and evaluations)."""
    rng = world.rng
    spec = run.job.spec
    every = spec.log_every * max(1, round(rng.uniform(480, 900) / spec.step_s / spec.log_every))
    eval_every = 0
    if evaluation:
        eval_every = spec.log_every * max(
            1, round(rng.uniform(600, 1200) / spec.step_s / spec.log_every)
        )
    run.job.spec = dataclasses.replace(
        spec, ckpt_every=every, ckpt_s=(60.0, 360.0), eval_every=eval_every
    )
    run.ckpt_pauses = rng.uniform(60.0, 360.0, run.ckpt_pauses.size)
    run.invalidate()


def _mixed_faults(world: World, sizes: list[int]) -> None:
    """Extra jobs of the given sizes, each hit by a fault of a different kind."""
    rng = world.rng
    kinds = [str(k) for k in rng.permutation(sorted({str(s.label_kind) for s in FAULTS.values()}))]
    for i, size in enumerate(sizes):
        kind = kinds[i % len(kinds)]
        scenario = FAULTS[
            str(rng.choice(sorted(n for n, s in FAULTS.items() if s.label_kind == kind)))
        ]
        run = world.new_job(size, -float(rng.uniform(600.0, 7200.0)))
        if run is None:
            continue
        _shape_for_fault(world, run)
        if scenario.inject is not None:
            scenario.inject(world, run, scenario.params())


def _background(world: World, sizes: list[int] | None, chosen: set[str]) -> None:
    """Other jobs on the cluster: some started before the recording, some during it; some end
    inside it (normally); freed nodes get the next job."""
    rng = world.rng
    endings = [e for e in traps.ENDINGS if e in chosen]
    slow = "slow_job" in chosen
    capped = "power_cap" in chosen
    queue = list(sizes) if sizes is not None else None
    misses = 0
    while misses < 5:
        if queue is not None:
            if not queue:
                break
            size = queue.pop(0)
        else:
            free = world.pool.free_nodes(world.seconds).size
            if free <= max(2, world.cluster.size // 10):
                break
            size = max(1, min(_size(rng, 128), free - max(1, world.cluster.size // 20)))
        before = rng.random() < 0.6
        start = (
            -float(rng.uniform(600.0, 4 * 3600.0))
            if before
            else float(rng.uniform(0.0, world.seconds * 0.5))
        )
        run = world.new_job(size, start) or world.new_job(size, world.seconds * 0.5)
        if run is None:
            misses += 1
            continue
        if slow:
            traps.slow_job(world, run)
            slow = False
        how = endings[0] if endings else None
        if how is None and rng.random() < 0.25:
            how = str(rng.choice(traps.ENDINGS))
        if how is not None and traps.end_normally(world, run, how, 0.0):
            if endings and endings[0] == how:
                endings.pop(0)
            if how != "requeue":
                _successor(world, run)
        if capped and traps.power_cap(world, run):
            capped = False


def _successor(world: World, ended: Run) -> None:
    """A queued job starts on the nodes a finished job freed (staggered starts)."""
    start = ended.end + float(world.rng.uniform(20.0, 600.0))
    if start < world.seconds - 120:
        world.new_job(len(ended.nodes), start)


def _cluster_traps(world: World, chosen: set[str]) -> None:
    traps.journal_noise(world)
    if "benign_xid" in chosen:
        for _ in range(int(world.rng.integers(1, 3))):
            traps.benign_xid(world)
    if "ecc_sbe" in chosen:
        traps.counter_ticks(world)
    if "scrape_gap" in chosen:
        traps.scrape_gap(world)
    if "admin_drain" in chosen:
        traps.admin_drain(world)
    if "throttle_blip" in chosen:
        for _ in range(int(world.rng.integers(1, 4))):
            traps.throttle_blip(world)


def _render(world: World, scenario: Scenario, seed: int, params: Common) -> Recording:
    runs = [run for job in world.jobs for run in job.runs]
    for run in runs:
        render_run(world, run)
    if world.rng.random() < 0.75:
        _snapshot(world, runs)
    gpu = render_gpu(_gpu_plan(world, runs), world.rng)
    t0, t1 = world.clock.t0_us, world.clock.t0_us + world.seconds * US
    outside = (pl.col("time") < t0) | (pl.col("time") >= t1)
    for node, t in world.silent.items():
        silent = (pl.col("node") == world.host(node)) & (pl.col("time") >= world.clock.at(t))
        outside = outside | silent
    variation = world.variation
    extra = {} if variation is None else {"perturbation": variation.meta(world)}
    meta = make_meta(
        f"{scenario.name}-{'s' if variation is None else 'p'}{seed}",
        t0,
        t1,
        description=scenario.description,
        generator="medic simulate",
        scenario=scenario.name,
        seed=seed,
        params=to_dict(params),
        traps=sorted({*world.traps, *(t for job in world.jobs for t in job.traps)}),
        jobs={job.job_id: job.framework for job in world.jobs},
        **extra,
    )
    return Recording(
        meta=meta,
        logs=world.sink.table(
            drop=outside,
            deliver=None
            if variation is None
            else partial(delivery.deliver, world=world, variation=variation),
        ),
        gpu=gpu,
        scheduler=world.slurm.table(world.clock, world.seconds),
        labels=_labels(world),
    )


def _gpu_plan(world: World, runs: list[Run]) -> GpuPlan:
    """What the telemetry is generated from: every run's allocation and modes, every effect."""
    effects = list(world.effects)
    for run in runs:
        effects.extend(run.effects)
        if world.variation is not None:
            effects.extend(phase_effects(run, world.variation.rng))
        elif run.holdups or run.solo_eval or run.writers:
            effects.extend(phase_effects(run, world.rng))
        cap = run.job.power_cap_w
        if cap is not None:
            effects.extend(GpuEffect(n, -1, "capped", run.start, run.end, cap) for n in run.nodes)
    holdings = [
        Holding(
            job_id=run.job.job_id,
            nodes=run.nodes,
            start=run.start,
            end=run.end,
            modes=paint_modes(run, world.seconds),
            mem_mib=run.job.spec.mem_mib,
            power_w=run.job.spec.power_w,
            startup_s=run.job.spec.startup_s,
        )
        for run in runs
    ]
    return GpuPlan(
        cluster=world.cluster,
        t0_us=world.clock.t0_us,
        seconds=world.seconds,
        holdings=holdings,
        effects=effects,
        counters=world.counters,
        ports=world.ports,
        drop=world.drops,
        protect=world.protect,
        miss_rate=world.miss_rate,
        cadence=world.cadence,
        cadence_offset=world.cadence_offset,
    )


def _snapshot(world: World, runs: list[Run]) -> None:
    """The collector's first poll: every running job and every node's state at the start."""
    held: set[int] = set()
    for run in runs:
        if run.start < 0 < run.end:
            world.slurm.job(0.0, run.job.job_id, "RUNNING", nodes=world.hosts(run.nodes))
            held.update(run.nodes)
    for node in range(world.cluster.size):
        world.slurm.node(0.0, world.host(node), "ALLOCATED" if node in held else "IDLE")


def _labels(world: World) -> pa.Table:
    if not world.labels:
        return schema.empty(schema.LABELS)
    labels = sorted(world.labels, key=lambda row: row["onset"])
    columns: dict[str, Any] = {name: [row[name] for row in labels] for name in schema.LABELS.names}
    return pa.Table.from_pydict(columns, schema=schema.LABELS)
