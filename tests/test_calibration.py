"""Calibration files: what a map gives, the file's round trip, and one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest
import tomli_w

from medic import schema
from medic.calibration import (
    FORMAT,
    UNMATCHED,
    Calibration,
    CalibrationError,
    EvidenceModel,
    ScoreMap,
    calibration_of,
    default_calibration,
    read_calibration,
)
from medic.detectors.base import detection_id
from medic.evidence_features import evidence_features
from medic.testing.builders import at, detection, table

HANG = ScoreMap("isotonic", (0.5, 0.6, 0.7, 1.0), (0.4, 0.4, 0.9, 0.95), true=12, false=3)
CALIBRATION = Calibration({"hang": HANG}, {"recordings": 4, "seeds": [1, 2]})
STRAGGLER = EvidenceModel(-1.5, {"raw": 0.5, "slowdown": 2.0}, true=30, false=9)


def test_a_map_interpolates_between_its_knots_and_holds_flat_beyond_them() -> None:
    assert CALIBRATION.calibrated("hang", 0.55) == pytest.approx(0.4)
    assert CALIBRATION.calibrated("hang", 0.65) == pytest.approx(0.65)
    assert CALIBRATION.calibrated("hang", 0.1) == pytest.approx(0.4)
    assert CALIBRATION.calibrated("hang", 1.0) == pytest.approx(0.95)
    assert CALIBRATION.calibrated("crash", 0.3) == 0.3  # a kind without a map keeps its score


def test_the_file_round_trips(tmp_path: Path) -> None:
    again = read_calibration(CALIBRATION.write(tmp_path / "c.toml"))
    assert again == CALIBRATION
    both = Calibration({**CALIBRATION.maps, "straggler": STRAGGLER}, CALIBRATION.provenance)
    assert read_calibration(both.write(tmp_path / "both.toml")) == both
    assert (tmp_path / "c.toml").read_text().startswith(f'format = "{FORMAT}"')


def test_cached_detections_are_rescored_from_their_raw_scores() -> None:
    old = table("detections", [detection(1, "hang") | {"score": 0.65}, detection(2, "crash")])
    rescored = CALIBRATION.rescore(old)
    assert rescored.column("score").to_pylist() == pytest.approx([0.65, 1.0])
    assert rescored.column("raw_score").to_pylist() == [0.65, 1.0]
    # Written with a calibration already: the raw column is what is mapped, again.
    stale = rescored.set_column(5, rescored.schema.field(5), pa.array([0.2, 0.2]))
    twice = CALIBRATION.rescore(stale)
    assert twice.column("score").to_pylist() == pytest.approx([0.65, 1.0])
    assert twice.schema == schema.DETECTIONS_WRITTEN


def test_cached_detections_are_rescored_from_their_evidence_features() -> None:
    cached = table("detections", [detection(t, "hang") | {"score": 0.7} for t in (1, 2, 3)])
    ids = [detection_id(at(t), "100", "hang", "test") for t in (1, 2)]
    features = pa.table(
        {"detection_id": ids, "positive": [1.0, 0.0], "silence": [3.0, 1.0]}
    )  # the third detection has none: its raw score alone
    hangs = Calibration({"hang": EvidenceModel(-2.0, {"positive": 1.5, "silence": 0.5})})
    scores = hangs.rescore(cached, features).column("score").to_pylist()
    logit = [-2.0 + 1.5 + 1.5, -2.0 + 0.5, -2.0]
    assert scores == pytest.approx([1 / (1 + math.exp(-x)) for x in logit])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


MAP = 'method = "isotonic"\nraw = [0.5, 1.0]\nprobability = [0.4, 0.9]\n'
HANG_TABLE = f'format = "{FORMAT}"\n[kinds.hang]\n'


BROKEN_MAPS = [
    # (in the hang map, this, replaced by this, gives this problem)
    ("0.4, 0.9", "0.9, 0.4", "kinds.hang.probability must not decrease"),
    ("[0.5, 1.0]", "[1.0, 0.5]", "kinds.hang.raw must increase"),
    ("0.4, 0.9", "0.4", "raw has 2 knots but probability 1"),
    ("0.9]", "1.5]", "kinds.hang.probability must lie in [0, 1]"),
    ("isotonic", "magic", "kinds.hang.method must be one of logistic, isotonic, sigmoid"),
    ("[0.5, 1.0]", "['a', 1.0]", "kinds.hang.raw must be a non-empty list of numbers"),
]
LOGISTIC = 'method = "logistic"\nintercept = -1.0\nweights = { raw = 2.0 }\n'
BROKEN_MODELS = [
    ("raw = 2.0", "raw = -2.0", "kinds.hang.weights must be >= 0"),
    ("raw = 2.0", "loudness = 2.0", "kinds.hang.weights: unknown feature 'loudness'"),
    ("-1.0", "'x'", "kinds.hang.intercept must be a number"),
]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("format = 'nope'\n", "not a calibration file (format 'nope'"),
        ("[[x]\n", "not a calibration file (invalid TOML"),
        (f'format = "{FORMAT}"\n', "no [kinds.<kind>] table"),
        (f'format = "{FORMAT}"\n[kinds.hnag]\n{MAP}', "unknown kind 'hnag'"),
        *((HANG_TABLE + MAP.replace(old, new), problem) for old, new, problem in BROKEN_MAPS),
        *((HANG_TABLE + LOGISTIC.replace(o, n), problem) for o, n, problem in BROKEN_MODELS),
    ],
)
def test_a_malformed_file_is_a_one_line_error_naming_it(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CalibrationError) as error:
        read_calibration(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match=r"nope.toml: cannot read calibration"):
        calibration_of(True, str(tmp_path / "nope.toml"))


UNFITTED = {"nan_divergence"}
"""Kinds added after the shipped fit: their scores stay raw until the next fit."""


def test_the_shipped_calibration_models_every_kind_by_its_evidence_with_provenance() -> None:
    shipped = default_calibration()
    assert set(shipped.maps) <= {*schema.DETECTION_KINDS, "crash" + UNMATCHED}
    assert set(schema.DETECTION_KINDS) - set(shipped.maps) <= UNFITTED
    for model in shipped.maps.values():
        assert isinstance(model, EvidenceModel) and model.true > 0
        assert all(weight > 0 for weight in model.weights.values())
    # Fitted with negatives: a kind's scores differ with the evidence.
    weak = {"raw": 0.6, "silence": 1.0, "margin": 0.0, "positive": 0.0}
    strong = {"raw": 0.95, "silence": 4.0, "margin": 2.0, "positive": 1.0, "agree": 2.0}
    assert shipped.calibrated("hang", 0.6, features=weak) < (
        shipped.calibrated("hang", 0.95, features=strong)
    )
    for key in ("fitted_at", "commit", "seeds", "suites", "check"):
        assert key in shipped.provenance
    named = [shipped.provenance["detections"], *shipped.provenance["suites"]]
    assert not any("/" in name for name in named)  # names, not a machine's paths
    assert calibration_of(False, "") is None
    assert calibration_of(True, "") == shipped


def test_a_detection_resting_only_on_unmatched_text_reads_its_own_lower_map() -> None:
    shipped = default_calibration()
    cited = evidence_features(0.51, {"signatures": ["cuda_oom"]})  # a signature names it
    signature = shipped.calibrated("crash", 0.51, features=cited)
    unmatched = shipped.calibrated("crash", 0.51, unmatched=True)
    assert 0 < unmatched < signature
    # a kind with no such map keeps its own
    assert shipped.calibrated("hang", 0.9, unmatched=True) == shipped.calibrated("hang", 0.9)


def test_a_map_for_unmatched_text_of_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    data = CALIBRATION.to_dict()
    data["kinds"]["oops" + UNMATCHED] = data["kinds"]["hang"]
    file = tmp_path / "c.toml"
    file.write_text(tomli_w.dumps(data))
    with pytest.raises(CalibrationError, match="unknown kind 'oops:unmatched'"):
        read_calibration(file)


def test_a_cached_suspect_is_scored_as_one_whatever_its_features_file_holds() -> None:
    rows = [detection(t, "hang") | {"score": 0.7} for t in (1, 2, 3)]
    cached = schema.conform(table("detections", rows), schema.DETECTIONS_WRITTEN)
    tiers = pa.array(["confirmed", "suspect", None])  # None: written before medic kept tiers
    cached = cached.set_column(cached.schema.get_field_index("tier"), "tier", tiers)
    ids = [detection_id(at(t), "100", "hang", "test") for t in (1, 2)]
    written_before = pa.table({"detection_id": ids, "positive": [1.0, 1.0]})  # no "confirmed"
    hangs = Calibration({"hang": EvidenceModel(-1.0, {"confirmed": 2.0})})
    confirmed, suspect = 1 / (1 + math.exp(-1.0)), 1 / (1 + math.exp(1.0))
    for features in (None, written_before):
        scores = hangs.rescore(cached, features).column("score").to_pylist()
        assert scores == pytest.approx([confirmed, suspect, confirmed])
