"""The second layer under the signature catalogue: failure lines that no entry describes.

A line that no signature matched is not silence when it reads as a failure. The lexicon
(``failure_lexicon.toml``) says how, in three steps that run on fewer and fewer lines:

1. ``failure_like``: one case-blind Aho-Corasick scan for the few words every failure report
   holds one of (error, fail, timeout, killed, ...): the fast path over every line;
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

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import polars as pl

from medic.parse.prefixes import ASCII_CLASSES

GENERAL = "general"
"""The family of a failure line whose vocabulary names no family."""
GENERAL_KIND = "crash"
MARKER = "_marker"
FAMILY = "_family"
READING = "_reading"
FATAL = "_fatal"
END = "_end"
DELIBERATE_END = "deliberate_end"
DEATHS = ("death", "signal", "exit")
FAILED = "failure"
"""The marker of a line that says something failed: a deliberate end's words beside it (a job
cancelled due to a node's failure) are no deliberate end."""
"""The markers that report a process's end, not an error it may survive."""


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


def _ascii(pattern: str) -> str:
    """``pattern`` with ASCII word boundaries and classes: what programs print about their
    failures is ASCII, and the Unicode forms keep the regex engine off its fastest paths."""
    for unicode, ascii in {r"\b": r"(?-u:\b)", **ASCII_CLASSES}.items():
        pattern = pattern.replace(unicode, ascii)
    return pattern


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
        self._named_marker = "|".join(f"(?P<{n}>{_ascii(p)})" for n, p in self.lexicon.markers)

    def failure_like(self, raw: pl.Expr) -> pl.Expr:
        """True on the lines that hold one of the fast path's words (case-blind)."""
        return raw.str.contains_any(self._literals, ascii_case_insensitive=True)

    def read(self, frame: pl.DataFrame, raw: str, message: str) -> pl.DataFrame:
        """The rows of ``frame`` that read as failures or as the job's deliberate end, with
        ``_marker`` (which marker: the one the line shows first), ``_family``, ``_reading``
        (the family's kind), ``_fatal`` (the line reports an end) and ``_end`` (a deliberate
        end: the other columns null) added. ``raw`` names the column of lines as they came
        (markers and quiet words: a logging level is in the prefix), ``message`` the lines
        without their prefixes (vocabulary)."""
        lines, text = pl.col(raw), pl.col(message)
        marked = text.str.contains(self._marker) | lines.str.contains(self._marker)
        failed = lines.str.contains(self._failed) if self._failed else pl.lit(False)
        ending = (lines.str.contains(self._end) & ~failed) if self._end else pl.lit(False)
        quiet = (
            (lines.str.contains(self._quiet) if self._quiet else pl.lit(False))
            | (lines.str.contains(self._soft_quiet) & ~lines.str.contains(self._loud))
            | ending
        )
        read = frame.with_columns(ending.alias(END)).filter(pl.col(END) | (marked & ~quiet))
        if read.is_empty():
            return read.with_columns(
                pl.lit(None, pl.String).alias(MARKER),
                pl.lit(None, pl.String).alias(FAMILY),
                pl.lit(None, pl.String).alias(READING),
                pl.lit(None, pl.Boolean).alias(FATAL),
            )
        found = [column.str.extract_groups(self._named_marker) for column in (text, lines)]
        marker = pl.coalesce(
            *(
                pl.when(groups.struct.field(name).is_not_null()).then(pl.lit(name))
                for groups in found
                for name, _ in self.lexicon.markers
            )
        )
        scores = [
            text.str.count_matches(_any(f.terms, "i")).cast(pl.Int32)
            + (2 * text.str.count_matches(_any(f.strong, "i")).cast(pl.Int32) if f.strong else 0)
            for f in self._families
        ]
        names = [f.name for f in self._families]
        kinds = [f.kind for f in self._families]
        best = pl.concat_list(scores)
        chosen = best.list.arg_max()
        family = (
            pl.when(best.list.max() > 0)
            .then(chosen.replace_strict(list(range(len(names))), names, return_dtype=pl.String))
            .otherwise(pl.lit(GENERAL))
        )
        reading = (
            pl.when(best.list.max() > 0)
            .then(chosen.replace_strict(list(range(len(kinds))), kinds, return_dtype=pl.String))
            .otherwise(pl.lit(GENERAL_KIND))
        )
        death = lines.str.contains(self._death) if self._death else pl.lit(False)
        stated = pl.concat_list(
            [
                text.str.contains(_any(f.fatal, "i")) if f.fatal else pl.lit(False)
                for f in self._families
            ]
        ).list.get(chosen, null_on_oob=True)
        fatal = death | lines.str.contains(self._loud) | ((best.list.max() > 0) & stated)
        failing = ~pl.col(END)
        return read.with_columns(
            pl.when(failing).then(marker).alias(MARKER),
            pl.when(failing).then(family).alias(FAMILY),
            pl.when(failing).then(reading).alias(READING),
            (failing & fatal).alias(FATAL),
        )
