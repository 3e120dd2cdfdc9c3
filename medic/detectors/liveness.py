"""Who is still reporting: the newest telemetry sample per GPU and per node, the newest log line
per node, folded from batches a batch at a time.

GPU telemetry (NVML or dcgm-exporter, about 1 Hz) is the liveness signal: logs may be quiet
for minutes in a healthy job. Gaps are measured against what the rest of the cluster has
delivered, not against the clock, so a delayed feed does not look like a dead node:

* a GPU *vanishes* when its node keeps reporting other GPUs and it does not;
* a node falls *silent* when the rest of the cluster keeps reporting and it sends neither
  telemetry nor log lines.

It reads the ``gpu_latest`` stream (``medic.parse.gpu_latest``: one row per GPU per telemetry
batch), shared by every detector that watches GPUs. The liveness state is numpy arrays
with a cell per GPU and per node (``GpuSlots`` gives nodes their rows): a batch is folded in
with array assignments and a check is one array mask, whatever the size of the cluster.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import numpy as np
import polars as pl
import pyarrow.compute as pc

from medic.detectors.gpu_slots import MAX_GPUS_PER_NODE, GpuSlots, addressable, fitted
from medic.frames import newest_by, newest_by_pair, times_us
from medic.timeutil import US

PRUNE_EVERY_US = 60 * US
log = logging.getLogger(__name__)


class Cadence:
    """The newest event time per key (a node, a job), its usual spacing (the longest of its last
    ``RECENT`` spacings between batches) and its delivery lag. Quiet means something only for a
    key that is usually chatty, and a burst of lines (start-up chatter, a warning repeated by
    every rank) must not make a key that pauses for tens of seconds look like one that never
    pauses.

    Log shippers deliver a node's lines in batches, seconds to tens of seconds after they were
    written (Fluent Bit's ``Flush``, Vector's ``batch.timeout_secs``, Promtail's ``batchwait``,
    plus retries): at any moment the newest line that has *arrived* from a healthy node is that
    old. So a key's silence is counted from its newest line's own time to ``now`` less the
    longest delivery lag the key has shown lately (``LAGS`` arrivals: the time a batch arrived,
    the detector's watermark then, less its newest line's time): a delayed feed is not a quiet
    node."""

    RECENT = 8
    LAGS = 32
    SETTLED = 3
    """Spacings a key must have shown before its quiet means something: two lines (a progress
    line and the save that followed it) are one spacing, not a rhythm."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.steps: dict[str, deque[int]] = {}
        self.lags: dict[str, deque[int]] = {}

    def __len__(self) -> int:
        return len(self.last)

    def observe(self, keys: list[str], times: list[int], arrived: int | None = None) -> None:
        """Fold each key's newest time in a batch; ``arrived``: when the batch arrived (the
        newest watermark before it), to learn the keys' delivery lag."""
        for key, time in zip(keys, times, strict=True):
            if arrived is not None:
                lags = self.lags.setdefault(key, deque(maxlen=self.LAGS))
                lags.append(max(0, arrived - time))
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

    def lag(self, key: str) -> int:
        """The longest delivery lag the key's lines showed lately (0 when unknown)."""
        lags = self.lags.get(key)
        return max(lags) if lags else 0

    def silence(self, key: str, now: int) -> int | None:
        """How long the key has written nothing, as far as ``now`` can tell: from its newest
        line to ``now`` less its delivery lag (None for a key never heard from)."""
        last = self.last.get(key)
        return None if last is None else now - self.lag(key) - last

    def went_quiet(self, key: str, since: int, now: int, slack: int, longest: int) -> bool:
        """True when ``key`` wrote regularly (``SETTLED`` spacings at least, none longer than
        ``longest``) up to about ``since``, and nothing after ``since + slack`` for three of its
        usual spacings until ``now`` (less its delivery lag)."""
        last, every = self.last.get(key), self.every(key)
        if last is None or every is None or every > longest:
            return False
        if len(self.steps.get(key, ())) < self.SETTLED:
            return False
        quiet = now - self.lag(key) - last
        return since - 2 * every - US <= last <= since + slack and quiet >= 3 * every

    def forget_before(self, cutoff: int) -> None:
        for key in [k for k, t in self.last.items() if t < cutoff]:
            del self.last[key]
            self.steps.pop(key, None)
            self.lags.pop(key, None)


@dataclass(frozen=True)
class Gap:
    """A node, or one GPU of it (``gpu`` set), that stopped reporting at ``since``."""

    node: str
    gpu: int | None
    since: int
    length: int
    job_id: str | None = None


ABSENT = -1
SPACINGS = 8
NEVER_US = float(1 << 60)
"""A spacing no silence reaches: the cadence of nodes while no node's is known."""
"""Recent spacings between a node's telemetry samples that its usual cadence is the median of."""
NO_JOB = -1
"""The job code of a GPU that reported none."""


class _NodeRows(NamedTuple):
    """A batch's rows grouped by node: its distinct node ids (ascending), the row order that
    groups them, and where each group starts in that order."""

    ids: np.ndarray
    order: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, nodes: np.ndarray) -> _NodeRows:
        order = np.argsort(nodes, kind="stable")
        grouped = nodes[order]
        starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
        return cls(grouped[starts], order, starts)


def _median_of(medians: np.ndarray) -> float:
    """The median of the nodes' spacings that are known (``NEVER_US`` while none is)."""
    known = medians[~np.isnan(medians)]
    return float(np.median(known)) if known.size else NEVER_US


def _row_medians(rows: np.ndarray) -> np.ndarray:
    """Each row's median of its values that are not NaN (NaN for a row of NaNs only): what
    ``np.nanmedian(rows, axis=1)`` gives, from one sort (NaNs sort last) at a fraction of its
    cost on a few short rows."""
    ordered = np.sort(rows, axis=1)
    counts = (~np.isnan(ordered)).sum(axis=1)
    index = np.arange(len(rows))
    high = ordered[index, np.maximum(counts // 2, 0)]
    low = ordered[index, np.maximum((counts - 1) // 2, 0)]
    medians: np.ndarray = (low + high) / 2
    medians[counts == 0] = np.nan
    return medians


_lines_read: tuple[pl.DataFrame, tuple[list[str], list[int]], list[tuple[str, str, int]]] | None
_lines_read = None
"""The logs batch read last, with its newest line per node and per node and job."""


def _newest_lines(
    frame: pl.DataFrame,
) -> tuple[tuple[list[str], list[int]], list[tuple[str, str, int]]]:
    """A logs batch's newest line per node, and per node and job (none without job ids). The
    detectors that keep a Liveness of their own are each passed the same batch: it is read
    once for all of them, as reading it costs more than its few lines."""
    global _lines_read
    read = _lines_read  # one read of the global: pipelines in other threads may replace it
    if read is None or read[0] is not frame:
        pairs = newest_by_pair(frame, "node", "job_id") if "job_id" in frame.columns else []
        read = _lines_read = (frame, newest_by(frame, "node"), pairs)
    return read[1], read[2]


RECENT_LAYOUTS = 4
"""Batch layouts remembered (``Recent``): a node late now and then sends its GPUs in the batch
after; both batches are laid out apart from the usual one, and the next comes as it did."""

T = TypeVar("T")


class Recent(Generic[T]):
    """What was computed from the columns of the last few batches, newest first, found again
    by comparing columns: a cluster's GPUs come laid out alike batch after batch (but for a
    late node's), and comparing two columns costs a fraction of reading one."""

    def __init__(self, size: int = RECENT_LAYOUTS) -> None:
        self.size = size
        self._kept: list[tuple[tuple[pl.Series, ...], T]] = []

    def get(self, columns: tuple[pl.Series, ...]) -> T | None:
        for i, (kept, value) in enumerate(self._kept):
            if all(k.equals(c) for k, c in zip(kept, columns, strict=True)):
                self._kept.insert(0, self._kept.pop(i))
                return value
        return None

    def put(self, columns: tuple[pl.Series, ...], value: T) -> None:
        self._kept.insert(0, (columns, value))
        del self._kept[self.size :]

    def clear(self) -> None:
        self._kept.clear()


class JobCodes:
    """Job id <-> a small integer code, for arrays of the job each GPU reported."""

    def __init__(self) -> None:
        self.names: list[str] = []
        """Job id by code."""
        self._codes: dict[str, int] = {}
        self._encoded: Recent[np.ndarray] = Recent()
        """The columns encoded last and their codes: a cluster's GPUs hold the same jobs batch
        after batch, and comparing two columns costs a fraction of encoding one."""

    def encode(self, jobs: pl.Series) -> np.ndarray:
        """Each value's code (``NO_JOB`` for a null): a hash of each row in Arrow, a Python
        step per distinct job only; the codes of a recent column when it is the same."""
        encoded = self._encoded.get((jobs,))
        if encoded is not None:
            return encoded
        if jobs.null_count() == len(jobs):
            rows = np.full(len(jobs), NO_JOB, np.int32)
        else:
            # a null is one more value of the dictionary: no indices to fill afterwards
            table = pc.dictionary_encode(jobs.to_arrow(), null_encoding="encode")
            values = table.dictionary.to_pylist()
            codes = np.array([NO_JOB if v is None else self._code(v) for v in values], np.int32)
            rows = codes[table.indices.to_numpy()]
        self._encoded.put((jobs,), rows)
        return rows

    def kept(self, held: np.ndarray) -> np.ndarray:
        """``held`` (codes) recoded to a table of only the jobs it holds: the others are
        forgotten, so the table stays as small as the jobs on the GPUs."""
        used = np.unique(held[held != NO_JOB])
        recode = np.full(len(self.names) + 1, NO_JOB, np.int32)  # its last cell: NO_JOB's
        recode[used] = np.arange(len(used), dtype=np.int32)
        self.names = [self.names[code] for code in used.tolist()]
        self._codes = {job: code for code, job in enumerate(self.names)}
        self._encoded.clear()
        recoded: np.ndarray = recode[held]
        return recoded

    def _code(self, job: str) -> int:
        code = self._codes.get(job)
        if code is None:
            code = self._codes[job] = len(self.names)
            self.names.append(job)
        return code


class Liveness:
    """Newest sample time per GPU and node; newest log line per node.

    The GPU state is numpy arrays indexed by node id and GPU index, so a batch of a whole
    cluster folds in with a few array assignments. Each GPU and node also keeps when it was
    (re)added, so that lists of them come out in a stable order, and each node its last
    ``SPACINGS`` spacings between samples: dcgm-exporter collects every 30 s by default and
    Prometheus scrapes every 15 to 60 s, so a node's telemetry is late only once it is overdue
    for *its* next sample (the median spacing: one exporter restart among them does not make a
    node look like one that reports every minute)."""

    def __init__(self) -> None:
        self.logs = Cadence()
        """Per node: its newest log line and how often it writes."""
        self.newest_gpu: int | None = None
        self._pruned_at = 0
        self._folded: pl.DataFrame | None = None
        self._logs_folded: pl.DataFrame | None = None
        self.log_jobs: dict[str, dict[str, int]] = {}
        """Node -> job -> the newest line the job itself wrote from the node: where jobs run,
        as their own logs tell (a logs-only deployment has nothing else)."""
        self._located: tuple[np.ndarray, np.ndarray] | None = None
        self._layouts: Recent[tuple[np.ndarray, np.ndarray, _NodeRows]] = Recent()
        """The node and GPU columns of the batches located last (since the last prune), and
        their ids: what a batch laid out the same way is located to."""
        self.prunes = 0
        """How many times ``forget_before`` dropped stale GPUs and nodes (state keyed by GPU
        elsewhere needs pruning only after one)."""
        self.unaddressable = 0
        """Telemetry rows left out for a GPU index outside 0-255."""
        self.names_jobs = False
        """Whether the telemetry has named a GPU's job (dcgm-exporter's HPC job mapping, an
        agent reading the job from the processes' cgroup): then a GPU reporting none holds
        none. Telemetry that never names one leaves jobs to the scheduler and the logs."""
        self.slots = GpuSlots()
        """Rows of the arrays below: a node's id; columns: its GPUs."""
        self._gpu_seen = np.full((0, 1), ABSENT, np.int64)
        self._gpu_job = np.full((0, 1), NO_JOB, np.int32)
        """The job each GPU last reported, as its code in ``_jobs``: a batch's job column is
        encoded with a Python step per distinct job, not made a Python string per row."""
        self._jobs = JobCodes()
        self._gpu_added = np.zeros((0, 1), np.int64)
        self._node_seen = np.full(0, ABSENT, np.int64)
        self._node_added = np.zeros(0, np.int64)
        self._node_spacing = np.full((0, SPACINGS), np.nan)
        self._node_spacings = np.zeros(0, np.int64)
        """Per node: its recent sample spacings (a ring, NaN where unfilled) and how many."""
        self._additions = 0
        self.watermark: int | None = None
        """The newest watermark (``advance_to``): when the batches folded next arrived."""

    def advance_to(self, watermark: int) -> None:
        """Note the watermark: log batches folded after it arrived then (their delivery lag)."""
        self.watermark = watermark if self.watermark is None else max(self.watermark, watermark)

    def __len__(self) -> int:
        held = int((self._gpu_seen >= 0).sum() + (self._node_seen >= 0).sum())
        return held + len(self.logs) + len(self.log_jobs)

    def observe_gpu(self, latest: pl.DataFrame) -> None:
        """Fold a ``gpu_latest`` batch in (one row per GPU). Detectors sharing this Liveness each
        pass it the same batch: it is folded once."""
        if latest is self._folded or latest.is_empty():
            return
        self._folded, self._located = latest, None
        if addressable(latest.get_column("gpu")):
            nodes, gpus, rows = self._locate(latest)
            self._located = nodes, gpus
        else:
            kept = latest.filter(pl.col("gpu").is_between(0, MAX_GPUS_PER_NODE - 1))
            if not self.unaddressable:
                log.warning("liveness: leaving out telemetry rows whose GPU index is not 0-255")
            self.unaddressable += latest.height - kept.height
            if kept.is_empty():
                return
            latest = kept
            nodes, gpus, rows = self._locate(latest)
        times = times_us(latest)
        new = self._gpu_seen[nodes, gpus] < 0
        if new.any():
            self._gpu_added[nodes[new], gpus[new]] = self._next(int(new.sum()))
        self._gpu_seen[nodes, gpus] = times
        held = self._jobs.encode(latest.get_column("job_id"))
        self._gpu_job[nodes, gpus] = held
        self.names_jobs = self.names_jobs or bool((held != NO_JOB).any())
        new_nodes = self._node_seen[nodes] < 0
        if new_nodes.any():
            ids, first = np.unique(nodes[new_nodes], return_index=True)
            self._node_added[ids[np.argsort(first)]] = self._next(len(ids))
        self._fold_node_times(rows, times)
        top = int(times.max())
        self.newest_gpu = top if self.newest_gpu is None else max(self.newest_gpu, top)

    def _fold_node_times(self, rows: _NodeRows, times: np.ndarray) -> None:
        """Each node's newest sample, and the spacing since its previous one. Reduced over the
        rows grouped by node, a grouping kept with the batch's layout (``_locate``): sorting
        the batch anew, or a scatter into a cell per node id, costs several times more."""
        ids = rows.ids
        newest = np.maximum.reduceat(times[rows.order], rows.starts)
        before = self._node_seen[ids]
        later = (before >= 0) & (newest > before)
        moved = ids[later]
        slot = self._node_spacings[moved] % SPACINGS
        self._node_spacing[moved, slot] = newest[later] - before[later]
        self._node_spacings[moved] += 1
        self._node_seen[ids] = np.maximum(before, newest)

    def cadence_us(self, node_ids: np.ndarray) -> np.ndarray:
        """Each node's usual spacing between telemetry samples. A node with no spacing yet (one
        sample) takes the cluster's: the median of the nodes' that have one, as exporters are
        scraped on one schedule (Prometheus' ``scrape_interval``, dcgm-exporter's
        ``--collect-interval``, 1 to 30 s by site). While no node has one (the first samples of
        a replay or of a service just started) nothing says how often nodes report, and no
        node is overdue (``NEVER_US``)."""
        medians = _row_medians(self._node_spacing)
        cluster = _median_of(medians)
        usual: np.ndarray = medians[node_ids]
        usual[np.isnan(usual)] = cluster
        return usual.astype(np.int64)

    def cluster_cadence_us(self) -> int:
        """The cluster's usual spacing between a node's telemetry samples: the median of its
        nodes' own (0 while no node has one)."""
        cluster = _median_of(_row_medians(self._node_spacing))
        return 0 if cluster >= NEVER_US else round(cluster)

    def cadence_of(self, node: str) -> int:
        """The node's usual spacing between telemetry samples (0 for a node never seen, or
        while no node's spacing is known)."""
        i = self.slots.id_of(node)
        if i is None:
            return 0
        usual = int(self.cadence_us(np.array([i], np.intp))[0])
        return 0 if usual >= NEVER_US else usual

    def located(self, latest: pl.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        """Node id and GPU index of each row of ``latest`` when it is the batch folded last
        (None otherwise, or when some of its rows had no valid GPU index). The ids are those
        of ``slots`` until the next prune: a pruned node's id goes to the next new node."""
        return self._located if latest is self._folded else None

    def _next(self, count: int) -> np.ndarray:
        added = np.arange(self._additions, self._additions + count)
        self._additions += count
        return added

    def _locate(self, latest: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, _NodeRows]:
        """Each row's node id and GPU index, and the rows grouped by node; the arrays grown
        to hold them. A cluster sends its GPUs in the same order batch after batch: a batch
        laid out as a recent one (same nodes and GPUs, row for row, no prune since) takes that
        one's ids, as comparing two columns costs a fraction of the lookup."""
        columns = (latest.get_column("node"), latest.get_column("gpu"))
        layout = self._layouts.get(columns)
        if layout is not None:
            return layout
        nodes, gpus = self.slots.locate(latest)
        shape = (len(self.slots.names), self.slots.gpus_per_node)
        self._gpu_seen = fitted(self._gpu_seen, shape, ABSENT)
        self._gpu_job = fitted(self._gpu_job, shape, NO_JOB)
        self._gpu_added = fitted(self._gpu_added, shape, 0)
        self._node_seen = fitted(self._node_seen, shape[:1], ABSENT)
        self._node_added = fitted(self._node_added, shape[:1], 0)
        self._node_spacing = fitted(self._node_spacing, (shape[0], SPACINGS), np.nan)
        self._node_spacings = fitted(self._node_spacings, shape[:1], 0)
        rows = _NodeRows.of(nodes)
        self._layouts.put(columns, (nodes, gpus, rows))
        return nodes, gpus, rows

    def _gpus_in_order(self, mask: np.ndarray) -> list[tuple[int, int]]:
        """The (node id, GPU) pairs set in ``mask``, in the order they were added."""
        nodes, gpus = np.nonzero(mask)
        order = np.argsort(self._gpu_added[nodes, gpus], kind="stable")
        return list(zip(nodes[order].tolist(), gpus[order].tolist(), strict=True))

    @property
    def gpu_seen(self) -> dict[tuple[str, int], int]:
        """Newest sample time per GPU, as a dict (for checks, not for every batch)."""
        return {
            (self.slots.names[n], g): int(self._gpu_seen[n, g])
            for n, g in self._gpus_in_order(self._gpu_seen >= 0)
        }

    @property
    def gpu_job(self) -> dict[tuple[str, int], str]:
        """The job each GPU last reported holding, as a dict."""
        held = (self._gpu_seen >= 0) & (self._gpu_job != NO_JOB)
        names, jobs = self.slots.names, self._jobs.names
        return {(names[n], g): jobs[self._gpu_job[n, g]] for n, g in self._gpus_in_order(held)}

    @property
    def node_seen(self) -> dict[str, int]:
        """Newest sample time per node, as a dict."""
        return {self.slots.names[n]: int(self._node_seen[n]) for n in self._nodes_in_order()}

    def node_seen_at(self, node: str) -> int | None:
        i = self.slots.id_of(node)
        seen = ABSENT if i is None else int(self._node_seen[i])
        return None if seen < 0 else seen

    def _nodes_in_order(self, mask: np.ndarray | None = None) -> list[int]:
        present = self._node_seen >= 0 if mask is None else mask & (self._node_seen >= 0)
        ids = np.flatnonzero(present)
        ordered: list[int] = ids[np.argsort(self._node_added[ids], kind="stable")].tolist()
        return ordered

    def jobs_on(self, node: str) -> set[str]:
        """Jobs that the GPUs of ``node`` last reported holding them."""
        i = self.slots.id_of(node)
        if i is None:
            return set()
        return {self._jobs.names[code] for code in self._gpu_job[i].tolist() if code != NO_JOB}

    def observe_logs(self, frame: pl.DataFrame) -> None:
        """Fold a ``logs`` batch in: each node's newest line, and the jobs writing from each node.
        Detectors sharing this Liveness each pass it the same batch: it is folded once."""
        if frame is self._logs_folded or frame.is_empty():
            return
        self._logs_folded = frame
        nodes, pairs = _newest_lines(frame)
        self.logs.observe(*nodes, arrived=self.watermark)
        for node, job_id, time in pairs:
            jobs = self.log_jobs.setdefault(node, {})
            jobs[job_id] = max(time, jobs.get(job_id, time))

    def log_jobs_on(self, node: str, since: int) -> set[str]:
        """Jobs whose own lines came from ``node`` at ``since`` or later."""
        return {job for job, t in self.log_jobs.get(node, {}).items() if t >= since}

    def vanished_gpus(self, min_gap_us: int, fresh_us: int) -> list[Gap]:
        """GPUs missing for at least ``min_gap_us`` from a node whose other GPUs reported within
        ``fresh_us`` of the newest sample of the cluster."""
        if self.newest_gpu is None:
            return []
        seen, node_seen = self._gpu_seen, self._node_seen[:, None]
        fresh = self.newest_gpu - fresh_us
        mask = (seen >= 0) & (node_seen - seen >= min_gap_us) & (node_seen >= fresh)
        if not mask.any():
            return []
        return [self._gpu_gap(n, g, job=True) for n, g in self._gpus_in_order(mask)]

    def _gpu_gap(self, node_id: int, gpu: int, job: bool = False) -> Gap:
        seen = int(self._gpu_seen[node_id, gpu])
        length = int(self._node_seen[node_id]) - seen
        code = int(self._gpu_job[node_id, gpu])
        held = self._jobs.names[code] if job and code != NO_JOB else None
        return Gap(self.slots.names[node_id], gpu, seen, length, held)

    def silent_nodes(self, min_gap_us: int, now: int) -> list[Gap]:
        """Nodes whose telemetry is ``min_gap_us`` overdue (past their usual spacing after their
        newest sample) by the cluster's newest sample, and whose logs are silent as long (less
        their delivery lag). ``Gap.length`` is the time since the node's newest sample."""
        if self.newest_gpu is None:
            return []
        lagging = self._node_seen <= self.newest_gpu - min_gap_us
        if not lagging.any():
            return []
        ids = np.array(self._nodes_in_order(lagging), np.intp)
        seen = self._node_seen[ids]
        overdue = seen + self.cadence_us(ids) <= self.newest_gpu - min_gap_us
        out = []
        for i, last in zip(ids[overdue].tolist(), seen[overdue].tolist(), strict=True):
            node = self.slots.names[i]
            quiet = self.logs.silence(node, now)
            if quiet is None or quiet >= min_gap_us:
                out.append(Gap(node, None, last, self.newest_gpu - last))
        return out

    def node_gaps(self, nodes: list[str]) -> list[Gap]:
        """How far each of ``nodes`` that has telemetry lags the cluster's newest sample."""
        if self.newest_gpu is None:
            return []
        newest = self.newest_gpu
        seen = [(node, self.node_seen_at(node)) for node in nodes]
        return [Gap(node, None, at, newest - at) for node, at in seen if at is not None]

    def longest_gap(self, nodes: list[str], began_by: int | None = None) -> Gap | None:
        """The longest telemetry gap among ``nodes`` and their GPUs (that began by ``began_by``)."""
        gaps = [g for g in self.node_gaps(nodes) if g.length > 0]
        wanted = np.zeros(len(self._node_seen), bool)
        ids = (self.slots.id_of(node) for node in set(nodes))
        wanted[[i for i in ids if i is not None]] = True
        seen = self._gpu_seen
        behind = wanted[:, None] & (seen >= 0) & (self._node_seen[:, None] > seen)
        gaps += [self._gpu_gap(n, g) for n, g in self._gpus_in_order(behind)]
        if began_by is not None:
            gaps = [g for g in gaps if g.since <= began_by]
        return max(gaps, key=lambda g: g.length, default=None)

    def forget_before(self, cutoff: int) -> None:
        """Drop GPUs and nodes not heard from since ``cutoff`` (decommissioned, long dead).

        Cheap to call at every watermark: it scans the state at most once a minute."""
        if cutoff - self._pruned_at < PRUNE_EVERY_US:
            return
        self._pruned_at = cutoff
        self.logs.forget_before(cutoff)
        for node, jobs in list(self.log_jobs.items()):
            for job_id in [j for j, t in jobs.items() if t < cutoff]:
                del jobs[job_id]
            if not jobs:
                del self.log_jobs[node]
        stale = (self._gpu_seen >= 0) & (self._gpu_seen < cutoff)
        if not stale.any():
            return  # a node's newest sample is its GPUs' newest: no node is stale either
        self.prunes += 1
        self._layouts.clear()
        self._gpu_seen[stale] = ABSENT
        self._gpu_job[stale] = NO_JOB
        self._gpu_job = self._jobs.kept(self._gpu_job)
        gone = np.flatnonzero((self._node_seen >= 0) & (self._node_seen < cutoff))
        self._node_seen[gone] = ABSENT
        self._node_spacing[gone] = np.nan
        self._node_spacings[gone] = 0
        self.slots.release(gone.tolist())
