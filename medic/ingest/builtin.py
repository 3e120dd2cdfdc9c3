"""The built-in sources, in the one explicit list the registry reads
(``medic.ingest.registry``), in the order they are opened and probed; no source module imports
the registry."""

from __future__ import annotations

from medic.ingest.files import FileSource
from medic.ingest.prometheus import PrometheusSource
from medic.ingest.slurm import SlurmSource
from medic.ingest.victorialogs import VictoriaLogsSource

SOURCES = (VictoriaLogsSource, FileSource, PrometheusSource, SlurmSource)
