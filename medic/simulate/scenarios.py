"""The scenario catalogue: each a named, seeded, parameterised recipe for one recording.

A scenario's parameters are a frozen dataclass (validated with ``medic.config.from_dict``);
``None`` means "drawn from the seed". Fault scenarios inject their fault into the featured
job; every scenario also runs background jobs and cluster-wide healthy traps, so faults
happen amid normal noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from medic.simulate import faults, quiet_faults, rank_timings, rhythm_traps
from medic.simulate.kinds import KINDS
from medic.simulate.recipe import Common, Fault, Scenario, inject_with


@dataclass(frozen=True)
class Xid79(Fault):
    pg_timeout_s: int | None = None
    """ProcessGroup NCCL timeout (default: 600 s, or another common value from the seed)."""
    telemetry: Literal["vanish", "null"] | None = None
    """What the lost GPU's telemetry does: disappears, or reports nulls."""
    culprit_reports: bool | None = None
    """Whether the lost GPU's own rank prints a CUDA error before the others time out."""


@dataclass(frozen=True)
class Ecc(Fault):
    xid: Literal[48, 94, 95] | None = None
    """Xid reported with the uncorrectable error."""


@dataclass(frozen=True)
class NvLink(Fault):
    precursor: bool | None = None
    """NVLink error counters climb for minutes before the fatal Xid 74."""
    pg_timeout_s: int | None = None


@dataclass(frozen=True)
class GpuHang(Fault):
    xid: Literal[0, 109, 119] | None = None
    """Xid that surfaces minutes after the hang (0: none)."""
    stuck: Literal["idle", "busy"] | None = None
    """The hung GPU's telemetry: util 0 at idle power, or util 100 at idle power."""
    pg_timeout_s: int | None = None


@dataclass(frozen=True)
class Deadlock(Fault):
    ending: Literal["watchdog", "cancel", "none"] | None = None
    """How the hung job ends: NCCL watchdog, the user's scancel, or not in the recording."""
    pg_timeout_s: int | None = None


def _check_slowdown(slowdown: float | None) -> None:
    if slowdown is not None and not 1.0 < slowdown <= 2.5:
        raise ValueError("slowdown must be in (1, 2.5]")


@dataclass(frozen=True)
class Straggler(Fault):
    slowdown: float | None = None
    """Step-time factor of the whole job once the culprit degrades (1.1-1.6)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_slowdown(self.slowdown)


@dataclass(frozen=True)
class EarlyStraggler(Common):
    slowdown: float | None = None
    """Step-time factor of the whole job from its first step (1.1-1.5)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_slowdown(self.slowdown)


@dataclass(frozen=True)
class HostStraggler(Fault):
    slowdown: float | None = None
    """Step-time factor of the whole job once the culprit ranks slow (1.1-1.4)."""
    framework: str | None = "megatron"
    """Megatron-LM prints each rank's own time (its timers); NVRx's kernel-time scores do not
    show a host-side slowdown."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_slowdown(self.slowdown)


@dataclass(frozen=True)
class SilentPauses(Fault):
    framework: str | None = "torchtitan"
    """A training loop of its own that prints one line per logged step (torchtitan's format):
    no progress bar whose evaluation pass would announce the pause."""


@dataclass(frozen=True)
class SparsePrinting(Fault):
    framework: str | None = "megatron"
    """Megatron-LM prints progress only every ``--log-interval`` iterations (a progress bar
    printing every step, as the Hugging Face Trainer's, is never sparse)."""


@dataclass(frozen=True)
class Oom(Fault):
    ranks: int | None = None
    """How many ranks run out of memory."""


@dataclass(frozen=True)
class UserError(Fault):
    error: Literal["KeyError", "FileNotFoundError", "ValueError"] | None = None


@dataclass(frozen=True)
class NodeFailure(Fault):
    slurmd_timeout_s: int | None = None
    """Slurm's SlurmdTimeout: how long before the dead node is NOT_RESPONDING (default 300)."""
    requeue: bool | None = None
    """Whether Slurm requeues the job on other nodes."""
    fast_errors: bool | None = None
    """Whether peers see NCCL network errors within a minute or two (else the watchdog)."""


@dataclass(frozen=True)
class Mixed(Common):
    faults: int | None = None
    """Number of faulty jobs, each with a fault of another kind (default 2-3)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.faults is not None and not 1 <= self.faults <= 16:
            raise ValueError("faults must be between 1 and 16")


FAULTS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "xid79_cascade",
            "A GPU falls off the bus (Xid 79); minutes later every other rank hits the NCCL "
            "watchdog and torchrun reports ChildFailedError naming an innocent rank.",
            "gpu_fault",
            Xid79,
            inject_with(faults.xid79, "pg_timeout_s", "telemetry", "culprit_reports"),
        ),
        Scenario(
            "ecc_uncorrectable",
            "Uncorrectable ECC error (Xid 48/94/95, ecc_dbe rises) surfaces as a CUDA error on "
            "that GPU's rank; the job fails.",
            "gpu_fault",
            Ecc,
            inject_with(faults.ecc, "xid"),
        ),
        Scenario(
            "nvlink_error",
            "NVLink failure (Xid 74), often after minutes of rising NVLink error counters; all "
            "ranks time out in NCCL.",
            "gpu_fault",
            NvLink,
            inject_with(faults.nvlink, "precursor", "pg_timeout_s"),
        ),
        Scenario(
            "gpu_hang",
            "One GPU stops (util 0 or stuck at idle power) while the others spin in NCCL; no "
            "error line for many minutes, then the watchdog.",
            "hang",
            GpuHang,
            inject_with(faults.gpu_hang, "xid", "stuck", "pg_timeout_s"),
        ),
        Scenario(
            "deadlock",
            "Software deadlock: every rank waits in a collective, all GPUs spin alike, nobody is "
            "at fault; ends by watchdog, cancel, or not at all.",
            "hang",
            Deadlock,
            inject_with(faults.deadlock, "ending", "pg_timeout_s"),
        ),
        Scenario(
            "thermal_straggler",
            "One GPU overheats and throttles (thermal clocks-event bits, low SM clock); the whole "
            "job runs 10-60 % slower.",
            "straggler",
            Straggler,
            inject_with(faults.thermal, "slowdown"),
        ),
        Scenario(
            "pcie_straggler",
            "A GPU's PCIe link degrades (replay counter climbing); the whole job runs slower.",
            "straggler",
            Straggler,
            inject_with(faults.pcie, "slowdown"),
        ),
        Scenario(
            "oom",
            "torch.OutOfMemoryError on one or a few ranks: a software crash, no node at fault.",
            "crash",
            Oom,
            inject_with(faults.oom, "ranks"),
        ),
        Scenario(
            "user_error",
            "A user traceback (KeyError or missing shard in the data pipeline, ValueError on "
            "every rank): no node at fault.",
            "crash",
            UserError,
            inject_with(faults.user_error, "error"),
        ),
        Scenario(
            "illegal_access",
            "A kernel bug: Xid 31/13 names the rank's GPU and the rank dies of an illegal memory "
            "access; an application crash, no node at fault.",
            "crash",
            Fault,
            inject_with(faults.illegal_access),
        ),
        Scenario(
            "segfault",
            "A rank dies of a segmentation fault (exit code -11): no node at fault.",
            "crash",
            Fault,
            inject_with(faults.segfault),
        ),
        Scenario(
            "node_failure",
            "A node goes silent (logs and telemetry stop); peers' NCCL errors follow; Slurm marks "
            "it NOT_RESPONDING, then DOWN, and the job NODE_FAIL (often requeued).",
            "node_failure",
            NodeFailure,
            inject_with(faults.node_failure, "slurmd_timeout_s", "requeue", "fast_errors"),
        ),
    )
}

# Faults the perturbation suite adds (kept apart so that the mixed scenario and the broad suite
# draw exactly what they drew before).
QUIET_FAULTS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "host_hang",
            "One rank stuck in host code: its GPU idles, every other rank spins in NCCL; "
            "nothing printed until the watchdog. The rank is at fault, no node.",
            "hang",
            Deadlock,
            inject_with(quiet_faults.host_hang, "ending", "pg_timeout_s"),
        ),
        Scenario(
            "nfs_hang",
            "One rank blocked on a dead NFS server: kernels print 'nfs: server ... not "
            "responding' and hung-task warnings; the rank is at fault, no node.",
            "hang",
            Deadlock,
            inject_with(quiet_faults.nfs_hang, "ending", "pg_timeout_s"),
        ),
        Scenario(
            "power_cap_straggler",
            "One GPU power-capped from the job's first step (SW power cap, low clocks): the "
            "whole job is slower from the start.",
            "straggler",
            EarlyStraggler,
            inject_with(quiet_faults.power_cap_straggler, "slowdown"),
        ),
        Scenario(
            "host_straggler",
            "One or two ranks of a node slowed on the host (CPU contention, a slow data "
            "loader), mid-job or from the first step: every GPU waits alike, only the ranks' "
            "own times in the job's per-rank timers (Megatron-LM) show them.",
            "straggler",
            HostStraggler,
            inject_with(rank_timings.host_straggler, "slowdown"),
        ),
        Scenario(
            "rank_timing_straggler",
            "One GPU throttles in a job that prints per-rank timings (Megatron-LM's timers or "
            "NVRx's relative GPU scores): the rank's own time stands out from its peers'.",
            "straggler",
            Straggler,
            inject_with(rank_timings.gpu_straggler, "slowdown"),
        ),
        Scenario(
            "ib_flap_straggler",
            "A node's InfiniBand port flaps throughout the job (mlx5 link down/up, NCCL async "
            "events): the whole job is slower from its first step.",
            "straggler",
            EarlyStraggler,
            inject_with(quiet_faults.ib_flap_straggler, "slowdown"),
        ),
    )
} | KINDS
"""Quiet faults, then the scenarios of ``medic.simulate.kinds`` (each one module)."""

HEALTHY: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            "Healthy cluster with a random mix of traps (checkpoint pauses, evaluations, "
            "warnings, benign Xids, normal job endings).",
            None,
            Common,
        ),
        Scenario(
            "healthy_checkpoints",
            "Healthy jobs whose checkpoint saves pause progress for minutes, with evaluation "
            "phases and a long start-up.",
            None,
            Common,
            default_traps=("checkpoint_pause", "evaluation", "long_startup"),
        ),
        Scenario(
            "healthy_lifecycle",
            "Jobs that complete, hit their time limit, are cancelled by the user or requeued by "
            "an admin, and jobs starting mid-recording.",
            None,
            Common,
            default_traps=("completed", "timeout", "cancelled", "requeue", "long_startup"),
        ),
        Scenario(
            "healthy_slow",
            "A job uniformly slow everywhere (power-capped GPUs or a heavier model) next to "
            "normal ones, and a job whose whole allocation gets power-capped mid-run.",
            None,
            Common,
            default_traps=("slow_job", "power_cap"),
        ),
        Scenario(
            "healthy_rank_timings",
            "A healthy job printing per-rank timings: equal wall times on every rank "
            "(forward-backward holds the all-reduce), own compute times and NVRx relative "
            "scores within their normal spread.",
            None,
            Fault,
            inject_with(rank_timings.healthy),
        ),
        Scenario(
            "healthy_noisy",
            "Scary but harmless: Xid 63/92, corrected ECC ticks, NCCL WARN, socket retries, "
            "exporter scrape gaps, brief thermal throttling, an admin draining an idle node.",
            None,
            Common,
            default_traps=("benign_xid", "ecc_sbe", "admin_drain", "scrape_gap", "throttle_blip"),
        ),
        Scenario(
            "healthy_silent_pauses",
            "Rank 0 evaluates, then saves, every few minutes (about 45 s) while the other ranks "
            "spin in the next collective; nothing is printed until the pause is over.",
            None,
            SilentPauses,
            inject_with(rhythm_traps.silent_pauses),
        ),
        Scenario(
            "healthy_sparse_printing",
            "A job printing its progress every 4 to 6.5 minutes, saving unannounced from rank "
            "0 between its lines.",
            None,
            SparsePrinting,
            inject_with(rhythm_traps.sparse_printing),
        ),
        Scenario(
            "healthy_loader_stalls",
            "One rank's data loader stalls 30-120 s at a time (its GPU idle, the other ranks "
            "spinning in NCCL), every few minutes.",
            None,
            Fault,
            inject_with(rhythm_traps.loader_stalls),
        ),
    )
}

MIXED = Scenario(
    "mixed",
    "Several faulty jobs (different fault kinds) amid healthy ones on one cluster.",
    "mixed",
    Mixed,
)
