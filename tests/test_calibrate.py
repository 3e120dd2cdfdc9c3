"""``medic calibrate``: a calibration fitted on a labelled backtest, its held-out check and
provenance, the file the config then names, and one-line errors for what it cannot use."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from medic.backtest import read_backtest
from medic.calibration import Calibration, ScoreMap, read_calibration
from medic.cli import main
from medic.testing.builders import detection, label, recording, table, write

ROOT = Path(__file__).parents[1]


def backtest_dir(tmp_path: Path) -> tuple[Path, Path]:
    """Four labelled recordings and a backtest --out directory of their detections: each holds
    a real hang (raw score 0.9) and a false one (0.55) in another job."""
    suite, out = tmp_path / "suite", tmp_path / "out"
    for seed in range(1, 5):
        name = f"hangs-p{seed}"
        write(suite / name, recording(3600, labels=[label("h", "hang", 100.0)], name=name))
        rows = [
            detection(150, "hang") | {"score": 0.9},
            detection(2000, "hang", job_id="200") | {"score": 0.55},
        ]
        (out / name).mkdir(parents=True)
        pq.write_table(table("detections", rows), out / name / "detections.parquet")
    return suite, out


def test_it_fits_on_a_backtest_checks_on_held_out_recordings_and_writes_the_file(
    tmp_path: Path,
) -> None:
    suite, out = backtest_dir(tmp_path)
    target = tmp_path / "calibration.toml"
    args = ["calibrate", str(suite), "--detections", str(out), "--holdout", "*-p4"]
    result = CliRunner().invoke(main, [*args, "--out", str(target)])
    assert result.exit_code == 0, result.output
    assert "Held-out check" in result.stdout and f"written to {target}" in result.stdout
    calibration = read_calibration(target)
    assert calibration.calibrated("hang", 0.9) > 0.7 > 0.3 > calibration.calibrated("hang", 0.55)
    provenance = calibration.provenance
    assert provenance["recordings"] == 4 and provenance["detections"] == out.name
    assert provenance["suites"] == [suite.name] and provenance["fitted_at"]
    check = provenance["check"]
    assert (check["fitted_recordings"], check["held_out_recordings"]) == (3, 1)
    assert check["kinds"]["hang"]["detections"] == 2
    assert check["kinds"]["hang"]["brier"] < check["kinds"]["hang"]["brier_raw"]
    config = tmp_path / "medic.toml"
    config.write_text(f'[pipeline]\ncalibration = "{target}"\n')
    assert CliRunner().invoke(main, ["config", "check", "--quiet", str(config)]).exit_code == 0


def test_it_reads_several_backtests_each_recording_in_at_least_one(tmp_path: Path) -> None:
    suite, out = backtest_dir(tmp_path)
    near = tmp_path / "near"
    (near / "hangs-p1").mkdir(parents=True)
    rows = [detection(3000, "hang", job_id="300") | {"score": 0.5}]
    pq.write_table(table("detections", rows), near / "hangs-p1" / "detections.parquet")
    target = tmp_path / "calibration.toml"
    args = ["calibrate", str(suite), "--detections", str(out), "--detections", str(near)]
    result = CliRunner().invoke(main, [*args, "--out", str(target)])
    assert result.exit_code == 0, result.output
    hang = read_calibration(target).maps["hang"]
    assert (hang.true, hang.false) == (4, 5)  # the near-miss backtest's false one too
    assert read_calibration(target).provenance["detections"] == "out, near"
    write(suite / "hangs-p9", recording(60, labels=[], name="hangs-p9"))
    result = CliRunner().invoke(main, [*args, "--out", str(target)])
    assert result.exit_code != 0
    assert "hangs-p9: no detections of it in any --detections directory" in result.stderr


def test_it_replays_recordings_when_given_no_backtest(tmp_path: Path) -> None:
    target = tmp_path / "c.toml"
    rec = ROOT / "datasets" / "oom-s1"
    result = CliRunner().invoke(main, ["calibrate", str(rec), "--out", str(target)])
    assert result.exit_code == 0, result.output
    calibration = read_calibration(target)
    assert calibration.provenance["detections"] == "replayed"
    assert calibration.maps and all(m.true > 0 for m in calibration.maps.values())


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        ("no_labels", "no labels.parquet: a calibration needs labelled recordings"),
        ("no_detections", "detections.parquet: missing (no detections of hangs-p1"),
        ("bad_holdout", "the held-out check needs detections on both sides of the split"),
        ("same_name", "named like"),
    ],
)
def test_what_it_cannot_use_is_a_one_line_error(tmp_path: Path, setup: str, problem: str) -> None:
    suite, out = backtest_dir(tmp_path)
    args = ["calibrate", str(suite), "--detections", str(out), "--out", str(tmp_path / "c.toml")]
    if setup == "no_labels":
        (suite / "hangs-p2" / "labels.parquet").unlink()
    elif setup == "no_detections":
        (out / "hangs-p1" / "detections.parquet").unlink()
    elif setup == "same_name":  # another suite's hangs-p1: its detections are not these
        other = tmp_path / "other" / "hangs-p1"
        write(other, recording(3600, labels=[], name="hangs-p1"))
        args.insert(2, str(other.parent))
    else:
        args += ["--holdout", "nothing-matches"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr.startswith("medic: error: ") and problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c.toml").exists()


def test_a_config_naming_a_malformed_calibration_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('format = "medic-calibration/1"\n[kinds.hang]\nmethod = "isotonic"\n')
    config = tmp_path / "medic.toml"
    config.write_text(f'[pipeline]\ncalibration = "{bad}"\n')
    result = CliRunner().invoke(main, ["config", "check", str(config)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"medic: error: {bad}: kinds.hang.raw must be a non-empty list of numbers"
    )


def test_a_backtest_read_back_keeps_raw_scores_and_can_be_rescored(tmp_path: Path) -> None:
    suite, out = backtest_dir(tmp_path)  # files written before calibration: no raw_score
    paths = sorted(suite.iterdir())
    cached = read_backtest(paths, out)
    first = cached.results[0].detections
    assert first.column("raw_score").to_pylist() == first.column("score").to_pylist()
    assert cached.by_kind()["hang"]["precision"] == 0.5
    halves = Calibration({"hang": ScoreMap("isotonic", (0.5, 1.0), (0.1, 0.9))})
    rescored = read_backtest(paths, out, calibration=halves).results[0].detections
    assert rescored.column("score").to_pylist() == pytest.approx([0.74, 0.18])
    assert rescored.column("raw_score").to_pylist() == [0.9, 0.55]
