"""A job's own rhythm of pauses: the silences it has taken before, and when it takes them.

Training loops pause on a schedule counted in steps: an evaluation every ``eval_interval``
steps, a save every ``save_interval`` (Megatron-LM's ``--eval-interval``/``--save-interval``,
the Hugging Face Trainer's ``eval_steps``/``save_steps``, Lightning's
``val_check_interval``/``every_n_train_steps``, nanoGPT's ``eval_interval``). Whether or not
the framework prints when such a pause begins, it comes back at the same step interval and
lasts about as long. So a pause the job has taken (a step gap of more than ``gap_factor``
times its usual one) is remembered with the last step printed before it. Once two pauses of a
kind have given the interval between them, a silence that begins that many steps (or a
multiple) after the latest pause of the kind is expected for ``phase_factor`` times the
longest pause of the kind.

A pause with one rank's GPU apart from a collective its peers wait in (a data-loader stall:
its host, not the schedule, decides when) is its own kind per GPU: the same GPU apart again is
expected once it came back by itself before, at any step. The first pause of a kind has no
rhythm: the step-gap thresholds judge it.

Event time only: steps and pause lengths come from the progress stream's timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STALL = "stall "
"""Prefix of a kind keyed by the one GPU apart (``stall node/gpu``)."""
PAUSE = "pause"
"""Every other pause: scheduled, its rhythm counted in steps."""


@dataclass
class JobRhythm:
    """The pauses one job has taken: last step printed before each, its length and kind."""

    keep: int = 32
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    kinds: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    last_step: int | None = None
    """The job's latest printed step (the one before a pause, once the next comes)."""

    def step(self, number: int | None) -> None:
        """A printed step: kept as the one a pause would follow."""
        if number is not None:
            self.last_step = number

    def learn(self, before: int | None, length_us: int, kind: str) -> None:
        """A pause of ``kind`` that lasted ``length_us`` after step ``before`` (None: the job
        numbers no steps; such a pause teaches only a stall's kind)."""
        self.steps = np.append(self.steps, -1 if before is None else before)[-self.keep :]
        self.lengths = np.append(self.lengths, length_us)[-self.keep :]
        self.kinds = np.append(self.kinds, np.array([kind], dtype=object))[-self.keep :]

    def expected_us(self, after: int | None, kind: str, factor: float) -> int:
        """How long a silence of ``kind`` that began after step ``after`` is expected to last:
        ``factor`` times the longest pause of the kind when the silence is on its rhythm, else
        0."""
        same = self.kinds == kind
        if not same.any():
            return 0
        longest = round(factor * int(self.lengths[same].max()))
        if kind.startswith(STALL):
            return longest
        return longest if self.on_rhythm(after, kind) else 0

    def on_rhythm(self, after: int | None, kind: str = PAUSE) -> bool:
        """Whether a silence that began after step ``after`` comes at the step interval the
        job's pauses of ``kind`` came at (two of them at least, from the latest)."""
        steps = self.steps[self.kinds == kind]
        steps = steps[steps >= 0]
        if after is None or steps.size < 2:
            return False
        # The intervals between consecutive pauses of the kind, counted from the latest: a job
        # printing every 10 steps that saves every 25 pauses after its steps 20, 50, 70, 100.
        intervals = np.diff(steps)
        intervals = intervals[intervals > 0]
        since = after - int(steps[-1])
        return since > 0 and bool((since % intervals == 0).any())

    def precedents(self, length_us: int) -> int:
        """How many of the job's remembered pauses, of any kind, lasted ``length_us`` or more:
        a silence the job has come back from before is less likely a hang."""
        return int((self.lengths >= length_us).sum())


def kind_of(apart: list[tuple[str, int]], writer: tuple[str, int] | None) -> str:
    """The kind of a pause whose GPUs out of the wait are ``apart``: one GPU that is not the
    save's writer is a stall of that GPU; anything else is a scheduled pause."""
    if len(apart) == 1 and apart[0] != writer:
        node, gpu = apart[0]
        return f"{STALL}{node}/{gpu}"
    return PAUSE
