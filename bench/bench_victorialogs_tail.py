"""Tail to Arrow: VictoriaLogsSource against the local VictoriaLogs server, on one core.

The server runs in a child process with ``--rows`` log lines (about 250 bytes each, 256
streams) rendered in advance, so the client is what is measured. The source opens a tail
whose first window holds every line and turns the chunked NDJSON into ``logs`` batches.
Printed: wall-clock and per-CPU-second throughput of the client, then the same payload decoded
in memory by medic's path and by the naive baseline (``json.loads`` per line into a list of
dicts, then ``pa.Table.from_pylist``), and their ratio.

    POLARS_MAX_THREADS=1 .venv/bin/python bench/bench_victorialogs_tail.py --rows 400000
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import pyarrow as pa

from medic.ingest.base import Batch
from medic.ingest.victorialogs import VictoriaLogsConfig, VictoriaLogsSource
from medic.testing.victorialogs import VictoriaLogsServer


def lines(n: int, now: int) -> list[dict[str, str]]:
    start = now - 60 * 10**9
    step = 55 * 10**9 // n
    return [
        {
            "_time": str(start + i * step),
            "_msg": f"[rank{i % 64}]: step {i // 64} loss=2.{i % 997:03d} lr=3.0e-04 "
            f"grad_norm=0.{i % 89:02d} tokens/s={100000 + i % 5000} mem=71.2GiB",
            "host": f"gpu{i % 256:04d}",
            "job_id": "4242",
            "rank": str(i % 64),
            "source": "app",
        }
        for i in range(n)
    ]


def serve(n: int, selected: tuple[str, ...], ready: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    server = VictoriaLogsServer()
    server.ingest(lines(n, time.time_ns()), stream_fields=["host"])
    for row in server.store.rows:
        row.line(selected)
    with server:
        ready.put(server.url)
        server.stopping.wait()


async def tail(url: str, n: int) -> tuple[float, float, int]:
    config = VictoriaLogsConfig(url=url, start_offset_s=120.0, max_tail_catchup_s=600.0)
    rows = 0
    async with httpx.AsyncClient() as client:
        source = VictoriaLogsSource(config, client)
        events = source.__aiter__()
        first = await anext(events)
        wall, cpu = time.perf_counter(), time.process_time()
        rows += first.num_rows if isinstance(first, Batch) else 0
        async for event in events:
            if isinstance(event, Batch):
                rows += event.num_rows
                if rows >= n:
                    break
        elapsed = time.perf_counter() - wall, time.process_time() - cpu
        await events.aclose()  # type: ignore[attr-defined]
    return elapsed[0], elapsed[1], rows


def in_memory(payload: bytes, url: str) -> tuple[float, float]:
    source = VictoriaLogsSource(VictoriaLogsConfig(url=url), httpx.AsyncClient(), start_us=0)
    started = time.process_time()
    tables = list(source._deliver(source._decode(payload)))
    medic_s = time.process_time() - started
    started = time.process_time()
    naive = pa.Table.from_pylist([json.loads(line) for line in payload.splitlines()])
    naive_s = time.process_time() - started
    assert sum(t.num_rows for t in tables) == naive.num_rows
    return medic_s, naive_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    args = parser.parse_args()
    selected = tuple(VictoriaLogsConfig().selected_fields)
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    child = context.Process(target=serve, args=(args.rows, selected, ready), daemon=True)
    child.start()
    try:
        url = ready.get(timeout=600)
        wall, cpu, rows = asyncio.run(tail(url, args.rows))
        payload = httpx.post(
            f"{url}/select/logsql/query",
            data={"query": VictoriaLogsConfig().logsql},
            timeout=600,
        ).content
    finally:
        child.terminate()
        child.join()
    medic_s, naive_s = in_memory(payload, url)
    n = len(payload.splitlines())
    print(f"tail to Arrow over HTTP: {rows} lines in {wall:.2f} s wall, {cpu:.2f} s CPU")
    print(f"  {rows / wall:,.0f} lines/s wall, {rows / cpu:,.0f} lines per CPU-second")
    print(f"in memory, {n} lines ({len(payload) / n:.0f} bytes each):")
    print(f"  medic decode+dedupe+Arrow: {n / medic_s:,.0f} lines/s")
    print(f"  naive json.loads+from_pylist: {n / naive_s:,.0f} lines/s")
    print(f"  ratio medic/naive: {naive_s / medic_s:.1f}x")


if __name__ == "__main__":
    main()
