"""`medic doctor` against the real local Slurm and local HTTP servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.testing.victorialogs import VictoriaLogsServer
from tests.conftest import SlurmCluster

EXPOSITION = (Path(__file__).parent / "ingest" / "data" / "h200_agent_busy.prom").read_bytes()


class Exporter(BaseHTTPRequestHandler):
    """/metrics answers a real NVML agent's exposition; /garbage answers something else."""

    requests = 0
    """Requests answered (receivers must be reached without one)."""

    def do_GET(self) -> None:
        Exporter.requests += 1
        body = EXPOSITION if self.path == "/metrics" else b"<html>not metrics</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def exporter() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def doctor(config: Path) -> tuple[int, dict[str, list[str]]]:
    result = CliRunner().invoke(main, ["doctor", "--config", str(config)])
    assert "Traceback" not in result.output
    lines: dict[str, list[str]] = {}
    for line in result.stdout.splitlines()[:-1]:
        status, _, rest = line.partition("  ")
        name, _, detail = rest.lstrip().partition(": ")
        lines.setdefault(name, []).append(f"{status.strip()} {detail}")
    return result.exit_code, lines


def test_every_dependency_answers(tmp_path: Path, slurm: SlurmCluster, exporter: str) -> None:
    job = slurm.sbatch(script="sleep 30")
    config = tmp_path / "medic.toml"
    with VictoriaLogsServer() as vl:
        vl.ingest([{"_time": str(time.time_ns()), "_msg": "step 1", "host": "n1"}])
        vl.flush()  # searchable at once, as /internal/force_flush makes it
        config.write_text(
            f"""
[sources.victorialogs]
url = "{vl.url}"
[sources.prometheus]
targets = ["{exporter}/metrics"]
[sources.slurm]
[history]
path = "{tmp_path / "history.duckdb"}"
[service]
state_dir = "{tmp_path / "state"}"
listen = "127.0.0.1:0"
"""
        )
        code, lines = doctor(config)
    slurm.run("scancel", job)
    assert code == 0, lines
    assert lines["config"] == ["ok valid; rules in monitor mode"]
    assert lines["logs (victorialogs)"] == [
        f"ok {vl.url} reachable; 1 row(s) in the last hour for '*'"
    ]
    assert lines["telemetry"] == [f"ok {exporter}/metrics: 1 GPU(s)"]
    state = lines["slurm state"][0]
    assert state.startswith("ok squeue --json and sinfo --json answered: ")
    assert state.endswith(f" job(s), {len(slurm.nodes)} node(s)")
    assert lines["slurm actions"] == ["ok scontrol reaches slurmctld; root may drain and requeue"]
    assert lines["history"] == [f"ok {tmp_path / 'history.duckdb'} will be created"]
    assert lines["listen"] == ["ok 127.0.0.1:0 free for /metrics, /healthz and /report"]


def test_what_is_wrong_is_one_line_each_and_fails(tmp_path: Path, exporter: str) -> None:
    history = tmp_path / "history.duckdb"
    history.write_text("not a database")
    config = tmp_path / "medic.toml"
    config.write_text(
        f"""
[sources.files]
paths = ["{tmp_path}/nowhere/job-%j.out"]
[sources.prometheus]
targets = ["{exporter}/garbage", "http://127.0.0.1:1/metrics"]
[sources.slurm]
squeue = ["no-such-squeue", "--json"]
[history]
path = "{history}"
"""
    )
    code, lines = doctor(config)
    assert code == 1
    assert lines["logs (files)"] == [
        f"warn no file matches {tmp_path}/nowhere/job-%j.out yet (a job's output file appears "
        "when it starts; check [sources.files] paths)"
    ]
    assert lines["telemetry"][0] == f"fail {exporter}/garbage answered without DCGM_FI_DEV_GPU_UTIL"
    assert lines["telemetry"][1].startswith("fail http://127.0.0.1:1/metrics unreachable")
    assert lines["slurm state"][0].startswith(
        "fail no-such-squeue --json and sinfo --json: slurm: cannot run no-such-squeue"
    )
    assert lines["history"][0].startswith(f"fail history {history}: ")


def test_an_empty_query_warns_and_a_bad_config_stops_at_once(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    with VictoriaLogsServer() as vl:
        config.write_text(f'[sources.victorialogs]\nurl = "{vl.url}"\nquery = "job_id:*"\n')
        _, lines = doctor(config)
    assert lines["logs (victorialogs)"] == [
        f"warn {vl.url} reachable, but 0 row(s) in the last hour for 'job_id:*'"
    ]
    config.write_text("[detectors.hang]\nmin_silence_s = -5\n")
    code, lines = doctor(config)
    assert code == 1
    assert lines == {"config": ["fail 'detectors.hang.min_silence_s' must be > 0, got -5"]}


def test_a_state_dir_whose_parent_is_missing_is_not_called_writable(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    for state, expected in [
        (tmp_path, f"ok {tmp_path} writable (cursors, action journal)"),
        (tmp_path / "state", f"ok {tmp_path / 'state'} will be created (cursors, action journal)"),
        (
            tmp_path / "typo" / "state",
            f"warn {tmp_path / 'typo' / 'state'} does not exist, nor does its parent "
            f"{tmp_path / 'typo'}: serve will create them under {tmp_path} (a typo, or a volume "
            "not mounted?) (cursors, action journal)",
        ),
        (
            config / "state",
            f"fail cannot create {config / 'state'}: {config} is not writable "
            "(cursors, action journal)",
        ),
    ]:
        config.write_text(f'[service]\nstate_dir = "{state}"\n')
        _, lines = doctor(config)
        assert lines["state dir"] == [expected]


def test_every_receiver_is_tried_without_posting(tmp_path: Path, exporter: str) -> None:
    Exporter.requests = 0
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    config = tmp_path / "medic.toml"
    config.write_text(
        f"""
[[rules.receivers]]
name = "hooks"
url = "{exporter}/hook"
[[rules.receivers]]
name = "gone"
url = "http://127.0.0.1:{dead_port}/hook"
[[rules.receivers]]
name = "team"
kind = "slack"
url_env = "MEDIC_TEST_UNSET_SLACK_URL"
"""
    )
    code, lines = doctor(config)
    assert code == 1
    assert lines["receiver hooks"] == [
        f"ok webhook at {exporter} reachable; secrets read (nothing posted)"
    ]
    assert lines["receiver gone"][0].startswith(
        f"fail webhook at http://127.0.0.1:{dead_port} unreachable"
    )
    assert lines["receiver team"] == [
        "fail receiver 'team': environment variable MEDIC_TEST_UNSET_SLACK_URL (url) is unset"
    ]
    assert Exporter.requests == 0
