"""VictoriaLogs to Arrow: the source on the fake's realistic stream, per CPU-second of the client.

The server (``medic.testing.victorialogs``) runs in a child process with ``--rows`` log lines
(about 250 bytes each, in ``--streams`` streams, 256 by default) rendered in advance, so only
the client's CPU is counted (``time.process_time`` of this process: the server's threads are
elsewhere). It streams as
VictoriaLogs v1.26.0 does: pieces of about 2 KiB uncompressed, a gzip flush about every
10 KiB when the client asks for gzip, /query rows grouped by stream. ``--url`` runs the same
against a real VictoriaLogs instead (the lines are inserted there first, under a job id of
their own). Measured, each as lines per CPU-second of this process (the best of
``--repeat`` runs, as other work on the machine only ever adds CPU time):

* ``tail``: the source's live tail (always ``Accept-Encoding: identity``) whose first window
  holds every line;
* ``query identity`` / ``query gzip``: the source reading the same lines back through /query
  (``query_encoding``), as after an outage or for ``medic record``;
* ``naive``: the baseline, in the same process on the same gzip stream: httpx's
  ``aiter_lines``, ``json.loads`` per line, ``pa.Table.from_pylist`` per 65,536 lines.

    .venv/bin/python bench/bench_victorialogs_tail.py --rows 400000
    .venv/bin/python bench/bench_victorialogs_tail.py --rows 400000 --url http://127.0.0.1:9428
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import pyarrow as pa

from medic.ingest.base import Batch, Event
from medic.ingest.victorialogs import VictoriaLogsConfig, VictoriaLogsSource
from medic.testing.victorialogs import VictoriaLogsServer

NS = 10**9


def lines(n: int, now: int, job: str, streams: int) -> list[dict[str, str]]:
    start = now - 60 * NS
    step = 55 * NS // n
    return [
        {
            "_time": str(start + i * step),
            "_msg": f"[rank{i % 64}]: step {i // 64} loss=2.{i % 997:03d} lr=3.0e-04 "
            f"grad_norm=0.{i % 89:02d} tokens/s={100000 + i % 5000} mem=71.2GiB",
            "host": f"gpu{i % streams:05d}",
            "job_id": job,
            "rank": str(i % 64),
            "source": "app",
        }
        for i in range(n)
    ]


def serve(
    n: int,
    now: int,
    job: str,
    streams: int,
    selected: tuple[str, ...],
    ready: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    server = VictoriaLogsServer(searchable_delay_s=0.0)
    server.ingest(lines(n, now, job, streams), stream_fields=["host"])
    for row in server.store.rows:
        row.line(selected)
    with server:
        ready.put(server.url)
        server.stopping.wait()


def insert(url: str, n: int, now: int, job: str, streams: int, batch: int) -> None:
    """The bench's lines into a real VictoriaLogs in requests of ``batch`` lines, as a log
    shipper sends them (the server's storage blocks, and so the pieces it streams, follow the
    inserts' sizes), then searchable at once."""
    records = lines(n, now, job, streams)
    with httpx.Client(timeout=600) as client:
        for first in range(0, n, batch):
            body = "".join(json.dumps(r) + "\n" for r in records[first : first + batch])
            client.post(
                f"{url}/insert/jsonline",
                params={"_stream_fields": "host"},
                content=body.encode(),
                headers={"Content-Type": "application/stream+json"},
            ).raise_for_status()
        client.get(f"{url}/internal/force_flush").raise_for_status()


async def rows_of(events: AsyncIterator[Event], n: int) -> int:
    rows = 0
    async for event in events:
        if isinstance(event, Batch):
            rows += event.num_rows
            if rows >= n:
                break
    return rows


async def measured(run: Callable[[], Awaitable[int]]) -> tuple[int, float, float]:
    """(lines, wall s, CPU s) of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    rows = await run()
    return rows, time.perf_counter() - wall, time.process_time() - cpu


async def tail(client: httpx.AsyncClient, url: str, n: int, now: int, job: str) -> int:
    """The lines from ``now`` - 60 s on through one tail."""
    reach_s = (time.time_ns() - now) / NS + 61.0
    config = VictoriaLogsConfig(
        url=url, query=f'job_id:="{job}"', start_offset_s=reach_s, max_tail_catchup_s=2 * reach_s
    )
    events = VictoriaLogsSource(config, client).__aiter__()
    rows = await rows_of(events, n)
    await events.aclose()  # type: ignore[attr-defined]
    return rows


async def query(
    client: httpx.AsyncClient, url: str, n: int, now: int, job: str, encoding: str
) -> int:
    config = VictoriaLogsConfig(
        url=url,
        query=f'job_id:="{job}"',
        query_encoding=encoding,  # type: ignore[arg-type]
        backfill_window_s=600.0,
        backfill_max_rows=2 * n,
    )
    now_us = now // 1000
    source = VictoriaLogsSource(
        config, client, start_us=now_us - 61 * 10**6, until_us=now_us - 4 * 10**6
    )
    return await rows_of(source.__aiter__(), n)


async def naive(client: httpx.AsyncClient, url: str, n: int, job: str) -> int:
    """Line by line: what a client without medic's block decoding does."""
    rows: list[dict[str, str]] = []
    tables = []
    async with client.stream(
        "POST",
        f"{url}/select/logsql/query",
        data={"query": VictoriaLogsConfig(query=f'job_id:="{job}"').logsql},
        headers={"Accept-Encoding": "gzip"},
        timeout=600,
    ) as response:
        async for line in response.aiter_lines():
            if line:
                rows.append(json.loads(line))
            if len(rows) == 65_536:
                tables.append(pa.Table.from_pylist(rows))
                rows = []
    tables.append(pa.Table.from_pylist(rows))
    return sum(t.num_rows for t in tables)


async def main_async(url: str, n: int, now: int, job: str, repeat: int, where: str) -> None:
    async with httpx.AsyncClient() as client:
        runs = {
            "tail (identity)": lambda: tail(client, url, n, now, job),
            "query identity": lambda: query(client, url, n, now, job, "identity"),
            "query gzip": lambda: query(client, url, n, now, job, "gzip"),
            "naive, gzip (baseline)": lambda: naive(client, url, n, job),
        }
        await query(client, url, n, now, job, "identity")  # warm up: imports, connection
        results = {}
        for name, run in runs.items():
            tries = [await measured(run) for _ in range(repeat)]
            if any(rows != n for rows, _, _ in tries):
                raise SystemExit(f"{name}: read {[t[0] for t in tries]} lines, not {n}")
            results[name] = min(tries, key=lambda r: r[2])
    base_rows, _, base_cpu = results["naive, gzip (baseline)"]
    base_rate = base_rows / base_cpu
    print(f"{n} lines, {where}; client process CPU only, best of {repeat}")
    for name, (rows, wall, cpu) in results.items():
        rate = rows / cpu
        print(
            f"  {name:24s} {rows:8d} lines  {wall:6.2f} s wall  {cpu:6.2f} s CPU  "
            f"{rate:10,.0f} lines per CPU-second  {rate / base_rate:5.1f}x baseline"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best counts")
    parser.add_argument("--streams", type=int, default=256, help="log streams (hosts)")
    parser.add_argument("--url", help="a real VictoriaLogs to read from instead of the fake")
    parser.add_argument(
        "--insert-batch", type=int, default=1000, help="lines per insert request (--url)"
    )
    args = parser.parse_args()
    now, job = time.time_ns(), f"bench-{os.getpid()}-{time.time_ns()}"
    if args.url:
        insert(args.url, args.rows, now, job, args.streams, args.insert_batch)
        asyncio.run(
            main_async(
                args.url,
                args.rows,
                now,
                job,
                args.repeat,
                f"{args.streams} streams, VictoriaLogs at {args.url}",
            )
        )
        return
    selected = tuple(VictoriaLogsConfig().selected_fields)
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    child = context.Process(
        target=serve, args=(args.rows, now, job, args.streams, selected, ready), daemon=True
    )
    child.start()
    try:
        asyncio.run(
            main_async(
                ready.get(timeout=600),
                args.rows,
                now,
                job,
                args.repeat,
                f"{args.streams} streams, the fake",
            )
        )
    finally:
        child.terminate()
        child.join()


if __name__ == "__main__":
    main()
