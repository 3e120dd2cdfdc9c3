"""The source conformance suite: every registered live source through the same checks, as
``tests/detectors/test_conformance.py`` runs every detector.

Parametrised over the registry (``medic.ingest.registry.SOURCES``), so a new source is checked
the moment it registers: its ``[sources.<name>]`` table is checked by its own ``Config``, is in
the configuration reference, round-trips through the plain dict a TOML file gives and names
unknown settings in one line; it opens from that table with a resume cursor it can hand back
as JSON; a fallback source serves its stream only when nothing else does; and ``medic
doctor``'s probe of a backend that is not there, and its word on a missing source, are
one-line warnings or failures, never an exception. A new source adds a table whose backend
is not there to ``UNREACHABLE`` (``test_every_source_has_an_unreachable_table`` says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from medic.config import ConfigError, from_dict, to_dict
from medic.config_tables import config_tables
from medic.ingest.registry import SOURCES
from medic.ingest.sources import chosen, open_sources, sources_config

NAMES = list(SOURCES)
UNREACHABLE: dict[str, dict[str, Any]] = {
    "victorialogs": {"url": "http://127.0.0.1:1", "connect_timeout_s": 1.0},
    "files": {"paths": ["/nonexistent/medic-conformance/slurm-%j.out"]},
    "prometheus": {"targets": ["http://127.0.0.1:1/metrics"], "timeout_s": 1.0},
    "slurm": {"squeue": ["no-such-squeue", "--json"], "sinfo": ["no-such-sinfo", "--json"]},
}
"""Per source, a table whose backend is not there."""


def test_every_source_has_an_unreachable_table() -> None:
    assert sorted(UNREACHABLE) == sorted(NAMES)


def test_a_table_of_no_registered_source_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="unknown source 'sources.nosuch'") as error:
        sources_config({"sources": {"nosuch": {}, "cursor_dir": "/tmp/c"}})
    assert "\n" not in str(error.value)
    assert sources_config({"sources": {"cursor_dir": "/tmp/c"}}).cursor_dir == "/tmp/c"


@pytest.mark.parametrize("name", NAMES)
def test_its_table_is_typed_documented_and_round_trips(name: str) -> None:
    cls = SOURCES[name]
    assert config_tables()[f"sources.{name}"] is cls.Config
    config = sources_config({"sources": {name: UNREACHABLE[name]}})
    table = config.table(name)
    assert isinstance(table, cls.Config)
    assert [n for n, _ in config.tables] == [name]
    assert from_dict(cls.Config, to_dict(table), f"sources.{name}") == table


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_setting_is_a_one_line_error(name: str) -> None:
    with pytest.raises(ConfigError) as error:
        sources_config({"sources": {name: {**UNREACHABLE[name], "no_such_setting": 1}}})
    assert "no_such_setting" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name", NAMES)
async def test_it_opens_with_a_cursor_it_can_hand_back(name: str, tmp_path: Path) -> None:
    cls = SOURCES[name]
    config = sources_config({"sources": {name: UNREACHABLE[name]}})
    async with httpx.AsyncClient() as client:
        sources = {s.name: s for s in open_sources(config, client)}
    source = sources[name]
    assert isinstance(source, cls)  # type: ignore[arg-type]
    json.dumps(source.checkpoint())


@pytest.mark.parametrize("name", NAMES)
def test_a_fallback_serves_its_stream_only_when_nothing_else_does(name: str) -> None:
    cls = SOURCES[name]
    everything = sources_config({"sources": dict(UNREACHABLE)})
    alone = sources_config({"sources": {name: UNREACHABLE[name]}})
    nothing = sources_config({})
    opened = {c.name for c, _ in chosen(everything)}
    others = [n for n in NAMES if n != name and SOURCES[n].stream == cls.stream]
    if cls.fallback:
        assert (name in opened) == (not [n for n in others if not SOURCES[n].fallback])
        assert name in {c.name for c, _ in chosen(nothing)}
    else:
        assert name in opened
        assert name not in {c.name for c, _ in chosen(nothing)}
    assert name in {c.name for c, _ in chosen(alone)}


@pytest.mark.parametrize("name", NAMES)
def test_doctor_probes_a_missing_backend_in_one_line_without_raising(name: str) -> None:
    cls = SOURCES[name]
    table = from_dict(cls.Config, UNREACHABLE[name], f"sources.{name}")
    probes = cls.probe(table)
    assert probes
    for probe in probes:
        assert probe.status in ("warn", "fail"), probe
        assert probe.detail and "\n" not in probe.detail
    for probe in cls.absent():
        assert probe.status == "warn", probe
        assert probe.detail and "\n" not in probe.detail


@pytest.mark.parametrize("name", NAMES)
async def test_it_says_how_often_it_polls_and_whether_it_resumes(name: str) -> None:
    cls = SOURCES[name]
    assert isinstance(cls.resumable, bool)
    config = sources_config({"sources": {name: UNREACHABLE[name]}})
    async with httpx.AsyncClient() as client:
        source = {s.name: s for s in open_sources(config, client)}[name]
    interval = source.poll_interval_s  # type: ignore[attr-defined]
    assert interval is None or interval > 0
