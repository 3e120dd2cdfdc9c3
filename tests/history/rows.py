"""Hand-built rows for the history tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from medic.detectors.base import Detection
from medic.ingest.base import Batch
from medic.testing.builders import at, table


def detection(
    t: float,
    kind: str = "crash",
    job_id: str | None = "100",
    culprits: Sequence[str] = (),
    onset: float | None = None,
    detector: str = "test",
) -> Detection:
    return Detection(
        job_id,
        kind,
        tuple(culprits),
        detector=detector,
        summary=f"{kind} of job {job_id}",
        detected_at=at(t),
        onset=None if onset is None else at(onset),
    )


def action(
    t: float,
    detection_id: str,
    action: str = "drain",
    node: str | None = None,
    job_id: str | None = "100",
    status: str = "done",
    guard: str | None = None,
    mode: str = "enforce",
) -> dict[str, Any]:
    return {
        "time": at(t),
        "detection_id": detection_id,
        "job_id": job_id,
        "node": node,
        "action": action,
        "mode": mode,
        "status": status,
        "guard": guard,
        "reason": f"{action} for {detection_id}",
    }


def actions(*rows: dict[str, Any]) -> pa.Table:
    return table("actions", rows)


def gpu(
    t: float, node: str, index: int, job_id: str | None = "100", **metrics: Any
) -> dict[str, Any]:
    return {"time": at(t), "node": node, "gpu": index, "job_id": job_id, **metrics}


def job(t: float, job_id: str, state: str, nodes: Sequence[str] | None = None) -> dict[str, Any]:
    return {
        "time": at(t),
        "kind": "job",
        "job_id": job_id,
        "state": state,
        "nodes": None if nodes is None else list(nodes),
    }


def progress(rows: Sequence[dict[str, Any]]) -> Batch:
    """A "progress" batch (the derived stream's columns that the rows name)."""
    frame = pl.DataFrame(rows).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")))
    return Batch("progress", frame.to_arrow())
