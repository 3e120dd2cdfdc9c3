"""Backtests, calibrations and sweeps replayed on a Ray cluster (``pip install 'medic[ray]'``).

The one module of medic that imports ``ray``. ``RayRunner`` is a ``medic.backtest.Runner``:
each task (a recording and the settings to replay it with) becomes one Ray task that runs
``backtest_path`` or ``backtest_recording`` in a worker, with a fresh pipeline, exactly as a
local run does; results come back in input order, so a report, a calibration or a sweep table
is the same as the local one. Workers import medic from their own environment: every node must
have the same medic installed (a virtualenv on the shared file system does it).

Where recordings are read (``data``):

- ``shared``: workers open each recording at its absolute path (a shared file system);
- ``ship``: this process reads each recording whole and puts it in Ray's object store as
  Arrow tables, once however many tasks replay it; workers replay it from there;
- ``auto`` (the default): a probe task on every node compares what it sees at each path (the
  size of every file and the bytes of ``meta.json``) with what this process sees; the
  recordings that every node sees the same are read in place, the others are shipped.

A task whose worker dies (killed for memory, a node lost) is replayed here, with a warning, as
``medic.backtest.replay_tasks`` does for a local worker process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from medic.backtest import (
    UNREADABLE,
    RecordingFailure,
    RecordingResult,
    Task,
    backtest_path,
    backtest_recording,
    unreadable,
)
from medic.errors import exception_line
from medic.recording import Recording, read_recording

log = logging.getLogger(__name__)

DATA_MODES = ("auto", "shared", "ship")


class RayClusterError(RuntimeError):
    """No Ray cluster to run on, said in one line."""


def replay(
    item: Path | Recording, settings: Mapping[str, Any] | None
) -> RecordingResult | RecordingFailure:
    """What a Ray task runs: a recording read at its path, or one shipped in the object store
    (Ray hands the task the object itself)."""
    if isinstance(item, Path):
        return backtest_path(item, settings)
    assert item.path is not None
    try:
        return backtest_recording(item, settings)
    except UNREADABLE as exc:
        return unreadable(item.path, exc)


def fingerprint(path: str) -> str | None:
    """What a node sees of a recording directory: a digest of its files' names and sizes and
    of the bytes of ``meta.json``; None when there is no recording there."""
    root = Path(path)
    digest = hashlib.sha1()
    try:
        for file in sorted(f for f in root.iterdir() if f.is_file()):
            digest.update(f"{file.name}\t{file.stat().st_size}\n".encode())
        digest.update((root / "meta.json").read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def fingerprints(paths: Sequence[str]) -> list[str | None]:
    """``fingerprint`` of every path, as one node sees them (the probe task)."""
    return [fingerprint(path) for path in paths]


class RayRunner:
    """Replays tasks on the Ray cluster at ``address`` (``auto``: the one ``ray start``
    started on this machine or named by ``RAY_ADDRESS``; else ``host:port`` of its head).
    Use it as a context manager: it connects on entry and disconnects on exit, unless this
    process was already connected (a notebook's or a test's ``ray.init``): it then uses that
    connection, whatever ``address`` says, and leaves it open."""

    def __init__(self, address: str, data: str = "auto") -> None:
        if data not in DATA_MODES:
            raise ValueError(f"unknown Ray data mode {data!r} (known: {', '.join(DATA_MODES)})")
        self.address = address
        self.data = data
        self.connected_here = False
        self.shipped: list[Path] = []
        """The recordings the last run shipped through the object store (the others were read
        in place)."""

    def __enter__(self) -> RayRunner:
        self.connected_here = not ray.is_initialized()
        if not self.connected_here:
            return self
        try:
            ray.init(
                address=self.address,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except (ConnectionError, ValueError, RuntimeError) as exc:
            first = exception_line(exc)
            raise RayClusterError(f"Ray cluster {self.address}: cannot connect ({first})") from None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.connected_here:
            ray.shutdown()

    def __call__(self, tasks: list[Task]) -> Iterator[RecordingResult | RecordingFailure]:
        paths = list(dict.fromkeys(path for path, _ in tasks))
        items = self._place(paths)
        settings_refs: dict[int, Any] = {}
        remote = ray.remote(replay)
        pending: list[tuple[Task, Any]] = []
        for task in tasks:
            path, settings = task
            item = items[path]
            if isinstance(item, RecordingFailure):
                pending.append((task, item))
                continue
            if id(settings) not in settings_refs:
                settings_refs[id(settings)] = ray.put(settings)
            pending.append((task, remote.remote(item, settings_refs[id(settings)])))
        return self._gather(pending)

    def _gather(
        self, pending: list[tuple[Task, Any]]
    ) -> Iterator[RecordingResult | RecordingFailure]:
        for (path, settings), ref in pending:
            if isinstance(ref, RecordingFailure):
                yield ref
                continue
            try:
                result = ray.get(ref)
            except RayError as exc:
                first = exception_line(exc)
                log.warning(
                    "backtest: a Ray task for %s failed (%s); replaying it here", path, first
                )
                yield backtest_path(path, settings)
                continue
            yield _as_given(result, path)

    def _place(self, paths: list[Path]) -> dict[Path, Path | Any | RecordingFailure]:
        """Each recording as a task gets it: its absolute path, or a reference to it in the
        object store, or the failure to read it here."""
        absolute = {path: path.resolve() for path in paths}
        if self.data == "shared":
            in_place = set(paths)
        elif self.data == "ship":
            in_place = set()
        else:
            in_place = self._seen_everywhere(absolute)
        placed: dict[Path, Path | Any | RecordingFailure] = {}
        self.shipped = []
        for path in paths:
            if path in in_place:
                placed[path] = absolute[path]
                continue
            try:
                recording = read_recording(path)
            except UNREADABLE as exc:
                placed[path] = unreadable(path, exc)
                continue
            placed[path] = ray.put(recording)
            self.shipped.append(path)
        return placed

    def _seen_everywhere(self, absolute: Mapping[Path, Path]) -> set[Path]:
        """The recordings every node with CPUs sees as this process does."""
        names = [str(path) for path in absolute.values()]
        here = fingerprints(names)
        probe = ray.remote(num_cpus=0)(fingerprints)
        nodes = [
            node["NodeID"]
            for node in ray.nodes()  # type: ignore[no-untyped-call]
            if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0
        ]
        seen = ray.get(
            [
                probe.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                ).remote(names)
                for node in nodes
            ]
        )
        return {
            path
            for index, path in enumerate(absolute)
            if here[index] is not None and all(other[index] == here[index] for other in seen)
        }


def _as_given(
    result: RecordingResult | RecordingFailure, path: Path
) -> RecordingResult | RecordingFailure:
    """A worker's result under the path this run was given (the worker read it at its absolute
    path), as a local run reports it."""
    if isinstance(result, RecordingFailure):
        given = str(path)
        return RecordingFailure(path, result.error.replace(str(path.resolve()), given))
    return dataclasses.replace(result, path=path)
