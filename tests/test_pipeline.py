from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl
import pytest

from medic.calibration import Calibration, ScoreMap, default_calibration
from medic.config import ConfigError
from medic.detectors import registry
from medic.detectors.base import Detection, detections_table
from medic.ingest.base import Batch, Watermark
from medic.ingest.replay import ReplaySource
from medic.pipeline import Pipeline, PipelineConfig
from medic.testing.builders import at, batch, log, recording


@dataclass(frozen=True)
class EchoConfig:
    word: str = "boom"
    quiet_s: float = 0.0


class EchoDetector:
    """Fires on every line that holds ``word``, and on the watermark after ``quiet_s``."""

    name: ClassVar[str] = "echo"
    streams: ClassVar[frozenset[str]] = frozenset({"words"})
    Config: ClassVar[type] = EchoConfig

    def __init__(self, config: EchoConfig) -> None:
        self.config = config
        self.seen: list[int] = []

    def update(self, b: Batch) -> list[Detection]:
        """``word`` is a crash of the line's job; ``<kind>@<node>`` a detection blaming the node."""
        hits = b.frame.filter(pl.col("word") == self.config.word)
        found = [Detection(job_id=j, kind="crash", detector=self.name) for j in hits["job_id"]]
        blamed = b.frame.filter(pl.col("word").str.contains("@"))
        for job_id, word in blamed.select("job_id", "word").iter_rows():
            kind, node = word.split("@")
            found.append(Detection(job_id, kind, (node,), detector=self.name))
        return found

    def advance(self, watermark: int) -> list[Detection]:
        self.seen.append(watermark)
        return []

    def state_size(self) -> int:
        return 0


class WordsParser:
    name: ClassVar[str] = "words"
    input_stream: ClassVar[str] = "logs"
    output_stream: ClassVar[str] = "words"

    def parse(self, b: Batch) -> Batch | None:
        words = b.frame.select("time", "job_id", pl.col("message").alias("word"))
        return Batch("words", words.to_arrow())


@pytest.fixture
def echo() -> Iterator[None]:
    registry.DETECTORS["echo"] = EchoDetector
    registry.PARSERS["words"] = WordsParser
    yield
    del registry.DETECTORS["echo"]
    del registry.PARSERS["words"]


def test_detections_are_stamped_with_event_time_and_correlated_per_job(echo: None) -> None:
    pipeline = Pipeline([EchoDetector(EchoConfig())], PipelineConfig(incident_window_s=60))
    assert [type(p) for p in pipeline.parsers] == [WordsParser]
    first = pipeline.process(batch("logs", [log(1, "boom"), log(2, "fine")]))
    assert [(d.job_id, d.detected_at) for d in first] == [("100", at(2))]
    assert pipeline.process(batch("logs", [log(30, "boom")])) == [], "same incident"
    assert pipeline.process(Watermark(at(200))) == []
    again = pipeline.process(batch("logs", [log(201, "boom")]))
    assert [d.detected_at for d in again] == [at(201)], "window passed: a new incident"


def test_every_new_kind_or_culprit_of_a_job_reaches_the_responders(echo: None) -> None:
    pipeline = Pipeline([EchoDetector(EchoConfig())], PipelineConfig(incident_window_s=600))
    words = ["boom", "gpu_fault@n3", "gpu_fault@n3", "boom", "gpu_fault@n5", "node_failure@n5"]
    emitted = [pipeline.process(batch("logs", [log(10 * i + 1, w)])) for i, w in enumerate(words)]
    assert [[(d.kind, d.culprits) for d in found] for found in emitted] == [
        [("crash", ())],
        [("gpu_fault", ("n3",))],
        [],
        [],
        [("gpu_fault", ("n5",))],
        [("node_failure", ("n5",))],
    ]
    first = emitted[0][0]
    assert {d.incident for found in emitted for d in found} == {first.id}
    pipeline.process(Watermark(at(2000)))
    (incident,) = pipeline.correlator.take_closed()
    assert incident.first == first
    assert incident.kind == "gpu_fault", "named after the first detection that blamed a node"
    assert incident.symptom_count == 5


def job_row(t: float, state: str) -> dict[str, object]:
    return {"time": at(t), "kind": "job", "job_id": "100", "state": state}


def test_a_job_running_again_after_requeue_opens_a_new_incident(echo: None) -> None:
    pipeline = Pipeline([EchoDetector(EchoConfig())])
    assert len(pipeline.process(batch("logs", [log(1, "boom")]))) == 1
    pipeline.process(batch("scheduler", [job_row(3, "RUNNING")]))
    assert pipeline.process(batch("logs", [log(4, "boom")])) == [], "a snapshot, not a restart"
    pipeline.process(batch("scheduler", [job_row(5, "REQUEUED"), job_row(6, "PENDING")]))
    assert pipeline.process(batch("logs", [log(7, "boom")])) == [], "still the same attempt"
    pipeline.process(batch("scheduler", [job_row(8, "RUNNING")]))
    assert len(pipeline.process(batch("logs", [log(9, "boom")]))) == 1


def test_watermarks_reach_detectors_and_move_the_clock(echo: None) -> None:
    detector = EchoDetector(EchoConfig())
    pipeline = Pipeline([detector])
    pipeline.run(ReplaySource(recording(duration_s=5, logs=[log(0.5, "x")])))
    assert detector.seen == [at(s) for s in (1, 2, 3, 4, 5)]
    assert pipeline.now == at(5)


def test_from_settings_builds_typed_configs_and_rejects_bad_ones(echo: None) -> None:
    pipeline = Pipeline.from_settings({"detectors": {"echo": {"word": "bang"}}})
    (detector,) = [d for d in pipeline.detectors if isinstance(d, EchoDetector)]
    assert detector.config == EchoConfig(word="bang")
    with pytest.raises(ConfigError, match="'detectors.echo.word' must be a string"):
        Pipeline.from_settings({"detectors": {"echo": {"word": 3}}})
    with pytest.raises(ConfigError, match="unknown setting 'detectors.echo.wrod'"):
        Pipeline.from_settings({"detectors": {"echo": {"wrod": "x"}}})
    with pytest.raises(ConfigError, match="unknown detector 'nope'"):
        Pipeline.from_settings({"detectors": {"nope": {}}})
    off = Pipeline.from_settings({"detectors": {"echo": {"enabled": False}}})
    assert not any(isinstance(d, EchoDetector) for d in off.detectors)


def test_rows_behind_the_watermark_are_still_detected() -> None:
    """A node's shipper held its lines: the Xid and the ranks' NCCL aborts of t=50 s reach
    the pipeline when its watermark is already at 80 s (what the VictoriaLogs source's late
    sweep delivers). They are processed, not dropped: the fault is found and blamed."""
    from medic.detectors.registry import build_detectors
    from tests.detectors.scenarios import EVIDENCE_DETECTORS, Job, kernel
    from tests.detectors.test_attribution import NCCL_ABORT, XID_79

    job = Job()
    on_time = recording(
        120, logs=job.progress(0, 120), gpu=job.telemetry(0, 120), scheduler=[job.start()]
    )
    late = sorted(
        [kernel(50.0, "n2", XID_79), *job.rank_logs(50.2, NCCL_ABORT)], key=lambda r: r["time"]
    )
    events = list(ReplaySource(on_time))
    cut = next(i for i, e in enumerate(events) if isinstance(e, Watermark) and e.time >= at(80))
    events.insert(cut + 1, batch("logs", late))
    pipeline = Pipeline(build_detectors(enabled=EVIDENCE_DETECTORS))
    found = pipeline.run(events)
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n2",), "100")]


CRASH_MAP = Calibration({"crash": ScoreMap("isotonic", (0.0, 1.0), (0.1, 0.7))})


def test_the_pipeline_calibrates_scores_and_keeps_the_raw_one(echo: None) -> None:
    pipeline = Pipeline([EchoDetector(EchoConfig())], calibration=CRASH_MAP)
    (found,) = pipeline.process(batch("logs", [log(1, "boom")]))
    assert (found.score, found.raw_score) == (pytest.approx(0.7), 1.0)
    written = detections_table([found])
    assert written.column("score").to_pylist() == [pytest.approx(0.7)]
    assert written.column("raw_score").to_pylist() == [1.0]
    (plain,) = Pipeline([EchoDetector(EchoConfig())]).process(batch("logs", [log(1, "boom")]))
    assert (plain.score, plain.raw_score) == (1.0, None)
    assert detections_table([plain]).column("raw_score").to_pylist() == [1.0]


def test_the_config_names_the_calibration_file_or_turns_it_off(echo: None, tmp_path: Path) -> None:
    assert Pipeline.from_settings({}).calibration == default_calibration()
    assert Pipeline.from_settings({"pipeline": {"calibrate": False}}).calibration is None
    file = CRASH_MAP.write(tmp_path / "site.toml")
    settings = {"pipeline": {"calibration": str(file)}, "detectors": {"echo": {}}}
    pipeline = Pipeline.from_settings(settings)
    (found,) = pipeline.process(batch("logs", [log(1, "boom")]))
    assert found.score == pytest.approx(0.7)
    (tmp_path / "bad.toml").write_text("format = 1\n")
    with pytest.raises(ConfigError, match=r"bad.toml: not a calibration file \(format 1"):
        Pipeline.from_settings({"pipeline": {"calibration": str(tmp_path / "bad.toml")}})
