"""Versioned migrations: from an empty database, re-run, read-only opening, failures."""

from pathlib import Path

import duckdb
import pytest

from medic.history import HistoryError, migrations
from medic.history.migrations import Migration, current_version, latest_version, migrate
from medic.history.store import DuckDBStore
from tests.history.rows import action, actions

VIEWS = {
    "v_incidents",
    "v_time_to_detect",
    "v_time_to_act",
    "v_detections_daily",
    "v_actions_daily",
    "v_node_failures",
    "v_gpu_failures",
    "v_job_restarts",
    "v_job_progress",
    "v_gpu_hours_saved",
}
TABLES = {"detections", "actions", "incidents", "job_events", "job_progress", "gpu_minutes"}


def names(con: duckdb.DuckDBPyConnection, kind: str) -> set[str]:
    rows = con.execute(f"SELECT {kind}_name FROM duckdb_{kind}s() WHERE NOT internal").fetchall()
    return {row[0] for row in rows}


def test_shipped_migrations_are_numbered_from_one_without_gaps() -> None:
    shipped = migrations.migrations()
    assert [m.version for m in shipped] == list(range(1, len(shipped) + 1))
    assert latest_version() == len(shipped) >= 2


def test_an_empty_database_gets_every_migration_in_order() -> None:
    con = duckdb.connect()

    applied = migrate(con, "test")

    assert applied == list(range(1, latest_version() + 1))
    versions = con.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    assert [v for v, _ in versions] == applied
    assert names(con, "table") >= TABLES
    assert names(con, "view") >= VIEWS
    for view in VIEWS:
        con.execute(f"SELECT * FROM {view}").fetchall()


def test_running_the_migrations_again_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    with DuckDBStore(path) as store:
        store.append("actions", actions(action(1, "d1")))
    con = duckdb.connect(str(path))

    assert migrate(con, "test") == []
    assert migrate(con, "test") == []
    assert con.execute("SELECT count(*) FROM schema_version").fetchall() == [(latest_version(),)]
    assert con.execute("SELECT count(*) FROM actions").fetchall() == [(1,)]


def test_a_database_at_an_older_version_is_brought_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    con = duckdb.connect(str(path))
    con.execute(migrations.VERSION_TABLE)
    first = migrations.migrations()[0]
    con.execute(first.sql)
    con.execute("INSERT INTO schema_version VALUES (1, ?, now())", [first.name])
    con.close()

    with DuckDBStore(path) as store:
        assert current_version(store.con) == latest_version()
        assert store.sql("SELECT count(*) AS n FROM v_incidents").column("n")[0].as_py() == 0


def test_read_only_opening_needs_a_current_database(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such database"):
        DuckDBStore(tmp_path / "missing.duckdb", read_only=True)
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute(migrations.VERSION_TABLE)
    con.execute(migrations.migrations()[0].sql)
    con.execute("INSERT INTO schema_version VALUES (1, 'tables', now())")
    con.close()
    with pytest.raises(HistoryError, match="schema version 1, expected"):
        DuckDBStore(old, read_only=True)


def test_a_database_from_a_newer_medic_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    DuckDBStore(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO schema_version VALUES (99, 'future', now())")
    con.close()

    with pytest.raises(HistoryError, match="schema version 99 is newer"):
        DuckDBStore(path)


def test_a_file_that_is_not_a_database_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(HistoryError, match="cannot open") as error:
        DuckDBStore(path)
    assert "\n" not in str(error.value)


def test_a_failing_migration_is_rolled_back_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = [
        *migrations.migrations(),
        Migration(latest_version() + 1, "broken", "CREATE TABLE extra (x INT); SELEC 1;"),
    ]
    monkeypatch.setattr(migrations, "migrations", lambda: broken)
    con = duckdb.connect()

    with pytest.raises(HistoryError, match=r"migration \d+ \(broken\) failed"):
        migrate(con, "test")

    assert current_version(con) == len(broken) - 1
    assert "extra" not in names(con, "table")


def test_a_partial_requeue_counts_as_taken(tmp_path: Path) -> None:
    """A requeue Slurm shows without its exclusion restarted the job all the same."""
    store = DuckDBStore(tmp_path / "history.duckdb")
    store.append(
        "actions",
        actions(
            action(1, "d1", "requeue", job_id="7", status="partial"),
            action(2, "d2", "requeue", job_id="7", status="failed"),
            action(3, "d3", "requeue", job_id="7", status="done"),
        ),
    )
    rows = store.sql("SELECT medic_requeues FROM v_job_restarts WHERE job_id = '7'").to_pylist()
    assert rows == [{"medic_requeues": 2}]
