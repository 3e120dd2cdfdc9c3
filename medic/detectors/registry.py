"""The registry of detectors, by name, with the built-in detectors and parsers in it.

Importing this module registers the built-in detectors from the one explicit list in
``medic.detectors.builtin`` (the parsers register in ``medic.parse.registry``), so no
detector module imports a registry; a site's own detector calls ``register``.
``build_parsers`` is re-exported so that parsers are built with the built-ins registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from medic.config import ConfigError, from_dict
from medic.detectors import builtin
from medic.parse.registry import (
    PARSERS,
    PREFIXES_TABLE,
    build_parsers,
    parser_configs,
    parsers_from,
    prefix_config,
    register_parser,
)

__all__ = [
    "DETECTORS",
    "PARSERS",
    "PREFIXES_TABLE",
    "build_detectors",
    "build_parsers",
    "detector_configs",
    "detectors_from",
    "parser_configs",
    "parsers_from",
    "prefix_config",
    "register",
    "register_parser",
]

DETECTORS: dict[str, type[Any]] = {}


def register(cls: type[Any]) -> type[Any]:
    """Class decorator: make a detector available by its ``name``."""
    if cls.name in DETECTORS and DETECTORS[cls.name] is not cls:
        raise ValueError(f"detector {cls.name!r} registered twice")
    DETECTORS[cls.name] = cls
    return cls


def detector_configs(
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[bool, Any]]:
    """Every registered detector's checked config and whether it is on, from
    ``{name: {setting: value}}``; a table may carry ``enabled = false`` to switch one off."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(DETECTORS))
    if unknown:
        raise ConfigError(
            f"unknown detector '{unknown[0]}' (known: {', '.join(sorted(DETECTORS)) or 'none'})"
        )
    configs = {}
    for name, cls in sorted(DETECTORS.items()):
        table = settings.get(name, {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"'detectors.{name}' must be a table, got {table!r}")
        values = dict(table)
        enabled = values.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"'detectors.{name}.enabled' must be true or false, got {enabled!r}")
        configs[name] = (enabled, from_dict(cls.Config, values, f"detectors.{name}"))
    return configs


def build_detectors(
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    enabled: Iterable[str] | None = None,
    catalogue: Any = None,
) -> list[Any]:
    """Instantiate the detectors ``settings`` leave on (see ``detector_configs``), or only
    those named in ``enabled``. Detectors that read the signature catalogue
    (``uses_catalogue``) get ``catalogue`` (None: the built-in one)."""
    return detectors_from(detector_configs(settings), enabled, catalogue)


def detectors_from(
    configs: Mapping[str, tuple[bool, Any]],
    enabled: Iterable[str] | None = None,
    catalogue: Any = None,
) -> list[Any]:
    """``build_detectors`` from checked configs (``detector_configs``); a detector registered
    after they were checked runs with its defaults."""
    names = list(enabled) if enabled is not None else sorted(DETECTORS)
    detectors = []
    for name in names:
        if name not in DETECTORS:
            raise ConfigError(f"unknown detector '{name}'")
        on, config = configs.get(name) or (True, DETECTORS[name].Config())
        if on:
            cls = DETECTORS[name]
            uses = getattr(cls, "uses_catalogue", False)
            detectors.append(cls(config, catalogue=catalogue) if uses else cls(config))
    return detectors


for _detector in builtin.DETECTORS:
    register(_detector)
