"""History writes: GPU telemetry through the HistoryWriter into a DuckDB file, per minute.

A synthetic cluster of ``--gpus`` GPUs reports every 10 s for ``--minutes`` minutes, one batch
per scrape (what a Prometheus/NVML source hands the pipeline). Printed, each against a baseline
run in the same process:

1. writer: batches through ``HistoryWriter.update`` (minute buffers, polars aggregation,
   idempotent append) vs the baseline: one polars ``group_by`` of all rows plus a plain DuckDB
   ``INSERT`` of the summaries (no buffering, no duplicate check);
2. restart: writing the same rows again (every row already stored, none inserted);
3. append into a grown table: one minute of summaries appended to a table already holding
   ``--history-minutes`` minutes vs into an empty table (the duplicate check reads only the
   appended time range, so the ratio should stay near 1);
4. the report (every view) on the grown database.

    POLARS_MAX_THREADS=1 .venv/bin/python bench/history_write.py --gpus 8192 --minutes 10
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema
from medic.history.config import HistoryConfig
from medic.history.report import build_report
from medic.history.rollup import GPU_ROLLUP
from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter
from medic.ingest.base import Batch
from medic.timeutil import US, to_us

T0 = to_us("2026-03-01T00:00:00Z")
SCRAPE_S = 10


def scrape(gpus: int, t_us: int, rng: np.random.Generator) -> pa.Table:
    nodes = np.arange(gpus) // 8
    columns = {
        "time": pa.array(np.full(gpus, t_us), schema.TIME),
        "node": pa.array([f"node{n:05d}" for n in nodes]),
        "gpu": pa.array(np.arange(gpus) % 8, pa.int16()),
        "job_id": pa.array([str(1000 + n // 16) for n in nodes]),
        "util": pa.array(rng.uniform(0, 100, gpus), pa.float32()),
        "power_w": pa.array(rng.uniform(100, 700, gpus), pa.float32()),
        "temp_c": pa.array(rng.uniform(30, 80, gpus), pa.float32()),
        "sm_clock_mhz": pa.array(rng.uniform(1400, 1980, gpus), pa.float32()),
        "ecc_dbe": pa.array(np.zeros(gpus, np.int64)),
        "nvlink_errors": pa.array(np.zeros(gpus, np.int64)),
    }
    return schema.conform(pa.table(columns), schema.GPU)


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=8192)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--history-minutes", type=int, default=240)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    steps = args.minutes * 60 // SCRAPE_S
    batches = [scrape(args.gpus, T0 + i * SCRAPE_S * US, rng) for i in range(steps)]
    rows = sum(b.num_rows for b in batches)
    tmp = Path(tempfile.mkdtemp(prefix="medic-bench-"))

    def aggregate_and_insert() -> None:
        frame = pl.from_arrow(pa.concat_tables(batches))
        assert isinstance(frame, pl.DataFrame)
        summary = GPU_ROLLUP.summarise(GPU_ROLLUP.read(frame)).to_arrow()
        con = duckdb.connect(str(tmp / "baseline.duckdb"))
        con.register("summary", summary)
        con.execute("CREATE TABLE gpu_minutes AS SELECT * FROM summary LIMIT 0")
        con.execute("INSERT INTO gpu_minutes SELECT * FROM summary")
        con.close()

    store = DuckDBStore(tmp / "history.duckdb")
    writer = HistoryWriter(store, HistoryConfig(lateness_s=0))

    def write() -> None:
        for table in batches:
            writer.update(Batch("gpu", table))
        writer.flush()

    base_s = timed(aggregate_and_insert)
    write_s = timed(write)
    written = writer.written["gpu_minutes"]
    print(f"telemetry: {rows:,} rows, {args.gpus:,} GPUs, {args.minutes} min -> {written:,} rows")
    print(f"  writer     {write_s:7.2f} s  {rows / write_s:12,.0f} rows/s")
    print(f"  baseline   {base_s:7.2f} s  {rows / base_s:12,.0f} rows/s")
    print(f"  ratio writer/baseline: {write_s / base_s:.2f}")

    again = HistoryWriter(store, HistoryConfig(lateness_s=0))

    def write_again() -> None:
        for table in batches:
            again.update(Batch("gpu", table))
        again.flush()

    restart_s = timed(write_again)
    assert again.written["gpu_minutes"] == 0
    print(f"restart (same rows again, {again.skipped['gpu_minutes']:,} skipped):")
    print(f"  {restart_s:7.2f} s, ratio to first write: {restart_s / write_s:.2f}")

    minute = GPU_ROLLUP.summarise(GPU_ROLLUP.read(pl.DataFrame(batches[0])))
    empty = DuckDBStore(tmp / "empty.duckdb")
    empty_s = timed(lambda: empty.append("gpu_minutes", minute.to_arrow()))
    grown = store
    for m in range(args.history_minutes):
        shifted = minute.with_columns(pl.col("minute") + pl.duration(minutes=m + args.minutes))
        grown.append("gpu_minutes", shifted.to_arrow())
    later = minute.with_columns(
        pl.col("minute") + pl.duration(minutes=args.minutes + args.history_minutes)
    )
    grown_s = timed(lambda: grown.append("gpu_minutes", later.to_arrow()))
    total = grown.sql("SELECT count(*) AS n FROM gpu_minutes").column("n")[0].as_py()
    print(f"append one minute ({minute.height:,} rows):")
    print(
        f"  into empty table {empty_s * 1000:7.1f} ms; into {total:,} rows {grown_s * 1000:7.1f} ms"
    )
    print(f"  ratio grown/empty: {grown_s / empty_s:.2f}")

    report_s = timed(lambda: build_report(grown, HistoryConfig()))
    print(f"report on {total:,} GPU-minutes: {report_s:.2f} s")
    store.close()
    empty.close()


if __name__ == "__main__":
    main()
