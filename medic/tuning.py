"""Parameter sweeps through backtests, for notebooks and scripts.

A sweep replays every recording once per point of a parameter grid through the same
``backtest_recording`` that ``medic backtest`` uses, and returns one row per point with the
scores, overall and for the detection kind being tuned. The chosen point is written back as a
``medic.toml`` fragment (``[detectors.<name>]``) that ``--config`` accepts.

``fit_calibration`` fits what a score means (``medic.calibration``): per detection kind, the
probability that a detection with a given raw (evidence) score is real, from a backtest's
outcomes (``calibration_outcomes``: each de-duplicated detection, true when it fell in a label's
window by the scoring rules); ``reliability`` measures a calibration on other outcomes (Brier
score, expected calibration error) and ``held_out_check`` fits on some recordings and measures
on the others. ``fit_min_score`` is the offline fit of the other knob an operator turns: the
``min_score`` of a rules route, from the scores of a backtest's true and false detections
(scikit-learn's precision-recall curve). ``rethreshold`` scores a backtest's cached detections
again at other score bars, without replaying: every score is in [0, 1] and computed apart from
the detector's alarm, so a bar above the lowest keeps only the surer detections. A bar below
the alarm needs the alarm's own parameters swept (``sweep``), which replays.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import tomli_w
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, precision_recall_curve, roc_auc_score

from medic.backtest import BacktestReport, RecordingResult, backtest_recording
from medic.calibration import METHODS, Calibration, EvidenceModel, KindMap, ScoreMap
from medic.detectors.base import detection_id
from medic.evidence_features import FEATURES, confirmed_feature, raw_only
from medic.recording import Recording, find_recordings, read_recording
from medic.schema import CONFIRMED
from medic.scoring import score


def load_recordings(paths: Iterable[Path | str]) -> list[Recording]:
    """Every recording under ``paths`` (directories expand), read once for all sweep points."""
    return [read_recording(path) for path in find_recordings(paths)]


def with_detector_settings(
    base: Mapping[str, Any], detector: str, values: Mapping[str, Any]
) -> dict[str, Any]:
    """``base`` with ``values`` laid over its ``[detectors.<detector>]`` table."""
    detectors = dict(base.get("detectors", {}))
    detectors[detector] = {**detectors.get(detector, {}), **values}
    return {**base, "detectors": detectors}


def sweep(
    recordings: Sequence[Recording],
    detector: str,
    grid: Mapping[str, Sequence[Any]],
    kind: str | None = None,
    base: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """One row per grid point: the parameters, then ``score_row``'s columns for the labels of
    ``kind`` (``detector`` when None)."""
    kind = kind or detector
    names = list(grid)
    rows = []
    for point in itertools.product(*(grid[name] for name in names)):
        values = dict(zip(names, point, strict=True))
        settings = with_detector_settings(base or {}, detector, values)
        report = BacktestReport([backtest_recording(r, settings) for r in recordings])
        rows.append({**values, **score_row(report, kind)})
    return pl.DataFrame(rows)


def score_row(report: BacktestReport, kind: str | None) -> dict[str, Any]:
    """A backtest's scores in one row: recall, precision, false positives, latency p50/p90
    and attribution accuracy for the labels of ``kind`` (all kinds when None), and overall
    precision and false positives (what a change costs elsewhere)."""
    overall = report.overall.summary()
    part = overall if kind is None else report.by_kind().get(kind, {})
    return {
        "recall": part.get("recall"),
        "precision": part.get("precision"),
        "false_positives": part.get("false_positives", 0),
        "latency_p50_s": (part.get("latency_s") or {}).get("p50"),
        "latency_p90_s": (part.get("latency_s") or {}).get("p90"),
        "attribution_accuracy": part.get("attribution_accuracy"),
        "overall_precision": overall["precision"],
        "overall_false_positives": overall["false_positives"],
    }


def best(results: pl.DataFrame, min_precision: float = 1.0) -> dict[str, Any]:
    """The point with the highest recall, then the lowest p50 latency, among those whose
    overall precision is at least ``min_precision``; raises ValueError when none is."""
    eligible = results.filter(pl.col("overall_precision").fill_null(1.0) >= min_precision)
    if eligible.is_empty():
        raise ValueError(f"no grid point reaches overall precision {min_precision}")
    return eligible.sort(
        ["recall", "latency_p50_s"], descending=[True, False], nulls_last=True
    ).row(0, named=True)


def write_detector_config(path: Path | str, detector: str, values: Mapping[str, Any]) -> Path:
    """Write ``[detectors.<detector>]`` with ``values`` as a TOML file ``--config`` accepts."""
    target = Path(path)
    target.write_text(tomli_w.dumps({"detectors": {detector: dict(values)}}))
    return target


def rethreshold(
    report: BacktestReport,
    recordings: Sequence[Recording],
    min_score: Mapping[str, float],
    column: str = "score",
) -> BacktestReport:
    """``report`` scored again as if every detection of kind ``k`` below ``min_score[k]`` had not
    been emitted (kinds not named keep theirs); ``recordings`` give the labels, by name.
    ``column`` is the score the bars apply to: ``score`` (calibrated, what the rules read) or
    ``raw_score`` (the detector's evidence score)."""
    labels = {r.path.name if r.path else r.name: r.labels for r in recordings}
    results = []
    for result in report.results:
        detections = pl.from_arrow(result.detections)
        assert isinstance(detections, pl.DataFrame)
        bar = pl.col("kind").replace_strict(dict(min_score), default=0.0, return_dtype=pl.Float64)
        kept = detections.filter(pl.col(column) >= bar).to_arrow()
        kept = kept.cast(result.detections.schema)
        rescored = score(kept, labels.get(result.name))
        results.append(dataclasses.replace(result, detections=kept, score=rescored))
    return BacktestReport(results)


@dataclass(frozen=True)
class ScoreFit:
    """The lowest score that keeps a kind's detections at the wanted precision."""

    kind: str
    min_score: float
    precision: float
    recall: float
    """Share of the kind's true detections kept at ``min_score``."""
    detections: int


def fit_min_score(report: BacktestReport, kind: str, min_precision: float = 0.97) -> ScoreFit:
    """Fit a rules route's ``min_score`` for ``kind`` on a backtest: the lowest detection score
    at which the detections kept reach ``min_precision`` (a detection is true when it falls in a
    label's window, as the scoring rules say). Raises ValueError without true detections."""
    rows = [(d["score"], True) for d in report.overall.matched_rows if d["kind"] == kind]
    rows += [(d["score"], False) for d in report.overall.false_positive_rows if d["kind"] == kind]
    truth = np.array([matched for _, matched in rows], dtype=bool)
    if not truth.any():
        raise ValueError(f"no true {kind} detection to fit a score on")
    scores = np.array([score for score, _ in rows], dtype=float)
    if truth.all():
        return ScoreFit(kind, float(scores.min()), 1.0, 1.0, len(rows))
    precision, recall, thresholds = precision_recall_curve(truth, scores)
    good = np.flatnonzero(precision[:-1] >= min_precision)
    if good.size == 0:
        raise ValueError(f"no score keeps {kind} detections at precision {min_precision}")
    best_at = int(good[0])
    return ScoreFit(
        kind,
        float(thresholds[best_at]),
        float(precision[best_at]),
        float(recall[best_at]),
        len(rows),
    )


def calibration_outcomes(report: BacktestReport) -> pl.DataFrame:
    """One row per de-duplicated detection of a backtest, confirmed or suspect (each tier
    de-duplicated apart, as the scoring rules count them): ``recording``, ``kind``, ``tier``,
    ``raw`` (its evidence score: ``raw_score``, or ``score`` in detections written before
    calibration), ``real`` (it fell in a label's window of its job, by the scoring rules),
    then its evidence features (``medic.evidence_features.FEATURES``; the raw score alone
    where the backtest kept none)."""
    frames = [_outcomes(result) for result in report.results]
    return pl.concat(frames) if frames else _outcomes_frame([], [], np.zeros(0), [], {}, [])


def _outcomes(result: RecordingResult) -> pl.DataFrame:
    scored = result.score
    dets = [(True, d) for d in scored.matched_rows + scored.suspect_rows]
    dets += [(False, d) for d in scored.false_positive_rows + scored.false_suspect_rows]
    raw = np.array([_raw(d) for _, d in dets], dtype=float)
    tiers = [d.get("tier") or CONFIRMED for _, d in dets]
    columns = raw_only(raw)
    # The tier is in every detections file; a features file written before medic read it
    # as a feature lacks the column.
    columns["confirmed"] = np.array([confirmed_feature(t) for t in tiers], dtype=float)
    if result.features is not None and dets:
        where = {d: i for i, d in enumerate(result.features.column("detection_id").to_pylist())}
        rows = np.array(
            [
                where.get(detection_id(d["detected_at"], d["job_id"], d["kind"], d["detector"]), -1)
                for _, d in dets
            ]
        )
        found = rows >= 0
        for name in FEATURES[1:]:
            if name not in result.features.column_names:
                continue  # written before medic read that feature: its default
            values = result.features.column(name).to_numpy(zero_copy_only=False)
            columns[name] = np.where(found, np.asarray(values)[np.maximum(rows, 0)], columns[name])
    return _outcomes_frame(
        [result.name] * len(dets),
        [d["kind"] for _, d in dets],
        raw,
        [r for r, _ in dets],
        columns,
        tiers,
    )


def _outcomes_frame(
    names: list[str],
    kinds: list[str],
    raw: np.ndarray,
    real: list[bool],
    features: Mapping[str, np.ndarray],
    tiers: list[str],
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "recording": pl.Series(names, dtype=pl.String),
            "kind": pl.Series(kinds, dtype=pl.String),
            "tier": pl.Series(tiers, dtype=pl.String),
            "raw": pl.Series(raw, dtype=pl.Float64),
            "real": pl.Series(real, dtype=pl.Boolean),
            **{
                name: pl.Series(features.get(name, np.zeros(raw.size)), dtype=pl.Float64)
                for name in FEATURES[1:]
            },
        }
    )


def outcome_features(outcomes: pl.DataFrame) -> dict[str, np.ndarray]:
    """The evidence features of ``outcomes`` (``calibration_outcomes``), a column per name."""
    columns = raw_only(outcomes.get_column("raw").to_numpy())
    for name in FEATURES[1:]:
        if name in outcomes.columns:
            columns[name] = outcomes.get_column(name).to_numpy()
    return columns


def _raw(detection: Mapping[str, Any]) -> float:
    raw = detection.get("raw_score")
    return float(detection["score"] if raw is None else raw)


RAW_METHODS = ("isotonic", "sigmoid")
"""The methods that map the raw score alone (``fit_score_map``)."""
SIGMOID_KNOTS = 101
"""Points a fitted sigmoid is sampled at for the file (between 0 and 1, the scores' range)."""


def smoothed_targets(real: np.ndarray) -> np.ndarray:
    """Platt's targets: (N+ + 1) / (N+ + 2) for a real detection and 1 / (N- + 2) for a false
    one, the outcomes seen through a uniform prior (Platt, "Probabilistic outputs for support
    vector machines", 1999): a kind with no false positive in the backtest is not certain to
    be right, and one with few gets no probability of exactly 0 or 1."""
    positives = int(real.sum())
    negatives = real.size - positives
    return np.where(real, (positives + 1) / (positives + 2), 1 / (negatives + 2))


LOGISTIC_C = 1.0
"""Inverse strength of the logistic fit's L2 penalty on the standardised features: with a few
dozen detections of a kind, the weights stay moderate and a feature seen in only a handful of
them cannot claim certainty."""


def fit_evidence_models(
    features: Mapping[str, np.ndarray], real: np.ndarray, kinds: np.ndarray
) -> dict[str, EvidenceModel]:
    """Per kind, a logistic model of ``real`` on the detections' evidence ``features``, all
    kinds fitted at once: the features' weights are shared, each kind has its own intercept
    (a one-hot column per kind, penalised like the rest, so a kind with few detections leans
    on the others). Fitted to Platt's smoothed targets over all the detections (each once as
    real with weight t and once as false with weight 1 - t). Every evidence feature is oriented so
    that more is stronger evidence: one whose weight comes out negative (more evidence reading
    as less likely, a quirk of the sample) is dropped and the model refitted, as is one
    constant over the detections. Deterministic: the same outcomes give the same models."""
    if real.size == 0:
        raise ValueError("no detections to fit a calibration on")
    names = sorted({str(k) for k in kinds})
    targets = smoothed_targets(real)
    onehot = {kind: (kinds == kind).astype(float) for kind in names}
    columns = {**{n: np.asarray(features[n], dtype=float) for n in FEATURES}, **onehot}
    used = [n for n in FEATURES if np.ptp(columns[n]) > 0]
    kind_columns = [k for k in names if np.ptp(onehot[k]) > 0]
    labels = np.concatenate([np.ones(real.size), np.zeros(real.size)])
    weights = np.concatenate([targets, 1 - targets])
    while True:
        fitted_on = used + kind_columns
        if not fitted_on:
            share = float(targets.mean())
            weight, intercept, offsets = {}, float(np.log(share / (1 - share))), {}
            break
        matrix = np.column_stack([columns[n] for n in fitted_on])
        # Standardised, so that the penalty weighs every feature alike whatever its units;
        # the file holds the weights of the features as they are.
        mean, scale = matrix.mean(axis=0), matrix.std(axis=0)
        model = LogisticRegression(C=LOGISTIC_C).fit(
            np.concatenate([(matrix - mean) / scale] * 2), labels, sample_weight=weights
        )
        coef = model.coef_[0] / scale
        evidence = coef[: len(used)]
        if (evidence >= 0).all():
            intercept = float(model.intercept_[0] - (coef * mean).sum())
            weight = {n: round(float(w), 6) for n, w in zip(used, evidence, strict=True)}
            offsets = dict(zip(kind_columns, coef[len(used) :].tolist(), strict=True))
            break
        used = [n for n, w in zip(used, evidence, strict=True) if w >= 0]
    return {
        kind: EvidenceModel(
            round(intercept + offsets.get(kind, 0.0), 6),
            {n: w for n, w in weight.items() if w > 0},
            int(real[kinds == kind].sum()),
            int((~real[kinds == kind]).sum()),
        )
        for kind in names
    }


def fit_score_map(raw: np.ndarray, real: np.ndarray, method: str = "isotonic") -> ScoreMap:
    """One kind's map from its detections' raw scores and outcomes. ``isotonic``: scikit-learn's
    isotonic regression (non-decreasing by construction; flat where the raw score tells the
    outcomes apart no better than chance). ``sigmoid``: Platt's logistic fit, for few
    detections; one that would fall as the raw score rises is replaced by its flat form, the
    kind's smoothed share of real detections (a calibration never ranks surer evidence lower)."""
    if method not in RAW_METHODS:
        known = ", ".join(RAW_METHODS)
        raise ValueError(f"unknown calibration method {method!r} for a raw score (known: {known})")
    if raw.size == 0:
        raise ValueError("no detections to fit a calibration on")
    targets = smoothed_targets(real)
    positives = int(real.sum())
    negatives = int(real.size - positives)
    if method == "isotonic":
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, targets)
        knots = tuple(map(float, iso.X_thresholds_))
        return ScoreMap(method, knots, tuple(map(float, iso.y_thresholds_)), positives, negatives)
    grid = np.linspace(min(0.0, raw.min()), max(1.0, raw.max()), SIGMOID_KNOTS)
    # Each detection once as real with weight t and once as false with weight 1 - t: the
    # logistic fit to Platt's soft targets.
    features = np.concatenate([raw, raw]).reshape(-1, 1)
    labels = np.concatenate([np.ones(raw.size), np.zeros(raw.size)])
    weights = np.concatenate([targets, 1 - targets])
    model = LogisticRegression(C=1e6).fit(features, labels, sample_weight=weights)
    if model.coef_[0][0] > 0:
        probability = model.predict_proba(grid.reshape(-1, 1))[:, 1]
    else:
        probability = np.full(grid.size, targets.mean())
    return ScoreMap(
        method, tuple(map(float, grid)), tuple(map(float, probability)), positives, negatives
    )


def fit_calibration(
    outcomes: pl.DataFrame,
    method: str = "logistic",
    provenance: Mapping[str, Any] | None = None,
) -> Calibration:
    """A calibration fitted on ``outcomes`` (``calibration_outcomes``): a map per kind that has
    detections (``logistic``: a model of the evidence features; ``isotonic``, ``sigmoid``: a
    table of the raw score); the kinds with none keep their raw scores."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r} (known: {', '.join(METHODS)})")
    ordered = outcomes.sort(outcomes.columns, maintain_order=True)
    maps: dict[str, KindMap] = {}
    if method == "logistic" and not ordered.is_empty():
        real = ordered.get_column("real").to_numpy()
        kinds = ordered.get_column("kind").to_numpy()
        maps.update(fit_evidence_models(outcome_features(ordered), real, kinds))
    for (kind,), part in ordered.group_by("kind", maintain_order=True):
        if method != "logistic":
            real = part.get_column("real").to_numpy()
            maps[str(kind)] = fit_score_map(part.get_column("raw").to_numpy(), real, method)
    return Calibration(dict(sorted(maps.items())), dict(provenance or {}))


RELIABILITY_BINS = 10


def expected_calibration_error(
    probability: np.ndarray, real: np.ndarray, bins: int = RELIABILITY_BINS
) -> float:
    """The detections binned by probability (``bins`` equal widths): the mean over detections
    of |mean probability - share real| of their bin."""
    which = np.minimum((probability * bins).astype(int), bins - 1)
    said = np.bincount(which, weights=probability, minlength=bins)
    seen = np.bincount(which, weights=real.astype(float), minlength=bins)
    return float(np.abs(said - seen).sum() / probability.size)


def roc_auc(probability: np.ndarray, real: np.ndarray) -> float | None:
    """How well ``probability`` ranks real detections above false ones (ROC AUC: the chance
    that a real one scores above a false one, ties counting half); None without both."""
    if real.all() or not real.any():
        return None
    return float(roc_auc_score(real, probability))


def reliability(calibration: Calibration, outcomes: pl.DataFrame) -> pl.DataFrame:
    """How well ``calibration`` predicts ``outcomes``, per kind and over ``all``: detections,
    real ones, Brier score and expected calibration error of the calibrated score, and of the
    raw score read as a probability (``*_raw``) for comparison (lower is better), and the ROC
    AUC between real and false detections of each (higher is better; null without both)."""
    probability = calibration.probabilities(
        outcomes.get_column("kind").to_numpy(),
        outcomes.get_column("raw").to_numpy(),
        outcome_features(outcomes),
    )
    scored = outcomes.with_columns(pl.Series("probability", probability, dtype=pl.Float64))
    kinds = sorted(scored.get_column("kind").unique())
    parts = [(kind, scored.filter(pl.col("kind") == kind)) for kind in kinds]
    rows = []
    for kind, part in [*parts, ("all", scored)]:
        real = part.get_column("real").to_numpy()
        raw = part.get_column("raw").to_numpy()
        calibrated = part.get_column("probability").to_numpy()
        rows.append(
            {
                "kind": kind,
                "detections": part.height,
                "real": int(real.sum()),
                "brier": brier_score_loss(real, calibrated, pos_label=True),
                "brier_raw": brier_score_loss(real, raw, pos_label=True),
                "ece": expected_calibration_error(calibrated, real),
                "ece_raw": expected_calibration_error(raw, real),
                "auc": roc_auc(calibrated, real),
                "auc_raw": roc_auc(raw, real),
            }
        )
    return pl.DataFrame(rows, schema_overrides={"auc": pl.Float64, "auc_raw": pl.Float64})


def held_out_check(
    outcomes: pl.DataFrame, held_out: Iterable[str], method: str = "logistic"
) -> pl.DataFrame:
    """Fit on the recordings not in ``held_out`` and measure ``reliability`` on those in it
    (names of recordings); ValueError when either side has no detection."""
    names = list(held_out)
    checked = outcomes.filter(pl.col("recording").is_in(names))
    fitted_on = outcomes.filter(~pl.col("recording").is_in(names))
    if checked.is_empty() or fitted_on.is_empty():
        raise ValueError("the held-out check needs detections on both sides of the split")
    return reliability(fit_calibration(fitted_on, method), checked)
