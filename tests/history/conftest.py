from collections.abc import Iterator

import pytest

from medic.history.store import DuckDBStore


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[DuckDBStore]:
    """Both backends: the in-memory database and a database file."""
    opened = DuckDBStore(None if request.param == "memory" else tmp_path / "history.duckdb")
    yield opened
    opened.close()
