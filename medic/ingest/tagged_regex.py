"""Several regexes read as one: each line led by a tag naming the regex meant for it.

polars compiles a regex whenever its per-thread cache (32 regexes) no longer holds it, and a
regex with Unicode classes (``\\w`` above all) takes 0.1-1 ms to compile. A parser whose
patterns each read a few lines of a batch, more patterns than that cache holds, pays a compile
per pattern per batch, more than reading those lines costs. ``TaggedRegex`` joins the patterns
into one regex, the same string every batch (compiled once): a line is read as ``<i>\\n<line>``,
and alternative ``i`` reads its tag, then pattern ``i`` anywhere after it. The lazy skip in
front of the pattern keeps the match an unanchored search finds (the leftmost start, then the
pattern's own preference), and the pattern's ``^`` becomes a multi-line one, true right after
the tag: the same match, the same groups, as long as the line holds no newline of its own
(those lines are read by the pattern alone). Reading a line this way costs about twice what the
pattern alone costs, so only the patterns with few lines in a batch are read tagged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import polars as pl

MATCHED = "_matched"
"""An empty group at the end of the tagged regex: set on the lines their pattern matches."""
SEPARATOR = "__"
"""Between a group's name and its pattern's index, in the tagged regex's group names."""
_VERBOSE_OR_START = re.compile(r"\(\?[a-zA-Z-]*x|\\A")
"""Verbose mode (whitespace and ``#`` change meaning) or ``\\A`` (the tag is the text's start):
patterns using either are not tagged."""
_BRACED_ESCAPES = frozenset("pPxuU")
"""Escapes whose argument may be braced: ``\\p{...}``, ``\\x{...}``."""


def taggable(pattern: str) -> bool:
    """Whether ``pattern`` reads a tagged line as it reads the bare line."""
    return _VERBOSE_OR_START.search(pattern) is None


def retagged(pattern: str, index: int) -> str:
    """``pattern`` as alternative ``index`` of a tagged regex: its named groups renamed
    ``<name>__<index>``, its ``^`` (start of text) true right after a tag's newline."""
    out: list[str] = []
    at, depth = 0, 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            end = at + 2
            if pattern[at + 1 : at + 2] in _BRACED_ESCAPES and pattern[end : end + 1] == "{":
                end = pattern.index("}", end) + 1
            out.append(pattern[at:end])
            at = end
        elif char == "[":
            end = _class_start_end(pattern, at)
            out.append(pattern[at:end])
            depth, at = depth + 1, end
        elif depth:
            depth += -1 if char == "]" else 0
            out.append(char)
            at += 1
        elif char == "^":
            out.append("(?m:^)")
            at += 1
        elif named := re.match(r"\(\?P?<(\w+)>", pattern[at:]):
            out.append(f"(?P<{named.group(1)}{SEPARATOR}{index}>")
            at += named.end()
        else:
            out.append(char)
            at += 1
    return "".join(out)


def _class_start_end(pattern: str, at: int) -> int:
    """Where the first member of the class opened at ``at`` begins: after ``[``, a negating
    ``^`` and a leading ``]`` (a literal there)."""
    end = at + 1
    if pattern[end : end + 1] == "^":
        end += 1
    if pattern[end : end + 1] == "]":
        end += 1
    return end


class TaggedRegex:
    """``patterns`` (Rust regexes; ``None``: one that is never read tagged) as one regex.
    ``read(indices, lines)`` reads each line with its own pattern: a ``MATCHED`` column set
    where it matches, and one column per named group (of the patterns read)."""

    def __init__(self, patterns: Sequence[str | None]) -> None:
        self.members = np.array([p is not None and taggable(p) for p in patterns], dtype=bool)
        """Whether each pattern is read tagged at all."""
        alternatives = [
            rf"{i}\n(?s:.)*?(?:{retagged(p, i)})"
            for i, p in enumerate(patterns)
            if p is not None and self.members[i]
        ]
        self.pattern = f"^(?:{'|'.join(alternatives)})(?P<{MATCHED}>)" if alternatives else ""
        self._tags = pl.Series([f"{i}\n" for i in range(len(patterns))], dtype=pl.String)
        self._groups: dict[str, list[str]] = {}
        """Each named group's columns in the tagged regex (one per pattern naming it)."""
        if not self.pattern:
            return
        try:
            probe = pl.Series([""], dtype=pl.String).str.extract_groups(self.pattern)
        except pl.exceptions.ComputeError:  # over the regex size limit: each read alone
            self.members[:] = False
            self.pattern = ""
            return
        for field in probe.dtype.fields:  # type: ignore[attr-defined]
            name, _, index = field.name.rpartition(SEPARATOR)
            if name and index.isdigit():
                self._groups.setdefault(name, []).append(field.name)

    def read(self, indices: np.ndarray, lines: pl.Series) -> pl.DataFrame:
        """``lines[k]`` read with pattern ``indices[k]`` (a member), one row per line."""
        tagged = self._tags.gather(pl.Series(indices, dtype=pl.UInt32)) + lines
        found = tagged.str.extract_groups(self.pattern).struct.unnest()
        return found.select(
            MATCHED, *(pl.coalesce(columns).alias(name) for name, columns in self._groups.items())
        )
