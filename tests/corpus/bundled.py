"""The bundled recordings' log lines (``datasets/``), for tests that read every line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medic import schema
from medic.recording import find_recordings


def bundled_logs() -> pa.Table:
    """Every log line of the bundled ``datasets/``, one after another a microsecond apart (so
    that a parser's time-sorted output is in line order)."""
    logs = pa.concat_tables(
        schema.conform(pq.read_table(path / "logs.parquet"), schema.LOGS)
        for path in find_recordings([Path(__file__).parents[2] / "datasets"])
    )
    return logs.set_column(0, "time", pa.array(np.arange(logs.num_rows), schema.TIME))
