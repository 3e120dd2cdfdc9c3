"""Load backtest results into a history: ``detections.parquet`` and ``actions.parquet`` as
``medic backtest --out`` writes them, and optionally the recordings they came from, replayed
through a ``HistoryWriter`` for job events, GPU telemetry and progress (what the report needs
for outcomes and GPU counts). Importing the same files again adds nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from medic import schema
from medic.detectors.registry import parsers_from
from medic.errors import exception_line
from medic.history import HistoryError
from medic.history.store import HistoryStore
from medic.history.writer import DETECTION_ROWS, HistoryWriter
from medic.ingest.replay import ReplaySource
from medic.parse.prefixes import PrefixStripper
from medic.pipeline import Pipeline
from medic.recording import open_recording
from medic.settings_tree import Settings

RESULT_FILES = {
    "detections": ("detections.parquet", DETECTION_ROWS),
    "actions": ("actions.parquet", schema.ACTIONS),
}


@dataclass
class ImportCounts:
    read: Counter[str] = field(default_factory=Counter)
    """Rows read, per history table."""
    inserted: Counter[str] = field(default_factory=Counter)
    """Rows new to the history, per table."""
    recordings: int = 0


def find_files(paths: Iterable[Path], name: str) -> list[Path]:
    """Files called ``name`` among ``paths`` and under the directories in it, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob(name)))
        elif path.name == name:
            found.append(path)
    return found


def read_result(file: Path, target: pa.Schema) -> pa.Table:
    try:
        table = pq.read_table(file)
    except (pa.ArrowInvalid, OSError) as exc:
        raise HistoryError(f"{file}: not a parquet file ({exception_line(exc)})") from None
    try:
        return schema.conform(table, target)
    except schema.SchemaError as exc:
        raise HistoryError(f"{file}: {exc}") from None


def import_backtest(
    store: HistoryStore,
    results: Iterable[Path],
    recordings: Iterable[Path] = (),
    settings: Settings | Mapping[str, Any] | None = None,
) -> ImportCounts:
    """Append the backtest results under ``results`` and replay ``recordings`` into ``store``
    (``settings``: the config file's tables; [history] and [parsers] apply)."""
    settings = Settings.load(settings)
    config = settings.history
    counts = ImportCounts()
    results = list(results)
    for table, (name, target) in RESULT_FILES.items():
        for file in find_files(results, name):
            rows = read_result(file, target)
            counts.read[table] += rows.num_rows
            counts.inserted[table] += store.append(table, rows)
    for path in recordings:
        writer = HistoryWriter(store, config)
        parsers = parsers_from(
            [writer], settings.parser_configs(), prefixes=PrefixStripper(settings.prefixes)
        )
        pipeline = Pipeline([], parsers=parsers, observers=[writer])
        replay = ReplaySource(open_recording(path))
        pipeline.run(replay, replay.placing())
        writer.flush()
        if writer.errors:
            raise HistoryError(f"{path}: {writer.errors} write(s) to the history failed")
        counts.recordings += 1
        counts.inserted.update(writer.written)
    return counts
