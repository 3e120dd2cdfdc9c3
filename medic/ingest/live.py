"""What every live source shares: its one wall-clock read, retry backoff, error wording, counters.

Live sources are the one place in medic that reads the wall clock: they stamp rows that carry
no time of their own (file lines, scrapes, scheduler polls) and decide how far their
watermark may advance. Everything downstream works on event time only.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx


class SourceError(RuntimeError):
    """A live source cannot go on (a rejected query, a wrong URL, a bad setting): one line that
    says which source, where and why. Transient failures are retried instead."""


def wall_ns() -> int:
    """Now, in nanoseconds since the epoch."""
    return time.time_ns()


def wall_us() -> int:
    """Now, in microseconds since the epoch (medic's event-time unit)."""
    return time.time_ns() // 1000


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a server's answer, shortened for a one-line message."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return "(empty answer)"


def http_failure(what: str, response: httpx.Response, body: bytes) -> str:
    """``<what> answered 400 Bad Request: <first line of the body>``."""
    reason = response.reason_phrase or ""
    text = body.decode("utf-8", errors="replace")
    return f"{what} answered {response.status_code} {reason}: {first_line(text)}".replace("  ", " ")


def is_retryable_status(status: int) -> bool:
    """5xx (overload, timeouts) and 429 are worth retrying; other 4xx never get better."""
    return status >= 500 or status == 429


@dataclass
class Backoff:
    """Exponential backoff with full jitter, reset after a success."""

    initial_s: float = 0.5
    max_s: float = 30.0
    attempt: int = 0

    def next_delay(self) -> float:
        cap = min(self.max_s, self.initial_s * (2**self.attempt))
        self.attempt += 1
        return random.uniform(cap / 2, cap)

    def reset(self) -> None:
        self.attempt = 0

    async def sleep(self) -> None:
        await asyncio.sleep(self.next_delay())


@dataclass
class SourceStats:
    """Counters a live source keeps for its /metrics and its logs (rows, skips, retries...)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, name: str, n: int = 1) -> None:
        if n:
            self.counts[name] += n

    def __getitem__(self, name: str) -> int:
        return self.counts[name]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)
