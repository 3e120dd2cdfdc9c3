"""The ordinary life of a run in its logs and in Slurm: launch, NCCL start-up, warnings,
progress, evaluations and checkpoints, and how it ends (completed, time limit, cancelled,
requeued). Faults add their own lines (``faults``); this module renders the healthy part
of the final plan."""

from __future__ import annotations

from typing import Any

import numpy as np

from medic.simulate import rank_timings, texts
from medic.simulate.cluster import GPUS_PER_NODE
from medic.simulate.frameworks import framework
from medic.simulate.plan import Run
from medic.simulate.world import World

CANCEL_REASON = {"timeout": "timeout", "cancelled": "scancel", "requeue": "requeue"}


def render_run(world: World, run: Run) -> None:
    """Write the run's healthy log lines and its scheduler rows."""
    _launch(world, run)
    _startup(world, run)
    _training(world, run)
    _closing(world, run)
    _scheduler(world, run)


def _launch(world: World, run: Run) -> None:
    job = run.job
    port = int(world.rng.integers(30000, 60000))
    submit_ip = world.cluster.ips[run.nodes[0]]
    for i, node in enumerate(run.nodes):
        line = texts.fill(
            texts.SLURMD_LAUNCH,
            pid=2000 + node,
            raw=job.raw_id,
            uid=job.uid,
            ip=submit_ip,
            port=port + i,
        )
        world.emit_node(node, [(run.start + 0.2 + 0.01 * i, line)], source="slurm")


def _startup(world: World, run: Run) -> None:
    job = run.job
    rng = world.rng
    ranks = np.arange(run.world_size)
    t0 = run.start + rng.uniform(2.0, 8.0)
    if job.nccl_debug:
        boot = t0 + rng.uniform(3.0, 20.0) + world.jitter(ranks.size, 0.3)
        world.emit_ranks(run, ranks, boot, texts.NCCL_BOOT, gap_s=0.002)
        world.emit_rank(
            run, 0, [(float(boot[0]) + 0.01, texts.fill(texts.NCCL_VERSION, nccl=job.nccl))]
        )
        for _ in range(int(rng.integers(1, 4))):
            at = run.start + job.spec.startup_s * rng.uniform(0.15, 0.9)
            comm = rng.integers(0x10000000, 0x7FFFFFFF, ranks.size)
            values: dict[str, Any] = {
                "nranks": run.world_size,
                "nnodes": len(run.nodes),
                "commid": f"{int(rng.integers(1 << 40, 1 << 62)):x}",
            }
            world.emit_ranks(
                run,
                ranks,
                at + world.jitter(ranks.size, 0.4),
                texts.NCCL_COMM_INIT,
                gap_s=0.004,
                per_rank={"comm": [f"{int(c):x}" for c in comm]},
                **values,
            )
    if rng.random() < 0.4 and len(run.nodes) > 1:
        master = world.host(run.nodes[0])
        late = ranks[ranks >= GPUS_PER_NODE]
        retry = texts.fill(texts.SOCKET_RETRY, master=master, port=29500)
        world.emit_ranks(
            run,
            late,
            t0 + world.jitter(late.size, 1.0),
            [retry] * int(rng.integers(1, 4)),
            gap_s=1.0,
        )
    warnings = rng.permutation(len(texts.STARTUP_WARNINGS))[: int(rng.integers(0, 4))]
    for w in warnings:
        at = run.start + job.spec.startup_s * rng.uniform(0.3, 0.95)
        some = ranks[rng.random(ranks.size) < rng.uniform(0.4, 1.0)]
        world.emit_ranks(run, some, at + world.jitter(some.size, 0.5), texts.STARTUP_WARNINGS[w])
        job.traps.append("warnings")
    fw = framework(job.framework, job.colour)
    printer = fw.printer(run.world_size)
    world.emit_rank(run, printer, [x for x in fw.startup(run, world.clock) if x[0] < run.exit_at])


def _training(world: World, run: Run) -> None:
    job = run.job
    fw = framework(job.framework, job.colour)
    printer = fw.printer(run.world_size)
    horizon = run.progress_end
    lines = fw.progress(run, world.clock, world.rng)
    for pause in run.schedule.pauses:
        said = fw.pause(run, pause, world.clock, world.rng)
        lines.extend(said if job.announces else [x for x in said if x[0] >= pause.end])
        if pause.kind == "ckpt" and pause.end - pause.start >= 60:
            job.traps.append("checkpoint_pause")
        if pause.kind == "eval":
            job.traps.append("evaluation")
    world.emit_rank(run, printer, [x for x in lines if 0 <= x[0] < horizon])
    if run.rank_timings is not None:
        who, timings = rank_timings.lines(world, run)
        world.emit_rank(run, who, [x for x in timings if 0 <= x[0] < horizon])
        if run.rank_timings.style == "megatron_timers":
            world.emit_rank(run, 0, [x for x in rank_timings.arguments(run) if x[0] < horizon])
    lo, hi = max(0.0, run.train_start), min(horizon, float(world.seconds))
    if job.nccl_debug and hi > lo and world.rng.random() < 0.2:
        node_i = int(world.rng.integers(len(run.nodes)))
        at = world.rng.uniform(lo, hi)
        ranks = node_i * GPUS_PER_NODE + np.arange(GPUS_PER_NODE)
        world.emit_ranks(
            run,
            ranks,
            at + world.jitter(ranks.size, 0.01),
            texts.NCCL_WARN_BENIGN[:1],
            hca=int(world.rng.integers(0, 8)),
        )
        job.traps.append("nccl_warn")


def _closing(world: World, run: Run) -> None:
    job = run.job
    fw = framework(job.framework, job.colour)
    if run.closing == "completed":
        world.emit_rank(
            run, fw.printer(run.world_size), fw.finish(run, run.exit_at - 1.0, world.clock)
        )
        if job.nccl_debug and world.rng.random() < 0.5:
            ranks = np.arange(run.world_size)
            world.emit_ranks(
                run,
                ranks,
                run.exit_at - 0.5 + world.jitter(ranks.size, 0.1),
                texts.NCCL_WARN_BENIGN[1:],
            )
            job.traps.append("nccl_warn")
        return
    if run.closing not in CANCEL_REASON:
        return
    when = world.clock.stamps([run.end], "slurm")[0]
    why = texts.CANCEL_REASONS[CANCEL_REASON[run.closing]]
    gen = job.torch_gen
    for i, node in enumerate(run.nodes):
        at = run.end + 0.05 + 0.01 * i
        host = world.host(node)
        slurm = [
            (
                at,
                texts.fill(
                    texts.SLURM_CANCELLED,
                    what=f"STEP {job.raw_id}.0",
                    node=host,
                    when=when,
                    why=why,
                ),
            )
        ]
        if i == 0:
            job_line = texts.fill(
                texts.SLURM_CANCELLED, what=f"JOB {job.raw_id}", node=host, when=when, why=why
            )
            slurm.insert(0, (run.end, job_line))
        agent = int(run.agent_pids[i])
        pids = run.pids[i * GPUS_PER_NODE : (i + 1) * GPUS_PER_NODE]
        torchrun = [(at + 0.1, texts.fill(texts.AGENT_SIGNAL[gen], agent=agent))]
        torchrun += [
            (at + 0.11, texts.fill(texts.AGENT_SIGTERM[gen], agent=agent, pid=int(p))) for p in pids
        ]
        torchrun += [(at + 0.5, texts.fill(t, agent=agent)) for t in texts.SIGNAL_EXCEPTION]
        world.emit_node(node, slurm, source="slurm", job_id=job.job_id)
        world.emit_node(node, torchrun, job_id=job.job_id)


def _scheduler(world: World, run: Run) -> None:
    job = run.job
    hosts = world.hosts(run.nodes)
    slurm = world.slurm
    if run.attempt == 0:
        slurm.job(
            run.start - world.rng.uniform(5.0, 900.0),
            job.job_id,
            "PENDING",
            reason=str(world.rng.choice(["Resources", "Priority"])),
        )
    slurm.job(run.start, job.job_id, "RUNNING", nodes=hosts)
    for host in hosts:
        slurm.node(run.start, host, "ALLOCATED")
    if run.end_state == "RUNNING":
        return
    state = run.end_state
    if state == "CANCELLED":
        state = f"CANCELLED by {job.uid}"
    reason = {"TIMEOUT": "TimeLimit", "NODE_FAIL": "NodeFail", "FAILED": "NonZeroExitCode"}.get(
        run.end_state
    )
    slurm.job(run.end, job.job_id, state, nodes=hosts, exit_code=run.exit_code, reason=reason)
    for node, host in zip(run.nodes, hosts, strict=True):
        if node not in world.down:
            slurm.node(run.end + 1.0, host, "IDLE")
