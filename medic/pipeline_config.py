"""The ``[pipeline]`` table: settings of the composition itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from medic.config import Positive, PositiveCount, from_dict


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of the composition itself (detector settings live with each detector)."""

    incident_window_s: Positive = 600.0
    """A job's detections within this span of the previous one are one incident, which the
    guards' once-per-incident check uses too: medic's one incident window (docs/rules.md,
    Incidents)."""
    max_symptoms: PositiveCount = 64
    """Symptoms kept per incident for the history; the count keeps growing past it."""
    calibrate: bool = True
    """Replace each detection's score by the probability that a detection of its kind with
    that evidence is a real incident (the calibration's model, docs/scores.md); the detector's
    own score is kept as ``raw_score``. False: scores stay as the detectors give them."""
    calibration: str = ""
    """A calibration file written by ``medic calibrate``; empty: the one shipped with medic."""


def pipeline_config(settings: Mapping[str, Any]) -> PipelineConfig:
    """The ``[pipeline]`` table of a settings mapping, checked (the defaults when absent)."""
    return from_dict(PipelineConfig, settings.get("pipeline", {}), "pipeline")
