"""GPU telemetry folded into fixed windows of event time, one row per job, node and GPU.

Detectors that compare GPUs (peers within a job) or watch a job's GPUs over a silence do not
need every 1 Hz sample: ``GpuWindows`` keeps the batches of the window being filled and, once
the watermark passes the window's end, reads their rows and reduces them in one query to
per-GPU means of the metrics its owner asked for, the share of samples with slowdown throttle
reasons set, the samples carrying an Xid, and how much cumulative error counters rose. Rows
without a job id are given the job Slurm placed on their node when the batch came. State is the
open window's batches plus one row of counters per GPU, freed with ``forget`` when a job ends.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from medic.detectors.jobs import JobTracker
from medic.frames import collect, times_us

KEYS = ["job_id", "node", "gpu"]
_Wanted = tuple[frozenset[str] | None, frozenset[str]]
"""The jobs whose rows a run keeps (None: every job's) and those forgotten since."""
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
        late: Sequence[str] = (),
    ) -> None:
        """``late``: metrics of ``means`` also averaged over the last third of the span each
        GPU was sampled in a window (as ``late_<metric>``): where the window ends, apart from
        how it went (one sample a window: that sample)."""
        if window_s <= 0 or (sample_s is not None and not 0 < sample_s <= window_s):
            raise ValueError("window_s must be positive and sample_s within (0, window_s]")
        self.window_us = round(window_s * 1_000_000)
        self.sample_us = self.window_us if sample_s is None else round(sample_s * 1_000_000)
        self.sampled_us = self.sample_us
        """The span sampled of each window as configured; ``sample_us`` covers the telemetry's
        spacing (``cover``)."""
        self.means = list(means)
        self.counters = list(counters)
        self.throttle_mask = throttle_mask
        self.xid = xid
        self._inputs = ["time", *KEYS, *self.means, *self.counters]
        """What a window keeps of each sample."""
        aggregations = [pl.len().cast(pl.Int64).alias("samples")]
        aggregations += [pl.col(c).mean() for c in self.means]
        self.late = [f"late_{c}" for c in late]
        tail = pl.col("time") > pl.col("time").max() - pl.duration(microseconds=self.sample_us // 3)
        aggregations += [pl.col(c).filter(tail).mean().alias(f"late_{c}") for c in late]
        if throttle_mask is not None:
            throttled = (pl.col("throttle_reasons") & throttle_mask) != 0
            aggregations.append(throttled.cast(pl.Float32).mean().alias("throttled"))
            self._inputs.append("throttle_reasons")
        if xid:
            counted = pl.col("xid").is_not_null() & ~pl.col("xid").is_in(list(benign_xids))
            aggregations.append(counted.cast(pl.Int32).sum().alias("xid"))
            self._inputs.append("xid")
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
            pl.coalesce(f"max_{c}", f"last_{c}").alias(f"last_{c}") for c in self.counters
        ]
        """The counts kept for the next window: the latest each GPU showed."""
        self._none = self._empty()
        """A window without rows."""
        self._kept = list(self._none.columns)
        self._input_columns = [pl.col(c) for c in self._inputs]
        self._wanted_of: tuple[_Wanted, pl.Expr] | None = None
        """The filter of the latest run's jobs (``_wanted``)."""
        self._labelled_of: tuple[pl.DataFrame, list[pl.Expr]] | None = None
        """The latest placement, and a sample's columns labelled with it (``_labelled``)."""
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

    def cover(self, spacing_us: int) -> None:
        """Sample at least ``spacing_us`` of each window (all of it at most), and all of it
        while the spacing is unknown (0): a GPU sampled that seldom then shows in every
        window's sample, whatever the phase of its samples (a node scraped every minute, in a
        window's unsampled half, would never show)."""
        wanted = self.window_us if spacing_us <= 0 else max(self.sampled_us, spacing_us)
        self.sample_us = min(self.window_us, wanted)

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

    def _keep(self, runs: list[tuple[pl.DataFrame, _Arrival]]) -> None:
        """Reduce runs of batches (``_runs``) to the rows a window keeps: a query per run."""
        for frame, arrival in runs:
            rows = collect(self._rows(frame, arrival))
            if rows.is_empty():
                continue
            if self._window_end is None:
                first = int(times_us(rows).min())
                self._window_end = (first // self.window_us + 1) * self.window_us
            self._pending.append(rows)

    def _runs(self) -> list[tuple[pl.DataFrame, _Arrival]]:
        """The batches added since last time, let go: those of each run of batches added with
        the same placement and jobs in one frame."""
        arrived, self._arrived, self._earliest_end = self._arrived, [], None
        runs = itertools.groupby(arrived, key=lambda a: (id(a.placement), a.jobs, a.forgotten))
        batches = [list(run) for _, run in runs]
        return [(pl.concat([a.frame for a in batch], rechunk=True), batch[0]) for batch in batches]

    def _rows(self, frame: pl.DataFrame, arrival: _Arrival) -> pl.LazyFrame:
        columns = self._input_columns
        if arrival.placement is not None and frame.get_column("job_id").null_count() > 0:
            columns = self._labelled(arrival.placement)
        return frame.lazy().select(columns).filter(self._wanted(arrival))

    def _wanted(self, arrival: _Arrival) -> pl.Expr:
        """The filter of a run's rows of the wanted jobs; built once for windows of the same
        jobs (a filter on a set of jobs is a Series built from it)."""
        key = (arrival.jobs, arrival.forgotten)
        if self._wanted_of is None or self._wanted_of[0] != key:
            job = pl.col("job_id")
            wanted = job.is_not_null() if arrival.jobs is None else job.is_in(arrival.jobs)
            if arrival.forgotten:
                wanted = wanted & ~job.is_in(arrival.forgotten)
            self._wanted_of = (key, wanted)
        return self._wanted_of[1]

    def _labelled(self, placement: pl.DataFrame) -> list[pl.Expr]:
        """A sample's columns, its job id, when it came without, the one ``placement`` gives
        its node (a node it does not name: none). A lookup of each row's node, where a join
        would copy every row; built once for a placement."""
        if self._labelled_of is None or self._labelled_of[0] is not placement:
            nodes, jobs = placement.get_column("node"), placement.get_column("job_id")
            placed = pl.col("node").replace_strict(nodes, jobs, default=None)
            job = pl.coalesce("job_id", placed).alias("job_id")
            columns = [job if c == "job_id" else pl.col(c) for c in self._inputs]
            self._labelled_of = (placement, columns)
        return self._labelled_of[1]

    def close(self, now: int, empty: bool = True) -> list[Window]:
        """Every window that ends at or before ``now``, oldest first (empty ones included
        unless ``empty`` is False: then a run of windows without rows is passed over at once,
        as a watcher of a few jobs goes through most windows with none)."""
        end = self._window_end if self._window_end is not None else self._earliest_end
        if end is None or now < end:
            return []
        runs = self._runs()
        if (
            self._window_end is not None
            and not self._pending
            and now < end + self.window_us
            and all(times_us(frame).max() < end for frame, _ in runs)
        ):
            return self._close_one(
                end, [self._rows(frame, arrival) for frame, arrival in runs], empty
            )
        self._keep(runs)
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
            if inside is not None and not inside.is_empty():
                closed.append(Window(end - self.window_us, end, self._aggregate(inside.lazy())))
            elif empty:
                closed.append(Window(end - self.window_us, end, self._none))
            self._window_end = end + self.window_us
        self._pending = [pending] if pending is not None and not pending.is_empty() else []
        return closed

    def _close_one(self, end: int, queries: list[pl.LazyFrame], empty: bool) -> list[Window]:
        """The usual close: the one window ending at ``end``, every batch added since the
        last one within it (as a replay's watermark and a live feed's both come), its rows
        read by ``queries``. They are reduced in the same query, where keeping them first
        would be one more."""
        self._window_end = end + self.window_us
        gpus = self._none
        if queries:
            gpus = self._aggregate(queries[0] if len(queries) == 1 else pl.concat(queries))
        if gpus.is_empty() and not empty:
            return []
        return [Window(end - self.window_us, end, gpus)]

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

    def _aggregate(self, rows: pl.LazyFrame) -> pl.DataFrame:
        """The window of ``rows`` (``_empty`` when there are none): one query."""
        gpus = collect(rows.group_by(KEYS).agg(self._aggregations).sort(KEYS))
        if gpus.is_empty():
            return self._none
        if not self.counters:
            return gpus
        return self._deltas_of(gpus)[self._kept]  # columns picked without a query

    def _deltas_of(self, gpus: pl.DataFrame) -> pl.DataFrame:
        """``gpus`` with each counter's rise since the GPU's previous window (0 in its first
        window), the counts kept for the next. The usual window holds the GPUs of the one
        before, their counts all known: then the rises are column differences, without a
        query; else one query, a full join of both sorted by GPU (as windows are, so that
        the next window compares with the counts kept column by column): its rows are the
        counts kept, and those it marks of the window (sorted alike) the window's."""
        last = self._last
        maxima = [gpus.get_column(f"max_{c}") for c in self.counters]
        before = [last.get_column(f"last_{c}") for c in self.counters]
        if (
            gpus.height == last.height
            and all(gpus.get_column(k).equals(last.get_column(k)) for k in KEYS)
            and not any(column.null_count() for column in (*maxima, *before))
        ):
            self._last = pl.DataFrame(
                [*(gpus.get_column(k) for k in KEYS)]
                + [m.alias(f"last_{c}") for c, m in zip(self.counters, maxima, strict=True)]
            )
            rises = [
                _clipped((m - b).alias(f"{c}_delta"))
                for c, m, b in zip(self.counters, maxima, before, strict=True)
            ]
            return gpus.hstack(rises)
        joined = collect(
            gpus.lazy()
            .with_columns(pl.lit(True).alias("_window"))
            .join(last.lazy(), on=KEYS, how="full", coalesce=True)
            .with_columns(*self._deltas, *self._seen, pl.col("_window").fill_null(False))
            .sort(KEYS)
        )
        self._last = pl.DataFrame([joined.get_column(c) for c in last.columns])
        window = joined.get_column("_window")  # filtered column by column: no query
        columns = [*gpus.columns, *(f"{c}_delta" for c in self.counters)]
        return pl.DataFrame([joined.get_column(c).filter(window) for c in columns])

    def _empty(self) -> pl.DataFrame:
        schema = {"job_id": pl.String, "node": pl.String, "gpu": pl.Int16, "samples": pl.Int64}
        schema |= {c: pl.Float64 for c in (*self.means, *self.late)}
        if self.throttle_mask is not None:
            schema["throttled"] = pl.Float64
        if self.xid:
            schema["xid"] = pl.Int32
        schema |= {f"{c}_delta": pl.Int64 for c in self.counters}
        return pl.DataFrame(schema=schema)


def _clipped(rises: pl.Series) -> pl.Series:
    """``rises`` with those below 0 (a counter reset) as 0; without a query when none is."""
    if not len(rises) or rises.min() >= 0:  # type: ignore[operator]
        return rises
    return pl.Series(rises.name, np.maximum(rises.to_numpy(), 0))


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
