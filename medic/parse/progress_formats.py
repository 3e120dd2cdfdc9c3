"""The progress formats: the lines frameworks print as they train, as data
(``progress_formats.toml``), loaded and checked once.

Each format names its framework and what its lines mean (``EVENTS``), the literals that find its
lines, a Rust regex whose named groups (``FIELDS``) read them, and where the format was
observed. The progress parser (``medic.parse.progress``) tries them by priority; a line none
of them reads may still be read by the learning reader (``medic.parse.learned``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

import polars as pl

from medic.parse.first_match import Shortcut
from medic.parse.fragments import FragmentError, expanded, fragments_of

EVENTS = (
    "step",
    "eval_step",
    "eval_start",
    "eval_end",
    "checkpoint_start",
    "checkpoint_end",
    "checkpoint_load",
    "startup",
    "train_end",
    "job_end",
    "part",
)
"""What a progress row says. ``step``: a training step finished. ``eval_step``: an evaluation
batch finished. ``*_start``/``*_end``: a phase boundary (a later ``step`` also closes a phase).
``train_end``: the training loop returned. ``job_end``: the scheduler cancelled the job.
``part``: a later line of a multi-line step record (OLMo's, Composer's): its values complete
the step line of its framework before it, and it makes no row of its own."""

FIELDS = (
    "step",
    "step_time_s",
    "step_time_ms",
    "step_time_us",
    "throughput",
    "it_per_s",
    "s_per_it",
    "step_time_clock",
    "bar_rate",
)
"""Named groups a format may capture: numbers, ``step_time_clock``, a duration written as a
clock (``mm:ss`` or ``h:mm:ss``), and ``bar_rate``, a tqdm rate with its unit (``2.5it/s`` or
``1.3s/it``, one group where a one-pass regex cannot choose the group by the unit that follows
the number); step time is normalised to seconds."""
ITEMS_PER_S = 1000
"""A bar moving this fast or faster counts items, not a job's training steps: bytes of a
download (torchvision's "9920512it [00:00, 14787158.04it/s]"), examples mapped, requests
queued. A training step of a job on GPUs takes milliseconds at least."""
DESC = "desc"
"""A progress bar's description (the text before its bar): a bar described as loading,
evaluating, tokenising, downloading... (``LOOKALIKE``) is not training."""
TOTAL = "total"
"""A loop's length, as its bar shows it (``step/total``). A job's training loop and the other
loops it runs in between (Hugging Face Trainer's evaluation bar, Keras ``evaluate()``) print
the same bar without a description that tells them apart; the evaluation loop runs over the
evaluation set, smaller than the training run, so under one description the loop with the
largest total is training and a bar with a smaller total is another loop."""
ANSI_ESCAPE = r"\x1b\[[0-9;]*m"
REDRAWN = r"(?s)^.*\r([^\r]*[^\r\s])\s*$"
"""A line a terminal redrew: progress bars written to a file (tqdm's, Keras', Ultralytics',
rich's) put each update behind a carriage return, and a log line holds every update since the
last newline. Its last update with text is what a terminal shows (``$1``; a bar cleared with
blanks after it is not). Read with the control sequences removed (an erase-line escape is no
text)."""
TERMINAL_CONTROL = r"\x1b\[[0-9;?]*[A-Za-z]"
"""Colours and the other control sequences of a terminal (erasing the line, ``\x1b[K``)."""
RANK_IN_TEXT = r"\[Rank (\d+)\]"
"""DeepSpeed's rank tag inside a message (a launcher's rank prefix is the stripper's)."""

# The last update of a tqdm bar (several \r-separated updates can arrive as one line).
_TQDM_LAST = r"^.*"


@dataclass(frozen=True)
class ProgressFormat:
    """One line format: the framework, what it means, how to find and read it, and its source."""

    framework: str
    event: str
    anchors: tuple[str, ...]
    """Literals of which every line the format reads holds one: the prefilter, and a line is
    tried with this format only when it holds one of them. None: the pattern, anchored at the
    line's start, is its own prefilter (a line with no word to find it by, as fastai's epoch
    rows; a pattern anchored so fails at a line's first characters)."""
    pattern: str
    """Rust regex, named groups from FIELDS."""
    source: str
    unit: str | None = None
    """Unit of the ``throughput`` group."""
    bar: bool = False
    """A progress bar (or metrics line) of any loop: read as a step unless its description
    (the ``desc`` group: a bar's text, a metrics collection's name) says it is no training
    loop (``LOOKALIKE``)."""
    once: tuple[str, ...] = ()
    """For a format that reads the last of several matches on a line (its pattern begins with
    ``^.*``): literals of which each match holds one, at a place that fixes where the match
    starts. A line holding them at most once in all can match at one place only: it is read
    without the ``^.*``, which costs half as much to capture."""
    strict: str | None = None
    """For a format with ``once``: a regex anchored at the line's start and one-pass (no lazy
    repeat, no alternatives that begin alike; ``bar_rate`` in place of the two rate groups) that
    reads the plain form of its lines (one match, led by nothing) as the pattern does, where it
    matches. The regex crate captures such a regex's groups three times faster; the lines it
    does not match are read with the pattern (``medic.parse.first_match.Shortcut``)."""

    def __post_init__(self) -> None:
        if self.once and not self.pattern.startswith(_TQDM_LAST):
            raise ValueError(f"{self.framework} {self.event}: 'once' needs a pattern led by ^.*")
        if self.strict is not None and not (self.once and self.strict.startswith("^")):
            raise ValueError(f"{self.framework} {self.event}: 'strict' needs 'once' and a ^")

    def shortcut(self) -> Shortcut | None:
        """The pattern without its ``^.*``, for the lines holding ``once`` at most once."""
        if not self.once:
            return None
        return Shortcut(self.pattern.removeprefix(_TQDM_LAST), self.once, self.strict)


class FormatError(ValueError):
    """A progress formats file that does not hold what ``progress_formats.toml`` describes."""


BUILTIN_FILE = "progress_formats.toml"
_GROUP = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")
_KEYS = {f.name for f in fields(ProgressFormat)}
_REQUIRED = ("framework", "event", "anchors", "pattern", "source")
_TUPLES = ("anchors", "once")


def parse_formats(text: str, name: str = BUILTIN_FILE) -> tuple[tuple[ProgressFormat, ...], str]:
    """The formats of a progress formats file, in order, and its ``lookalike`` regex;
    ``FormatError`` naming the entry and what is wrong with it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{name}: {exc}") from None
    unknown = sorted(set(data) - {"lookalike", "fragments", "format"})
    if unknown:
        raise FormatError(f"{name}: unknown table or key '{unknown[0]}'")
    lookalike = data.get("lookalike")
    if not isinstance(lookalike, str):
        raise FormatError(f"{name}: 'lookalike' must be a regex string")
    try:
        fragments = fragments_of(data)
    except FragmentError as exc:
        raise FormatError(f"{name}: {exc}") from None
    entries = data.get("format", [])
    if not isinstance(entries, list) or not entries:
        raise FormatError(f"{name}: no [[format]] entries")
    return tuple(_format(e, i, name, fragments) for i, e in enumerate(entries, 1)), lookalike


def _format(
    entry: Mapping[str, Any], number: int, name: str, fragments: Mapping[str, str]
) -> ProgressFormat:
    where = f"{name}: format {number} ({entry.get('framework', '?')} {entry.get('event', '?')})"
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise FormatError(f"{where}: unknown key '{unknown[0]}'")
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise FormatError(f"{where}: '{missing[0]}' is missing")
    values = dict(entry)
    for key, value in values.items():
        if key in _TUPLES:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise FormatError(f"{where}: '{key}' must be a list of strings")
            values[key] = tuple(value)
        elif key == "bar":
            if not isinstance(value, bool):
                raise FormatError(f"{where}: 'bar' must be true or false")
        elif not isinstance(value, str):
            raise FormatError(f"{where}: '{key}' must be a string")
    for key in ("pattern", "strict"):
        if key in values:
            try:
                values[key] = expanded(values[key], fragments)
            except FragmentError as exc:
                raise FormatError(f"{where}: '{key}' {exc}") from None
    if values["event"] not in EVENTS:
        raise FormatError(f"{where}: event must be one of {', '.join(EVENTS)}")
    groups = set(_GROUP.findall(values["pattern"])) | set(_GROUP.findall(values.get("strict", "")))
    wrong = sorted(groups - {*FIELDS, DESC, TOTAL})
    if wrong:
        raise FormatError(f"{where}: group '{wrong[0]}' is not one of {', '.join(FIELDS)}")
    try:
        return ProgressFormat(**values)
    except ValueError as exc:
        raise FormatError(f"{where}: {exc}") from None


FORMATS, LOOKALIKE = parse_formats(
    resources.files("medic.parse").joinpath(BUILTIN_FILE).read_text()
)
"""The built-in formats, by priority, and what a bar that is not a training loop says it does
(looked for in its description, ``DESC``)."""


def clock_seconds(clock: pl.Expr) -> pl.Expr:
    """A duration written as a clock, ``mm:ss`` or ``h:mm:ss``, in seconds."""
    seconds, minutes, hours = (
        clock.str.extract(r"(?:^|:)([0-9]+)" + ":[0-9]+" * places + "$").cast(pl.Float64)
        for places in range(3)
    )
    return seconds + 60.0 * minutes + 3600.0 * hours.fill_null(0.0)
