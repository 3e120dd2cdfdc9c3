"""VictoriaLogs source: live tail over ``/select/logsql/tail``, backfill over ``…/query``, and a
sweep that delivers the late rows the tail never sends.

VictoriaLogs' tail has no resume cursor (docs/victorialogs.md): a new tail re-sends the last
``start_offset`` of rows and knows nothing of what an earlier connection delivered; and it
never sends a row that becomes searchable more than about ``offset + 5 s`` after its
``_time``, which is the normal case for log shippers that batch and retry (Vector, Promtail,
OpenTelemetry collectors, Fluent Bit). This source therefore keeps its own cursor:

* the **watermark** W: every row with ``_time <= W`` that VictoriaLogs could serve by the time
  W was reached has been delivered;
* the rows delivered over the last ``lateness_s`` before W (``SeenRows``: content hashes
  with counts); rows older than that horizon are never delivered again.

A row is delivered at most once, whichever read brings it: the tail, a reconnected tail that
reaches back ``5 s`` before W, a backfill through ``/query`` after an outage (in bounded time
windows, halved while a window holds more than ``backfill_max_rows``), or the **late sweep**.
Every ``sweep_interval_s`` the sweep asks ``/select/logsql/hits`` how many rows each
``sweep_step_s`` of the trailing window ``(horizon, W]`` holds and re-reads through /query
only the steps that hold more rows than were delivered. A row delivered at or before W is
late: it is still delivered (detectors take rows behind the watermark) and counted, with how
far behind W it was, in the source's stats (``late_rows``, the lateness histogram).

A row that reaches VictoriaLogs after the horizon has passed its ``_time`` (more than about
``lateness_s`` late) is never delivered, but it is counted: as the horizon moves on, the rows
delivered per stream and step move to a ``LateAudit`` for ``lost_audit_s`` more, and each
sweep asks /hits for that band too (one query); rows stored beyond what was delivered are
counted once as ``lost_late_rows`` and logged as a warning with their window.

Watermark of the live tail (the one place that reads the wall clock): the server runs its
first query when the tail opens (covering rows up to ``open - offset``) and one every
``refresh_interval`` after, and sends each window's rows at once. When the stream has paused
(no bytes for half a refresh), every window run up to ``watermark_lag_s`` ago has arrived, so
the source is complete up to ``max(open, now - lag - refresh) - offset`` (once
``now - lag >= open``). The lag covers the server's query time, its ~1 s visibility delay,
the network and clock skew. The tail asks for ``Accept-Encoding: identity``: a gzipped tail
sends no response headers while its query matches nothing, which would freeze the watermark
of a quiet source. A gap longer than ``max_tail_catchup_s`` is backfilled first.

Every answer is checked before anything moves: its status, its Content-Type and the shape of
every line; a 200 with an HTML page or JSON of another shape is a failure like a refused
connection. Failures mark the source down at once (``health``), with their one-line reason,
and are retried with exponential backoff, capped and jittered, reset only by progress.
Decoding takes the stream in large blocks (whole lines, up to ``BLOCK_BYTES``) however small
the pieces the server writes, one polars NDJSON read per block.

Filters and field selection are pushed into LogsQL: ``query`` is sent as is, followed by a
``fields`` pipe naming only ``_time``, ``_stream_id``, ``_msg`` and the mapped fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import re
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import httpx
import polars as pl

from medic import schema
from medic.config import Count, NonNegative, Positive, PositiveCount, Range
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.late_audit import LateAudit
from medic.ingest.live import (
    Backoff,
    SourceError,
    SourceHealth,
    SourceStats,
    describe,
    first_line,
    http_failure,
    is_retryable_status,
    printable,
    wall_ns,
)
from medic.ingest.seen import SeenRows
from medic.probe import Probe

log = logging.getLogger(__name__)

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
TAIL_LOOKBACK_NS = 5 * NS_PER_S
"""VictoriaLogs re-reads the last 5 s of every tail window (``tailOffsetNsecs``)."""
BLOCK_BYTES = 8 << 20
"""Decode at most this much buffered NDJSON at once."""
COALESCE_S = 0.02
"""Bytes arriving within this of each other are decoded together (each decode has a fixed
cost of about a millisecond: blocks of a few hundred rows would double the cost per row)..."""
COALESCE_MAX_S = 0.25
"""...but a block waits at most this long for more, so live rows are not held back."""
ROWS_TYPES = ("application/stream+json", "application/x-ndjson", "application/json")
"""Content-Types of rows: /query answers the first, /tail the second."""
CRASH_LOSS_NS = 10 * NS_PER_S
"""Rows delivered this long before a failure are re-read by the next sweep: a server killed
with -9 loses the rows it acknowledged in its last ~5 s, and their absence could hide late
rows from the sweep's counts."""
SWEEP_STREAMS = 100
"""Streams re-read by one sweep query (``_stream_id:in(...)``)."""
RFC3339 = "%Y-%m-%dT%H:%M:%S%.fZ"
"""How VictoriaLogs writes ``_time`` (UTC, fraction trimmed or absent)."""
GZIP_MAGIC = b"\x1f\x8b"
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class FieldMap:
    """Which VictoriaLogs fields hold the logs schema's columns ("" when a field is absent)."""

    job_id: str = "job_id"
    """Field holding the Slurm job id."""
    node: str = "host"
    """Field holding the node's host name."""
    rank: str = "rank"
    """Field holding the rank."""
    source: str = "source"
    """Field holding the line's source (app, system or slurm)."""


@dataclass(frozen=True)
class VictoriaLogsConfig:
    """``[sources.victorialogs]``: logs from VictoriaLogs; when absent, logs come from files."""

    url: str = "http://127.0.0.1:9428"
    """VictoriaLogs' base URL (http:// or https://)."""
    query: str = "*"
    """LogsQL filter selecting the lines detectors need (no pipes)."""
    fields: FieldMap = field(default_factory=FieldMap)
    """Which VictoriaLogs fields hold the job id, node, rank and source of a line."""
    default_node: str = "unknown"
    """Node for lines whose node field is missing."""
    default_source: str = "app"
    """Source for lines whose source field is missing or not one of app/system/slurm."""
    account_id: Count = 0
    project_id: Count = 0
    """Tenant (``AccountID`` and ``ProjectID`` headers) of a multi-tenant VictoriaLogs."""
    offset_s: Annotated[float, Range(ge=0.001)] = 1.0
    """Tail offset: rows younger than this are left for the next refresh."""
    refresh_interval_s: Annotated[float, Range(ge=0.001)] = 1.0
    """How often the live tail asks for new rows (``refresh_interval`` of /tail)."""
    watermark_lag_s: NonNegative = 2.0
    """Time for a tail window's rows to reach medic (server work, its ~1 s visibility delay,
    network, clock skew)."""
    start_offset_s: NonNegative = 5.0
    """How far back a start without a cursor begins."""
    max_tail_catchup_s: NonNegative = 10.0
    """A longer gap is backfilled through /query before tailing, so that a tail's first
    window stays as small as its later ones."""
    lateness_s: NonNegative = 120.0
    """How late a row may reach VictoriaLogs (after its ``_time``) and still be delivered:
    log shippers batch and retry for seconds to minutes. Rows later than this are not
    delivered: they are counted (``lost_late_rows``) and logged, see ``lost_audit_s``."""
    lost_audit_s: NonNegative = 600.0
    """For how long after the ``lateness_s`` window has passed a step, rows that reach
    VictoriaLogs too late to be delivered are still counted there (``lost_late_rows``, one more
    /hits query per sweep; memory of one count per stream and ``sweep_step_s``). Rows later
    still are neither delivered nor counted; 0 counts none."""
    sweep_interval_s: Positive = 5.0
    """How often the trailing ``lateness_s`` is checked for rows the tail never sent."""
    sweep_step_s: Positive = 10.0
    """The sweep compares row counts per stream and step of this length and re-reads only the
    streams and steps that gained rows."""
    query_encoding: Literal["gzip", "identity"] = "gzip"
    """Compression asked for /query answers. Measured (bench/bench_victorialogs_tail.py): gzip
    costs medic less CPU per line, 1.7 times on the server's ~2 KiB pieces of recent rows (five
    times fewer pieces; polars decompresses) and 1.2 times on merged rows in 12-16 KiB pieces
    (the stream-grouped rows compress about 15-fold), and saves network bytes. The tail is
    always identity: a gzipped tail withholds its headers while nothing matches."""
    backfill_window_s: Positive = 60.0
    """A backfill asks /query for this much event time at once (halved while a window holds
    more than ``backfill_max_rows``)."""
    backfill_max_rows: PositiveCount = 1_000_000
    """Most rows one backfill query may return."""
    max_rows: PositiveCount = 65_536
    """Largest batch handed downstream."""
    connect_timeout_s: Positive = 5.0
    """Time allowed to connect to VictoriaLogs."""
    query_timeout_s: Positive = 30.0
    """Time one backfill query may take (also sent as the query's own ``timeout``)."""
    backoff_initial_s: Positive = 0.5
    backoff_max_s: Positive = 30.0
    """Pause after a failed request, doubling up to the maximum."""
    retry_limit: Count = 0
    """Consecutive failed attempts before giving up; 0 retries for ever (the service)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        if self.default_source not in schema.LOG_SOURCES:
            raise ValueError(f"default_source must be one of {', '.join(schema.LOG_SOURCES)}")
        if "|" in self.query:
            raise ValueError("query must be a LogsQL filter without pipes")

    @property
    def selected_fields(self) -> list[str]:
        """The fields asked of VictoriaLogs, each once."""
        mapped = [self.fields.job_id, self.fields.node, self.fields.rank, self.fields.source]
        return list(dict.fromkeys(["_time", "_stream_id", "_msg", *filter(None, mapped)]))

    @property
    def logsql(self) -> str:
        """The filter with the field selection pushed down as a ``fields`` pipe."""
        names = ", ".join(
            n if _PLAIN_NAME.match(n) else json.dumps(n) for n in self.selected_fields
        )
        return f"{self.query.strip() or '*'} | fields {names}"


def rfc3339_ns(ns: int) -> str:
    """``2026-03-01T10:00:00.123456789Z``: exact to the nanosecond (VictoriaLogs extends a
    coarser ``end`` to the end of its unit)."""
    seconds, frac = divmod(ns, NS_PER_S)
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{frac:09d}Z"


def duration(ns: int) -> str:
    """A VictoriaLogs duration in whole milliseconds (its resolution), at least 1 ms."""
    return f"{max(1, -(-ns // NS_PER_MS))}ms"


class TailCursor:
    """What has been delivered: the watermark, and the rows delivered over the lateness window
    behind it; see the module docstring."""

    def __init__(self, watermark_ns: int, seen: SeenRows, reach_ns: int) -> None:
        self.watermark_ns = watermark_ns
        self.seen = seen
        self.reach_ns = reach_ns
        self.audit: LateAudit | None = None
        """Where the counts of the rows the horizon passes go (none: they are dropped)."""

    @property
    def tail_from(self) -> int:
        """Where a new read resumes: 5 s before the watermark (rows that became searchable
        since it was reached), never before the horizon."""
        return max(self.watermark_ns - TAIL_LOOKBACK_NS, self.seen.horizon_ns)

    def advance(self, watermark_ns: int) -> None:
        if watermark_ns > self.watermark_ns:
            self.watermark_ns = watermark_ns
            if self.audit is not None:
                self.audit.forget(self.seen, watermark_ns - self.reach_ns)
            self.seen.advance(watermark_ns - self.reach_ns)

    def to_json(self) -> dict[str, Any]:
        return {"watermark_ns": self.watermark_ns, "seen": self.seen.dump()}

    @classmethod
    def from_json(cls, cursor: dict[str, Any], reach_ns: int) -> TailCursor:
        """A saved cursor; one saved by an older medic, or whose hashes another polars version
        made, resumes at its watermark without the rows behind it."""
        try:
            watermark = int(cursor["watermark_ns"])
            seen = SeenRows.load(cursor["seen"]) if "seen" in cursor else None
        except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            raise SourceError(
                f"victorialogs: cannot resume from cursor ({describe(exc)})"
            ) from None
        if seen is None:
            log.warning("victorialogs: the cursor holds no usable late-row set; resuming at it")
            seen = SeenRows(watermark)
        return cls(watermark, seen, reach_ns)


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _BadAnswer(Exception):
    """A 200 the source cannot read (wrong Content-Type, lines that are not rows): retried."""


class _StreamEnded(httpx.TransportError):
    """The server closed a tail that never ends by itself."""


class _Inflow:
    """A streamed answer's bytes, gathered as the server writes them (in pieces of a few KiB)
    and handed out as large blocks of whole lines."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.buffer = bytearray()
        self.ended: BaseException | None = None
        self._data = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    async def pump(self) -> None:
        """Read the response into the buffer until it ends or breaks (then ``ended`` says how)."""
        try:
            async for piece in _pieces(self.response):
                self.buffer += piece
                self._data.set()
                if len(self.buffer) >= BLOCK_BYTES:
                    self._room.clear()
                    await self._room.wait()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.ended = exc
        else:
            self.ended = _StreamEnded("VictoriaLogs closed the tail stream")
        self._data.set()

    async def block(self, wait_s: float) -> bytes | None:
        """The whole lines gathered so far, once there are some (b"" when the stream ended);
        None when nothing came within ``wait_s``."""
        try:
            await asyncio.wait_for(self._data.wait(), wait_s)
        except TimeoutError:
            return None
        size, started = -1, time.monotonic()
        while (
            size < len(self.buffer) < BLOCK_BYTES
            and self.ended is None
            and time.monotonic() - started < COALESCE_MAX_S
        ):
            size = len(self.buffer)  # more pieces follow closely: let them join this block
            await asyncio.sleep(COALESCE_S)
        cut = self.buffer.rfind(b"\n") + 1
        block = bytes(self.buffer[:cut])
        del self.buffer[:cut]
        if self.ended is None:
            self._data.clear()
        self._room.set()
        return block


class VictoriaLogsSource:
    """Log lines from VictoriaLogs as ``logs`` batches and watermarks, resumable by cursor.

    ``start_us``/``until_us`` bound the rows to deliver (``medic record``): the source then
    begins at ``start_us`` and stops once its watermark has passed ``until_us``.
    ``health`` says at once whether the last request succeeded, and why not.
    """

    name = "victorialogs"
    resumable = True
    title = "logs (victorialogs)"
    Config = VictoriaLogsConfig
    stream = "logs"
    fallback = False

    @classmethod
    def open(
        cls,
        config: VictoriaLogsConfig,
        client: httpx.AsyncClient,
        cursor: dict[str, Any] | None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
    ) -> VictoriaLogsSource:
        return cls(config, client, cursor, start_us=start_us, until_us=until_us)

    @classmethod
    def probe(cls, config: VictoriaLogsConfig) -> list[Probe]:
        """``/health``, then the configured query over the last hour (up to 1000 rows)."""
        headers = {"AccountID": str(config.account_id), "ProjectID": str(config.project_id)}
        timeout = httpx.Timeout(config.query_timeout_s, connect=config.connect_timeout_s)
        now = wall_ns()
        data = {
            "query": config.logsql,
            "start": rfc3339_ns(now - 3600 * NS_PER_S),
            "end": rfc3339_ns(now),
            "limit": "1000",
        }
        try:
            with httpx.Client(base_url=config.url, headers=headers, timeout=timeout) as client:
                health = client.get("/health")
                if health.status_code != 200:
                    return [Probe("fail", f"{config.url}/health answered {health.status_code}")]
                answer = client.post("/select/logsql/query", data=data)
        except httpx.HTTPError as exc:
            return [Probe("fail", f"{config.url} unreachable ({exc or type(exc).__name__})")]
        if answer.status_code != 200:
            return [
                Probe("fail", f"query answered {answer.status_code}: {first_line(answer.text)}")
            ]
        rows = len([line for line in answer.text.splitlines() if line.strip()])
        shown = f"{rows}{'+' if rows >= 1000 else ''} row(s) in the last hour for {config.query!r}"
        if not rows:
            return [Probe("warn", f"{config.url} reachable, but {shown}")]
        return [Probe("ok", f"{config.url} reachable; {shown}")]

    @classmethod
    def absent(cls) -> list[Probe]:
        return []

    @property
    def poll_interval_s(self) -> float | None:
        """How often it polls; None: its watermark is its own (event time)."""
        return None

    def __init__(
        self,
        config: VictoriaLogsConfig,
        client: httpx.AsyncClient,
        cursor: dict[str, Any] | None = None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
        clock: Callable[[], int] = wall_ns,
    ) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.stats = SourceStats()
        self.health = SourceHealth()
        self.until_ns = None if until_us is None else until_us * 1000 + 999  # all of that µs
        # A row reaching VictoriaLogs lateness_s after its time is found by a sweep up to a
        # sweep interval and a watermark lag later: the horizon stays that far behind.
        reach_s = config.lateness_s + config.sweep_interval_s + config.watermark_lag_s
        self._reach_ns = round(reach_s * NS_PER_S)
        self._cursor: TailCursor | None = None
        if cursor is not None:
            self._cursor = self._audited(TailCursor.from_json(cursor, self._reach_ns))
        elif start_us is not None:
            self._cursor = self._fresh_cursor(start_us * 1000 - 1)
        self._backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self._failures = 0
        self._swept_at = 0
        self._recent: list[tuple[int, pl.DataFrame]] = []
        """(when, stream hash and time) of the rows delivered in the last ``CRASH_LOSS_NS``."""
        self._suspect = pl.DataFrame(schema={"s": pl.UInt64, "t": pl.Int64})
        """Rows delivered just before a failure: a crashed server may have lost them."""
        self._base = config.url.rstrip("/")
        self._headers = {"AccountID": str(config.account_id), "ProjectID": str(config.project_id)}
        self._schema = {
            "_time": pl.String,
            "_stream_id": pl.String,
            **{name: pl.String for name in config.selected_fields[2:]},
        }
        self._hash = pl.struct("sid", "t", "_msg").hash()
        """A row's identity: its stream, its time to the ns and its message (the other fields
        are the stream's or come with the message)."""

    def _fresh_cursor(self, begin_ns: int) -> TailCursor:
        return self._audited(TailCursor(begin_ns, SeenRows(begin_ns), self._reach_ns))

    def _audited(self, cursor: TailCursor) -> TailCursor:
        """``cursor`` counting, from its horizon on, the rows that come too late to deliver
        (live only: a recorded range is read after the fact)."""
        if self.until_ns is None:
            cfg = self.config
            cursor.audit = LateAudit(
                cursor.seen.horizon_ns,
                round(cfg.sweep_step_s * NS_PER_S),
                round(cfg.lost_audit_s * NS_PER_S),
            )
        return cursor

    def checkpoint(self) -> dict[str, Any]:
        """The cursor after the rows handed out so far (empty before the first)."""
        return {} if self._cursor is None else self._cursor.to_json()

    @property
    def watermark_us(self) -> int | None:
        return None if self._cursor is None else self._cursor.watermark_ns // 1000

    def _done(self) -> bool:
        cursor = self._cursor
        return (
            self.until_ns is not None
            and cursor is not None
            and cursor.watermark_ns >= self.until_ns
        )

    async def __aiter__(self) -> AsyncIterator[Event]:
        cfg = self.config
        if self._cursor is None:
            self._cursor = self._fresh_cursor(
                self.clock() - round((cfg.offset_s + cfg.start_offset_s) * NS_PER_S)
            )
        while not self._done():
            try:
                async for event in self._attempt():
                    yield event
            except _HttpError as exc:
                if not is_retryable_status(exc.status):
                    self.health.failed(str(exc))
                    raise SourceError(f"victorialogs: {exc}") from None
                await self._retry(str(exc))
            except _BadAnswer as exc:
                self.stats.add("bad_answers")
                await self._retry(str(exc))
            except httpx.RequestError as exc:
                await self._retry(_describe_transport(self._base, exc))

    async def _retry(self, why: str) -> None:
        """A failed request: the source is down at once; retry after a backoff."""
        self._failures += 1
        self.stats.add("retries")
        self.health.failed(why)
        if self._recent:
            self._suspect = pl.concat([self._suspect, *(rows for _, rows in self._recent)])
            self._recent = []
        limit = self.config.retry_limit
        if limit and self._failures >= limit:
            raise SourceError(f"victorialogs: {why} (gave up after {self._failures} attempts)")
        delay = self._backoff.next_delay()
        log.warning("victorialogs: %s; retrying in %.1f s", why, delay)
        await asyncio.sleep(delay)

    def _progress(self) -> None:
        """A good answer moved the source on: it is up, and the backoff starts afresh."""
        if not self.health.up:
            log.info("victorialogs: delivering again")
        self.health.recovered()
        self._backoff.reset()
        self._failures = 0

    async def _attempt(self) -> AsyncIterator[Event]:
        """One connection's worth: backfill when far behind, then the tail."""
        cursor = self._cursor
        assert cursor is not None
        cfg = self.config
        live_edge = self.clock() - round((cfg.offset_s + cfg.watermark_lag_s) * NS_PER_S)
        target = live_edge if self.until_ns is None else min(self.until_ns, live_edge)
        far_behind = target - cursor.tail_from > cfg.max_tail_catchup_s * NS_PER_S
        if far_behind or (self.until_ns is not None and self.until_ns <= live_edge):
            if self.until_ns is None:  # before the horizon moves on with the watermark
                async for batch in self._sweep():
                    yield batch
            async for event in self._backfill(target):
                yield event
            if self._done():
                return
        async for event in self._tail():
            yield event

    async def _backfill(self, target_ns: int) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        cfg = self.config
        widest = window = round(cfg.backfill_window_s * NS_PER_S)
        low = cursor.tail_from
        while low < target_ns:
            high = min(low + window, target_ns)
            # counted first (/hits): a /query with ``limit`` would make the server sort the
            # window by time and hold it whole, and time-sorted rows compress half as well
            # as the stream-grouped order it answers in otherwise
            if high - low > NS_PER_MS and await self._count(low, high) > cfg.backfill_max_rows:
                window = max(NS_PER_MS, (high - low) // 2)
                self.stats.add("backfill_splits")
                continue
            frame = self._decode(await self._query(low, high))
            self.stats.add("backfill_windows")
            for batch in self._deliver(frame):
                yield batch
            cursor.advance(high)
            self._progress()
            yield Watermark(high // 1000)
            low, window = high, min(widest, window * 2)

    async def _post(self, path: str, data: dict[str, str], encoding: str) -> bytes:
        """A whole answer of ``path``: 200 with the Content-Type of ``path`` or an error."""
        timeout = httpx.Timeout(self.config.query_timeout_s, connect=self.config.connect_timeout_s)
        url = f"{self._base}{path}"
        headers = {**self._headers, "Accept-Encoding": encoding}
        async with self.client.stream(
            "POST", url, data=data, headers=headers, timeout=timeout
        ) as response:
            body = b"".join([piece async for piece in _pieces(response, keep_gzip=True)])
            _check_answer(url, response, body)
            return body

    async def _query(self, low_ns: int, high_ns: int, streams: list[str] | None = None) -> bytes:
        """The rows with ``low_ns < _time <= high_ns`` (of ``streams`` only, when given, by
        ``_stream_id``) as NDJSON."""
        data = {
            "query": self.config.logsql,
            "start": rfc3339_ns(low_ns + 1),
            "end": rfc3339_ns(high_ns),
            "timeout": f"{self.config.query_timeout_s}s",
        }
        if streams is not None:
            data["extra_filters"] = f"_stream_id:in({','.join(streams)})"
        return await self._post("/select/logsql/query", data, self.config.query_encoding)

    async def _tail(self) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        cfg = self.config
        offset = round(cfg.offset_s * NS_PER_S)
        opened = self.clock()
        data = {
            "query": cfg.logsql,
            "start_offset": duration(opened - offset - cursor.tail_from),
            "offset": duration(offset),
            "refresh_interval": duration(round(cfg.refresh_interval_s * NS_PER_S)),
        }
        timeout = httpx.Timeout(cfg.connect_timeout_s, read=None)
        url = f"{self._base}/select/logsql/tail"
        headers = {**self._headers, "Accept-Encoding": "identity"}
        async with self.client.stream(
            "POST", url, data=data, headers=headers, timeout=timeout
        ) as response:
            body = await response.aread() if response.status_code != 200 else b""
            _check_answer(url, response, body)
            self.stats.add("tail_connects")
            inflow = _Inflow(response)
            pump = asyncio.create_task(inflow.pump())
            try:
                async for event in self._read_tail(inflow, opened, url):
                    yield event
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    async def _read_tail(self, inflow: _Inflow, opened: int, url: str) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        idle_after = min(self.config.refresh_interval_s / 2, 0.5)
        while True:
            block = await inflow.block(idle_after)
            if block is None:
                # The server sends a window's rows at once, then waits for the next refresh:
                # a pause means the windows so far have arrived whole.
                watermark = self._tail_watermark(opened)
                if watermark > cursor.watermark_ns:
                    cursor.advance(watermark)
                    self._progress()
                    yield Watermark(watermark // 1000)
                    if self._done():
                        return
            elif block:
                rows = self._decode(block, url)
                self._progress()
                for batch in self._deliver(rows):
                    yield batch
            if inflow.ended is not None and b"\n" not in inflow.buffer:
                raise inflow.ended  # a line cut off by a broken connection is read again
            if (
                self.until_ns is None
                and self.clock() - self._swept_at >= self.config.sweep_interval_s * NS_PER_S
            ):
                async for batch in self._sweep():
                    yield batch

    def _tail_watermark(self, opened: int) -> int:
        cfg = self.config
        now = self.clock()
        lag = round(cfg.watermark_lag_s * NS_PER_S)
        if now - lag < opened:
            return self._cursor.watermark_ns if self._cursor is not None else 0
        covered = max(opened, now - lag - round(cfg.refresh_interval_s * NS_PER_S))
        return covered - round(cfg.offset_s * NS_PER_S)

    async def _sweep(self) -> AsyncIterator[Batch]:
        """Deliver the rows of ``(horizon, W]`` that no read has delivered yet: compare the
        server's row counts per stream and step with what was delivered, and re-read the
        streams and steps where they differ (more: rows the tail never sent; fewer: rows the
        server lost in a crash, which may hide late ones, so the streams and steps delivered just
        before a failure are re-read too; the re-read settles the count)."""
        cursor = self._cursor
        assert cursor is not None
        self._swept_at = self.clock()
        await self._audit(cursor)
        low, high = cursor.seen.horizon_ns, cursor.watermark_ns
        if high <= low:
            return
        step = round(self.config.sweep_step_s * NS_PER_S)
        self.stats.add("sweeps")
        short = (
            (await self._hits(low, high, step))
            .join(
                cursor.seen.delivered_per_bucket(low, high, step),
                on=["s", "bucket"],
                how="left",
            )
            .join(
                self._suspect.select("s", (pl.col("t") - pl.col("t") % step).alias("bucket"))
                .unique()
                .with_columns(pl.lit(True).alias("suspect")),
                on=["s", "bucket"],
                how="left",
            )
            .filter(
                (pl.col("stored") != pl.col("delivered").fill_null(0))
                | pl.col("suspect").fill_null(False)
            )
            .group_by("bucket")
            .agg(pl.col("sid").sort(), pl.col("s").sort_by("sid"))
            .sort("bucket")
        )
        # consecutive steps short in the same streams are read back in one query
        runs = (
            short.with_columns(pl.col("sid").list.join(",").alias("key"))
            .with_columns(
                ((pl.col("bucket").diff() != step) | (pl.col("key") != pl.col("key").shift()))
                .fill_null(True)
                .cum_sum()
                .alias("run")
            )
            .group_by("run", maintain_order=True)
            .agg(
                pl.col("bucket").min().alias("first"),
                pl.col("bucket").max().alias("last"),
                pl.col("sid").first(),
                pl.col("s").first(),
            )
            .drop("run")
        )
        for first_bucket, last_bucket, sids, hashes in runs.iter_rows():
            start, end = max(first_bucket - 1, low), min(last_bucket + step - 1, high)
            for first in range(0, len(sids), SWEEP_STREAMS):
                self.stats.add("sweep_reads")
                chunk = slice(first, first + SWEEP_STREAMS)
                rows = self._decode(await self._query(start, end, sids[chunk]))
                for batch in self._deliver(rows):
                    yield batch
                cursor.seen.reconcile(rows, pl.Series(hashes[chunk], dtype=pl.UInt64), start, end)
        self._suspect = self._suspect.filter(pl.col("t") > high)
        self._progress()

    async def _audit(self, cursor: TailCursor) -> None:
        """Count the rows VictoriaLogs now holds behind the horizon beyond what was delivered
        there: they came too late to be delivered (see ``LateAudit``)."""
        audit = cursor.audit
        window = None if audit is None else audit.window()
        if audit is None or window is None:
            return
        low, high = window
        lost = audit.settle(await self._hits(low, high, audit.step_ns))
        if lost.is_empty():
            return
        first, last, count = lost.select(
            pl.col("bucket").min().alias("first"),
            (pl.col("bucket").max() + audit.step_ns).alias("last"),
            pl.col("lost").sum(),
        ).row(0)
        self.stats.add("lost_late_rows", count)
        log.warning(
            "victorialogs: %d rows with _time in [%s, %s) reached VictoriaLogs more than "
            "lateness_s (%g s) late and were not delivered",
            count,
            rfc3339_ns(first),
            rfc3339_ns(last),
            self.config.lateness_s,
        )

    async def _count(self, low_ns: int, high_ns: int) -> int:
        """Rows stored with ``low_ns < _time <= high_ns``."""
        hits = await self._hits(low_ns, high_ns, high_ns - low_ns, by_stream=False)
        return int(hits.get_column("stored").sum())

    async def _hits(
        self, low_ns: int, high_ns: int, step_ns: int, by_stream: bool = True
    ) -> pl.DataFrame:
        """Rows stored with ``low_ns < _time <= high_ns`` per step, and per stream when
        ``by_stream``: ``sid`` ("" when not), ``s`` (its hash), ``bucket``, ``stored``."""
        data = {
            "query": self.config.query.strip() or "*",
            "start": rfc3339_ns(low_ns + 1),
            "end": rfc3339_ns(high_ns),
            "step": duration(step_ns),
        }
        if by_stream:
            data["field"] = "_stream_id"
        url = f"{self._base}/select/logsql/hits"
        body = await self._post("/select/logsql/hits", data, "identity")
        try:
            series = json.loads(_plain(body))["hits"]
            frame = pl.DataFrame(
                {
                    "sid": [
                        s["fields"]["_stream_id"] if by_stream else ""
                        for s in series
                        for _ in s["timestamps"]
                    ],
                    "stamp": [t for s in series for t in s["timestamps"]],
                    "stored": [int(v) for s in series for v in s["values"]],
                },
                schema={"sid": pl.String, "stamp": pl.String, "stored": pl.Int64},
            )
        except (ValueError, KeyError, TypeError, pl.exceptions.PolarsError) as exc:
            raise _BadAnswer(_unreadable(url, body, "hits", describe(exc))) from None
        return frame.select(
            "sid",
            pl.col("sid").hash().alias("s"),
            pl.col("stamp")
            .str.to_datetime(RFC3339, time_unit="ns", time_zone="UTC")
            .cast(pl.Int64)
            .alias("bucket"),
            "stored",
        )

    def _decode(self, block: bytes, url: str = "VictoriaLogs") -> pl.DataFrame:
        """NDJSON rows into a frame with ``t`` (ns), ``sid``, ``h`` (identity hash) and the
        selected fields. Lines that are not rows of that shape make the answer bad. A gzipped
        block is decompressed by polars itself (pola-rs/polars#17841), cheaper per row than
        zlib through httpx's decoder."""
        try:
            frame = pl.read_ndjson(block, schema=self._schema)
        except pl.exceptions.PolarsError as exc:
            plain = _plain(block)
            if plain.strip():
                raise _BadAnswer(_unreadable(url, plain, "log rows", describe(exc))) from None
            frame = pl.DataFrame(schema=self._schema)  # a gzipped empty answer
        frame = (
            frame.lazy()
            .with_columns(
                _rfc3339_ns(pl.col("_time")).alias("t"),
                pl.col("_stream_id").alias("sid"),
                pl.col("_stream_id").hash().alias("s"),
            )
            .with_columns(self._hash.alias("h"))
            .collect()
        )
        if frame.get_column("t").has_nulls() or frame.get_column("sid").has_nulls():
            raise _BadAnswer(
                _unreadable(url, _plain(block), "log rows", "rows without _time or _stream_id")
            )
        self.stats.add("lines", frame.height)
        return frame

    def _deliver(self, frame: pl.DataFrame) -> Iterator[Batch]:
        """The rows not delivered before, as time-sorted ``logs`` batches; those at or behind
        the watermark are counted as late."""
        cursor = self._cursor
        assert cursor is not None
        kept = cursor.seen.admit(frame)
        now = self.clock()
        self._recent = [(at, rows) for at, rows in self._recent if at > now - CRASH_LOSS_NS]
        self._recent.append((now, kept.select("s", "t")))
        self.stats.add("duplicates", frame.height - kept.height)
        if kept.is_empty():
            return
        late = kept.filter(pl.col("t") <= cursor.watermark_ns).get_column("t")
        self.stats.observe_lateness((cursor.watermark_ns - late) / NS_PER_S)
        logs = self._to_logs(kept)
        self.stats.add("rows", logs.height)
        for offset in range(0, logs.height, self.config.max_rows):
            # polars first: the parsers read it so; its Arrow form is made if asked for
            yield Batch.from_frame("logs", logs.slice(offset, self.config.max_rows), schema.LOGS)

    def _to_logs(self, kept: pl.DataFrame) -> pl.DataFrame:
        """The rows in the logs schema's columns and dtypes, sorted by time."""
        cfg = self.config
        f = cfg.fields

        def text(name: str) -> pl.Expr:
            """A mapped field; VictoriaLogs treats an empty value as an absent field."""
            if not name:
                return pl.lit(None, pl.String)
            return pl.when(pl.col(name) != "").then(pl.col(name))

        if not kept.get_column("t").is_sorted():
            kept = kept.sort("t", maintain_order=True)
        return kept.select(
            pl.from_epoch(pl.col("t") // 1000, time_unit="us")
            .dt.replace_time_zone("UTC")
            .alias("time"),
            text(f.job_id).alias("job_id"),
            text(f.node).fill_null(cfg.default_node).alias("node"),
            text(f.rank).cast(pl.Int32, strict=False).alias("rank"),
            pl.when(text(f.source).is_in(list(schema.LOG_SOURCES)))
            .then(text(f.source))
            .otherwise(pl.lit(cfg.default_source))
            .alias("source"),
            pl.col("_msg").fill_null("").alias("message"),
        )


def _pieces(response: httpx.Response, keep_gzip: bool = False) -> AsyncIterator[bytes]:
    """The body as it comes: straight from the connection without a Content-Encoding (httpx's
    decoding layers cost more than the bytes on a stream of small chunks), and gzipped as it
    is with ``keep_gzip`` (``_decode`` and ``_plain`` read it)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding == "identity" or (keep_gzip and encoding == "gzip"):
        return response.aiter_raw()
    return response.aiter_bytes()


def _plain(body: bytes) -> bytes:
    """``body`` decompressed when it is gzip (an answer read with ``keep_gzip``); as it is when
    it is not, or is damaged."""
    if not body.startswith(GZIP_MAGIC):
        return body
    try:
        return zlib.decompress(body, wbits=31)
    except zlib.error:
        return body


def _rfc3339_ns(stamp: pl.Expr) -> pl.Expr:
    """``_time`` as VictoriaLogs writes it (``2026-11-29T17:20:38.1Z``, fraction trimmed or
    absent) in ns since the epoch, null when it is not that; the seconds and the fraction
    parsed apart, three times faster than one ``%.f`` format."""
    seconds = stamp.str.slice(0, 19).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S", time_unit="ns", time_zone="UTC", strict=False
    )
    fraction = stamp.str.slice(20).str.strip_suffix("Z").str.pad_end(9, "0")
    well_formed = stamp.str.ends_with("Z") & stamp.str.slice(19, 1).is_in([".", "Z"])
    return (
        pl.when(well_formed)
        .then(seconds.cast(pl.Int64) + fraction.cast(pl.Int64, strict=False))
        .otherwise(None)
    )


def _check_answer(url: str, response: httpx.Response, body: bytes) -> None:
    """Raise unless ``response`` is a 200 whose Content-Type is what ``url`` answers."""
    if response.status_code != 200:
        raise _HttpError(response.status_code, http_failure(url, response, _plain(body)))
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    expected = ("application/json",) if url.endswith("/hits") else ROWS_TYPES
    if content_type not in expected:
        raise _BadAnswer(
            f"{url} answered 200 with Content-Type {content_type or '(none)'}, "
            f"not {' or '.join(expected)}"
        )


def _unreadable(url: str, body: bytes, expected: str, why: str) -> str:
    sample = first_line(body.decode("utf-8", errors="replace"), 120)
    return printable(f"{url} answered 200 with what is not {expected} ({why}): {sample}")


def _describe_transport(base: str, exc: httpx.RequestError) -> str:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return f"VictoriaLogs at {base} is unreachable ({describe(exc)})"
    return f"connection to VictoriaLogs at {base} broke ({describe(exc)})"
