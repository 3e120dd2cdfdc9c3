"""Sweep specs, the points they give, the scored table, its frontier and the chosen config."""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from medic import schema
from medic.backtest import RecordingFailure, RecordingResult, Task
from medic.cli import main
from medic.config import ConfigError
from medic.history.store import DuckDBStore
from medic.recording import RecordingError
from medic.scoring import Score
from medic.settings import load_settings
from medic.sweep import (
    choose,
    frontier,
    history_rows,
    load_spec,
    parse_spec,
    point_settings,
    points,
    run_sweep,
    with_frontier,
    write_config,
)


def test_a_grid_is_every_combination_over_detectors() -> None:
    spec = parse_spec(
        {"detectors": {"hang": {"min_silence_s": [45, 90]}, "crash": {"confirm_s": [30, 60]}}}
    )
    assert spec.points_count() == 4
    assert points(spec) == [
        {"hang": {"min_silence_s": h}, "crash": {"confirm_s": c}}
        for h in (45, 90)
        for c in (30, 60)
    ]


def test_a_random_search_draws_the_same_points_from_the_same_seed() -> None:
    raw = {
        "search": "random",
        "samples": 50,
        "seed": 7,
        "detectors": {
            "hang": {
                "min_silence_s": {"min": 30.0, "max": 120.0},
                "gap_window": {"min": 64, "max": 512, "log": True},
                "gap_factor": [2.0, 3.0],
            }
        },
    }
    drawn = points(parse_spec(raw))
    assert drawn == points(parse_spec(raw)) and len(drawn) == 50
    silences = [p["hang"]["min_silence_s"] for p in drawn]
    windows = [p["hang"]["gap_window"] for p in drawn]
    assert all(30.0 <= s <= 120.0 for s in silences) and len(set(silences)) == 50
    assert all(isinstance(w, int) and 64 <= w <= 512 for w in windows)
    assert {p["hang"]["gap_factor"] for p in drawn} == {2.0, 3.0}
    assert drawn != points(parse_spec({**raw, "seed": 8}))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "no \\[detectors.<name>\\] table"),
        ({"detectors": {"hnag": {"x": [1]}}}, "unknown detector 'hnag'"),
        ({"detectors": {"hang": {"min_silence_s": {"min": 1, "max": 2}}}}, "must be a list"),
        ({"detectors": {"hang": {"min_silence_s": []}}}, "no values"),
        ({"search": "bayes", "detectors": {"hang": {"min_silence_s": [1]}}}, "search must be"),
        ({"kind": "hung", "detectors": {"hang": {"min_silence_s": [1]}}}, "unknown kind"),
        ({"detectors": {"hang": {"min_silence_s": ["soon"]}}}, "min_silence_s"),
        ({"detectors": {"hang": {"no_such_key": [1]}}}, "no_such_key"),
        ({"sample": 3, "detectors": {"hang": {"min_silence_s": [1]}}}, "unknown key 'sample'"),
    ],
)
def test_a_wrong_spec_is_one_line_naming_the_problem(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        parse_spec(raw, "spec.toml")
    assert str(error.value).startswith("spec.toml: ") and "\n" not in str(error.value)


def test_a_spec_file_that_is_not_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text("search = \n")
    with pytest.raises(ConfigError, match="s.toml: invalid TOML"):
        load_spec(tmp_path / "s.toml")


def result(
    name: str, detected: int, labels: int, detections: int, latency: float
) -> RecordingResult:
    score = Score(
        labels=labels,
        detected=detected,
        detections=detections,
        matched=detected,
        latencies_s=[latency] * detected,
    )
    empty = schema.empty(schema.DETECTIONS)
    return RecordingResult(name, Path(name), empty, score, 0.0, 0, schema.empty(schema.ACTIONS))


def fake_runner(tasks: list[Task]) -> Iterator[RecordingResult | RecordingFailure]:
    """Scores as a function of the point: a longer silence detects less, later, and falsely
    never; a shorter one detects all, sooner, with one false positive per recording."""
    for path, settings in tasks:
        assert settings is not None
        silence = settings["detectors"]["hang"]["min_silence_s"]
        if silence < 60:
            yield result(path.name, 1, 1, 2, silence)
        elif silence < 120:
            yield result(path.name, 1, 1, 1, silence)
        else:
            yield result(path.name, 0, 1, 0, 0.0)


def test_every_point_is_scored_over_every_recording_and_the_frontier_marked() -> None:
    spec = parse_spec({"detectors": {"hang": {"min_silence_s": [30, 90, 100, 300]}}})
    table = run_sweep(spec, [Path("a"), Path("b")], fake_runner, base={"detectors": {}})
    assert table.get_column("hang.min_silence_s").to_list() == [30, 90, 100, 300]
    assert table.get_column("recall").to_list() == [1.0, 1.0, 1.0, 0.0]
    assert table.get_column("overall_precision").to_list() == [0.5, 1.0, 1.0, None]
    assert table.get_column("overall_false_positives").to_list() == [2, 0, 0, 0]
    # 30 s finds all soonest but falsely; 90 s finds all, later, truly. 100 s is as precise
    # and complete as 90 s but later, and 300 s (nothing found, so nothing false) finds less.
    assert table.get_column("pareto").to_list() == [True, True, False, False]
    assert frontier(table).get_column("point").to_list() == [1, 0]
    chosen = choose(table, spec)
    assert point_settings(chosen, spec) == {"hang": {"min_silence_s": 90}}
    strict = parse_spec({"min_precision": 0.4, "detectors": {"hang": {"min_silence_s": [30]}}})
    assert choose(table.head(1), strict)["point"] == 0
    with pytest.raises(ValueError, match="no point reaches overall precision 1.0"):
        choose(table.head(1), spec)


def test_a_recording_that_cannot_replay_stops_the_sweep() -> None:
    def failing(tasks: list[Task]) -> Iterator[RecordingResult | RecordingFailure]:
        yield RecordingFailure(tasks[0][0], "a: broken meta.json")

    spec = parse_spec({"detectors": {"hang": {"min_silence_s": [30]}}})
    with pytest.raises(RecordingError, match="a: broken meta.json \\(a sweep needs every"):
        run_sweep(spec, [Path("a")], failing)


def test_the_frontier_keeps_ties() -> None:
    table = pl.DataFrame(
        {"overall_precision": [1.0, 1.0], "recall": [0.5, 0.5], "latency_p50_s": [10.0, 10.0]}
    )
    assert with_frontier(table).get_column("pareto").to_list() == [True, True]


def test_the_chosen_point_is_a_config_file_medic_accepts(tmp_path: Path) -> None:
    file = write_config(tmp_path / "chosen.toml", {"hang": {"min_silence_s": 90, "gap_window": 64}})
    assert tomllib.loads(file.read_text()) == {
        "detectors": {"hang": {"min_silence_s": 90, "gap_window": 64}}
    }
    assert load_settings(file)["detectors"]["hang"]["gap_window"] == 64


def test_the_table_goes_into_the_history_once() -> None:
    spec = parse_spec({"detectors": {"hang": {"min_silence_s": [30, 90]}}})
    table = run_sweep(spec, [Path("a"), Path("b")], fake_runner)
    run_at = dt.datetime(2026, 12, 3, 7, 0, tzinfo=dt.UTC)
    rows = history_rows(table, spec, "hang-sweep", run_at, recordings=2)
    with DuckDBStore() as store:
        assert store.append("sweep_points", rows) == 2
        assert store.append("sweep_points", rows) == 0  # the same run again adds nothing
        stored = store.sql(
            "SELECT run_at, sweep, point, settings, kind, recordings, recall, overall_precision,"
            " pareto FROM sweep_points ORDER BY point"
        ).to_pylist()
    assert stored == [
        {
            "run_at": run_at,
            "sweep": "hang-sweep",
            "point": point,
            "settings": f'{{"hang": {{"min_silence_s": {silence}}}}}',
            "kind": None,
            "recordings": 2,
            "recall": 1.0,
            "overall_precision": precision,
            "pareto": True,
        }
        for point, silence, precision in ((0, 30, 0.5), (1, 90, 1.0))
    ]


def test_the_command_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[detectors.hang]\nmin_silence_s = "soon"\n')
    result = CliRunner().invoke(main, ["sweep", str(spec), str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"medic: error: {spec}: detectors.hang.min_silence_s: must")
    assert len(result.stderr.strip().splitlines()) == 1
    both = ["backtest", str(tmp_path), "--history", str(tmp_path / "h.duckdb"), "--ray", "auto"]
    result = CliRunner().invoke(main, both)
    assert result.exit_code == 2 and "leave out --ray" in result.stderr
