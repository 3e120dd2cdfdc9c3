"""Every table of ``medic.toml`` and the dataclass that checks it, and the effective config.

This is the one list the configuration reference (``medic config reference``) and
``medic config check`` walk; each part of medic still validates its own table when it is
built, through the same dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medic.actions.config import RulesConfig, load_rules
from medic.actions.registry import executor_class
from medic.calibration import calibration_of
from medic.config import ConfigError, from_dict, to_dict
from medic.detectors.registry import (
    DETECTORS,
    PARSERS,
    PREFIXES_TABLE,
    build_parsers,
    detector_configs,
)
from medic.history.config import HistoryConfig
from medic.ingest.replay import ReplayConfig
from medic.ingest.sources import SourcesConfig
from medic.parse.prefixes import PrefixConfig
from medic.pipeline_config import PipelineConfig
from medic.service_config import ServiceConfig


def config_tables() -> dict[str, type]:
    """``{dotted table name: config dataclass}``, in the order the reference lists them."""
    tables: dict[str, type] = {
        "sources": SourcesConfig,
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


def effective_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Every table of a loaded config checked and filled in with its defaults: what medic runs
    with. Raises ConfigError on the first problem."""
    detectors = detector_configs(settings.get("detectors"))
    pipeline = from_dict(PipelineConfig, _table(settings, "pipeline"), "pipeline")
    calibration_of(pipeline.calibrate, pipeline.calibration)
    build_parsers([], settings.get("parsers"))
    effective: dict[str, Any] = {}
    for name, cls in config_tables().items():
        if name == "rules":
            rules = load_rules(settings.get("rules"))
            executor_class(rules.slurm.executor)
            values = to_dict(rules)
        elif name.startswith("detectors."):
            enabled, config = detectors[name.removeprefix("detectors.")]
            values = {"enabled": enabled, **to_dict(config)}
        else:
            values = to_dict(from_dict(cls, _table(settings, name), name))
        parent, _, leaf = name.rpartition(".")
        (effective.setdefault(parent, {}) if parent else effective)[leaf] = values
    return effective


def _table(settings: Mapping[str, Any], name: str) -> Any:
    table: Any = settings
    for part in name.split("."):
        if not isinstance(table, Mapping):
            raise ConfigError(f"'{name}' must be a table")
        table = table.get(part, {})
    return table
