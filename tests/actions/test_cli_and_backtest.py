import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl
import pyarrow.parquet as pq
from click.testing import CliRunner

from medic import schema
from medic.actions.stage import ActionStage
from medic.cli import main
from medic.detectors.base import Detection
from medic.ingest.base import Batch
from medic.ingest.replay import ReplaySource
from medic.pipeline import Pipeline
from medic.testing.builders import at, log, recording, write


@dataclass(frozen=True)
class XidConfig:
    pass


class XidLines:
    """A stand-in detector: a log line with "Xid 79" blames its node."""

    name: ClassVar[str] = "xid-lines"
    streams: ClassVar[frozenset[str]] = frozenset({"logs"})
    Config = XidConfig

    def __init__(self, config: XidConfig | None = None) -> None:
        self.config = config or XidConfig()

    def update(self, batch: Batch) -> list[Detection]:
        hits = batch.frame.filter(pl.col("message").str.contains("Xid 79"))
        return [
            Detection(job, "gpu_fault", (node,), score=0.95, detector=self.name, summary=msg)
            for job, node, msg in hits.select("job_id", "node", "message").iter_rows()
        ]

    def advance(self, watermark: int) -> list[Detection]:
        return []

    def state_size(self) -> int:
        return 0


def test_the_actions_stage_rides_the_pipeline_in_event_time() -> None:
    rec = recording(
        duration_s=30,
        logs=[
            log(1, "step 1", node="n1"),
            log(5, "NVRM: Xid 79, GPU has fallen off the bus", node="n2", job_id="7"),
            log(20, "NVRM: Xid 79, GPU has fallen off the bus", node="n2", job_id="8"),
        ],
        scheduler=[
            {"time": at(0), "kind": "node", "node": f"n{i}", "state": "IDLE"} for i in range(1, 21)
        ],
    )
    rules = {"mode": "enforce", "guards": {"node_cooldown_s": 60}}
    stage = ActionStage.for_recording(rec, {"rules": rules})
    Pipeline([XidLines()], responders=[stage]).run(ReplaySource(rec))
    rows = stage.actions_table().to_pylist()
    assert [(r["job_id"], r["action"], r["status"], r["guard"]) for r in rows] == [
        ("7", "drain", "recorded", None),
        ("7", "requeue", "recorded", None),
        ("8", "drain", "suppressed", "node_cooldown"),
        ("8", "requeue", "recorded", None),
    ]
    assert rows[0]["time"].timestamp() == at(5) / 1e6
    assert "node n2 was acted on 15 s ago" in rows[2]["reason"]


def test_backtest_writes_actions_next_to_detections(tmp_path: Path) -> None:
    write(tmp_path / "data" / "r1", recording(logs=[log(1, "x")]))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["backtest", str(tmp_path / "data"), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert pq.read_schema(out / "r1" / "actions.parquet") == schema.ACTIONS
    report = json.loads(result.stdout)
    assert report["actions"] == {"by_action": {}, "suppressed_by_guard": {}}


def test_backtest_with_bad_rules_is_a_one_line_error(tmp_path: Path) -> None:
    write(tmp_path / "r1", recording(logs=[log(1, "x")]))
    config = tmp_path / "medic.toml"
    config.write_text('[rules]\nmode = "act"\n')
    result = CliRunner().invoke(main, ["backtest", str(tmp_path / "r1"), "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr == (
        "medic: error: 'rules.mode' must be one of 'monitor', 'enforce', got 'act'\n"
    )


def test_rules_test_shows_routes_decisions_and_guards() -> None:
    result = CliRunner().invoke(
        main, ["rules", "test", "--kind", "gpu_fault", "--job", "42", "--culprit", "n3"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "detection: gpu_fault of job 42, on n3, score 1"
    assert "mode: monitor (decide and record, touch nothing)" in lines
    assert "  matched  hardware-fault: matched gpu_fault of job 42, on n3, score 1" in lines
    assert "  skipped  straggler-node: route hardware-fault decided" in lines
    assert lines[-2:] == [
        "  suppressed by guard monitor: route hardware-fault (gpu_fault of job 42, on n3, "
        "score 1): drain node n3: monitor mode: enforce mode would run it",
        "  suppressed by guard monitor: route hardware-fault (gpu_fault of job 42, on n3, "
        "score 1): requeue job 42: monitor mode: enforce mode would run it",
    ]


def test_rules_test_with_json_and_a_config(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    config.write_text(
        "[rules]\nmode = 'enforce'\n[rules.guards]\npartitions = ['gpu']\n"
        "[[rules.routes]]\nname = 'hangs'\nkinds = ['hang']\nactions = ['requeue']\n"
    )
    detection = {"kind": "hang", "job_id": "7", "score": 0.8, "partition": "cpu"}
    result = CliRunner().invoke(
        main, ["rules", "test", "--config", str(config), "--json", json.dumps(detection)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "  suppressed by guard partition: route hangs (hang of job 7, no culprit, score 0.8): "
        "requeue job 7: partition cpu is not in the allow-list (gpu)"
    )
    detection["partition"] = "gpu"
    stdin = CliRunner().invoke(
        main, ["rules", "test", "--config", str(config), "--json", "-"], input=json.dumps(detection)
    )
    assert stdin.stdout.splitlines()[-1].startswith("  would run: route hangs")


def test_rules_test_applies_the_nvrx_guard_serve_applies(tmp_path: Path) -> None:
    cycles = tmp_path / "cycles" / "4250_1"
    cycles.mkdir(parents=True)
    for cycle, start in ((0, "2026-03-01T10:00:00Z"), (1, "2026-03-01T10:05:00Z")):
        body = {"job_id": "4250", "cycle_number": cycle, "cycle_start_time": start}
        (cycles / f"cycle_info.4250.0.{cycle}").write_text(json.dumps(body))
    config = tmp_path / "medic.toml"
    config.write_text(
        "[rules]\nmode = 'enforce'\n"
        f"[rules.nvrx]\ncycle_info_dir = '{tmp_path / 'cycles'}'\n"
        "[[rules.routes]]\nname = 'crashes'\nkinds = ['crash']\nactions = ['requeue']\n"
    )

    def last_line(*args: str) -> str:
        result = CliRunner().invoke(main, ["rules", "test", "--config", str(config), *args])
        assert result.exit_code == 0, result.output
        return str(result.stdout.splitlines()[-1])

    stopped = {"kind": "crash", "job_id": "77", "exit_code": 93}
    assert last_line("--json", json.dumps(stopped)).endswith(
        "requeue job 77: NVRx decided not to restart job 77 (ft_launcher exited 93); "
        "a requeue would repeat it"
    )
    assert last_line("--kind", "crash", "--job", "77", "--exit-code", "1").startswith(
        "  would run:"
    )
    restarting = (
        "--json",
        json.dumps({"kind": "crash", "job_id": "4250_1", "detected_at": "2026-03-01T10:06:00Z"}),
    )
    assert last_line(*restarting).endswith(
        "requeue job 4250_1: NVRx is restarting job 4250_1 in place"
    )


def test_rules_test_input_errors_are_one_line() -> None:
    for args, message in [
        (["--json", '{"kind": "oops"}'], "medic: error: detection: unknown detection kind 'oops'"),
        (["--json", '{"kind": "hang", "x": 1}'], "medic: error: detection JSON: unknown key 'x'"),
        (["--json", "{"], "medic: error: detection JSON: Expecting property name"),
        ([], "medic: error: give the detection with --kind"),
    ]:
        result = CliRunner().invoke(main, ["rules", "test", *args])
        assert result.exit_code == 2
        assert result.stderr.startswith(message)
        assert result.stderr.count("\n") == 1
