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
   as.

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


class LexiconError(ValueError):
    """A lexicon file is malformed; the message names the key."""


@dataclass(frozen=True)
class Family:
    """One family of failures: the kind it reads as and its vocabulary."""

    name: str
    kind: str
    terms: tuple[str, ...]
    strong: tuple[str, ...] = ()


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
            Family(row["name"], row["kind"], tuple(row["terms"]), tuple(row.get("strong", ())))
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
        self._quiet = _any([p for _, p in self.lexicon.quiet])
        self._soft_quiet = _any([p for _, p in self.lexicon.soft_quiet])
        self._loud = _any([p for _, p in self.lexicon.loud])
        self._families = self.lexicon.families
        self._named_marker = "|".join(f"(?P<{n}>{_ascii(p)})" for n, p in self.lexicon.markers)

    def failure_like(self, raw: pl.Expr) -> pl.Expr:
        """True on the lines that hold one of the fast path's words (case-blind)."""
        return raw.str.contains_any(self._literals, ascii_case_insensitive=True)

    def read(self, frame: pl.DataFrame, raw: str, message: str) -> pl.DataFrame:
        """The rows of ``frame`` that read as failures, with ``_marker`` (which marker: the
        one the line shows first), ``_family`` and ``_reading`` (the family's kind) added.
        ``raw`` names the column of lines as they came (markers and quiet words: a logging
        level is in the prefix), ``message`` the lines without their prefixes (vocabulary)."""
        lines, text = pl.col(raw), pl.col(message)
        marked = text.str.contains(self._marker) | lines.str.contains(self._marker)
        quiet = lines.str.contains(self._quiet) | (
            lines.str.contains(self._soft_quiet) & ~lines.str.contains(self._loud)
        )
        failing = frame.filter(marked & ~quiet)
        if failing.is_empty():
            return failing.with_columns(
                pl.lit(None, pl.String).alias(MARKER),
                pl.lit(None, pl.String).alias(FAMILY),
                pl.lit(None, pl.String).alias(READING),
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
        return failing.with_columns(
            marker.alias(MARKER), family.alias(FAMILY), reading.alias(READING)
        )
