"""The second layer under the signature catalogue: failure lines that no entry describes.

A line that no signature matched is not silence when it reads as a failure. The lexicon
(``failure_lexicon.toml``) says how, in three steps that run on fewer and fewer lines:

1. ``failure_like``: a case-blind scan for the few words every failure report holds one of
   (error, fail, timeout, killed, ...): the fast path. The signature matcher folds these words
   into its own scan of every line (``literal_scan``), so this runs on its few candidates only;
2. ``read``, on the marked lines only: a marker of what failure reports share across
   ecosystems (a severity word, an exception or abort report, a signal or a non-zero exit, a
   timeout, an error code) and none of the words that make it no failure (a lower severity, a
   retry, a deliberate end);
3. the family whose vocabulary the line holds most of (device, fabric, collectives, storage,
   memory, host, config; ``general`` when none): what the line is about, and the kind it reads
   as;
4. whether the line reports an end rather than an error a program may survive (``_fatal``): a
   death (an abort, a signal, a non-zero exit), a fatal word (``[[loud]]``) or a term its
   family holds for an end (``fatal``: a collective that timed out, a GPU lost).

A failure-like line holding a ``deliberate_end`` word (a cancel, the time limit, a preemption)
is read too, as the job's deliberate end (``_end``): what fails around it is its consequence.

Everything is polars expressions over the batch's rows; no per-line Python.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import polars as pl

from medic.parse.first_match import escaped

GENERAL = "general"
"""The family of a failure line whose vocabulary names no family."""
GENERAL_KIND = "crash"
FAMILY = "_family"
READING = "_reading"
FATAL = "_fatal"
END = "_end"
DELIBERATE_END = "deliberate_end"
DEATHS = ("death", "signal", "exit")
"""The markers that report a process's end, not an error it may survive."""
FAILED = "failure"
"""The marker of a line that says something failed: a deliberate end's words beside it (a job
cancelled due to a node's failure) are no deliberate end."""
_LOWER, _SCORES, _DEATH = "_lower", "_scores", "_death"
_LOUD, _CHOSEN, _NAMED = "_loud", "_chosen", "_named"
"""Working columns of ``read``, dropped before it returns."""


class LexiconError(ValueError):
    """A lexicon file is malformed; the message names the key."""


@dataclass(frozen=True)
class Family:
    """One family of failures: the kind it reads as and its vocabulary."""

    name: str
    kind: str
    terms: tuple[str, ...]
    strong: tuple[str, ...] = ()
    fatal: tuple[str, ...] = ()
    """Terms that make a line of this family report an end (a collective timed out: the job
    cannot go on), not an error a program may survive."""


@dataclass(frozen=True)
class Lexicon:
    """The lexicon's tables, as read from its TOML."""

    literals: tuple[str, ...]
    markers: tuple[tuple[str, str], ...]
    quiet: tuple[tuple[str, str], ...]
    """Words that silence a line whatever else it holds."""
    soft_quiet: tuple[tuple[str, str], ...]
    """Words that silence a line unless it holds a ``loud`` word."""
    loud: tuple[tuple[str, str], ...]
    families: tuple[Family, ...]


def builtin_lexicon() -> Lexicon:
    """The lexicon shipped with medic (``medic/parse/failure_lexicon.toml``)."""
    text = resources.files("medic.parse").joinpath("failure_lexicon.toml").read_text()
    return parse_lexicon(tomllib.loads(text))


def parse_lexicon(data: dict[str, Any]) -> Lexicon:
    """A lexicon from its TOML tables; LexiconError (one line) when one is missing or empty."""

    def named(key: str) -> tuple[tuple[str, str], ...]:
        rows = data.get(key, [])
        if not rows or any({"name", "pattern"} - set(row) for row in rows):
            raise LexiconError(f"failure lexicon: [[{key}]] needs rows with name and pattern")
        return tuple((row["name"], row["pattern"]) for row in rows)

    literals = tuple(data.get("fast", {}).get("literals", ()))
    if not literals:
        raise LexiconError("failure lexicon: [fast] literals is empty")
    families = []
    for row in data.get("family", []):
        if {"name", "kind", "terms"} - set(row):
            raise LexiconError("failure lexicon: a [[family]] needs name, kind and terms")
        families.append(
            Family(
                row["name"],
                row["kind"],
                tuple(row["terms"]),
                tuple(row.get("strong", ())),
                tuple(row.get("fatal", ())),
            )
        )
    quiet = data.get("quiet", [])
    hard = [row for row in quiet if not row.get("unless_loud", False)]
    soft = [row for row in quiet if row.get("unless_loud", False)]
    return Lexicon(
        literals,
        named("marker"),
        tuple((row["name"], row["pattern"]) for row in hard),
        tuple((row["name"], row["pattern"]) for row in soft),
        named("loud"),
        tuple(families),
    )


def _lowered(pattern: str) -> str:
    """``pattern`` with its letters lowercased, escapes (``\\b``, ``\\S``) left as they are:
    it matches a line's lowercased text where the pattern matches the line regardless of
    case."""
    return re.sub(r"\\.|[^\\]+", lambda m: m[0] if m[0][0] == "\\" else m[0].lower(), pattern)


def _any(patterns: tuple[str, ...] | list[str], flags: str = "") -> str:
    return (
        f"(?{flags}:" + "|".join(f"(?:{p})" for p in patterns) + ")"
        if flags
        else ("|".join(f"(?:{p})" for p in patterns))
    )


class FailureLines:
    """The lexicon compiled into polars expressions."""

    def __init__(self, lexicon: Lexicon | None = None) -> None:
        self.lexicon = lexicon or builtin_lexicon()
        self._literals = [w.lower() for w in self.lexicon.literals]
        self._marker = _any([p for _, p in self.lexicon.markers])
        others = [p for n, p in self.lexicon.quiet if n != DELIBERATE_END]
        self._quiet = _any(others) if others else None
        ends = [p for n, p in self.lexicon.quiet if n == DELIBERATE_END]
        self._end = _any(ends) if ends else None
        failed = [p for n, p in self.lexicon.markers if n == FAILED]
        self._failed = _any(failed) if failed else None
        self._soft_quiet = _any([p for _, p in self.lexicon.soft_quiet])
        self._loud = _any([p for _, p in self.lexicon.loud])
        self._families = self.lexicon.families
        deaths = [p for n, p in self.lexicon.markers if n in DEATHS]
        self._death = _any(deaths) if deaths else None
        self._vocabulary = [
            (
                _lowered(_any(f.terms)),
                _lowered(_any(f.strong)) if f.strong else None,
                _lowered(_any(f.fatal)) if f.fatal else None,
            )
            for f in self._families
        ]
        """Per family: the regexes of its terms, strong terms and fatal terms (None: none),
        lowercased to run on the lowercased text: a case-blind regex finds its words three
        times slower (no literal search for a word in every case)."""
        self._plans: dict[tuple[str, str], _Plan] = {}

    @property
    def literal_scan(self) -> str:
        """A regex that matches every line ``failure_like`` marks (and a few more: it folds
        case by Unicode's rules): a caller folds it into a scan of its own, then marks the few
        lines it matches with ``failure_like``."""
        return "(?i:" + "|".join(map(escaped, self._literals)) + ")"

    def failure_like(self, raw: pl.Expr) -> pl.Expr:
        """True on the lines that hold one of the fast path's words (case-blind)."""
        return raw.str.contains_any(self._literals, ascii_case_insensitive=True)

    def read(self, frame: pl.DataFrame, raw: str, message: str) -> pl.DataFrame:
        """The rows of ``frame`` that read as failures or as the job's deliberate end, with
        ``_family``, ``_reading`` (the family's kind), ``_fatal`` (the line reports an end) and
        ``_end`` (a deliberate end: the other columns null) added. ``raw`` names the column of
        lines as they came (markers and quiet words: a logging level is in the prefix),
        ``message`` the lines without their prefixes (vocabulary).

        In stages over fewer and fewer rows: the lines holding a marker or a deliberate end's
        words; of those, the ones no quiet word silences; of those, their family and whether
        they report an end. Every line of the second stage that is no deliberate end holds a
        marker (a ``failure`` marker is what makes a line holding an end's words no end)."""
        plan = self._plans.get((raw, message))
        if plan is None:
            plan = self._plans[(raw, message)] = self._plan(pl.col(raw), pl.col(message))
        read = frame.filter(plan.found).with_columns(plan.flags).filter(plan.kept)
        if read.is_empty():
            return read.drop(_LOUD).with_columns(plan.nothing)
        return (
            read.with_columns(plan.lowered)
            .with_columns(plan.vocabulary)
            .with_columns(plan.chosen)
            .with_columns(plan.reading)
            .drop(_LOWER, _SCORES, _DEATH, _LOUD, _CHOSEN, _NAMED)
        )

    def _plan(self, lines: pl.Expr, text: pl.Expr) -> _Plan:
        """``read``'s expressions over the columns ``lines`` and ``text``: built once, as
        building them costs more than running them on a batch's few failure lines."""
        found = text.str.contains(self._marker) | lines.str.contains(self._marker)
        if self._end:
            found = found | lines.str.contains(self._end)
        failed = lines.str.contains(self._failed) if self._failed else pl.lit(False)
        ending = (lines.str.contains(self._end) & ~failed) if self._end else pl.lit(False)
        quiet = lines.str.contains(self._quiet) if self._quiet else pl.lit(False)
        soft = lines.str.contains(self._soft_quiet) & ~pl.col(_LOUD)
        lower = pl.col(_LOWER)
        scores = [
            lower.str.count_matches(terms).cast(pl.Int32)
            + (2 * lower.str.count_matches(strong).cast(pl.Int32) if strong else 0)
            for terms, strong, _ in self._vocabulary
        ]
        chosen, named = pl.col(_CHOSEN), pl.col(_NAMED)
        indices = list(range(len(self._families)))
        names = [f.name for f in self._families]
        kinds = [f.kind for f in self._families]
        family = (
            pl.when(named)
            .then(chosen.replace_strict(indices, names, return_dtype=pl.String))
            .otherwise(pl.lit(GENERAL))
        )
        reading = (
            pl.when(named)
            .then(chosen.replace_strict(indices, kinds, return_dtype=pl.String))
            .otherwise(pl.lit(GENERAL_KIND))
        )
        stated = pl.concat_list(
            [
                lower.str.contains(fatal) if fatal else pl.lit(False)
                for _, _, fatal in self._vocabulary
            ]
        ).list.get(chosen, null_on_oob=True)
        fatal = pl.col(_DEATH) | pl.col(_LOUD) | (named & stated)
        failing = ~pl.col(END)
        return _Plan(
            found=found,
            flags=[ending.alias(END), lines.str.contains(self._loud).alias(_LOUD)],
            kept=pl.col(END) | ~(quiet | soft),
            lowered=text.str.to_lowercase().alias(_LOWER),
            nothing=[
                pl.lit(None, pl.String).alias(FAMILY),
                pl.lit(None, pl.String).alias(READING),
                pl.lit(None, pl.Boolean).alias(FATAL),
            ],
            vocabulary=[
                pl.concat_list(scores).alias(_SCORES),
                (lines.str.contains(self._death) if self._death else pl.lit(False)).alias(_DEATH),
            ],
            chosen=[
                pl.col(_SCORES).list.arg_max().alias(_CHOSEN),
                (pl.col(_SCORES).list.max() > 0).alias(_NAMED),
            ],
            reading=[
                pl.when(failing).then(family).alias(FAMILY),
                pl.when(failing).then(reading).alias(READING),
                (failing & fatal).alias(FATAL),
            ],
        )


@dataclass(frozen=True)
class _Plan:
    """The expressions of ``FailureLines.read`` over one pair of columns, stage by stage."""

    found: pl.Expr
    flags: list[pl.Expr]
    kept: pl.Expr
    lowered: pl.Expr
    nothing: list[pl.Expr]
    vocabulary: list[pl.Expr]
    chosen: list[pl.Expr]
    reading: list[pl.Expr]
