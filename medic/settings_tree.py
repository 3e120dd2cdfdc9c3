"""The whole configuration as one typed, frozen tree, checked once at load (see
``Settings``); ``medic.settings.load_settings`` reads the file it is built from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from medic.actions.config import RulesConfig, load_rules
from medic.config import ConfigError, from_dict
from medic.detectors.registry import detector_configs, parser_configs, prefix_config
from medic.history.config import HistoryConfig
from medic.ingest.replay import ReplayConfig
from medic.ingest.sources import Sources
from medic.parse.prefixes import PrefixConfig
from medic.parse.signatures import SignaturesConfig
from medic.pipeline_config import PipelineConfig
from medic.service_config import ServiceConfig
from medic.settings import KNOWN_TABLES


@dataclass(frozen=True)
class Settings:
    """The whole configuration, checked once into typed, frozen tables: each part of medic is
    handed its own (``settings.rules`` to the actions stage, ``settings.sources`` to the
    sources, ...) and none reads the file's plain tables. ``Settings.load`` takes a loaded
    file's tables (or a Settings, returned as it is), so the entry points that took the plain
    form still do, converting once at their boundary."""

    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    detectors: tuple[tuple[str, bool, Any], ...] = ()
    """Every registered detector's (name, enabled, config), by name."""
    parsers: tuple[tuple[str, Any], ...] = ()
    """Every registered parser's (output stream, config or None), by stream."""
    prefixes: PrefixConfig = field(default_factory=PrefixConfig)
    """``[parsers.prefixes]``: the line prefixes every log parser strips."""
    rules: RulesConfig = field(default_factory=load_rules)
    sources: Sources = field(default_factory=Sources)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)

    @classmethod
    def load(cls, settings: Settings | Mapping[str, Any] | None = None) -> Settings:
        """Every table of ``settings`` checked and filled in with its defaults; the first
        problem is a one-line ConfigError naming the setting."""
        if isinstance(settings, Settings):
            return settings
        raw = settings or {}
        unknown = sorted(set(raw) - set(KNOWN_TABLES))
        if unknown:
            raise ConfigError(f"unknown table [{unknown[0]}] (known: {', '.join(KNOWN_TABLES)})")
        detectors = detector_configs(_table(raw, "detectors"))
        parsers = _table(raw, "parsers")
        return cls(
            pipeline=from_dict(PipelineConfig, _table(raw, "pipeline"), "pipeline"),
            detectors=tuple((name, on, config) for name, (on, config) in detectors.items()),
            parsers=tuple(sorted(parser_configs(parsers).items())),
            prefixes=prefix_config(parsers),
            rules=load_rules(_table(raw, "rules") or None),
            sources=Sources.load(_table(raw, "sources")),
            history=from_dict(HistoryConfig, _table(raw, "history"), "history"),
            service=from_dict(ServiceConfig, _table(raw, "service"), "service"),
            replay=from_dict(ReplayConfig, _table(raw, "replay"), "replay"),
        )

    def detector_configs(self) -> dict[str, tuple[bool, Any]]:
        """``{name: (enabled, config)}``, as ``medic.detectors.registry.detectors_from`` takes."""
        return {name: (on, config) for name, on, config in self.detectors}

    def parser_configs(self) -> dict[str, Any]:
        """``{output stream: config}``, as ``medic.parse.registry.parsers_from`` takes."""
        return dict(self.parsers)

    @property
    def signatures(self) -> SignaturesConfig:
        """``[parsers.signatures]``: the signature catalogue the parser and detectors share."""
        config = self.parser_configs().get("signatures")
        return config if isinstance(config, SignaturesConfig) else SignaturesConfig()


def _table(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    table = raw.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"'{name}' must be a table ([{name}])")
    return table
