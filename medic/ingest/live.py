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
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # imported for its types only: httpx imports its command line's click and rich
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


def describe(exc: BaseException) -> str:
    """An exception named by its class, with its message when it has one (httpx raises some
    with an empty message)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a server's answer, shortened for a one-line message, its
    control characters escaped (``\\x1b``): a junk answer must not write terminal escapes or
    NULs into the service log."""
    for line in text.splitlines():
        if line.strip():
            line = printable(line.strip())
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return "(empty answer)"


def printable(text: str) -> str:
    """``text`` with every non-printable character written as its Python escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


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


LATENESS_BUCKETS_S = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Upper bounds of the lateness histogram (seconds behind a source's watermark)."""


@dataclass
class SourceHealth:
    """Whether a live source gets good answers now, and the last failure's one-line reason. A
    source that retries by itself reports here at once, so /healthz and /metrics tell the
    truth while it is retried."""

    up: bool = True
    error: str | None = None
    failures: int = 0

    def failed(self, why: str) -> None:
        self.up, self.error = False, why
        self.failures += 1

    def recovered(self) -> None:
        self.up, self.error = True, None


@dataclass
class SourceStats:
    """Counters a live source keeps for its /metrics and its logs (rows, skips, retries...),
    and how late its late rows were (a histogram over ``LATENESS_BUCKETS_S``)."""

    counts: Counter[str] = field(default_factory=Counter)
    lateness: list[int] = field(default_factory=lambda: [0] * (len(LATENESS_BUCKETS_S) + 1))
    """Late rows per bucket, the last one past the largest bound."""
    lateness_sum_s: float = 0.0

    def add(self, name: str, n: int = 1) -> None:
        if n:
            self.counts[name] += n

    def observe_lateness(self, seconds: pl.Series) -> None:
        """Count late rows, each ``seconds`` behind the watermark when delivered."""
        if seconds.is_empty():
            return
        buckets = pl.Series(LATENESS_BUCKETS_S).search_sorted(seconds, side="left")
        for index, n in buckets.value_counts().iter_rows():
            self.lateness[index] += n
        self.lateness_sum_s += float(seconds.sum())
        self.add("late_rows", seconds.len())

    def __getitem__(self, name: str) -> int:
        return self.counts[name]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)
