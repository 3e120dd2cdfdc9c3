"""Several regexes read as one tagged regex: each line reads as its own pattern reads it."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from medic.parse.catalogue import builtin_catalogue
from medic.parse.progress_formats import FORMATS
from medic.parse.tagged_regex import MATCHED, TaggedRegex, retagged, taggable

REAL = Path(__file__).parent.parent / "data" / "real"
EDGES = [
    "",
    "\r 50%|#####     | 5/10 [00:05<00:05,  1.00it/s]"
    "\r 60%|######    | 6/10 [00:06<00:04,  1.00it/s]",
    "tab\there 12/100, SamplesPerSec=3.5",
    " 12/100, SamplesPerSec=3.5",
    "ümlaut-host:12:34 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.2.3<0>",
    "steps/sec: 1.5",
    "x steps/sec: 1.5",
    "ValueError: bad",
    "[rank3]: RuntimeError: boom",
    "Metrics values at step 12:",
]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield from value.splitlines()
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def corpus_lines() -> list[str]:
    """Every text of the real corpus, line by line, and some edge cases."""
    lines = {
        line for path in REAL.rglob("*.toml") for line in _strings(tomllib.loads(path.read_text()))
    }
    return sorted(lines) + EDGES


def _alone(pattern: str, lines: pl.Series) -> pl.DataFrame:
    return lines.str.extract_groups(f"(?:{pattern})(?P<{MATCHED}>)").struct.unnest()


@pytest.mark.parametrize(
    "patterns",
    [
        [f.pattern for f in FORMATS]
        + [cut.pattern for f in FORMATS if (cut := f.shortcut()) is not None],
        builtin_catalogue().signatures["pattern"].to_list(),
    ],
    ids=["progress formats", "signatures"],
)
def test_every_pattern_reads_every_corpus_line_tagged_as_it_reads_it_alone(
    patterns: list[str],
) -> None:
    lines = pl.Series(corpus_lines(), dtype=pl.String)
    tagged = TaggedRegex(patterns)
    assert tagged.members.all()
    for index, pattern in enumerate(patterns):
        alone = _alone(pattern, lines)
        read = tagged.read(np.full(len(lines), index), lines)
        for column in alone.columns:
            if column.isdigit():
                continue
            assert read.get_column(column).to_list() == alone.get_column(column).to_list(), (
                pattern,
                column,
            )


def test_a_caret_is_the_start_of_the_line_after_its_tag_and_groups_are_numbered() -> None:
    assert retagged(r"^a[^^\]](?P<x>\d)\^(?:^|[\r}])", 3) == (
        r"(?m:^)a[^^\]](?P<x__3>\d)\^(?:(?m:^)|[\r}])"
    )
    assert retagged(r"[a[^b]^](?<y>.)\p{^Greek}", 0) == r"[a[^b]^](?P<y__0>.)\p{^Greek}"


def test_a_caret_after_the_start_never_matches_and_the_leftmost_match_wins() -> None:
    patterns = [r"a(?:^|b)(?P<n>\d)", r"(?P<n>\d+)x", r"^(?P<n>\d)"]
    lines = pl.Series(["a1 ab2", "1x 22x", "3", " 3"])
    tagged = TaggedRegex(patterns)
    for index, pattern in enumerate(patterns):
        read = tagged.read(np.full(len(lines), index), lines)
        assert read.get_column("n").to_list() == _alone(pattern, lines).get_column("n").to_list()


def test_verbose_patterns_and_text_starts_are_read_alone() -> None:
    assert not taggable(r"(?x) a b")
    assert not taggable(r"\Aabc")
    assert taggable(r"(?i)abc")
    tagged = TaggedRegex([r"(?x) a", None, "b"])
    assert tagged.members.tolist() == [False, False, True]
