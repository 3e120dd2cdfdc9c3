"""The Parser seam: the protocol and the registry of parsers, by the stream each derives.

The built-in parsers are registered from the one list in ``medic.parse.builtin`` when this
module is imported; a site's own parser calls ``register_parser``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch
from medic.parse import builtin
from medic.parse.prefixes import PrefixConfig, PrefixStripper


@runtime_checkable
class Parser(Protocol):
    """A vectorised stage deriving one stream from another (e.g. log lines to signature hits).

    A parser may set ``row_wise = True`` when each output row comes from one input row and keeps
    its time, in time order: a replay then parses many batches in one call (``medic.readahead``).
    One that is not may define ``parse_apart(batches, joined) -> list[Batch | None]``, what
    ``parse`` gives for each batch, read in one call.
    """

    name: ClassVar[str]
    input_stream: ClassVar[str]
    output_stream: ClassVar[str]

    def parse(self, batch: Batch) -> Batch | None: ...


PARSERS: dict[str, type[Any]] = {}
PREFIXES_TABLE = "prefixes"
"""``[parsers.prefixes]``: the line prefixes stripped before every log parser (not a parser)."""


def register_parser(cls: type[Any]) -> type[Any]:
    """Class decorator: make a parser available to the pipeline by its output stream."""
    PARSERS[cls.output_stream] = cls
    return cls


def prefix_config(settings: Mapping[str, Mapping[str, Any]] | None = None) -> PrefixConfig:
    """The ``prefixes`` table of a ``[parsers]`` table, checked."""
    values = (settings or {}).get(PREFIXES_TABLE, {})
    return from_dict(PrefixConfig, values, f"parsers.{PREFIXES_TABLE}")


def prefix_stripper(settings: Mapping[str, Mapping[str, Any]] | None = None) -> PrefixStripper:
    """The prefix stripper a ``[parsers]`` table configures (its ``prefixes`` table)."""
    return PrefixStripper(prefix_config(settings))


def parser_configs(settings: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Every registered parser's checked config (None for one that takes no settings), by
    output stream, from a ``[parsers]`` table (its ``prefixes`` table aside)."""
    tables = dict(settings or {})
    tables.pop(PREFIXES_TABLE, None)
    unknown = sorted(set(tables) - set(PARSERS))
    if unknown:
        known = ", ".join(sorted([*PARSERS, PREFIXES_TABLE]))
        raise ConfigError(f"unknown parser '{unknown[0]}' (known: {known})")
    configs: dict[str, Any] = {}
    for stream, cls in sorted(PARSERS.items()):
        values = tables.get(stream, {})
        config = getattr(cls, "Config", None)
        if config is None:
            if values:
                raise ConfigError(f"parser '{stream}' takes no settings")
            configs[stream] = None
        else:
            configs[stream] = from_dict(config, values, f"parsers.{stream}")
    return configs


def build_parsers(
    detectors: Iterable[Any],
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    catalogue: Any = None,
    prefixes: PrefixStripper | None = None,
) -> list[Any]:
    """The parsers whose output streams the given detectors consume (transitively). A parser
    class with a ``Config`` is configured from ``settings[<output stream>]`` ([parsers.<name>]);
    one that reads the signature catalogue (``uses_catalogue``) gets ``catalogue``; the parsers
    that read log lines (``strips_prefixes``) share one prefix stripper, configured from
    ``settings["prefixes"]`` ([parsers.prefixes]) unless ``prefixes`` is that stripper."""
    return parsers_from(
        detectors,
        parser_configs(settings),
        catalogue=catalogue,
        prefixes=prefixes or prefix_stripper(settings),
    )


def parsers_from(
    detectors: Iterable[Any],
    configs: Mapping[str, Any],
    catalogue: Any = None,
    prefixes: PrefixStripper | None = None,
) -> list[Any]:
    """``build_parsers`` from checked configs (``parser_configs``)."""
    prefixes = prefixes or PrefixStripper(PrefixConfig())
    wanted = set().union(*(d.streams for d in detectors)) if detectors else set()
    parsers: list[Any] = []
    pending = [stream for stream in sorted(wanted) if stream in PARSERS]
    while pending:
        stream = pending.pop()
        cls = PARSERS[stream]
        if any(isinstance(p, cls) for p in parsers):
            continue
        parsers.insert(0, _make_parser(cls, configs.get(stream), catalogue, prefixes))
        if cls.input_stream in PARSERS:
            pending.append(cls.input_stream)
    return parsers


def _make_parser(cls: type[Any], config: Any, catalogue: Any, prefixes: PrefixStripper) -> Any:
    shared: dict[str, Any] = {}
    if getattr(cls, "uses_catalogue", False) and catalogue is not None:
        shared["catalogue"] = catalogue
    if getattr(cls, "strips_prefixes", False):
        shared["prefixes"] = prefixes
    if getattr(cls, "Config", None) is None:
        return cls(**shared)
    return cls(config if config is not None else cls.Config(), **shared)


for _parser in builtin.PARSERS:
    register_parser(_parser)
