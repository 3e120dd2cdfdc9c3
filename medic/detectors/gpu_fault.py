"""``gpu_fault``: hardware evidence against a GPU, reported at once and blaming its node.

Evidence, in the order it usually arrives:

* a fatal Xid (by NVIDIA's catalogue: RESET_GPU, RESTART_BM, the ECC and NVLink workflows)
  from the kernel log (``NVRM: Xid (PCI:...)``) or from telemetry's ``xid`` column; an Xid an
  application's own kernel can raise (13, 31, 43, 109: ``per_process`` in the catalogue) only
  when jobs keep raising it on one GPU (``per_process_repeat`` of them), as a bad GPU does for
  every job placed on it; one job raising it again is its own code again (torchrun restarting
  its workers, a requeue onto the same GPU); follow-on Xids (45, 154) never on their own;
* a CUDA error that only hardware produces (uncorrectable ECC or NVLink error), a GPU that
  "has fallen off the bus";
* a rise of the volatile uncorrectable (double-bit) ECC counter, or a burst of NVLink errors;
* a GPU whose telemetry vanishes while the other GPUs of its node keep reporting.

Kernel events of a node that are context rather than faults (a disk remounted read-only, an
NVMe reset, a soft lockup, a NIC event: kind none, role context in the catalogue) never make a
detection; the ones seen on a node within ``context_s`` before its fault are attached to it.

Kernel lines carry no job: the node's jobs are taken from the scheduler, from telemetry, and
from the jobs' own log lines on the node (so a logs-only deployment attributes them too).
The PCI address of an Xid line is mapped to a GPU index when telemetry shows the same Xid
code on a GPU of that node around the same time; the mapping is remembered per node.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import polars as pl

from medic.config import Count, NonNegative, Positive, PositiveCount
from medic.detectors.attribution import Evidence, JobEvidence, evidence_rows
from medic.detectors.base import Detection
from medic.detectors.gpu_slots import fitted
from medic.detectors.incidents import IncidentBook, WatchesLiveness
from medic.detectors.kernel_context import KernelContext, Located
from medic.detectors.liveness import Liveness
from medic.frames import holds, times_us
from medic.ingest.base import Batch
from medic.parse.catalogue import Catalogue, builtin_catalogue
from medic.timeutil import US

RETENTION_US = 3600 * US
COUNTERS = ("ecc_dbe", "nvlink_errors")
UNKNOWN, NULL, SET = 0, 1, 2
"""What a GPU's last count of a counter was: not known (never seen, or its state restarted),
null, or the value kept."""


@dataclass(frozen=True)
class GpuFaultConfig:
    """``[detectors.gpu_fault]``: Xids, ECC, NVLink bursts and vanished GPUs."""

    vanish_s: Positive = 10.0
    """A GPU missing from telemetry this long, while its node reports, has failed."""
    fresh_s: Positive = 5.0
    """The node counts as reporting if its newest sample is this close to the cluster's newest."""
    nvlink_burst: Count = 50
    """NVLink CRC/replay/recovery errors within ``nvlink_window_s`` that make a failing link
    (0: off); a healthy link may count a few errors a day."""
    nvlink_window_s: Positive = 300.0
    """The span NVLink errors are counted over."""
    xid_match_s: NonNegative = 30.0
    """How far apart a kernel Xid line and a telemetry Xid may be to map PCI address to GPU."""
    ended_grace_s: NonNegative = 60.0
    """A job that failed this recently is still held responsible for its GPUs' evidence."""
    per_process_repeat: PositiveCount = 2
    """Distinct jobs raising an application-level Xid on one GPU that make it hardware
    (distinct processes where the scheduler places no job on the node): a job raises it again
    from new processes when it restarts, its bug with it."""
    per_process_window_s: Positive = 86400.0
    """The span those processes are counted over."""
    context_s: NonNegative = 600.0
    """Kernel context events (storage, NVMe, soft lockups, NIC events) on a node this long
    before its GPU fault are attached to the fault as evidence (0: none)."""


class GpuFaultDetector(WatchesLiveness):
    """Fatal Xids, uncorrectable ECC, fallen-off-the-bus, NVLink failures, vanished GPUs."""

    name = "gpu_fault"
    streams = frozenset({"signatures", "gpu_latest", "scheduler", "logs"})
    Config = GpuFaultConfig

    uses_catalogue = True

    def __init__(
        self, config: GpuFaultConfig | None = None, catalogue: Catalogue | None = None
    ) -> None:
        self.config = config or GpuFaultConfig()
        catalogue = catalogue or builtin_catalogue()
        self.fatal_xids = set(catalogue.fatal_xids("gpu_fault"))
        self.per_process_xids = catalogue.per_process_xids()
        self.process_xids: dict[tuple[str, str], dict[tuple[str, ...], int]] = {}
        """Per (node, PCI address): who raised an application-level Xid there (its jobs, or
        its process where the scheduler places none) -> when, last."""
        self.xid_names: dict[int, str] = dict(catalogue.xids.select("code", "mnemonic").iter_rows())
        self.liveness = Liveness()
        self.book = IncidentBook(
            self.name, self.name, round(self.config.ended_grace_s * US), self.liveness
        )
        self.ecc: dict[tuple[str, int], int] = {}
        self.nvlink: dict[tuple[str, int], deque[tuple[int, int]]] = {}
        """Per GPU: (time, count) where its NVLink error count changed, over the last window."""
        self.telemetry_xids: list[tuple[str, int, int, int]] = []
        """Recent (node, GPU, Xid, time) reported by telemetry, for PCI mapping."""
        self.kernel_xids: list[tuple[str, str, int, int]] = []
        """Recent (node, PCI address, Xid, time) of kernel lines not mapped to a GPU yet."""
        self.pci_gpu: dict[tuple[str, str], int] = {}
        self.vanished: dict[tuple[str, int], int] = {}
        """(node, GPU) -> last sample time of a vanish already reported."""
        self.context = KernelContext(round(self.config.context_s * US))
        self._counts: list[np.ndarray]
        """Per counter, by node id and GPU: the GPU's last count (see ``_count_state``). One
        array per counter, read and written at flat cell indices (a gather over two index
        arrays of a three-dimensional array costs several times more)."""
        self._count_state: list[np.ndarray]
        self._restart_counters()
        self._pruned = 0
        """The Liveness prune this detector's per-GPU state was last pruned after."""

    def state_size(self) -> int:
        return (
            len(self.book)
            + len(self.liveness)
            + len(self.ecc)
            + len(self.nvlink)
            + len(self.telemetry_xids)
            + len(self.kernel_xids)
            + len(self.pci_gpu)
            + len(self.vanished)
            + len(self.process_xids)
            + len(self.context)
        )

    def update(self, batch: Batch) -> list[Detection]:
        if batch.num_rows == 0:
            return []
        if batch.stream == "scheduler":
            self.book.observe(batch)
        elif batch.stream == "gpu_latest":
            self.liveness.observe_gpu(batch.frame)
            return self._emit(self._xids(batch.frame) + self._counter_jumps(batch.frame))
        elif batch.stream == "signatures":
            return self._signatures(batch.frame)
        elif batch.stream == "logs":
            self.liveness.observe_logs(batch.frame)
        return []

    def advance(self, watermark: int) -> list[Detection]:
        cfg = self.config
        evidence: list[Located] = []
        for gap in self.liveness.vanished_gpus(round(cfg.vanish_s * US), round(cfg.fresh_s * US)):
            key = (gap.node, int(gap.gpu or 0))
            if self.vanished.get(key) == gap.since:
                continue
            self.vanished[key] = gap.since
            what = f"GPU {gap.gpu} stopped reporting telemetry {gap.length / US:.0f} s ago"
            evidence.append(
                (gap.job_id, Evidence(gap.since, what, gap.node, gap.gpu, hardware=True))
            )
        found = self._emit(evidence, confirmed_at=watermark)
        stale = watermark - RETENTION_US
        self.book.forget_ended(stale)
        self.liveness.forget_before(stale)
        if self.telemetry_xids and self.telemetry_xids[0][3] < stale:
            self.telemetry_xids = [x for x in self.telemetry_xids if x[3] >= stale]
        if self.kernel_xids and self.kernel_xids[0][3] < stale:
            self.kernel_xids = [x for x in self.kernel_xids if x[3] >= stale]
        if self.process_xids:
            self._forget_processes(watermark - round(cfg.per_process_window_s * US))
        self.context.forget_before(watermark - round(cfg.context_s * US))
        self._follow_prunes()
        return found

    def _follow_prunes(self) -> None:
        """After a liveness prune: drop the state of the GPUs it dropped, and restart the counts
        (a pruned node's id may now name another node)."""
        if self.liveness.prunes == self._pruned:
            return
        self._pruned = self.liveness.prunes
        known = self.liveness.gpu_seen
        for state in (self.ecc, self.nvlink, self.vanished):
            for key in [k for k in state if k not in known]:
                del state[key]
        self._restart_counters()

    def _signatures(self, frame: pl.DataFrame) -> list[Detection]:
        self.context.observe(frame)
        no_xid = frame.get_column("xid").null_count() == frame.height
        if no_xid and not holds(frame.get_column("kind"), "gpu_fault"):
            return []
        rows = frame.filter(
            pl.col("xid").is_not_null()
            | ((pl.col("kind") == "gpu_fault") & (pl.col("severity") == "fatal"))
        )
        if rows.is_empty():
            return []
        rows = rows.with_columns(pl.col("time").dt.epoch("us").alias("time_us"), host=None)
        rows = rows.with_columns(
            pl.Series("gpu", self._gpus_of(rows), dtype=pl.Int16),
            pl.Series("_repeated", self._repeated(rows), dtype=pl.Boolean),
        ).filter(
            ((pl.col("kind") == "gpu_fault") & (pl.col("severity") == "fatal"))
            | pl.col("_repeated")
        )
        items = evidence_rows(rows, hardware=True)
        located = list(zip(rows["job_id"].to_list(), items, strict=True))
        return self._emit(located + self.context.of(located))

    def _repeated(self, rows: pl.DataFrame) -> list[bool]:
        """Per row: an application-level Xid that enough distinct jobs (or processes, where the
        scheduler places no job) have now raised on its GPU within the window (the count
        includes this row's)."""
        window = round(self.config.per_process_window_s * US)
        out = []
        for node, pci, xid, pid, job_id, time in rows.select(
            "node", "pci", "xid", "pid", "job_id", "time_us"
        ).iter_rows():
            if xid not in self.per_process_xids or pid is None or pci is None:
                out.append(False)
                continue
            jobs = self._scheduled(job_id, node, time)
            seen = self.process_xids.setdefault((node, pci), {})
            seen[tuple(sorted(jobs)) if jobs else ("pid", str(pid))] = time
            recent = sum(1 for t in seen.values() if t >= time - window)
            out.append(recent >= self.config.per_process_repeat)
        return out

    def _scheduled(self, job_id: str | None, node: str, time: int) -> list[str]:
        """The jobs the scheduler places on ``node`` at ``time``, that a kernel line's Xid
        (``job_id`` null) came from; none for a line already given a job (a kernel log read
        alone, its node its stand-in job): each process then counts apart."""
        if job_id is not None:
            return []
        return self.book.jobs.jobs_on(node, ended_since=time - self.book.grace_us)

    def _forget_processes(self, cutoff: int) -> None:
        for key, seen in list(self.process_xids.items()):
            for raiser in [r for r, t in seen.items() if t < cutoff]:
                del seen[raiser]
            if not seen:
                del self.process_xids[key]

    def _gpus_of(self, rows: pl.DataFrame) -> list[int | None]:
        """GPU index of each row, from its PCI address when the mapping is known."""
        for node, pci, xid, time in rows.select("node", "pci", "xid", "time_us").iter_rows():
            if pci and xid is not None and (node, pci) not in self.pci_gpu:
                self.kernel_xids.append((node, pci, xid, time))
        self._learn_pci()
        return [
            self.pci_gpu.get((node, pci)) if pci else None
            for node, pci in rows.select("node", "pci").iter_rows()
        ]

    def _learn_pci(self) -> None:
        """Map a kernel Xid line's PCI address to the one GPU of its node whose telemetry reported
        the same Xid within ``xid_match_s`` (whichever of the two arrived first)."""
        window = self.config.xid_match_s * US
        unmapped = []
        for node, pci, xid, time in self.kernel_xids:
            near = {
                g
                for n, g, x, t in self.telemetry_xids
                if n == node and x == xid and abs(t - time) <= window
            }
            if len(near) == 1:
                self.pci_gpu[(node, pci)] = near.pop()
            elif (node, pci) not in self.pci_gpu:
                unmapped.append((node, pci, xid, time))
        self.kernel_xids = unmapped

    def _xids(self, latest: pl.DataFrame) -> list[Located]:
        """Xid events reported by telemetry: remembered for PCI mapping, evidence when fatal."""
        if latest.get_column("xid").null_count() == latest.height:
            return []
        xids = latest.filter(pl.col("xid").is_not_null())
        if xids.is_empty():
            return []
        out = []
        for node, gpu, job_id, xid, time in xids.select(
            "node", "gpu", "job_id", "xid", pl.col("xid_time").dt.epoch("us")
        ).iter_rows():
            self.telemetry_xids.append((node, gpu, xid, time))
            if xid in self.fatal_xids:
                what = f"Xid {xid} ({self.xid_names.get(xid, 'unknown')}) in telemetry"
                out.append((job_id, Evidence(time, what, node, gpu, hardware=True)))
        if self.kernel_xids:
            self._learn_pci()
        return out

    def _counter_jumps(self, latest: pl.DataFrame) -> list[Located]:
        """A rise of the uncorrectable-ECC counter since the GPU's previous sample, or a burst of
        NVLink errors within the window (a counter that goes down was reset with the GPU)."""
        changed = self._changed_counters(latest)
        if changed is None:
            return []
        keys = list(zip(changed["node"].to_list(), changed["gpu"].to_list(), strict=True))
        times = times_us(changed).tolist()
        jobs = changed["job_id"].to_list()
        out: list[Located] = []
        for i, value in enumerate(changed["ecc_dbe"].to_list()):
            if value is None:
                continue
            previous = self.ecc.get(keys[i])
            self.ecc[keys[i]] = value
            if previous is not None and value > previous:
                what = f"uncorrectable ECC errors rose by {value - previous}"
                out.append((jobs[i], Evidence(times[i], what, *keys[i], hardware=True)))
        if self.config.nvlink_burst <= 0:
            return out
        window = round(self.config.nvlink_window_s * US)
        cleared = []
        # A count equal to the last one kept cannot complete a burst (it would have when it
        # was kept); expiring its old entries can wait for the GPU's next change.
        for i, value in enumerate(changed["nvlink_errors"].to_list()):
            key = keys[i]
            history = self.nvlink.get(key)
            if value is None or (history and value == history[-1][1]):
                continue
            if history is None:
                history = self.nvlink[key] = deque()
            elif history and value < history[-1][1]:
                history.clear()
            history.append((times[i], value))
            while len(history) > 1 and history[1][0] <= times[i] - window:
                history.popleft()
            rise = value - history[0][1]
            if rise >= self.config.nvlink_burst:
                what = f"{rise} NVLink errors within {self.config.nvlink_window_s:.0f} s"
                out.append((jobs[i], Evidence(times[i], what, *key, hardware=True)))
                history.clear()
                cleared.append(key)
        if cleared:
            self._forget_counters(cleared)
        return out

    def _changed_counters(self, latest: pl.DataFrame) -> pl.DataFrame | None:
        """The rows of ``latest`` whose ECC or NVLink count is set and differs from the GPU's
        count when it last reported (None: no row, as in most batches). The others cannot
        change the counter state: it already holds their counts. GPUs are addressed by the ids
        the liveness gave them."""
        located = self.liveness.located(latest)
        if located is None:
            return latest  # rows no array can address: all of them go through the fold
        self._follow_prunes()
        nodes, gpus = located
        slots = self.liveness.slots
        shape = (len(slots.names), slots.gpus_per_node)
        rows, columns = self._counts[0].shape  # every counter's arrays have this one shape
        if rows < shape[0] or columns < shape[1]:
            self._counts = [fitted(counts, shape, 0) for counts in self._counts]
            self._count_state = [fitted(state, shape, UNKNOWN) for state in self._count_state]
        cells = nodes * self._counts[0].shape[1] + gpus  # the width, grown or not
        changed = np.zeros(len(cells), dtype=bool)
        for name, counts, state in zip(COUNTERS, self._counts, self._count_state, strict=True):
            values, is_set = _counter_values(latest.get_column(name))
            last, known = counts.reshape(-1), state.reshape(-1)
            changed |= is_set & ~((known[cells] == SET) & (last[cells] == values))
            last[cells] = values
            known[cells] = np.where(is_set, SET, NULL)
        return latest.filter(pl.Series(changed)) if changed.any() else None

    def _forget_counters(self, keys: list[tuple[str, int]]) -> None:
        """Make the GPUs of ``keys`` count as changed in the next batch (their state restarts)."""
        nodes, gpus = self._count_state[0].shape  # every counter's state has the same shape
        for node, gpu in keys:
            i = self.liveness.slots.id_of(node)
            if i is None or i >= nodes or gpu >= gpus:
                continue
            for state in self._count_state:
                state[i, gpu] = UNKNOWN

    def _restart_counters(self) -> None:
        """Every GPU counts as changed in the next batch: what it is compared with restarts."""
        self._counts = [np.zeros((0, 1), np.int64) for _ in COUNTERS]
        self._count_state = [np.zeros((0, 1), np.int8) for _ in COUNTERS]

    def _emit(self, evidence: list[Located], confirmed_at: int | None = None) -> list[Detection]:
        if not evidence:  # the usual batch: nothing to sort or group
            return []
        return self.book.report(evidence, _headline, confirmed_at)


def _counter_values(column: pl.Series) -> tuple[np.ndarray, np.ndarray | bool]:
    """A counter column's values (0 where null) and where it is set (True: everywhere, the
    usual case, with no array to build and combine)."""
    if column.null_count() == 0:
        return column.to_numpy(), True
    return column.fill_null(0).to_numpy(), column.is_not_null().to_numpy()


def _headline(job_id: str, incident: JobEvidence) -> str:
    root = incident.root
    return f"GPU fault on {root.node if root and root.node else 'a node'} in job {job_id}"
