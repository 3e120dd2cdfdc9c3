"""What a calibration reads of a detection's evidence, and the pipeline scoring by it."""

from __future__ import annotations

import dataclasses

import pytest

from medic.calibration import Calibration, EvidenceModel
from medic.detectors.base import SUSPECT, Detection
from medic.evidence_features import FEATURES, evidence_features, features_of, features_table


def hang(silence_s: float, corroborated: bool, gap_s: float | None = 10.0) -> Detection:
    evidence = {
        "silence_s": silence_s,
        "threshold_s": 60.0,
        "gap_s": gap_s,
        "corroborated": corroborated,
    }
    return Detection("7", "hang", score=0.7, detector="hang", evidence=evidence)


def test_a_longer_silence_in_the_jobs_own_gaps_and_corroboration_read_as_more() -> None:
    short, long = features_of(hang(40.0, False)), features_of(hang(160.0, False))
    assert short["silence"] == pytest.approx(2.0) and long["silence"] == pytest.approx(4.0)
    assert short["margin"] == 0.0 and long["margin"] == pytest.approx(1.4150375)
    assert short["positive"] == 0.0 and features_of(hang(40.0, True))["positive"] == 1.0
    # Before the job has a gap of its own, a silence is measured in a conservative minute.
    assert features_of(hang(120.0, False, None))["silence"] == pytest.approx(1.0)


def test_text_no_signature_named_is_not_positive_evidence() -> None:
    named = evidence_features(0.9, {"signatures": ["nccl_watchdog"], "evidence": 3})
    unmatched = evidence_features(0.9, {"signatures": ["unmatched:device"], "evidence": 3})
    assert (named["named"], named["positive"]) == (1.0, 1.0)
    assert (unmatched["named"], unmatched["positive"]) == (0.0, 0.0)
    assert named["agree"] == unmatched["agree"] == pytest.approx(2.0)
    # What a detector does not report reads as 0, never as an error.
    assert evidence_features(0.5, {"slowdown": "fast", "z": float("nan")})["slowdown"] == 0.0


def test_the_features_table_has_a_row_per_detection_by_id() -> None:
    found = [hang(40.0, False), hang(160.0, True)]
    table = features_table([d.id for d in found], found)
    assert table.column_names == ["detection_id", *FEATURES]
    assert table.column("positive").to_pylist() == [0.0, 1.0]


def test_the_pipelines_score_rises_with_the_evidence_not_only_the_raw_score() -> None:
    model = EvidenceModel(-3.0, {"silence": 0.8, "positive": 2.0})
    calibration = Calibration({"hang": model})
    scores = [
        calibration.calibrated(d.kind, d.score, features=features_of(d))
        for d in (hang(40.0, False), hang(160.0, False), hang(40.0, True))
    ]
    assert scores[0] < scores[1] and scores[0] < scores[2]
    assert scores[0] == pytest.approx(1 / (1 + 2.718281828 ** (3.0 - 1.6)))


def test_a_silence_the_jobs_own_pauses_explain_reads_as_less() -> None:
    base = {"silence_s": 80.0, "threshold_s": 60.0, "gap_s": 10.0}
    first = evidence_features(0.7, {**base, "longest_pause_s": 20.0, "like_pauses": 0})
    again = evidence_features(
        0.7, {**base, "longest_pause_s": 90.0, "like_pauses": 3, "on_rhythm": True}
    )
    assert (first["novel"], first["unprecedented"], first["off_rhythm"]) == (2.0, 1.0, 1.0)
    assert (again["novel"], again["unprecedented"], again["off_rhythm"]) == (0.0, 0.25, 0.0)
    # No history reported (a watchdog's line, a crash): nothing explains the detection.
    said = evidence_features(1.0, {"signatures": ["nccl_watchdog"]})
    assert (said["novel"], said["unprecedented"], said["off_rhythm"]) == (0.0, 1.0, 1.0)
    assert evidence_features(0.7, base)["novel"] == 4.0


def test_a_suspect_reads_as_less_than_a_confirmed_detection() -> None:
    suspect = dataclasses.replace(hang(160.0, True), tier=SUSPECT)
    assert features_of(suspect)["confirmed"] == 0.0
    assert features_of(hang(160.0, True))["confirmed"] == 1.0
    # A detection from before medic kept tiers was acted on: confirmed.
    assert evidence_features(0.7, {}, tier=None)["confirmed"] == 1.0


def test_every_gpu_in_the_wait_reads_as_more_than_one_rank_apart() -> None:
    def waiting(gpus: str) -> float:
        return evidence_features(0.8, {"silence_s": 90.0, "gpus": gpus})["all_waiting"]

    assert waiting("spinning") == waiting("gpu stuck") == 1.0
    # One rank apart is what a data-loader stall or a save shows too for a while.
    assert waiting("rank stopped") == waiting("working") == 0.0
    assert evidence_features(1.0, {"signatures": ["nccl_watchdog"]})["all_waiting"] == 0.0
