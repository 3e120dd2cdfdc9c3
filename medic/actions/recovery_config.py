"""Settings of the recovery loop (``[rules.lifecycle]``, ``[rules.restart_loop]``,
``[rules.deadman]``): what happens to a node medic drained, to a job that restarts without
progress, and when medic itself stops receiving data. docs/recovery.md explains them."""

from __future__ import annotations

from dataclasses import dataclass, field

from medic.config import Count, NonNegative, Positive, PositiveCount


@dataclass(frozen=True)
class LemonWeights:
    """How much one incident of each kind counts towards a node's lemon score."""

    gpu_fault: NonNegative = 1.0
    """A GPU fault that blamed the node."""
    node_failure: NonNegative = 1.0
    """A node failure that blamed the node."""
    crash: NonNegative = 0.5
    """A crash attributed to the node."""
    hang: NonNegative = 0.5
    """A hang attributed to the node."""
    straggler: NonNegative = 0.25
    """A straggler detection that blamed the node."""
    check_failed: NonNegative = 1.0
    """A failed health check of the node."""


@dataclass(frozen=True)
class LemonConfig:
    """Lemon-node scoring: incidents that blamed a node, across jobs, weighted by kind and
    decayed by age."""

    threshold: Positive = 3.0
    """A node scoring at least this (and blamed in ``min_jobs`` jobs or more) is a lemon."""
    min_jobs: PositiveCount = 2
    """Incidents of a single job never make a lemon (one bad job can blame a node many times)."""
    half_life_s: Positive = 14 * 86_400.0
    """An incident's weight halves with every this much age."""
    weights: LemonWeights = field(default_factory=LemonWeights)
    """Weight per detection kind, and of a failed health check of the node."""


@dataclass(frozen=True)
class LifecycleConfig:
    """Drain -> check -> resume or keep, for nodes medic drained (enforce mode only)."""

    enabled: bool = False
    """Check and resume the nodes medic drained (needs the ``cli`` executor and enforce mode)."""
    check_command: str = "dcgmi diag -r 2"
    """Shell command the check job runs on the node; exit status 0 means healthy (DCGM's
    ``dcgmi diag``, an NCCL all-reduce test, a site script)."""
    sbatch_args: tuple[str, ...] = ("--exclusive",)
    """Further sbatch options for the check job (``--gpus-per-node=8``, ``--partition=...``)."""
    output_dir: str = ".medic/checks"
    """Where check jobs write their output (a directory the nodes share with medic)."""
    check_after_s: NonNegative = 60.0
    """Cooldown: a node is checked once it has been drained (and idle) this long."""
    check_timeout_s: Positive = 1800.0
    """A check that has not ended this long after its submission failed (it is cancelled)."""
    max_checks_per_node: Count = 2
    """Checks of one node within ``check_window_s``; past that the node is kept drained."""
    check_window_s: NonNegative = 86_400.0
    """The span ``max_checks_per_node`` counts over."""
    max_concurrent_checks: PositiveCount = 2
    """Nodes under check at once, cluster-wide (each is out of service meanwhile)."""
    reservation_prefix: str = "medic-check"
    """Check reservations and jobs are named ``<prefix>-<node>``."""
    notify: tuple[str, ...] = ()
    """Receivers told when a node's check fails and when a node is kept drained (budget spent,
    lemon): each a message of its own in the node's thread."""
    lemon: LemonConfig = field(default_factory=LemonConfig)
    """Lemon-node scoring; a lemon is kept drained without a check."""

    def __post_init__(self) -> None:
        if not self.check_command.strip():
            raise ValueError("check_command must not be empty")


@dataclass(frozen=True)
class RestartLoopConfig:
    """A job that restarts without progress is held instead of requeued again."""

    max_restarts_without_progress: Count = 2
    """Consecutive restarts after which no checkpoint was saved (and, for jobs that never log
    one, no step passed the highest before) that medic tolerates; the next requeue becomes a
    hold. Higher gives a job that fails differently each time (a bad node, then another) more
    chances, at the cost of more allocations spent before a person looks. 0 turns the guard
    off."""
    max_same_failure_restarts: Count = 1
    """Of those, consecutive restarts whose attempts all failed the same way (the same kind
    and the same evidence: the same catalogue signatures, the same step) that medic tolerates
    before the next requeue becomes a hold: a failure that follows the job onto other nodes
    from the same checkpoint is the job's, not a node's. Lower holds a repeating job sooner,
    at the risk of holding one whose failures only looked alike; at or above
    ``max_restarts_without_progress`` it changes nothing. 0 leaves it to that setting."""
    notify: tuple[str, ...] = ()
    """Receivers told when a job is held for a restart loop."""


@dataclass(frozen=True)
class DeadmanConfig:
    """An alert when medic stops receiving data: a source's watermark has not moved."""

    after_s: Positive = 300.0
    """A source whose watermark stood still this long (wall clock) is stalled."""
    notify: tuple[str, ...] = ()
    """Receivers of the dead-man alert (none: it is only logged and shown in /healthz)."""


@dataclass(frozen=True)
class NvrxConfig:
    """Jobs launched by NVIDIA's nvidia-resiliency-ext ``ft_launcher`` (see docs/nvrx.md)."""

    restart_window_s: NonNegative = 600.0
    """After an NVRx in-place restart (its log line, or a new cycle file), medic does not
    requeue the job for this long: NVRx is handling it."""
    cycle_info_dir: str = ""
    """Where ``ft_launcher --ft-cycle-info-dir`` writes ``cycle_info.*`` files (empty: none
    read)."""
    exclusion_dir: str = ""
    """Where to write ``task_<K>.drained`` files for NVRx job arrays; ``{array_job_id}`` is
    replaced by the array's id (empty: none written)."""
