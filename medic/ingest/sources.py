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
from dataclasses import dataclass
from typing import Any

import httpx

from medic.config import from_dict
from medic.ingest.base import Source
from medic.ingest.cursor import CursorStore
from medic.ingest.files import FilesConfig
from medic.ingest.prometheus import PrometheusConfig
from medic.ingest.registry import SOURCES, SourceClass
from medic.ingest.slurm import SlurmSourceConfig
from medic.ingest.victorialogs import VictoriaLogsConfig


@dataclass(frozen=True)
class SourcesConfig:
    """``[sources]``."""

    cursor_dir: str = ""
    """Where each source's resume cursor is kept; empty: ``cursors/`` in ``[service]
    state_dir``."""
    victorialogs: VictoriaLogsConfig | None = None
    """Logs from VictoriaLogs; when absent, logs come from files."""
    files: FilesConfig | None = None
    """Logs from the jobs' output files (the default log source)."""
    prometheus: PrometheusConfig | None = None
    """GPU telemetry scraped from dcgm-exporter or ``medic agent``; none when absent."""
    slurm: SlurmSourceConfig | None = None
    """Job and node state from Slurm; none when absent."""


def sources_config(settings: Mapping[str, Any]) -> SourcesConfig:
    """``[sources]`` of a loaded config file, checked (one-line ConfigError)."""
    return from_dict(SourcesConfig, settings.get("sources", {}), "sources")


def chosen(config: SourcesConfig) -> list[tuple[SourceClass, Any]]:
    """The registered sources the config asks for, with their configs, in registry order: each
    configured one, except a ``fallback`` source, which serves its stream only when no other
    source of that stream is configured (with its defaults when it is not configured either)."""
    configured = {name: getattr(config, name, None) for name in SOURCES}
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
    config: SourcesConfig,
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
