"""Per-minute summaries of high-rate streams (GPU telemetry, training progress), in polars.

A ``MinuteBuffer`` holds the rows of the minutes still open for one stream; once event time has
passed a minute's end, ``close`` hands out that minute aggregated per entity with one
``group_by``. State is bounded by the rows of the open minutes. Batches are kept as they come
and read (columns selected and cast, minute assigned) once per close, over all of them at once:
a replay hands over a batch per second of event time, and reading each alone cost more than the
aggregation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from medic.timeutil import US

MINUTE_US = 60 * US
TIME = pl.Datetime("us", "UTC")


@dataclass(frozen=True)
class Rollup:
    """How one stream is summarised per entity per minute into one history table."""

    table: str
    keys: tuple[str, ...]
    """Entity columns: a row without them is not summarised."""
    columns: Mapping[str, pl.DataType]
    """Columns read, besides ``time``; a column the stream lacks is read as nulls."""
    aggregates: tuple[pl.Expr, ...]

    def read(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The columns this rollup reads plus ``minute``, rows without time or keys dropped."""
        if "time" not in frame.columns:
            raise ValueError(f"{self.table}: rows have no 'time' column")
        present = set(frame.columns)
        selected = frame.select(
            pl.col("time").cast(TIME),
            *(
                pl.col(name).cast(dtype, strict=False)
                if name in present
                else pl.lit(None, dtype).alias(name)
                for name, dtype in self.columns.items()
            ),
        )
        return selected.drop_nulls(["time", *self.keys]).with_columns(
            pl.col("time").dt.truncate("1m").alias("minute")
        )

    def summarise(self, rows: pl.DataFrame) -> pl.DataFrame:
        return rows.group_by("minute", *self.keys).agg(*self.aggregates).sort("minute", *self.keys)


GPU_ROLLUP = Rollup(
    table="gpu_minutes",
    keys=("node", "gpu"),
    columns={
        "node": pl.String(),
        "gpu": pl.Int16(),
        "job_id": pl.String(),
        "util": pl.Float32(),
        "mem_used_mib": pl.Float32(),
        "power_w": pl.Float32(),
        "temp_c": pl.Float32(),
        "sm_clock_mhz": pl.Float32(),
        "throttle_reasons": pl.Int64(),
        "ecc_dbe": pl.Int64(),
        "ecc_sbe": pl.Int64(),
        "xid": pl.Int32(),
        "pcie_replay": pl.Int64(),
        "nvlink_errors": pl.Int64(),
    },
    aggregates=(
        pl.len().alias("samples"),
        # The job holding the GPU; the greatest id should it change within the minute.
        pl.col("job_id").max(),
        pl.col("util").mean().alias("util_mean"),
        pl.col("util").max().alias("util_max"),
        pl.col("mem_used_mib").max().alias("mem_used_max_mib"),
        pl.col("power_w").mean().alias("power_mean_w"),
        pl.col("power_w").max().alias("power_max_w"),
        pl.col("temp_c").mean().alias("temp_mean_c"),
        pl.col("temp_c").max().alias("temp_max_c"),
        pl.col("sm_clock_mhz").min().alias("sm_clock_min_mhz"),
        pl.col("throttle_reasons").bitwise_or(),
        pl.col("ecc_dbe").max().alias("ecc_dbe_max"),
        pl.col("ecc_sbe").max().alias("ecc_sbe_max"),
        pl.col("pcie_replay").max().alias("pcie_replay_max"),
        pl.col("nvlink_errors").max().alias("nvlink_errors_max"),
        pl.col("xid").drop_nulls().unique().sort().alias("xids"),
    ),
)

# The derived "progress" stream (medic.parse.progress): one row per progress event. Read:
# job_id, node, rank, framework, event, step, step_time_s, throughput; any may be absent. A row
# is a training step when its event is "step" (or there is no event column).
IS_STEP = pl.col("event").is_null() | (pl.col("event") == "step")
PROGRESS_ROLLUP = Rollup(
    table="job_progress",
    keys=("job_id",),
    columns={
        "job_id": pl.String(),
        "node": pl.String(),
        "rank": pl.Int32(),
        "framework": pl.String(),
        "event": pl.String(),
        "step": pl.Int64(),
        "step_time_s": pl.Float64(),
        "throughput": pl.Float64(),
    },
    aggregates=(
        pl.col("framework").max(),
        pl.col("step").filter(IS_STEP).min().alias("first_step"),
        pl.col("step").filter(IS_STEP).max().alias("last_step"),
        pl.col("step").filter(IS_STEP).count().alias("step_events"),
        pl.col("step_time_s").filter(IS_STEP).median().alias("median_step_time_s"),
        pl.col("throughput").filter(IS_STEP).median().alias("median_throughput"),
        pl.col("rank").drop_nulls().n_unique().alias("ranks"),
        pl.col("node").drop_nulls().n_unique().alias("nodes"),
        pl.col("event").filter(~IS_STEP).unique().sort().alias("phases"),
    ),
)


class MinuteBuffer:
    """Rows of the minutes not yet summarised, for one rollup."""

    def __init__(self, rollup: Rollup) -> None:
        self.rollup = rollup
        self._frames: dict[tuple[tuple[str, pl.DataType], ...], list[pl.DataFrame]] = {}
        """Batches as they came, by schema (a vertical concat needs one schema)."""
        self._oldest: int | None = None
        self.sealed: int | None = None
        """End of the newest minute summarised (µs): a row before it is late."""
        self.late = 0
        """Rows that came for a minute already closed: left out of its summary, counted."""

    @property
    def rows(self) -> int:
        return sum(frame.height for frames in self._frames.values() for frame in frames)

    def add(self, frame: pl.DataFrame) -> None:
        if "time" not in frame.columns:
            raise ValueError(f"{self.rollup.table}: rows have no 'time' column")
        schema = frame.schema
        if not isinstance(schema["time"], pl.Datetime):
            frame = frame.with_columns(pl.col("time").cast(TIME))
        keyless = any(
            key not in schema or frame.get_column(key).null_count() == frame.height
            for key in ("time", *self.rollup.keys)
        )
        if frame.is_empty() or keyless:
            return
        if self.sealed is not None:
            on_time = pl.col("time").dt.epoch("us") >= self.sealed
            late = frame.height - frame.select(on_time.sum()).item()
            if late:
                self.late += late
                frame = frame.filter(on_time)
                if frame.is_empty():
                    return
        self._frames.setdefault(tuple(schema.items()), []).append(frame)
        if self._oldest is None:
            # Batches come in time order: the first after a close holds the oldest open minute.
            # A late row older than it, in a minute not yet closed, is summarised at the next.
            self._oldest = _oldest_minute(frame)

    def close(self, before: int | None = None) -> pl.DataFrame | None:
        """Summaries of the buffered minutes that ended at or before event time ``before``
        (every buffered minute when None); None when there are none. Rows that come later for
        a minute up to the newest one summarised are late (``late``): its summary is written."""
        if self._oldest is None or (before is not None and self._oldest + MINUTE_US > before):
            return None
        rows = pl.concat([self.rollup.read(pl.concat(part)) for part in self._frames.values()])
        if before is None:
            done, kept = rows, rows.clear()
        else:
            ended = pl.col("minute").dt.epoch("us") + MINUTE_US <= before
            done, kept = rows.filter(ended), rows.filter(~ended)
        kept = kept.drop("minute")
        self._frames = {tuple(kept.schema.items()): [kept]} if kept.height else {}
        self._oldest = _oldest_minute(kept) if kept.height else None
        if done.is_empty():
            return None
        newest = done.get_column("minute").dt.epoch("us").max()
        assert isinstance(newest, int)
        self.sealed = max(self.sealed or 0, newest + MINUTE_US)
        return self.rollup.summarise(done)


def _oldest_minute(rows: pl.DataFrame) -> int:
    oldest = rows.get_column("time").cast(TIME).dt.epoch("us").min()
    assert isinstance(oldest, int)
    return oldest // MINUTE_US * MINUTE_US
