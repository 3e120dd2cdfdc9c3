"""Fitting a rules route's min_score on a backtest's true and false detections."""

from __future__ import annotations

import pytest

from medic import schema, scoring
from medic.backtest import BacktestReport, RecordingResult
from medic.scoring import Score
from medic.tuning import fit_min_score, rethreshold
from tests.builders import detection, label, recording, table


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


def test_cached_detections_are_scored_again_at_a_higher_bar_without_replaying() -> None:
    labels = [label("h1", "hang", 100.0)]
    rec = recording(3600, labels=labels, name="r")
    rows = [
        detection(150, "hang") | {"score": 0.8},  # the true one, GPUs corroborating
        detection(2000, "hang") | {"score": 0.55},  # a silence alone, no incident
        detection(2500, "crash") | {"score": 0.7},
    ]
    cached = table("detections", rows)
    actions = schema.empty(schema.ACTIONS)
    result = RecordingResult("r", None, cached, scoring.score(cached, rec.labels), 0.0, 0, actions)
    before = BacktestReport([result])
    assert before.by_kind()["hang"]["precision"] == 0.5
    surer = rethreshold(before, [rec], {"hang": 0.6})
    assert surer.by_kind()["hang"]["precision"] == 1.0 and surer.by_kind()["hang"]["recall"] == 1.0
    assert surer.overall.detections_by_kind["crash"] == 1  # other kinds keep theirs
    too_high = rethreshold(before, [rec], {"hang": 0.9})
    assert too_high.by_kind()["hang"]["recall"] == 0.0
