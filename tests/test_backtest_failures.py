"""A damaged recording is skipped with an error, the others still scored; labels stay inside."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from medic.cli import main
from medic.testing.builders import label, log, recording, write


def test_a_corrupt_recording_is_skipped_and_the_run_exits_non_zero(tmp_path: Path) -> None:
    rec = recording(logs=[log(1, "x")], labels=[label("i", "crash", 1)])
    write(tmp_path / "suite" / "a-good", rec)
    bad = write(tmp_path / "suite" / "b-bad", rec)
    (bad / "gpu.parquet").write_bytes(b"PAR1 not really parquet")
    write(tmp_path / "suite" / "c-good", rec)
    result = CliRunner().invoke(
        main, ["backtest", str(tmp_path / "suite"), "--json", "--jobs", "1"]
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [r["name"] for r in report["recordings"]] == ["a-good", "c-good"]
    assert report["failed"] == [
        {
            "path": str(bad),
            "error": f"{bad / 'gpu.parquet'}: not a parquet file (cannot read its footer)",
        }
    ]
    assert report["overall"]["labels"] == 2
    assert result.stderr.splitlines()[-1] == (
        f"medic: error: 1 of 3 recording(s) could not be read and are left out of the scores: {bad}"
    )
    assert "Traceback" not in result.output


def test_label_refuses_an_onset_outside_the_recording(tmp_path: Path) -> None:
    path = write(tmp_path / "r", recording(duration_s=60, logs=[log(1, "x")]))
    args = ["label", str(path), "--job", "1", "--kind", "crash"]
    outside = CliRunner().invoke(main, [*args, "--onset", "2026-03-01T09:59:00Z"])
    assert outside.exit_code == 2
    assert outside.stderr == (
        "medic: error: onset 2026-03-01T09:59:00Z lies outside the recording "
        "(2026-03-01T10:00:00Z to 2026-03-01T10:01:00Z)\n"
    )
    inside = CliRunner().invoke(main, [*args, "--onset", "2026-03-01T10:00:30Z"])
    assert inside.exit_code == 0, inside.output


def test_a_backtests_history_measures_time_to_detect_from_the_labels_onset() -> None:
    """One definition of onset: the report of a backtest's history gives each detected label the
    latency the backtest's table gives it."""
    from medic.backtest import label_onsets, run_backtest
    from medic.history.store import DuckDBStore
    from tests.conftest import ROOT

    with DuckDBStore() as store:
        report = run_backtest([ROOT / "datasets" / "oom-s1"], {}, history=store)
        scored = report.results[0].score
        onsets = label_onsets(scored)
        assert onsets
        seconds = {
            row["incident_id"]: row["seconds"]
            for row in store.sql("SELECT incident_id, seconds FROM v_time_to_detect").to_pylist()
        }
    detected = [o for o in scored.outcomes if o.detected]
    assert sorted(seconds[i] for i in onsets) == sorted(o.latency_s for o in detected)
