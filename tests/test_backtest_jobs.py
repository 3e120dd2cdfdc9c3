import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from medic.backtest import backtest_path, in_workers
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
        recording = simulate(scenario, 3, duration_min=8.0, cluster_nodes=4, job_nodes=2, jobs=1)
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


class DyingPool(ThreadPoolExecutor):
    """A pool whose worker dies after the first recording, as one killed for memory would."""

    def map(self, fn: Any, *iterables: Any, **_: Any) -> Iterator[Any]:  # type: ignore[override]
        first = next(zip(*iterables, strict=False))  # the settings come as an endless repeat()
        yield fn(*first)
        raise BrokenProcessPool("a child process terminated abruptly")


def test_a_dying_worker_loses_no_result(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    paths = []
    for scenario in ("xid79_cascade", "oom", "segfault"):
        recording = simulate(scenario, 3, duration_min=8.0, cluster_nodes=4, job_nodes=2, jobs=1)
        paths.append(write_recording(tmp_path / recording.name, recording))
    results = list(in_workers(paths, None, DyingPool))
    assert [r.name for r in results] == [p.name for p in paths]
    expected = [backtest_path(p).detections for p in paths]
    assert [r.detections.equals(e) for r, e in zip(results, expected, strict=True)] == [True] * 3
    assert all(e.num_rows > 0 for e in expected)  # not vacuous: each recording's fault is found
    assert "replaying the other 2 recording(s) here" in caplog.text
