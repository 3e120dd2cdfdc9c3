"""HistoryWriter: what the pipeline sees and decides, written once, summarised per minute."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medic.history.config import HistoryConfig
from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter
from medic.incident import IncidentCorrelator
from medic.ingest.base import Batch
from medic.ingest.replay import ReplaySource
from medic.pipeline import Pipeline
from medic.testing.builders import at, batch, recording
from medic.timeutil import US
from tests.history.rows import action, actions, detection, gpu, job, progress


def count(store: DuckDBStore, table: str) -> int:
    return int(store.sql(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py())


def test_emitted_detections_are_recorded_with_their_onset(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    found = [detection(30, "hang", "7", ["n2"], onset=12), detection(31, "crash", None)]

    writer.handle(found, at(31))

    stored = store.sql(
        "SELECT id, kind, job_id, culprits, epoch_us(onset) AS onset FROM detections "
        "ORDER BY detected_at"
    ).to_pylist()
    assert stored == [
        {"id": found[0].id, "kind": "hang", "job_id": "7", "culprits": ["n2"], "onset": at(12)},
        {"id": found[1].id, "kind": "crash", "job_id": None, "culprits": [], "onset": None},
    ]
    assert writer.written["detections"] == 2


def test_a_gpu_minute_is_summarised_once_event_time_is_past_it_plus_lateness(
    store: DuckDBStore,
) -> None:
    writer = HistoryWriter(store, HistoryConfig(lateness_s=30))
    writer.update(
        batch(
            "gpu",
            [
                gpu(
                    0,
                    "n1",
                    0,
                    util=20.0,
                    power_w=100.0,
                    temp_c=40.0,
                    sm_clock_mhz=1980.0,
                    throttle_reasons=1,
                    ecc_dbe=0,
                    ecc_sbe=3,
                    pcie_replay=7,
                    nvlink_errors=0,
                ),
                gpu(
                    30,
                    "n1",
                    0,
                    util=40.0,
                    power_w=300.0,
                    temp_c=50.0,
                    sm_clock_mhz=1410.0,
                    throttle_reasons=4,
                    ecc_dbe=1,
                    ecc_sbe=5,
                    pcie_replay=7,
                    nvlink_errors=2,
                    xid=48,
                ),
                gpu(80, "n1", 0, util=99.0),
            ],
        )
    )
    assert count(store, "gpu_minutes") == 0  # 80 s - 30 s lateness: minute 0 may still grow

    writer.advance(at(90))

    row = store.sql("SELECT * EXCLUDE (minute) FROM gpu_minutes").to_pylist()
    assert row == [
        {
            "node": "n1",
            "gpu": 0,
            "job_id": "100",
            "samples": 2,
            "util_mean": 30.0,
            "util_max": 40.0,
            "mem_used_max_mib": None,
            "power_mean_w": 200.0,
            "power_max_w": 300.0,
            "temp_mean_c": 45.0,
            "temp_max_c": 50.0,
            "sm_clock_min_mhz": 1410.0,
            "throttle_reasons": 5,
            "ecc_dbe_max": 1,
            "ecc_sbe_max": 5,
            "pcie_replay_max": 7,
            "nvlink_errors_max": 2,
            "xids": [48],
        }
    ]
    assert writer.state_size() == 1
    writer.flush()
    assert count(store, "gpu_minutes") == 2
    assert writer.state_size() == 0


def test_rows_arriving_after_their_minute_was_written_are_counted_not_duplicated(
    store: DuckDBStore, caplog: pytest.LogCaptureFixture
) -> None:
    writer = HistoryWriter(store, HistoryConfig(lateness_s=0))
    writer.update(batch("gpu", [gpu(10, "n1", 0, util=10.0), gpu(70, "n1", 0, util=10.0)]))
    writer.update(batch("gpu", [gpu(20, "n1", 0, util=90.0), gpu(75, "n1", 1, util=50.0)]))
    writer.update(batch("gpu", [gpu(30, "n1", 1, util=90.0), gpu(80, "n1", 1, util=50.0)]))
    writer.flush()

    assert count(store, "gpu_minutes") == 3
    assert writer.late == {"gpu": 2, "progress": 0}
    assert writer.skipped["gpu_minutes"] == 0
    util = store.sql("SELECT util_max FROM gpu_minutes ORDER BY minute, gpu").column("util_max")
    assert util.to_pylist() == [10.0, 10.0, 50.0]
    late = [r.getMessage() for r in caplog.records if "lateness_s" in r.getMessage()]
    assert late == [
        "history: 1 gpu row(s) came more than lateness_s=0 s after their minute was summarised "
        "and were left out of it (1 so far)",
        "history: 1 gpu row(s) came more than lateness_s=0 s after their minute was summarised "
        "and were left out of it (2 so far)",
    ]


def test_progress_is_summarised_per_job_and_minute(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    events = [
        {
            "time": at(1),
            "job_id": "7",
            "node": "n1",
            "rank": 0,
            "framework": "torchtitan",
            "event": "step",
            "step": 10,
            "step_time_s": 1.0,
            "throughput": 100.0,
        },
        {
            "time": at(2),
            "job_id": "7",
            "node": "n2",
            "rank": 8,
            "framework": "torchtitan",
            "event": "step",
            "step": 11,
            "step_time_s": 3.0,
            "throughput": 300.0,
        },
        {
            "time": at(3),
            "job_id": "7",
            "node": "n1",
            "rank": 0,
            "framework": "torchtitan",
            "event": "checkpoint_start",
            "step": None,
            "step_time_s": None,
            "throughput": None,
        },
    ]
    writer.update(progress(events))
    writer.flush()

    assert store.sql("SELECT * EXCLUDE (minute) FROM job_progress").to_pylist() == [
        {
            "job_id": "7",
            "framework": "torchtitan",
            "first_step": 10,
            "last_step": 11,
            "step_events": 2,
            "median_step_time_s": 2.0,
            "median_throughput": 200.0,
            "ranks": 2,
            "nodes": 2,
            "phases": ["checkpoint_start"],
        }
    ]


def test_job_state_changes_become_job_events(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    node_row = {"time": at(3), "kind": "node", "node": "n1", "state": "DRAIN"}
    writer.update(
        batch(
            "scheduler",
            [job(1, "7", "RUNNING", ["n1"]), node_row, job(9, "7", "CANCELLED+ by 0")],
        )
    )

    events = store.sql("SELECT job_id, state, nodes FROM job_events ORDER BY time").to_pylist()
    assert events == [
        {"job_id": "7", "state": "RUNNING", "nodes": ["n1"]},
        {"job_id": "7", "state": "CANCELLED", "nodes": None},
    ]


def test_incidents_closed_by_the_correlator_are_recorded(store: DuckDBStore) -> None:
    correlator = IncidentCorrelator(window_us=60 * US, max_symptoms=8)
    writer = HistoryWriter(store, correlator=correlator)
    first = detection(10, "crash", "7", ["n1"])
    correlator.admit(first)
    correlator.admit(detection(20, "gpu_fault", "7", ["n2"]))

    correlator.expire(at(50))
    writer.advance(at(50))
    assert count(store, "incidents") == 0
    correlator.expire(at(100))
    writer.advance(at(100))

    assert store.sql(
        "SELECT id, symptom_count, symptom_kinds, symptom_culprits, epoch_us(last_seen) AS seen "
        "FROM incidents"
    ).to_pylist() == [
        {
            "id": first.id,
            "symptom_count": 1,
            "symptom_kinds": ["gpu_fault"],
            "symptom_culprits": ["n2"],
            "seen": at(20),
        }
    ]


def test_actions_are_recorded_from_the_actions_table(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    assert writer.record_actions(actions(action(1, "d1", node="n1"), action(2, "d1"))) == 2
    assert writer.record_actions(actions(action(1, "d1", node="n1"))) == 0
    assert writer.skipped["actions"] == 1


def test_the_pipeline_feeds_the_writer_like_a_detector(store: DuckDBStore) -> None:
    rec = recording(
        duration_s=180,
        gpu=[gpu(t, "n1", i, util=50.0) for t in range(0, 180, 15) for i in (0, 1)],
        scheduler=[job(0, "100", "RUNNING", ["n1"]), job(170, "100", "COMPLETED")],
    )
    writer = HistoryWriter(store)
    pipeline = Pipeline([], responders=[writer], observers=[writer])
    writer.correlator = pipeline.correlator

    assert pipeline.run(ReplaySource(rec)) == []
    assert count(store, "gpu_minutes") == 4  # minutes 0 and 1 of two GPUs; minute 2 is open
    writer.flush()

    assert count(store, "gpu_minutes") == 6
    assert count(store, "job_events") == 2
    assert pipeline.state_size() == 0


def test_a_failing_store_is_logged_and_counted_never_raised(
    store: DuckDBStore, caplog: pytest.LogCaptureFixture
) -> None:
    writer = HistoryWriter(store)
    store.close()

    writer.handle([detection(1)], at(1))
    writer.update(batch("scheduler", [job(1, "7", "RUNNING")]))

    assert writer.errors == 2
    assert "cannot append to 'detections'" in caplog.text


def test_unreadable_batches_are_skipped_and_counted(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    no_time = progress([{"time": at(1), "job_id": "7", "step": 1}]).data.drop_columns(["time"])
    writer.update(Batch("progress", no_time))
    assert writer.record_actions(actions(action(1, "d1")).drop_columns(["action"])) == 0

    assert writer.skipped["batches"] == 1
    assert writer.errors == 1


def test_writing_everything_again_after_a_restart_adds_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "history.duckdb"

    def write_all() -> dict[str, int]:
        with DuckDBStore(path) as store:
            writer = HistoryWriter(store)
            correlator = IncidentCorrelator(window_us=60 * US, max_symptoms=8)
            writer.correlator = correlator
            first = detection(10, "crash", "7", ["n1"], onset=5)
            correlator.admit(first)
            writer.handle([first], at(10))
            writer.record_actions(actions(action(11, first.id, node="n1")))
            writer.update(batch("scheduler", [job(1, "7", "RUNNING", ["n1"])]))
            writer.update(batch("gpu", [gpu(t, "n1", 0, util=1.0) for t in range(0, 200, 10)]))
            writer.update(progress([{"time": at(t), "job_id": "7", "step": t} for t in range(99)]))
            correlator.expire(at(500))
            writer.advance(at(500))
            writer.flush()
            # node_events is the recovery loop's (medic.actions.node_journal) and sweep_points
            # medic sweep's, not the writer's
            others = {"node_events", "sweep_points"}
            return {t: count(store, t) for t in store.tables if t not in others}

    first_run = write_all()
    assert all(first_run.values()), first_run
    assert write_all() == first_run


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from medic.history.store import DuckDBStore
    from tests.history.rows import action, actions

    store = DuckDBStore(sys.argv[1])
    for i in range(10_000):
        store.append("actions", actions(*(action(i, f"d{j}") for j in range(100))))
        print(i, flush=True)
    """
)


def test_a_writer_killed_mid_way_leaves_a_history_that_takes_the_same_rows_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.duckdb"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    for line in child.stdout:  # other output (a library's warning) is not a count
        if line.strip().isdigit() and int(line) >= 5:
            break
    else:
        raise AssertionError(f"the writer ended before 6 appends (exit {child.wait()})")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    with DuckDBStore(path) as store:
        stored = count(store, "actions")
        assert stored % 100 == 0 and stored >= 600
        batches = stored // 100 + 1
        for i in range(batches):
            store.append("actions", actions(*(action(i, f"d{j}") for j in range(100))))
        assert count(store, "actions") == batches * 100


def test_deferred_writes_store_what_immediate_writes_do() -> None:
    """A backtest's history (deferred: appended at flush) is the one the service writes as it
    goes, table by table."""
    from medic.backtest import backtest_recording
    from medic.recording import open_recording
    from tests.conftest import ROOT

    recording = open_recording(ROOT / "datasets" / "oom-s1")
    tables = ("detections", "job_events", "gpu_minutes", "job_progress", "incidents")
    with DuckDBStore() as deferred, DuckDBStore() as immediate:
        backtest_recording(recording, {}, deferred)
        writer = HistoryWriter(immediate)
        pipeline = Pipeline.from_settings({}, responders=[writer], observers=[writer])
        writer.correlator = pipeline.correlator
        pipeline.run(ReplaySource(recording))
        writer.flush()
        for table in tables:
            query = f"SELECT * FROM {table} ORDER BY ALL"
            assert deferred.sql(query) == immediate.sql(query), table
        assert deferred.sql("SELECT count(*) AS n FROM gpu_minutes").column("n")[0].as_py() > 0


def test_a_suspect_and_its_confirmation_are_recorded_with_their_tiers(store: DuckDBStore) -> None:
    import dataclasses

    writer = HistoryWriter(store)
    suspect = dataclasses.replace(detection(30, "hang", "7", onset=12), tier="suspect")
    confirmed = dataclasses.replace(detection(150, "hang", "7", onset=12), tier="confirmed")
    writer.handle([suspect, confirmed], at(150))
    stored = store.sql("SELECT tier, epoch_us(onset) AS onset FROM detections ORDER BY detected_at")
    assert stored.to_pylist() == [
        {"tier": "suspect", "onset": at(12)},
        {"tier": "confirmed", "onset": at(12)},
    ]


def test_a_confirmation_is_news_to_an_incident_that_only_suspected_it() -> None:
    import dataclasses

    correlator = IncidentCorrelator(600 * US, 10)
    suspect = dataclasses.replace(detection(30, "hang", "7"), tier="suspect")
    again = dataclasses.replace(detection(40, "hang", "7"), tier="suspect")
    confirmed = dataclasses.replace(detection(150, "hang", "7"), tier="confirmed")
    late = dataclasses.replace(detection(160, "hang", "7"), tier="suspect")
    assert correlator.admit(suspect) is not None
    assert correlator.admit(again) is None
    admitted = correlator.admit(confirmed)
    assert admitted is not None and admitted.incident == suspect.id
    assert correlator.admit(late) is None
    assert correlator.open["7"].strongest == confirmed
