"""A session-wide cache of simulated recordings: each (scenario, seed, params) is generated
once and shared by every test that inspects it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from medic.recording import Recording
from medic.simulate import simulate

Simulated = Callable[..., Recording]

# Small and short, but with room for every cascade.
SMALL: dict[str, Any] = {"job_nodes": 2, "jobs": 1, "duration_min": 25.0}


@pytest.fixture(scope="session")
def simulated() -> Simulated:
    cache: dict[str, Recording] = {}

    def get(scenario: str, seed: int = 1, **params: Any) -> Recording:
        key = f"{scenario}|{seed}|{sorted(params.items())!r}"
        if key not in cache:
            cache[key] = simulate(scenario, seed, **params)
        return cache[key]

    return get


def frames(recording: Recording) -> dict[str, pl.DataFrame]:
    """Every table as polars, times as integer microseconds."""
    out = {}
    for name in ("logs", "gpu", "scheduler", "labels"):
        table = getattr(recording, name)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        column = "onset" if name == "labels" else "time"
        out[name] = frame.with_columns(pl.col(column).dt.epoch("us"))
    return out
