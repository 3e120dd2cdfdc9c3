"""Fitting a rules route's min_score on a backtest's true and false detections."""

from __future__ import annotations

import pytest

from medic import schema
from medic.backtest import BacktestReport, RecordingResult
from medic.scoring import Score
from medic.tuning import fit_min_score


def report(true: list[float], false: list[float], kind: str = "hang") -> BacktestReport:
    score = Score(
        detections=len(true) + len(false),
        matched=len(true),
        matched_rows=[{"kind": kind, "score": s} for s in true],
        false_positive_rows=[{"kind": kind, "score": s} for s in false],
    )
    empty = schema.empty(schema.DETECTIONS)
    actions = schema.empty(schema.ACTIONS)
    return BacktestReport([RecordingResult("r", None, empty, score, 0.0, 0, actions)])


def test_the_lowest_score_that_keeps_the_wanted_precision() -> None:
    backtest = report([1.5, 2.0, 3.0, 4.0, 5.0], [1.0, 1.2, 2.5])
    fit = fit_min_score(backtest, "hang", 0.8)
    assert fit.min_score == 1.5 and fit.detections == 8
    assert fit.precision == pytest.approx(5 / 6) and fit.recall == 1.0
    strict = fit_min_score(backtest, "hang", 0.9)
    assert (strict.min_score, strict.precision, strict.recall) == (3.0, 1.0, 0.6)


def test_all_true_keeps_everything_and_other_kinds_do_not_count() -> None:
    mixed = report([2.0, 3.0], [])
    mixed.results[0].score.false_positive_rows.append({"kind": "crash", "score": 9.0})
    fit = fit_min_score(mixed, "hang")
    assert (fit.min_score, fit.precision, fit.recall) == (2.0, 1.0, 1.0)


def test_nothing_to_fit_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no true straggler detection"):
        fit_min_score(report([1.0], [2.0]), "straggler")
    with pytest.raises(ValueError, match="no score keeps hang detections at precision 0.99"):
        fit_min_score(report([1.0], [2.0, 3.0]), "hang", 0.99)
