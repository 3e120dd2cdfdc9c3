"""What a simulated job does over time: its runs (attempts), training schedule and phases.

Times in a plan are float seconds from the recording start (negative: before it). A fault
edits a run's plan (``stop``, ``slowdowns``, ``exit_at``, end state, GPU effects); the
renderers turn the final plan into log lines, telemetry and scheduler rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np

from medic.simulate.cluster import GPUS_PER_NODE

LossCurve = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(steps, the healthy losses at them) -> the losses printed``: a scenario's hook on a job's
loss (a divergence from some step on)."""


class Mode(IntEnum):
    """What a job's GPUs are doing during one second."""

    OFF = 0  # no job on the GPU
    STARTUP = 1  # NCCL init, model build, torch.compile: bursty, mostly idle
    TRAIN = 2  # forward/backward/all-reduce
    CKPT = 3  # checkpoint save: GPUs wait on storage
    EVAL = 4  # validation loop: lighter kernels
    WAIT = 5  # blocked in an NCCL collective: kernel spins (util ~100 %, low power)
    EXITED = 6  # processes gone, allocation not yet released
    STALL = 7  # a step waiting on the host (data loader, garbage collection): GPUs idle


@dataclass(frozen=True)
class TrainSpec:
    """A training configuration: speed, logging and checkpoint cadence, model footprint."""

    step_s: float
    jitter: float
    log_every: int
    ckpt_every: int
    ckpt_s: tuple[float, float]
    eval_every: int
    eval_s: tuple[float, float]
    total_steps: int
    global_batch: int
    seq_len: int
    tflops: float
    loss0: float
    loss_floor: float
    lr: float
    mem_mib: float
    power_w: float
    startup_s: float
    loss_curve: LossCurve | None = None
    """A scenario's edit of the loss the job prints (``medic.simulate.kinds``); None: the
    healthy curve."""


@dataclass
class GpuEffect:
    """A per-GPU departure from the job's mode during ``[start, end)``.

    kinds: ``vanish`` (no samples), ``null`` (samples with null metrics), ``exited`` (the
    process is gone: idle, memory freed), ``idle`` (a hung device: util 0, or 100 when
    ``level`` is 2, at idle power), ``heating`` (temperature climbing), ``thermal`` (hot,
    throttled, slow clock), ``capped`` (power-capped at ``level`` W), ``waiting`` (a fraction
    ``level`` of each step spent waiting for a straggler: lower power), ``host_bound`` (while
    the job waits in a collective, this GPU's rank is busy on its host: ``level`` 1 no kernels,
    2 the bursts of a checkpoint writer), ``evaluating`` (while the job waits in a
    collective, this GPU runs an evaluation alone; ``level`` is the job's training power).
    """

    node: int
    gpu: int
    kind: str
    start: float
    end: float = np.inf
    level: float = 1.0


@dataclass
class CounterEvent:
    """An increment of a cumulative counter (``ecc_sbe``, ``ecc_dbe``, ``pcie_replay``,
    ``nvlink_errors``) or an Xid report (``xid``, amount = code) on one GPU at ``time``."""

    node: int
    gpu: int
    counter: str
    time: float
    amount: int = 1


@dataclass(frozen=True)
class PortCount:
    """Counts of one InfiniBand port counter of a node (a kernel counter name of
    ``medic.ingest.infiniband.COUNTER_BITS``, on ``port`` of the node's adapters): ``amount`` at
    ``time``, or, with ``end``, a Poisson stream of ``amount`` a second until ``end``."""

    node: int
    port: int
    counter: str
    time: float
    amount: float
    end: float | None = None


@dataclass(frozen=True)
class Holdup:
    """A step that waits ``seconds`` on one rank's host (a data-loader stall): that rank's GPU
    sits idle while every other rank spins in the next collective."""

    index: int
    """Index of the step in the run's ``durations``."""
    seconds: float
    rank: int


@dataclass
class Pause:
    kind: str  # "ckpt" | "eval"
    step: int
    start: float
    end: float


@dataclass
class Schedule:
    """Completed steps (numbers and wall-clock end times) and the pauses between them."""

    steps: np.ndarray
    ends: np.ndarray
    durations: np.ndarray
    stalled: np.ndarray
    pauses: list[Pause]

    def last_step_before(self, t: float) -> tuple[int, float]:
        """(step number, end time) of the last step completed before ``t``; (first-1, -inf)."""
        i = int(np.searchsorted(self.ends, t, side="left")) - 1
        if i < 0:
            return int(self.steps[0]) - 1 if self.steps.size else 0, -np.inf
        return int(self.steps[i]), float(self.ends[i])


@dataclass
class Job:
    """A Slurm job and what it runs: the same id across requeued attempts."""

    job_id: str
    raw_id: str
    """The id slurmstepd prints (an array task's own job id)."""
    framework: str
    spec: TrainSpec
    rank_mode: str
    """``column``: the collector knows each line's rank; ``prefix``: torchrun prefixes every
    line with ``[rankN]:``; ``none``: only PyTorch's C++ lines carry the prefix."""
    torch_gen: str
    """``new`` or ``old`` PyTorch log formats."""
    nccl: str
    pg_timeout_s: int
    time_limit_s: float
    uid: int
    user_slow: float = 1.0
    """Uniform slowness of the whole job (power-capped or just a heavier model): > 1 slower."""
    nccl_debug: bool = True
    """NCCL_DEBUG=INFO: every rank prints NCCL's start-up lines."""
    colour: bool = False
    """torchtitan's ANSI-coloured progress lines."""
    power_cap_w: float | None = None
    """An administrative power cap on every GPU of the job (a uniformly slow job)."""
    announces: bool = True
    """Whether the framework prints when a checkpoint or an evaluation begins (False: only
    its closing line, when the pause is over)."""
    runs: list[Run] = field(default_factory=list)
    traps: list[str] = field(default_factory=list)


@dataclass
class RankTimings:
    """What a run prints of its ranks' timings, and which ranks are slow from when."""

    style: str
    """``megatron_timers`` or ``nvrx``."""
    seed: int
    slow: dict[int, float] = field(default_factory=dict)
    """rank -> factor on its own work, from ``since``."""
    since: float = 0.0
    report_s: float = 120.0
    """NVRx's report interval."""
    stages: int = 1
    """Megatron's pipeline stages."""
    last_stage_extra: float = 0.0
    """How much longer the last stage's forward and backward compute take (output layer, loss)."""


@dataclass
class Run:
    """One attempt of a job on a set of nodes."""

    job: Job
    attempt: int
    nodes: list[int]
    start: float
    first_step: int
    end: float
    """When Slurm records the end (terminal state); beyond the recording if it runs on."""
    exit_at: float
    """When the training processes exit (<= end)."""
    end_state: str = "RUNNING"
    exit_code: int | None = None
    closing: str = "none"
    """What the job prints at its end: none, completed, timeout, cancelled, requeue, failed."""
    stop: float = np.inf
    """Progress stops here (a fault): no step completes after it."""
    after_stop: Mode = Mode.WAIT
    slowdowns: list[tuple[float, float]] = field(default_factory=list)
    effects: list[GpuEffect] = field(default_factory=list)
    durations: np.ndarray = field(default_factory=lambda: np.zeros(0))
    stalled: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    ckpt_pauses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eval_pauses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ckpt_style: str = "pause"
    """How a checkpoint save looks on the GPUs: ``pause`` (every GPU idle while storage is
    written), ``barrier`` (writers write while the other ranks spin in a barrier, see
    ``medic.simulate.phases``) or ``async`` (a short staging copy, then training goes on)."""
    writers: str | None = None
    """Who writes a ``barrier`` save (``medic.simulate.phases.WRITERS``); None: drawn."""
    solo_eval: bool = False
    """Rank 0 evaluates alone while every other rank waits in the next collective (a training
    loop that runs its evaluation under ``if rank == 0``)."""
    holdups: list[Holdup] = field(default_factory=list)
    agent_pids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rank_timings: RankTimings | None = None
    """What the run prints of its ranks' own timings (``medic.simulate.rank_timings``)."""

    @property
    def train_start(self) -> float:
        return self.start + self.job.spec.startup_s

    @property
    def world_size(self) -> int:
        return len(self.nodes) * GPUS_PER_NODE

    def rank_node(self, rank: int) -> int:
        return self.nodes[rank // GPUS_PER_NODE]

    def invalidate(self) -> None:
        self.__dict__.pop("schedule", None)

    @cached_property
    def schedule(self) -> Schedule:
        """The steps and pauses this run completes, given its current plan."""
        spec = self.job.spec
        durations = self.durations.copy()
        steps = self.first_step + 1 + np.arange(durations.size, dtype=np.int64)
        ckpt = (spec.ckpt_every > 0) & (steps % max(spec.ckpt_every, 1) == 0)
        evals = (spec.eval_every > 0) & (steps % max(spec.eval_every, 1) == 0)
        ckpt_len = np.where(ckpt, _cycle(self.ckpt_pauses, np.cumsum(ckpt) - 1), 0.0)
        eval_len = np.where(evals, _cycle(self.eval_pauses, np.cumsum(evals) - 1), 0.0)
        ends = _ends(self.train_start, durations, ckpt_len + eval_len)
        factor = 1.0
        for at, new in sorted(self.slowdowns):
            first = int(np.searchsorted(ends - durations, at, side="left"))
            durations[first:] *= new / factor
            factor = new
            ends = _ends(self.train_start, durations, ckpt_len + eval_len)
        horizon = min(self.stop, self.exit_at)
        keep = ends <= horizon
        if spec.total_steps:
            keep &= steps <= spec.total_steps
        n = int(np.count_nonzero(keep))
        pauses = []
        for i in np.flatnonzero((ckpt | evals)[:n]):
            start = float(ends[i])
            if evals[i]:
                pauses.append(Pause("eval", int(steps[i]), start, start + float(eval_len[i])))
                start += float(eval_len[i])
            if ckpt[i]:
                pauses.append(Pause("ckpt", int(steps[i]), start, start + float(ckpt_len[i])))
        kept = [
            Pause(p.kind, p.step, p.start, min(p.end, horizon)) for p in pauses if p.start < horizon
        ]
        return Schedule(steps[:n], ends[:n], durations[:n], self.stalled[:n], kept)

    @property
    def progress_end(self) -> float:
        """When progress stops for good: the fault, or the processes' exit."""
        return min(self.stop, self.exit_at)


def _cycle(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index]``, wrapping around (a run draws a fixed number of pause lengths)."""
    if values.size == 0:
        return np.zeros(index.size)
    picked: np.ndarray = values[index % values.size]
    return picked


def _ends(start: float, durations: np.ndarray, pause_after: np.ndarray) -> np.ndarray:
    before = (
        np.concatenate(([0.0], np.cumsum(pause_after)[:-1])) if pause_after.size else pause_after
    )
    ends: np.ndarray = start + np.cumsum(durations) + before
    return ends


def paint_modes(run: Run, seconds: int) -> np.ndarray:
    """The run's mode for every second of the recording (OFF outside the allocation)."""
    modes = np.full(seconds, Mode.OFF, dtype=np.int8)

    def paint(a: float, b: float, mode: Mode) -> None:
        lo, hi = max(0, int(np.floor(a))), min(seconds, int(np.ceil(b)))
        if hi > lo:
            modes[lo:hi] = mode

    sched = run.schedule
    paint(run.start, run.end, Mode.EXITED)
    paint(run.start, run.exit_at, Mode.STARTUP)
    train_end = run.progress_end
    paint(run.train_start, min(train_end, run.exit_at), Mode.TRAIN)
    for end, took in zip(sched.ends[sched.stalled], sched.durations[sched.stalled], strict=True):
        paint(end - took, end - took / 2, Mode.STALL)
    for holdup in run.holdups:
        if holdup.index < sched.ends.size:
            began = float(sched.ends[holdup.index] - sched.durations[holdup.index])
            paint(began, began + holdup.seconds, Mode.WAIT)
    barrier = run.ckpt_style == "barrier"
    for pause in sched.pauses:
        if pause.kind == "eval":
            mode = Mode.WAIT if run.solo_eval else Mode.EVAL
        else:
            mode = Mode.WAIT if barrier else Mode.CKPT
        paint(pause.start, pause.end, mode)
    if run.stop < run.exit_at:
        paint(run.stop, run.exit_at, run.after_stop)
    return modes
