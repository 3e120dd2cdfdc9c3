"""A fake dcgm-exporter: GPUs' counters as dcgm-exporter 3.x serves them on ``:9400/metrics``,
behind an ``httpx`` transport, for tests of the Prometheus source and of what reads it.

``exposition()`` writes one host's page (two GPUs, its default counters plus ECC and NVLink,
the labels dcgm-exporter puts on each sample and its ``hpc_job`` label when it maps a job).
``DcgmExporter`` serves a page per host and fails as real endpoints do: a host that refuses
connections, a host that answers an HTTP error, a host whose page is not Prometheus text.
"""

from __future__ import annotations

import httpx

LABELS = (
    'gpu="{gpu}",UUID="GPU-{gpu}abc",pci_bus_id="00000000:{gpu}7:00.0",device="nvidia{gpu}",'
    'modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}",DCGM_FI_DRIVER_VERSION="535.104.05"'
    "{job}"
)
"""The labels of one GPU's samples (``{job}``: the ``hpc_job`` label, when a job is mapped)."""


def exposition(host: str, xid: int = 0, job: str = "", ecc_dbe: int = 0) -> str:
    """One host's page: GPU 0 idle and healthy, GPU 1 busy with Xid ``xid``, ``ecc_dbe``
    double-bit ECC errors and a few NVLink errors; ``job`` maps both GPUs to that job."""
    lines = []
    metrics: list[tuple[str, str, str, list[float]]] = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", [1410, 1395]),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", [34, 36]),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", [61.239, 423.5]),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", [0, 2]),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", [0, 100]),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", [0, xid]),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", [81050, 1000]),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", [0, 80050]),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Throttle reasons.", [0, 4]),
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC.", [0, ecc_dbe]),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "CRC flit.", [0, 3]),
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Replays.", [0, 1]),
    ]
    for name, kind, text, values in metrics:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for gpu, value in enumerate(values):
            labels = LABELS.format(gpu=gpu, host=host, job=f',hpc_job="{job}"' if job else "")
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


class DcgmExporter:
    """Serves ``pages[host]`` to any path of that host; ``handler`` is the transport's."""

    def __init__(self, pages: dict[str, str] | None = None) -> None:
        self.pages = dict(pages or {})
        self.refused: set[str] = set()
        """Hosts that refuse connections (``httpx.ConnectError``)."""
        self.errors: dict[str, tuple[int, str]] = {}
        """Hosts that answer an HTTP error: status and body."""
        self.requests: list[str] = []
        """The URL of every request, in order."""

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        host = request.url.host
        if host in self.refused:
            raise httpx.ConnectError("connection refused", request=request)
        if host in self.errors:
            status, body = self.errors[host]
            return httpx.Response(status, text=body)
        if host not in self.pages:
            raise httpx.ConnectError(f"no route to host {host}", request=request)
        return httpx.Response(200, text=self.pages[host])

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)
