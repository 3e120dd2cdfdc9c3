"""``medic agent``: samples NVML on a node (pynvml, package nvidia-ml-py) and serves the samples
as Prometheus text under dcgm-exporter's metric names, so ``PrometheusSource`` (or any
Prometheus) reads a node running the agent exactly like one running dcgm-exporter.

Each sample reads, per GPU, every metric of the gpu schema: utilisation, framebuffer used,
power, temperature, SM clock, the clocks-event-reasons bitmask, volatile ECC counts
(corrected, uncorrected), the PCIe replay counter and the NVLink CRC-flit, CRC-data, replay
and recovery counters summed over the GPU's active links. Xid events come from an NVML event
set registered for ``nvmlEventTypeXidCriticalError`` and drained without waiting at every
sample. A metric the GPU does not support (``NVMLError_NotSupported``) stays null and is not
asked again; any other NVML error leaves that value null for that sample and is counted.

Exposition: every metric of ``DCGM_METRICS`` labelled ``gpu``, ``UUID``, ``device``,
``modelName``, ``Hostname`` (and ``hpc_job`` when a job-mapping directory says which job holds
the GPU: dcgm-exporter's convention, a file per GPU index holding the job id). Counters are
exposed untyped: prometheus-client would append ``_total`` to a counter family's name, which
would no longer be dcgm-exporter's. ``DCGM_EXP_XID_ERRORS_TOTAL{xid=...}`` counts Xid events
since the agent started, so a scraper misses none between scrapes.

InfiniBand: each sample also reads every HCA port's counters from sysfs
(``medic.ingest.infiniband``; the root is configurable) and puts the node's sums on every GPU
row (``ib_errors``, ``ib_link_downed``); the endpoint serves them per port under
node_exporter's ``node_infiniband_*`` names and labels (``device``, ``port``), so the
scraper reads the agent's counters exactly like a node_exporter's.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import Metric

from medic import schema
from medic.ingest.dcgm import DCGM_METRICS, NVLINK_ERRORS, XID_LAST, XID_TOTAL
from medic.ingest.infiniband import (
    NODE_EXPORTER,
    SYSFS_ROOT,
    PortCounters,
    SysfsCounters,
    port_totals,
)
from medic.ingest.live import SourceStats, wall_us

log = logging.getLogger(__name__)

MIB = 1 << 20


def _text(value: str | bytes) -> str:
    """pynvml answers bytes in older releases, str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Gpu:
    """One device and what is known about it."""

    index: int
    handle: Any
    uuid: str
    model: str
    minor: int
    links: list[int] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Reading:
    """One GPU's sample: the gpu-schema row plus the dcgm-exporter values it came from."""

    row: dict[str, Any]
    metrics: dict[str, float]
    labels: dict[str, str]
    xid_totals: dict[int, int]


class NvmlSampler:
    """Reads NVML through an injected ``pynvml`` module (the fake-able seam)."""

    def __init__(
        self,
        nvml: ModuleType,
        hostname: str | None = None,
        job_map_dir: Path | None = None,
        infiniband: Path | None = None,
    ) -> None:
        self.nvml = nvml
        self.hostname = hostname or socket.gethostname()
        self.job_map_dir = job_map_dir
        self.stats = SourceStats()
        self.infiniband = SysfsCounters(infiniband, self.stats) if infiniband else None
        self.ib_ports: list[PortCounters] = []
        """The InfiniBand ports' counters of the latest sample."""
        self.xid_totals: dict[int, Counter[int]] = {}
        self.last_xid: dict[int, int] = {}
        nvml.nvmlInit()
        self.gpus = [self._device(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.events = self._register_xid_events()

    def _device(self, index: int) -> Gpu:
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        gpu = Gpu(
            index=index,
            handle=handle,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            model=_text(nvml.nvmlDeviceGetName(handle)),
            minor=self._try(lambda: nvml.nvmlDeviceGetMinorNumber(handle), index) or index,
        )
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link):
                    gpu.links.append(link)
            except nvml.NVMLError:
                continue
        self.xid_totals[index] = Counter()
        return gpu

    def _register_xid_events(self) -> Any:
        nvml = self.nvml
        try:
            events = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            log.warning("agent: no Xid events (cannot create an NVML event set: %s)", exc)
            return None
        for gpu in self.gpus:
            try:
                nvml.nvmlDeviceRegisterEvents(
                    gpu.handle, nvml.nvmlEventTypeXidCriticalError, events
                )
            except nvml.NVMLError as exc:
                log.warning("agent: GPU %d reports no Xid events: %s", gpu.index, exc)
        return events

    def close(self) -> None:
        if self.events is not None:
            self.nvml.nvmlEventSetFree(self.events)
            self.events = None
        self.nvml.nvmlShutdown()

    def _try(self, read: Callable[[], Any], index: int, metric: str = "") -> Any:
        """``read()``, or None when NVML cannot tell (NotSupported is remembered per GPU)."""
        nvml = self.nvml
        try:
            return read()
        except nvml.NVMLError_NotSupported:
            if metric:
                self.gpus[index].unsupported.add(metric)
            return None
        except nvml.NVMLError as exc:
            self.stats.add("nvml_errors")
            log.debug("agent: GPU %d %s: %s", index, metric or "query", exc)
            return None

    def _xid_events(self) -> dict[int, int]:
        """Xid codes per GPU index since the last sample (the last one of each GPU)."""
        nvml = self.nvml
        seen: dict[int, int] = {}
        if self.events is None:
            return seen
        by_uuid = {gpu.uuid: gpu.index for gpu in self.gpus}
        while True:
            try:
                event = nvml.nvmlEventSetWait_v2(self.events, 0)
            except nvml.NVMLError_Timeout:
                return seen
            except nvml.NVMLError as exc:
                self.stats.add("nvml_errors")
                log.warning("agent: reading Xid events failed: %s", exc)
                return seen
            if not event.eventType & nvml.nvmlEventTypeXidCriticalError:
                continue
            index = by_uuid.get(_text(nvml.nvmlDeviceGetUUID(event.device)))
            if index is None:
                continue
            code = int(event.eventData)
            seen[index] = self.last_xid[index] = code
            self.xid_totals[index][code] += 1

    def sample(self, now_us: int) -> list[Reading]:
        """One reading per GPU, stamped ``now_us``."""
        xids = self._xid_events()
        self.ib_ports = self.infiniband.read() if self.infiniband else []
        ib = port_totals(self.ib_ports)
        return [self._read(gpu, now_us, xids.get(gpu.index), ib) for gpu in self.gpus]

    def _read(self, gpu: Gpu, now_us: int, xid: int | None, ib: dict[str, int | None]) -> Reading:
        nvml, h, i = self.nvml, gpu.handle, gpu.index

        def get(metric: str, read: Callable[[], Any]) -> Any:
            return None if metric in gpu.unsupported else self._try(read, i, metric)

        util = get("util", lambda: nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        memory = get("mem", lambda: nvml.nvmlDeviceGetMemoryInfo(h).used)
        power = get("power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
        metrics: dict[str, Any] = {
            "DCGM_FI_DEV_GPU_UTIL": util,
            "DCGM_FI_DEV_FB_USED": None if memory is None else memory / MIB,
            "DCGM_FI_DEV_POWER_USAGE": None if power is None else power / 1000.0,
            "DCGM_FI_DEV_GPU_TEMP": get(
                "temp", lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)
            ),
            "DCGM_FI_DEV_SM_CLOCK": get(
                "clock", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)
            ),
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": get("reasons", lambda: self._reasons(h)),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": get("ecc_dbe", lambda: self._ecc(h, corrected=False)),
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": get("ecc_sbe", lambda: self._ecc(h, corrected=True)),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": get(
                "pcie", lambda: nvml.nvmlDeviceGetPcieReplayCounter(h)
            ),
            XID_LAST: self.last_xid.get(i, 0),
        }
        metrics.update(self._nvlink(gpu))
        present = {k: float(v) for k, v in metrics.items() if v is not None}
        nvlink = [present[n] for n in NVLINK_ERRORS if n in present]
        job_id = self._job_of(i)
        row = {
            "time": now_us,
            "node": self.hostname,
            "gpu": i,
            "job_id": job_id,
            **{m.column: metrics[m.name] for m in DCGM_METRICS if m.column},
            "xid": xid,
            "nvlink_errors": int(sum(nvlink)) if nvlink else None,
            **ib,
        }
        labels = {
            "gpu": str(i),
            "UUID": gpu.uuid,
            "device": f"nvidia{gpu.minor}",
            "modelName": gpu.model,
            "Hostname": self.hostname,
        }
        if job_id is not None:
            labels["hpc_job"] = job_id
        return Reading(row, present, labels, dict(self.xid_totals[i]))

    def _reasons(self, handle: Any) -> int:
        nvml = self.nvml
        try:
            return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        except nvml.NVMLError_FunctionNotFound:
            return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def _ecc(self, handle: Any, corrected: bool) -> int:
        nvml = self.nvml
        kind = (
            nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
            if corrected
            else nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        )
        return int(nvml.nvmlDeviceGetTotalEccErrors(handle, kind, nvml.NVML_VOLATILE_ECC))

    def _nvlink(self, gpu: Gpu) -> dict[str, int | None]:
        nvml = self.nvml
        counters = dict(
            zip(
                NVLINK_ERRORS,
                (
                    nvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
                    nvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
                    nvml.NVML_NVLINK_ERROR_DL_REPLAY,
                    nvml.NVML_NVLINK_ERROR_DL_RECOVERY,
                ),
                strict=True,
            )
        )
        out: dict[str, int | None] = {}
        for name, counter in counters.items():
            read = functools.partial(nvml.nvmlDeviceGetNvLinkErrorCounter, gpu.handle)
            values = [
                self._try(functools.partial(read, link, counter), gpu.index) for link in gpu.links
            ]
            known = [int(v) for v in values if v is not None]
            out[name] = sum(known) if known else None
        return out

    def _job_of(self, index: int) -> str | None:
        if self.job_map_dir is None:
            return None
        try:
            text = (self.job_map_dir / str(index)).read_text()
        except OSError:
            return None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[0] if lines else None


def readings_table(readings: list[Reading]) -> pa.Table:
    """Readings as rows of the gpu schema."""
    columns = {f.name: [r.row.get(f.name) for r in readings] for f in schema.GPU}
    return pa.Table.from_pydict(columns, schema=schema.GPU)


class DcgmCollector:
    """prometheus-client collector serving the latest readings under dcgm-exporter's names."""

    def __init__(self) -> None:
        self._sample: tuple[list[Reading], list[PortCounters]] = ([], [])

    def update(self, readings: list[Reading], ports: list[PortCounters] | None = None) -> None:
        self._sample = (readings, ports or [])  # one reference swap: scrapes see a whole sample

    def collect(self) -> Iterator[Metric]:
        readings, ports = self._sample
        yield from _infiniband(ports)
        for spec in DCGM_METRICS:
            if spec.name == XID_TOTAL:
                continue
            metric = Metric(spec.name, spec.help, "gauge" if spec.kind == "gauge" else "unknown")
            for reading in readings:
                if spec.name in reading.metrics:
                    metric.add_sample(spec.name, reading.labels, reading.metrics[spec.name])
            if metric.samples:
                yield metric
        xid_total = next(m for m in DCGM_METRICS if m.name == XID_TOTAL)
        metric = Metric(XID_TOTAL, xid_total.help, "unknown")
        for reading in readings:
            for code, count in sorted(reading.xid_totals.items()):
                metric.add_sample(XID_TOTAL, {**reading.labels, "xid": str(code)}, count)
        if metric.samples:
            yield metric


def _infiniband(ports: list[PortCounters]) -> Iterator[Metric]:
    """The ports' counters as node_exporter's infiniband collector serves them."""
    for counter, name in NODE_EXPORTER.items():
        family = name.removesuffix("_total")
        metric = Metric(family, f"InfiniBand port counter {counter}.", "counter")
        for port in ports:
            if counter in port.values:
                labels = {"device": port.device, "port": port.port}
                metric.add_sample(name, labels, port.values[counter])
        if metric.samples:
            yield metric


@dataclass(frozen=True)
class AgentConfig:
    """Options of ``medic agent``."""

    address: str = "0.0.0.0"
    port: int = 9400
    """dcgm-exporter's default port."""
    interval_s: float = 1.0
    hostname: str = ""
    job_map_dir: str = ""
    infiniband_root: str = str(SYSFS_ROOT)
    """Where the kernel exposes InfiniBand ports (empty: read none)."""


def registry_for(collector: DcgmCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(collector: DcgmCollector) -> str:
    """The Prometheus text an endpoint serves for ``collector``'s readings."""
    return generate_latest(registry_for(collector)).decode()


class Agent:
    """The node agent: a sampler, its collector and the HTTP endpoint serving it."""

    def __init__(self, config: AgentConfig, nvml: ModuleType) -> None:
        self.config = config
        job_map = Path(config.job_map_dir) if config.job_map_dir else None
        ib_root = Path(config.infiniband_root) if config.infiniband_root else None
        self.sampler = NvmlSampler(nvml, config.hostname or None, job_map, ib_root)
        self.collector = DcgmCollector()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Serve ``/metrics``; returns the port bound (useful with port 0)."""
        self._server, self._thread = start_http_server(
            self.config.port, self.config.address, registry=registry_for(self.collector)
        )
        port: int = self._server.server_port
        log.info(
            "agent: %d GPU(s), serving on %s:%d", len(self.sampler.gpus), self.config.address, port
        )
        return port

    def step(self) -> list[Reading]:
        """Take one sample and publish it."""
        readings = self.sampler.sample(wall_us())
        self.collector.update(readings, self.sampler.ib_ports)
        return readings

    def run(self, stop: threading.Event, on_sample: Callable[[list[Reading]], None]) -> None:
        """Sample every ``interval_s`` until ``stop`` is set."""
        deadline = time.monotonic()
        while not stop.is_set():
            on_sample(self.step())
            deadline += self.config.interval_s
            stop.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self.sampler.close()
