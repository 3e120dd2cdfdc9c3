import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from click.testing import CliRunner

from medic.cli import main
from medic.recording import write_recording
from medic.simulate import simulate


def backtest(data: Path, out: Path, jobs: int) -> dict[str, Any]:
    result = CliRunner().invoke(
        main, ["backtest", str(data), "--out", str(out), "--json", "--jobs", str(jobs)]
    )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    for recording in report["recordings"]:
        recording.pop("elapsed_s")  # wall time, the one thing that differs between runs
    return report


def test_jobs_2_gives_what_jobs_1_gives_in_input_order(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for scenario in ("xid79_cascade", "oom"):
        recording = simulate(scenario, 3, duration_min=15.0, cluster_nodes=4, job_nodes=2, jobs=1)
        write_recording(data / recording.name, recording)

    sequential = backtest(data, tmp_path / "one", jobs=1)
    parallel = backtest(data, tmp_path / "two", jobs=2)

    assert parallel == sequential
    assert [r["name"] for r in parallel["recordings"]] == ["oom-s3", "xid79_cascade-s3"]
    assert sequential["overall"]["detections"] > 0
    for name in ("oom-s3", "xid79_cascade-s3"):
        for table in ("detections.parquet", "actions.parquet"):
            one, two = tmp_path / "one" / name / table, tmp_path / "two" / name / table
            assert two.read_bytes() == one.read_bytes()
        assert pq.read_table(tmp_path / "two" / name / "detections.parquet").num_rows > 0
