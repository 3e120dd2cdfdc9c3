"""Backtests, calibrations and sweeps on a local two-node Ray cluster give what a local run
gives."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from medic.backtest import local_runner, run_backtest
from medic.cli import main
from medic.recording import write_recording
from medic.simulate import simulate

pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

from medic.ray_cluster import RayRunner


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("ray-data")
    for scenario in ("xid79_cascade", "oom"):
        recording = simulate(scenario, 3, duration_min=10.0, cluster_nodes=4, job_nodes=2, jobs=1)
        write_recording(data / recording.name, recording)
    return data


def backtest(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["backtest", *args, "--json"])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    for recording in report["recordings"]:
        recording.pop("elapsed_s")  # wall time, the one thing that differs between runs
    return report


def test_a_backtest_on_ray_equals_the_local_one(
    ray_cluster: str, recordings: Path, tmp_path: Path
) -> None:
    local = backtest(str(recordings), "--jobs", "1", "--out", str(tmp_path / "local"))
    on_ray = backtest(str(recordings), "--ray", ray_cluster, "--out", str(tmp_path / "ray"))
    assert on_ray == local
    assert local["overall"]["detections"] > 0
    for name in ("oom-s3", "xid79_cascade-s3"):
        for table in ("detections.parquet", "actions.parquet"):
            one, two = tmp_path / "local" / name / table, tmp_path / "ray" / name / table
            assert two.read_bytes() == one.read_bytes()


def test_shipped_recordings_replay_as_those_read_in_place(
    ray_cluster: str, recordings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = sorted(recordings.iterdir())
    # Given relative paths, as a user types them: a worker must not resolve them in its own
    # working directory.
    monkeypatch.chdir(recordings)
    relative = [Path(p.name) for p in paths]
    local = run_backtest(relative, runner=local_runner(1))
    with RayRunner(ray_cluster, data="auto") as runner:
        in_place = run_backtest(relative, runner=runner)
        assert runner.shipped == []  # both nodes see this machine's files
    with RayRunner(ray_cluster, data="ship") as runner:
        shipped = run_backtest(relative, runner=runner)
        assert runner.shipped == relative
    for report in (in_place, shipped):
        assert report.to_json()["overall"] == local.to_json()["overall"]
        assert [r.path for r in report.results] == relative
        for mine, theirs in zip(report.results, local.results, strict=True):
            assert mine.detections.equals(theirs.detections)
            assert mine.actions.equals(theirs.actions)


def test_an_unreadable_recording_is_a_failure_as_in_a_local_run(
    ray_cluster: str, recordings: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "meta.json").write_text("{not json")
    paths = [*sorted(recordings.iterdir()), broken]
    local = run_backtest(paths)
    with RayRunner(ray_cluster, data="ship") as runner:
        shipped = run_backtest(paths, runner=runner)
    assert [f.error for f in shipped.failures] == [f.error for f in local.failures]
    assert len(shipped.results) == 2 and shipped.failures[0].path == broken


def test_a_calibration_on_ray_is_the_local_one(
    ray_cluster: str, recordings: Path, tmp_path: Path
) -> None:
    def calibrate(out: Path, *args: str) -> bytes:
        result = CliRunner().invoke(
            main, ["calibrate", str(recordings), "--out", str(out), "--method", "sigmoid", *args]
        )
        assert result.exit_code == 0, result.output
        return re.sub(rb"fitted_at = .*", b"", out.read_bytes())  # the one line that differs

    assert calibrate(tmp_path / "ray.toml", "--ray", ray_cluster) == calibrate(
        tmp_path / "local.toml", "--jobs", "1"
    )


def test_a_sweep_on_ray_gives_the_local_table(
    ray_cluster: str, recordings: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.toml"
    # Two points that score apart on these recordings (crash.confirm_s would not: the same
    # table for both), so a Ray run that replayed a point with another's settings shows.
    spec.write_text("[detectors.crash]\nhold_s = [3.0, 30.0]\n")

    def sweep(name: str, *args: str) -> tuple[pl.DataFrame, str]:
        table, chosen = tmp_path / f"{name}.parquet", tmp_path / f"{name}.toml"
        outputs = ["--out", str(table), "--write-config", str(chosen)]
        result = CliRunner().invoke(main, ["sweep", str(spec), str(recordings), *outputs, *args])
        assert result.exit_code == 0, result.output
        return pl.read_parquet(table), chosen.read_text()

    local, local_choice = sweep("local", "--jobs", "1")
    on_ray, ray_choice = sweep("ray", "--ray", ray_cluster)
    assert on_ray.equals(local) and ray_choice == local_choice
    assert local.height == 2 and local.get_column("overall_precision").is_not_null().all()
    latency = local.get_column("latency_p50_s")
    assert latency[0] < latency[1]  # the points differ, so the comparison can tell them apart
