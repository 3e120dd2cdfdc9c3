"""The history store: ``append(table, rows)`` and ``sql(query) -> pyarrow.Table``.

``DuckDBStore`` keeps the history in a DuckDB database file, or in memory when it is given no
path (backtests, notebooks, tests); both run the same migrations and views. Appends are
idempotent: a row whose key (``history_tables.key_columns``) is already stored, or repeated in
the same append, is skipped, so a service killed mid-way can write the same rows again after a
restart. The check is an anti-join against the stored rows in the appended time range, which
DuckDB's min/max zone maps keep cheap on a table that grows in time order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from medic.errors import exception_line
from medic.history import HistoryError
from medic.history.migrations import check_version, latest_version, migrate

INCOMING = "_medic_incoming"


class HistoryStore(Protocol):
    """What the writers and the report need from a history backend."""

    def append(self, table: str, rows: pa.Table | pa.RecordBatch) -> int:
        """Insert the rows whose key is new; return how many were inserted."""
        ...

    def sql(self, query: str, params: Sequence[Any] = ()) -> pa.Table: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TableSpec:
    """How rows of one history table are ordered and identified."""

    name: str
    time_column: str
    key_columns: tuple[str, ...]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DuckDBStore:
    """History in a DuckDB database: a file, or memory when ``path`` is None.

    Opened for writing, the database is created or migrated to the newest schema; opened
    ``read_only`` (the report, while nothing else writes it), it must already be current.
    """

    def __init__(self, path: Path | str | None = None, read_only: bool = False) -> None:
        self.where = "history (in memory)" if path is None else f"history {path}"
        read_only = read_only and path is not None
        if read_only and not Path(str(path)).exists():
            raise HistoryError(f"{self.where}: no such database")
        try:
            self.con = duckdb.connect(
                ":memory:" if path is None else str(path), read_only=read_only
            )
        except duckdb.Error as exc:
            raise HistoryError(f"{self.where}: cannot open ({exception_line(exc)})") from None
        try:
            self.con.execute("SET TimeZone = 'UTC'")
            if read_only:
                version = check_version(self.con, self.where)
                if version < latest_version():
                    raise HistoryError(
                        f"{self.where}: schema version {version}, expected {latest_version()} "
                        "(open it once for writing, e.g. with `medic history import`, to migrate)"
                    )
            else:
                migrate(self.con, self.where)
            self.tables = self._read_specs()
        except duckdb.Error as exc:
            self.con.close()
            why = exception_line(exc)
            raise HistoryError(f"{self.where}: not a medic history ({why})") from None
        except HistoryError:
            self.con.close()
            raise

    def _read_specs(self) -> dict[str, TableSpec]:
        rows = self.con.execute(
            "SELECT name, time_column, key_columns FROM history_tables ORDER BY name"
        ).fetchall()
        return {name: TableSpec(name, time, tuple(keys)) for name, time, keys in rows}

    def append(self, table: str, rows: pa.Table | pa.RecordBatch) -> int:
        spec = self.tables.get(table)
        if spec is None:
            known = ", ".join(self.tables)
            raise HistoryError(f"{self.where}: unknown table '{table}' (known: {known})")
        if rows.num_rows == 0:
            return 0
        missing = [key for key in spec.key_columns if key not in rows.schema.names]
        if missing:
            raise HistoryError(f"{self.where}: rows for '{table}' lack key column '{missing[0]}'")
        keys = ", ".join(map(_quote, spec.key_columns))
        same = " AND ".join(
            f"n.{_quote(k)} IS NOT DISTINCT FROM o.{_quote(k)}" for k in spec.key_columns
        )
        time = _quote(spec.time_column)
        query = f"""
            INSERT INTO {_quote(table)} BY NAME
            SELECT n.* FROM (SELECT DISTINCT ON ({keys}) * FROM {INCOMING}) n
            ANTI JOIN (
                SELECT {keys} FROM {_quote(table)}
                WHERE {time} BETWEEN (SELECT min({time}) FROM {INCOMING})
                                 AND (SELECT max({time}) FROM {INCOMING})
            ) o ON {same}
            ORDER BY n.{time}
        """
        try:
            self.con.register(INCOMING, rows)
            try:
                inserted = self.con.execute(query).fetchall()
            finally:
                self.con.unregister(INCOMING)
        except duckdb.Error as exc:
            raise HistoryError(
                f"{self.where}: cannot append to '{table}': {exception_line(exc)}"
            ) from None
        return int(inserted[0][0])

    def sql(self, query: str, params: Sequence[Any] = ()) -> pa.Table:
        try:
            return self.con.sql(query, params=list(params) or None).to_arrow_table()
        except duckdb.Error as exc:
            raise HistoryError(f"{self.where}: query failed: {exception_line(exc)}") from None

    def close(self) -> None:
        self.con.close()

    def cursor(self) -> DuckDBStore:
        """Another connection to the same database, for another thread of this process (the
        service's report while its pipeline writes); close it when done."""
        other = object.__new__(DuckDBStore)
        other.where, other.tables, other.con = self.where, self.tables, self.con.cursor()
        return other

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
