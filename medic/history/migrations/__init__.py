"""Versioned schema migrations of the history database.

Each ``NNNN_name.sql`` file next to this module is one version (``NNNN``), applied in order, in
its own transaction, and recorded in ``schema_version``; a database already at the newest
version is left as it is, so opening one again changes nothing. A shipped migration is never
edited: a change to the schema is a new file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import duckdb

from medic.errors import exception_line
from medic.history import HistoryError

FILE_NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")
VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name VARCHAR NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL
)
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The shipped migrations, by version (1, 2, ... without gaps)."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    expected = list(range(1, len(found) + 1))
    if [m.version for m in found] != expected:
        raise AssertionError(f"migrations must be numbered 1..{len(found)} without gaps")
    return found


def latest_version() -> int:
    return len(migrations())


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The version a database is at; 0 for an empty one."""
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_version'"
    ).fetchall()
    if not exists[0][0]:
        return 0
    rows = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()
    return int(rows[0][0])


def check_version(con: duckdb.DuckDBPyConnection, where: str) -> int:
    """The database's version; HistoryError when this medic does not know it."""
    version = current_version(con)
    latest = latest_version()
    if version > latest:
        raise HistoryError(
            f"{where}: schema version {version} is newer than this medic knows ({latest})"
        )
    return version


def migrate(con: duckdb.DuckDBPyConnection, where: str) -> list[int]:
    """Apply every migration the database lacks; return the versions applied."""
    version = check_version(con, where)
    con.execute(VERSION_TABLE)
    applied = []
    for migration in migrations()[version:]:
        con.begin()
        try:
            con.execute(migration.sql)
            con.execute(
                "INSERT INTO schema_version VALUES (?, ?, now())",
                [migration.version, migration.name],
            )
            con.commit()
        except duckdb.Error as exc:
            con.rollback()
            first = exception_line(exc)
            raise HistoryError(
                f"{where}: migration {migration.version} ({migration.name}) failed: {first}"
            ) from None
        applied.append(migration.version)
    if applied:
        con.execute("CHECKPOINT")  # a schema change replayed from the WAL can fail to rebind
    return applied
