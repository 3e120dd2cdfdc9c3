"""The Detector seam: the Detection record and the Detector protocol (the registry is
``medic.detectors.registry``).

A detector consumes batches of the streams it names and watermarks, owns its per-job /
per-rank / per-GPU state, never reads the wall clock, and exposes its parameters as a
frozen dataclass (``Config``) so backtests and notebooks can sweep them. The pipeline
stamps ``detected_at`` with the event time it had reached when the detection came out.

Every detection carries a *tier* (``TIERS``): ``confirmed`` when positive evidence shows the
fault (a line saying so, hardware or kernel events, Slurm's view, GPUs showing a rank apart
as its peers wait, or a silence past the bound the job's own history sets), ``suspect`` when
all there is is silence or slowness. The default rules act on confirmed detections only;
suspects are logged and notified (docs/rules.md, "Tiers").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import pyarrow as pa

from medic import schema
from medic.ingest.base import Batch

SUSPECT, CONFIRMED, TIERS = schema.SUSPECT, schema.CONFIRMED, schema.DETECTION_TIERS


@dataclass(frozen=True)
class Detection:
    """One detected incident of one job (the spec's detections row, plus an id and onset)."""

    job_id: str | None
    kind: str
    culprits: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    score: float = 1.0
    detector: str = ""
    summary: str = ""
    detected_at: int = 0
    onset: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    incident: str | None = field(default=None, compare=False, hash=False)
    """Id of the incident the pipeline grouped it into (its first detection's id); None
    outside a pipeline."""
    raw_score: float | None = None
    """The detector's own (evidence) score, once a calibration replaced ``score`` by the
    probability that the detection is real (``medic.calibration``); None: ``score`` is it."""
    tier: str = CONFIRMED
    """``confirmed`` or ``suspect`` (``TIERS``). A suspect confirmed later is a second
    detection, ``confirmed``, that keeps the suspect's ``onset``."""

    def __post_init__(self) -> None:
        if self.kind not in schema.DETECTION_KINDS:
            raise ValueError(f"unknown detection kind {self.kind!r}")
        if self.tier not in TIERS:
            raise ValueError(f"unknown detection tier {self.tier!r}")

    @property
    def confirmed(self) -> bool:
        return self.tier == CONFIRMED

    @property
    def id(self) -> str:
        """Stable id derived from the row, so it can be recomputed from detections.parquet."""
        return detection_id(self.detected_at, self.job_id, self.kind, self.detector)

    def row(self) -> dict[str, Any]:
        return {
            "detected_at": self.detected_at,
            "job_id": self.job_id,
            "kind": self.kind,
            "culprits": list(self.culprits),
            "ranks": list(self.ranks),
            "score": float(self.score),
            "detector": self.detector,
            "summary": self.summary,
            "raw_score": float(self.score if self.raw_score is None else self.raw_score),
            "tier": self.tier,
        }


def detection_id(detected_at: int, job_id: str | None, kind: str, detector: str) -> str:
    key = f"{detected_at}|{job_id or ''}|{kind}|{detector}".encode()
    return hashlib.sha1(key, usedforsecurity=False).hexdigest()[:16]


def detections_table(detections: Iterable[Detection]) -> pa.Table:
    """Detections as ``detections.parquet`` holds them (the spec's columns, ``raw_score`` and
    ``tier``: ``schema.DETECTIONS_WRITTEN``), in emission order."""
    rows = [d.row() for d in detections]
    if not rows:
        return schema.empty(schema.DETECTIONS_WRITTEN)
    columns = {name: [r[name] for r in rows] for name in schema.DETECTIONS_WRITTEN.names}
    return pa.Table.from_pydict(columns, schema=schema.DETECTIONS_WRITTEN)


@runtime_checkable
class Detector(Protocol):
    """What the pipeline drives. ``streams`` names the batches the detector wants."""

    name: ClassVar[str]
    streams: ClassVar[frozenset[str]]
    Config: ClassVar[type]
    config: Any

    def update(self, batch: Batch) -> list[Detection]: ...

    def advance(self, watermark: int) -> list[Detection]: ...

    def state_size(self) -> int:
        """Number of entities (jobs, ranks, GPUs) currently held: bounded and freed at job end."""
        ...


@runtime_checkable
class EndsWithInput(Protocol):
    """A detector that has something to say when its input ends for good (a finite text read by
    ``medic diagnose``), which a live stream never does: what it holds waiting for news.
    ``alive``: per job, the event time of its last sign of life in the input."""

    def at_end(self, alive: Mapping[str, int]) -> list[Detection]: ...
