"""medic's VictoriaLogs source against a running VictoriaLogs: exactly once, late lines, outage.

Talks to the server at ``--url`` (insert through ``/insert/jsonline``, read with medic's source)
under a job id of its own, so it can share a server with other data:

1. a backlog (3,000 lines over the last 90 s) read through /query, then the tail, while a
   shipper inserts 20 live lines a second;
2. late lines, as a batching shipper delivers them: 200 with ``_time`` 30 s in the past, 200
   with 120 s, 50 of a new stream with 60 s; the source's late-row counts and histogram;
3. with ``--kill-pid`` and ``--restart``: a kill -9 of the server for ``--outage-s``, the
   shipper buffering and resending meanwhile, then the restart command;
4. every line the server holds at the end delivered, none twice; lines delivered and then lost
   by the server (a kill -9 loses the rows it acknowledged in its last seconds) are counted.

With ``--serve-url`` (a ``medic serve`` whose source reads the same server) its ``/healthz``
and ``/metrics`` are polled twice a second and every change of the source's health printed.

    .venv/bin/python bench/check_victorialogs_server.py --url http://127.0.0.1:9428 \\
        --serve-url http://127.0.0.1:9464 --kill-pid 1234 --restart "victoria-logs ..."
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from medic.ingest.base import Batch
from medic.ingest.victorialogs import VictoriaLogsConfig, VictoriaLogsSource

NS = 10**9
T0 = time.monotonic()


def say(*parts: object) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s]", *parts, flush=True)


class Shipper:
    """Inserts lines, keeping those the server refused to resend with the next insert."""

    def __init__(self, client: httpx.AsyncClient, url: str, job: str) -> None:
        self.client, self.url, self.job = client, url, job
        self.seq = 0
        self.pending: list[dict[str, str]] = []
        self.acked: dict[str, float] = {}
        self.lock = asyncio.Lock()

    def lines(self, n: int, t_ns: int, tag: str, hosts: list[str]) -> list[dict[str, str]]:
        out = []
        for i in range(n):
            self.seq += 1
            out.append(
                {
                    "_time": str(t_ns + i * 1000),
                    "_msg": f"{tag} seq={self.seq} loss=2.{self.seq % 997:03d}",
                    "host": hosts[i % len(hosts)],
                    "job_id": self.job,
                    "rank": str(i % 8),
                    "source": "app",
                }
            )
        return out

    async def ship(self, lines: list[dict[str, str]]) -> None:
        async with self.lock:
            self.pending += lines
            body = "".join(json.dumps(r) + "\n" for r in self.pending).encode()
            try:
                answer = await self.client.post(
                    f"{self.url}/insert/jsonline",
                    params={"_stream_fields": "host"},
                    content=body,
                    headers={"Content-Type": "application/stream+json"},
                    timeout=5,
                )
                answer.raise_for_status()
            except httpx.HTTPError:
                return
            now = time.monotonic()
            for line in self.pending:
                self.acked.setdefault(line["_msg"], now)
            self.pending = []


async def collect(source: VictoriaLogsSource, got: Counter[str], at: dict[str, float]) -> None:
    async for event in source:
        if isinstance(event, Batch):
            for message in event.frame.get_column("message").to_list():
                got[message] += 1
                at.setdefault(message, time.monotonic())


async def live(shipper: Shipper, stop: asyncio.Event) -> None:
    hosts = [f"h{i}" for i in range(8)]
    while not stop.is_set():
        await shipper.ship(shipper.lines(5, time.time_ns(), "live", hosts))
        await asyncio.sleep(0.25)


async def poll_service(client: httpx.AsyncClient, serve_url: str) -> None:
    last: Any = None
    while True:
        try:
            health = (await client.get(f"{serve_url}/healthz", timeout=2)).json()
            metrics = (await client.get(f"{serve_url}/metrics", timeout=2)).text
            source = health["sources"].get("victorialogs", {})
            wanted = ("medic_source_up{", "medic_source_failed_requests_total{")
            lines = [
                m for m in metrics.splitlines() if m.startswith(wanted) and "victorialogs" in m
            ]
            now = (health["healthy"], source.get("up"), source.get("error"))
            if now != last:
                say(f"service: healthy={now[0]} up={now[1]} error={now[2]!r}", *lines)
            last = now
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            if last != "unreachable":
                say(f"service unreachable ({type(exc).__name__})")
            last = "unreachable"
        await asyncio.sleep(0.5)


def server_messages(url: str, job: str) -> Counter[str]:
    answer = httpx.post(
        f"{url}/select/logsql/query",
        data={"query": f'job_id:="{job}" | fields _msg'},
        timeout=60,
    )
    answer.raise_for_status()
    return Counter(json.loads(line)["_msg"] for line in answer.text.splitlines() if line)


def report(label: str, want: Counter[str], got: Counter[str]) -> tuple[int, int]:
    missing = sum((want - got).values())
    repeated = sum(n - want.get(m, 1) for m, n in got.items() if n > max(1, want.get(m, 1)))
    say(
        f"{label}: expected {sum(want.values())}, delivered {sum(got.values())}, "
        f"missing {missing}, delivered twice {repeated}"
    )
    return missing, repeated


def latency(shipper: Shipper, at: dict[str, float], low: float, high: float) -> str:
    waits = sorted(
        at[m] - t
        for m, t in shipper.acked.items()
        if m.startswith("live") and m in at and low <= t < high
    )
    if not waits:
        return "no lines"
    p50, p90, p99 = (waits[min(len(waits) - 1, int(q * len(waits)))] for q in (0.5, 0.9, 0.99))
    return f"p50 {p50:.2f} s, p90 {p90:.2f} s, p99 {p99:.2f} s over {len(waits)} lines"


async def scenario(args: argparse.Namespace) -> int:
    job = f"check-{os.getpid()}-{time.time_ns()}"
    async with httpx.AsyncClient() as client:
        shipper = Shipper(client, args.url, job)
        now = time.time_ns()
        backlog = shipper.lines(3000, now - 90 * NS, "backlog", [f"h{i}" for i in range(8)])
        for i, line in enumerate(backlog):
            line["_time"] = str(now - 90 * NS + i * 70 * NS // len(backlog))
        await shipper.ship(backlog)
        say(f"backlog of {len(shipper.acked)} lines inserted under job_id {job}")
        await asyncio.sleep(1.5)
        config = VictoriaLogsConfig(url=args.url, query=f'job_id:="{job}"', start_offset_s=100)
        source = VictoriaLogsSource(config, client)
        got: Counter[str] = Counter()
        at: dict[str, float] = {}
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(collect(source, got, at)),
            asyncio.create_task(live(shipper, stop)),
        ]
        if args.serve_url:
            tasks.append(asyncio.create_task(poll_service(client, args.serve_url)))
        await asyncio.sleep(20)
        now = time.time_ns()
        await shipper.ship(shipper.lines(200, now - 30 * NS, "late30", ["h0", "h1", "h2", "h3"]))
        await shipper.ship(shipper.lines(200, now - 120 * NS, "late120", ["h4", "h5", "h6"]))
        await shipper.ship(shipper.lines(50, now - 60 * NS, "late60", ["newhost"]))
        say("late lines inserted (30 s, 120 s and 60 s behind their time)")
        await asyncio.sleep(25)
        report("after the late lines", Counter(shipper.acked.keys()), got)
        say("source counts", dict(source.stats.counts), "lateness", source.stats.lateness)
        killed = restarted = float("inf")
        if args.kill_pid and args.restart:
            killed = time.monotonic()
            os.kill(args.kill_pid, signal.SIGKILL)
            say(f"killed {args.kill_pid} with SIGKILL for {args.outage_s:.0f} s")
            await asyncio.sleep(args.outage_s)
            server = subprocess.Popen(shlex.split(args.restart), start_new_session=True)
            restarted = time.monotonic()
            say(f"restarted: pid {server.pid} (yours to stop)")
            await asyncio.sleep(30)
        stop.set()
        await tasks[1]
        await shipper.ship([])
        await asyncio.sleep(20)
        kept = server_messages(args.url, job)
        missing, repeated = report("at the end, against what the server holds", kept, got)
        lost = sum((Counter(shipper.acked.keys()) - kept).values())
        say(
            f"acknowledged by the server but lost by it: {lost}; of those delivered before: "
            f"{sum(1 for m in got if m not in kept)}"
        )
        say("source counts", dict(source.stats.counts), "lateness", source.stats.lateness)
        say("live lines, insert acknowledged to delivered:", latency(shipper, at, 0, killed))
        if restarted < float("inf"):
            say("  after the restart:", latency(shipper, at, restarted + 10, float("inf")))
        for task in tasks:
            task.cancel()
        return 1 if missing or repeated else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="VictoriaLogs base URL")
    parser.add_argument("--serve-url", help="a medic serve reading that server, to poll")
    parser.add_argument("--kill-pid", type=int, help="the server's pid, for the outage")
    parser.add_argument("--restart", help="command that starts the server again")
    parser.add_argument("--outage-s", type=float, default=60.0)
    raise SystemExit(asyncio.run(scenario(parser.parse_args())))


if __name__ == "__main__":
    main()
