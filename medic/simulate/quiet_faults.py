"""Faults that give little away: hangs with no node at fault and stragglers present from the
job's first step.

- ``host_hang``: one rank is stuck in host code (a Python-level deadlock, a lock never
  released): its GPU idles with no kernels while every other rank spins in the collective it
  never joins. Nothing is printed until the NCCL watchdog (if it fires). The truth names the
  rank, not its node.
- ``nfs_hang``: one rank blocks on a dead NFS server (checkpoint or data on an NFS mount): the
  kernel of every node still touching the mount prints ``nfs: server X not responding, still
  trying`` after the RPC timeout, and the blocked task's node the hung-task warning every two
  minutes (net/sunrpc/clnt.c, kernel/hung_task.c). The server is at fault, not the node.
- ``power_cap_straggler``: one GPU runs under a low power limit from the job's start (set by
  ``nvidia-smi -pl`` or a BMC's power brake): the SW power-cap clocks-event reason, low power
  and clocks on that GPU, the whole job slower from its first step.
- ``ib_flap_straggler``: one InfiniBand port of a node flaps throughout the job (the mlx5
  driver's ``Link down`` / ``Link up`` kernel lines, NCCL's ``Got async event : port error`` /
  ``port active`` on the node's ranks): NCCL retransmits, every rank waits, the job is slower
  from its first step. The port's counters say the same (``medic.simulate.ports``): each flap
  is a link-down (the link error recovery failed), and the bad cable or transceiver behind
  it counts symbol errors, bad packets and link recoveries between flaps. In the perturbed
  suite the kernel's and NCCL's lines are sometimes not shipped at all (a site that collects
  only the job's output, a job without ``NCCL_DEBUG``): the counters are then the node's only
  evidence besides the job's pace.
"""

from __future__ import annotations

import numpy as np

from medic.simulate import texts
from medic.simulate.cluster import GPUS_PER_NODE
from medic.simulate.faults import (
    block_all,
    fault_time,
    fit_timeout,
    hang_ending,
    missed_progress,
    pick_culprit,
    slow_down,
)
from medic.simulate.phases import BLOCKED
from medic.simulate.plan import GpuEffect, PortCount, Run
from medic.simulate.world import World

NFS_SERVERS = ("nfs01", "fs-home.cluster.local", "10.10.0.21", "netapp-a")
LINK_BITS_PER_S = 200e9
"""An HDR InfiniBand port's signalling rate."""
BAD_LINK_BER = (1e-11, 1e-9)
"""Effective bit error rates of a degraded link: 10 to 1000 times the 1e-12 a qualified HDR
link must keep (NVIDIA's LinkX cable specifications); each error counts as a symbol error."""
UNSHIPPED_SHARE = 0.3
"""Perturbed recordings whose flapping node's kernel and NCCL lines are not collected."""
HUNG_TASK_TIMEOUT_S = 120


def _stuck_on_host(
    world: World, run: Run, pg_timeout_s: int | None, at_min: float | None, rank: int | None
) -> tuple[float, int]:
    """From a time drawn as for any hang, one rank (``rank`` or one drawn) no longer launches
    kernels and the job waits on it. Returns (time, rank)."""
    fit_timeout(world, run, pg_timeout_s, world.seconds * 0.6)
    t = fault_time(world, run, min(run.job.pg_timeout_s + 240, world.seconds * 0.5), at_min)
    stuck = int(world.rng.integers(run.world_size)) if rank is None else rank
    block_all(run, t)
    node, gpu = run.rank_node(stuck), stuck % GPUS_PER_NODE
    run.effects.append(GpuEffect(node, gpu, "host_bound", t, np.inf, BLOCKED))
    return t, stuck


def _rank_hang(world: World, run: Run, t: float, rank: int, how: str, cause: str) -> None:
    """The job ends ``how``; the label names the rank and no node."""
    hang_ending(world, run, t, how, [rank])
    onset = world.first_sample(run.nodes, t)
    note = f"rank {rank} {cause} (ends by {how}); {missed_progress(run, onset)}"
    world.label(run.job, "hang", onset, [], [rank], note)


def host_hang(
    world: World, run: Run, ending: str | None, pg_timeout_s: int | None, at_min: float | None
) -> None:
    """One rank stuck in host code; its peers spin until the watchdog, a cancel, or the end."""
    t, rank = _stuck_on_host(world, run, pg_timeout_s, at_min, None)
    how = ending or str(world.rng.choice(["watchdog", "watchdog", "cancel", "none"]))
    _rank_hang(world, run, t, rank, how, "stuck in host code")


def nfs_hang(
    world: World, run: Run, ending: str | None, pg_timeout_s: int | None, at_min: float | None
) -> None:
    """One rank blocked on a dead NFS server; kernels complain, no node is at fault."""
    rng = world.rng
    t, rank = _stuck_on_host(world, run, pg_timeout_s, at_min, 0 if rng.random() < 0.5 else None)
    server = str(rng.choice(NFS_SERVERS))
    stuck_node = run.rank_node(rank)
    # The mount's RPC timeout (timeo x retrans) passes before the first complaint.
    noticed = t + float(rng.uniform(30.0, 180.0))
    touching = [stuck_node] + [
        n for n in range(world.cluster.size) if n != stuck_node and rng.random() < 0.3
    ]
    for node in touching:
        at = noticed + (0.0 if node == stuck_node else float(rng.uniform(0.0, 90.0)))
        line = texts.fill(texts.NFS_NOT_RESPONDING, server=server)
        world.emit_node(node, [(at, line)], source="system")
    check = float(rng.uniform(0.0, HUNG_TASK_TIMEOUT_S))
    pid = int(run.pids[rank])
    comm = str(rng.choice(["python", "pt_main_thread"]))
    build = int(rng.integers(90, 130))
    for k in range(1, 4):
        at = t + HUNG_TASK_TIMEOUT_S * k + check
        blocked = int(at - t)
        lines = [
            (at, texts.fill(x, comm=comm, pid=pid, seconds=blocked, build=build))
            for x in texts.HUNG_TASK
        ]
        world.emit_node(stuck_node, lines, source="system")
    how = ending or str(rng.choice(["watchdog", "watchdog", "none"]))
    hang_ending(world, run, t, how, [rank])
    onset = world.first_sample(run.nodes, t)
    note = (
        f"rank {rank} blocked on NFS server {server} (ends by {how}); {missed_progress(run, onset)}"
    )
    world.label(run.job, "hang", onset, [], [rank], note)


def power_cap_straggler(
    world: World, run: Run, slowdown: float | None, at_min: float | None
) -> None:
    """One GPU power-capped from the job's start; the job is slower from its first step."""
    rng = world.rng
    bad = pick_culprit(world, run)
    factor = slowdown or float(rng.uniform(1.1, 1.4))
    cap = float(rng.uniform(250.0, 420.0))
    run.effects.append(GpuEffect(bad.node, bad.gpu, "capped", run.start, np.inf, cap))
    slow_down(run, run.train_start - 1.0, factor, [bad.rank])
    onset = world.first_sample([bad.node], max(0.0, run.train_start))
    note = f"GPU power-capped at {cap:.0f} W from the start, job {factor:.2f}x slower"
    world.label(run.job, "straggler", onset, [bad.node], [bad.rank], note)


def ib_flap_straggler(world: World, run: Run, slowdown: float | None, at_min: float | None) -> None:
    """One node's InfiniBand port flaps throughout the job; the job is slower from its first
    step and the node's kernel and NCCL report the flaps."""
    rng = world.rng
    i = int(rng.integers(len(run.nodes)))
    node = run.nodes[i]
    port = int(rng.integers(GPUS_PER_NODE))
    factor = slowdown or float(rng.uniform(1.1, 1.5))
    slow_down(run, run.train_start - 1.0, factor, [])
    ranks = np.arange(i * GPUS_PER_NODE, (i + 1) * GPUS_PER_NODE)
    gap = float(rng.uniform(60.0, 300.0))
    t = max(run.start, -gap) + float(rng.exponential(gap / 4))
    end = min(run.exit_at, float(world.seconds))
    logged = world.variation is None or world.fabric_rng.random() >= UNSHIPPED_SHARE
    bad_cable(world, node, port, max(0.0, t), end)
    while t < end:
        down = float(rng.uniform(1.0, 10.0))
        ib_flap(world, node, port, t, down, logged)
        if run.job.nccl_debug and logged:
            for at, event in ((t, "port error"), (t + down, "port active")):
                when = at + float(rng.uniform(0.05, 1.0)) + world.jitter(ranks.size, 0.01)
                world.emit_ranks(run, ranks, when, [texts.IB_ASYNC_EVENT], hca=port, event=event)
        t += down + float(rng.exponential(gap))
    onset = world.first_sample([node], max(0.0, run.train_start))
    note = f"InfiniBand port {port} flapping every ~{gap:.0f}s, job {factor:.2f}x slower"
    if not logged:
        note += " (its kernel and NCCL lines not collected)"
    world.label(run.job, "straggler", onset, [node], list(ranks), note)


def bad_cable(world: World, node: int, port: int, start: float, end: float) -> None:
    """A degraded link from ``start`` to ``end``: symbol errors at its bit error rate, most
    of them corrupting a packet the port then receives bad, and now and then a link error
    recovery (the link retrains and comes back)."""
    rng = world.fabric_rng
    ber = float(np.exp(rng.uniform(*np.log(BAD_LINK_BER))))
    symbols = ber * LINK_BITS_PER_S
    for counter, per_s in (
        ("symbol_error", symbols),
        ("port_rcv_errors", symbols * float(rng.uniform(0.3, 1.0))),
        ("link_error_recovery", 1.0 / float(rng.uniform(20.0, 120.0))),
    ):
        world.ports.append(PortCount(node, port, counter, start, per_s, end))


def ib_flap(
    world: World, node: int, port: int, at: float, down_s: float, logged: bool = True
) -> None:
    """One InfiniBand port of ``node`` goes down at ``at`` and comes back ``down_s`` later:
    its link-downed counter counts one, training the link back up leaves symbol errors, and
    the kernel logs it (when ``logged``)."""
    training = int(world.fabric_rng.integers(5, 400))
    world.ports.append(PortCount(node, port, "link_downed", at, 1))
    world.ports.append(PortCount(node, port, "symbol_error", at + down_s, training))
    if not logged:
        return
    nic = texts.IB_NIC_BUS[port]
    lines = [
        (at, texts.fill(texts.IB_LINK, nic=nic, port=port, state="down")),
        (at + down_s, texts.fill(texts.IB_LINK, nic=nic, port=port, state="up")),
    ]
    world.emit_node(node, lines, source="system")
