"""The perturbation suite's realistic variation: the same faults and healthy traps as the plain
simulator, on clusters whose jobs and collectors behave the many ways real ones do.

Everything is drawn from a generator of its own (``Variation.draw``), so a perturbed recording
keeps the faults, jobs and timings of the plain one of the same scenario and seed, and the
plain simulator draws exactly what it drew before. What varies, and where it comes from:

- checkpoint saves (``vary_run``; GPU side in ``medic.simulate.phases``): synchronous saves
  where the writers write while every other rank waits in a barrier, its NCCL kernel spinning
  (util 100 %, low power: NCCL kernels busy-wait on the GPU, cupy/cupy#3557), as the Hugging
  Face Trainer and Lightning (``strategy.barrier("Trainer.save_checkpoint")``) save from rank
  0, Megatron-LM's legacy format from one rank per model-parallel group, and
  torch.distributed.checkpoint from every rank before its closing collective; asynchronous
  saves (``torch.distributed.checkpoint.async_save``, Megatron-LM ``--async-save``,
  megatron/training/async_utils.py) where the GPUs pause only for the seconds the device to host
  staging copy takes; and the plain pause with every GPU idle;
- evaluation passes of 5-20 minutes, of a length each job repeats (``vary_spec``);
- data-loader stalls of 5-60 s (``vary_steps``): one rank's host waits on its input pipeline
  (PyTorch's DataLoader waits without a timeout by default) while the others spin in the next
  collective;
- jobs that print progress only every 2-8 minutes, and step time drifting by 10-20 % within a
  job (sequence mix, data shards; no rank at fault);
- telemetry sampled every 1, 5, 15 or 30 s (dcgm-exporter's collection interval and Prometheus'
  scrape interval; NVIDIA's Prometheus guide scrapes every 30 s) and exporter restarts that leave
  gaps of 15-90 s on a node (``after_plan``);
- log lines (``medic.simulate.delivery``): clock skew of up to 2 s between nodes, and
  launchers that prefix each line (``srun --label``, torchrun's ``--tee`` role prefix,
  ``kubectl logs --timestamps``, pdsh). Delivery delays (shippers batching a node's lines every
  1-30 s: Fluent Bit's ``Flush``, Vector's ``batch.timeout_secs``, Promtail's ``batchwait``)
  are not the recording's but the replay's: measure with ``medic backtest --delay
  logs=1:30``;
- a lone InfiniBand link flap on a healthy node, and a leaf switch retraining every link at
  once (a firmware update, a reboot): each node's port counts one link-down and the symbol
  errors of training at the same moment (healthy traps).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from medic.simulate.plan import Holdup, PortCount, Run, TrainSpec
from medic.simulate.quiet_faults import ib_flap
from medic.simulate.workload import log_uniform
from medic.simulate.world import World
from medic.timeutil import US

CADENCES_S = (1, 5, 15, 30)
CHECKPOINT_STYLES = ("pause", "barrier", "async")
CHECKPOINT_WEIGHTS = (0.2, 0.5, 0.3)
LAUNCHERS = ("plain", "srun_label", "torchrun_tee", "srun_tee", "kubectl_timestamps", "pdsh")
LAUNCHER_WEIGHTS = (0.35, 0.2, 0.15, 0.1, 0.1, 0.1)
MAX_SKEW_S = 2.0


@dataclasses.dataclass
class Variation:
    """One perturbed recording's collectors (cadence, skew, shipper) and, as jobs are created,
    how each of them trains, checkpoints and is launched."""

    rng: np.random.Generator
    cadence: int
    skew_s: np.ndarray
    """Per node: its clock's offset, seconds."""
    launchers: dict[str, str] = dataclasses.field(default_factory=dict)
    checkpoints: dict[str, str] = dataclasses.field(default_factory=dict)
    restarts: int = 0

    @classmethod
    def draw(cls, rng: np.random.Generator, world: World) -> Variation:
        """A variation for ``world``; sets the world's telemetry cadence."""
        nodes = world.cluster.size
        cadence = int(rng.choice(CADENCES_S))
        world.cadence = cadence
        world.cadence_offset = rng.integers(0, cadence, nodes).astype(np.int64)
        return cls(rng=rng, cadence=cadence, skew_s=rng.uniform(-MAX_SKEW_S, MAX_SKEW_S, nodes))

    # --- jobs ------------------------------------------------------------------------------

    def vary_spec(self, spec: TrainSpec) -> TrainSpec:
        """Sparse progress lines and long evaluation passes for some jobs."""
        rng = self.rng
        log_every = spec.log_every
        if rng.random() < 0.25:
            log_every = max(1, round(rng.uniform(120.0, 480.0) / spec.step_s))
        eval_every, eval_s = spec.eval_every, spec.eval_s
        if rng.random() < 0.35:
            eval_every = _multiple(rng.uniform(1500.0, 3000.0) / spec.step_s, log_every)
            typical = rng.uniform(300.0, 1200.0)
            eval_s = (typical * 0.85, typical * 1.15)
        elif eval_every:
            eval_every = _multiple(eval_every, log_every)
        return dataclasses.replace(
            spec,
            log_every=log_every,
            ckpt_every=_multiple(spec.ckpt_every, log_every),
            eval_every=eval_every,
            eval_s=eval_s,
        )

    def vary_run(self, run: Run) -> None:
        """How the run checkpoints; how its job is launched (once per job)."""
        rng = self.rng
        job = run.job
        style = self.checkpoints.get(job.job_id) or str(
            rng.choice(CHECKPOINT_STYLES, p=CHECKPOINT_WEIGHTS)
        )
        self.checkpoints[job.job_id] = style
        run.ckpt_style = style
        if style == "async":
            run.ckpt_pauses = rng.uniform(2.0, 12.0, run.ckpt_pauses.size)
        if job.job_id not in self.launchers:
            self.launchers[job.job_id] = str(rng.choice(LAUNCHERS, p=LAUNCHER_WEIGHTS))

    def vary_steps(self, run: Run) -> list[Holdup]:
        """Drift the run's step times by 10-20 % now and then and stall some steps on one
        rank's data loader; returns the stalls."""
        rng = self.rng
        durations = run.durations
        n = durations.size
        if n == 0:
            return []
        hours = float(durations.sum()) / 3600.0
        changes = np.sort(rng.integers(0, n, int(rng.poisson(1.5 * hours))))
        levels = np.exp(rng.uniform(np.log(0.88), np.log(1.2), changes.size))
        factor = np.ones(n)
        for at, level in zip(changes, levels, strict=True):
            factor[at:] = level
        durations *= factor
        count = int(rng.poisson(rng.uniform(0.5, 3.0) * hours))
        holdups = sorted(
            (
                Holdup(int(i), log_uniform(rng, 5.0, 60.0), int(rng.integers(run.world_size)))
                for i in rng.integers(0, n, count)
            ),
            key=lambda h: h.index,
        )
        for holdup in holdups:
            durations[holdup.index] += holdup.seconds
        return holdups

    # --- the cluster -------------------------------------------------------------------------

    def after_plan(self, world: World) -> None:
        """Exporter restarts (telemetry gaps that spare label onsets) and a lone IB link flap
        on a healthy node."""
        rng = self.rng
        for _ in range(int(rng.integers(1, 4))):
            node = int(rng.integers(world.cluster.size))
            start = float(rng.uniform(60.0, max(61.0, world.seconds - 120.0)))
            end = start + float(rng.uniform(15.0, 90.0))
            phase = world.cluster.phase_us[node] / US
            if any(n == node and start - 1 <= k + phase <= end + 1 for n, k in world.protect):
                continue
            world.drops.append((node, start, end))
            self.restarts += 1
            world.traps.append("exporter_restart")
        if rng.random() < 0.3:
            busy = {n for job in world.jobs for r in job.runs for n in r.nodes}
            healthy = sorted(set(range(world.cluster.size)) - world.down - _culprits(world))
            node = int(rng.choice(healthy or sorted(busy)))
            at = float(rng.uniform(30.0, world.seconds - 60.0))
            ib_flap(world, node, int(rng.integers(8)), at, float(rng.uniform(1.0, 8.0)))
            world.traps.append("ib_link_flap")
        if world.fabric_rng.random() < 0.2:
            switch_retrain(world)

    def meta(self, world: World) -> dict[str, Any]:
        """What was varied, for meta.json."""
        return {
            "telemetry_cadence_s": self.cadence,
            "exporter_restarts": self.restarts,
            "clock_skew_s": {world.host(n): round(float(s), 3) for n, s in enumerate(self.skew_s)},
            "launchers": dict(sorted(self.launchers.items())),
            "checkpoints": dict(sorted(self.checkpoints.items())),
        }


def _multiple(steps: float, every: int) -> int:
    return int(max(every, round(steps / every) * every))


def _culprits(world: World) -> set[int]:
    hosts = {h for label in world.labels for h in label["culprit_nodes"]}
    return {n for n in range(world.cluster.size) if world.host(n) in hosts}


def switch_retrain(world: World) -> None:
    """A leaf switch retrains all its links within a second or two: the port of every node on
    it (the same rail) counts a link-down and the symbol errors of training."""
    rng = world.fabric_rng
    port = int(rng.integers(8))
    at = float(rng.uniform(30.0, world.seconds - 60.0))
    for node in range(world.cluster.size):
        when = at + float(rng.uniform(0.0, 2.0))
        world.ports.append(PortCount(node, port, "link_downed", when, 1))
        world.ports.append(
            PortCount(node, port, "symbol_error", when + 3.0, int(rng.integers(5, 400)))
        )
    world.traps.append("ib_switch_retrain")
