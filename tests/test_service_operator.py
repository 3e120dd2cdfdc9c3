"""What an operator sees of a running `medic serve`: its log lines, its report, its errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.test_service import OOM, Served, append, wait_for, write_config

ROUTE = """
[[rules.routes]]
name = "every-crash"
kinds = ["crash"]
actions = ["requeue"]
"""


def configure(tmp_path: Path, extra: str = "") -> Path:
    config = write_config(tmp_path)
    config.write_text(config.read_text() + extra)
    return config


def medic(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "medic", *args], capture_output=True, text=True, timeout=120
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_log_has_a_line_per_detection_and_decision_and_report_works_while_serving(
    tmp_path: Path,
) -> None:
    config = configure(tmp_path, ROUTE)
    config.write_text(config.read_text().replace("127.0.0.1:0", f"127.0.0.1:{free_port()}"))
    out = tmp_path / "jobs" / "job-42-gpu-a001.out"
    append(out, "[rank3]: step 1")
    service = Served(config, tmp_path / "serve.log")
    try:
        append(out, "[rank3]: Traceback (most recent call last):", OOM)
        wait_for(lambda: "decision=would_run" in service.log.read_text(), 30)
        text = service.log.read_text()
        detection = next(line for line in text.splitlines() if "medic.events: detection" in line)
        assert " kind=crash tier=confirmed job=42 " in detection and "detector=crash" in detection
        action = next(line for line in text.splitlines() if "medic.events: action" in line)
        assert "decision=would_run action=requeue job=42 mode=monitor guard=monitor" in action

        report = medic("report", "--config", str(config), "--html", str(tmp_path / "r.html"))
        assert report.returncode == 0, report.stderr
        assert "the history is held by medic serve; asking http://127.0.0.1:" in report.stderr
        assert "medic report" in report.stdout and "incidents" in report.stdout
        assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
        direct = medic("report", "--url", f"http://127.0.0.1:{service.port}", "--top", "3")
        assert direct.returncode == 0 and "actions not run (monitor mode)" in direct.stdout
        bad = medic("report", "--url", f"http://127.0.0.1:{service.port}", "--watchdog-s", "-1")
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
    finally:
        assert service.stop() == 0


def test_json_log_lines_for_log_shippers(tmp_path: Path) -> None:
    config = configure(tmp_path, ROUTE.replace("[[rules", "[rules]\n\n[[rules"))
    config.write_text(config.read_text().replace("[service]\n", '[service]\nlog_format = "json"\n'))
    out = tmp_path / "jobs" / "job-9-n1.out"
    append(out, "[rank0]: step 1")
    service = Served(config, tmp_path / "serve.log")
    try:
        append(out, "[rank0]: Traceback (most recent call last):", OOM.replace("rank3", "rank0"))
        wait_for(lambda: '"decision": "would_run"' in service.log.read_text(), 30)
    finally:
        service.stop()
    records = [json.loads(line) for line in service.log.read_text().splitlines()]
    events = {r["message"]: r for r in records if r["logger"] == "medic.events"}
    assert events["detection"]["kind"] == "crash" and events["detection"]["job"] == "9"
    assert events["action"] | {"at": None, "detection": None, "reason": None} == {
        "time": events["action"]["time"],
        "level": "info",
        "logger": "medic.events",
        "message": "action",
        "decision": "would_run",
        "action": "requeue",
        "job": "9",
        "mode": "monitor",
        "guard": "monitor",
        "at": None,
        "detection": None,
        "reason": None,
    }


def test_junk_bytes_and_matched_files_are_counted_in_metrics(tmp_path: Path) -> None:
    config = configure(tmp_path)
    out = tmp_path / "jobs" / "job-5-n1.out"
    append(out, "[rank0]: step 1")
    with out.open("ab") as junk:
        junk.write(os.urandom(50_000))
    append(out, "", "[rank0]: step 2")
    service = Served(config, tmp_path / "serve.log")
    try:
        junk_lines = 'medic_source_events_total{event="junk_lines",source="files"}'
        wait_for(lambda: service.metric(junk_lines) > 100, 30)
        assert service.metric('medic_log_files_matched{source="files"}') == 1
        assert "skipped" in service.log.read_text()
    finally:
        service.stop()


def test_a_port_in_use_and_a_missing_log_path_are_one_line_each(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = configure(tmp_path)
        config.write_text(
            config.read_text()
            .replace('listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{port}"')
            .replace("job-%j-%N.out", "nowhere/job-%j.out")
        )
        result = medic("serve", "--config", str(config))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line or "error:" in line]
    listen = f"cannot listen on 127.0.0.1:{port} ([service] listen): Address already in use"
    assert errors == [f"medic: error: {listen}"]
    assert "Traceback" not in result.stderr
