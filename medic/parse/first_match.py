"""Reading log lines with the first of several regexes that matches them, vectorised.

Both log parsers name a line by the first of their patterns, in priority order, that matches
it, and read that pattern's named groups: the progress formats and the signature catalogue.
Capturing groups costs about a microsecond on a line that a regex matches, so not every pattern
runs on every line. Each pattern is gated by literals, and every line it matches holds one of
them. A line is tried only with the patterns whose literals it holds: first with the best of
them, and a line that one does not read then with all the others at once (the best that
matches reads it). So each pattern's regex runs at most twice per batch, each time on its own
lines only, and a line is rarely tried with more than one pattern. ``candidates`` is the
one-scan filter a parser runs first: the lines holding any literal (and a few more, ``_scanned``).

A pattern may come with a cheaper regex that reads alike the lines holding some literals at most
once (``Shortcut``): a progress bar's ``^.*`` that picks the last of several bars on a line
doubles the cost of capturing, and most lines hold one bar. A shortcut may come with a stricter
form still (``Shortcut.strict``), anchored at the line's start and one-pass (at each character
at most one way on): the regex crate captures its groups with its one-pass DFA, three times
faster than the backtracking that a lazy repeat or alternatives beginning alike need. It reads
the plain form of the lines (one bar, nothing in front); the lines of its run that it does not
match are read with the shortcut at once (``_backed_up``), in their places.

A regex that reads fewer than ``ALONE`` lines of a batch reads them inside one tagged regex of
the patterns and shortcuts those lines need (``medic.parse.tagged_regex``), one compile per
batch, instead of alone (polars compiles the regex of every ``extract_groups`` call).

A pattern that is only literal text (``Traceback \\(most recent call last\\)``), gated by literals
that each hold one of its alternatives, matches every line it is tried on and captures nothing:
its lines are read without running it (``_sure``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import polars.selectors as cs

from medic.parse.tagged_regex import MATCHED, TaggedRegex

ROW, PATTERN = "_row", "_pattern"
"""Columns of a reading: the line's index and the pattern that read it."""
REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")
"""Characters a Rust regex reads as syntax, escaped in a literal."""
ALONE = 256
"""Lines of a batch from which a regex reads them alone; fewer are read tagged."""
SCANNED = 64
"""Most texts looked for in the candidates scan. Measured on the parsers' literals, a regex of
more alternative literals scans lines at half the speed (the regex crate's SIMD search for many
literals, Teddy, takes at most 64 of them)."""
SHORTEST_SCANNED = 4
"""Shortest text the scan looks for in place of several literals holding it."""
SLOTTED = 32
"""Most lines a second attempt reads that are slotted in among the first's (``_merged``)."""


@dataclass(frozen=True)
class Shortcut:
    """A cheaper regex that reads a line exactly as its pattern does when the line holds
    ``literals`` at most once in all (overlapping occurrences counted)."""

    pattern: str
    literals: tuple[str, ...]
    strict: str | None = None
    """An anchored one-pass regex that reads alike, where it matches, the lines the shortcut
    reads: tried first on them (on a run of ``ALONE`` lines or more), the shortcut reading
    those it does not match."""


class FirstMatch:
    """The first of ``patterns`` (Rust regexes, by priority) that matches each line, and the
    named groups ``fields`` it reads. ``literals[i]`` gate ``patterns[i]``: every line the
    pattern matches holds one of them (none: the pattern is tried on every line).
    ``shortcuts[i]``, when given, replaces ``patterns[i]`` on the lines it reads alike."""

    def __init__(
        self,
        patterns: Sequence[str],
        literals: Sequence[Sequence[str]],
        fields: Sequence[str],
        shortcuts: Sequence[Shortcut | None] = (),
    ) -> None:
        if shortcuts and len(shortcuts) != len(patterns):
            raise ValueError("shortcuts need one entry (or None) per pattern")
        self.fields = tuple(fields)
        self._count = len(patterns)
        cuts = list(shortcuts or [None] * len(patterns))
        self._shortcuts = [(i, list(cut.literals)) for i, cut in enumerate(cuts) if cut is not None]
        """The patterns with a shortcut, and its literals; shortcut ``i`` is regex
        ``patterns + i``."""
        everyone = [*patterns, *(None if cut is None else cut.pattern for cut in cuts)]
        stricts = [None if cut is None else cut.strict for cut in cuts]
        self._regexes = [None if r is None else _marked(r) for r in [*everyone, *stricts]]
        """The patterns, the shortcuts (``patterns + i``: pattern ``i``'s) and their strict
        forms (``2 * patterns + i``)."""
        self._strict = np.array([r is not None for r in stricts], dtype=bool)
        """Per pattern: whether its shortcut has a strict form."""
        self._tagged = TaggedRegex([*everyone, *[None] * len(stricts)])
        self._literals = sorted({lit for lits in literals for lit in lits})
        self._patterns_of = pl.Series(
            [[i for i, lits in enumerate(literals) if lit in lits] for lit in self._literals],
            dtype=pl.List(pl.UInt64),
        )
        self._shortcut_gates = [
            _members(literals, self._literals) for _, literals in self._shortcuts
        ]
        """Per shortcut: which gate literals are its literals (None: not all of them gate)."""
        self._everywhere = [(i, _unnamed(p)) for i, p in enumerate(patterns) if not literals[i]]
        """The patterns without literals, with their regexes capturing nothing: each is tried on
        the lines its regex finds (a scan), not on every line."""
        self._sure = np.array(
            [_sure(p, lits) for p, lits in zip(patterns, literals, strict=True)]
            + [False] * 2 * len(cuts),
            dtype=bool,
        )
        """Per regex: whether it matches every line holding one of its literals (``_sure``)."""
        self._sure_run = len(self._regexes) + 1
        """The run of the tries of sure regexes, read without running them (one past the
        tagged run)."""
        self._held = "|".join(map(escaped, _scanned(tuple(self._literals))))
        self._ungated = "|".join(f"(?:{regex})" for _, regex in self._everywhere)

    @property
    def literal_scan(self) -> str:
        """The regex of ``candidates``' scan for literals ("" when no pattern has any): a
        caller that scans the same lines for texts of its own folds it into that one scan."""
        return self._held

    @property
    def ungated(self) -> str:
        """The regex of ``candidates``' scan for the patterns without literals ("" when
        none)."""
        return self._ungated

    def candidates(self, lines: pl.Expr) -> pl.Expr:
        """True on every line a pattern may match: those holding one of the literals (and a few
        holding a text that several literals share, ``_scanned``), and those that a pattern
        without literals matches."""
        found = lines.str.contains(self._held) if self._held else pl.lit(False)
        if self._ungated:
            found = found | lines.str.contains(self._ungated)
        return found

    def read(self, lines: pl.Series, text: pl.Series | None = None) -> pl.DataFrame:
        """One row per line that a pattern matches, in line order: ``_row`` (its index in
        ``lines``), ``_pattern`` (the first pattern that matches it) and every field (a string;
        null where that pattern has no such group). Literals are looked for in ``lines`` and the
        patterns run on ``text`` (``lines`` itself by default)."""
        text = lines if text is None else text
        tries, held = self._tries(lines, text)
        if not tries.size:
            return self._empty()
        if text is not lines:
            # the literals found in a line are those its text holds where the two are alike
            held.alike = (text == lines).fill_null(True).to_numpy()
        rows = tries // self._count
        first = _run_starts(rows)
        read = [self._attempt(tries[first], text, held)]
        rest = ~first & ~np.isin(rows, read[0].get_column(ROW).to_numpy())
        if rest.any():
            read.append(self._attempt(tries[rest], text, held))
        values = pl.concat(read, how="diagonal_relaxed")
        absent = [pl.lit(None, pl.String).alias(f) for f in self.fields if f not in values.columns]
        values = values.with_columns(absent).select(ROW, PATTERN, *self.fields)
        if len(read) == 1:  # one attempt reads its lines in order
            return values
        return _merged(values, read[0].height)

    def _tries(self, lines: pl.Series, text: pl.Series) -> tuple[np.ndarray, Held]:
        """The (line, pattern) pairs worth trying, as ``line * patterns + pattern``, sorted (by
        line, then by priority), and the literals found in the lines. A pattern without
        literals is tried on the lines whose text its regex finds: tried on every line, it came
        first on lines that a later pattern reads, and they took a second attempt."""
        starts = np.arange(len(lines), dtype=np.uint64) * self._count
        tries = [np.empty(0, dtype=np.uint64)]
        for pattern, regex in self._everywhere:
            found = text.str.contains(regex).fill_null(False).to_numpy()
            tries.append(starts[found] + np.uint64(pattern))
        held = Held(len(lines), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        if self._literals:
            gated, held = self._gated(lines, starts)
            tries.append(gated)
        return _sorted_unique(np.concatenate(tries)), held

    def _gated(self, lines: pl.Series, starts: np.ndarray) -> tuple[np.ndarray, Held]:
        """The tries of the patterns whose literals each line holds, and those literals."""
        found = lines.str.extract_many(self._literals, overlapping=True)
        literals = found.explode(empty_as_null=False, keep_nulls=False).replace_strict(
            self._literals, range(len(self._literals)), return_dtype=pl.UInt32
        )
        patterns = self._patterns_of.gather(literals)
        counts = found.list.len().fill_null(0).to_numpy()
        gated = np.repeat(starts, counts)
        gated = np.repeat(gated, patterns.list.len().to_numpy())
        tries: np.ndarray = gated + patterns.explode().to_numpy()
        held = Held(len(lines), np.repeat(np.arange(len(lines)), counts), literals.to_numpy())
        return tries, held

    def _attempt(self, tries: np.ndarray, text: pl.Series, held: Held) -> pl.DataFrame:
        """Each line's first try (of ``tries``, sorted) whose pattern matches it, with the groups
        it read; each regex runs once, on the lines it is tried on (or they are read tagged, or
        not at all: a sure regex on a line whose text is the line)."""
        rows, regexes = tries // self._count, self._regex_of(tries, text, held)
        sure = self._sure[regexes] & held.alike[rows]
        runs = np.where(sure, self._sure_run, self._runs(regexes, rows, text))
        order = np.argsort(runs, kind="stable")
        texts = text.gather(rows[order])
        starts = np.flatnonzero(_run_starts(runs[order])).tolist()
        parts = [
            self._read_run(int(runs[order[lo]]), regexes[order[lo:hi]], texts.slice(lo, hi - lo))
            for lo, hi in zip(starts, [*starts[1:], len(order)], strict=True)
        ]
        values = pl.concat(parts, how="diagonal_relaxed")
        matched = order[values.get_column(MATCHED).is_not_null().to_numpy()]
        if not matched.size:
            return self._empty()
        matched.sort()  # positions in ``tries``: by line, then by priority
        best = matched[_run_starts(tries[matched] // self._count)]
        at = np.empty_like(order)
        at[order] = np.arange(order.size)
        return values.select(
            pl.Series(ROW, tries[best] // self._count, dtype=pl.UInt32),
            pl.Series(PATTERN, tries[best] % self._count, dtype=pl.UInt32),
            cs.by_name(*self.fields, require_all=False).gather(pl.Series(at[best])),
        )

    def _regex_of(self, tries: np.ndarray, text: pl.Series, held: Held) -> np.ndarray:
        """The regex that reads each try: its pattern's, or its shortcut's where the line's text
        holds the shortcut's literals at most once (counted among the literals ``held`` where
        the gates hold them all and the text is the line; else looked for in the text)."""
        rows, regexes = tries // self._count, tries % self._count
        for k, (pattern, literals) in enumerate(self._shortcuts):
            tried = np.flatnonzero(regexes == pattern)
            if not tried.size:
                continue
            gates = self._shortcut_gates[k]
            counted = np.zeros(tried.size, dtype=bool)
            once = np.zeros(tried.size, dtype=bool)
            if gates is not None:
                counted = held.alike[rows[tried]]
                once[counted] = held.count(k, gates)[rows[tried[counted]]] <= 1
            if not counted.all():
                rest = ~counted
                found = text.gather(rows[tried[rest]]).str.find_many(literals, overlapping=True)
                once[rest] = (found.list.len().fill_null(0) <= 1).to_numpy()
            form = 2 if self._strict[pattern] else 1
            regexes[tried[once]] = form * self._count + pattern
        return regexes

    def _runs(self, regexes: np.ndarray, rows: np.ndarray, text: pl.Series) -> np.ndarray:
        """Each try's run: its regex's, or one past the last regex for the tries read tagged
        (of a regex with fewer than ``ALONE`` of them, on lines without a newline). A strict
        form with fewer tries gives them back to its shortcut (in ``regexes``): one compile of
        its own would cost more than it saves."""
        everyone, count = len(self._regexes), self._count
        counts = np.bincount(regexes, minlength=everyone)
        few = (regexes >= 2 * count) & (counts[regexes] < ALONE)
        if few.any():
            regexes[few] -= count
            counts = np.bincount(regexes, minlength=everyone)
        tagged = self._tagged.members[regexes] & (counts[regexes] < ALONE)
        if tagged.any():
            newline = text.gather(rows[tagged]).str.contains("\n", literal=True).to_numpy()
            tagged[np.flatnonzero(tagged)[newline]] = False
        return np.where(tagged, everyone, regexes)

    def _read_run(self, run: int, regexes: np.ndarray, texts: pl.Series) -> pl.DataFrame:
        """The groups ``texts`` read with ``regexes`` (one run: one regex alone, or tagged)."""
        if run == self._sure_run:
            return pl.DataFrame({MATCHED: pl.repeat("", len(texts), eager=True)})
        if run == len(self._regexes):
            return self._tagged.read(regexes, texts)
        regex = self._regexes[run]
        assert regex is not None  # a shortcut's slot is only used where there is one
        found = _groups(texts, regex)
        if run < 2 * self._count:
            return found
        shortcut = self._regexes[run - self._count]
        assert shortcut is not None
        return _backed_up(found, texts, shortcut)

    def _empty(self) -> pl.DataFrame:
        columns: dict[str, pl.DataType] = {ROW: pl.UInt32(), PATTERN: pl.UInt32()}
        return pl.DataFrame(schema=columns | dict.fromkeys(self.fields, pl.String()))


@functools.cache
def _scanned(literals: tuple[str, ...]) -> list[str]:
    """What the candidates scan looks for: the ``_innermost`` literals, or when there are more
    than ``SCANNED`` of them, texts that several of them hold in their place (the longest shared
    one first, the most telling), until there are few enough. Every literal holds one of these,
    so a line holding a literal is found; the gates (``_gated``) then leave out the few lines
    that hold a shared text but no literal."""
    current = set(_innermost(literals))
    if len(current) <= SCANNED:
        return sorted(current)
    holders: dict[str, set[str]] = {}
    for literal in current:
        for start in range(len(literal)):
            for end in range(start + SHORTEST_SCANNED, len(literal) + 1):
                holders.setdefault(literal[start:end], set()).add(literal)
    shared = sorted((t for t, held in holders.items() if len(held) > 1), key=lambda t: (-len(t), t))
    added: set[str] = set()
    for text in shared:
        held = (holders[text] | {t for t in added if text in t}) & current
        if len(held) > 1:
            current = (current - held) | {text}
            added.add(text)
            if len(current) <= SCANNED:
                break
    return sorted(current)


def _innermost(literals: Sequence[str]) -> list[str]:
    """The ``literals`` that hold no other one: a line holding any of them holds one of these,
    and the scan for them is faster with fewer alternatives (``candidates``)."""
    return [lit for lit in literals if not any(o != lit and o in lit for o in literals)]


class Held:
    """The gate literals found in a batch's lines: each occurrence (overlapping ones counted)
    as its line and its literal (an index into the sorted literals); and per line whether the
    text the patterns read is the line itself (``alike``), where the same literals hold."""

    def __init__(self, lines: int, line: np.ndarray, literal: np.ndarray) -> None:
        self.line, self.literal = line, literal
        self.alike = np.ones(lines, dtype=bool)
        self._counts: dict[int, np.ndarray] = {}

    def count(self, key: int, members: np.ndarray) -> np.ndarray:
        """Per line, how many occurrences it holds of the literals marked in ``members`` (kept
        under ``key`` for the next attempt)."""
        if key not in self._counts:
            chosen = self.line[members[self.literal]]
            self._counts[key] = np.bincount(chosen, minlength=self.alike.size)
        return self._counts[key]


def _members(literals: Sequence[str], gates: Sequence[str]) -> np.ndarray | None:
    """A mask over ``gates`` marking ``literals``; None when one of them is not a gate."""
    if not set(literals) <= set(gates):
        return None
    return np.isin(np.array(gates, dtype=object), list(literals))


def _sure(pattern: str, literals: Sequence[str]) -> bool:
    """Whether ``pattern`` matches every line holding one of ``literals``: it is literal text
    (alternatives of escaped characters), and each literal holds one of its alternatives."""
    alternatives = _literal_alternatives(pattern)
    if not alternatives or not literals:
        return False
    return all(any(alt in lit for alt in alternatives) for lit in literals)


def _literal_alternatives(pattern: str) -> list[str] | None:
    """The texts of a pattern that is only literal text and ``|``; None for any other."""
    alternatives, current, at = [], [], 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            escaped = pattern[at + 1 : at + 2]
            if escaped not in REGEX_META:
                return None
            current.append(escaped)
            at += 2
            continue
        if char == "|":
            alternatives.append("".join(current))
            current = []
        elif char in REGEX_META:
            return None
        else:
            current.append(char)
        at += 1
    alternatives.append("".join(current))
    return None if "" in alternatives else alternatives


def escaped(text: str) -> str:
    """``text`` as a Rust regex matching it literally."""
    return "".join(f"\\{ch}" if ch in REGEX_META else ch for ch in text)


def _unnamed(pattern: str) -> str:
    """``pattern`` with its named groups made plain: several ungated patterns naming one field
    are joined into one alternation, where a name may appear once."""
    return re.sub(r"(?<!\\)\(\?P<\w+>", "(?:", pattern)


def _marked(pattern: str) -> str:
    """``pattern`` with an empty group at its end that is set on the lines it matches."""
    return f"(?:{pattern})(?P<{MATCHED}>)"


def _groups(texts: pl.Series, regex: str) -> pl.DataFrame:
    return texts.str.extract_groups(regex).struct.unnest()


def _backed_up(found: pl.DataFrame, texts: pl.Series, regex: str) -> pl.DataFrame:
    """``found`` (what a strict form read of ``texts``) with the lines it did not match read by
    ``regex`` (its shortcut), in their places."""
    missed = found.get_column(MATCHED).is_null().arg_true()
    if missed.is_empty():
        return found
    again = _groups(texts.gather(missed), regex)
    nulls = pl.Series(dtype=pl.String)
    return pl.DataFrame(
        [
            (
                found.get_column(name)
                if name in found.columns
                else nulls.extend_constant(None, len(texts))
            )
            .clone()
            .scatter(missed, again.get_column(name) if name in again.columns else None)
            .alias(name)
            for name in dict.fromkeys([*found.columns, *again.columns])
        ]
    )


def _merged(values: pl.DataFrame, first: int) -> pl.DataFrame:
    """``values`` in ``ROW`` order, from two runs each in that order: its first ``first`` rows,
    then the rest. A second run of at most ``SLOTTED`` rows (the usual: the first attempt reads
    nearly every line) is slotted in between slices of the first, and the columns are copied
    once; sorting gathers every row of every column, row by row, several times slower."""
    if values.height - first > SLOTTED:
        return values.sort(ROW)
    rows = values.get_column(ROW).to_numpy()
    pieces, start = [], 0
    for j, at in enumerate(np.searchsorted(rows[:first], rows[first:]).tolist()):
        pieces += [values.slice(start, at - start), values.slice(first + j, 1)]
        start = at
    pieces.append(values.slice(start, first - start))
    return pl.concat(pieces, rechunk=True)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for values nearly in order already (a stable sort of a run of
    sorted runs is linear; numpy 2's ``unique`` hashes, several times slower here)."""
    ordered = np.sort(values, kind="stable")
    unique: np.ndarray = ordered[_run_starts(ordered)]
    return unique


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal neighbours in ``values`` begins (a boolean mask)."""
    starts = np.ones(values.size, dtype=bool)
    starts[1:] = values[1:] != values[:-1]
    return starts
