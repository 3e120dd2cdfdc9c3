"""Parameter sweeps through backtests, for notebooks and scripts.

A sweep replays every recording once per point of a parameter grid through the same
``backtest_recording`` that ``medic backtest`` uses, and returns one row per point with the
scores, overall and for the detection kind being tuned. The chosen point is written back as a
``medic.toml`` fragment (``[detectors.<name>]``) that ``--config`` accepts.

``fit_min_score`` is the offline fit of the other knob an operator turns: the ``min_score`` of
a rules route, from the scores of a backtest's true and false detections (scikit-learn's
precision-recall curve). ``rethreshold`` scores a backtest's cached detections again at other
score bars, without replaying: every detector's score is in [0, 1] and computed apart from its
alarm (a hang's is 0.5 when the silence alone reaches its threshold, 0.8 when the GPUs
corroborate), so a bar above the alarm's keeps only the surer detections. A bar below it needs
the alarm's own parameters swept (``sweep``), which replays.
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
from sklearn.metrics import precision_recall_curve

from medic.backtest import BacktestReport, backtest_recording
from medic.recording import Recording, find_recordings, read_recording
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
    """One row per grid point: the parameters, then recall, precision, false positives,
    latency p50/p90 and attribution accuracy for the labels of ``kind`` (``detector`` when
    None), and overall precision and false positives (what the change costs elsewhere)."""
    kind = kind or detector
    names = list(grid)
    rows = []
    for point in itertools.product(*(grid[name] for name in names)):
        values = dict(zip(names, point, strict=True))
        settings = with_detector_settings(base or {}, detector, values)
        report = BacktestReport([backtest_recording(r, settings) for r in recordings])
        part = report.by_kind().get(kind, {})
        overall = report.overall.summary()
        rows.append(
            {
                **values,
                "recall": part.get("recall"),
                "precision": part.get("precision"),
                "false_positives": part.get("false_positives", 0),
                "latency_p50_s": part.get("latency_s", {}).get("p50"),
                "latency_p90_s": part.get("latency_s", {}).get("p90"),
                "attribution_accuracy": part.get("attribution_accuracy"),
                "overall_precision": overall["precision"],
                "overall_false_positives": overall["false_positives"],
            }
        )
    return pl.DataFrame(rows)


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
    report: BacktestReport, recordings: Sequence[Recording], min_score: Mapping[str, float]
) -> BacktestReport:
    """``report`` scored again as if every detection of kind ``k`` below ``min_score[k]`` had not
    been emitted (kinds not named keep theirs); ``recordings`` give the labels, by name."""
    labels = {r.path.name if r.path else r.name: r.labels for r in recordings}
    results = []
    for result in report.results:
        detections = pl.from_arrow(result.detections)
        assert isinstance(detections, pl.DataFrame)
        bar = pl.col("kind").replace_strict(dict(min_score), default=0.0, return_dtype=pl.Float64)
        kept = detections.filter(pl.col("score") >= bar).to_arrow()
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
