"""``medic sweep``: detector settings searched over recordings, every point scored.

A sweep spec is a small TOML file (docs/sweeps.md):

    search = "grid"          # or "random"
    samples = 20             # random: how many points
    seed = 0                 # random: the points drawn (the same seed, the same points)
    kind = "hang"            # labels scored for recall and latency; all kinds when left out
    min_precision = 1.0      # the chosen point: overall precision at least this

    [detectors.hang]         # values laid over the base config's [detectors.hang]
    min_silence_s = [45, 60, 90]              # grid or random: these values
    gap_factor = { min = 2.0, max = 4.0 }     # random only: uniform in [min, max]
    gap_window = { min = 64, max = 512, log = true }   # integers when both bounds are

Every point replays every recording (``medic.backtest.Runner``: local processes or a Ray
cluster, the same table either way) and is scored by the spec's rules (``medic.scoring``)
into one row: the point's values as ``<detector>.<key>`` columns, then ``tuning.score_row``'s
columns. ``frontier`` marks the points no other point beats on overall precision, recall
and p50 latency together (the Pareto points). ``history_rows`` shapes the table for the
history's ``sweep_points`` table.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import tomli_w

from medic.backtest import BacktestReport, RecordingFailure, RecordingResult, Runner, Task
from medic.config import ConfigError
from medic.detectors.registry import DETECTORS, detector_configs
from medic.recording import RecordingError
from medic.schema import DETECTION_KINDS
from medic.tuning import score_row, with_detector_settings

SEARCHES = ("grid", "random")
Point = dict[str, dict[str, Any]]
"""A sweep point: ``{detector: {key: value}}``."""


@dataclass(frozen=True)
class SweepSpec:
    """What to search: the values of each ``detectors.<name>.<key>`` and how to draw points."""

    parameters: dict[str, dict[str, Any]]
    search: str = "grid"
    samples: int = 20
    seed: int = 0
    kind: str | None = None
    min_precision: float = 1.0
    source: str = field(default="", compare=False)

    def points_count(self) -> int:
        """How many points ``points`` gives."""
        if self.search == "random":
            return self.samples
        return math.prod(len(v) for table in self.parameters.values() for v in table.values())


def load_spec(path: Path | str) -> SweepSpec:
    """The sweep spec in the TOML file at ``path``; ConfigError (one line) when it is wrong."""
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text())
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read sweep spec ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: invalid TOML ({exc})") from None
    return parse_spec(raw, str(file))


def parse_spec(raw: Mapping[str, Any], where: str = "sweep spec") -> SweepSpec:
    known = {"search", "samples", "seed", "kind", "min_precision", "detectors"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key '{unknown[0]}' (known: {', '.join(sorted(known))})"
        )
    search = raw.get("search", "grid")
    if search not in SEARCHES:
        raise ConfigError(f"{where}: search must be one of {', '.join(SEARCHES)}, not {search!r}")
    kind = raw.get("kind")
    if kind is not None and kind not in DETECTION_KINDS:
        raise ConfigError(f"{where}: unknown kind {kind!r} (known: {', '.join(DETECTION_KINDS)})")
    detectors = raw.get("detectors")
    if not isinstance(detectors, dict) or not detectors:
        raise ConfigError(f"{where}: no [detectors.<name>] table of values to sweep")
    parameters: dict[str, dict[str, Any]] = {}
    for name, table in detectors.items():
        if name not in DETECTORS:
            raise ConfigError(f"{where}: unknown detector '{name}' (known: {', '.join(DETECTORS)})")
        if not isinstance(table, dict) or not table:
            raise ConfigError(f"{where}: [detectors.{name}] must list values to sweep")
        for key, values in table.items():
            _check_values(f"{where}: detectors.{name}.{key}", values, search)
        parameters[name] = dict(table)
    samples, seed, min_precision = (
        raw.get("samples", 20),
        raw.get("seed", 0),
        raw.get("min_precision", 1.0),
    )
    if not isinstance(samples, int) or samples < 1:
        raise ConfigError(f"{where}: samples must be a whole number of at least 1")
    if not isinstance(seed, int):
        raise ConfigError(f"{where}: seed must be a whole number")
    if not isinstance(min_precision, int | float) or not 0 <= min_precision <= 1:
        raise ConfigError(f"{where}: min_precision must be a number in [0, 1]")
    spec = SweepSpec(parameters, search, samples, seed, kind, float(min_precision), where)
    for point in points(spec):  # every value a detector accepts, checked before any replay
        try:
            detector_configs(point)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return spec


def _check_values(where: str, values: Any, search: str) -> None:
    if isinstance(values, list):
        if not values:
            raise ConfigError(f"{where}: no values")
        return
    if isinstance(values, dict) and search == "random":
        low, high = values.get("min"), values.get("max")
        if set(values) - {"min", "max", "log"} or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)
        ):
            raise ConfigError(f"{where}: a range is {{ min = N, max = N }} (and log = true)")
        if low > high or (values.get("log") and low <= 0):  # type: ignore[operator]
            raise ConfigError(f"{where}: needs 0 < min <= max (min <= max without log)")
        return
    what = "a list of values" if search == "grid" else "a list of values or { min, max }"
    raise ConfigError(f"{where}: must be {what}")


def points(spec: SweepSpec) -> list[Point]:
    """The points to score: every combination (grid), or ``samples`` draws (random, each
    value uniform over its list or range, from ``seed``: the same spec, the same points)."""
    names = [(det, key) for det, table in spec.parameters.items() for key in table]
    if spec.search == "grid":
        combos: Iterable[Sequence[Any]] = itertools.product(
            *(spec.parameters[det][key] for det, key in names)
        )
    else:
        rng = np.random.default_rng(spec.seed)
        combos = [
            [_draw(rng, spec.parameters[det][key]) for det, key in names]
            for _ in range(spec.samples)
        ]
    out = []
    for combo in combos:
        point: Point = {}
        for (det, key), value in zip(names, combo, strict=True):
            point.setdefault(det, {})[key] = value
        out.append(point)
    return out


def _draw(rng: np.random.Generator, values: Any) -> Any:
    if isinstance(values, list):
        return values[int(rng.integers(len(values)))]
    low, high = values["min"], values["max"]
    if values.get("log"):
        drawn = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        drawn = float(rng.uniform(low, high))
    if isinstance(low, int) and isinstance(high, int):
        return min(max(round(drawn), low), high)
    return drawn


def settings_at(base: Mapping[str, Any], point: Point) -> dict[str, Any]:
    """``base`` with each detector's values of ``point`` laid over its table."""
    settings = dict(base)
    for detector, values in point.items():
        settings = with_detector_settings(settings, detector, values)
    return settings


def columns(point: Point) -> dict[str, Any]:
    return {f"{det}.{key}": value for det, table in point.items() for key, value in table.items()}


def run_sweep(
    spec: SweepSpec,
    paths: Sequence[Path],
    runner: Runner,
    base: Mapping[str, Any] | None = None,
    on_result: Callable[[RecordingResult | RecordingFailure], None] | None = None,
) -> pl.DataFrame:
    """One row per point, in the order ``points`` gives them: ``point`` (its index), the
    values, the scores (``tuning.score_row``) and ``pareto``. Every recording must replay:
    one that cannot is a RecordingError."""
    drawn = points(spec)
    settings = [settings_at(base or {}, point) for point in drawn]
    tasks: list[Task] = [(path, s) for s in settings for path in paths]
    results: list[RecordingResult] = []
    for result in runner(tasks):
        if on_result is not None:
            on_result(result)
        if isinstance(result, RecordingFailure):
            raise RecordingError(f"{result.error} (a sweep needs every recording)")
        results.append(result)
    rows = []
    for index, point in enumerate(drawn):
        report = BacktestReport(results[index * len(paths) : (index + 1) * len(paths)])
        rows.append({"point": index, **columns(point), **score_row(report, spec.kind)})
    return with_frontier(pl.DataFrame(rows))


def with_frontier(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` with ``pareto``: true for the points no other point is at least as good as on
    overall precision, recall and p50 latency and better on one (precision without detections
    counts as 1, recall without labels as 0, latency without detections as endless)."""
    precision = table.get_column("overall_precision").fill_null(1.0).to_numpy()
    recall = table.get_column("recall").fill_null(0.0).to_numpy()
    latency = table.get_column("latency_p50_s").fill_null(math.inf).to_numpy()
    goods = np.stack([precision, recall, -latency], axis=1)
    at_least = (goods[:, None, :] >= goods[None, :, :]).all(axis=2)
    better = (goods[:, None, :] > goods[None, :, :]).any(axis=2)
    dominated = (at_least & better).any(axis=0)
    return table.with_columns(pl.Series("pareto", ~dominated, dtype=pl.Boolean))


def frontier(table: pl.DataFrame) -> pl.DataFrame:
    """The Pareto points, best recall first."""
    return table.filter(pl.col("pareto")).sort(
        ["recall", "overall_precision", "latency_p50_s"],
        descending=[True, True, False],
        nulls_last=True,
    )


def choose(table: pl.DataFrame, spec: SweepSpec) -> dict[str, Any]:
    """The point with the highest recall, then the lowest p50 latency, among those at
    ``spec.min_precision`` overall precision (``tuning.best``); ValueError when none is."""
    eligible = table.filter(pl.col("overall_precision").fill_null(1.0) >= spec.min_precision)
    if eligible.is_empty():
        raise ValueError(f"no point reaches overall precision {spec.min_precision}")
    return eligible.sort(
        ["recall", "latency_p50_s", "point"], descending=[True, False, False], nulls_last=True
    ).row(0, named=True)


def point_settings(row: Mapping[str, Any], spec: SweepSpec) -> Point:
    """The ``[detectors.*]`` values of a table row (``choose``'s, say)."""
    return {
        det: {key: _plain(row[f"{det}.{key}"]) for key in table}
        for det, table in spec.parameters.items()
    }


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def write_config(path: Path | str, point: Point) -> Path:
    """``[detectors.<name>]`` tables with the point's values, a file ``--config`` accepts."""
    target = Path(path)
    target.write_text(tomli_w.dumps({"detectors": point}))
    return target


def history_rows(
    table: pl.DataFrame, spec: SweepSpec, name: str, run_at: dt.datetime, recordings: int
) -> pa.Table:
    """The table as the history's ``sweep_points`` rows (docs/sweeps.md): the point's values
    as one JSON column, as they differ from one sweep to the next; the scores as they are."""
    settings = [
        json.dumps(point_settings(row, spec), sort_keys=True) for row in table.iter_rows(named=True)
    ]
    scores = [column for column in table.columns if "." not in column]
    return (
        table.select(scores)
        .with_columns(
            pl.lit(run_at, dtype=pl.Datetime("us", "UTC")).alias("run_at"),
            pl.lit(name).alias("sweep"),
            pl.Series("settings", settings, dtype=pl.String),
            pl.lit(spec.kind, dtype=pl.String).alias("kind"),
            pl.lit(recordings, dtype=pl.Int32).alias("recordings"),
        )
        .to_arrow()
    )
