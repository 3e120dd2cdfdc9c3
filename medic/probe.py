"""What ``medic doctor`` learns by trying one dependency once, harmlessly: each registered
source and executor probes its own backend and answers a ``Probe``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Probe:
    status: Status
    detail: str
    """One line, naming what was tried."""
