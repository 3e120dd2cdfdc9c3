"""Who is still reporting: the newest telemetry sample per GPU and per node, the newest log line
per node, folded from batches with one aggregation each.

GPU telemetry (NVML or dcgm-exporter, about 1 Hz) is the liveness signal: logs may be quiet
for minutes in a healthy job. Gaps are measured against what the rest of the cluster has
delivered, not against the clock, so a delayed feed does not look like a dead node:

* a GPU *vanishes* when its node keeps reporting other GPUs and it does not;
* a node falls *silent* when the rest of the cluster keeps reporting and it sends neither
  telemetry nor log lines.

The ``gpu_latest`` stream reduces each telemetry batch once to one row per GPU (its newest
sample, the job it reported, the first Xid it reported, its error counters, its mean power and
utilisation), shared by every detector that watches GPUs. The liveness state is one entry per
GPU and per node (plain dicts, updated from those rows in bulk, scanned once per check).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema
from medic.detectors.base import register_parser
from medic.frames import newest_by
from medic.ingest.base import Batch
from medic.timeutil import US

PRUNE_EVERY_US = 60 * US


GPU_LATEST = pa.schema(
    [
        pa.field("time", schema.TIME, nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("gpu", pa.int16(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("xid", pa.int32()),
        pa.field("xid_time", schema.TIME),
        pa.field("ecc_dbe", pa.int64()),
        pa.field("nvlink_errors", pa.int64()),
        pa.field("power_w", pa.float32()),
        pa.field("util", pa.float32()),
    ]
)
"""Schema of the derived ``gpu_latest`` stream: one row per GPU per telemetry batch."""
_LATEST_FRAME = pl.DataFrame(GPU_LATEST.empty_table()).schema
"""The same as polars reads it."""

_OPTIONAL = {
    "job_id": pl.String,
    "xid": pl.Int32,
    "ecc_dbe": pl.Int64,
    "nvlink_errors": pl.Int64,
    "power_w": pl.Float32,
    "util": pl.Float32,
}


_HAS_XID = pl.col("xid").is_not_null()
_SAMPLES = [
    pl.col("time").max(),
    pl.col("job_id").last(),
    pl.col("xid").filter(_HAS_XID).first(),
    pl.col("time").filter(_HAS_XID).first().alias("xid_time"),
    pl.col("ecc_dbe").drop_nulls().last(),
    pl.col("nvlink_errors").drop_nulls().last(),
    pl.col("power_w").mean(),
    pl.col("util").mean(),
]
"""A GPU's newest state from its samples in a batch."""
_ONE_SAMPLE = [
    *(pl.col(name) for name in ("time", "node", "gpu", "job_id", "xid")),
    pl.when(_HAS_XID).then(pl.col("time")).alias("xid_time"),
    *(pl.col(name) for name in ("ecc_dbe", "nvlink_errors", "power_w", "util")),
]
"""The same from a GPU's only sample."""


@register_parser
class GpuLatestParser:
    """Derives ``gpu_latest`` from ``gpu`` batches: each GPU's newest state in the batch."""

    name = "gpu_latest"
    input_stream = "gpu"
    output_stream = "gpu_latest"

    def __init__(self) -> None:
        self._unique_keys: tuple[pl.Series, pl.Series] | None = None
        """Node and GPU columns of the last batch found to hold one sample per GPU."""

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty():
            return None
        missing = [pl.lit(None, t).alias(c) for c, t in _OPTIONAL.items() if c not in frame.columns]
        if missing:
            frame = frame.with_columns(missing)
        if not self._one_sample_per_gpu(frame):
            latest = frame.group_by("node", "gpu").agg(_SAMPLES)
            return Batch(self.output_stream, schema.conform(latest.to_arrow(), GPU_LATEST))
        latest = frame.select_seq(_ONE_SAMPLE)  # the usual second
        arrow = schema.conform(latest.to_arrow(compat_level=pl.CompatLevel.newest()), GPU_LATEST)
        if latest.schema != _LATEST_FRAME:
            return Batch(self.output_stream, arrow)
        return Batch.with_frame(self.output_stream, arrow, latest)

    def _one_sample_per_gpu(self, frame: pl.DataFrame) -> bool:
        """Whether no GPU has two samples in ``frame``. A feed sends the same GPUs in the same
        order second after second: a batch keyed exactly like the last unique one is unique
        too, which costs a comparison instead of a hash of every key."""
        nodes, gpus = frame.get_column("node"), frame.get_column("gpu")
        known = self._unique_keys
        if known is not None and nodes.equals(known[0]) and gpus.equals(known[1]):
            return True
        if frame.n_unique(["node", "gpu"]) != frame.height:
            return False
        self._unique_keys = (nodes, gpus)
        return True


class Cadence:
    """The newest event time per key (a node, a job) and its usual spacing: the longest of its
    last ``RECENT`` spacings between batches. Quiet means something only for a key that is
    usually chatty, and a burst of lines (start-up chatter, a warning repeated by every rank)
    must not make a key that pauses for tens of seconds look like one that never pauses."""

    RECENT = 8

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.steps: dict[str, deque[int]] = {}

    def __len__(self) -> int:
        return len(self.last)

    def observe(self, keys: list[str], times: list[int]) -> None:
        for key, time in zip(keys, times, strict=True):
            last = self.last.get(key)
            if last is not None and time <= last:
                continue
            self.last[key] = time
            if last is not None:
                steps = self.steps.setdefault(key, deque(maxlen=self.RECENT))
                steps.append(time - last)

    def every(self, key: str) -> int | None:
        """The key's usual spacing (None before two batches)."""
        steps = self.steps.get(key)
        return max(steps) if steps else None

    def went_quiet(self, key: str, since: int, now: int, slack: int, longest: int) -> bool:
        """True when ``key`` wrote regularly (at least every ``longest``) up to about ``since``, and
        nothing after ``since + slack`` for three of its usual spacings until ``now``."""
        last, every = self.last.get(key), self.every(key)
        if last is None or every is None or every > longest:
            return False
        return since - 2 * every - US <= last <= since + slack and now - last >= 3 * every

    def forget_before(self, cutoff: int) -> None:
        for key in [k for k, t in self.last.items() if t < cutoff]:
            del self.last[key]
            self.steps.pop(key, None)


@dataclass(frozen=True)
class Gap:
    """A node, or one GPU of it (``gpu`` set), that stopped reporting at ``since``."""

    node: str
    gpu: int | None
    since: int
    length: int
    job_id: str | None = None


class _Layout:
    """The GPUs of a ``gpu_latest`` batch, in its order, and its runs of rows of one node. A
    feed sends the same GPUs in the same order second after second: such a batch is recognised
    with two column comparisons and folded without rebuilding its keys."""

    def __init__(self, latest: pl.DataFrame) -> None:
        self.node_column = latest.get_column("node")
        self.gpu_column = latest.get_column("gpu")
        self.keys = list(zip(self.node_column.to_list(), self.gpu_column.to_list(), strict=True))
        starts = self.node_column.ne_missing(self.node_column.shift(1))
        self._starts = np.flatnonzero(starts.to_numpy())
        self.nodes = self.node_column.gather(self._starts).to_list()
        """The node of each run (a node whose rows are not together has several runs)."""

    def matches(self, latest: pl.DataFrame) -> bool:
        return latest.get_column("node").equals(self.node_column) and latest.get_column(
            "gpu"
        ).equals(self.gpu_column)

    def newest_per_node(self, times: np.ndarray) -> np.ndarray:
        """The newest of ``times`` (one per row) in each run of ``nodes``."""
        return np.maximum.reduceat(times, self._starts)


class Liveness:
    """Newest sample time per GPU and node; newest log line per node."""

    def __init__(self) -> None:
        self.gpu_seen: dict[tuple[str, int], int] = {}
        self.gpu_job: dict[tuple[str, int], str] = {}
        self.node_seen: dict[str, int] = {}
        self.logs = Cadence()
        """Per node: its newest log line and how often it writes."""
        self.newest_gpu: int | None = None
        self._pruned_at = 0
        self._folded: pl.DataFrame | None = None
        self._layout: _Layout | None = None
        """The GPUs of the last batch folded, in its order."""
        self.prunes = 0
        """How many times ``forget_before`` dropped stale GPUs and nodes (state keyed by GPU
        elsewhere needs pruning only after one)."""

    def __len__(self) -> int:
        return len(self.gpu_seen) + len(self.node_seen) + len(self.logs)

    def observe_gpu(self, latest: pl.DataFrame) -> None:
        """Fold a ``gpu_latest`` batch in (one row per GPU). Detectors sharing this Liveness each
        pass it the same batch: it is folded once."""
        if latest is self._folded or latest.is_empty():
            return
        previous, self._folded = self._folded, latest
        layout = self._layout
        if layout is None or not layout.matches(latest):
            layout = self._layout = _Layout(latest)
        seen = latest.get_column("time").to_physical()
        self.gpu_seen.update(zip(layout.keys, seen.to_list(), strict=True))
        jobs = latest.get_column("job_id")
        if not (
            previous is not None and layout.matches(previous) and jobs.equals(previous["job_id"])
        ):
            self._fold_jobs(layout.keys, jobs)
        node_seen = self.node_seen
        newest = layout.newest_per_node(seen.to_numpy())
        for node, time in zip(layout.nodes, newest.tolist(), strict=True):
            if time > node_seen.get(node, -1):
                node_seen[node] = time
        top = int(newest.max())
        self.newest_gpu = top if self.newest_gpu is None else max(self.newest_gpu, top)

    def _fold_jobs(self, keys: list[tuple[str, int]], jobs: pl.Series) -> None:
        if jobs.null_count() == 0:
            self.gpu_job.update(zip(keys, jobs.to_list(), strict=True))
            return
        for key, job_id in zip(keys, jobs.to_list(), strict=True):
            if job_id is None:
                self.gpu_job.pop(key, None)
            else:
                self.gpu_job[key] = job_id

    def jobs_on(self, node: str) -> set[str]:
        """Jobs that the GPUs of ``node`` last reported holding them."""
        return {job for (n, _), job in self.gpu_job.items() if n == node}

    def observe_logs(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        self.logs.observe(*newest_by(frame, "node"))

    def vanished_gpus(self, min_gap_us: int, fresh_us: int) -> list[Gap]:
        """GPUs missing for at least ``min_gap_us`` from a node whose other GPUs reported within
        ``fresh_us`` of the newest sample of the cluster."""
        if self.newest_gpu is None:
            return []
        fresh = self.newest_gpu - fresh_us
        out = []
        for (node, gpu), seen in self.gpu_seen.items():
            node_seen = self.node_seen[node]
            if node_seen - seen >= min_gap_us and node_seen >= fresh:
                gap = Gap(node, gpu, seen, node_seen - seen, self.gpu_job.get((node, gpu)))
                out.append(gap)
        return out

    def silent_nodes(self, min_gap_us: int, now: int) -> list[Gap]:
        """Nodes whose telemetry stopped ``min_gap_us`` before the cluster's newest sample and that
        wrote no log line in the last ``min_gap_us`` either."""
        if self.newest_gpu is None:
            return []
        out = []
        for node, seen in self.node_seen.items():
            lag = self.newest_gpu - seen
            if lag >= min_gap_us and now - self.logs.last.get(node, seen) >= min_gap_us:
                out.append(Gap(node, None, seen, lag))
        return out

    def node_gaps(self, nodes: list[str]) -> list[Gap]:
        """How far each of ``nodes`` that has telemetry lags the cluster's newest sample."""
        if self.newest_gpu is None:
            return []
        newest = self.newest_gpu
        return [
            Gap(node, None, self.node_seen[node], newest - self.node_seen[node])
            for node in nodes
            if node in self.node_seen
        ]

    def longest_gap(self, nodes: list[str], began_by: int | None = None) -> Gap | None:
        """The longest telemetry gap among ``nodes`` and their GPUs (that began by ``began_by``)."""
        gaps = [g for g in self.node_gaps(nodes) if g.length > 0]
        wanted = set(nodes)
        for (node, gpu), seen in self.gpu_seen.items():
            if node in wanted and self.node_seen[node] > seen:
                gaps.append(Gap(node, gpu, seen, self.node_seen[node] - seen))
        if began_by is not None:
            gaps = [g for g in gaps if g.since <= began_by]
        return max(gaps, key=lambda g: g.length, default=None)

    def forget_before(self, cutoff: int) -> None:
        """Drop GPUs and nodes not heard from since ``cutoff`` (decommissioned, long dead).

        Cheap to call at every watermark: it scans the state at most once a minute."""
        if cutoff - self._pruned_at < PRUNE_EVERY_US:
            return
        self._pruned_at = cutoff
        self.prunes += 1
        self._folded = None
        stale = [key for key, seen in self.gpu_seen.items() if seen < cutoff]
        for key in stale:
            del self.gpu_seen[key]
            self.gpu_job.pop(key, None)
        self.node_seen = {n: t for n, t in self.node_seen.items() if t >= cutoff}
        self.logs.forget_before(cutoff)
