"""dcgm-exporter's metric names: the one table of which metric feeds which gpu-schema column.

Names, types and help texts as dcgm-exporter writes them (etc/default-counters.csv,
NVIDIA/dcgm-exporter). ``medic agent`` serves them and the Prometheus scraper reads them; this
module imports nothing heavy, so the agent on a GPU node needs neither polars nor duckdb.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DcgmMetric:
    """One dcgm-exporter metric: its Prometheus type and help (as dcgm-exporter writes them)
    and the gpu-schema column it feeds (None: a part of a column, see ``NVLINK_ERRORS``)."""

    name: str
    kind: str
    help: str
    column: str | None


DCGM_METRICS = (
    DcgmMetric("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util"),
    DcgmMetric("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "mem_used_mib"),
    DcgmMetric("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w"),
    DcgmMetric("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp_c"),
    DcgmMetric("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz"),
    DcgmMetric(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of NVML clocks event reasons).",
        "throttle_reasons",
    ),
    DcgmMetric(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        "ecc_dbe",
    ),
    DcgmMetric(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
        "ecc_sbe",
    ),
    DcgmMetric(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replay"
    ),
    DcgmMetric(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        None,
    ),
    DcgmMetric(
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink data CRC errors.",
        None,
    ),
    DcgmMetric(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink retries.",
        None,
    ),
    DcgmMetric(
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink recovery errors.",
        None,
    ),
    DcgmMetric("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", None),
    DcgmMetric(
        "DCGM_EXP_XID_ERRORS_TOTAL",
        "counter",
        "Total XID errors observed since exporter start.",
        None,
    ),
)
ALIASES = {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
"""Older dcgm-exporters name the clocks-event bitmask by its former name."""
NVLINK_ERRORS = tuple(m.name for m in DCGM_METRICS if m.name.startswith("DCGM_FI_DEV_NVLINK_"))
"""Summed into ``nvlink_errors`` (CRC flit + CRC data + replay + recovery)."""
XID_LAST = "DCGM_FI_DEV_XID_ERRORS"
XID_TOTAL = "DCGM_EXP_XID_ERRORS_TOTAL"
COLUMNS = {m.name: m.column for m in DCGM_METRICS if m.column}
