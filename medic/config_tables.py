"""Every table of ``medic.toml`` and the dataclass that checks it, and the effective config.

This is the one list the configuration reference (``medic config reference``) and
``medic config check`` walk; the tables are checked once, into ``medic.settings.Settings``,
through the same dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medic.actions.config import RulesConfig
from medic.actions.registry import executor_class
from medic.calibration import calibration_of
from medic.config import to_dict
from medic.detectors.registry import (
    DETECTORS,
    PARSERS,
    PREFIXES_TABLE,
)
from medic.history.config import HistoryConfig
from medic.ingest.registry import SOURCES
from medic.ingest.replay import ReplayConfig
from medic.ingest.sources import SourcesConfig
from medic.parse.prefixes import PrefixConfig
from medic.pipeline_config import PipelineConfig
from medic.service_config import ServiceConfig
from medic.settings_tree import Settings


def config_tables() -> dict[str, type]:
    """``{dotted table name: config dataclass}``, in the order the reference lists them."""
    tables: dict[str, type] = {
        "sources": SourcesConfig,
        **{f"sources.{name}": cls.Config for name, cls in SOURCES.items()},
        "service": ServiceConfig,
        "history": HistoryConfig,
        "rules": RulesConfig,
        "pipeline": PipelineConfig,
    }
    tables.update({f"detectors.{name}": cls.Config for name, cls in sorted(DETECTORS.items())})
    tables.update(
        {
            f"parsers.{name}": cls.Config
            for name, cls in sorted(PARSERS.items())
            if getattr(cls, "Config", None) is not None
        }
    )
    tables[f"parsers.{PREFIXES_TABLE}"] = PrefixConfig
    tables["replay"] = ReplayConfig
    return tables


def effective_settings(settings: Settings | Mapping[str, Any]) -> dict[str, Any]:
    """Every table of a loaded config checked and filled in with its defaults: what medic runs
    with. Raises ConfigError on the first problem."""
    tree = Settings.load(settings)
    calibration_of(tree.pipeline.calibrate, tree.pipeline.calibration)
    executor_class(tree.rules.slurm.executor)
    detectors = tree.detector_configs()
    parsers = tree.parser_configs()
    effective: dict[str, Any] = {}
    for name in config_tables():
        parent, _, leaf = name.rpartition(".")
        if parent == "detectors":
            enabled, config = detectors[leaf]
            values = {"enabled": enabled, **to_dict(config)}
        elif name == f"parsers.{PREFIXES_TABLE}":
            values = to_dict(tree.prefixes)
        elif parent == "parsers":
            values = to_dict(parsers[leaf])
        elif name == "sources":
            values = to_dict(tree.sources.config)
        elif parent == "sources":
            table = tree.sources.table(leaf)
            if table is None:
                continue
            values = to_dict(table)
        else:
            values = to_dict(getattr(tree, name))
        (effective.setdefault(parent, {}) if parent else effective)[leaf] = values
    return effective
