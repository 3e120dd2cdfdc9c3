"""A node's InfiniBand port error counters: read from sysfs (the NVML agent) or from
node_exporter's ``node_infiniband_*`` metrics (the Prometheus scraper), summed over the node's
ports into the gpu schema's ``ib_errors`` and ``ib_link_downed``.

The kernel exposes each port's PMA PortCounters as one file per counter under
``/sys/class/infiniband/<hca>/ports/<port>/counters/`` (drivers/infiniband/core/sysfs.c;
Documentation/ABI/stable/sysfs-class-infiniband), a decimal number, or ``N/A (no PMA)`` on a
device without a performance management agent. node_exporter's infiniband collector
(prometheus/procfs ``sysfs/class_infiniband.go``) reads the same files and serves them as
counters labelled ``device`` and ``port``. The error counters summed are the link's physical
and integrity errors; congestion and configuration counters (transmit discards and waits,
constraint errors, VL15 drops) move on healthy links under load and are left out.

The counters are cumulative and saturate at their width (the InfiniBand PortCounters
attribute: a counter stops at all ones rather than wrapping) until cleared, so a consumer
takes a rise as events and a fall (``perfquery -R``, a reboot) as none.

This module imports nothing heavy: the agent on a GPU node runs it without polars.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from medic.ingest.live import SourceStats

log = logging.getLogger(__name__)

SYSFS_ROOT = Path("/sys/class/infiniband")
ERROR_COUNTERS = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
}
"""Kernel counter files summed into ``ib_errors``, with their width in bits (sysfs.c)."""
LINK_DOWNED = "link_downed"
LINK_DOWNED_BITS = 8
COUNTER_BITS = {**ERROR_COUNTERS, LINK_DOWNED: LINK_DOWNED_BITS}
NODE_EXPORTER = {
    "symbol_error": "node_infiniband_symbol_error_total",
    "link_error_recovery": "node_infiniband_link_error_recovery_total",
    "port_rcv_errors": "node_infiniband_port_errors_received_total",
    "port_rcv_remote_physical_errors": "node_infiniband_port_receive_remote_physical_errors_total",
    "local_link_integrity_errors": "node_infiniband_local_link_integrity_errors_total",
    "excessive_buffer_overrun_errors": "node_infiniband_excessive_buffer_overrun_errors_total",
    LINK_DOWNED: "node_infiniband_link_downed_total",
}
"""Kernel counter -> node_exporter's metric (collector/infiniband_linux.go)."""
BY_METRIC = {metric: counter for counter, metric in NODE_EXPORTER.items()}
NOT_AVAILABLE = "N/A"
"""What the kernel writes in place of a number when the device has no PMA."""


@dataclass(frozen=True)
class PortCounters:
    """One port's counters (those it could read)."""

    device: str
    port: str
    values: dict[str, int]


def node_totals(samples: Iterable[tuple[str, float]]) -> dict[str, int | None]:
    """``ib_errors`` and ``ib_link_downed`` from (kernel counter, value) pairs of every port of a
    node; a column none of whose counters was read stays None (unknown, not zero)."""
    errors: int | None = None
    downed: int | None = None
    for counter, value in samples:
        if counter == LINK_DOWNED:
            downed = (downed or 0) + int(value)
        elif counter in ERROR_COUNTERS:
            errors = (errors or 0) + int(value)
    return {"ib_errors": errors, "ib_link_downed": downed}


def port_totals(ports: Iterable[PortCounters]) -> dict[str, int | None]:
    """``node_totals`` of sysfs readings."""
    return node_totals(pair for port in ports for pair in port.values.items())


class SysfsCounters:
    """Reads every port's counters under a sysfs root (``/sys/class/infiniband``; a fake tree in
    tests). A missing root is a node without InfiniBand (nothing read, nothing counted); a
    counter file that is absent, cannot be read or holds no number is skipped and counted."""

    def __init__(self, root: Path = SYSFS_ROOT, stats: SourceStats | None = None) -> None:
        self.root = root
        self.stats = stats if stats is not None else SourceStats()

    def read(self) -> list[PortCounters]:
        if not self.root.is_dir():
            return []
        ports = []
        for counters in sorted(self.root.glob("*/ports/*/counters")):
            port_dir = counters.parent
            values = {}
            for name in COUNTER_BITS:
                value = self._value(counters / name)
                if value is not None:
                    values[name] = value
            ports.append(PortCounters(port_dir.parent.parent.name, port_dir.name, values))
        return ports

    def _value(self, path: Path) -> int | None:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            self.stats.add("ib_counter_missing")
            return None
        except OSError as exc:
            self.stats.add("ib_counter_unreadable")
            log.debug("infiniband: %s unreadable: %s", path, exc)
            return None
        if text.isdigit():
            return int(text)
        self.stats.add("ib_counter_unavailable" if text.startswith(NOT_AVAILABLE) else "ib_garbage")
        log.debug("infiniband: %s holds %r, not a counter", path, text[:40])
        return None
