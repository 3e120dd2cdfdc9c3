"""The first-match reader both log parsers share: priority, literal gating, the second try."""

from __future__ import annotations

import polars as pl
import pytest

from medic.parse import first_match
from medic.parse.first_match import PATTERN, ROW, FirstMatch, Shortcut

PATTERNS = [
    r"alpha (?P<a>\d+) beta",  # 0
    r"alpha (?P<a>\d+)",  # 1
    r"(gamma) (?P<b>\w+)",  # 2
    r"alpha",  # 3
]
LITERALS = [["beta"], ["alpha"], ["gamma"], ["alpha"]]


def read(lines: list[str], text: pl.Series | None = None) -> list[tuple[object, ...]]:
    reader = FirstMatch(PATTERNS, LITERALS, ("a", "b"))
    frame = reader.read(pl.Series(lines, dtype=pl.String), text)
    assert frame.columns == [ROW, PATTERN, "a", "b"]
    return frame.rows()


def test_the_first_pattern_by_priority_reads_a_line() -> None:
    assert read(["alpha 7 beta", "alpha 8", "gamma ray"]) == [
        (0, 0, "7", None),
        (1, 1, "8", None),
        (2, 2, None, "ray"),
    ]


def test_a_line_its_best_pattern_misses_goes_to_the_best_of_the_others() -> None:
    # The line holds "beta" and "alpha": pattern 0 fails, patterns 1 and 3 both match.
    assert read(["alpha x beta", "beta alpha 5"]) == [(0, 3, None, None), (1, 1, "5", None)]


def test_a_pattern_is_tried_only_on_lines_holding_its_literals() -> None:
    reader = FirstMatch([r"(?P<a>\d+)", r"x(?P<b>\d+)"], [["id "], ["x"]], ("a", "b"))
    lines = pl.Series(["id 12", "42", "x9"])
    assert reader.read(lines).rows() == [(0, 0, "12", None), (2, 1, None, "9")]


def test_a_pattern_without_literals_is_tried_on_every_line_first() -> None:
    reader = FirstMatch([r"(?P<a>\d)", *PATTERNS], [[], *LITERALS], ("a", "b"))
    assert reader.read(pl.Series(["alpha 7 beta", "nothing", "gamma ray"])).rows() == [
        (0, 0, "7", None),
        (2, 3, None, "ray"),
    ]


def test_patterns_without_any_literals_at_all_read_every_line() -> None:
    reader = FirstMatch([r"x(?P<a>\d)", r"(?P<a>\d)"], [[], []], ("a",))
    assert reader.read(pl.Series(["x1", "2", "none"])).rows() == [(0, 0, "1"), (1, 1, "2")]


def test_literals_are_looked_for_in_the_lines_and_patterns_run_on_the_text() -> None:
    lines = pl.Series(["alpha 1", "zzz 2"])
    text = pl.Series(["alpha 3", "alpha 4"])
    assert read(lines.to_list(), text=text) == [(0, 1, "3", None)]


def test_nothing_to_read_is_an_empty_frame_with_the_columns() -> None:
    assert read([]) == []
    assert read(["no literal here", "gamma"]) == []


def test_a_shortcut_reads_the_lines_holding_its_literals_once_the_pattern_the_others() -> None:
    # The last "x<digit>" of a line; the shortcut (which marks its reading in b) reads lines
    # with a single "x", in a batch mixing both kinds, and the rows stay in line order.
    reader = FirstMatch(
        [r"^.*x(?P<a>\d)", r"y(?P<a>\d)"],
        [["x"], ["y"]],
        ("a", "b"),
        [Shortcut(r"x(?P<a>\d)(?P<b>)", ("x",)), None],
    )
    lines = pl.Series(["x1 x2", "x3", "y4", "zz x5 x6 x7", "x8 and y9", "x"])
    assert reader.read(lines).rows() == [
        (0, 0, "2", None),
        (1, 0, "3", ""),
        (2, 1, "4", None),
        (3, 0, "7", None),
        (4, 0, "8", ""),
    ]


def test_overlapping_occurrences_of_shortcut_literals_count_twice() -> None:
    reader = FirstMatch(
        [r"^.*a(?P<a>a)"], [["aa"]], ("a", "b"), [Shortcut(r"a(?P<a>a)(?P<b>)", ("aa",))]
    )
    assert reader.read(pl.Series(["aaa", "aa"])).rows() == [(0, 0, "a", None), (1, 0, "a", "")]


def test_candidates_are_the_lines_holding_a_literal_or_matching_an_ungated_pattern() -> None:
    lines = pl.DataFrame({"line": ["a+b here", "ab", "step 5 done", "nothing", "x.y"]})
    gated = FirstMatch([r"a\+b", r"x\.y"], [["a+b"], ["x.y"]], ())
    assert lines.select(gated.candidates(pl.col("line"))).to_series().to_list() == [
        True,
        False,
        False,
        False,
        True,
    ]
    mixed = FirstMatch([r"a\+b", r"step (?P<n>\d+)"], [["a+b"], []], ("n",))
    assert lines.select(mixed.candidates(pl.col("line"))).to_series().to_list() == [
        True,
        False,
        True,
        False,
        False,
    ]


def test_ungated_patterns_naming_one_field_find_their_candidates_and_read_it() -> None:
    lines = pl.Series(["step 5 done", "7  0.5  00:12", "nothing"], dtype=pl.String)
    reader = FirstMatch([r"step (?P<n>\d+)", r"^(?P<n>\d+)  \S+  \S+$"], [[], []], ("n",))
    assert pl.select(reader.candidates(pl.lit(lines))).to_series().to_list() == [
        True,
        True,
        False,
    ]
    assert reader.read(lines).select(ROW, "n").rows() == [(0, "5"), (1, "7")]


def test_a_literal_holding_another_finds_no_other_candidates_and_is_not_scanned_for() -> None:
    lines = pl.DataFrame({"line": ["total loss: 2", "loss: 3", "lost", "| loss:"]})
    first = FirstMatch([r"total loss: \d", r"loss: \d"], [["total loss: "], ["loss:"]], ())
    assert first._held == "loss:"
    found = lines.select(first.candidates(pl.col("line"))).to_series().to_list()
    assert found == [True, True, False, True]
    assert first.read(lines.get_column("line")).get_column(PATTERN).to_list() == [0, 1]


def test_a_shortcut_counts_its_literals_in_the_text_when_the_text_is_not_the_lines() -> None:
    # The lines hold one "x" each (as gated), the text two: the text's count picks the pattern.
    reader = FirstMatch(
        [r"^.*x(?P<a>\d)"], [["x"]], ("a", "b"), [Shortcut(r"x(?P<a>\d)(?P<b>)", ("x",))]
    )
    lines, text = pl.Series(["x1", "x3"]), pl.Series(["x1 x2", "x3"])
    assert reader.read(lines, text).rows() == [(0, 0, "2", None), (1, 0, "3", "")]


def test_a_shortcut_whose_literals_do_not_gate_counts_them_in_the_text() -> None:
    reader = FirstMatch(
        [r"^.*x(?P<a>\d)"], [["#"]], ("a", "b"), [Shortcut(r"x(?P<a>\d)(?P<b>)", ("x",))]
    )
    assert reader.read(pl.Series(["# x1 x2", "# x3"])).rows() == [
        (0, 0, "2", None),
        (1, 0, "3", ""),
    ]


def test_a_literal_pattern_reads_the_lines_holding_its_literals_without_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run: list[str] = []
    real = first_match._groups
    monkeypatch.setattr(first_match, "ALONE", 0)  # every regex that runs runs alone
    monkeypatch.setattr(
        first_match, "_groups", lambda texts, regex: run.append(regex) or real(texts, regex)
    )
    reader = FirstMatch(
        [r"Traceback \(most recent call last\)|SIGABRT", r"Aborted(?P<a>\d)", r"SIG\w+"],
        [["Traceback (most recent call last)", "SIGABRT"], ["Aborted"], ["SIG"]],
        ("a",),
    )
    lines = pl.Series(["Traceback (most recent call last):", "SIGABRT here", "Aborted7", "SIGX"])
    assert reader.read(lines).rows() == [(0, 0, None), (1, 0, None), (2, 1, "7"), (3, 2, None)]
    assert not any("Traceback" in regex for regex in run)
    # a literal does not hold any alternative of the pattern: it is run
    assert not FirstMatch([r"SIGSEGV"], [["SIG"]], ())._sure.any()
    assert not FirstMatch([r"a.c"], [["abc"]], ())._sure.any()


def test_a_literal_pattern_runs_on_a_text_other_than_the_lines() -> None:
    # The literal is in the line, not in the text the patterns read (colour escapes cut).
    reader = FirstMatch([r"Traceback"], [["Traceback"]], ())
    lines, text = pl.Series(["Traceback", "Traceback"]), pl.Series(["Trace", "Traceback"])
    assert reader.read(lines, text).rows() == [(1, 0)]


def test_many_literals_are_scanned_for_as_fewer_shared_texts_and_every_holder_is_found() -> None:
    # 80 literals, more than one scan takes at full speed: texts that several of them hold
    # stand in for them; every line holding a literal is still a candidate, and the gates keep
    # the lines holding only a shared text from being read.
    literals = [f"event {name} fault" for name in range(40)] + [f"code{n:02d}x" for n in range(40)]
    scanned = first_match._scanned(tuple(literals))
    assert len(scanned) <= first_match.SCANNED
    assert all(any(text in literal for text in scanned) for literal in literals)
    patterns = [rf"{literal} (?P<a>\d+)" for literal in literals]
    reader = FirstMatch(patterns, [[literal] for literal in literals], ("a",))
    lines = pl.Series([f"x {literal} 7" for literal in literals] + ["event  fault", "nothing"])
    found = pl.DataFrame({"line": lines}).select(reader.candidates(pl.col("line"))).to_series()
    assert found.head(len(literals)).all() and not found[-1]
    assert reader.read(lines).get_column(ROW).to_list() == list(range(len(literals)))


@pytest.mark.parametrize("slotted", [0, first_match.SLOTTED])
def test_lines_the_second_attempt_reads_come_back_in_line_order(
    monkeypatch: pytest.MonkeyPatch, slotted: int
) -> None:
    # Lines 1 and 4 fail their best pattern (0) and are read in the second attempt, among the
    # lines the first attempt reads: slotted in between them, or sorted when there are many.
    monkeypatch.setattr(first_match, "SLOTTED", slotted)
    lines = ["alpha 1 beta", "alpha x beta", "alpha 3", "gamma ray", "beta alpha 5", "alpha 6"]
    assert read(lines) == [
        (0, 0, "1", None),
        (1, 3, None, None),
        (2, 1, "3", None),
        (3, 2, None, "ray"),
        (4, 1, "5", None),
        (5, 1, "6", None),
    ]


def test_a_pattern_without_literals_is_tried_only_where_its_regex_finds_a_match() -> None:
    # The ungated pattern (0) comes first by priority; a line it does not match is read by the
    # gated one in the first attempt, and the text (not the line) is what it is looked for in.
    reader = FirstMatch([r"^(?P<n>\d+)$", r"step (?P<n>\d+)"], [[], ["step "]], ("n",))
    lines = pl.Series(["12", "step 3", "\x1b[1m7", "step 4"])
    text = pl.Series(["12", "step 3", "7", "step 4"])
    assert reader.read(lines, text).rows() == [(0, 0, "12"), (1, 1, "3"), (2, 0, "7"), (3, 1, "4")]


def test_a_strict_form_reads_its_run_and_the_shortcut_the_lines_it_misses_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The strict form (which marks its reading in b) reads the plain lines; the line it misses
    # ("x 5") is read by the shortcut in its place, and a line with two x by the pattern.
    monkeypatch.setattr(first_match, "ALONE", 2)
    reader = FirstMatch(
        [r"^.*x *(?P<a>\d)", r"y(?P<a>\d)"],
        [["x"], ["y"]],
        ("a", "b"),
        [Shortcut(r"x *(?P<a>\d)", ("x",), strict=r"^x(?P<a>[0-9])(?P<b>)"), None],
    )
    lines = pl.Series(["x1", "x 5", "y4", "x2 x3", "x6", "x"])
    assert reader.read(lines).rows() == [
        (0, 0, "1", ""),
        (1, 0, "5", None),
        (2, 1, "4", None),
        (3, 0, "3", None),
        (4, 0, "6", ""),
    ]


def test_a_strict_form_with_few_lines_leaves_them_to_its_shortcut() -> None:
    reader = FirstMatch(
        [r"^.*x(?P<a>\d)"],
        [["x"]],
        ("a", "b"),
        [Shortcut(r"x(?P<a>\d)", ("x",), strict=r"^x(?P<a>[0-9])(?P<b>)")],
    )
    assert reader.read(pl.Series(["x1", "x2"])).rows() == [(0, 0, "1", None), (1, 0, "2", None)]
