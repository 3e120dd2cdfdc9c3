import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medic import schema
from medic.recording import (
    RecordingError,
    find_recordings,
    read_recording,
    validate_recording,
    write_recording,
)
from tests.builders import at, label, log, recording, table


def sample(tmp_path: Path, name: str = "rec") -> Path:
    rec = recording(
        logs=[log(1, "a"), log(2, "b", rank=3)],
        gpu=[{"time": at(1), "node": "n1", "gpu": 0, "util": 99.0}],
        scheduler=[
            {"time": at(0), "kind": "job", "job_id": "100", "state": "RUNNING", "nodes": ["n1"]}
        ],
        labels=[label("i1", "crash", 2)],
    )
    return write_recording(tmp_path / name, rec)


def test_write_then_read_round_trips_every_table(tmp_path: Path) -> None:
    path = sample(tmp_path)
    rec = read_recording(path)
    assert validate_recording(path) == []
    assert rec.logs.column("message").to_pylist() == ["a", "b"]
    assert rec.logs.column("rank").to_pylist() == [None, 3]
    assert rec.gpu.column("util").to_pylist() == [99.0]
    assert rec.scheduler.column("nodes").to_pylist() == [["n1"]]
    assert rec.labels is not None and rec.labels.column("kind").to_pylist() == ["crash"]
    for name in ("logs", "gpu", "scheduler"):
        assert rec.stream(name).schema == schema.SCHEMAS[name]
    assert rec.labels.schema == schema.LABELS


def test_writer_sorts_rows_by_time(tmp_path: Path) -> None:
    rec = recording(logs=[log(5, "late"), log(1, "early")])
    rec = read_recording(write_recording(tmp_path / "r", rec))
    assert rec.logs.column("message").to_pylist() == ["early", "late"]


def test_optional_files_may_be_missing(tmp_path: Path) -> None:
    path = sample(tmp_path)
    for name in ("gpu.parquet", "scheduler.parquet", "labels.parquet"):
        (path / name).unlink()
    rec = read_recording(path)
    assert rec.gpu.num_rows == 0 and rec.labels is None


def problems_after(tmp_path: Path, damage) -> list[str]:  # type: ignore[no-untyped-def]
    path = sample(tmp_path)
    damage(path)
    return validate_recording(path)


def test_missing_meta(tmp_path: Path) -> None:
    problems = problems_after(tmp_path, lambda p: (p / "meta.json").unlink())
    assert problems == [f"{tmp_path / 'rec' / 'meta.json'}: missing"]


def test_unknown_format_version(tmp_path: Path) -> None:
    def damage(path: Path) -> None:
        meta = json.loads((path / "meta.json").read_text())
        meta["format"] = "medic-recording/9"
        (path / "meta.json").write_text(json.dumps(meta))

    (problem,) = problems_after(tmp_path, damage)
    assert "unknown format version 'medic-recording/9'" in problem


def test_column_of_the_wrong_type(tmp_path: Path) -> None:
    def damage(path: Path) -> None:
        logs = pq.read_table(path / "logs.parquet")
        pq.write_table(logs.set_column(3, "rank", pa.array(["x", "y"])), path / "logs.parquet")

    (problem,) = problems_after(tmp_path, damage)
    assert problem.endswith("logs.parquet: column 'rank' has type string, expected int32")


def test_rows_not_sorted(tmp_path: Path) -> None:
    def damage(path: Path) -> None:
        logs = pq.read_table(path / "logs.parquet")
        pq.write_table(logs.take([1, 0]), path / "logs.parquet")

    (problem,) = problems_after(tmp_path, damage)
    assert "rows not sorted by time (1 out of order, first at row 1)" in problem


def test_label_with_unknown_kind(tmp_path: Path) -> None:
    def damage(path: Path) -> None:
        bad = label("i9", "meltdown", 3)
        pq.write_table(table("labels", [bad]), path / "labels.parquet")

    (problem,) = problems_after(tmp_path, damage)
    assert "label 'i9' (row 0) has unknown kind 'meltdown'" in problem


def test_parquet_file_that_is_not_parquet(tmp_path: Path) -> None:
    (problem,) = problems_after(tmp_path, lambda p: (p / "gpu.parquet").write_text("hello"))
    assert "gpu.parquet: not a parquet file" in problem


def test_every_problem_is_named_on_its_own_line(tmp_path: Path) -> None:
    def damage(path: Path) -> None:
        (path / "meta.json").write_text("{not json")
        (path / "logs.parquet").unlink()
        (path / "scheduler.parquet").write_bytes(b"PAR1garbage")

    problems = problems_after(tmp_path, damage)
    assert len(problems) == 3
    assert all("\n" not in p for p in problems)
    assert "not valid JSON" in problems[0]
    assert "logs.parquet: missing" in problems[1]


def test_read_raises_one_line_error(tmp_path: Path) -> None:
    path = sample(tmp_path)
    (path / "meta.json").unlink()
    with pytest.raises(RecordingError, match="meta.json: missing"):
        read_recording(path)


def test_find_recordings_expands_directories(tmp_path: Path) -> None:
    a = sample(tmp_path / "suite", "a")
    b = sample(tmp_path / "suite" / "nested", "b")
    assert find_recordings([tmp_path / "suite"]) == [a, b]
    assert find_recordings([a, a]) == [a]
