"""VictoriaLogs source: live tail over ``/select/logsql/tail``, backfill over ``…/query``.

VictoriaLogs' tail has no resume cursor (docs/victorialogs.md): a new tail
re-sends the last ``start_offset`` of rows and knows nothing of what an earlier connection
delivered. This source therefore keeps its own cursor (``StreamCursor``), the same rule the
server applies inside one tail, made persistent:

* the **watermark** W: every row with ``_time <= W`` that VictoriaLogs could serve has been
  delivered; the **horizon** ``W - 5 s`` (the server's own tail look-back): rows at or before
  it are never delivered again;
* per ``_stream_id``, the newest ``_time`` delivered and which rows were delivered at exactly
  that time. A row is new when it is past the horizon and newer than its stream's last time,
  or at that time but not yet delivered. Streams idle past the horizon are forgotten, so the
  cursor stays as small as the set of active streams.

On every (re)connect the source asks again from the horizon: through the tail (its
``start_offset`` reaches back to the horizon) when the gap is short, else first through
``/query`` in bounded time windows (halved while a window holds more than
``backfill_max_rows``) and then the tail. Duplicates are dropped by the cursor, so a
restart or a dropped connection neither loses nor repeats a row.

Watermark of the live tail (the one place that reads the wall clock): the server runs its
first query when the tail opens (covering rows up to ``open - offset``) and one every
``refresh_interval`` after, and sends each window's rows at once. When the stream has paused
(no bytes for half a refresh), every window run up to ``watermark_lag_s`` ago has arrived, so
the source is complete up to ``max(open, now - lag - refresh) - offset`` (once
``now - lag >= open``). The lag covers the server's query time, the network and clock skew.
A gap longer than ``max_tail_catchup_s`` is backfilled through /query first, so no tail
window is much larger than a refresh's worth of rows. Rows that reach VictoriaLogs more than
about ``offset + 5 s`` after their ``_time`` are never tailed by the server (a VictoriaLogs
limit); raise ``offset_s`` when log shippers lag more than that.

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
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import httpx
import polars as pl
import pyarrow as pa

from medic import schema
from medic.config import Count, NonNegative, Positive, PositiveCount, Range
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.live import (
    Backoff,
    SourceError,
    SourceStats,
    http_failure,
    is_retryable_status,
    wall_ns,
)

log = logging.getLogger(__name__)

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
TAIL_LOOKBACK_NS = 5 * NS_PER_S
"""VictoriaLogs re-reads the last 5 s of every tail window (``tailOffsetNsecs``)."""
BLOCK_BYTES = 4 << 20
"""Decode at most this much buffered NDJSON at once."""
COALESCE_S = 0.005
"""Bytes arriving within this of each other are decoded together."""
QUEUE_CHUNKS = 64
"""Chunks read ahead from a tail before back-pressure reaches the socket."""
RFC3339 = "%Y-%m-%dT%H:%M:%S%.fZ"
"""How VictoriaLogs writes ``_time`` (UTC, fraction trimmed or absent)."""
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
    """``[sources.victorialogs]``."""

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
    """Time for a tail window's rows to reach medic (server work, network, clock skew)."""
    start_offset_s: NonNegative = 5.0
    """How far back a start without a cursor begins."""
    max_tail_catchup_s: NonNegative = 10.0
    """A longer gap is backfilled through /query before tailing, so that a tail's first
    window stays as small as its later ones."""
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


class StreamCursor:
    """What has been delivered, per ``_stream_id``; see the module docstring."""

    _LAST: ClassVar[dict[str, Any]] = {"sid": pl.String, "last": pl.Int64}
    _TIES: ClassVar[dict[str, Any]] = {
        "sid": pl.String,
        "t": pl.Int64,
        "key": pl.String,
        "n": pl.Int64,
    }

    def __init__(
        self,
        watermark_ns: int,
        horizon_ns: int | None = None,
        last: pl.DataFrame | None = None,
        ties: pl.DataFrame | None = None,
    ) -> None:
        self.watermark_ns = watermark_ns
        self.horizon_ns = watermark_ns - TAIL_LOOKBACK_NS if horizon_ns is None else horizon_ns
        self._last = pl.DataFrame(schema=self._LAST) if last is None else last
        self._ties = pl.DataFrame(schema=self._TIES) if ties is None else ties

    def __len__(self) -> int:
        """Streams remembered."""
        return self._last.height

    def admit(self, rows: pl.DataFrame, key: pl.Expr) -> pl.DataFrame:
        """The rows of ``rows`` (columns ``t`` and ``sid``) not delivered before, and remember
        them as delivered. ``key`` tells two rows of one stream at one time apart."""
        rows = rows.filter(pl.col("t") > self.horizon_ns)
        if rows.is_empty():
            return rows
        joined = rows.join(self._last, on="sid", how="left", maintain_order="left")
        fresh = joined.filter(pl.col("last").is_null() | (pl.col("t") > pl.col("last")))
        at_last = joined.filter(pl.col("t") == pl.col("last"))
        if not at_last.is_empty():
            at_last = (
                at_last.with_columns(key.alias("key"))
                .with_columns(pl.int_range(pl.len()).over("sid", "key").alias("occurrence"))
                .join(self._ties.drop("t"), on=["sid", "key"], how="left", maintain_order="left")
                .filter(pl.col("occurrence") >= pl.col("n").fill_null(0))
                .drop("key", "occurrence", "n")
            )
            fresh = pl.concat([fresh, at_last])
        kept = fresh.drop("last")
        self._remember(kept, key)
        return kept

    def _remember(self, kept: pl.DataFrame, key: pl.Expr) -> None:
        if kept.is_empty():
            return
        newest = kept.group_by("sid").agg(pl.col("t").max().alias("last"))
        last = pl.concat([self._last.join(newest, on="sid", how="anti"), newest])
        at_newest = (
            kept.join(newest, on="sid")
            .filter(pl.col("t") == pl.col("last"))
            .with_columns(key.alias("key"))
            .group_by("sid", "t", "key")
            .agg(pl.len().cast(pl.Int64).alias("n"))
        )
        self._ties = (
            pl.concat([self._ties, at_newest.select(self._TIES.keys())])
            .join(last, on="sid")
            .filter(pl.col("t") == pl.col("last"))
            .group_by("sid", "t", "key")
            .agg(pl.col("n").sum())
        )
        self._last = last

    def advance(self, watermark_ns: int) -> None:
        """Everything up to ``watermark_ns`` is delivered; forget streams idle past the horizon."""
        if watermark_ns <= self.watermark_ns:
            return
        self.watermark_ns = watermark_ns
        self.horizon_ns = max(self.horizon_ns, watermark_ns - TAIL_LOOKBACK_NS)
        self._last = self._last.filter(pl.col("last") > self.horizon_ns)
        self._ties = self._ties.filter(pl.col("t") > self.horizon_ns)

    def to_json(self) -> dict[str, Any]:
        return {
            "watermark_ns": self.watermark_ns,
            "horizon_ns": self.horizon_ns,
            "streams": self._last.rows(),
            "ties": self._ties.rows(),
        }

    @classmethod
    def from_json(cls, cursor: dict[str, Any]) -> StreamCursor:
        try:
            return cls(
                int(cursor["watermark_ns"]),
                int(cursor["horizon_ns"]),
                pl.DataFrame(cursor.get("streams", []), schema=cls._LAST, orient="row"),
                pl.DataFrame(cursor.get("ties", []), schema=cls._TIES, orient="row"),
            )
        except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            raise SourceError(f"victorialogs: cannot resume from cursor ({exc})") from None


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _StreamEnded(httpx.TransportError):
    """The server closed a tail that never ends by itself."""


class VictoriaLogsSource:
    """Log lines from VictoriaLogs as ``logs`` batches and watermarks, resumable by cursor.

    ``start_us``/``until_us`` bound the rows to deliver (``medic record``): the source then
    begins at ``start_us`` and stops once its watermark has passed ``until_us``.
    """

    name = "victorialogs"

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
        self.until_ns = None if until_us is None else until_us * 1000 + 999  # all of that µs
        self._cursor: StreamCursor | None = None
        if cursor is not None:
            self._cursor = StreamCursor.from_json(cursor)
        elif start_us is not None:
            self._cursor = StreamCursor(start_us * 1000 - 1, start_us * 1000 - 1)
        self._backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self._base = config.url.rstrip("/")
        self._headers = {"AccountID": str(config.account_id), "ProjectID": str(config.project_id)}
        self._schema = {
            "_time": pl.String,
            "_stream_id": pl.String,
            **{name: pl.String for name in config.selected_fields[2:]},
        }
        self._key = pl.concat_str(
            [pl.col(n).fill_null("") for n in config.selected_fields[2:]], separator="\x1f"
        )

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
            begin = self.clock() - round((cfg.offset_s + cfg.start_offset_s) * NS_PER_S)
            self._cursor = StreamCursor(begin, begin)
        failures = 0
        while not self._done():
            try:
                async for event in self._attempt():
                    failures = 0
                    yield event
            except _HttpError as exc:
                if not is_retryable_status(exc.status):
                    raise SourceError(f"victorialogs: {exc}") from None
                failures = await self._retry(failures, str(exc))
            except httpx.TransportError as exc:
                failures = await self._retry(failures, _describe_transport(self._base, exc))

    async def _retry(self, failures: int, why: str) -> int:
        failures += 1
        self.stats.add("retries")
        limit = self.config.retry_limit
        if limit and failures >= limit:
            raise SourceError(f"victorialogs: {why} (gave up after {failures} attempts)")
        delay = self._backoff.next_delay()
        log.warning("victorialogs: %s; retrying in %.1f s", why, delay)
        await asyncio.sleep(delay)
        return failures

    async def _attempt(self) -> AsyncIterator[Event]:
        """One connection's worth: backfill when far behind, then the tail."""
        cursor = self._cursor
        assert cursor is not None
        cfg = self.config
        live_edge = self.clock() - round((cfg.offset_s + cfg.watermark_lag_s) * NS_PER_S)
        target = live_edge if self.until_ns is None else min(self.until_ns, live_edge)
        far_behind = target - cursor.horizon_ns > cfg.max_tail_catchup_s * NS_PER_S
        if far_behind or (self.until_ns is not None and self.until_ns <= live_edge):
            async for event in self._backfill(target):
                yield event
            if self._done():
                return
        async for event in self._tail():
            yield event

    async def _backfill(self, target_ns: int) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        widest = window = round(self.config.backfill_window_s * NS_PER_S)
        low = cursor.horizon_ns
        while low < target_ns:
            high = min(low + window, target_ns)
            limit = self.config.backfill_max_rows + 1 if high - low > NS_PER_MS else None
            body = await self._query(low, high, limit)
            frame = self._decode(body)
            if limit is not None and frame.height >= limit:
                window = max(NS_PER_MS, (high - low) // 2)
                self.stats.add("backfill_splits")
                continue
            self.stats.add("backfill_windows")
            for batch in self._deliver(frame.sort("t")):
                yield batch
            cursor.advance(high)
            yield Watermark(high // 1000)
            low, window = high, min(widest, window * 2)

    async def _query(self, low_ns: int, high_ns: int, limit: int | None) -> bytes:
        data = {
            "query": self.config.logsql,
            "start": rfc3339_ns(low_ns + 1),
            "end": rfc3339_ns(high_ns),
            "timeout": f"{self.config.query_timeout_s}s",
        }
        if limit is not None:
            data["limit"] = str(limit)
        timeout = httpx.Timeout(self.config.query_timeout_s, connect=self.config.connect_timeout_s)
        url = f"{self._base}/select/logsql/query"
        async with self.client.stream(
            "POST", url, data=data, headers=self._headers, timeout=timeout
        ) as response:
            body = await response.aread()
            if response.status_code != 200:
                raise _HttpError(response.status_code, http_failure(url, response, body))
        self._backoff.reset()
        return body

    async def _tail(self) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        cfg = self.config
        offset = round(cfg.offset_s * NS_PER_S)
        opened = self.clock()
        data = {
            "query": cfg.logsql,
            "start_offset": duration(opened - offset - cursor.horizon_ns),
            "offset": duration(offset),
            "refresh_interval": duration(round(cfg.refresh_interval_s * NS_PER_S)),
        }
        timeout = httpx.Timeout(cfg.connect_timeout_s, read=None)
        url = f"{self._base}/select/logsql/tail"
        async with self.client.stream(
            "POST", url, data=data, headers=self._headers, timeout=timeout
        ) as response:
            if response.status_code != 200:
                body = await response.aread()
                raise _HttpError(response.status_code, http_failure(url, response, body))
            self._backoff.reset()
            self.stats.add("tail_connects")
            queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(QUEUE_CHUNKS)
            pump = asyncio.create_task(_pump(response, queue))
            try:
                async for event in self._read_tail(queue, opened):
                    yield event
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    async def _read_tail(
        self, queue: asyncio.Queue[bytes | BaseException | None], opened: int
    ) -> AsyncIterator[Event]:
        cursor = self._cursor
        assert cursor is not None
        idle_after = min(self.config.refresh_interval_s / 2, 0.5)
        pending = bytearray()
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=idle_after)
            except TimeoutError:
                # The server sends a window's rows at once, then waits for the next refresh:
                # a pause means the windows so far have arrived whole.
                watermark = self._tail_watermark(opened)
                if watermark > cursor.watermark_ns:
                    cursor.advance(watermark)
                    yield Watermark(watermark // 1000)
                    if self._done():
                        return
                continue
            ended: BaseException | None = None
            while True:
                if item is None:
                    ended = _StreamEnded("VictoriaLogs closed the tail stream")
                    break
                if isinstance(item, BaseException):
                    ended = item
                    break
                pending += item
                if len(pending) >= BLOCK_BYTES:
                    break
                try:  # gather what follows closely into one block: fewer, larger decodes
                    item = await asyncio.wait_for(queue.get(), COALESCE_S)
                except TimeoutError:
                    break
            cut = pending.rfind(b"\n") + 1
            if cut:
                block = bytes(pending[:cut])
                del pending[:cut]
                for batch in self._deliver(self._decode(block)):
                    yield batch
            if ended is not None:
                raise ended

    def _tail_watermark(self, opened: int) -> int:
        cfg = self.config
        now = self.clock()
        lag = round(cfg.watermark_lag_s * NS_PER_S)
        if now - lag < opened:
            return self._cursor.watermark_ns if self._cursor is not None else 0
        covered = max(opened, now - lag - round(cfg.refresh_interval_s * NS_PER_S))
        return covered - round(cfg.offset_s * NS_PER_S)

    def _decode(self, block: bytes) -> pl.DataFrame:
        """NDJSON rows into a frame with ``t`` (ns), ``sid`` and the selected fields; lines
        that are not JSON objects of that shape are skipped and counted."""
        try:
            frame = pl.read_ndjson(block, schema=self._schema)
        except pl.exceptions.PolarsError:
            frame = self._decode_lines(block)
        frame = frame.with_columns(
            pl.col("_time")
            .str.to_datetime(RFC3339, time_unit="ns", time_zone="UTC", strict=False)
            .cast(pl.Int64)
            .alias("t"),
            pl.col("_stream_id").alias("sid"),
        )
        bad = frame.filter(pl.col("t").is_null() | pl.col("sid").is_null()).height
        if bad:
            self.stats.add("invalid_lines", bad)
            frame = frame.drop_nulls(["t", "sid"])
        self.stats.add("lines", frame.height)
        return frame

    def _decode_lines(self, block: bytes) -> pl.DataFrame:
        """The slow path for a block with broken lines (a server error text appended to the
        stream, a cut-off line): keep the lines that parse on their own."""
        good: list[bytes] = []
        for line in block.splitlines():
            try:
                ok = isinstance(json.loads(line), dict)
            except ValueError:
                ok = False
            if ok:
                good.append(line)
            elif line.strip():
                self.stats.add("invalid_lines")
                log.warning("victorialogs: skipping a line that is not JSON: %.120r", line)
        if not good:
            return pl.DataFrame(schema=self._schema)
        try:
            return pl.read_ndjson(b"\n".join(good), schema=self._schema, ignore_errors=True)
        except pl.exceptions.PolarsError as exc:
            self.stats.add("invalid_lines", len(good))
            log.warning("victorialogs: skipping %d undecodable lines: %s", len(good), exc)
            return pl.DataFrame(schema=self._schema)

    def _deliver(self, frame: pl.DataFrame) -> Iterator[Batch]:
        cursor = self._cursor
        assert cursor is not None
        before = frame.height
        kept = cursor.admit(frame, self._key)
        self.stats.add("duplicates", before - kept.height)
        if kept.is_empty():
            return
        table = self._to_logs(kept)
        self.stats.add("rows", table.num_rows)
        for offset in range(0, table.num_rows, self.config.max_rows):
            yield Batch("logs", table.slice(offset, self.config.max_rows))

    def _to_logs(self, kept: pl.DataFrame) -> pa.Table:
        cfg = self.config
        f = cfg.fields

        def text(name: str) -> pl.Expr:
            """A mapped field; VictoriaLogs treats an empty value as an absent field."""
            if not name:
                return pl.lit(None, pl.String)
            return pl.when(pl.col(name) != "").then(pl.col(name))

        frame = kept.sort("t", maintain_order=True).select(
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
        return schema.conform(frame.to_arrow(), schema.LOGS)


async def _pump(
    response: httpx.Response, queue: asyncio.Queue[bytes | BaseException | None]
) -> None:
    """Read a tail's chunks into ``queue``; end with None, or the exception that broke it."""
    try:
        async for chunk in response.aiter_bytes():
            await queue.put(chunk)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        await queue.put(exc)
        return
    await queue.put(None)


def _describe_transport(base: str, exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return f"VictoriaLogs at {base} is unreachable ({exc or type(exc).__name__})"
    return f"connection to VictoriaLogs at {base} broke ({exc or type(exc).__name__})"
