"""GPU telemetry source: scrapes dcgm-exporter (or ``medic agent``) endpoints into ``gpu`` batches.

Metric names and labels are dcgm-exporter's (etc/default-counters.csv, NVIDIA/dcgm-exporter):
one sample per GPU labelled ``gpu`` (device index), ``UUID``, ``device``, ``modelName``,
``Hostname`` and, when dcgm-exporter maps GPUs to jobs, ``hpc_job``.
``medic.ingest.dcgm.DCGM_METRICS`` is the one table of which metric feeds which column of the
gpu schema; ``medic agent`` serves the same names. A metric an endpoint does not export
leaves its column null.

Xid: ``DCGM_FI_DEV_XID_ERRORS`` is only the *last* Xid a GPU saw, so a scrape can miss
events and cannot tell a repeat of the same code. When the endpoint also exports
``DCGM_EXP_XID_ERRORS_TOTAL{xid=...}`` (``medic agent`` and recent dcgm-exporters do), a row
carries the code whose count grew since the previous scrape; otherwise the code the gauge
changed to. The previous values are kept in the cursor, so a restart neither repeats an old
Xid nor misses one that happened meanwhile (as far as the endpoint still shows it).

InfiniBand: node_exporter's ``node_infiniband_*`` counters (labels ``device``, ``port``; see
``medic.ingest.infiniband``) may come from the same endpoint (``medic agent``) or from a
node_exporter target of their own, listed among ``targets``. They are summed per node into
``ib_errors`` and ``ib_link_downed`` and put on every GPU row of that node in the round. Their
node is the one the endpoint's GPU samples name, else the target's host name (node_exporter
labels no host): list node_exporter by the same host names dcgm-exporter's ``Hostname`` label
gives. Counters of a node with no GPU row in the round are counted (``ib_unmatched``) and
dropped.

Time and watermark (this source reads the wall clock): every sample of a scrape round is
stamped with the round's start; after the round the watermark is that time. An endpoint
that fails (down, an HTTP error, text that is not Prometheus exposition) is logged and
counted and skipped for that round; the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import polars as pl
import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from medic import schema
from medic.config import Positive, PositiveCount
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.dcgm import ALIASES, COLUMNS, NVLINK_ERRORS, XID_LAST, XID_TOTAL
from medic.ingest.infiniband import BY_METRIC, node_totals
from medic.ingest.live import SourceStats, first_line, wall_us
from medic.probe import Probe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrometheusConfig:
    """``[sources.prometheus]``: GPU telemetry scraped from dcgm-exporter or ``medic agent``;
    none when absent."""

    targets: tuple[str, ...] = ()
    """Endpoints, e.g. ``http://gpu001:9400/metrics``."""
    interval_s: Positive = 1.0
    """How often every target is scraped."""
    timeout_s: Positive = 2.0
    """Time one scrape may take."""
    node_label: str = "Hostname"
    """Label naming the node; the target's host name when a sample lacks it."""
    job_label: str = "hpc_job"
    """Label holding the job id of a GPU's samples (dcgm-exporter's job mapping)."""
    max_concurrency: PositiveCount = 64
    """Scrapes in flight at once."""

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError("targets must list at least one endpoint URL")
        for target in self.targets:
            if not target.startswith(("http://", "https://")):
                raise ValueError(f"target {target!r} must start with http:// or https://")


Scraped = tuple[list[dict[str, Any]], dict[str, list[tuple[str, float]]]]
"""An endpoint's GPU rows and its InfiniBand samples per node."""


@dataclass
class _XidSeen:
    last: int | None = None
    totals: dict[str, float] | None = None


class PrometheusSource:
    """dcgm-exporter style endpoints as ``gpu`` batches, one scrape round per interval."""

    name = "prometheus"
    resumable = True
    title = "telemetry"
    Config = PrometheusConfig
    stream = "gpu"
    fallback = False

    @classmethod
    def open(
        cls,
        config: PrometheusConfig,
        client: httpx.AsyncClient,
        cursor: dict[str, Any] | None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
    ) -> PrometheusSource:
        return cls(config, client, cursor)

    @classmethod
    def probe(cls, config: PrometheusConfig) -> list[Probe]:
        """Each target scraped once: it must answer dcgm-exporter's GPU utilisation."""
        probes = []
        for target in config.targets:
            try:
                answer = httpx.get(target, timeout=config.timeout_s)
            except httpx.HTTPError as exc:
                probes.append(Probe("fail", f"{target} unreachable ({exc})"))
                continue
            gpus = len(re.findall(r"^DCGM_FI_DEV_GPU_UTIL\{", answer.text, re.MULTILINE))
            if answer.status_code != 200:
                probes.append(Probe("fail", f"{target} answered {answer.status_code}"))
            elif not gpus:
                probes.append(Probe("fail", f"{target} answered without DCGM_FI_DEV_GPU_UTIL"))
            else:
                probes.append(Probe("ok", f"{target}: {gpus} GPU(s)"))
        return probes

    @classmethod
    def absent(cls) -> list[Probe]:
        """No telemetry configured: whether NVML on this host would see GPUs."""
        advice = (
            "GPU faults and stragglers need [sources.prometheus] (dcgm-exporter or medic agent)"
        )
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                count = pynvml.nvmlDeviceGetCount()
            finally:
                pynvml.nvmlShutdown()
        except Exception as exc:  # NVMLError, or a library that cannot load
            return [Probe("warn", f"none configured, no NVML on this host ({exc}); {advice}")]
        return [Probe("warn", f"none configured; NVML here sees {count} GPU(s); {advice}")]

    @property
    def poll_interval_s(self) -> float | None:
        """How often it polls; None: its watermark is its own (event time)."""
        return self.config.interval_s

    def __init__(
        self,
        config: PrometheusConfig,
        client: httpx.AsyncClient,
        cursor: dict[str, Any] | None = None,
        *,
        clock: Callable[[], int] = wall_us,
    ) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.stats = SourceStats()
        self.watermark: int | None = None
        self._xid: dict[tuple[str, int], _XidSeen] = {}
        for key, seen in (cursor or {}).get("xid", {}).items():
            node, _, gpu = key.rpartition("|")
            self._xid[(node, int(gpu))] = _XidSeen(seen.get("last"), seen.get("totals"))

    def checkpoint(self) -> dict[str, Any]:
        """Last Xid values seen per GPU (so a restart does not report an old Xid again)."""
        return {
            "watermark": self.watermark,
            "xid": {
                f"{node}|{gpu}": {"last": seen.last, "totals": seen.totals}
                for (node, gpu), seen in self._xid.items()
            },
        }

    async def __aiter__(self) -> AsyncIterator[Event]:
        interval = self.config.interval_s
        while True:
            started = time.monotonic()
            for event in await self.scrape_round():
                yield event
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def scrape_round(self) -> list[Event]:
        """Scrape every target once: one gpu batch (when any answered) and the watermark."""
        now = self.clock()
        if self.watermark is not None:
            now = max(now, self.watermark)
        limit = asyncio.Semaphore(self.config.max_concurrency)

        async def bounded(target: str) -> Scraped:
            async with limit:
                return await self._scrape(target, now)

        results = await asyncio.gather(*(bounded(t) for t in self.config.targets))
        rows = [row for rows, _ in results for row in rows]
        self._add_infiniband(rows, [ib for _, ib in results])
        events: list[Event] = []
        if rows:
            frame = pl.DataFrame(rows, schema=_ROW_SCHEMA).with_columns(
                pl.col("time").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
            )
            table: pa.Table = schema.conform(frame.sort("node", "gpu").to_arrow(), schema.GPU)
            self.stats.add("samples", table.num_rows)
            events.append(Batch("gpu", table))
        self.watermark = now
        events.append(Watermark(now))
        return events

    def _add_infiniband(
        self, rows: list[dict[str, Any]], scraped: list[dict[str, list[tuple[str, float]]]]
    ) -> None:
        """Put each node's InfiniBand sums on its GPU rows."""
        per_node: dict[str, list[tuple[str, float]]] = {}
        for ib in scraped:
            for node, samples in ib.items():
                per_node.setdefault(node, []).extend(samples)
        if not per_node:
            return
        totals = {node: node_totals(samples) for node, samples in per_node.items()}
        for row in rows:
            row.update(totals.get(row["node"], {}))
        matched = {row["node"] for row in rows}
        self.stats.add("ib_unmatched", sum(node not in matched for node in totals))

    async def _scrape(self, target: str, now: int) -> Scraped:
        try:
            response = await self.client.get(target, timeout=self.config.timeout_s)
        except httpx.HTTPError as exc:
            return self._failed(target, f"unreachable ({exc or type(exc).__name__})")
        if response.status_code != 200:
            why = f"answered {response.status_code}: {first_line(response.text)}"
            return self._failed(target, why)
        try:
            return self._rows(response.text, target, now)
        except ValueError as exc:
            return self._failed(target, f"sent text that is not Prometheus exposition ({exc})")

    def _failed(self, target: str, why: str) -> Scraped:
        self.stats.add("scrape_errors")
        log.warning("prometheus: %s %s", target, why)
        return [], {}

    def _rows(self, text: str, target: str, now: int) -> Scraped:
        """The endpoint's GPU rows, and its InfiniBand samples per node (kernel counter name,
        value)."""
        host = urllib.parse.urlsplit(target).hostname or target
        per_gpu: dict[tuple[str, int], dict[str, Any]] = {}
        xid_totals: dict[tuple[str, int], dict[str, float]] = {}
        ib: list[tuple[str, float]] = []
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in BY_METRIC:
                    ib.append((BY_METRIC[sample.name], sample.value))
                    continue
                # the parser names a counter's samples <family>_total: undo it for dcgm names
                name = family.name if sample.name == f"{family.name}_total" else sample.name
                name = ALIASES.get(name, name)
                if name not in COLUMNS and name not in NVLINK_ERRORS and name not in _XID_NAMES:
                    continue
                labels = sample.labels
                if "gpu" not in labels:
                    continue
                key = (labels.get(self.config.node_label) or host, int(labels["gpu"]))
                row = per_gpu.setdefault(key, {"job_id": labels.get(self.config.job_label)})
                if name in COLUMNS:
                    row[COLUMNS[name]] = sample.value
                elif name in NVLINK_ERRORS:
                    row["nvlink_errors"] = row.get("nvlink_errors", 0) + sample.value
                elif name == XID_LAST:
                    row["xid_last"] = int(sample.value)
                else:
                    totals = xid_totals.setdefault(key, {})
                    code = labels.get("xid", "")
                    totals[code] = totals.get(code, 0.0) + sample.value
        rows = []
        for (node, gpu), row in per_gpu.items():
            row["xid"] = self._new_xid(
                (node, gpu), row.pop("xid_last", None), xid_totals.get((node, gpu))
            )
            rows.append({"time": now, "node": node, "gpu": gpu, **row})
        nodes = {node for node, _ in per_gpu}
        ib_node = next(iter(nodes)) if len(nodes) == 1 else host
        return rows, ({ib_node: ib} if ib else {})

    def _new_xid(
        self, key: tuple[str, int], last: int | None, totals: dict[str, float] | None
    ) -> int | None:
        seen = self._xid.get(key)
        self._xid[key] = _XidSeen(last, totals)
        if seen is None:
            return None
        if totals is not None and seen.totals is not None:
            grown = [int(c) for c, n in totals.items() if c.isdigit() and n > seen.totals.get(c, 0)]
            return max(grown) if grown else None
        if last and last != seen.last:
            return last
        return None


_XID_NAMES = (XID_LAST, XID_TOTAL)
_ROW_SCHEMA: dict[str, Any] = {
    "time": pl.Int64,
    "node": pl.String,
    "gpu": pl.Int16,
    "job_id": pl.String,
    "util": pl.Float32,
    "mem_used_mib": pl.Float32,
    "power_w": pl.Float32,
    "temp_c": pl.Float32,
    "sm_clock_mhz": pl.Float32,
    "throttle_reasons": pl.Int64,
    "ecc_dbe": pl.Int64,
    "ecc_sbe": pl.Int64,
    "xid": pl.Int32,
    "pcie_replay": pl.Int64,
    "nvlink_errors": pl.Int64,
    "ib_errors": pl.Int64,
    "ib_link_downed": pl.Int64,
}
