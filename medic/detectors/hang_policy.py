"""The hang detector's alarm policy for a silence its scorer (``medic.detectors.hang_score``)
found improbable: which tier the detection has.

A hang is *confirmed* by positive evidence: each kind of it is one function of the silence's
facts (``POSITIVE_EVIDENCE``), returning what it saw or None; a new kind of evidence is one more
function there. Without any, the silence alone is a *suspect* until it runs past the
conservative bound the job's own history sets (``confirm_us``): ``confirm_factor`` times the
longest pause the job has had, at least ``confirm_floor_s``. A healthy job's first unannounced
evaluation, save or data-loader stall is silence and waiting GPUs too; a pause twice as long as
any the job has taken, and three minutes at least, is not one. That bound leans on the GPUs
showing the pauses they can (a save's writers idle, an evaluating rank at work): while a job's
GPUs, seen before, are not seen in the silence, it is ``confirm_factor`` times longer.

One rank's GPU idle while its peers wait in a collective is positive evidence once it has
lasted past the same bound, learned from the job's own spells of one rank apart alone (its
data-loader stalls, which end by themselves): ``confirm_factor`` times the longest of those, at
least ``confirm_floor_s``. A stall lasts as long as the job's input pipeline makes it, so the
first is judged by the floor; the job's long evaluations or saves, pauses of another kind, do
not stretch the bound, as they stretch the silence's.

Every GPU of the job waiting (each spinning in a collective, pegged at a wait's power, none
computing or idle, and no node's telemetry missing) is positive evidence once it has lasted past
the same bound, learned from the job's own such spells that it recovered from (steps resumed):
``confirm_factor`` times the longest of those, at least ``confirm_floor_s``. A healthy job whose
rank 0 evaluates or saves unannounced leaves the others spinning like that for minutes at its
own cadence, so the first such spell is judged by the floor and the next ones by the job's
longest; a deadlock spins for good, and is confirmed a few minutes in, however long the job's
other pauses (which stretch the silence's bound, not this one).

NCCL's RAS declaring some of the job's processes dead (unreachable for a minute) while the
job's GPUs wait is positive evidence: a process lost in the middle of training, the others
blocked on it. A process that exits normally is declared dead too, to a peer still at work, so
the declaration counts only while the GPUs wait and for no more than half the job's GPUs.

The lines in which a job reports being stuck (NCCL's watchdog, a heartbeat monitor) confirm a
hang by themselves (``HangDetector._reported_stuck``) when the wait they report is a
collective's timeout (``confirm_floor_s`` or longer: the process is being taken down). A shorter
reported wait is a warning the job may recover from (Horovod's stall inspector speaks after a
minute, and again every minute while the stall lasts; a healthy job's rank 0 saving for two
minutes makes its peers' tensors wait that long): a suspect, confirmed once the job's reports of
that stall span ``confirm_us`` of its longest pause (``report_tier``), or by the silence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from medic.detectors.base import CONFIRMED, SUSPECT
from medic.detectors.hang_evidence import Blame
from medic.timeutil import US

if TYPE_CHECKING:
    from medic.detectors.hang import HangConfig


@dataclass(frozen=True)
class Silence:
    """What the detector knows of one job's silence when its scorer fires."""

    silence_us: int
    """The silence the threshold was compared with."""
    blame: Blame
    """The nodes (with their evidence) or the stuck ranks (``medic.detectors.hang_evidence``)."""
    blocked_apart: bool
    """A GPU apart from the wait is on a node whose kernel reported a task blocked past its
    hung-task timeout since the spell began (while the GPUs corroborate)."""
    storage_apart_us: int
    """How long the GPUs have corroborated a spell in which a GPU apart from the wait is on a
    node whose NFS client reported its server not responding since it began; 0: none."""
    longest_pause_us: int
    """The longest pause the job has had: step gap, save, or spell of waiting GPUs."""
    apart_us: int = 0
    """How long one rank's GPU (not a save's writer) has been idle, saying so, while all its
    peers wait, without a break (telemetry time); 0 when the GPUs do not show that now."""
    longest_apart_us: int = 0
    """The longest spell of one rank apart alone the job has come back from (a stall)."""
    all_waiting_us: int = 0
    """How long every GPU of the job has spun in the wait without a break (telemetry time,
    ``JobTelemetry.all_spinning_since``); 0 when the GPUs do not show that now."""
    longest_all_waiting_us: int = 0
    """The longest spell of every GPU waiting the job has come back from."""
    blind: bool = False
    """The job's GPUs, seen before, are not seen in the silence (a scrape gap, an exporter
    restarting): a save or an evaluation that they would have shown cannot be told apart."""
    dead: tuple[str | None, ...] = ()
    """A process NCCL's RAS declared dead in the silence, each as the host it ran on (None
    where the line does not say)."""
    job_gpus: int = 0
    """The GPUs the job's healthy snapshot holds (0: none yet)."""
    waiting: bool = False
    """The GPUs corroborate the silence (spinning in the wait, one stuck or stopped)."""


PositiveEvidence = Callable[["HangConfig", Silence], str | None]


def against_nodes(config: HangConfig, silence: Silence) -> str | None:
    """Evidence against a node: a stuck GPU, hardware counters, a kernel hardware error, its
    telemetry stopped while the others wait (``hang_evidence.culprits``). Telemetry stopped
    alone counts only once the silence is ``confirm_factor`` times longer than any pause the
    job took: until then the job may be pausing as it did before, or a little longer (rank 0
    saving or evaluating unannounced, the others spinning), while the node's exporter restarts
    (``node_failure`` reads it the same way)."""
    blame = silence.blame
    if not blame.nodes:
        return None
    pausing = silence.silence_us <= config.confirm_factor * silence.longest_pause_us
    if blame.nodes_went_silent and pausing:
        return None
    return f"evidence against {', '.join(blame.nodes)}"


def blocked_on_io(config: HangConfig, silence: Silence) -> str | None:
    """A rank apart from the wait on a node whose kernel reports a task blocked past its
    hung-task timeout: no stall that ends by itself; or on a node whose NFS server has not
    answered for ``stall_silence_s`` of that spell (a server failing over answers sooner)."""
    if silence.blocked_apart:
        return "a rank apart on a node blocked on I/O"
    waited = silence.storage_apart_us
    if waited and waited >= config.stall_silence_s * US:
        return f"a rank apart for {waited / US:.0f}s on a node whose NFS server is not responding"
    return None


def apart_past_stalls(config: HangConfig, silence: Silence) -> str | None:
    """One rank apart while its peers wait, longer than ``apart_confirm_us``: past any stall
    of the job's own (a data-loader stall looks the same while it lasts)."""
    if _past_spells(config, silence.apart_us, silence.longest_apart_us) is None:
        return None
    return f"a rank apart from its waiting peers for {silence.apart_us / US:.0f}s"


DECLARED_DEAD = "NCCL's RAS declared"
"""How the evidence of ``declared_dead_while_waiting`` begins (the summary says it)."""


def declared_dead_while_waiting(config: HangConfig, silence: Silence) -> str | None:
    """NCCL's RAS declared some of the job's processes dead (unreachable for a minute) while
    its GPUs wait: a process lost in the middle of training, its peers blocked on it. Alone it
    is no evidence: a process that exited normally is declared dead to a peer still at work
    (rank 0 writing the last checkpoint); then the others' GPUs are not in a wait, and most of
    the job's processes are declared dead, so more than half of its GPUs' count gives none."""
    dead = len(silence.dead)
    if not dead or not silence.waiting or 2 * dead > silence.job_gpus:
        return None
    hosts = sorted({h for h in silence.dead if h is not None})
    on = f" on {', '.join(hosts)}" if hosts else ""
    return f"{DECLARED_DEAD} {dead} process(es) dead{on} while the others wait"


ALL_WAITING = "every GPU waiting"
"""How the evidence of ``all_waiting_past_spells`` begins (the summary says it)."""


def all_waiting_past_spells(config: HangConfig, silence: Silence) -> str | None:
    """Every GPU in the wait longer than ``confirm_us`` of the longest such spell the job
    recovered from: past any evaluation or save of rank 0's the others wait for."""
    waited = silence.all_waiting_us
    bound = _past_spells(config, waited, silence.longest_all_waiting_us)
    return (
        None if bound is None else f"{ALL_WAITING} for {waited / US:.0f}s, past {bound / US:.0f}s"
    )


def _past_spells(config: HangConfig, lasted_us: int, longest_us: int) -> int | None:
    """The bound (``confirm_us`` of the longest such spell the job came back from) that a spell
    which has ``lasted_us`` is past; None while it is not, or when there is no spell."""
    if not lasted_us:
        return None
    bound = confirm_us(config, longest_us)
    return bound if lasted_us >= bound else None


POSITIVE_EVIDENCE: tuple[PositiveEvidence, ...] = (
    against_nodes,
    blocked_on_io,
    apart_past_stalls,
    all_waiting_past_spells,
    declared_dead_while_waiting,
)


def confirm_us(config: HangConfig, longest_pause_us: int, blind: bool = False) -> int:
    """The silence that confirms a hang without positive evidence; ``confirm_factor`` times
    that when the job's GPUs cannot be seen."""
    bound = max(config.confirm_floor_s * US, config.confirm_factor * longest_pause_us)
    return round(config.confirm_factor * bound if blind else bound)


def apart_confirm_us(config: HangConfig, longest_apart_us: int) -> int:
    """How long one rank apart confirms a hang: the bound of ``confirm_us``, from the job's
    longest stall rather than its longest pause of any kind."""
    return confirm_us(config, longest_apart_us)


@dataclass(frozen=True)
class Tier:
    tier: str
    evidence: tuple[str, ...]
    bound_us: int
    apart_bound_us: int | None = None
    """How long the rank apart now confirms (None: no rank apart)."""

    @property
    def why(self) -> str:
        """What the summary says of the tier (nothing when evidence confirms it: the culprit,
        or the stuck ranks, say it; but every GPU waiting and a process declared dead, which
        the culprits do not name, are said)."""
        if self.evidence:
            said = [e for e in self.evidence if e.startswith((ALL_WAITING, DECLARED_DEAD))]
            return f"; confirmed: {'; '.join(said)}" if len(said) == len(self.evidence) else ""
        seconds = f"{self.bound_us / US:.0f}s"
        if self.tier == CONFIRMED:
            return f"; confirmed: silent past {seconds}"
        if self.apart_bound_us is not None:
            apart = f"{self.apart_bound_us / US:.0f}s"
            return f"; suspect: a rank apart until {apart}, silence alone until {seconds}"
        return f"; suspect: silence alone until {seconds}"


def tier_of(config: HangConfig, silence: Silence) -> Tier:
    """Confirmed by positive evidence or by a silence past ``confirm_us``; else suspect."""
    evidence = tuple(e for check in POSITIVE_EVIDENCE if (e := check(config, silence)) is not None)
    bound = confirm_us(config, silence.longest_pause_us, silence.blind)
    confirmed = bool(evidence) or silence.silence_us >= bound
    apart = apart_confirm_us(config, silence.longest_apart_us) if silence.apart_us else None
    if silence.storage_apart_us:  # waiting on storage confirms sooner (``blocked_on_io``)
        apart = min(apart or bound, round(config.stall_silence_s * US))
    return Tier(CONFIRMED if confirmed else SUSPECT, evidence, bound, apart)


def report_tier(config: HangConfig, waited_us: int | None, stuck_us: int, longest_us: int) -> Tier:
    """The tier of a job's reports of being stuck, with the bound they must span: from the
    longest wait a line reports (``waited_us``, None where none says how long), how long the
    reports say the job has been stuck so far (``stuck_us``: the latest line since the earliest
    onset) and the job's longest pause."""
    bound = confirm_us(config, longest_us)
    if waited_us is None or waited_us >= config.confirm_floor_s * US or stuck_us >= bound:
        return Tier(CONFIRMED, (), bound)
    return Tier(SUSPECT, (), bound)
