"""Fitting a rules route's min_score and a calibration on a backtest's true and false
detections; re-thresholding cached detections."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from medic import schema, scoring
from medic.backtest import BacktestReport, RecordingResult
from medic.calibration import Calibration, EvidenceModel, ScoreMap
from medic.scoring import Score
from medic.testing.builders import detection, label, recording, table
from medic.tuning import (
    calibration_outcomes,
    expected_calibration_error,
    fit_calibration,
    fit_min_score,
    held_out_check,
    reliability,
    rethreshold,
)


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


def outcomes(kind: str, raw: list[float], real: list[bool], name: str = "r") -> pl.DataFrame:
    return pl.DataFrame(
        {"recording": [name] * len(raw), "kind": [kind] * len(raw), "raw": raw, "real": real}
    )


def test_a_calibration_fitted_on_outcomes_reads_as_the_share_that_was_real() -> None:
    # Low raw scores were real one time in four, high ones always: isotonic regression on
    # Platt's smoothed targets gives about those shares, never exactly 0 or 1.
    low = [0.5 + 0.01 * i for i in range(40)]
    high = [0.9 + 0.002 * i for i in range(40)]
    real = [i % 4 == 0 for i in range(40)] + [True] * 40
    fitted = fit_calibration(outcomes("hang", low + high, real), method="isotonic")
    hang = fitted.maps["hang"]
    assert isinstance(hang, ScoreMap)
    assert (hang.true, hang.false) == (50, 30)
    assert fitted.calibrated("hang", 0.6) == pytest.approx(0.25, abs=0.1)
    assert 0.95 < fitted.calibrated("hang", 0.95) < 1.0
    grid = hang(np.linspace(0, 1, 101))
    assert np.all(np.diff(grid) >= 0)  # monotone: surer evidence never reads as less likely
    assert "crash" not in fitted.maps  # no crash detections: crash keeps its raw score


def test_a_kind_never_wrong_in_the_backtest_is_likely_not_certain() -> None:
    for method in ("logistic", "isotonic"):
        fitted = fit_calibration(outcomes("crash", [0.3, 0.8, 1.0], [True] * 3), method)
        # (N+ + 1) / (N+ + 2), whatever the raw score
        assert fitted.calibrated("crash", 0.3) == pytest.approx(4 / 5, abs=1e-3)
        assert fitted.calibrated("crash", 1.0) == pytest.approx(4 / 5, abs=1e-3)


def test_a_sigmoid_rises_with_the_raw_score_and_never_falls() -> None:
    raw = [0.1 * i for i in range(11)] * 3
    real = [r > 0.45 for r in raw]
    rising = fit_calibration(outcomes("straggler", raw, real), method="sigmoid")
    assert rising.calibrated("straggler", 0.2) < 0.2 < 0.8 < rising.calibrated("straggler", 0.8)
    inverted = fit_calibration(outcomes("straggler", raw, [not r for r in real]), "sigmoid")
    flat = inverted.maps["straggler"]
    assert isinstance(flat, ScoreMap)
    # a falling fit is replaced by its flat form
    assert max(flat.probability) == pytest.approx(min(flat.probability))
    with pytest.raises(ValueError, match="unknown calibration method 'magic'"):
        fit_calibration(outcomes("hang", [0.5], [True]), "magic")


def test_reliability_is_better_for_a_calibrated_score_than_for_the_raw_one() -> None:
    raw = [0.9] * 20 + [0.5] * 20
    real = [i % 2 == 0 for i in range(20)] + [True] * 20  # the raw score is backwards
    seen = outcomes("node_failure", raw, real)
    figures = reliability(fit_calibration(seen), seen).row(0, named=True)
    assert figures["kind"] == "node_failure" and figures["detections"] == 40
    assert figures["brier"] < figures["brier_raw"] and figures["ece"] < figures["ece_raw"]
    assert expected_calibration_error(np.array([0.9, 0.9]), np.array([True, False])) == (
        pytest.approx(0.4)
    )


def test_the_held_out_check_measures_on_recordings_it_did_not_fit() -> None:
    seen = pl.concat(
        [
            outcomes("hang", [0.6, 0.9, 0.9], [False, True, True], "a-p1"),
            outcomes("hang", [0.6, 0.9], [False, True], "a-p2"),
        ]
    )
    check = held_out_check(seen, ["a-p2"])
    assert check.filter(pl.col("kind") == "all")["detections"].item() == 2
    with pytest.raises(ValueError, match="both sides"):
        held_out_check(seen, ["a-p1", "a-p2"])


def test_outcomes_of_a_backtest_use_the_raw_score_when_detections_carry_one() -> None:
    backtest = report([0.9], [0.6])
    backtest.results[0].score.matched_rows[0]["raw_score"] = 0.7
    found = calibration_outcomes(backtest)
    assert found.select("raw", "real").rows() == [(0.7, True), (0.6, False)]


def test_outcomes_hold_the_suspects_too_true_and_false() -> None:
    backtest = report([0.9], [])
    backtest.results[0].score.suspect_rows.append({"kind": "hang", "score": 0.6, "tier": "suspect"})
    backtest.results[0].score.false_suspect_rows.append(
        {"kind": "hang", "score": 0.5, "tier": "suspect"}
    )
    found = calibration_outcomes(backtest)
    assert found.select("tier", "raw", "real").rows() == [
        ("confirmed", 0.9, True),
        ("suspect", 0.6, True),
        ("suspect", 0.5, False),
    ]


def test_rethreshold_can_bar_the_raw_score_instead() -> None:
    labels = [label("h1", "hang", 100.0)]
    rec = recording(3600, labels=labels, name="r")
    rows = [detection(150, "hang") | {"score": 0.9}, detection(2000, "hang") | {"score": 0.9}]
    cached = Calibration({}).rescore(table("detections", rows))
    cached = cached.set_column(8, "raw_score", pa.array([0.8, 0.55]))
    actions = schema.empty(schema.ACTIONS)
    result = RecordingResult("r", None, cached, scoring.score(cached, rec.labels), 0.0, 0, actions)
    raw_bar = rethreshold(BacktestReport([result]), [rec], {"hang": 0.6}, column="raw_score")
    assert raw_bar.by_kind()["hang"]["precision"] == 1.0
    calibrated_bar = rethreshold(BacktestReport([result]), [rec], {"hang": 0.6})
    assert calibrated_bar.by_kind()["hang"]["precision"] == 0.5


def hangs(seed: int) -> pl.DataFrame:
    """Hang outcomes whose truth rests on the evidence: the silence, in the job's own step
    gaps, and whether the GPUs corroborate it; the raw score alone says less."""
    rng = np.random.default_rng(seed)
    silence = rng.uniform(0.0, 6.0, 400)
    positive = (rng.uniform(size=400) < 0.5).astype(float)
    truth = rng.uniform(size=400) < 1 / (1 + np.exp(-(-4.0 + 1.2 * silence + 2.5 * positive)))
    return pl.DataFrame(
        {
            "recording": [f"r-p{i % 4}" for i in range(400)],
            "kind": ["hang"] * 400,
            "raw": rng.uniform(0.5, 1.0, 400),
            "real": truth,
            "silence": silence,
            "positive": positive,
        }
    )


def test_a_logistic_calibration_scores_stronger_evidence_higher() -> None:
    fitted = fit_calibration(hangs(1))
    model = fitted.maps["hang"]
    assert isinstance(model, EvidenceModel)
    assert model.weights["silence"] > 0 and model.weights["positive"] > 0
    weak = fitted.calibrated("hang", 0.7, features={"silence": 1.0, "positive": 0.0})
    longer = fitted.calibrated("hang", 0.7, features={"silence": 4.0, "positive": 0.0})
    corroborated = fitted.calibrated("hang", 0.7, features={"silence": 1.0, "positive": 1.0})
    assert weak < 0.3 < 0.6 < longer and weak < corroborated
    # Measured on outcomes it never saw, the score is a probability and ranks real first.
    check = reliability(fitted, hangs(2)).row(0, named=True)
    assert check["ece"] < 0.08 and check["auc"] > 0.85 and check["auc_raw"] < 0.65


def test_a_refit_on_the_same_outcomes_is_the_same_calibration() -> None:
    seen = hangs(3)
    first = fit_calibration(seen)
    assert fit_calibration(seen.sample(fraction=1.0, shuffle=True, seed=5)) == first
    assert first.to_dict() == fit_calibration(seen).to_dict()


def test_a_weight_that_would_read_stronger_evidence_as_less_likely_is_dropped() -> None:
    seen = hangs(4).with_columns(agree=pl.col("real").cast(pl.Float64).mul(-1).add(1))
    model = fit_calibration(seen).maps["hang"]
    assert isinstance(model, EvidenceModel)
    assert "agree" not in model.weights and all(w >= 0 for w in model.weights.values())


def test_brier_ece_and_auc_on_a_known_case() -> None:
    probability = np.array([0.9, 0.9, 0.9, 0.9, 0.2, 0.2])
    real = np.array([True, True, True, False, False, True])
    seen = pl.DataFrame(
        {"recording": ["r"] * 6, "kind": ["crash"] * 6, "raw": probability, "real": real}
    )
    figures = reliability(Calibration({}), seen).row(0, named=True)
    # Brier: (3 * 0.01 + 0.81 + 0.04 + 0.64) / 6
    assert figures["brier"] == pytest.approx(1.52 / 6)
    # ECE: bin 0.9 holds 4 (said 3.6, 3 real), bin 0.2 holds 2 (said 0.4, 1 real): 1.2 / 6
    assert figures["ece"] == pytest.approx(1.2 / 6)
    # AUC: of the 4 x 2 real/false pairs, real above false in 3 + 3 * 1 ... ties count half:
    # reals 0.9, 0.9, 0.9, 0.2 against falses 0.9, 0.2: 0.5 + 1, three times, then 0 + 0.5
    assert figures["auc"] == pytest.approx((3 * 1.5 + 0.5) / 8)
