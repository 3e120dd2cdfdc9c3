"""The Detector seam: the Detection record, the Detector protocol and the registry.

A detector consumes batches of the streams it names and watermarks, owns its per-job /
per-rank / per-GPU state, never reads the wall clock, and exposes its parameters as a
frozen dataclass (``Config``) so backtests and notebooks can sweep them. The pipeline
stamps ``detected_at`` with the event time it had reached when the detection came out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import pyarrow as pa

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch
from medic.parse.prefixes import PrefixConfig, PrefixStripper


@dataclass(frozen=True)
class Detection:
    """One detected incident of one job (the spec's detections row, plus an id and onset)."""

    job_id: str | None
    kind: str
    culprits: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    score: float = 1.0
    detector: str = ""
    summary: str = ""
    detected_at: int = 0
    onset: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    incident: str | None = field(default=None, compare=False, hash=False)
    """Id of the incident the pipeline grouped it into (its first detection's id); None
    outside a pipeline."""
    raw_score: float | None = None
    """The detector's own (evidence) score, once a calibration replaced ``score`` by the
    probability that the detection is real (``medic.calibration``); None: ``score`` is it."""

    def __post_init__(self) -> None:
        if self.kind not in schema.DETECTION_KINDS:
            raise ValueError(f"unknown detection kind {self.kind!r}")

    @property
    def id(self) -> str:
        """Stable id derived from the row, so it can be recomputed from detections.parquet."""
        return detection_id(self.detected_at, self.job_id, self.kind, self.detector)

    def row(self) -> dict[str, Any]:
        return {
            "detected_at": self.detected_at,
            "job_id": self.job_id,
            "kind": self.kind,
            "culprits": list(self.culprits),
            "ranks": list(self.ranks),
            "score": float(self.score),
            "detector": self.detector,
            "summary": self.summary,
            "raw_score": float(self.score if self.raw_score is None else self.raw_score),
        }


def detection_id(detected_at: int, job_id: str | None, kind: str, detector: str) -> str:
    key = f"{detected_at}|{job_id or ''}|{kind}|{detector}".encode()
    return hashlib.sha1(key, usedforsecurity=False).hexdigest()[:16]


def detections_table(detections: Iterable[Detection]) -> pa.Table:
    """Detections as ``detections.parquet`` holds them (the spec's columns and ``raw_score``:
    ``schema.DETECTIONS_WRITTEN``), in emission order."""
    rows = [d.row() for d in detections]
    if not rows:
        return schema.empty(schema.DETECTIONS_WRITTEN)
    columns = {name: [r[name] for r in rows] for name in schema.DETECTIONS_WRITTEN.names}
    return pa.Table.from_pydict(columns, schema=schema.DETECTIONS_WRITTEN)


@runtime_checkable
class Detector(Protocol):
    """What the pipeline drives. ``streams`` names the batches the detector wants."""

    name: ClassVar[str]
    streams: ClassVar[frozenset[str]]
    Config: ClassVar[type]
    config: Any

    def update(self, batch: Batch) -> list[Detection]: ...

    def advance(self, watermark: int) -> list[Detection]: ...

    def state_size(self) -> int:
        """Number of entities (jobs, ranks, GPUs) currently held: bounded and freed at job end."""
        ...


@runtime_checkable
class Parser(Protocol):
    """A vectorised stage deriving one stream from another (e.g. log lines to signature hits).

    A parser may set ``row_wise = True`` when each output row comes from one input row and keeps
    its time, in time order: a replay then parses many batches in one call (``medic.readahead``).
    """

    name: ClassVar[str]
    input_stream: ClassVar[str]
    output_stream: ClassVar[str]

    def parse(self, batch: Batch) -> Batch | None: ...


DETECTORS: dict[str, type[Any]] = {}
PARSERS: dict[str, type[Any]] = {}
PREFIXES_TABLE = "prefixes"
"""``[parsers.prefixes]``: the line prefixes stripped before every log parser (not a parser)."""


def register(cls: type[Any]) -> type[Any]:
    """Class decorator: make a detector available by its ``name``."""
    if cls.name in DETECTORS and DETECTORS[cls.name] is not cls:
        raise ValueError(f"detector {cls.name!r} registered twice")
    DETECTORS[cls.name] = cls
    return cls


def register_parser(cls: type[Any]) -> type[Any]:
    """Class decorator: make a parser available to the pipeline by its output stream."""
    PARSERS[cls.output_stream] = cls
    return cls


def load_builtin() -> None:
    """Import the built-in detector and parser modules so that they register themselves."""
    import medic.detectors.builtin  # noqa: F401


def detector_configs(
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[bool, Any]]:
    """Every registered detector's checked config and whether it is on, from
    ``{name: {setting: value}}``; a table may carry ``enabled = false`` to switch one off."""
    load_builtin()
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
    configs = detector_configs(settings)
    names = list(enabled) if enabled is not None else sorted(DETECTORS)
    detectors = []
    for name in names:
        if name not in DETECTORS:
            raise ConfigError(f"unknown detector '{name}'")
        on, config = configs[name]
        if on:
            cls = DETECTORS[name]
            uses = getattr(cls, "uses_catalogue", False)
            detectors.append(cls(config, catalogue=catalogue) if uses else cls(config))
    return detectors


def build_parsers(
    detectors: Iterable[Any],
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    catalogue: Any = None,
) -> list[Any]:
    """The parsers whose output streams the given detectors consume (transitively). A parser
    class with a ``Config`` is configured from ``settings[<output stream>]`` ([parsers.<name>]);
    one that reads the signature catalogue (``uses_catalogue``) gets ``catalogue``; the parsers
    that read log lines (``strips_prefixes``) share one prefix stripper, configured from
    ``settings["prefixes"]`` ([parsers.prefixes])."""
    load_builtin()
    settings = dict(settings or {})
    prefixes = PrefixStripper(
        from_dict(PrefixConfig, settings.pop(PREFIXES_TABLE, {}), f"parsers.{PREFIXES_TABLE}")
    )
    unknown = sorted(set(settings) - set(PARSERS))
    if unknown:
        known = ", ".join(sorted([*PARSERS, PREFIXES_TABLE]))
        raise ConfigError(f"unknown parser '{unknown[0]}' (known: {known})")
    wanted = set().union(*(d.streams for d in detectors)) if detectors else set()
    parsers: list[Any] = []
    pending = [stream for stream in sorted(wanted) if stream in PARSERS]
    while pending:
        stream = pending.pop()
        cls = PARSERS[stream]
        if any(isinstance(p, cls) for p in parsers):
            continue
        parsers.insert(0, _make_parser(cls, settings.get(stream, {}), catalogue, prefixes))
        if cls.input_stream in PARSERS:
            pending.append(cls.input_stream)
    return parsers


def _make_parser(
    cls: type[Any], values: Mapping[str, Any], catalogue: Any, prefixes: PrefixStripper
) -> Any:
    shared: dict[str, Any] = {}
    if getattr(cls, "uses_catalogue", False) and catalogue is not None:
        shared["catalogue"] = catalogue
    if getattr(cls, "strips_prefixes", False):
        shared["prefixes"] = prefixes
    config = getattr(cls, "Config", None)
    if config is None:
        if values:
            raise ConfigError(f"parser '{cls.output_stream}' takes no settings")
        return cls(**shared)
    return cls(from_dict(config, values, f"parsers.{cls.output_stream}"), **shared)
