"""What a calibration reads of a detection: a few numbers about its evidence.

A detector's own score grades its evidence on one axis; whether a detection is real also
depends on how the evidence stands apart from a healthy job's look-alikes. Each feature is
oriented so that more means stronger evidence, and each is read from what every detector
already reports (``Detection.evidence``, its ranks and culprits), with 0 where a detector does
not report it:

- ``raw``: the detector's own score, in [0, 1].
- ``silence``: how long the job has been silent, in doublings of its own usual step gap
  (``silence_s`` over ``gap_s``, the job's high step-gap quantile; ``UNKNOWN_GAP_S`` before the
  job has one), 0 to 8. A pause a few gaps long is what evaluations and saves look like.
- ``margin``: the silence past the detector's own bar, in doublings (``silence_s`` over
  ``threshold_s``), 0 to 4.
- ``slowdown``: a straggler's slowdown in doublings (``slowdown``), 0 to 3, and ``z``: how far
  outside its peers the slow one is (``z``, in tens of deviations, 0 to 2).
- ``positive``: 1 when something besides silence or slowness speaks: the GPUs corroborate
  (``corroborated``), a catalogue signature names the failure, or nodes or culprits are named.
- ``agree``: how many lines, ranks or nodes agree, in doublings (0 to 6).
- ``named``: 1 when a catalogue signature names the failure, 0 when the only text is the second
  layer's (``unmatched:<family>``) or there is none.

Three more read the job's own history of pauses (``medic.detectors.hang_rhythm``), which makes
a healthy job's recurring evaluation, save or data-loader stall expected: they say how little
of the silence that history explains, so each is at its strongest (nothing explained) where a
detector reports no history (a watchdog's line, a crash):

- ``novel``: the silence past the longest pause the job has had (``longest_pause_s``), in
  doublings, 0 to 4 (4 when it had none; 0 without a silence).
- ``unprecedented``: ``1 / (1 + n)``, ``n`` the job's earlier pauses at least as long as this
  silence (``like_pauses``): 1 for a silence the job never came back from, 0.5 after one such.
- ``off_rhythm``: 0 when the silence began at the step interval the job's earlier pauses came
  at (``on_rhythm``), 1 otherwise.

One reads what the job's GPUs showed (``gpus``, the hang detector's verdict):

- ``all_waiting``: 1 when every GPU waits in the collective (``spinning``: pegged at a wait's
  power, none apart) or one of them looks stuck itself (``gpu stuck``): a frozen collective.
  0 when one rank is apart from the wait (``rank stopped``: its GPU idle while its peers wait,
  which a data-loader stall or a save by one rank shows too for a while), when the GPUs say
  something else, or when the detector reports no GPU state.

And one reads the detector's alarm policy: ``confirmed``, 1 for a confirmed detection (positive
evidence, or a silence past the bound the job's own history sets: ``medic.detectors.base``),
0 for a suspect, which has silence or slowness alone to go on. The policy weighs evidence the
other features do not carry (a stuck GPU, hardware counters or a kernel event against a node,
a rank blocked on I/O), and a healthy job's look-alikes are suspects far more often than the
faults are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from medic.detectors.base import CONFIRMED, SUSPECT, Detection
from medic.parse.signatures import UNMATCHED, unmatched_only

FEATURES = (
    "raw",
    "silence",
    "margin",
    "slowdown",
    "z",
    "positive",
    "agree",
    "named",
    "novel",
    "unprecedented",
    "off_rhythm",
    "all_waiting",
    "confirmed",
)
Features = Mapping[str, np.ndarray]
"""Features of several detections, a column (array) per name."""
UNKNOWN_GAP_S = 60.0
"""The step gap a silence is measured in before the job has shown its own."""
FROZEN = frozenset({"spinning", "gpu stuck"})
"""GPU states (``gpus``) of a frozen collective: every GPU in the wait, or one stuck itself."""


def features_of(detection: Detection) -> dict[str, float]:
    """The features of ``detection`` (its raw score: ``raw_score`` once calibrated)."""
    raw = detection.score if detection.raw_score is None else detection.raw_score
    return evidence_features(
        raw, detection.evidence, len(detection.ranks), len(detection.culprits), detection.tier
    )


def evidence_features(
    raw: float,
    evidence: Mapping[str, Any],
    ranks: int = 0,
    culprits: int = 0,
    tier: str | None = CONFIRMED,
) -> dict[str, float]:
    """The features of a detection with raw score ``raw``, ``evidence`` as its detector
    reported it, that many ranks and culprits named, and its ``tier``."""
    silence = _number(evidence.get("silence_s"))
    threshold = _number(evidence.get("threshold_s"))
    gap = _number(evidence.get("gap_s")) or UNKNOWN_GAP_S
    signatures = [str(s) for s in evidence.get("signatures") or ()]
    named = any(not s.startswith(UNMATCHED) for s in signatures)
    nodes = evidence.get("nodes") or ()
    positive = bool(evidence.get("corroborated")) or named or culprits > 0 or len(nodes) > 0
    count = max(_number(evidence.get("evidence")), len(signatures), ranks, culprits, len(nodes))
    return {
        "raw": _clip(raw, 0.0, 1.0),
        "silence": _clip(math.log2(max(silence, 1e-9) / gap), 0.0, 8.0) if silence else 0.0,
        "margin": _clip(math.log2(silence / threshold), 0.0, 4.0) if silence and threshold else 0.0,
        "slowdown": _doublings(_number(evidence.get("slowdown")), 3.0),
        "z": _clip(abs(_number(evidence.get("z"))) / 10.0, 0.0, 2.0),
        "positive": float(positive and not unmatched_only(evidence)),
        "agree": _clip(math.log2(1.0 + count), 0.0, 6.0),
        "named": float(named),
        **_history(silence, evidence),
        "all_waiting": float(evidence.get("gpus") in FROZEN),
        "confirmed": confirmed_feature(tier),
    }


def confirmed_feature(tier: str | None) -> float:
    """``confirmed`` of a detection of ``tier`` (None, from a file written before medic kept
    tiers: confirmed, as every detection then was)."""
    return 0.0 if tier == SUSPECT else 1.0


def _history(silence: float, evidence: Mapping[str, Any]) -> dict[str, float]:
    """``novel``, ``unprecedented`` and ``off_rhythm`` (see the module docstring)."""
    if "like_pauses" not in evidence:
        return {"novel": 4.0 if silence else 0.0, "unprecedented": 1.0, "off_rhythm": 1.0}
    longest = _number(evidence.get("longest_pause_s"))
    novel = _clip(math.log2(silence / longest), 0.0, 4.0) if longest else 4.0
    return {
        "novel": novel if silence else 0.0,
        "unprecedented": 1.0 / (1.0 + max(_number(evidence.get("like_pauses")), 0.0)),
        "off_rhythm": 0.0 if evidence.get("on_rhythm") is True else 1.0,
    }


def features_table(ids: Sequence[str], detections: Iterable[Detection]) -> pa.Table:
    """One row per detection: its ``detection_id`` (``ids``, in the same order) and features."""
    rows = [features_of(d) for d in detections]
    columns: dict[str, Any] = {"detection_id": pa.array(list(ids), pa.string())}
    for name in FEATURES:
        columns[name] = pa.array([r[name] for r in rows], pa.float64())
    return pa.table(columns)


def raw_only(raw: np.ndarray) -> dict[str, np.ndarray]:
    """The features of detections of which only the raw scores ``raw`` are known (a cached
    backtest without ``features.parquet``): no evidence besides the detector's score, and
    confirmed (detections from before medic kept tiers all were)."""
    values = np.asarray(raw, dtype=float)
    columns = {name: np.zeros(values.shape) for name in FEATURES}
    columns["raw"] = np.clip(values, 0.0, 1.0)
    columns["confirmed"] = np.ones(values.shape)
    return columns


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def _doublings(ratio: float, top: float) -> float:
    return _clip(math.log2(ratio), 0.0, top) if ratio > 0 else 0.0


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)
