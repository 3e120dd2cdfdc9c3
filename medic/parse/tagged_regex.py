"""Several regexes read as one: each line led by a tag naming the regex meant for it.

polars compiles the regex of ``str.extract_groups`` on every call (it keeps no compiled copy),
and a regex with Unicode classes (``\\w`` above all) takes 0.1-1 ms to compile and to warm up.
A parser whose patterns each read a few lines of a batch pays that per pattern per batch, more
than reading those lines costs. ``TaggedRegex`` joins the patterns a batch needs into one regex:
a line is read as ``<i>\\n<line>``, and alternative ``i`` reads its tag, then pattern ``i``
anywhere after it. The lazy skip in front of the pattern keeps the match an unanchored search
finds (the leftmost start, then the pattern's own preference), and the pattern's ``^`` becomes a
multi-line one, true right after the tag: the same match, the same groups, as long as the line
holds no newline of its own (those lines are read by the pattern alone). Only the patterns of
the lines being read join (a regex of every pattern costs milliseconds to compile and yields a
column per group of every pattern, each batch). Reading a line this way costs about twice what
the pattern alone costs, so only the patterns with few lines in a batch are read tagged.
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
        self._alternatives = {
            i: rf"{i}\n(?s:.)*?(?:{retagged(p, i)})"
            for i, p in enumerate(patterns)
            if p is not None and self.members[i]
        }
        """Each member's alternative in a tagged regex."""
        self._tags = pl.Series([f"{i}\n" for i in range(len(patterns))], dtype=pl.String)
        self._groups: dict[str, list[tuple[int, str]]] = {}
        """Each named group's columns in a tagged regex: (pattern, column), one per pattern
        naming it."""
        if not self._alternatives:
            return
        try:
            probe = pl.Series([""], dtype=pl.String).str.extract_groups(
                self._pattern(list(self._alternatives))
            )
        except pl.exceptions.ComputeError:  # over the regex size limit: each read alone
            self.members[:] = False
            self._alternatives = {}
            return
        for field in probe.dtype.fields:  # type: ignore[attr-defined]
            name, _, index = field.name.rpartition(SEPARATOR)
            if name and index.isdigit():
                self._groups.setdefault(name, []).append((int(index), field.name))

    def read(self, indices: np.ndarray, lines: pl.Series) -> pl.DataFrame:
        """``lines[k]`` read with pattern ``indices[k]`` (a member), one row per line: ``MATCHED``
        and the named groups of those patterns."""
        present = np.unique(indices).tolist()
        tagged = self._tags.gather(pl.Series(indices, dtype=pl.UInt32)) + lines
        found = tagged.str.extract_groups(self._pattern(present)).struct.unnest()
        wanted = set(present)
        columns = {
            name: [column for index, column in held if index in wanted]
            for name, held in self._groups.items()
        }
        return found.select(
            MATCHED,
            *(pl.coalesce(held).alias(name) for name, held in columns.items() if held),
        )

    def _pattern(self, members: list[int]) -> str:
        """The tagged regex of ``members`` (indices of member patterns)."""
        alternatives = "|".join(self._alternatives[i] for i in members)
        return f"^(?:{alternatives})(?P<{MATCHED}>)"
