import pyarrow as pa
import pytest

from medic import schema
from medic.scoring import deduplicate, score
from medic.testing.builders import at, detection, label, table


def run(dets, labels):  # type: ignore[no-untyped-def]
    return score(table("detections", dets), None if labels is None else table("labels", labels))


def test_dedup_keeps_the_first_of_each_job_and_kind_per_600_s_window() -> None:
    dets = [
        detection(0, "crash"),
        detection(600, "crash"),  # within 600 s of the first: dropped
        detection(601, "crash"),  # starts a new group
        detection(650, "hang"),  # other kind: kept
        detection(10, "crash", job_id="200"),  # other job: kept
    ]
    kept = deduplicate(dets)
    assert [(d["detected_at"], d["kind"], d["job_id"]) for d in kept] == [
        (at(0), "crash", "100"),
        (at(10), "crash", "200"),
        (at(601), "crash", "100"),
        (at(650), "hang", "100"),
    ]


@pytest.mark.parametrize(
    ("kind", "offset", "detected"),
    [
        ("crash", -10, True),
        ("crash", -10.001, False),
        ("crash", 900, True),
        ("crash", 900.001, False),
        ("hang", 1800, True),
        ("hang", 1800.001, False),
        ("straggler", 3600, True),
        ("straggler", 3600.001, False),
        ("gpu_fault", 900, True),
        ("node_failure", 900.001, False),
    ],
)
def test_window_edges(kind: str, offset: float, detected: bool) -> None:
    result = run([detection(100 + offset, kind)], [label("i", kind, 100)])
    assert result.detected == int(detected)
    assert result.false_positives == int(not detected)


def test_latency_is_clamped_at_zero_and_kind_need_not_match() -> None:
    result = run([detection(95, "crash")], [label("i", "gpu_fault", 100)])
    assert result.detected == 1 and result.latencies_s == [0.0]
    assert result.kind_accuracy == 0.0
    assert result.precision == 1.0


def test_first_detection_in_window_decides_latency_kind_and_attribution() -> None:
    dets = [
        detection(130, "crash", culprits=[]),
        detection(140, "gpu_fault", culprits=["n7"]),
    ]
    result = run(dets, [label("i", "gpu_fault", 100, culprits=["n7"])])
    (outcome,) = result.outcomes
    assert outcome.latency_s == 30.0
    assert outcome.detected_kind == "crash"
    assert result.kind_accuracy == 0.0 and result.attribution_accuracy == 0.0
    assert result.matched == 2 and result.false_positives == 0


@pytest.mark.parametrize(
    ("culprits", "expected", "correct"),
    [
        ([], [], True),
        (["a", "b"], ["b", "a"], True),
        (["a"], ["a", "b"], False),
        (["a"], [], False),
        ([], ["a"], False),
    ],
)
def test_attribution_compares_sets(culprits: list[str], expected: list[str], correct: bool) -> None:
    result = run([detection(101, culprits=culprits)], [label("i", "crash", 100, culprits=expected)])
    assert result.attribution_accuracy == float(correct)


def test_false_positives_other_job_outside_window_and_no_labels() -> None:
    dets = [
        detection(100, job_id="100"),
        detection(100, job_id="999"),  # no label for this job
        detection(2000, job_id="100"),  # after the crash window
        detection(100, job_id=None),
    ]
    result = run(dets, [label("i", "crash", 100)])
    assert result.detections == 4 and result.matched == 1 and result.false_positives == 3
    assert result.precision == 0.25 and result.recall == 1.0
    healthy = run([detection(5)], None)
    assert healthy.labels == 0 and healthy.recall is None and healthy.false_positives == 1


def test_two_labels_of_one_job_each_take_their_own_first_detection() -> None:
    dets = [detection(100, "crash"), detection(2000, "crash")]
    labels = [label("a", "crash", 95), label("b", "crash", 1990)]
    result = run(dets, labels)
    assert result.detected == 2 and result.latencies_s == [5.0, 10.0]
    assert result.summary()["latency_s"] == {"p50": 7.5, "p90": 9.5, "max": 10.0}


def test_no_detections_gives_undefined_precision_and_zero_recall() -> None:
    result = run([], [label("i", "hang", 10)])
    assert result.precision is None and result.recall == 0.0
    assert result.summary()["latency_s"]["p50"] is None


def test_suspects_are_counted_apart_and_a_confirmation_is_scored_at_its_time() -> None:
    # A hang suspected at +60 s and confirmed at +180 s is detected at +180 s; a suspect on a
    # healthy job is no false positive, only a false suspect.
    dets = [
        detection(160, "hang", "1") | {"tier": "suspect"},
        detection(280, "hang", "1") | {"tier": "confirmed"},
        detection(500, "hang", "2") | {"tier": "suspect"},
    ]
    written = pa.Table.from_pylist(
        dets, schema=schema.DETECTIONS.append(pa.field("tier", pa.string()))
    )
    s = score(written, table("labels", [label("h", "hang", 100, job_id="1")]))
    assert (s.detections, s.matched, s.false_positives) == (1, 1, 0)
    assert s.latencies_s == [180.0]
    assert (s.suspects, s.false_suspects) == (2, 1)
    assert s.summary()["suspects"] == 2 and s.summary()["false_suspects"] == 1
    # Both tiers' rows are kept, true and false apart, for a calibration to fit on.
    assert [d["job_id"] for d in s.suspect_rows] == ["1"]
    assert [d["job_id"] for d in s.false_suspect_rows] == ["2"]
