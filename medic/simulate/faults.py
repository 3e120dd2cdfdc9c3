"""Faults with their real cascades, injected into one run of a job, each labelled with the
spec's ground truth: kind, onset (the first abnormal row in any signal), culprit nodes (those
to drain; none for software faults) and culprit ranks.

Every injector takes the world, the run and its scenario's parameters, picks the fault's
time (a whole second, so that telemetry rows at or after it are the first to show it),
edits the run's plan and writes the lines, effects, counter events and scheduler rows the
fault causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medic.simulate import cascade, texts
from medic.simulate.cluster import GPUS_PER_NODE, PCI_BUS_IDS, nvrm_bus
from medic.simulate.plan import CounterEvent, GpuEffect, Mode, Run
from medic.simulate.world import World


@dataclass(frozen=True)
class Culprit:
    node: int
    gpu: int
    rank: int


def pick_culprit(world: World, run: Run) -> Culprit:
    i = int(world.rng.integers(len(run.nodes)))
    gpu = int(world.rng.integers(GPUS_PER_NODE))
    return Culprit(run.nodes[i], gpu, i * GPUS_PER_NODE + gpu)


def fault_time(world: World, run: Run, tail: float, at_min: float | None) -> float:
    """When the fault strikes: during training, leaving ``tail`` seconds for the cascade (the
    job is moved to an earlier start when it would still be starting up)."""
    wanted = None if at_min is None else float(round(at_min * 60))
    latest = world.seconds - tail if wanted is None else wanted
    if run.train_start + 240.0 > latest - 60.0:
        spare = float(world.rng.uniform(0.0, 600.0))
        world.move_start(run, min(run.start, latest - 300.0 - run.job.spec.startup_s - spare))
    if wanted is not None:
        return wanted
    earliest = max(run.train_start + 240.0, 90.0)
    if latest <= earliest:
        return float(round(earliest))
    return float(round(world.rng.uniform(earliest, latest)))


def fit_timeout(world: World, run: Run, wanted: int | None, room: float) -> None:
    """Use the requested PG timeout, or shorten the drawn one so its cascade fits."""
    if wanted is not None:
        run.job.pg_timeout_s = wanted
        return
    options = [t for t in (300, 600, 900, 1200, 1800) if t <= room]
    if run.job.pg_timeout_s > room and options:
        run.job.pg_timeout_s = int(world.rng.choice(options))


def xid_line(
    world: World, node: int, gpu: int, xid: int, pid: int, t: float, identity: bool
) -> None:
    """The kernel's Xid report (not tied to any job), with the GPU's identity on first report."""
    text = texts.fill(
        texts.XID_TEXT[xid],
        gpu=gpu,
        partition=int(world.rng.integers(0, 12)),
        subpartition=int(world.rng.integers(0, 2)),
        link=int(world.rng.integers(0, 18)),
    )
    bus = nvrm_bus(gpu)
    lines = []
    if identity:
        uuid = "-".join(f"{int(world.rng.integers(0, 16**n)):0{n}x}" for n in (8, 4, 4, 4, 12))
        serial = int(world.rng.integers(1_650_000_000_000, 1_659_999_999_999))
        lines += [(t, texts.fill(x, bus=bus, uuid=uuid, serial=serial)) for x in texts.GPU_IDENTITY]
    template = texts.XID_LINE[world.driver]
    lines.append((t, texts.fill(template, bus=bus, xid=xid, pid=pid, name="python", text=text)))
    if xid == 79:
        lines += [(t, texts.fill(x, pci=PCI_BUS_IDS[gpu])) for x in texts.FALLEN_OFF_TAIL]
    world.emit_node(node, lines, source="system")
    world.counters.append(CounterEvent(node, gpu, "xid", t, xid))


def others(run: Run, excluded: list[int]) -> np.ndarray:
    ranks = np.arange(run.world_size)
    return ranks[~np.isin(ranks, excluded)]


def block_all(run: Run, at: float) -> None:
    """Progress stops at ``at``; every GPU of the job then spins in its NCCL collective."""
    run.stop = at
    run.after_stop = Mode.WAIT
    run.invalidate()


def kill_task_failed(world: World, run: Run, node: int) -> None:
    """The faulty GPU's process cannot be killed: slurmd drains the node."""
    world.slurm.node(
        run.end + world.rng.uniform(60.0, 90.0),
        world.host(node),
        "IDLE+DRAIN",
        reason="Kill task failed",
    )


def _cuda_error(world: World, run: Run, rank: int, at: float, cuda: str) -> cascade.Exits:
    """The rank dies of a CUDA error at ``at``: a Python traceback half the time, else the
    ProcessGroupNCCL watchdog catching it and aborting the process (SIGABRT)."""
    if world.rng.random() < 0.5:
        return cascade.exception(
            world,
            run,
            np.array([rank]),
            np.array([at]),
            [f"{{p}}RuntimeError: {cuda}", *texts.CUDA_ERROR_HINTS],
        )
    world.emit_ranks(run, [rank], [at], texts.CUDA_WATCHDOG, cuda=cuda)
    return {rank: (at + 0.1, -6)}


# --- GPU hardware faults -------------------------------------------------------------------


def xid79(
    world: World,
    run: Run,
    pg_timeout_s: int | None,
    telemetry: str | None,
    culprit_reports: bool | None,
    at_min: float | None,
) -> None:
    """A GPU falls off the bus. Its rank hangs (or reports a CUDA launch failure); every other
    rank times out in NCCL after the PG timeout; torchrun blames whichever rank died first."""
    rng = world.rng
    fit_timeout(world, run, pg_timeout_s, world.seconds * 0.6)
    t = fault_time(world, run, run.job.pg_timeout_s + 240, at_min)
    bad = pick_culprit(world, run)
    xid_line(world, bad.node, bad.gpu, 79, int(run.pids[bad.rank]), t, rng.random() < 0.7)
    mode = telemetry or ("vanish" if rng.random() < 0.6 else "null")
    world.effects.append(GpuEffect(bad.node, bad.gpu, mode, t))
    block_all(run, t)
    exits: cascade.Exits = {}
    reports = culprit_reports if culprit_reports is not None else rng.random() < 0.3
    if reports:
        at = t + rng.uniform(0.5, 20.0)
        world.emit_ranks(
            run, [bad.rank], [at], texts.CUDA_WATCHDOG, cuda=texts.CUDA_FAILURE["lost"]
        )
        exits[bad.rank] = (at + 0.1, -6)
    enqueued = t - rng.uniform(0.0, min(run.job.spec.step_s, 5.0))
    exits |= cascade.watchdog(world, run, others(run, [bad.rank]), enqueued, lagging=[bad.rank])
    done = cascade.agents(world, run, exits)
    cascade.teardown(world, run, done)
    world.pool.reserve([bad.node])
    if rng.random() < 0.5:
        kill_task_failed(world, run, bad.node)
    world.label(run.job, "gpu_fault", t, [bad.node], [bad.rank], "Xid 79: GPU fell off the bus")


def ecc(world: World, run: Run, xid: int | None, at_min: float | None) -> None:
    """An uncorrectable ECC error (Xid 48/94/95): ecc_dbe rises, the GPU's rank dies with a CUDA
    ECC error, torchrun on that node names it, srun tears the step down."""
    rng = world.rng
    t = fault_time(world, run, 300, at_min)
    bad = pick_culprit(world, run)
    code = xid if xid is not None else int(rng.choice([48, 94, 95]))
    xid_line(world, bad.node, bad.gpu, code, int(run.pids[bad.rank]), t, rng.random() < 0.5)
    world.counters.append(CounterEvent(bad.node, bad.gpu, "ecc_dbe", t, int(rng.integers(1, 3))))
    if code == 48 and rng.random() < 0.6:
        xid_line(world, bad.node, bad.gpu, 63, int(run.pids[bad.rank]), t + 0.02, False)
    block_all(run, t)
    at = t + rng.uniform(0.2, 3.0)
    exits = _cuda_error(world, run, bad.rank, at, texts.CUDA_FAILURE["ecc"])
    exits |= _neighbours_notice(world, run, bad, at)
    done = cascade.agents(world, run, exits)
    cascade.teardown(world, run, done)
    cascade.exited(run, exits)
    world.pool.reserve([bad.node])
    world.label(
        run.job, "gpu_fault", t, [bad.node], [bad.rank], f"Xid {code}: uncorrectable ECC error"
    )


def _neighbours_notice(world: World, run: Run, bad: Culprit, dead_at: float) -> cascade.Exits:
    """Ranks on other nodes that shared rings with the dead rank may see NCCL's remote error
    before srun kills them."""
    if len(run.nodes) < 2 or world.rng.random() < 0.5:
        return {}
    peers = np.array([i * GPUS_PER_NODE + bad.rank % GPUS_PER_NODE for i in range(len(run.nodes))])
    peers = peers[peers != bad.rank][:2]
    at = dead_at + world.rng.uniform(0.5, 8.0, peers.size)
    return cascade.remote_errors(world, run, peers, at, bad.node)


def nvlink(
    world: World, run: Run, precursor: bool | None, pg_timeout_s: int | None, at_min: float | None
) -> None:
    """An NVLink failure (Xid 74), often after minutes of rising NVLink error counters; the
    collective never completes and every rank times out."""
    rng = world.rng
    fit_timeout(world, run, pg_timeout_s, world.seconds * 0.55)
    t = fault_time(world, run, run.job.pg_timeout_s + 240, at_min)
    bad = pick_culprit(world, run)
    onset = t
    if precursor if precursor is not None else rng.random() < 0.5:
        first = t - float(round(rng.uniform(60.0, 600.0)))
        ticks = np.sort(rng.uniform(first, t, int(rng.integers(4, 40))))
        ticks[0] = first
        for tick in ticks:
            world.counters.append(
                CounterEvent(
                    bad.node, bad.gpu, "nvlink_errors", float(tick), int(rng.integers(1, 20))
                )
            )
        onset = min(t, world.first_sample([bad.node], first))
    xid_line(world, bad.node, bad.gpu, 74, int(run.pids[bad.rank]), t, rng.random() < 0.5)
    world.counters.append(
        CounterEvent(bad.node, bad.gpu, "nvlink_errors", t, int(rng.integers(100, 5000)))
    )
    block_all(run, t)
    enqueued = t - rng.uniform(0.0, min(run.job.spec.step_s, 5.0))
    exits = cascade.watchdog(world, run, np.arange(run.world_size), enqueued, lagging=[bad.rank])
    done = cascade.agents(world, run, exits)
    cascade.teardown(world, run, done)
    world.pool.reserve([bad.node])
    world.label(run.job, "gpu_fault", onset, [bad.node], [bad.rank], "Xid 74: NVLink error")


# --- hangs ---------------------------------------------------------------------------------


def hang_ending(world: World, run: Run, t: float, ending: str, stuck: list[int]) -> None:
    """How a hung job ends: the NCCL watchdog, the user's scancel, or not within the recording."""
    rng = world.rng
    if ending == "watchdog":
        enqueued = t - rng.uniform(0.0, min(run.job.spec.step_s, 5.0))
        exits = cascade.watchdog(world, run, others(run, stuck), enqueued, lagging=stuck)
        done = cascade.agents(world, run, exits)
        cascade.teardown(world, run, done)
    elif ending == "cancel":
        end = t + rng.uniform(900.0, max(960.0, world.seconds - t - 60))
        world.finish(run, end, "CANCELLED", None, "cancelled")


def missed_progress(run: Run, onset: float) -> str:
    """When the first progress line that never comes was due, relative to the onset (the
    telemetry shows a hang at once; the logs only when the next line is overdue)."""
    sched = run.schedule
    every = run.job.spec.log_every
    logged = sched.ends[sched.steps % every == 0]
    if logged.size == 0:
        return "no progress line before the hang"
    current = [p for p in sched.pauses if p.end >= run.stop]
    if current:
        return "hung during a " + ("checkpoint save" if current[0].kind == "ckpt" else "evaluation")
    step = float(np.median(sched.durations[-every:]))
    since = int(np.count_nonzero(sched.ends > logged[-1]))
    resumed = max([float(sched.ends[-1])] + [p.end for p in sched.pauses])
    due = resumed + (every - since) * step
    return f"first missed progress line due {max(0.0, due - onset):.0f}s after onset"


def gpu_hang(
    world: World,
    run: Run,
    xid: int | None,
    stuck: str | None,
    pg_timeout_s: int | None,
    at_min: float | None,
) -> None:
    """One GPU stops making progress (its util drops to 0, or it spins at idle power) while
    every other rank spins in NCCL; no error line for many minutes (a GSP or context-switch
    timeout Xid may follow), until the watchdog fires."""
    rng = world.rng
    fit_timeout(world, run, pg_timeout_s, world.seconds * 0.6)
    t = fault_time(world, run, run.job.pg_timeout_s + 240, at_min)
    bad = pick_culprit(world, run)
    style = stuck or str(rng.choice(["idle", "busy"]))
    world.effects.append(
        GpuEffect(bad.node, bad.gpu, "idle", t, np.inf, 1.0 if style == "idle" else 2.0)
    )
    block_all(run, t)
    code = xid if xid is not None else int(rng.choice([119, 109, 0, 0]))
    if code:
        later = t + float(round(rng.uniform(60.0, run.job.pg_timeout_s * 0.8)))
        xid_line(world, bad.node, bad.gpu, code, int(run.pids[bad.rank]), later, False)
    hang_ending(world, run, t, "watchdog", [bad.rank])
    world.pool.reserve([bad.node])
    if run.closing == "failed" and rng.random() < 0.5:
        kill_task_failed(world, run, bad.node)
    onset = world.first_sample(run.nodes, t)
    note = f"GPU hang ({style}); {missed_progress(run, onset)}"
    world.label(run.job, "hang", onset, [bad.node], [bad.rank], note)


def deadlock(
    world: World, run: Run, ending: str | None, pg_timeout_s: int | None, at_min: float | None
) -> None:
    """A software deadlock: every rank waits in a collective that never completes, all GPUs
    spin alike, nothing is printed until the watchdog (if it fires within the recording)."""
    rng = world.rng
    fit_timeout(world, run, pg_timeout_s, world.seconds * 0.6)
    t = fault_time(world, run, min(run.job.pg_timeout_s + 240, world.seconds * 0.5), at_min)
    block_all(run, t)
    how = ending or str(rng.choice(["watchdog", "watchdog", "cancel", "none"]))
    hang_ending(world, run, t, how, [])
    onset = world.first_sample(run.nodes, t)
    note = f"software deadlock (ends by {how}); {missed_progress(run, onset)}"
    world.label(run.job, "hang", onset, [], [], note)


# --- stragglers ----------------------------------------------------------------------------


def slow_down(run: Run, t: float, factor: float, spared: Sequence[int]) -> None:
    """From ``t`` the whole job steps ``factor`` times slower, every GPU but those of the
    ``spared`` ranks waiting on them part of each step."""
    run.slowdowns.append((t, factor))
    run.invalidate()
    wait = 1.0 - 1.0 / factor
    for i, node in enumerate(run.nodes):
        for gpu in range(GPUS_PER_NODE):
            if i * GPUS_PER_NODE + gpu not in spared:
                run.effects.append(GpuEffect(node, gpu, "waiting", t, run.end, wait))


def _straggler(world: World, run: Run, bad: Culprit, t: float, factor: float, note: str) -> None:
    """From ``t`` the whole job steps ``factor`` times slower, every GPU but the culprit's
    waiting on it; labelled a straggler blaming the culprit from its first sample on."""
    slow_down(run, t, factor, [bad.rank])
    world.label(
        run.job, "straggler", world.first_sample([bad.node], t), [bad.node], [bad.rank], note
    )


def thermal(world: World, run: Run, slowdown: float | None, at_min: float | None) -> None:
    """One GPU's cooling degrades: its temperature climbs for minutes until thermal slowdown
    kicks in (SW/HW thermal clocks-event bits, lower SM clock); from then on the whole job's
    steps are 10-60 % slower. The onset is the start of the slowdown."""
    rng = world.rng
    t = fault_time(world, run, 900, at_min)
    bad = pick_culprit(world, run)
    factor = slowdown or float(rng.uniform(1.1, 1.6))
    level = float(np.clip((factor - 1.0) / 0.6, 0.2, 1.0))
    heating = max(0.0, t - float(round(rng.uniform(120.0, 600.0))))
    world.effects.append(GpuEffect(bad.node, bad.gpu, "heating", heating, t, level))
    world.effects.append(GpuEffect(bad.node, bad.gpu, "thermal", t, np.inf, level))
    _straggler(world, run, bad, t, factor, f"thermal throttling, job {factor:.2f}x slower")


def pcie(world: World, run: Run, slowdown: float | None, at_min: float | None) -> None:
    """A GPU's PCIe link degrades: replay counters climb and the job slows by 10-40 %."""
    rng = world.rng
    t = fault_time(world, run, 900, at_min)
    bad = pick_culprit(world, run)
    factor = slowdown or float(rng.uniform(1.1, 1.4))
    rate = rng.uniform(0.2, 3.0)
    horizon = world.seconds - t
    count = int(rng.poisson(rate * horizon)) + 1
    ticks = np.sort(t + rng.uniform(0.0, horizon, count))
    ticks[0] = t
    amounts = rng.integers(1, 12, count)
    for tick, amount in zip(ticks, amounts, strict=True):
        world.counters.append(
            CounterEvent(bad.node, bad.gpu, "pcie_replay", float(tick), int(amount))
        )
    _straggler(world, run, bad, t, factor, f"PCIe replays, job {factor:.2f}x slower")


# --- software crashes ----------------------------------------------------------------------


def _crash(world: World, run: Run, t: float, exits: cascade.Exits, note: str) -> None:
    first = min(exits.values())[0]
    block_all(run, min(t, first))
    culprit = sorted(exits)
    exits = dict(exits)
    if len(culprit) == 1:
        rank = culprit[0]
        exits |= _neighbours_notice(
            world, run, Culprit(run.rank_node(rank), rank % GPUS_PER_NODE, rank), first
        )
    done = cascade.agents(world, run, exits)
    cascade.teardown(world, run, done)
    cascade.exited(run, exits)
    # When every rank raises the same error, no rank is at its root.
    ranks = [] if len(culprit) == run.world_size else culprit
    world.label(run.job, "crash", t, [], ranks, note)


def oom(world: World, run: Run, ranks: int | None, at_min: float | None) -> None:
    """``torch.OutOfMemoryError`` on one rank (or a few): no node at fault."""
    rng = world.rng
    t = fault_time(world, run, 240, at_min)
    count = ranks or (1 if rng.random() < 0.7 else int(rng.integers(2, 9)))
    chosen = np.sort(rng.choice(run.world_size, size=min(count, run.world_size), replace=False))
    at = t + np.concatenate(([0.0], rng.uniform(0.0, 2.0, chosen.size - 1)))
    exits: cascade.Exits = {}
    for rank, when in zip(chosen, at, strict=True):
        used = rng.uniform(74.0, 78.5)
        error = texts.fill(
            texts.OOM,
            alloc=rng.choice([0.5, 1.0, 2.5, 4.0, 8.0]),
            free=79.11 - used - 0.3,
            used=used,
            allocated=used - 3.1,
            reserved=rng.uniform(0.5, 3.0),
            local_rank=int(rank) % GPUS_PER_NODE,
        )
        exits |= cascade.exception(world, run, np.array([rank]), np.array([when]), [error])
    _crash(world, run, t, exits, f"CUDA out of memory on {chosen.size} rank(s)")


def user_error(world: World, run: Run, error: str | None, at_min: float | None) -> None:
    """A user bug: a data-pipeline KeyError / missing shard on one rank mid-run, or a ValueError
    on every rank (a shape or config mistake), often while the job is still starting up."""
    rng = world.rng
    kind = error or str(rng.choice(["KeyError", "FileNotFoundError", "ValueError"]))
    if kind == "ValueError" and at_min is None and rng.random() < 0.5:
        world.move_start(run, float(round(rng.uniform(30.0, world.seconds * 0.3))))
        t = float(round(run.start + run.job.spec.startup_s * rng.uniform(0.4, 0.95)))
    else:
        t = fault_time(world, run, 240, at_min)
    if kind == "ValueError":
        ranks = np.arange(run.world_size)
        at = t + world.jitter(ranks.size, 0.3)
        at[0] = t
        lines = list(texts.USER_ERRORS[kind])
    else:
        ranks = np.array([int(rng.integers(run.world_size))])
        at = np.array([t])
        lines = [*texts.DATALOADER_FRAMES, *texts.USER_ERRORS[kind]]
    exits = cascade.exception(world, run, ranks, at, lines, shard=int(rng.integers(100, 999)))
    _crash(world, run, t, exits, f"user code raised {kind}")


def illegal_access(world: World, run: Run, at_min: float | None) -> None:
    """A kernel bug: the driver reports an MMU fault (Xid 31) or a graphics exception (Xid 13)
    on the rank's GPU and the rank dies of an illegal memory access. The kernel log names a
    GPU, yet no node is at fault."""
    rng = world.rng
    t = fault_time(world, run, 240, at_min)
    bad = pick_culprit(world, run)
    code = int(rng.choice([31, 13]))
    xid_line(world, bad.node, bad.gpu, code, int(run.pids[bad.rank]), t, False)
    at = t + rng.uniform(0.05, 1.5)
    exits = _cuda_error(world, run, bad.rank, at, texts.CUDA_FAILURE["illegal"])
    _crash(world, run, t, exits, f"illegal memory access (Xid {code}), application bug")


def segfault(world: World, run: Run, at_min: float | None) -> None:
    """A segmentation fault in a rank (exit code -11): a software crash, no node at fault."""
    t = fault_time(world, run, 240, at_min)
    rank = int(world.rng.integers(run.world_size))
    world.emit_ranks(run, [rank], [t], texts.SEGFAULT, gap_s=0.0002)
    _crash(world, run, t, {rank: (t + 0.05, -11)}, "segmentation fault")


# --- node failure --------------------------------------------------------------------------


def node_failure(
    world: World,
    run: Run,
    slurmd_timeout_s: int | None,
    requeue: bool | None,
    fast_errors: bool | None,
    at_min: float | None,
) -> None:
    """A node dies: its logs and telemetry stop; peers' NCCL errors come later; Slurm marks it
    NOT_RESPONDING after SlurmdTimeout, then DOWN, and the job NODE_FAIL (often requeued)."""
    rng = world.rng
    timeout = slurmd_timeout_s or int(rng.choice([300, 300, 120, 180, 600]))
    t = fault_time(world, run, timeout * 1.7 + 300, at_min)
    i = int(rng.integers(len(run.nodes)))
    dead = run.nodes[i]
    world.silent[dead] = t
    world.drops.append((dead, t, np.inf))
    world.down.add(dead)
    world.pool.reserve([dead])
    block_all(run, t)
    not_responding = t + timeout * rng.uniform(0.8, 1.05)
    down = t + timeout * rng.uniform(1.4, 1.7)
    host = world.host(dead)
    exits: cascade.Exits = {}
    dead_ranks = np.arange(i * GPUS_PER_NODE, (i + 1) * GPUS_PER_NODE)
    if fast_errors if fast_errors is not None else rng.random() < 0.6:
        peers = np.array(
            [
                r
                for r in range(run.world_size)
                if r // GPUS_PER_NODE in ((i - 1) % len(run.nodes), (i + 1) % len(run.nodes))
                and r not in dead_ranks
            ]
        )
        exits = cascade.remote_errors(
            world, run, peers, t + rng.uniform(20.0, 90.0, peers.size), dead
        )
    else:
        enqueued = t - rng.uniform(0.0, min(run.job.spec.step_s, 5.0))
        if enqueued + run.job.pg_timeout_s < down:
            exits = cascade.watchdog(
                world, run, others(run, list(dead_ranks)), enqueued, lagging=list(dead_ranks)
            )
    exits = {r: e for r, e in exits.items() if e[0] < down}
    cascade.agents(world, run, exits, skip=[dead])
    cascade.exited(run, exits)
    world.slurm.node(not_responding, host, "ALLOCATED+NOT_RESPONDING")
    world.slurm.node(down, host, "DOWN+NOT_RESPONDING", reason="Not responding")
    ctld = world.ctld_pid
    world.emit_controller(
        [
            (not_responding, texts.fill(texts.SLURMCTLD_NOT_RESPONDING, pid=ctld, node=host)),
            (down, texts.fill(texts.SLURMCTLD_DOWN, pid=ctld, node=host)),
            (
                down + 0.01,
                texts.fill(texts.SLURMCTLD_KILL, pid=ctld, raw=run.job.raw_id, node=host),
            ),
        ]
    )
    when = world.clock.stamps([down], "slurm")[0]
    for node in run.nodes:
        if node == dead:
            continue
        line = texts.fill(
            texts.SLURM_CANCELLED,
            what=f"STEP {run.job.raw_id}.0",
            node=world.host(node),
            when=when,
            why=texts.CANCEL_REASONS["node_fail"],
        )
        world.emit_node(node, [(down + 0.3, line)], source="slurm", job_id=run.job.job_id)
    if run.nodes[0] != dead:
        world.emit_node(
            run.nodes[0],
            [
                (down + 0.2, texts.fill(texts.SLURM_NODE_FAILURE, node=host)),
                (down + 0.25, texts.SLURM_STEP_ABORTED),
            ],
            source="slurm",
            job_id=run.job.job_id,
        )
    world.finish(run, down + 1.0, "NODE_FAIL", None, "none", exit_at=down + 0.5)
    again = requeue if requeue is not None else rng.random() < 0.7
    if again:
        _requeue(world, run, down + 1.0, dead)
    world.label(
        run.job,
        "node_failure",
        world.sample_time(dead, t),
        [dead],
        list(dead_ranks),
        f"node went silent (SlurmdTimeout {timeout}s)",
    )


def _requeue(world: World, run: Run, at: float, dead: int) -> None:
    """Slurm requeues the job; it restarts on other nodes from its last checkpoint."""
    job = run.job
    world.emit_controller(
        [
            (
                at,
                texts.fill(
                    texts.SLURMCTLD_REQUEUE,
                    pid=world.ctld_pid,
                    raw=job.raw_id,
                    node=world.host(dead),
                ),
            )
        ]
    )
    world.slurm.job(at + 0.5, job.job_id, "REQUEUED", reason="NodeFail")
    world.slurm.job(at + 1.5, job.job_id, "PENDING", reason="BeginTime")
    restart = at + world.rng.uniform(121.0, 180.0)
    nodes = world.pool.allocate(len(run.nodes), restart, exclude=(dead,))
    if nodes is None:
        return
    ckpts = [p.step for p in run.schedule.pauses if p.kind == "ckpt" and p.end < run.stop]
    resume = ckpts[-1] if ckpts else run.first_step
    world.add_run(job, nodes, restart, first_step=resume)
    job.traps.append("requeued_restart")
