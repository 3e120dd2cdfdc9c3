"""Calibrated scores: what a detection's score means as a probability that it is real.

Detectors score their evidence (``medic.detectors.attribution``, ``medic.detectors.online``):
graded and monotone, but "0.8" is a statement about signs, not about outcomes. A calibration
holds, per detection kind, a map from that raw score to the share of detections of the kind
which turned out to be real incidents in a labelled backtest (matched a label's window, by the
scoring rules), fitted by ``medic.tuning.fit_calibration`` (``medic calibrate``). The pipeline
replaces each detection's ``score`` by its kind's map of it and keeps the raw value as
``raw_score``, so the rules' ``min_score`` reads "at least this likely to be real".

A kind's map is either a logistic model of the detection's evidence features
(``method = "logistic"``, what ``medic calibrate`` fits by default: ``medic.evidence_features``
names the features, each oriented so that more is stronger evidence, and every weight is
>= 0, so stronger evidence never reads as less likely), or a non-decreasing piecewise-linear
table of the raw score alone, ``raw`` knots to ``probability``, applied
with ``numpy.interp`` and held flat beyond its end knots: reading one needs nothing of how it
was fitted (isotonic regression, or a Platt sigmoid sampled at knots). A kind the calibration
does not name keeps its raw score. A detection whose only line evidence is text no signature
matched (the second layer's ``unmatched:<family>`` signs) reads ``<kind>:unmatched``'s map where
the calibration has one: such text is worth less than a cited signature. The file is TOML::

    format = "medic-calibration/1"
    [provenance]          # what it was fitted on: recordings, seeds, date, commit, check
    [kinds.hang]
    method = "logistic"
    intercept = -2.1
    weights = { raw = 1.3, silence = 0.9, positive = 2.2 }
    true = 122            # the detections it was fitted on
    false = 14
    [kinds.straggler]
    method = "isotonic"
    raw = [0.5, 0.62, 0.66, 1.0]
    probability = [0.43, 0.43, 0.91, 0.99]
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import tomli_w

from medic.config import ConfigError
from medic.detectors.base import detection_id
from medic.evidence_features import FEATURES, Features, confirmed_feature, raw_only
from medic.schema import DETECTION_KINDS, DETECTIONS_WRITTEN, conform

FORMAT = "medic-calibration/1"
DEFAULT_FILE = "default_calibration.toml"
"""The calibration shipped with medic (in this package), used unless the config names one."""
METHODS = ("logistic", "isotonic", "sigmoid")
"""How a map was fitted: a logistic model of the evidence features, or a table of the raw
score (isotonic regression, or Platt's sigmoid sampled at knots)."""
UNMATCHED = ":unmatched"
"""Suffix of the map that a kind's detections resting only on unmatched text read."""


class CalibrationError(ConfigError):
    """A calibration file cannot be read or is malformed; the message names the file and key."""


@dataclass(frozen=True)
class ScoreMap:
    """One kind's map from raw score to the probability that a detection is real."""

    method: str
    raw: tuple[float, ...]
    probability: tuple[float, ...]
    true: int = 0
    false: int = 0
    """How many of the detections it was fitted on were real, and how many false positives."""

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(np.interp(scores, self.raw, self.probability), dtype=float)

    def read(self, features: Features) -> np.ndarray:
        """The map of the detections' raw scores (``features["raw"]``)."""
        return self(np.asarray(features["raw"], dtype=float))


@dataclass(frozen=True)
class EvidenceModel:
    """One kind's logistic model: the probability that a detection is real is
    ``1 / (1 + exp(-(intercept + sum of weight * feature)))`` over its evidence features."""

    intercept: float
    weights: Mapping[str, float]
    true: int = 0
    false: int = 0
    method: str = "logistic"

    def read(self, features: Features) -> np.ndarray:
        """The probabilities of the detections whose features are ``features`` (columns)."""
        logit = np.full(np.asarray(features["raw"]).shape, self.intercept, dtype=float)
        for name, weight in self.weights.items():
            logit = logit + weight * np.asarray(features[name], dtype=float)
        return np.asarray(1.0 / (1.0 + np.exp(-logit)), dtype=float)

    def table(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "intercept": self.intercept,
            "weights": dict(self.weights),
            "true": self.true,
            "false": self.false,
        }


KindMap = ScoreMap | EvidenceModel


@dataclass(frozen=True)
class Calibration:
    """Per-kind score maps and where they came from."""

    maps: Mapping[str, KindMap]
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def calibrated(
        self,
        kind: str,
        score: float,
        unmatched: bool = False,
        features: Mapping[str, float] | None = None,
    ) -> float:
        """A detection of ``kind`` with raw ``score`` and evidence ``features`` (the raw score
        alone when None) as a probability (``score`` unchanged without a map); ``unmatched``:
        its only line evidence is text no signature matched."""
        found = self.maps.get(kind + UNMATCHED) if unmatched else None
        found = found or self.maps.get(kind)
        if found is None:
            return score
        columns = raw_only(np.asarray([score], dtype=float))
        for name, value in (features or {}).items():
            columns[name] = np.asarray([value], dtype=float)
        return float(found.read(columns)[0])

    def probabilities(
        self, kinds: np.ndarray, raw: np.ndarray, features: Features | None = None
    ) -> np.ndarray:
        """The calibrated scores of detections of ``kinds`` with ``raw`` scores and evidence
        ``features`` (arrays; the raw scores alone when None)."""
        scores = np.asarray(raw, dtype=float).copy()
        columns = raw_only(scores) if features is None else features
        for kind, score_map in self.maps.items():
            chosen = kinds == kind
            if chosen.any():
                part = {name: np.asarray(columns[name])[chosen] for name in FEATURES}
                scores[chosen] = score_map.read(part)
        return scores

    def rescore(self, detections: pa.Table, features: pa.Table | None = None) -> pa.Table:
        """Cached detections (``detections.parquet``) with ``score`` recomputed by this
        calibration from their raw scores and evidence ``features`` (a backtest's
        ``features.parquet``; the raw scores alone for detections it lacks), without a
        replay: ``raw_score`` where the table has it, else ``score`` (a table written before
        calibration holds the raw value there), which is then kept as ``raw_score``."""
        raw = raw_scores(detections)
        columns = aligned_features(detections, raw, features)
        kinds = detections.column("kind").to_numpy(zero_copy_only=False)
        scores = self.probabilities(kinds, raw, columns)
        where = detections.schema.get_field_index("score")
        table = detections.set_column(
            where, detections.schema.field(where), pa.array(scores, pa.float64())
        )
        if "raw_score" in table.column_names:
            table = table.drop_columns(["raw_score"])
        table = table.append_column(DETECTIONS_WRITTEN.field("raw_score"), pa.array(raw))
        return conform(table, DETECTIONS_WRITTEN)  # the tier kept (null when unknown)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "provenance": dict(self.provenance),
            "kinds": {kind: _table(m) for kind, m in sorted(self.maps.items())},
        }

    def write(self, path: Path | str) -> Path:
        target = Path(path)
        target.write_text(tomli_w.dumps(self.to_dict()))
        return target


def _table(kind_map: KindMap) -> dict[str, Any]:
    if isinstance(kind_map, EvidenceModel):
        return kind_map.table()
    return {
        "method": kind_map.method,
        "raw": list(kind_map.raw),
        "probability": list(kind_map.probability),
        "true": kind_map.true,
        "false": kind_map.false,
    }


def aligned_features(
    detections: pa.Table, raw: np.ndarray, features: pa.Table | None
) -> dict[str, np.ndarray]:
    """The evidence features of each row of ``detections`` (columns, in its order), from
    ``features`` (rows by ``detection_id``); a row it lacks has its raw score alone."""
    columns = raw_only(raw)
    if "tier" in detections.column_names:
        tiers = detections.column("tier").to_pylist()
        columns["confirmed"] = np.array([confirmed_feature(t) for t in tiers], dtype=float)
    if features is None or features.num_rows == 0 or detections.num_rows == 0:
        return columns
    times = detections.column("detected_at").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    ids = [
        detection_id(int(t), job, kind, detector)
        for t, job, kind, detector in zip(
            times.to_pylist(),
            detections.column("job_id").to_pylist(),
            detections.column("kind").to_pylist(),
            detections.column("detector").to_pylist(),
            strict=True,
        )
    ]
    where = {d: i for i, d in enumerate(features.column("detection_id").to_pylist())}
    rows = np.array([where.get(d, -1) for d in ids])
    found = rows >= 0
    for name in FEATURES:
        if name == "raw" or name not in features.column_names:
            continue
        values = np.asarray(features.column(name).to_numpy(zero_copy_only=False), dtype=float)
        columns[name] = np.where(found, values[np.maximum(rows, 0)], columns[name])
    return columns


def raw_scores(detections: pa.Table) -> np.ndarray:
    """Each detection's raw (evidence) score: ``raw_score``, or ``score`` where it is null or
    the table has no such column (written before calibration)."""
    score = np.asarray(detections.column("score").to_numpy(zero_copy_only=False), dtype=float)
    if "raw_score" not in detections.column_names:
        return score
    raw = np.asarray(detections.column("raw_score").to_numpy(zero_copy_only=False), dtype=float)
    return np.asarray(np.where(np.isnan(raw), score, raw), dtype=float)


def read_calibration(path: Path | str) -> Calibration:
    """The calibration in a file ``medic calibrate`` wrote; CalibrationError (one line) when it
    cannot be read or is not one."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as exc:
        raise CalibrationError(f"{file}: cannot read calibration ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise CalibrationError(f"{file}: not a calibration file (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as exc:
        raise CalibrationError(f"{file}: not a calibration file (invalid TOML: {exc})") from None
    return parse_calibration(data, str(file))


def default_calibration() -> Calibration:
    """The calibration shipped with medic (``medic/default_calibration.toml``)."""
    shipped = resources.files("medic").joinpath(DEFAULT_FILE)
    return parse_calibration(tomllib.loads(shipped.read_text()), DEFAULT_FILE)


def calibration_of(calibrate: bool, file: str) -> Calibration | None:
    """What ``[pipeline] calibrate`` and ``calibration`` ask for: None (raw scores), the file
    named, or the shipped default when the name is empty."""
    if not calibrate:
        return None
    return read_calibration(file) if file else default_calibration()


def parse_calibration(data: Mapping[str, Any], where: str) -> Calibration:
    """A calibration from a parsed file; CalibrationError names the first problem."""
    if data.get("format") != FORMAT:
        raise CalibrationError(
            f"{where}: not a calibration file (format {data.get('format')!r}, expected {FORMAT!r})"
        )
    kinds = data.get("kinds")
    if not isinstance(kinds, Mapping) or not kinds:
        raise CalibrationError(f"{where}: no [kinds.<kind>] table")
    provenance = data.get("provenance", {})
    if not isinstance(provenance, Mapping):
        raise CalibrationError(f"{where}: 'provenance' must be a table")
    maps = {kind: _score_map(table, f"{where}: kinds.{kind}") for kind, table in kinds.items()}
    unknown = sorted(set(maps) - {*DETECTION_KINDS, *(k + UNMATCHED for k in DETECTION_KINDS)})
    if unknown:
        known = ", ".join(DETECTION_KINDS)
        raise CalibrationError(f"{where}: unknown kind '{unknown[0]}' (known: {known})")
    return Calibration(maps, dict(provenance))


def _score_map(table: Any, where: str) -> KindMap:
    if not isinstance(table, Mapping):
        raise CalibrationError(f"{where} must be a table")
    method = table.get("method")
    if method not in METHODS:
        raise CalibrationError(f"{where}.method must be one of {', '.join(METHODS)}: {method!r}")
    counts = [table.get(name, 0) for name in ("true", "false")]
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
        raise CalibrationError(f"{where}: true and false must be counts (whole numbers >= 0)")
    if method == "logistic":
        return _evidence_model(table, where, counts[0], counts[1])
    raw = _numbers(table.get("raw"), f"{where}.raw")
    probability = _numbers(table.get("probability"), f"{where}.probability")
    if len(raw) != len(probability):
        raise CalibrationError(
            f"{where}: raw has {len(raw)} knots but probability {len(probability)}"
        )
    if any(b <= a for a, b in itertools.pairwise(raw)):
        raise CalibrationError(f"{where}.raw must increase from knot to knot")
    if any(not 0.0 <= p <= 1.0 for p in probability):
        raise CalibrationError(f"{where}.probability must lie in [0, 1]")
    if any(b < a for a, b in itertools.pairwise(probability)):
        raise CalibrationError(
            f"{where}.probability must not decrease: a surer raw score never means less"
        )
    return ScoreMap(str(method), raw, probability, counts[0], counts[1])


def _evidence_model(table: Mapping[str, Any], where: str, true: int, false: int) -> EvidenceModel:
    intercept = table.get("intercept")
    if not isinstance(intercept, int | float) or isinstance(intercept, bool):
        raise CalibrationError(f"{where}.intercept must be a number")
    if not math.isfinite(intercept):
        raise CalibrationError(f"{where}.intercept must be a finite number")
    weights = table.get("weights", {})
    if not isinstance(weights, Mapping):
        raise CalibrationError(f"{where}.weights must be a table of feature = weight")
    unknown = sorted(set(weights) - set(FEATURES))
    if unknown:
        raise CalibrationError(
            f"{where}.weights: unknown feature '{unknown[0]}' (known: {', '.join(FEATURES)})"
        )
    values = _numbers(list(weights.values()), f"{where}.weights") if weights else ()
    if any(v < 0 for v in values):
        raise CalibrationError(
            f"{where}.weights must be >= 0: stronger evidence never means less likely"
        )
    return EvidenceModel(float(intercept), dict(zip(weights, values, strict=True)), true, false)


def _numbers(value: Any, where: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise CalibrationError(f"{where} must be a non-empty list of numbers")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
        raise CalibrationError(f"{where} must be a non-empty list of numbers")
    numbers = tuple(float(v) for v in value)
    if not all(math.isfinite(v) for v in numbers):
        raise CalibrationError(f"{where} must hold finite numbers")
    return numbers
