"""A job's pace (seconds per training step) against its own healthy baseline.

Each new training step gives a pace from one source, chosen once per job from what it prints:
the printed step time, the inverse of a printed throughput, or the time between two step lines
divided by the steps between them (no pace where that is ``PAUSE_FACTOR`` times the interval
before: a save or an evaluation no line announced). The baseline is a river rolling median of
healthy paces, ready once they cover ``grace_steps`` training steps (a line printed every
hundred iterations averages a hundred). Nothing is learned while any of the job's GPUs looks
unlike its peers (flagged in any recent window), so a straggler's slowdown
never becomes the baseline; and a pace is learned only once the GPUs of its time have been
compared with their peers over ``JUDGED_WINDOWS`` windows since, none standing out (``settle``):
a GPU that throttles slows the job's next step, but stands out from its peers only in a
window or two (its clock falls as it heats), while a job printing every step would have
learned a few hundred of its slow paces by then. A job slowed with no GPU standing out is
slowed everywhere alike (a different data mix, longer sequences, a shared file system: step
time drifts by 10-20% in healthy jobs), which is not a straggler but the job's new pace: it
is learned, slow or not.

Once per peer-comparison window the job's current pace, the median of the paces seen over the
last ``pace_span_s`` (the latest one for jobs that print more rarely), votes slow or not;
``slow_k`` slow votes out of the last ``slow_n`` make the job slowed.
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from typing import TYPE_CHECKING

from medic.detectors.online import KOfN, QuantileScorer
from medic.detectors.progress_state import Step
from medic.timeutil import US

if TYPE_CHECKING:
    from medic.detectors.straggler import StragglerConfig

PACE_SOURCES = ("step_time", "throughput", "measured")
RECENT_PACES = 512
"""Most paces kept for the current-pace median (a bound for jobs printing every step)."""
STALE_SAMPLE = 16
"""Latest paces whose spacing gives a job's usual print interval."""
JUDGED_WINDOWS = 2
"""Peer-comparison windows after a pace in which no GPU of the job stood out, before the pace is
learned (``PaceModel.settle``)."""
PAUSE_FACTOR = 4.0
"""A pace measured from the time between two step lines at this many times the job's previous
one has a pause in it (a save or an evaluation no line announced): a slower GPU stretches
every step alike and the next interval as much, a pause only the one it falls in."""


class PaceModel:
    """One job's pace against its own healthy baseline, with k-of-n slow votes."""

    def __init__(self, config: StragglerConfig) -> None:
        self.config = config
        self.source: str | None = None
        self.baseline = QuantileScorer(0.5, config.pace_window, config.grace_steps)
        self.votes = KOfN(config.slow_k, config.slow_n)
        self.ratio: float | None = None
        """The current pace over the baseline, as of the latest vote."""
        self._recent: deque[tuple[int, float]] = deque(maxlen=RECENT_PACES)
        self._previous: tuple[int, int] | None = None
        self._measured: float | None = None
        """The pace of the interval before, measured between two lines (``PAUSE_FACTOR``)."""
        self._unjudged: deque[tuple[int, float, int]] = deque(maxlen=RECENT_PACES)
        """Paces (time, pace, steps) awaiting their GPUs' comparison with their peers."""

    def observe(self, step: Step, suspect: bool) -> None:
        """A new step; ``suspect`` says some GPU of the job looked unlike its peers lately.
        Remembers the line, to count the steps the next one stands for (the steps since this
        one; for a job's first line, since the start; None when unknown). Runs once per
        training step: that count is inlined.

        A line after a phase or a restart is no fair sample of the time between lines: its
        interval held the save or the restart. A pace the framework printed is its own timing
        of its steps, and most frameworks time steps alone (Megatron-LM stops its interval
        timer around evaluations and saves); it is kept then, to vote, unless it is
        ``PAUSE_FACTOR`` times the job's latest (a timer that ran through the pause, as
        nanoGPT's at an evaluation), and never learned: a job that saves at every line it
        prints would otherwise never vote. A job's first line is learned even so: its interval
        began at start-up (torchtitan's tps counts from the metrics logger's creation,
        Megatron-LM's interval timer from the first iteration), so compilation, autotuning and
        cold caches can only make it slower than the job's usual pace, never faster. For a job
        printing every few minutes it is the only sample before a slowdown that starts between
        its lines."""
        _, time, number, gap_us, fresh, clean, step_time_s, throughput, _ = step
        previous, steps = self._previous, None
        if number is not None:
            self._previous = (time, number)
            if previous is None:
                steps = number if number > 0 else None
            elif number > previous[1]:
                steps = number - previous[1]
        if not fresh and step_time_s is None and not throughput:
            return
        pace = self._pace(step_time_s, throughput, gap_us if clean else None, steps)
        if pace is None:
            return
        learned = fresh or previous is None
        if self.source == "measured":
            before, self._measured = self._measured, pace
            if before is not None and pace > PAUSE_FACTOR * before:
                return  # a pause, not a pace: learned from, it would be the baseline for good
        elif not learned and self._recent and pace > PAUSE_FACTOR * self._recent[-1][1]:
            return  # a printed time that ran through the pause
        self._recent.append((time, pace))
        if learned and not suspect:
            self._unjudged.append((time, pace, steps or 1))

    def settle(self, now: int, odd: bool) -> None:
        """At a peer-comparison window's end (``now``): learn the paces ``JUDGED_WINDOWS``
        windows old, or drop every pace not learned yet while a GPU of the job stands out
        (``odd``): they may be its slowdown's."""
        if odd:
            self._unjudged.clear()
            return
        cutoff = now - round(JUDGED_WINDOWS * self.config.window_s * US)
        unjudged = self._unjudged
        while unjudged and unjudged[0][0] <= cutoff:
            _, pace, steps = unjudged.popleft()
            self.baseline.learn(pace, weight=steps)

    def vote(self, now: int) -> None:
        """One vote per window, from the current pace; no vote while the model has no opinion
        or the job printed no pace for ``stale_s`` (or three of its usual print intervals, if
        longer): a silent job is the hang detector's business."""
        c = self.config
        reference = self.baseline.reference if self.baseline.ready else None
        if reference is None or not self._recent or now - self._recent[-1][0] > self._stale_us():
            self.ratio = None
            return
        span = [p for t, p in self._recent if now - t <= c.pace_span_s * US]
        current = statistics.median(span) if span else self._recent[-1][1]
        self.ratio = current / reference
        self.votes.push(self.ratio >= c.slowdown_ratio)

    def _stale_us(self) -> int:
        times = [t for t, _ in list(self._recent)[-STALE_SAMPLE:]]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        usual = statistics.median(gaps) if gaps else 0
        return max(round(self.config.stale_s * US), 3 * round(usual))

    @property
    def unlearned(self) -> bool:
        """The job printed paces, yet they made no baseline: a GPU of the job stood out at
        each of them (whatever slowed it is in every pace it showed), or too few were learned
        yet (a job just started, whose causes of slowness are ``early`` anyway)."""
        return bool(self._recent) and not self.baseline.ready

    @property
    def slowed(self) -> bool:
        """``slow_k`` of the last ``slow_n`` votes were slow, and so is the latest: a job back
        at its baseline pace is not slowed now, whatever its recent votes said."""
        ratio = self.ratio
        return ratio is not None and ratio >= self.config.slowdown_ratio and self.votes.active

    def _pace(
        self,
        step_time_s: float | None,
        throughput: float | None,
        clean_gap_us: int | None,
        steps: int | None,
    ) -> float | None:
        """The pace of a step line that is a fair sample (``observe``: it printed
        ``step_time_s`` and ``throughput``, ``clean_gap_us`` after the previous line, ``steps``
        steps since it) from the job's source, chosen at its first line that gives one."""
        source = self.source
        if source == "step_time":  # the usual source: looked at first
            return step_time_s
        measured = None
        if steps is not None and clean_gap_us is not None:
            measured = clean_gap_us / US / steps
        inverse = 1.0 / throughput if throughput and throughput > 0 else None
        paces = (step_time_s, inverse, measured)
        if source is None:
            source = self.source = next(
                (s for s, p in zip(PACE_SOURCES, paces, strict=True) if p is not None), None
            )
        return paces[PACE_SOURCES.index(source)] if source is not None else None
