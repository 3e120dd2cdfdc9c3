import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from medic.cli import main
from medic.testing.builders import label, log, recording, write


def test_validate_reports_problems_one_per_line_and_exits_2(tmp_path: Path) -> None:
    good = write(tmp_path / "suite" / "good", recording(logs=[log(1, "x")]))
    bad = write(tmp_path / "suite" / "bad", recording(logs=[log(1, "x")]))
    (bad / "logs.parquet").write_text("not parquet")
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "suite")])
    assert result.exit_code == 2
    assert result.stdout.strip().splitlines() == [
        f"{bad / 'logs.parquet'}: not a parquet file (cannot read its footer)"
    ]
    assert CliRunner().invoke(main, ["validate", str(good)]).exit_code == 0


def test_validate_of_a_path_without_recordings_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("medic: error: no recordings found")
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_backtest_writes_spec_detections_and_prints_json(tmp_path: Path) -> None:
    rec = recording(logs=[log(1, "x")], labels=[label("i", "crash", 1)])
    write(tmp_path / "data" / "r1", rec)
    result = CliRunner().invoke(
        main, ["backtest", str(tmp_path / "data"), "--out", str(tmp_path / "out"), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["overall"]["labels"] == 1
    assert json.loads(result.output) == report  # no progress lines beside it on stderr
    assert [r["name"] for r in report["recordings"]] == ["r1"]
    written = pq.read_schema(tmp_path / "out" / "r1" / "detections.parquet")
    assert written.names == [
        "detected_at",
        "job_id",
        "kind",
        "culprits",
        "ranks",
        "score",
        "detector",
        "summary",
        "raw_score",
        "tier",
    ]
    # The spec's file holds what acts; suspects lie beside it, in the same columns.
    suspects = pq.read_table(tmp_path / "out" / "r1" / "suspects.parquet")
    assert suspects.schema.names == written.names
    tiers = pq.read_table(tmp_path / "out" / "r1" / "detections.parquet").column("tier")
    assert "suspect" not in tiers.to_pylist()


def test_backtest_table_and_bad_config(tmp_path: Path) -> None:
    write(tmp_path / "r1", recording(logs=[log(1, "x")]))
    table = CliRunner().invoke(main, ["backtest", str(tmp_path / "r1")])
    assert table.exit_code == 0 and "overall" in table.stdout
    config = tmp_path / "medic.toml"
    config.write_text("[detectors.nope]\n")
    result = CliRunner().invoke(main, ["backtest", str(tmp_path / "r1"), "--config", str(config)])
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "medic: error: unknown detector 'nope' (known: "
        + result.stderr.split("(known: ")[1].strip()
    )


def test_backtest_with_a_delivery_delay_replays_every_row_and_rejects_a_bad_one(
    tmp_path: Path,
) -> None:
    rows = [log(t, "x") for t in range(1, 9)]
    write(tmp_path / "r1", recording(duration_s=10, logs=rows))
    args = ["backtest", str(tmp_path / "r1"), "--json", "--delay", "logs=0:5"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["recordings"][0]["rows"] == 8
    bad = CliRunner().invoke(main, ["backtest", str(tmp_path / "r1"), "--delay", "logs=later"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("medic: error: delay 'logs=later': ")
