"""Settings of the recovery loop (``[rules.lifecycle]``, ``[rules.restart_loop]``,
``[rules.deadman]``): what happens to a node medic drained, to a job that restarts without
progress, and when medic itself stops receiving data. docs/recovery.md explains each key."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LemonWeights:
    """How much one incident of each kind counts towards a node's lemon score."""

    gpu_fault: float = 1.0
    node_failure: float = 1.0
    crash: float = 0.5
    hang: float = 0.5
    straggler: float = 0.25
    check_failed: float = 1.0
    """A failed health check of the node."""

    def __post_init__(self) -> None:
        if any(value < 0 for value in vars(self).values()):
            raise ValueError("weights must be >= 0")


@dataclass(frozen=True)
class LemonConfig:
    """Lemon-node scoring: incidents that blamed a node, across jobs, weighted by kind and
    decayed by age."""

    threshold: float = 3.0
    """A node scoring at least this (and blamed in ``min_jobs`` jobs or more) is a lemon."""
    min_jobs: int = 2
    """Incidents of a single job never make a lemon (one bad job can blame a node many times)."""
    half_life_s: float = 14 * 86_400.0
    """An incident's weight halves with every this much age."""
    weights: LemonWeights = field(default_factory=LemonWeights)
    """Weight per detection kind, and of a failed health check of the node."""

    def __post_init__(self) -> None:
        if self.threshold <= 0 or self.half_life_s <= 0:
            raise ValueError("threshold and half_life_s must be positive")
        if self.min_jobs < 1:
            raise ValueError("min_jobs must be at least 1")


@dataclass(frozen=True)
class LifecycleConfig:
    """Drain -> check -> resume or keep, for nodes medic drained (enforce mode only)."""

    enabled: bool = False
    check_command: str = "dcgmi diag -r 2"
    """Shell command the check job runs on the node; exit status 0 means healthy (DCGM's
    ``dcgmi diag``, an NCCL all-reduce test, a site script)."""
    sbatch_args: tuple[str, ...] = ("--exclusive",)
    """Further sbatch options for the check job (``--gpus-per-node=8``, ``--partition=...``)."""
    output_dir: str = ".medic/checks"
    """Where check jobs write their output (must be shared with the nodes)."""
    check_after_s: float = 60.0
    """Cooldown: a node is checked once it has been drained (and idle) this long."""
    check_timeout_s: float = 1800.0
    """A check that has not ended this long after its submission failed (it is cancelled)."""
    max_checks_per_node: int = 2
    """Checks of one node within ``check_window_s``; past that the node is kept drained."""
    check_window_s: float = 86_400.0
    max_concurrent_checks: int = 2
    """Nodes under check at once, cluster-wide (each is out of service meanwhile)."""
    reservation_prefix: str = "medic-check"
    notify: tuple[str, ...] = ()
    """Receivers told when a node is kept drained (failed check, budget spent, lemon)."""
    lemon: LemonConfig = field(default_factory=LemonConfig)

    def __post_init__(self) -> None:
        if not self.check_command.strip():
            raise ValueError("check_command must not be empty")
        for name in ("check_after_s", "check_window_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.check_timeout_s <= 0:
            raise ValueError("check_timeout_s must be positive")
        if self.max_checks_per_node < 0 or self.max_concurrent_checks < 1:
            raise ValueError("max_checks_per_node >= 0 and max_concurrent_checks >= 1")


@dataclass(frozen=True)
class RestartLoopConfig:
    """A job that restarts without progress is held instead of requeued again."""

    max_restarts_without_progress: int = 2
    """Consecutive restarts after which no checkpoint was saved (and, for jobs that never
    logged one, no step passed the highest before) that medic tolerates; the next requeue
    becomes a hold. 0 turns the guard off."""
    notify: tuple[str, ...] = ()
    """Receivers told when a job is held for a restart loop."""

    def __post_init__(self) -> None:
        if self.max_restarts_without_progress < 0:
            raise ValueError("max_restarts_without_progress must be >= 0")


@dataclass(frozen=True)
class DeadmanConfig:
    """An alert when medic stops receiving data: a source's watermark has not moved."""

    after_s: float = 300.0
    """A source whose watermark stood still this long (wall clock) is stalled."""
    notify: tuple[str, ...] = ()
    """Receivers of the dead-man alert (none: it is only logged and shown in /metrics)."""

    def __post_init__(self) -> None:
        if self.after_s <= 0:
            raise ValueError("after_s must be positive")
