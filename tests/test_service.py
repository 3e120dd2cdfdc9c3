"""`medic serve` as an operator runs it: a real process, real files, a real DuckDB file."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from medic.ingest.base import Event
from medic.service import Service

OOM = (
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 3 has a total capacity of 79.10 GiB of which 1.20 GiB is free."
)


def write_config(tmp: Path) -> Path:
    (tmp / "jobs").mkdir(exist_ok=True)
    config = tmp / "medic.toml"
    config.write_text(
        f"""
[service]
listen = "127.0.0.1:0"
state_dir = "{tmp / "state"}"
checkpoint_interval_s = 0.5

[history]
path = "{tmp / "history.duckdb"}"

[sources.files]
paths = ["{tmp / "jobs" / "job-%j-%N.out"}"]
poll_interval_s = 0.1
"""
    )
    return config


class Served:
    """A `medic serve` process with its log, and its HTTP port once it listens."""

    def __init__(self, config: Path, log: Path, env: Mapping[str, str] | None = None) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "medic", "serve", "--config", str(config)],
            stdout=log.open("a"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        found = wait_for(lambda: re.search(r"on 127\.0\.0\.1:(\d+)", log.read_text()), 60)
        self.port = int(found.group(1))

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=5)

    def metric(self, name: str) -> float:
        total = 0.0
        for line in self.get("/metrics").text.splitlines():
            if line.startswith(name):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def wait_for(check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s")


def rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(query).fetchall()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[[], Served]]:
    started: list[Served] = []

    def start() -> Served:
        log = tmp_path / f"serve-{len(started)}.log"
        started.append(Served(write_config(tmp_path), log))
        return started[-1]

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def append(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write("".join(f"{line}\n" for line in lines))


def test_detects_from_job_output_reports_metrics_and_stops_cleanly_on_sigterm(
    tmp_path: Path, served: Callable[[], Served]
) -> None:
    out = tmp_path / "jobs" / "job-42-gpu-a001.out"
    append(out, "[rank3]: step 1", "[rank3]: step 2")
    service = served()
    wait_for(lambda: service.metric("medic_ingested_rows_total") >= 2, 30)
    append(out, *["[rank3]: Traceback (most recent call last):", OOM])
    wait_for(lambda: service.metric("medic_detections_total") == 1, 30)
    health = service.get("/healthz").json()
    assert health["healthy"] is True
    assert health["sources"]["files"]["up"] is True
    metrics = service.get("/metrics").text
    assert 'medic_ingest_lag_seconds{source="files"}' in metrics
    assert 'medic_history_late_rows{stream="progress"} 0.0' in metrics
    assert service.stop() == 0
    assert "medic serve: stopped" in service.log.read_text()
    detections = rows(tmp_path / "history.duckdb", "SELECT job_id, kind, culprits FROM detections")
    assert detections == [("42", "crash", [])]


def test_kill_9_and_restart_resumes_without_lost_or_repeated_detections(
    tmp_path: Path, served: Callable[[], Served]
) -> None:
    first, second = tmp_path / "jobs" / "job-7-n1.out", tmp_path / "jobs" / "job-8-n2.out"
    append(first, "[rank0]: starting")
    service = served()
    append(first, OOM.replace("rank3", "rank0"))
    wait_for(lambda: service.metric("medic_detections_total") == 1, 30)
    service.stop(signal.SIGKILL)
    # The worst case: killed before the cursor of the detected line was saved, so the restart
    # reads job 7's fault again; the incident reopened from the history must absorb it.
    for cursor in (tmp_path / "state" / "cursors").glob("*.json"):
        cursor.unlink()
    append(second, "[rank0]: starting", OOM.replace("rank3", "rank0"))
    restarted = served()
    wait_for(lambda: restarted.metric("medic_ingested_rows_total") >= 2, 30)
    wait_for(lambda: restarted.metric("medic_detections_total") >= 1, 30)
    time.sleep(1.5)
    assert restarted.stop() == 0
    detections = rows(
        tmp_path / "history.duckdb", "SELECT job_id, kind FROM detections ORDER BY job_id"
    )
    assert detections == [("7", "crash"), ("8", "crash")]


class FailingSource:
    """A source that breaks on every attempt, as an unreachable log store would."""

    name = "flaky"

    def __init__(self) -> None:
        self.attempts = 0

    async def __aiter__(self) -> AsyncIterator[Event]:
        self.attempts += 1
        raise ConnectionError("connection refused")
        yield  # pragma: no cover  (makes this an async generator)

    def checkpoint(self) -> dict[str, Any]:
        return {}


def test_a_failing_source_is_retried_and_reported_never_fatal(tmp_path: Path) -> None:
    from medic.service import SourceState
    from medic.settings import load_settings

    settings = load_settings(write_config(tmp_path))
    settings["service"]["retry_initial_s"] = 0.05
    settings["service"]["retry_max_s"] = 0.1

    async def scenario() -> dict[str, Any]:
        service = Service(settings)
        flaky = FailingSource()
        service.sources["flaky"] = SourceState(flaky, resumable=False)
        task = asyncio.create_task(service.run())
        while flaky.attempts < 3:
            await asyncio.sleep(0.05)
        report = service.health()
        service.stop()
        await task
        report["attempts"] = flaky.attempts
        return report

    report = asyncio.run(scenario())
    assert report["attempts"] >= 3
    assert report["healthy"] is False
    assert report["sources"]["flaky"] == {
        "up": False,
        "lag_s": None,
        "error": "connection refused",
        "ok": False,
    }
    assert report["sources"]["files"]["up"] is True


def test_metrics_bind_to_loopback_by_default() -> None:
    from medic.service import ServiceConfig

    assert ServiceConfig().listen.startswith("127.0.0.1:")


def test_an_unreachable_log_store_shows_at_once_and_cursors_go_to_cursor_dir(
    tmp_path: Path,
) -> None:
    """The VictoriaLogs source retries by itself; /healthz and /metrics must still say it is
    failing, with the reason, from its first failed request."""
    from prometheus_client import generate_latest

    from medic.settings import load_settings
    from medic.testing.victorialogs import VictoriaLogsServer

    with VictoriaLogsServer() as vl:
        url = vl.url
    settings = load_settings(write_config(tmp_path))
    del settings["sources"]["files"]
    settings["sources"]["cursor_dir"] = str(tmp_path / "elsewhere")
    settings["sources"]["victorialogs"] = {"url": url, "backoff_initial_s": 0.05}

    async def scenario() -> tuple[dict[str, Any], str]:
        service = Service(settings)
        assert service.cursors.directory == tmp_path / "elsewhere"
        task = asyncio.create_task(service.run())
        source = service.sources["victorialogs"].source
        while source.health.failures == 0:  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)
        source.stats.add("lost_late_rows", 3)  # type: ignore[attr-defined]
        report, metrics = service.health(), generate_latest(service.metrics.registry).decode()
        service.stop()
        await task
        return report, metrics

    report, metrics = asyncio.run(scenario())
    status = report["sources"]["victorialogs"]
    assert status["up"] is False and status["ok"] is False
    assert f"VictoriaLogs at {url} is unreachable (ConnectError" in status["error"]
    assert 'medic_source_up{source="victorialogs"} 0.0' in metrics
    assert re.search(r'medic_source_failed_requests_total\{source="victorialogs"\} [1-9]', metrics)
    assert 'medic_source_events_total{event="lost_late_rows",source="victorialogs"} 3.0' in metrics


def test_a_polling_source_is_complete_up_to_the_wall_clock_until_its_next_poll_is_due() -> None:
    from medic.ingest.files import FilesConfig, FileSource
    from medic.ingest.replay import ReplaySource
    from medic.service import complete_until
    from medic.testing.builders import at, recording

    files = FileSource(FilesConfig(paths=("x-%j.out",), poll_interval_s=0.5))
    assert complete_until(files, None, at(10)) is None
    assert complete_until(files, at(10), at(10.2)) == at(10.2)
    assert complete_until(files, at(10), at(13)) == at(10.5), "a late poll holds it back"
    assert complete_until(files, at(10), at(9)) == at(10)
    replayed = ReplaySource(recording())
    assert complete_until(replayed, at(10), at(13)) == at(10), "event-time sources: their own"


def test_read_commands_ask_the_service_that_holds_the_history(
    tmp_path: Path, served: Callable[[], Served]
) -> None:
    out = tmp_path / "jobs" / "job-43-gpu-a001.out"
    append(out, "[rank3]: step 1", "[rank3]: Traceback (most recent call last):", OOM)
    service = served()
    wait_for(lambda: service.metric("medic_detections_total") == 1, 30)
    config = tmp_path / "medic.toml"
    config.write_text(
        config.read_text().replace('listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{service.port}"')
    )
    env = {**os.environ, "COLUMNS": "200"}
    for command in (["nodes", "--no-slurm"], ["report"]):
        done = subprocess.run(
            [sys.executable, "-m", "medic", *command, "--config", str(config)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "Could not set lock" not in done.stderr
        assert f"asking http://127.0.0.1:{service.port}" in done.stderr
    assert service.get("/nodes").headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert service.stop() == 0
