"""How a failure propagates through a distributed job, as PyTorch, torchrun and Slurm print
it: NCCL watchdog timeouts on the ranks left waiting, peers' NCCL network errors, torchrun's
SIGTERMs and ChildFailedError (whose root cause is merely the first local rank to die), and
srun/slurmstepd tearing the step down before Slurm records the job FAILED."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from medic.simulate import texts
from medic.simulate.cluster import GPUS_PER_NODE
from medic.simulate.frameworks import framework
from medic.simulate.plan import GpuEffect, Run
from medic.simulate.world import World

OPS = ("ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST")

# rank -> (exit time, exit code)
Exits = dict[int, tuple[float, int]]


def watchdog(
    world: World,
    run: Run,
    ranks: np.ndarray,
    enqueued_at: float,
    lagging: Sequence[int] = (),
) -> Exits:
    """Every rank in ``ranks`` times out in the collective enqueued at ``enqueued_at`` once the
    job's PG timeout has passed; ``lagging`` ranks completed one collective fewer. Returns
    when each rank dies (SIGABRT)."""
    job = run.job
    rng = world.rng
    timeout = job.pg_timeout_s
    fire = enqueued_at + timeout + rng.uniform(0.05, 1.5) + world.jitter(ranks.size, 0.4)
    seq = int(rng.integers(2_000, 400_000))
    completed = np.where(np.isin(ranks, lagging), seq - 2, seq - 1)
    ran_ms = np.round((fire - enqueued_at) * 1000).astype(np.int64)
    numel = int(rng.choice([1, 4096, 131072000, 262144000, 52428800]))
    world.emit_ranks(
        run,
        ranks,
        fire,
        texts.WATCHDOG[job.torch_gen],
        gap_s=0.0004,
        per_rank={"ran_ms": ran_ms, "completed": completed},
        seq=seq,
        enqueued=seq,
        op=str(rng.choice(OPS)),
        numel=numel,
        timeout_ms=timeout * 1000,
    )
    return {int(r): (float(t) + 0.05, -6) for r, t in zip(ranks, fire, strict=True)}


def remote_errors(world: World, run: Run, ranks: np.ndarray, at: np.ndarray, peer: int) -> Exits:
    """Ranks whose NCCL connection to ``peer``'s node broke abort with ncclRemoteError."""
    if ranks.size == 0:
        return {}
    job = run.job
    style = "new" if job.torch_gen == "new" else "old"
    peer_ip = world.cluster.ips[peer]
    ib = [
        texts.fill(
            texts.NCCL_IB_ERROR[style], peer_ip=peer_ip, port=int(p), ip=world.cluster.ips[n]
        )
        for p, n in zip(
            world.rng.integers(30000, 60000, ranks.size),
            np.asarray(run.nodes)[ranks // GPUS_PER_NODE],
            strict=True,
        )
    ]
    world.emit_ranks(
        run,
        ranks,
        at,
        texts.REMOTE_ERROR[style],
        gap_s=0.0003,
        per_rank={"ib_error": ib},
        nccl=job.nccl,
    )
    return {int(r): (float(t) + 0.02, -6) for r, t in zip(ranks, at, strict=True)}


def exception(
    world: World,
    run: Run,
    ranks: np.ndarray,
    at: np.ndarray,
    error: Sequence[str],
    **values: Any,
) -> Exits:
    """A Python exception escapes the training loop on ``ranks`` (traceback, exit code 1)."""
    fw = framework(run.job.framework)
    lines = ["{p}Traceback (most recent call last):", *fw.loop_frames, *error]
    world.emit_ranks(run, ranks, at, lines, gap_s=0.0002, **values)
    return {int(r): (float(t) + 0.3, 1) for r, t in zip(ranks, at, strict=True)}


def agents(world: World, run: Run, exits: Exits, skip: Sequence[int] = ()) -> dict[int, float]:
    """torchrun's agent on every node with a dead worker: SIGTERM the others, log the failure and
    raise ChildFailedError (root cause: the first local rank to exit). Returns, per node index
    in the run, when the agent exits."""
    rng = world.rng
    fw = framework(run.job.framework)
    gen = run.job.torch_gen
    done: dict[int, float] = {}
    for i, node in enumerate(run.nodes):
        if node in skip:
            continue
        local = range(i * GPUS_PER_NODE, (i + 1) * GPUS_PER_NODE)
        failed = sorted((exits[r][0], r) for r in local if r in exits)
        if not failed:
            continue
        first_t, first = failed[0]
        noticed = first_t + rng.uniform(0.1, 3.0)
        agent = int(run.agent_pids[i])
        also = [r for t, r in failed[1:] if t <= noticed]
        lines: list[tuple[float, str]] = []
        for r in local:
            if r != first and r not in also:
                pid = int(run.pids[r])
                lines.append((noticed, texts.fill(texts.AGENT_SIGTERM[gen], agent=agent, pid=pid)))
        code = exits[first][1]
        lines.append(
            (
                noticed + 0.3,
                texts.fill(
                    texts.AGENT_FAILED[gen],
                    agent=agent,
                    exitcode=code,
                    local_rank=first % GPUS_PER_NODE,
                    pid=int(run.pids[first]),
                ),
            )
        )
        block = [texts.fill(t, script=fw.script) for t in texts.CHILD_FAILED_HEAD]
        block.append("Failures:")
        if also:
            for j, r in enumerate(also, start=1):
                block += _failure(world, run, j, r, exits[r])
        else:
            block.append("  <NO_OTHER_FAILURES>")
        block.append("-" * 60)
        block.append("Root Cause (first observed failure):")
        block += _failure(world, run, 0, first, exits[first])
        block.append("=" * 60)
        lines += [(noticed + 0.4, line) for line in block]
        world.emit_node(node, lines, job_id=run.job.job_id)
        done[i] = noticed + 0.5
    return done


def _failure(world: World, run: Run, index: int, rank: int, exit_: tuple[float, int]) -> list[str]:
    when = world.clock.stamps([exit_[0]], "torchrun")[0]
    pid = int(run.pids[rank])
    code = exit_[1]
    trace = texts.fill(texts.SIGNAL_TRACEBACK.get(code, texts.SIGNAL_TRACEBACK[1]), pid=pid)
    return [
        texts.fill(
            line,
            index=index,
            when=when,
            host=world.host(run.rank_node(rank)),
            rank=rank,
            local_rank=rank % GPUS_PER_NODE,
            exitcode=code,
            pid=pid,
            traceback=trace,
        )
        for line in texts.CHILD_FAILURE
    ]


def teardown(world: World, run: Run, agent_exits: dict[int, float]) -> None:
    """srun sees a task exit non-zero, aborts the step and slurmstepd cancels it on every node
    still running; Slurm records the job FAILED once every process is gone."""
    rng = world.rng
    job = run.job
    if not agent_exits:
        return
    batch = run.nodes[0]
    first_i = min(agent_exits, key=agent_exits.__getitem__)
    first_t = agent_exits[first_i]
    srun: list[tuple[float, str]] = []
    for i, t in sorted(agent_exits.items(), key=lambda x: x[1]):
        line = texts.fill(texts.SLURM_TASK_EXIT, node=world.host(run.nodes[i]), task=i, code=1)
        srun.append((t + 0.05, line))
    srun.insert(1, (first_t + 0.06, texts.SLURM_STEP_ABORTED))
    killed_at = first_t + rng.uniform(0.5, 2.0)
    when = world.clock.stamps([killed_at], "slurm")[0]
    for i, node in enumerate(run.nodes):
        if i in agent_exits:
            continue
        line = texts.fill(
            texts.SLURM_CANCELLED,
            what=f"STEP {job.raw_id}.0",
            node=world.host(node),
            when=when,
            why="",
        )
        world.emit_node(node, [(killed_at, line)], source="slurm", job_id=job.job_id)
    world.emit_node(batch, srun, source="slurm", job_id=job.job_id)
    gone = killed_at + rng.uniform(0.5, 3.0)
    world.finish(run, gone + rng.uniform(1.0, 30.0), "FAILED", 1, "failed", exit_at=gone)


def exited(run: Run, exits: Exits) -> None:
    """The GPUs of workers that died before the job ended go idle and free their memory."""
    for rank, (t, _) in exits.items():
        if t < run.exit_at:
            node, gpu = run.rank_node(rank), rank % GPUS_PER_NODE
            run.effects.append(GpuEffect(node, gpu, "exited", float(np.ceil(t)), run.end))
