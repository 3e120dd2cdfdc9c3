"""The live sources a config asks for: ``[sources]`` with one table per source.

```toml
[sources.victorialogs]                   # logs from a log store...
url = "http://victorialogs:9428"
query = '{app="training"}'

[sources.files]                          # ...or, without one, from job output files
paths = ["/shared/jobs/*/slurm-%j.out"]

[sources.prometheus]                     # GPU telemetry: dcgm-exporter or `medic agent`
targets = ["http://gpu001:9400/metrics"]

[sources.slurm]                          # job and node state
poll_interval_s = 5
```

Logs come from VictoriaLogs when ``[sources.victorialogs]`` is present, else from files:
the file source is the embedded default (``slurm-%j.out`` in the working directory when
``[sources.files]`` is absent too). Telemetry and Slurm are read only when configured.
Which source serves what is the sources' own word (``stream``, ``fallback``, ``open``; see
``medic.ingest.registry``): nothing here branches on a source's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from medic.config import ConfigError, from_dict
from medic.ingest.base import Source
from medic.ingest.cursor import CursorStore
from medic.ingest.registry import SOURCES, SourceClass, source_configs


@dataclass(frozen=True)
class SourcesConfig:
    """``[sources]``: its own settings below; each registered source reads its own table,
    ``[sources.<name>]``, checked by that source (the tables that follow). A source without a
    table is not opened, except a fallback source (the job output files), which serves its
    stream when no other source does."""

    cursor_dir: str = ""
    """Where each source's resume cursor is kept; empty: ``cursors/`` in ``[service]
    state_dir``."""


@dataclass(frozen=True)
class Sources:
    """``[sources]`` checked: its own settings and each configured source's table, typed by
    the source's ``Config`` (``medic.ingest.registry.source_configs``)."""

    config: SourcesConfig = field(default_factory=SourcesConfig)
    tables: tuple[tuple[str, Any], ...] = ()
    """``(source name, its config)`` for each ``[sources.<name>]`` present, in registry order."""

    @classmethod
    def load(cls, table: Mapping[str, Any]) -> Sources:
        """``[sources]`` of a config file checked; the first problem is a one-line ConfigError."""
        if not isinstance(table, Mapping):
            raise ConfigError(f"'sources' must be a table, got {table!r}")
        own = frozenset(f.name for f in fields(SourcesConfig))
        tables = source_configs(table, own)
        config = from_dict(SourcesConfig, {k: v for k, v in table.items() if k in own}, "sources")
        return cls(config, tables)

    @property
    def cursor_dir(self) -> str:
        return self.config.cursor_dir

    def table(self, name: str) -> Any | None:
        """Source ``name``'s checked ``[sources.<name>]``; None when the file has none."""
        return dict(self.tables).get(name)


def sources_config(settings: Mapping[str, Any]) -> Sources:
    """``[sources]`` of a loaded config file, checked (one-line ConfigError)."""
    return Sources.load(settings.get("sources", {}))


def chosen(config: Sources) -> list[tuple[SourceClass, Any]]:
    """The registered sources the config asks for, with their configs, in registry order: each
    configured one, except a ``fallback`` source, which serves its stream only when no other
    source of that stream is configured (with its defaults when it is not configured either)."""
    configured = {name: config.table(name) for name in SOURCES}
    served = {
        SOURCES[n].stream
        for n, c in configured.items()
        if c is not None and not SOURCES[n].fallback
    }
    picked = []
    for name, cls in SOURCES.items():
        table = configured[name]
        if cls.fallback:
            if cls.stream in served:
                continue
            if table is None:
                table = cls.Config()
        elif table is None:
            continue
        picked.append((cls, table))
    return picked


def open_sources(
    config: Sources,
    client: httpx.AsyncClient,
    cursors: CursorStore | None = None,
    *,
    start_us: int | None = None,
    until_us: int | None = None,
) -> list[Source]:
    """The configured sources, resumed from ``cursors`` when given. ``start_us``/``until_us``
    bound a capture (``medic record``): the log store is read from ``start_us``, files only
    from what they gain from now on."""
    return [
        cls.open(
            table,
            client,
            cursors.load(cls.name) if cursors is not None else None,
            start_us=start_us,
            until_us=until_us,
        )
        for cls, table in chosen(config)
    ]
