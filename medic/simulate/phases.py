"""What a run's host-side phases do to its GPUs, rank by rank, once its plan is final.

During a synchronous checkpoint save in the ``barrier`` style the job's mode is ``WAIT`` (every
rank waits in the save's closing barrier, its NCCL kernel spinning) except on the ranks still
writing: they copy their shard off the GPU in bursts. Who writes (``WRITERS``):

- ``rank0``: the Hugging Face Trainer and Lightning save from global rank 0 while the others
  wait (transformers/trainer.py ``_save_checkpoint``; lightning/pytorch/trainer/trainer.py
  ``save_checkpoint`` ends in ``strategy.barrier``);
- ``node_leaders``: Megatron-LM's legacy format writes from one rank per model-parallel group
  (the first GPU of each node with 8-way tensor parallelism) before ``torch.distributed.barrier``
  (megatron/training/checkpointing.py);
- ``all``: torch.distributed.checkpoint writes every rank's shards, then all ranks meet in the
  save's final collective (torch/distributed/checkpoint/state_dict_saver.py); nodes finish
  writing at different times with the storage they share.

A data-loader stall (``Holdup``) leaves its rank's GPU idle while the job waits. A run whose
rank 0 evaluates alone (``Run.solo_eval``) has that GPU at an evaluation's load while the
others wait.
"""

from __future__ import annotations

import numpy as np

from medic.simulate.cluster import GPUS_PER_NODE
from medic.simulate.plan import GpuEffect, Run

WRITERS = ("rank0", "node_leaders", "all")
WRITE = 2.0
"""``host_bound`` level of a rank writing its checkpoint shard (bursts of copies)."""
BLOCKED = 1.0
"""``host_bound`` level of a rank blocked on its host (no kernels at all)."""


def phase_effects(run: Run, rng: np.random.Generator) -> list[GpuEffect]:
    """The per-GPU effects of the run's barrier checkpoints and data-loader stalls."""
    effects: list[GpuEffect] = []
    sched = run.schedule
    if run.ckpt_style == "barrier":
        writers = run.writers or str(rng.choice(WRITERS))
        for pause in sched.pauses:
            if pause.kind == "ckpt":
                effects.extend(_writers(run, writers, pause.start, pause.end, rng))
    if run.solo_eval:
        power = run.job.spec.power_w
        effects.extend(
            GpuEffect(run.nodes[0], 0, "evaluating", p.start, p.end, power)
            for p in sched.pauses
            if p.kind == "eval"
        )
    for holdup in run.holdups:
        if holdup.index < sched.ends.size:
            began = float(sched.ends[holdup.index] - sched.durations[holdup.index])
            node = run.rank_node(holdup.rank)
            gpu = holdup.rank % GPUS_PER_NODE
            effects.append(
                GpuEffect(node, gpu, "host_bound", began, began + holdup.seconds, BLOCKED)
            )
    return effects


def _writers(
    run: Run, writers: str, start: float, end: float, rng: np.random.Generator
) -> list[GpuEffect]:
    """Who writes during one save, and until when (the last writer ends the save)."""
    if writers == "rank0":
        return [GpuEffect(run.nodes[0], 0, "host_bound", start, end, WRITE)]
    share = rng.uniform(0.5, 1.0, len(run.nodes))
    share[int(rng.integers(len(run.nodes)))] = 1.0
    ends = start + share * (end - start)
    gpu = 0 if writers == "node_leaders" else -1
    return [
        GpuEffect(node, gpu, "host_bound", start, float(t), WRITE)
        for node, t in zip(run.nodes, ends, strict=True)
    ]
