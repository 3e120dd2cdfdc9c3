"""The registry of live sources, by the name of their ``[sources.<name>]`` table.

Importing this module registers the built-ins from the one explicit list in
``medic.ingest.builtin``; a site's own source calls ``register_source``. A registered source
is a class with ``name``, the ``stream`` it feeds, ``fallback`` (opened only when no other
source of its stream is configured, then with its defaults if need be), and three
classmethods: ``open`` (from its config, the shared HTTP client and its cursor), ``probe``
(``medic doctor``'s harmless try) and ``absent`` (what doctor says when its stream has no
source). Its ``Config`` checks its own ``[sources.<name>]`` table (``source_configs``), so a new
source is its module and one entry in that list. ``medic.ingest.sources``, the settings tree
and the doctor find sources here and never branch on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from medic.config import ConfigError, from_dict
from medic.ingest import builtin
from medic.ingest.base import Source
from medic.probe import Probe

__all__ = ["SOURCES", "SourceClass", "register_source", "source_configs"]


class SourceClass(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type]
    """The dataclass that checks its ``[sources.<name>]`` table; its docstring and field
    docstrings are that table's entry in the configuration reference."""
    title: ClassVar[str]
    """What ``medic doctor`` calls its lines."""
    stream: ClassVar[str]
    fallback: ClassVar[bool]
    resumable: ClassVar[bool]
    """Whether the service saves its cursor to resume from after a restart."""

    def open(
        self,
        config: Any,
        client: Any,
        cursor: dict[str, Any] | None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
    ) -> Source:
        """The source, resumed from ``cursor``; ``start_us``/``until_us`` bound a capture."""
        ...

    def probe(self, config: Any) -> list[Probe]: ...

    def absent(self) -> list[Probe]: ...


SOURCES: dict[str, SourceClass] = {}


def register_source(cls: Any) -> Any:
    """Class decorator: make a source available by its ``name``."""
    if cls.name in SOURCES and SOURCES[cls.name] is not cls:
        raise ValueError(f"source {cls.name!r} registered twice")
    SOURCES[cls.name] = cls
    return cls


def source_configs(
    tables: Mapping[str, Any], reserved: frozenset[str] = frozenset()
) -> tuple[tuple[str, Any], ...]:
    """``(name, checked config)`` of every registered source ``tables`` (``[sources]``) has a
    table for, in registry order; keys in ``reserved`` are ``[sources]``'s own settings, any
    other unknown key is a one-line ConfigError."""
    unknown = sorted(set(tables) - set(SOURCES) - reserved)
    if unknown:
        raise ConfigError(
            f"unknown source 'sources.{unknown[0]}' (sources: {', '.join(SOURCES) or 'none'}; "
            f"settings: {', '.join(sorted(reserved)) or 'none'})"
        )
    return tuple(
        (name, from_dict(cls.Config, tables[name], f"sources.{name}"))
        for name, cls in SOURCES.items()
        if name in tables
    )


for _source in builtin.SOURCES:
    register_source(_source)
