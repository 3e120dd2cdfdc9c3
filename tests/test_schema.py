from pathlib import Path

import pyarrow as pa
import pytest

from medic import schema
from medic.testing.builders import T0, table


@pytest.mark.parametrize("name", sorted(schema.SCHEMAS))
def test_every_schema_round_trips_through_conform(name: str) -> None:
    empty = schema.empty(schema.SCHEMAS[name])
    assert schema.conform(empty, schema.SCHEMAS[name]).schema == schema.SCHEMAS[name]


def test_conform_accepts_ns_large_strings_and_missing_optional_columns() -> None:
    raw = pa.table(
        {
            "time": pa.array([T0 * 1000 + 999], pa.timestamp("ns", tz="UTC")),
            "node": pa.array(["n1"], pa.large_string()),
            "source": ["app"],
            "message": ["hello"],
            "unknown_extra": [1],
        }
    )
    out = schema.conform(raw, schema.LOGS)
    assert out.schema == schema.LOGS
    assert out.column("time").cast(pa.int64()).to_pylist() == [T0]
    assert out.column("job_id").null_count == 1


def test_conform_names_the_bad_column() -> None:
    bad = table("logs", [{"time": T0, "node": "n", "source": "app", "message": "m"}])
    bad = bad.set_column(5, "message", pa.array([3], pa.int64()))
    with pytest.raises(schema.SchemaError, match="column 'message' has type int64"):
        schema.conform(bad, schema.LOGS)


def test_conform_rejects_nulls_in_required_columns() -> None:
    raw = pa.table(
        {"time": pa.array([T0], schema.TIME), "node": [None], "source": ["app"], "message": ["m"]}
    )
    with pytest.raises(schema.SchemaError, match="'node'"):
        schema.conform(raw, schema.LOGS)


def test_conform_rejects_a_time_column_without_utc() -> None:
    raw = pa.table(
        {
            "time": pa.array([T0], pa.timestamp("us")),
            "node": ["n"],
            "source": ["app"],
            "message": ["m"],
        }
    )
    with pytest.raises(schema.SchemaError, match="expected timestamp"):
        schema.conform(raw, schema.LOGS)


def test_the_recording_format_documents_every_kind_and_its_horizon() -> None:
    """``medic/kinds.toml`` is the machine copy of the format's kind table and horizons: the
    users' document names each kind, and its horizon beside it in the scoring rules."""
    doc = (Path(__file__).parents[1] / "docs" / "recording-format.md").read_text()
    table = doc.split("## Detection kinds", 1)[1].split("\n## ", 1)[0]
    rules = " ".join(doc.split("- A label is *detected*", 1)[1].split("- *Latency*", 1)[0].split())
    for kind, horizon in schema.KIND_HORIZONS_S.items():
        assert f"| `{kind}`" in table, kind
        # "H = 900 s for `crash`, `gpu_fault` and ...": the last "N s for" before the kind.
        stated = rules.split(f"`{kind}`", 1)[0].rsplit(" s for ", 1)[0].rsplit(" ", 1)[-1]
        assert float(stated) == horizon, kind
