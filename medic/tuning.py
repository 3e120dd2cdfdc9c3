"""Parameter sweeps through backtests, for notebooks and scripts.

A sweep replays every recording once per point of a parameter grid through the same
``backtest_recording`` that ``medic backtest`` uses, and returns one row per point with the
scores, overall and for the detection kind being tuned. The chosen point is written back as a
``medic.toml`` fragment (``[detectors.<name>]``) that ``--config`` accepts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import tomli_w

from medic.backtest import BacktestReport, backtest_recording
from medic.recording import Recording, find_recordings, read_recording


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
