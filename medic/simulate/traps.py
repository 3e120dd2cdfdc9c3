"""Healthy traps: things that look alarming on a real cluster and are not incidents.

Benign Xids (63 row remap, 92 high single-bit rate), corrected ECC and PCIe replay ticks,
scrape gaps of one node's exporter, an admin draining an idle node, journal noise, and the
normal ways jobs end (completed, time limit, user cancel, admin requeue). None of them is
labelled.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from medic.simulate import texts
from medic.simulate.cluster import GPUS_PER_NODE, nvrm_bus
from medic.simulate.faults import xid_line
from medic.simulate.plan import CounterEvent, GpuEffect, Run
from medic.simulate.world import World

ENDINGS = ("completed", "timeout", "cancelled", "requeue")
DRAIN_REASONS = (
    "hw maintenance: BMC firmware update",
    "IB cable reseat scheduled",
    "NHC: check_fs_mount /lustre failed",
    "rma pending - ticket 48213",
)


def benign_xid(world: World) -> None:
    """Xid 63 (row remapping recorded) or Xid 92 (high single-bit ECC rate, with corrected
    ECC counts climbing first) on some GPU: informational, no action."""
    rng = world.rng
    node = int(rng.integers(world.cluster.size))
    gpu = int(rng.integers(GPUS_PER_NODE))
    t = float(round(rng.uniform(30, world.seconds - 30)))
    code = int(rng.choice([63, 92]))
    if code == 92:
        for tick in np.sort(rng.uniform(max(0.0, t - 600), t, int(rng.integers(3, 12)))):
            world.counters.append(
                CounterEvent(node, gpu, "ecc_sbe", float(tick), int(rng.integers(1, 40)))
            )
    else:
        world.counters.append(CounterEvent(node, gpu, "ecc_sbe", t - 1, 1))
    xid_line(world, node, gpu, code, int(rng.integers(1000, 3_000_000)), t, False)
    world.traps.append(f"xid{code}")


def counter_ticks(world: World) -> None:
    """Corrected ECC and PCIe replay counters that tick now and then on healthy GPUs."""
    rng = world.rng
    for counter, count in (("ecc_sbe", rng.integers(1, 5)), ("pcie_replay", rng.integers(0, 3))):
        for _ in range(int(count)):
            node = int(rng.integers(world.cluster.size))
            world.counters.append(
                CounterEvent(
                    node,
                    int(rng.integers(GPUS_PER_NODE)),
                    counter,
                    float(rng.uniform(0, world.seconds)),
                    int(rng.integers(1, 4)),
                )
            )
    world.traps.append("ecc_sbe")


def scrape_gap(world: World) -> None:
    """The exporter on one node restarts: 5 s to 2 minutes without telemetry, logs go on."""
    rng = world.rng
    node = int(rng.integers(world.cluster.size))
    start = float(rng.uniform(60, world.seconds - 180))
    world.drops.append((node, start, start + float(rng.uniform(5, 120))))
    world.traps.append("scrape_gap")


def admin_drain(world: World) -> bool:
    """An admin drains an idle node with a reason (and may resume it later)."""
    rng = world.rng
    idle = world.pool.free_nodes(world.seconds)
    idle = idle[~np.isin(idle, list(world.down))]
    if idle.size == 0:
        return False
    node = int(rng.choice(idle))
    world.pool.reserve([node])
    host = world.host(node)
    t = float(rng.uniform(30, world.seconds * 0.7))
    world.slurm.node(t, host, "IDLE+DRAIN", reason=str(rng.choice(DRAIN_REASONS)))
    if rng.random() < 0.4:
        world.slurm.node(t + float(rng.uniform(300, 1200)), host, "IDLE")
    world.traps.append("admin_drain")
    return True


def journal_noise(world: World) -> None:
    """sshd, systemd, chrony and driver chatter in every node's journal."""
    rng = world.rng
    for node in range(world.cluster.size):
        count = int(rng.poisson(world.seconds / 900))
        times = np.sort(rng.uniform(0, world.seconds, count))
        lines = [
            (
                float(t),
                texts.fill(
                    str(rng.choice(texts.SYSTEM_NOISE)),
                    n=int(rng.integers(1, 250)),
                    pid=int(rng.integers(1000, 400000)),
                    port=int(rng.integers(30000, 60000)),
                    nic=str(rng.choice(["0c", "1f", "8a", "c1"])),
                    bus=nvrm_bus(int(rng.integers(8))),
                ),
            )
            for t in times
        ]
        world.emit_node(node, lines, source="system")


def power_cap(world: World, run: Run) -> bool:
    """The facility lowers the power cap of a job's nodes mid-run: every GPU of the job shows
    the SW power-cap reason at lower power and clocks, and the whole job slows by 10-30 % at
    once. Uniform, so no rank is at fault; False when the run has no room for it."""
    rng = world.rng
    lo = max(run.train_start + 300.0, 120.0)
    hi = min(run.progress_end, float(world.seconds)) - 600.0
    if hi <= lo:
        return False
    t = float(round(rng.uniform(lo, hi)))
    cap = float(rng.uniform(420.0, 520.0))
    run.effects.extend(GpuEffect(node, -1, "capped", t, run.end, cap) for node in run.nodes)
    run.slowdowns.append((t, float(rng.uniform(1.1, 1.3))))
    run.invalidate()
    run.job.traps.append("power_cap")
    return True


def throttle_blip(world: World) -> None:
    """A GPU of some running job touches its thermal limit for a few seconds: the SW thermal
    bit and a lower clock, too short to slow anything down."""
    rng = world.rng
    runs = [r for job in world.jobs for r in job.runs if r.train_start < world.seconds - 120]
    if not runs:
        return
    run = runs[int(rng.integers(len(runs)))]
    lo = max(0.0, run.train_start)
    hi = min(run.progress_end, float(world.seconds)) - 60.0
    if hi <= lo:
        return
    node = run.nodes[int(rng.integers(len(run.nodes)))]
    t = float(round(rng.uniform(lo, hi)))
    world.effects.append(
        GpuEffect(node, int(rng.integers(GPUS_PER_NODE)), "thermal", t, t + rng.uniform(5, 60), 0.2)
    )
    world.traps.append("throttle_blip")


def slow_job(world: World, run: Run) -> None:
    """Make ``run``'s job uniformly slow from its start: power-capped GPUs, or a heavier model."""
    rng = world.rng
    job = run.job
    job.user_slow = float(rng.uniform(1.3, 2.0))
    if rng.random() < 0.6:
        job.power_cap_w = float(rng.uniform(400, 500))
    world.move_start(run, run.start)
    job.traps.append("slow_job")


def end_normally(world: World, run: Run, how: str, earliest: float) -> bool:
    """End ``run`` inside the recording the way healthy jobs end; False if there is no room."""
    rng = world.rng
    latest = world.seconds - 40.0
    earliest = max(earliest, run.train_start + 300.0, 60.0)
    if latest <= earliest:
        return False
    t = float(rng.uniform(earliest, latest))
    job = run.job
    if how == "completed":
        step, last = run.schedule.last_step_before(t - 20.0)
        if last < max(0.0, run.train_start):
            return False
        job.spec = dataclasses.replace(job.spec, total_steps=step)
        exit_at = last + float(rng.uniform(5.0, 40.0))
        world.finish(
            run,
            exit_at + float(rng.uniform(0.5, 3.0)),
            "COMPLETED",
            0,
            "completed",
            exit_at=exit_at,
        )
    elif how == "timeout":
        job.time_limit_s = t - run.start
        world.finish(run, t, "TIMEOUT", None, "timeout", exit_at=t + 0.6)
    elif how == "cancelled":
        world.finish(run, t, "CANCELLED", None, "cancelled", exit_at=t + 0.6)
    elif how == "requeue":
        world.finish(run, t, "REQUEUED", None, "requeue", exit_at=t + 0.6)
        world.slurm.job(t + 1.0, job.job_id, "PENDING", reason="BeginTime")
        restart = t + float(rng.uniform(121.0, 200.0))
        nodes = world.pool.allocate(len(run.nodes), restart)
        if nodes is not None:
            ckpts = [p.step for p in run.schedule.pauses if p.kind == "ckpt" and p.end < t]
            world.add_run(job, nodes, restart, first_step=ckpts[-1] if ckpts else run.first_step)
    else:
        raise ValueError(f"unknown ending {how!r}")
    job.traps.append(how)
    return True
