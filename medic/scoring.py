"""The spec's reference scoring rules (docs/recording-format.md, "Scoring").

1. De-duplicate: of detections with the same ``job_id`` and ``kind`` within 600 s of the
   first, only the first counts (the next one after that window starts a new group).
2. A label is detected by the first de-duplicated detection of its job whose
   ``detected_at`` lies in ``[onset - 10 s, onset + H(kind)]``; the kind need not match.
3. Latency ``max(0, detected_at - onset)``; kind and attribution accuracy over detected labels.
4. A de-duplicated detection outside every window of its job's labels is a false positive.

The rules apply to the detections that act: the ``confirmed`` tier (``tier`` null, in files
written before tiers, is confirmed). A ``suspect`` (silence or slowness alone, which the
default rules only notify) is no detection in these rules: suspects are de-duplicated the
same way among themselves and counted apart (``suspects``, and ``false_suspects`` outside
every window of their job's labels), so precision, recall and latency mean what the spec says
of the detections medic acts on, and a suspect later confirmed is scored at its confirmation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from medic.schema import KIND_HORIZONS_S, SUSPECT
from medic.timeutil import US

DEDUP_WINDOW_US = 600 * US
EARLY_US = 10 * US
HORIZON_US = {kind: round(seconds * US) for kind, seconds in KIND_HORIZONS_S.items()}


@dataclass(frozen=True)
class LabelOutcome:
    """How one label fared."""

    incident_id: str
    job_id: str
    kind: str
    onset: int
    detected: bool
    latency_s: float | None = None
    detected_kind: str | None = None
    kind_correct: bool | None = None
    attribution_correct: bool | None = None
    culprits: tuple[str, ...] = ()
    expected_culprits: tuple[str, ...] = ()
    detected_at: int | None = None
    """The matching detection's time and detector (with the job and the detected kind: its id)."""
    detector: str | None = None


@dataclass
class Score:
    """Counts and outcomes for one recording, or the sum of several (``merge``)."""

    labels: int = 0
    detected: int = 0
    detections: int = 0
    matched: int = 0
    latencies_s: list[float] = field(default_factory=list)
    kind_correct: int = 0
    attribution_correct: int = 0
    outcomes: list[LabelOutcome] = field(default_factory=list)
    matched_rows: list[dict[str, Any]] = field(default_factory=list)
    false_positive_rows: list[dict[str, Any]] = field(default_factory=list)
    detections_by_kind: Counter[str] = field(default_factory=Counter)
    suspects: int = 0
    """De-duplicated suspect detections (not scored; see the module docstring)."""
    false_suspects: int = 0
    """... of which outside every window of their job's labels."""
    suspect_rows: list[dict[str, Any]] = field(default_factory=list)
    """The de-duplicated suspects inside a window of their job's labels (a calibration fits
    on both tiers: the suspects are where a healthy job's look-alikes are)."""
    false_suspect_rows: list[dict[str, Any]] = field(default_factory=list)
    """... and those outside every window."""

    @property
    def false_positives(self) -> int:
        return self.detections - self.matched

    @property
    def recall(self) -> float | None:
        return self.detected / self.labels if self.labels else None

    @property
    def precision(self) -> float | None:
        return self.matched / self.detections if self.detections else None

    @property
    def kind_accuracy(self) -> float | None:
        return self.kind_correct / self.detected if self.detected else None

    @property
    def attribution_accuracy(self) -> float | None:
        return self.attribution_correct / self.detected if self.detected else None

    def latency(self, percentile: float) -> float | None:
        if not self.latencies_s:
            return None
        return float(np.percentile(self.latencies_s, percentile))

    def merge(self, other: Score) -> Score:
        return Score(
            labels=self.labels + other.labels,
            detected=self.detected + other.detected,
            detections=self.detections + other.detections,
            matched=self.matched + other.matched,
            latencies_s=self.latencies_s + other.latencies_s,
            kind_correct=self.kind_correct + other.kind_correct,
            attribution_correct=self.attribution_correct + other.attribution_correct,
            outcomes=self.outcomes + other.outcomes,
            matched_rows=self.matched_rows + other.matched_rows,
            false_positive_rows=self.false_positive_rows + other.false_positive_rows,
            detections_by_kind=self.detections_by_kind + other.detections_by_kind,
            suspects=self.suspects + other.suspects,
            false_suspects=self.false_suspects + other.false_suspects,
            suspect_rows=self.suspect_rows + other.suspect_rows,
            false_suspect_rows=self.false_suspect_rows + other.false_suspect_rows,
        )

    def summary(self) -> dict[str, Any]:
        """The figures of the score table, as plain JSON values."""
        return {
            "labels": self.labels,
            "detected": self.detected,
            "detections": self.detections,
            "recall": _round(self.recall),
            "precision": _round(self.precision),
            "false_positives": self.false_positives,
            "latency_s": {
                "p50": _round(self.latency(50)),
                "p90": _round(self.latency(90)),
                "max": _round(self.latency(100)),
            },
            "kind_accuracy": _round(self.kind_accuracy),
            "attribution_accuracy": _round(self.attribution_accuracy),
            "suspects": self.suspects,
            "false_suspects": self.false_suspects,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with timestamps as integer microseconds."""
    columns = {}
    for name in table.schema.names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        columns[name] = column.to_pylist()
    return [
        dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)
    ]


def deduplicate(detections: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the first detection of each (job_id, kind) group per 600 s window of the first."""
    ordered = sorted(detections, key=lambda d: d["detected_at"])
    first_of_group: dict[tuple[Any, str], int] = {}
    kept = []
    for det in ordered:
        key = (det["job_id"], det["kind"])
        first = first_of_group.get(key)
        if first is not None and det["detected_at"] - first <= DEDUP_WINDOW_US:
            continue
        first_of_group[key] = det["detected_at"]
        kept.append(det)
    return kept


def _window(label: dict[str, Any]) -> tuple[int, int]:
    onset = int(label["onset"])
    return onset - EARLY_US, onset + HORIZON_US[label["kind"]]


def is_suspect(detection: dict[str, Any]) -> bool:
    """Whether a detections row is a suspect (``tier``; absent or null: confirmed)."""
    return detection.get("tier") == SUSPECT


def score(detections: pa.Table, labels: pa.Table | None) -> Score:
    """Score one recording's confirmed detections against its labels (none: every detection is
    false), and count its suspects apart."""
    rows = _rows(detections)
    dets = deduplicate(d for d in rows if not is_suspect(d))
    suspects = deduplicate(d for d in rows if is_suspect(d))
    label_rows = _rows(labels) if labels is not None else []
    result = Score(
        labels=len(label_rows),
        detections=len(dets),
        detections_by_kind=Counter(d["kind"] for d in dets),
        suspects=len(suspects),
    )
    by_job: dict[Any, list[dict[str, Any]]] = {}
    for det in dets:
        by_job.setdefault(det["job_id"], []).append(det)
    for label in sorted(label_rows, key=lambda row: (row["onset"], row["incident_id"])):
        result.outcomes.append(_match(label, by_job.get(label["job_id"], []), result))
    windows: dict[Any, list[tuple[int, int]]] = {}
    for label in label_rows:
        windows.setdefault(label["job_id"], []).append(_window(label))
    for det in dets:
        spans = windows.get(det["job_id"], [])
        if any(lo <= det["detected_at"] <= hi for lo, hi in spans):
            result.matched += 1
            result.matched_rows.append(det)
        else:
            result.false_positive_rows.append(det)
    for det in suspects:
        spans = windows.get(det["job_id"], [])
        if any(lo <= det["detected_at"] <= hi for lo, hi in spans):
            result.suspect_rows.append(det)
        else:
            result.false_suspect_rows.append(det)
    result.false_suspects = len(result.false_suspect_rows)
    return result


def _match(label: dict[str, Any], job_dets: list[dict[str, Any]], result: Score) -> LabelOutcome:
    lo, hi = _window(label)
    expected = tuple(sorted(label["culprit_nodes"] or ()))
    base = {
        "incident_id": label["incident_id"],
        "job_id": label["job_id"],
        "kind": label["kind"],
        "onset": int(label["onset"]),
        "expected_culprits": expected,
    }
    hit = next((d for d in job_dets if lo <= d["detected_at"] <= hi), None)
    if hit is None:
        return LabelOutcome(detected=False, **base)
    latency = max(0, hit["detected_at"] - int(label["onset"])) / US
    culprits = tuple(sorted(hit["culprits"] or ()))
    kind_ok = hit["kind"] == label["kind"]
    attribution_ok = set(culprits) == set(expected)
    result.detected += 1
    result.latencies_s.append(latency)
    result.kind_correct += kind_ok
    result.attribution_correct += attribution_ok
    return LabelOutcome(
        detected=True,
        latency_s=latency,
        detected_kind=hit["kind"],
        kind_correct=kind_ok,
        attribution_correct=attribution_ok,
        culprits=culprits,
        detected_at=int(hit["detected_at"]),
        detector=str(hit["detector"]),
        **base,
    )
