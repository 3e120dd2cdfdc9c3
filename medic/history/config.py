"""The ``[history]`` settings table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from medic.config import from_dict


@dataclass(frozen=True)
class HistoryConfig:
    path: str = "medic-history.duckdb"
    """The DuckDB database file."""
    watchdog_timeout_s: float = 600.0
    """The NCCL watchdog timeout GPU-hours saved are measured against (PyTorch's default)."""
    gpus_per_node: int = 8
    """GPUs of a job per allocated node, when no telemetry says how many GPUs it held."""
    lateness_s: float = 30.0
    """A minute of telemetry or progress is summarised once event time is this far past its
    end, so rows that arrive a little late still count."""

    def __post_init__(self) -> None:
        if self.watchdog_timeout_s <= 0:
            raise ValueError("watchdog_timeout_s must be positive")
        if self.gpus_per_node < 1:
            raise ValueError("gpus_per_node must be at least 1")
        if self.lateness_s < 0:
            raise ValueError("lateness_s must not be negative")


def history_config(settings: Mapping[str, Any] | None) -> HistoryConfig:
    """The ``[history]`` table of a settings mapping as a typed config."""
    return from_dict(HistoryConfig, (settings or {}).get("history", {}), "history")
