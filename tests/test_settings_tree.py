"""The settings tree: the whole config checked once, at load, into typed frozen tables that
each part of medic is handed; the entry points that took the plain tables convert them once."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from medic.backtest import backtest_recording
from medic.config import ConfigError
from medic.config_tables import effective_settings
from medic.pipeline import Pipeline
from medic.settings_tree import Settings
from medic.testing.builders import recording

CONFIG: dict[str, Any] = {
    "pipeline": {"incident_window_s": 300},
    "detectors": {"hang": {"min_silence_s": 90}, "straggler": {"enabled": False}},
    "parsers": {"prefixes": {"builtin": False}, "signatures": {"unmatched": False}},
    "rules": {"mode": "enforce", "guards": {"max_drained_nodes": 2}},
    "sources": {"slurm": {"poll_interval_s": 2}},
    "history": {"path": "h.duckdb"},
    "service": {"listen": "127.0.0.1:9999"},
    "replay": {"delays": [{"stream": "logs", "min_s": 0, "max_s": 5}]},
}


def test_every_table_is_typed_and_frozen() -> None:
    tree = Settings.load(CONFIG)
    assert tree.pipeline.incident_window_s == 300
    assert tree.detector_configs()["hang"][1].min_silence_s == 90
    assert tree.detector_configs()["straggler"][0] is False
    assert tree.prefixes.builtin is False
    assert tree.signatures.unmatched is False
    assert tree.rules.mode == "enforce" and tree.rules.guards.max_drained_nodes == 2
    assert tree.sources.table("slurm").poll_interval_s == 2
    assert tree.history.path == "h.duckdb"
    assert tree.service.listen == "127.0.0.1:9999"
    assert tree.replay.delays[0].max_s == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.rules = tree.rules  # type: ignore[misc]
    assert Settings.load(tree) is tree
    assert pickle.loads(pickle.dumps(tree)) == tree, "backtest workers receive it pickled"
    assert effective_settings(tree) == effective_settings(CONFIG)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"pipeline": {"incident_window_s": 0}}, "'pipeline.incident_window_s' must be > 0"),
        ({"detectors": {"hang": {"nope": 1}}}, "detectors.hang"),
        ({"parsers": {"progress": {"nope": 1}}}, "parsers.progress"),
        ({"parsers": {"prefixes": {"nope": 1}}}, "parsers.prefixes"),
        ({"rules": {"mode": "act"}}, "'rules.mode' must be one of"),
        ({"sources": {"files": {"paths": 3}}}, "sources.files.paths"),
        ({"history": {"gpus_per_node": 0}}, "history.gpus_per_node"),
        ({"service": {"listen": "nowhere"}}, "listen must be host:port"),
        ({"replay": {"nope": 1}}, "replay"),
        ({"alerts": {}}, "unknown table [alerts]"),
        ({"rules": 3}, "'rules' must be a table"),
    ],
)
def test_a_bad_table_stops_the_load_in_one_line(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        Settings.load(table)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_pipeline_built_from_the_tree_is_the_one_built_from_the_tables() -> None:
    from_tables = Pipeline.from_settings(CONFIG)
    from_tree = Pipeline.from_settings(Settings.load(CONFIG))
    assert [d.config for d in from_tree.detectors] == [d.config for d in from_tables.detectors]
    assert [type(p) for p in from_tree.parsers] == [type(p) for p in from_tables.parsers]
    assert from_tree.config == from_tables.config
    assert "straggler" not in {d.name for d in from_tree.detectors}


def test_a_backtest_checks_the_plain_tables_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = []
    original = Settings.load.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Settings], settings: Any = None) -> Settings:
        if not isinstance(settings, Settings):
            loads.append(settings)
        return original(cls, settings)  # type: ignore[no-any-return]

    monkeypatch.setattr(Settings, "load", classmethod(counting))
    backtest_recording(recording(), CONFIG)
    assert loads == [CONFIG]
