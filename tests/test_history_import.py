"""Loading backtest results (and their recordings) into a history: `medic history import`."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.detectors.base import detections_table
from medic.history import HistoryError
from medic.history.store import DuckDBStore
from medic.history_import import import_backtest
from medic.testing.builders import log, recording, write
from tests.history.rows import action, actions, detection, gpu, job

CRASH = detection(30, "crash", "100", ["n1"])
HANG = detection(90, "hang", "200", ["n2"])


def results(root: Path) -> Path:
    """What `medic backtest --out root` leaves: one directory per recording."""
    for name, found in (("rec-a", CRASH), ("rec-b", HANG)):
        (root / name).mkdir(parents=True)
        pq.write_table(detections_table([found]), root / name / "detections.parquet")
    pq.write_table(
        actions(action(31, CRASH.id, node="n1", status="recorded")),
        root / "rec-a" / "actions.parquet",
    )
    return root


TORCHTITAN = "step: {}  loss:  9.1234  memory: 45.67GiB(48.12%)  tps: 5,432  tflops: 123.45"


def telemetry_recording(path: Path) -> Path:
    rec = recording(
        duration_s=120,
        logs=[log(t, TORCHTITAN.format(t // 10), rank=0) for t in range(0, 120, 10)],
        gpu=[gpu(t, "n1", i) for t in range(0, 120, 20) for i in range(4)],
        scheduler=[job(0, "100", "RUNNING", ["n1"]), job(31, "100", "REQUEUED")],
        name="rec-a",
    )
    return write(path, rec)


def test_results_are_imported_once(tmp_path: Path) -> None:
    out = results(tmp_path / "out")
    with DuckDBStore() as store:
        counts = import_backtest(store, [out])
        again = import_backtest(store, [out])

        ids = store.sql("SELECT incident_id FROM v_incidents ORDER BY detected_at")
        assert ids.column("incident_id").to_pylist() == [CRASH.id, HANG.id]
        acted = store.sql("SELECT first_action FROM v_time_to_act").column("first_action")
        assert acted.to_pylist() == ["drain"]

    assert counts.read == {"detections": 2, "actions": 1}
    assert counts.inserted == {"detections": 2, "actions": 1}
    assert again.inserted == {"detections": 0, "actions": 0}


def test_recordings_add_job_events_and_gpu_counts(tmp_path: Path) -> None:
    out = results(tmp_path / "out")
    rec = telemetry_recording(tmp_path / "recordings" / "rec-a")
    with DuckDBStore() as store:
        counts = import_backtest(store, [out], [rec])

        saved = store.sql(
            "SELECT gpus, gpus_from FROM v_gpu_hours_saved WHERE incident_id = ?", [CRASH.id]
        ).to_pylist()
        outcome = store.sql("SELECT outcome FROM v_incidents WHERE incident_id = ?", [CRASH.id])
        progress = store.sql(
            "SELECT framework, last_step, median_throughput FROM job_progress ORDER BY minute"
        ).to_pylist()

    assert counts.recordings == 1
    assert counts.inserted["gpu_minutes"] == 8
    assert counts.inserted["job_events"] == 2
    assert progress == [
        {"framework": "torchtitan", "last_step": 5, "median_throughput": 5432.0},
        {"framework": "torchtitan", "last_step": 11, "median_throughput": 5432.0},
    ]
    assert saved == [{"gpus": 4, "gpus_from": "telemetry"}]
    assert outcome.column("outcome").to_pylist() == ["requeued"]


def test_an_unreadable_result_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "out" / "rec"
    bad.mkdir(parents=True)
    (bad / "detections.parquet").write_text("not parquet")
    with DuckDBStore() as store, pytest.raises(HistoryError, match="not a parquet file"):
        import_backtest(store, [tmp_path / "out"])

    pq.write_table(actions(action(1, "d")).drop_columns(["action"]), bad / "detections.parquet")
    with DuckDBStore() as store, pytest.raises(HistoryError, match="missing required column"):
        import_backtest(store, [tmp_path / "out"])


def test_import_command_then_report(tmp_path: Path) -> None:
    out = results(tmp_path / "out")
    rec = telemetry_recording(tmp_path / "recordings" / "rec-a")
    db = tmp_path / "h.duckdb"
    runner = CliRunner()

    imported = runner.invoke(
        main, ["history", "import", str(out), "--recordings", str(rec.parent), "--db", str(db)]
    )
    again = runner.invoke(main, ["history", "import", str(out), "--db", str(db)])
    report = runner.invoke(main, ["report", "--db", str(db)])

    assert imported.exit_code == 0, imported.output
    assert "detections: 2 new row(s) of 2 read" in imported.output
    assert "1 recording(s) replayed" in imported.output
    assert "detections: 0 new row(s) of 2 read" in again.output
    assert report.exit_code == 0, report.output
    assert "Nodes blamed most" in report.output


def test_import_command_needs_something_to_import(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["history", "import", "--db", str(tmp_path / "h.duckdb")])
    assert result.exit_code == 2
    assert "nothing to import" in result.output


def test_results_written_before_raw_scores_import_with_none(tmp_path: Path) -> None:
    out = results(tmp_path / "out")
    path = out / "rec-a" / "detections.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["raw_score"]), path)
    with DuckDBStore() as store:
        import_backtest(store, [out])
        rows = store.sql("SELECT job_id, raw_score FROM detections ORDER BY detected_at")

    assert rows.column("job_id").to_pylist() == ["100", "200"]
    assert rows.column("raw_score").to_pylist() == [None, 1.0]
