"""GPU telemetry folded into fixed windows of event time, one row per job, node and GPU.

Detectors that compare GPUs (peers within a job) or watch a job's GPUs over a silence do not
need every 1 Hz sample: ``GpuWindows`` keeps the batches of the window being filled and, once
the watermark passes the window's end, reads their rows in one query and reduces them in one
polars aggregation to per-GPU means of the metrics its owner asked for, the share of samples
with slowdown throttle reasons set, the samples carrying an Xid, and how much cumulative error
counters rose. Rows without a job id are given the job Slurm placed on their node when the
batch came. State is the open window's batches plus one row of counters per GPU, freed with
``forget`` when a job ends.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from medic.detectors.jobs import JobTracker
from medic.frames import collect, replaced, times_us

KEYS = ["job_id", "node", "gpu"]
COUNTERS = ("pcie_replay", "nvlink_errors", "ecc_dbe")
DEFAULT_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""NVML clocks-event reasons that slow a GPU: SW power cap, HW slowdown, SW thermal, HW thermal,
HW power brake (nvml.h ``nvmlClocksEventReason*``); idle and application-clock bits are not."""
GPU_IDLE_REASON = 0x1
"""NVML's ``nvmlClocksEventReasonGpuIdle``: nothing runs on the GPU and its clocks drop to idle."""


@dataclass(frozen=True)
class Window:
    """One closed window: per-GPU aggregates of the samples with start <= time < end."""

    start: int
    end: int
    gpus: pl.DataFrame
    """Columns: job_id, node, gpu, ``samples`` (how many), the mean of every requested metric,
    ``throttled`` (share of samples with a slowdown reason set) and ``xid`` (samples carrying
    an Xid, other than the ``benign_xids`` given) when requested, and ``<counter>_delta`` (rise
    since the GPU's previous window, never negative)."""


@dataclass(frozen=True)
class _Arrival:
    """A gpu batch added to the windows, with the placement and jobs it was added under."""

    frame: pl.DataFrame
    placement: pl.DataFrame | None
    jobs: frozenset[str] | None
    """Only these jobs' rows are kept (None: every job's)."""
    forgotten: frozenset[str] = frozenset()
    """Jobs forgotten since the batch arrived: their rows are not kept."""

    def without(self, ended: frozenset[str]) -> _Arrival:
        if self.jobs is not None:
            return dataclasses.replace(self, jobs=self.jobs - ended)
        return dataclasses.replace(self, forgotten=self.forgotten | ended)


def node_jobs(tracker: JobTracker) -> pl.DataFrame:
    """node -> job for running jobs whose allocation Slurm reported (a node shared by several
    running jobs is left out: its unlabelled rows cannot be attributed)."""
    pairs = [(node, j.job_id) for j in tracker.jobs.values() if j.on_nodes for node in j.nodes]
    frame = pl.DataFrame(pairs, schema={"node": pl.String, "job_id": pl.String}, orient="row")
    return frame.filter(pl.len().over("node") == 1)


class GpuWindows:
    """Windows of per-GPU aggregates of the metrics one detector needs."""

    def __init__(
        self,
        window_s: float,
        means: Sequence[str],
        counters: Sequence[str] = (),
        throttle_mask: int | None = None,
        xid: bool = False,
        benign_xids: Sequence[int] = (),
        sample_s: float | None = None,
    ) -> None:
        if window_s <= 0 or (sample_s is not None and not 0 < sample_s <= window_s):
            raise ValueError("window_s must be positive and sample_s within (0, window_s]")
        self.window_us = round(window_s * 1_000_000)
        self.sample_us = self.window_us if sample_s is None else round(sample_s * 1_000_000)
        self.means = list(means)
        self.counters = list(counters)
        self.throttle_mask = throttle_mask
        self.xid = xid
        self._columns = [pl.col("time").to_physical(), *KEYS, *self.means, *self.counters]
        """What a window keeps of each sample."""
        self._inputs = ["time", *KEYS, *self.means, *self.counters]
        """The columns of a sample that it is made from."""
        if throttle_mask is not None:
            throttled = (pl.col("throttle_reasons") & throttle_mask) != 0
            self._columns.append(throttled.cast(pl.Float32).alias("throttled"))
            self._inputs.append("throttle_reasons")
        if xid:
            counted = pl.col("xid").is_not_null() & ~pl.col("xid").is_in(list(benign_xids))
            self._columns.append(counted.cast(pl.Int32).alias("xid"))
            self._inputs.append("xid")
        aggregations = [pl.len().cast(pl.Int64).alias("samples")]
        aggregations += [pl.col(c).mean() for c in self.means]
        if throttle_mask is not None:
            aggregations.append(pl.col("throttled").mean())
        if xid:
            aggregations.append(pl.col("xid").sum())
        aggregations += [pl.col(c).max().alias(f"max_{c}") for c in self.counters]
        self._aggregations = aggregations
        """A window's per-GPU reductions (built once: building expressions costs more than
        running them on a window of a few jobs)."""
        self._deltas = [
            (pl.col(f"max_{c}") - pl.coalesce(f"last_{c}", f"max_{c}"))
            .clip(lower_bound=0)
            .fill_null(0)
            .alias(f"{c}_delta")
            for c in self.counters
        ]
        self._seen = [
            *KEYS,
            *(pl.coalesce(f"max_{c}", f"last_{c}").alias(f"last_{c}") for c in self.counters),
        ]
        self._kept = list(self._empty().columns)
        self._pending: list[pl.DataFrame] = []
        """Rows kept, of windows not closed yet."""
        self._arrived: list[_Arrival] = []
        """Batches added since rows were last kept: reduced to rows in one query per window
        (a query per one-second batch costs more than the rows it reads)."""
        self._window_end: int | None = None
        self._earliest_end: int | None = None
        """The end of the window of the oldest arrival: no window closes before it."""
        self._last = pl.DataFrame(
            schema={"job_id": pl.String, "node": pl.String, "gpu": pl.Int16}
            | {f"last_{c}": pl.Int64 for c in self.counters}
        )

    def state_size(self) -> int:
        return int(self._last.height)

    def add(
        self,
        frame: pl.DataFrame,
        placement: pl.DataFrame | None = None,
        jobs: Collection[str] | None = None,
    ) -> None:
        """Keep a gpu batch's rows (of ``jobs`` only, when given) for the windows they fall in;
        ``placement`` (node -> job_id) labels rows that came without a job id. Both are taken
        as they are now, though the rows are read when a window closes."""
        if frame.is_empty() or (jobs is not None and not jobs):
            return
        if self.sample_us < self.window_us:
            sampled = self._sampled(frame)
            if sampled is None or sampled.is_empty():
                return
            frame = sampled
        if placement is not None and placement.is_empty():
            placement = None
        wanted = None if jobs is None else frozenset(jobs)
        self._arrived.append(_Arrival(frame, placement, wanted))
        if self._earliest_end is None:
            first = int(times_us(frame).min())
            self._earliest_end = (first // self.window_us + 1) * self.window_us

    def _sampled(self, frame: pl.DataFrame) -> pl.DataFrame | None:
        """Only the rows in the first ``sample_s`` of their window (None: none); a batch within
        one window is kept or dropped whole without looking at its rows."""
        times = times_us(frame)
        first, last = int(times.min()), int(times.max())
        if first // self.window_us == last // self.window_us:
            if first % self.window_us >= self.sample_us:
                return None
            if last % self.window_us < self.sample_us:
                return frame
        return frame.filter(pl.Series(times % self.window_us < self.sample_us))

    def _keep_arrived(self) -> None:
        """Reduce the batches added since last time to the rows a window keeps: one query per
        run of batches added with the same placement and jobs."""
        arrived, self._arrived, self._earliest_end = self._arrived, [], None
        runs = itertools.groupby(arrived, key=lambda a: (id(a.placement), a.jobs, a.forgotten))
        for _, run in runs:
            batch = list(run)
            rows = self._rows(pl.concat([a.frame for a in batch]), batch[0])
            if rows.is_empty():
                continue
            if self._window_end is None:
                first = int(rows.get_column("time").min())  # type: ignore[arg-type]
                self._window_end = (first // self.window_us + 1) * self.window_us
            self._pending.append(rows)

    def _rows(self, frame: pl.DataFrame, arrival: _Arrival) -> pl.DataFrame:
        query = frame.lazy().select(self._inputs)
        jobs = arrival.jobs
        placement = arrival.placement
        if placement is not None and frame.get_column("job_id").null_count() > 0:
            if jobs is not None:  # only unlabelled rows may still turn out to be wanted
                query = query.filter(pl.col("job_id").is_null() | pl.col("job_id").is_in(jobs))
            query = query.join(
                placement.lazy().rename({"job_id": "placed_job"}),
                on="node",
                how="left",
                maintain_order="left",
            ).with_columns(pl.coalesce("job_id", "placed_job").alias("job_id"))
        wanted = pl.col("job_id").is_not_null() if jobs is None else pl.col("job_id").is_in(jobs)
        if arrival.forgotten:
            wanted = wanted & ~pl.col("job_id").is_in(arrival.forgotten)
        return collect(query.filter(wanted).select(self._columns))

    def close(self, now: int, empty: bool = True) -> list[Window]:
        """Every window that ends at or before ``now``, oldest first (empty ones included
        unless ``empty`` is False: then a run of windows without rows is passed over at once,
        as a watcher of a few jobs goes through most windows with none)."""
        end = self._window_end if self._window_end is not None else self._earliest_end
        if end is None or now < end:
            return []
        self._keep_arrived()
        if self._window_end is None or now < self._window_end:
            return []
        pending = pl.concat(self._pending) if self._pending else None
        closed = []
        while self._window_end <= now:
            end = self._window_end
            if pending is None and not empty:
                self._window_end += ((now - end) // self.window_us + 1) * self.window_us
                break
            inside = None
            if pending is not None:
                inside, pending = _split_at(pending, end)
            if empty or (inside is not None and not inside.is_empty()):
                closed.append(Window(end - self.window_us, end, self._aggregate(inside)))
            self._window_end = end + self.window_us
        self._pending = [pending] if pending is not None and not pending.is_empty() else []
        return closed

    def forget(self, job_ids: Iterable[str]) -> None:
        ended = list(job_ids)
        if not ended:
            return
        gone = frozenset(ended)
        kept = (arrival.without(gone) for arrival in self._arrived)
        self._arrived = [a for a in kept if a.jobs is None or a.jobs]
        if not self._arrived:
            self._earliest_end = None
        self._last = self._last.filter(~pl.col("job_id").is_in(ended))
        self._pending = [f.filter(~pl.col("job_id").is_in(ended)) for f in self._pending]

    def _aggregate(self, rows: pl.DataFrame | None) -> pl.DataFrame:
        if rows is None or rows.is_empty():
            return self._empty()
        query = rows.lazy().group_by(KEYS).agg(self._aggregations)
        if not self.counters:
            return collect(query.sort(KEYS))
        # A counter's rise since the GPU's previous window (0 in its first window): one query
        # for the window, one for the counts kept (each eager call would be one).
        gpus = collect(
            query.join(self._last.lazy(), on=KEYS, how="left").with_columns(self._deltas).sort(KEYS)
        )
        seen = gpus.lazy().select(self._seen)
        self._last = replaced(self._last, seen, KEYS)
        return gpus[self._kept]  # columns picked without a query

    def _empty(self) -> pl.DataFrame:
        schema = {"job_id": pl.String, "node": pl.String, "gpu": pl.Int16, "samples": pl.Int64}
        schema |= {c: pl.Float64 for c in self.means}
        if self.throttle_mask is not None:
            schema["throttled"] = pl.Float64
        if self.xid:
            schema["xid"] = pl.Int32
        schema |= {f"{c}_delta": pl.Int64 for c in self.counters}
        return pl.DataFrame(schema=schema)


def _split_at(rows: pl.DataFrame, end: int) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The rows before ``end`` and those from it on (None: none), in their order. Rows come in
    time order, as their batches did: two slices at one binary search, where two filters would
    each read the whole buffer; a buffer out of time order (a late batch) is filtered."""
    times = times_us(rows)
    if not times.size or (times[1:] >= times[:-1]).all():
        cut = int(np.searchsorted(times, end, side="left"))
        inside, after = rows.slice(0, cut), rows.slice(cut)
    else:
        before = pl.Series(times < end)
        inside, after = rows.filter(before), rows.filter(~before)
    return inside, (after if not after.is_empty() else None)
