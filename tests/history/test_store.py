"""The history store contract, run against both backends (memory and file)."""

import dataclasses

import pyarrow as pa
import pytest

from medic import schema
from medic.history import HistoryError
from medic.history.store import DuckDBStore
from medic.history.writer import detection_rows
from medic.testing.builders import at
from tests.history.rows import action, actions, detection


def test_append_returns_rows_inserted_and_sql_reads_them_back(store: DuckDBStore) -> None:
    rows = actions(action(1, "d1", node="n1"), action(2, "d1", "requeue"))

    assert store.append("actions", rows) == 2

    back = store.sql("SELECT time, action, node FROM actions ORDER BY time")
    assert back.column("action").to_pylist() == ["drain", "requeue"]
    assert back.column("node").to_pylist() == ["n1", None]
    assert back.schema.field("time").type == schema.TIME


def test_appending_rows_again_inserts_nothing(store: DuckDBStore) -> None:
    rows = actions(action(1, "d1", node="n1"), action(2, "d1", "requeue"))
    store.append("actions", rows)

    assert store.append("actions", rows) == 0
    assert store.sql("SELECT count(*) AS n FROM actions").column("n")[0].as_py() == 2


def test_rows_repeated_within_one_append_are_stored_once(store: DuckDBStore) -> None:
    row = action(1, "d1", node=None, job_id=None)
    assert store.append("actions", actions(row, row, row)) == 1


def test_rows_differing_in_a_key_column_are_all_kept(store: DuckDBStore) -> None:
    store.append("actions", actions(action(1, "d1", status="failed")))

    inserted = store.append(
        "actions", actions(action(1, "d1", status="done"), action(1, "d1", node="n2"))
    )

    assert inserted == 2


def test_a_batch_overlapping_stored_rows_inserts_only_the_new_ones(store: DuckDBStore) -> None:
    store.append("actions", actions(action(1, "d1"), action(2, "d1")))

    inserted = store.append("actions", actions(action(2, "d1"), action(3, "d1"), action(0, "d1")))

    assert inserted == 2
    times = store.sql("SELECT epoch_us(time) AS t FROM actions ORDER BY t").column("t")
    assert times.to_pylist() == [at(0), at(1), at(2), at(3)]


def test_record_batches_and_empty_tables_are_accepted(store: DuckDBStore) -> None:
    batch = actions(action(1, "d1")).to_batches()[0]
    assert store.append("actions", batch) == 1
    assert store.append("actions", schema.empty(schema.ACTIONS)) == 0


def test_detection_ids_match_the_pipelines(store: DuckDBStore) -> None:
    found = [detection(5, "hang", "7", ["n1"]), detection(6, "crash", None)]

    store.append("detections", detection_rows(found))

    stored = store.sql("SELECT id FROM detections ORDER BY detected_at").column("id").to_pylist()
    assert stored == [d.id for d in found]


def test_unknown_table_is_a_one_line_error(store: DuckDBStore) -> None:
    with pytest.raises(HistoryError, match="unknown table 'nope'") as error:
        store.append("nope", actions(action(1, "d1")))
    assert "\n" not in str(error.value)


def test_rows_without_a_key_column_are_refused(store: DuckDBStore) -> None:
    rows = actions(action(1, "d1")).drop_columns(["status"])
    with pytest.raises(HistoryError, match="lack key column 'status'"):
        store.append("actions", rows)


def test_rows_with_unknown_columns_or_wrong_types_are_one_line_errors(
    store: DuckDBStore,
) -> None:
    extra = actions(action(1, "d1")).append_column("colour", pa.array(["red"]))
    with pytest.raises(HistoryError, match="cannot append to 'actions'") as error:
        store.append("actions", extra)
    assert "\n" not in str(error.value)
    rows = actions(action(1, "d1"))
    bad_time = rows.set_column(0, "time", pa.array(["yesterday"]))
    with pytest.raises(HistoryError, match="cannot append"):
        store.append("actions", bad_time)
    assert store.sql("SELECT count(*) AS n FROM actions").column("n")[0].as_py() == 0


def test_a_missing_not_null_column_is_refused_and_nothing_is_written(
    store: DuckDBStore,
) -> None:
    rows = actions(action(1, "d1"), action(2, "d1")).drop_columns(["reason"])
    with pytest.raises(HistoryError, match="cannot append"):
        store.append("actions", rows)
    assert store.sql("SELECT count(*) AS n FROM actions").column("n")[0].as_py() == 0


def test_sql_takes_parameters_and_reports_errors_in_one_line(store: DuckDBStore) -> None:
    assert store.sql("SELECT ? + 1 AS n", [41]).column("n")[0].as_py() == 42
    with pytest.raises(HistoryError, match="query failed") as error:
        store.sql("SELECT * FROM no_such_table")
    assert "\n" not in str(error.value)


def test_every_history_table_has_its_key_and_time_columns(store: DuckDBStore) -> None:
    for spec in store.tables.values():
        columns = store.sql(f"SELECT * FROM {spec.name} LIMIT 0").schema.names
        assert spec.time_column in spec.key_columns
        assert set(spec.key_columns) <= set(columns), spec.name


def test_a_detection_keeps_its_calibrated_and_its_raw_score(store: DuckDBStore) -> None:
    calibrated = dataclasses.replace(detection(5, "hang"), score=0.97, raw_score=0.62)
    store.append("detections", detection_rows([calibrated, detection(6)]))

    back = store.sql("SELECT score, raw_score FROM detections ORDER BY detected_at")

    assert back.column("score").to_pylist() == [0.97, 1.0]
    assert back.column("raw_score").to_pylist() == [0.62, 1.0]
