"""The registry of live sources, by the name of their ``[sources.<name>]`` table.

Importing this module registers the built-ins from the one explicit list in
``medic.ingest.builtin``; a site's own source calls ``register_source``. A registered source
is a class with ``name``, the ``stream`` it feeds, ``fallback`` (opened only when no other
source of its stream is configured, then with its defaults if need be), and three
classmethods: ``open`` (from its config, the shared HTTP client and its cursor), ``probe``
(``medic doctor``'s harmless try) and ``absent`` (what doctor says when its stream has no
source). ``medic.ingest.sources`` and the doctor find sources here and never branch on them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from medic.ingest import builtin
from medic.ingest.base import Source
from medic.probe import Probe

__all__ = ["SOURCES", "SourceClass", "register_source"]


class SourceClass(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type]
    """Its ``[sources.<name>]`` table (a field of ``SourcesConfig``)."""
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


for _source in builtin.SOURCES:
    register_source(_source)
