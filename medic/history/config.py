"""The ``[history]`` settings table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from medic.config import NonNegative, Positive, PositiveCount, from_dict


@dataclass(frozen=True)
class HistoryConfig:
    """``[history]``: the DuckDB history and the report's assumptions."""

    path: str = "medic-history.duckdb"
    """The DuckDB database file."""
    watchdog_timeout_s: Positive = 600.0
    """The NCCL watchdog timeout GPU-hours saved are measured against (PyTorch's default)."""
    gpus_per_node: PositiveCount = 8
    """GPUs of a job per allocated node, when no telemetry says how many GPUs it held."""
    lateness_s: NonNegative = 30.0
    """A minute of telemetry or progress is summarised once event time is this far past its
    end, so rows that arrive a little late still count."""


def history_config(settings: Mapping[str, Any] | None) -> HistoryConfig:
    """The ``[history]`` table of a settings mapping as a typed config."""
    return from_dict(HistoryConfig, (settings or {}).get("history", {}), "history")
