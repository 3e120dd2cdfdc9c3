import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medic import schema
from medic.recording import (
    TABLE_FILES,
    RecordingError,
    TableFile,
    find_recordings,
    open_recording,
    read_recording,
    validate_recording,
    write_recording,
)
from medic.testing.builders import at, label, log, recording, table


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


def test_a_suite_of_links_to_recordings_is_found_and_a_link_loop_ends(tmp_path: Path) -> None:
    a = sample(tmp_path / "kept", "a")
    b = sample(tmp_path / "kept" / "more", "b")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a").symlink_to(a, target_is_directory=True)
    (suite / "more").symlink_to(b.parent, target_is_directory=True)
    (suite / "loop").symlink_to(suite, target_is_directory=True)
    assert find_recordings([suite]) == [suite / "a", suite / "more" / "b"]


def gpu_rows(times: list[float]) -> list[dict[str, object]]:
    return [{"time": at(t), "node": f"n{i % 3}", "gpu": i % 2} for i, t in enumerate(times)]


def test_open_recording_leaves_gpu_on_disk_and_reads_it_in_batches(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "r", recording(logs=[log(1, "a")], gpu=gpu_rows([3, 1, 2])))
    held, opened = read_recording(path), open_recording(path)
    assert isinstance(opened.gpu, TableFile)
    streamed = replace(opened.gpu, batch_rows=2)
    assert [b.num_rows for b in streamed.batches()] == [2, 1]
    assert opened.num_rows("gpu") == held.num_rows("gpu") == 3
    assert opened.time_bounds("gpu") == held.time_bounds("gpu") == (at(1), at(3))
    assert sorted(opened.distinct("gpu", "node").to_pylist()) == ["n0", "n1", "n2"]
    assert opened.stream("gpu").equals(held.gpu)
    assert opened.logs.equals(held.logs) and opened.time_bounds("scheduler") is None


def rewrite(path: Path, name: str, data: pa.Table) -> None:
    pq.write_table(data, path / f"{name}.parquet", row_group_size=2)


def unsorted_gpu(path: Path) -> None:
    rewrite(path, "gpu", table("gpu", gpu_rows([1, 2, 3, 0, 4, 5, 0])))


def nulls_in_gpu_node(path: Path) -> None:
    nodes = pa.array(["a", None, "b", None, None])
    rows = pa.table({"time": pa.array([at(t) for t in range(5)], schema.TIME), "node": nodes})
    rewrite(path, "gpu", rows.append_column("gpu", pa.array([0] * 5, pa.int16())))


def nulls_in_gpu_node_without_statistics(path: Path) -> None:
    nulls_in_gpu_node(path)
    data = pq.read_table(path / "gpu.parquet")
    pq.write_table(data, path / "gpu.parquet", row_group_size=2, write_statistics=False)


def gpu_index_out_of_range(path: Path) -> None:
    data = table("gpu", gpu_rows([1, 2, 3, 4]))
    rewrite(path, "gpu", data.set_column(2, "gpu", pa.array([0, 1, 2, 70_000], pa.int64())))


def unknown_sources(path: Path) -> None:
    rows = [log(t, "x") | {"source": s} for t, s in enumerate(["app", "disk", "app", "tape"])]
    rewrite(path, "logs", table("logs", rows))


def labels_repeated(path: Path) -> None:
    rows = [label(i, "crash", 2) for i in ("i1", "i2", "i3", "i1")]
    rewrite(path, "labels", table("labels", rows))


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (unsorted_gpu, "gpu.parquet: rows not sorted by time (2 out of order, first at row 3)"),
        (nulls_in_gpu_node, "gpu.parquet: column 'node' has 3 null values"),
        (nulls_in_gpu_node_without_statistics, "gpu.parquet: column 'node' has 3 null values"),
        (gpu_index_out_of_range, "gpu.parquet: column 'gpu' cannot be cast to int16"),
        (unknown_sources, "logs.parquet: column 'source' has unknown value(s) 'disk', 'tape'"),
        (labels_repeated, "labels.parquet: duplicate incident_id 'i1'"),
    ],
)
def test_validation_in_small_batches_names_what_a_whole_read_names(
    tmp_path: Path, damage: Callable[[Path], None], expected: str
) -> None:
    path = sample(tmp_path)
    damage(path)
    (problem,) = validate_recording(path, batch_rows=2)
    assert expected in problem
    assert validate_recording(path) == [problem]


def test_validation_reads_of_telemetry_in_its_own_types_only_the_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sample(tmp_path)
    read: list[tuple[str, ...]] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recorded(self: pq.ParquetFile, *args: Any, columns: list[str], **kwargs: Any) -> Any:
        read.append(tuple(columns))
        return iter_batches(self, *args, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recorded)
    assert validate_recording(path) == []
    assert read[list(TABLE_FILES).index("gpu")] == ("time",)


def test_infiniband_columns_round_trip_and_older_recordings_read_them_as_null(
    tmp_path: Path,
) -> None:
    row = {"time": at(1), "node": "n1", "gpu": 0, "ib_errors": 70_000, "ib_link_downed": 3}
    path = write_recording(tmp_path / "new", recording(logs=[log(1, "a")], gpu=[row]))
    for rec in (read_recording(path), open_recording(path)):
        gpu = rec.stream("gpu")
        assert (gpu["ib_errors"].to_pylist(), gpu["ib_link_downed"].to_pylist()) == ([70_000], [3])
    older = table("gpu", [row]).drop_columns(["ib_errors", "ib_link_downed"])
    older = older.append_column("fan_rpm", pa.array([2400], pa.int32()))  # unknown: ignored
    rewrite(path, "gpu", older)
    assert validate_recording(path) == []
    for rec in (read_recording(path), open_recording(path)):
        gpu = rec.stream("gpu")
        assert gpu.schema == schema.GPU
        assert gpu["ib_errors"].to_pylist() == gpu["ib_link_downed"].to_pylist() == [None]
