"""The VictoriaLogs source against the local VictoriaLogs server (real sockets, chunked NDJSON)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch, Watermark
from medic.ingest.cursor import CursorStore
from medic.ingest.live import SourceError, describe
from medic.ingest.victorialogs import (
    VictoriaLogsConfig,
    VictoriaLogsSource,
    rfc3339_ns,
)
from medic.testing.victorialogs import GZIP_MIN_BYTES, Clock, VictoriaLogsServer

FAST = {
    "offset_s": 0.05,
    "refresh_interval_s": 0.05,
    "watermark_lag_s": 0.25,
    "backoff_initial_s": 0.01,
    "backoff_max_s": 0.05,
}


@pytest.fixture
def vl() -> Iterator[VictoriaLogsServer]:
    """The faithful fake, its visibility delay scaled down as FAST scales the tail's timing."""
    with VictoriaLogsServer(searchable_delay_s=0.1) as server:
        yield server


def config(vl: VictoriaLogsServer, **overrides: object) -> VictoriaLogsConfig:
    return from_dict(VictoriaLogsConfig, {"url": vl.url, **FAST, **overrides})


def line(i: int, t_ns: int, host: str = "n1", job: str = "42") -> dict[str, str]:
    return {"_time": str(t_ns), "_msg": f"line {i}", "host": host, "job_id": job, "rank": "3"}


class Collector:
    """Runs a source and keeps what it yielded."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.watermarks: list[int] = []

    @property
    def table(self) -> pa.Table:
        return pa.concat_tables(self.tables) if self.tables else schema.empty(schema.LOGS)

    @property
    def messages(self) -> list[str]:
        return [str(m) for m in self.table.column("message").to_pylist()]

    async def run(
        self,
        source: VictoriaLogsSource,
        until: Callable[[Collector], bool],
        timeout: float = 30.0,
    ) -> None:
        async def consume() -> None:
            async with contextlib.aclosing(source.__aiter__()) as events:
                async for event in events:
                    if isinstance(event, Batch):
                        assert event.data.schema == schema.LOGS
                        self.tables.append(pa.table(event.data))
                    else:
                        assert isinstance(event, Watermark)
                        if self.watermarks:
                            assert event.time >= self.watermarks[-1]
                        self.watermarks.append(event.time)
                    if until(self):
                        return

        await asyncio.wait_for(consume(), timeout)


async def test_tail_maps_fields_into_the_logs_schema(vl: VictoriaLogsServer) -> None:
    now = time.time_ns()
    vl.ingest(
        [
            {
                "_time": str(now - 10**9),
                "_msg": "NCCL error",
                "hostname": "gpu7",
                "slurm_job": "9_2",
                "task": "5",
                "src": "system",
            },
            {
                "_time": str(now - 10**9 + 1),
                "_msg": "hello",
                "hostname": "gpu7",
                "task": "x",
                "src": "weird",
            },
            {"_time": str(now - 10**9 + 2), "_msg": "no host"},
        ],
        stream_fields=["hostname"],
    )
    fields = {"job_id": "slurm_job", "node": "hostname", "rank": "task", "source": "src"}
    source = VictoriaLogsSource(config(vl, fields=fields, default_node="?"), httpx.AsyncClient())
    got = Collector()
    await got.run(source, lambda c: len(c.messages) == 3)
    rows = got.table.to_pylist()
    assert [(r["job_id"], r["node"], r["rank"], r["source"], r["message"]) for r in rows] == [
        ("9_2", "gpu7", 5, "system", "NCCL error"),
        (None, "gpu7", None, "app", "hello"),
        (None, "?", None, "app", "no host"),
    ]
    # truncated to the µs, then a float of ~1.8e9 s: 2 µs covers both
    assert rows[0]["time"].timestamp() == pytest.approx((now - 10**9) / 1e9, abs=2e-6)


async def test_filter_and_field_selection_are_pushed_into_logsql(vl: VictoriaLogsServer) -> None:
    now = time.time_ns()
    vl.ingest(
        [
            line(0, now - 10**9, job="1"),
            line(1, now - 10**9 + 5, job="2"),
            {**line(2, now - 10**9 + 9, job="1"), "bulky": "x" * 1000},
        ],
        stream_fields=["host"],
    )
    source = VictoriaLogsSource(config(vl, query='job_id:="1"'), httpx.AsyncClient())
    got = Collector()
    await got.run(source, lambda c: len(c.messages) >= 2 and len(c.watermarks) > 3)
    assert got.messages == ["line 0", "line 2"]
    tail_args = next(args for path, args in vl.requests if path == "/select/logsql/tail")
    assert (
        tail_args["query"]
        == 'job_id:="1" | fields _time, _stream_id, _msg, job_id, host, rank, source'
    )


async def test_batches_are_bounded_and_time_sorted(vl: VictoriaLogsServer) -> None:
    now = time.time_ns() - 2 * 10**9
    rows = [line(i, now + (i * 7919) % 50 * 1000, host=f"n{i % 3}") for i in range(50)]
    vl.ingest(rows, stream_fields=["host"])
    source = VictoriaLogsSource(config(vl, max_rows=7), httpx.AsyncClient())
    got = Collector()
    await got.run(source, lambda c: len(c.messages) == 50)
    assert max(t.num_rows for t in got.tables) <= 7
    for t in got.tables:
        times = t.column("time").cast(pa.int64()).to_pylist()
        assert times == sorted(times)
    assert sorted(got.messages) == sorted(r["_msg"] for r in rows)


async def test_twenty_forced_disconnects_lose_and_duplicate_no_line(vl: VictoriaLogsServer) -> None:
    sent: list[str] = []

    async def write() -> None:
        for i in range(300):
            t = time.time_ns()
            batch = [line(i * 4 + k, t + k, host=f"n{k}") for k in range(4)]
            vl.ingest(batch, stream_fields=["host"])
            sent.extend(r["_msg"] for r in batch)
            await asyncio.sleep(0.01)

    async def disconnect() -> int:
        cuts = 0
        while cuts < 20:
            await asyncio.sleep(0.12)
            cuts += vl.disconnect_tails() > 0
        return cuts

    source = VictoriaLogsSource(config(vl), httpx.AsyncClient())
    got = Collector()
    writer = asyncio.create_task(write())
    cutter = asyncio.create_task(disconnect())

    def done(c: Collector) -> bool:
        return writer.done() and cutter.done() and len(c.messages) >= len(sent)

    await got.run(source, done, timeout=60)
    await asyncio.wait_for(asyncio.sleep(0.5), 1)
    assert cutter.result() == 20
    assert source.stats["tail_connects"] >= 21
    counts = Counter(got.messages)
    assert sorted(counts) == sorted(sent)
    assert max(counts.values()) == 1
    assert source.stats["duplicates"] > 0  # reconnects did re-send rows; the cursor dropped them


async def test_restart_from_a_saved_cursor_backfills_the_gap_exactly(
    vl: VictoriaLogsServer, tmp_path: Path
) -> None:
    store = CursorStore(tmp_path / "cursors")
    base = time.time_ns()
    first = [line(i, base + i * 1000, host=f"n{i % 5}") for i in range(40)]
    vl.ingest(first, stream_fields=["host"])
    settings = config(vl, max_tail_catchup_s=0.3, backfill_window_s=0.2)
    source = VictoriaLogsSource(settings, httpx.AsyncClient())
    got = Collector()
    await got.run(source, lambda c: len(c.messages) == 40 and len(c.watermarks) > 2)
    store.save(source.name, source.checkpoint())

    # while medic is down: more lines in the same streams, pairs of them at one instant
    down = time.time_ns()
    gap = [line(100 + i, down + i // 2 * 1000, host=f"n{i // 2 % 5}") for i in range(40)]
    vl.ingest(gap, stream_fields=["host"])
    await asyncio.sleep(1.0)
    later = time.time_ns()
    tail = [line(200 + i, later + i, host="n9") for i in range(10)]
    vl.ingest(tail, stream_fields=["host"])

    cursor = store.load(source.name)
    assert cursor is not None
    resumed = VictoriaLogsSource(settings, httpx.AsyncClient(), json.loads(json.dumps(cursor)))
    again = Collector()
    await again.run(resumed, lambda c: len(c.messages) >= 50 and len(c.watermarks) > 3)
    assert resumed.stats["backfill_windows"] >= 1
    assert sorted(again.messages) == sorted(r["_msg"] for r in gap + tail)


async def test_record_range_is_backfilled_in_windows_split_while_too_big(
    vl: VictoriaLogsServer,
) -> None:
    t0 = time.time_ns() - 120 * 10**9
    rows = [line(i, t0 + i * 10**8, host=f"n{i % 4}") for i in range(300)]
    vl.ingest(rows, stream_fields=["host"])
    vl.flush()
    start_us, until_us = (t0 + 5 * 10**8) // 1000, (t0 + 25 * 10**9) // 1000
    settings = config(vl, backfill_window_s=30.0, backfill_max_rows=40)
    source = VictoriaLogsSource(settings, httpx.AsyncClient(), start_us=start_us, until_us=until_us)
    got = Collector()
    await got.run(source, lambda c: False)
    expected = [r["_msg"] for r in rows if start_us <= int(r["_time"]) // 1000 <= until_us]
    assert got.messages == expected
    assert source.stats["backfill_splits"] > 0
    assert got.watermarks[-1] >= until_us
    queries = [a for p, a in vl.requests if p == "/select/logsql/query"]
    assert queries[0]["start"] == rfc3339_ns(start_us * 1000)
    assert "/select/logsql/tail" not in [p for p, _ in vl.requests]


async def test_5xx_answers_are_retried(vl: VictoriaLogsServer) -> None:
    vl.answer_next("/select/logsql/tail", 503, "cannot execute query: timeout", count=2)
    vl.ingest([line(0, time.time_ns() - 10**9)], stream_fields=["host"])
    source = VictoriaLogsSource(config(vl), httpx.AsyncClient())
    got = Collector()
    await got.run(source, lambda c: len(c.messages) == 1)
    assert source.stats["retries"] == 2


async def test_a_query_broken_after_its_first_bytes_is_retried_without_duplicates(
    vl: VictoriaLogsServer,
) -> None:
    t0 = time.time_ns() - 60 * 10**9
    rows = [line(i, t0 + i * 10**7, host=f"n{i % 3}") for i in range(100)]
    vl.ingest(rows, stream_fields=["host"])
    vl.flush()
    vl.break_next_query()
    source = VictoriaLogsSource(
        config(vl), httpx.AsyncClient(), start_us=t0 // 1000, until_us=(t0 + 2 * 10**9) // 1000
    )
    got = Collector()
    await got.run(source, lambda c: False)
    assert got.messages == [r["_msg"] for r in rows]
    assert source.stats["retries"] == 1


async def test_a_rejected_query_is_a_one_line_error(vl: VictoriaLogsServer) -> None:
    source = VictoriaLogsSource(config(vl, query="level:(error OR"), httpx.AsyncClient())
    with pytest.raises(SourceError) as error:
        await Collector().run(source, lambda c: False)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"victorialogs: {vl.url}/select/logsql/tail answered 400")
    assert "cannot parse query" in message


async def test_an_unreachable_server_is_retried_then_reported(vl: VictoriaLogsServer) -> None:
    url = vl.url
    vl.stop()
    settings = from_dict(VictoriaLogsConfig, {"url": url, **FAST, "retry_limit": 3})
    source = VictoriaLogsSource(settings, httpx.AsyncClient())
    with pytest.raises(SourceError, match=r"unreachable .*gave up after 3 attempts"):
        await Collector().run(source, lambda c: False)
    assert source.stats["retries"] == 3


def test_config_comes_from_a_toml_table_with_a_nested_field_map() -> None:
    cfg = from_dict(
        VictoriaLogsConfig,
        {
            "url": "http://vl:9428",
            "query": '{app="train"}',
            "fields": {"node": "k8s-node", "rank": "meta.rank"},
        },
        "sources.victorialogs",
    )
    assert cfg.fields.node == "k8s-node"
    assert cfg.logsql == (
        '{app="train"} | fields _time, _stream_id, _msg, job_id, "k8s-node", meta.rank, source'
    )
    with pytest.raises(ConfigError, match="default_source"):
        from_dict(VictoriaLogsConfig, {"default_source": "kernel"}, "sources.victorialogs")
    with pytest.raises(ConfigError, match="sources.victorialogs.fields.host"):
        from_dict(VictoriaLogsConfig, {"fields": {"host": "x"}}, "sources.victorialogs")
    with pytest.raises(ConfigError, match="without pipes"):
        from_dict(VictoriaLogsConfig, {"query": "* | limit 5"})


# Timing as the real server's (1 s visibility, 5 s crash loss) and medic's defaults, on a clock
# that jumps ahead: minutes of event time pass in seconds. Only the server's refresh, which it
# waits in real time, is short.
VIRTUAL = {
    "refresh_interval_s": 0.02,
    "backoff_initial_s": 0.01,
    "backoff_max_s": 0.05,
}
S = 10**9


@pytest.fixture
def real() -> Iterator[VictoriaLogsServer]:
    with VictoriaLogsServer(clock=Clock()) as server:
        yield server


def virtual_source(vl: VictoriaLogsServer, **overrides: object) -> VictoriaLogsSource:
    settings = from_dict(VictoriaLogsConfig, {"url": vl.url, **VIRTUAL, **overrides})
    return VictoriaLogsSource(settings, httpx.AsyncClient(), clock=vl.clock.now_ns)


class Shippers:
    """Log shippers on ``hosts`` nodes: each line reaches VictoriaLogs 0-``max_late_s`` after
    its time (most within 2 s, one in four anywhere up to the maximum), as batching and
    retrying shippers deliver."""

    def __init__(self, vl: VictoriaLogsServer, hosts: int = 6, max_late_s: float = 120.0) -> None:
        self.vl = vl
        self.hosts = hosts
        self.max_late_ns = round(max_late_s * S)
        self.rng = random.Random(7)
        self.pending: list[tuple[int, dict[str, str]]] = []
        self.count = 0

    def log(self, lines_per_host: int = 2) -> None:
        """Lines written now on every node, each to be shipped after its delay."""
        now = self.vl.clock.now_ns()
        for host in range(self.hosts):
            for _ in range(lines_per_host):
                late = self.rng.random() < 0.25
                delay = self.rng.randrange(self.max_late_ns if late else 2 * S)
                record = line(self.count, now + self.count % 1000, host=f"n{host}")
                self.pending.append((now + delay, record))
                self.count += 1

    def ship(self, everything: bool = False) -> None:
        """Deliver what is due (all of it at the end)."""
        now = self.vl.clock.now_ns()
        due = [r for t, r in self.pending if everything or t <= now]
        self.pending = [(t, r) for t, r in self.pending if not (everything or t <= now)]
        if due:
            self.vl.ingest(due, stream_fields=["host"])


async def tick(vl: VictoriaLogsServer, source: VictoriaLogsSource, seconds: float = 1.0) -> None:
    """Let ``seconds`` of event time pass, then give the source real time to keep up (its
    watermark within 10 s of now, as medic is on a real cluster), unless the server is down."""
    vl.clock.advance(seconds)
    deadline = time.monotonic() + 30  # a loaded machine's poll can take seconds to come round
    while time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        mark = source.watermark_us
        if not vl.listening or (mark is not None and mark * 1000 > vl.clock.now_ns() - 10 * S):
            return


def stored_messages(vl: VictoriaLogsServer) -> list[str]:
    return [r.fields["_msg"] for r in vl.store.rows]


async def run_until_delivered(
    source: VictoriaLogsSource, vl: VictoriaLogsServer, scenario: asyncio.Task[None]
) -> Collector:
    """Run the source through ``scenario``, then let event time pass until every stored row
    has come out (or a minute of event time has passed without it)."""
    got = Collector()

    async def drain() -> None:
        await scenario
        for _ in range(120):
            if set(stored_messages(vl)) <= set(got.messages):
                return
            await tick(vl, source, 0.5)

    drainer = asyncio.create_task(drain())
    await got.run(source, lambda c: drainer.done(), timeout=120)
    await drainer
    return got


async def test_late_shippers_lose_no_line_and_repeat_none(real: VictoriaLogsServer) -> None:
    source = virtual_source(real)
    shippers = Shippers(real)

    async def scenario() -> None:
        for _ in range(100):  # 200 s of event time
            shippers.log()
            shippers.ship()
            await tick(real, source, 2.0)
        shippers.ship(everything=True)

    got = await run_until_delivered(source, real, asyncio.create_task(scenario()))
    counts = Counter(got.messages)
    assert sorted(counts) == sorted(stored_messages(real)) and len(counts) == shippers.count
    assert max(counts.values()) == 1
    late = source.stats["late_rows"]
    assert late > shippers.count / 10  # the tail alone would have lost these
    assert source.stats["sweep_reads"] > 0
    assert sum(source.stats.lateness) == late
    assert sum(source.stats.lateness[5:]) > 0  # some were found a minute or more behind
    assert source.stats["lost_late_rows"] == 0


async def test_rows_later_than_lateness_are_counted_once_as_lost(
    real: VictoriaLogsServer, caplog: pytest.LogCaptureFixture
) -> None:
    source = virtual_source(real, lateness_s=20)  # horizon 27 s behind the watermark
    got = Collector()

    async def scenario() -> None:
        for second in range(0, 200, 2):
            now = real.clock.now_ns()
            rows = [line(second, now)]
            if second == 100:
                rows += [line(1000 + i, now - 10 * S + i, host="n2") for i in range(3)]
                rows += [line(2000 + i, now - 60 * S + i, host="n2") for i in range(2)]
            real.ingest(rows, stream_fields=["host"])
            await tick(real, source, 2.0)

    async def drain() -> None:
        await scenario
        on_time = {f"line {i}" for i in range(0, 200, 2)}
        for _ in range(60):
            if on_time <= set(got.messages):
                return
            await tick(real, source, 0.5)

    scenario = asyncio.create_task(scenario())
    drainer = asyncio.create_task(drain())
    with caplog.at_level("WARNING", logger="medic.ingest.victorialogs"):
        await got.run(source, lambda c: drainer.done(), timeout=120)
    await drainer
    counts = Counter(got.messages)
    assert max(counts.values()) == 1
    assert {"line 1000", "line 1001", "line 1002"} <= set(counts)  # late, within lateness_s
    assert not {"line 2000", "line 2001"} & set(counts)  # a minute late: never delivered
    assert source.stats["late_rows"] >= 3
    assert source.stats["lost_late_rows"] == 2  # counted once over the sweeps that followed
    assert source.stats["sweeps"] > 10
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if w.startswith("victorialogs: 2 rows with _time in [")]) == 1


async def test_twenty_disconnects_and_a_five_minute_outage_lose_and_repeat_nothing(
    real: VictoriaLogsServer,
) -> None:
    source = virtual_source(real)
    shippers = Shippers(real)
    outage: dict[str, object] = {}

    async def scenario() -> None:
        cuts, next_cut = 0, 0
        for second in range(0, 600, 2):
            shippers.log()
            shippers.ship()  # shippers reach VictoriaLogs all along; medic does not
            if cuts < 20 and second >= next_cut and real.open_tails():
                cuts += real.disconnect_tails() > 0
                next_cut = second + 8
            if second == 200:
                real.down()
            if second == 210:
                outage["up"] = source.health.up
                outage["error"] = source.health.error
            if second == 500:
                real.up()
            await tick(real, source, 2.0)
        outage["cuts"] = cuts
        shippers.ship(everything=True)

    got = await run_until_delivered(source, real, asyncio.create_task(scenario()))
    assert outage["cuts"] == 20
    # down: the open tail broke, then every retry finds nothing listening
    assert outage["up"] is False and re.search("unreachable|broke", str(outage["error"]))
    counts = Counter(got.messages)
    assert sorted(counts) == sorted(stored_messages(real)) and len(counts) == shippers.count
    assert max(counts.values()) == 1
    assert source.stats["duplicates"] > 0  # reconnects did re-send rows; the cursor dropped them
    assert source.stats["backfill_windows"] >= 5  # the outage was read back through /query
    assert source.stats["lost_late_rows"] == 0
    assert source.health.up


async def test_after_a_crash_every_row_the_server_kept_comes_once(real: VictoriaLogsServer) -> None:
    source = virtual_source(real)
    shippers = Shippers(real, max_late_s=30)
    lost: set[str] = set()

    async def scenario() -> None:
        for second in range(120):
            shippers.log()
            shippers.ship()
            if second == 60:
                before = set(stored_messages(real))
                assert real.crash() > 0
                lost.update(before - set(stored_messages(real)))
            if second == 70:
                real.up()
            await tick(real, source)
        shippers.ship(everything=True)

    got = await run_until_delivered(source, real, asyncio.create_task(scenario()))
    counts = Counter(got.messages)
    assert max(counts.values()) == 1
    assert set(stored_messages(real)) <= set(counts)
    # the rows it lost were acknowledged, and some were seen before the crash: nothing else
    assert set(counts) - set(stored_messages(real)) <= lost
    assert source.stats["lost_late_rows"] == 0


async def test_a_quiet_query_keeps_the_watermark_moving(real: VictoriaLogsServer) -> None:
    """The server withholds a compressed tail's headers until a row matches; medic's tail
    asks for no compression, so its watermark moves while nothing matches."""
    real.ingest([line(0, real.clock.now_ns(), job="other")], stream_fields=["host"])
    source = virtual_source(real, query='job_id:="quiet"')

    async def tick() -> None:
        while True:
            real.clock.advance(0.2)
            await asyncio.sleep(0.02)

    ticker = asyncio.create_task(tick())
    got = Collector()
    try:
        await got.run(source, lambda c: len(c.watermarks) >= 5, timeout=20)
    finally:
        ticker.cancel()
    assert got.messages == []
    assert got.watermarks[-1] > got.watermarks[0]
    tails = [p for p, _ in real.requests if p == "/select/logsql/tail"]
    assert len(tails) == 1


@pytest.mark.parametrize(
    ("body", "content_type", "why"),
    [
        ("<html><body>502 Bad Gateway</body></html>", "text/html", "Content-Type text/html"),
        ('{"status":"error","msg":"nope"}\n', "application/x-ndjson", "without _time"),
        ("not json at all\n", "application/x-ndjson", "not log rows"),
        ("\x1b[2J\x1b[31mjunk\x00\x07\n", "application/x-ndjson", "\\x1b[2J\\x1b[31mjunk\\x00"),
    ],
)
async def test_a_junk_answer_turns_the_source_down_within_one_request(
    vl: VictoriaLogsServer, body: str, content_type: str, why: str
) -> None:
    vl.answer_next("/select/logsql/tail", 200, body, content_type, count=3)
    vl.ingest([line(0, time.time_ns())], stream_fields=["host"])
    source = VictoriaLogsSource(config(vl, backoff_initial_s=0.05), httpx.AsyncClient())
    seen: list[tuple[bool, str | None]] = []
    got = Collector()

    def watch(c: Collector) -> bool:
        return len(c.messages) == 1

    async def observe() -> None:
        while source.stats["bad_answers"] == 0:
            await asyncio.sleep(0.001)
        seen.append((source.health.up, source.health.error))

    observer = asyncio.create_task(observe())
    await got.run(source, watch)
    await observer
    up, error = seen[0]
    assert up is False and why in str(error) and str(error).isprintable()
    assert source.stats["bad_answers"] == 3 and source.health.failures == 3
    assert source.health.up  # delivering again once the junk stopped
    tail_requests = [p for p, _ in vl.requests if p == "/select/logsql/tail"]
    assert len(tail_requests) == 4


async def test_a_junk_query_answer_moves_neither_rows_nor_watermark(
    vl: VictoriaLogsServer,
) -> None:
    t0 = time.time_ns() - 60 * S
    rows = [line(i, t0 + i * 10**7) for i in range(50)]
    vl.ingest(rows, stream_fields=["host"])
    vl.flush()
    vl.answer_next("/select/logsql/query", 200, '{"hits":[]}', "application/json")
    source = VictoriaLogsSource(
        config(vl, backfill_window_s=600),
        httpx.AsyncClient(),
        start_us=t0 // 1000,
        until_us=(t0 + S) // 1000,
    )
    got = Collector()
    await got.run(source, lambda c: False)
    assert got.messages == [r["_msg"] for r in rows]
    assert source.stats["bad_answers"] == 1 and source.stats["backfill_windows"] == 1
    assert len(got.watermarks) == 1


def test_transport_errors_are_named_even_without_a_message() -> None:
    assert describe(httpx.ReadError("")) == "ReadError"
    assert describe(httpx.ConnectError("refused")) == "ConnectError: refused"


async def test_a_gzipped_junk_query_answer_is_named_in_plain_text(vl: VictoriaLogsServer) -> None:
    """/query answers are read gzipped as they come (polars decompresses them): junk among
    them still fails the request with its text, not its compressed bytes."""
    t0 = time.time_ns() - 60 * S
    rows = [line(i, t0 + i * 10**7) for i in range(50)]
    vl.ingest(rows, stream_fields=["host"])
    vl.flush()
    page = "<html><body>" + "upstream is restarting " * 100 + "</body></html>\n"
    assert len(page) >= GZIP_MIN_BYTES  # the fake gzips it: the source asks for gzip
    vl.answer_next("/select/logsql/query", 200, page, "application/stream+json")
    source = VictoriaLogsSource(
        config(vl, backfill_window_s=600, backoff_initial_s=0.05),
        httpx.AsyncClient(),
        start_us=t0 // 1000,
        until_us=(t0 + S) // 1000,
    )
    errors: list[str | None] = []

    async def observe() -> None:
        while source.stats["bad_answers"] == 0:
            await asyncio.sleep(0.001)
        errors.append(source.health.error)

    observer = asyncio.create_task(observe())
    got = Collector()
    await got.run(source, lambda c: False)
    await observer
    assert "not log rows" in str(errors[0]) and "<html><body>upstream" in str(errors[0])
    assert got.messages == [r["_msg"] for r in rows]
