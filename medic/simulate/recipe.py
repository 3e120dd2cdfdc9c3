"""What a scenario is: its parameters (``Common``, ``Fault``), the healthy traps every
scenario may draw (``TRAPS``) and the recipe (``Scenario``) that names, describes and injects
it. ``medic.simulate.scenarios`` catalogues the built-in ones; a scenario of a new kind is one
module of ``medic.simulate.kinds``, which imports this, never the catalogue.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from medic.simulate.frameworks import FRAMEWORK_NAMES
from medic.simulate.plan import Run
from medic.simulate.world import World

TRAPS = (
    "checkpoint_pause",
    "evaluation",
    "long_startup",
    "slow_job",
    "power_cap",
    "throttle_blip",
    "completed",
    "timeout",
    "cancelled",
    "requeue",
    "benign_xid",
    "ecc_sbe",
    "admin_drain",
    "scrape_gap",
)


@dataclass(frozen=True)
class Common:
    """Parameters every scenario takes."""

    duration_min: float | None = None
    """Recording length in minutes (default: 20-90 from the seed)."""
    cluster_nodes: int | None = None
    """Nodes in the cluster (default: what the jobs need plus a few idle ones)."""
    job_nodes: int | None = None
    """Nodes of the featured job (default: 2-8, sometimes 9-16)."""
    framework: str | None = None
    """Featured job's framework: megatron, torchtitan, deepspeed, hf_trainer, lightning."""
    jobs: int | None = None
    """Background jobs besides the featured one (default: 1-3, or enough to fill a large
    cluster)."""
    traps: tuple[str, ...] | None = None
    """Healthy traps to force (default: a random subset)."""

    def __post_init__(self) -> None:
        if self.duration_min is not None and not 5 <= self.duration_min <= 24 * 60:
            raise ValueError("duration_min must be between 5 and 1440")
        if self.job_nodes is not None and not 1 <= self.job_nodes <= 1024:
            raise ValueError("job_nodes must be between 1 and 1024")
        if self.cluster_nodes is not None and not 1 <= self.cluster_nodes <= 16384:
            raise ValueError("cluster_nodes must be between 1 and 16384")
        if (
            self.cluster_nodes is not None
            and self.job_nodes is not None
            and self.job_nodes > self.cluster_nodes
        ):
            raise ValueError("job_nodes cannot exceed cluster_nodes")
        if self.framework is not None and self.framework not in FRAMEWORK_NAMES:
            raise ValueError(f"framework must be one of {', '.join(FRAMEWORK_NAMES)}")
        if self.jobs is not None and self.jobs < 0:
            raise ValueError("jobs must be >= 0")
        unknown = sorted(set(self.traps or ()) - set(TRAPS))
        if unknown:
            raise ValueError(f"unknown trap {unknown[0]!r} (known: {', '.join(TRAPS)})")


@dataclass(frozen=True)
class Fault(Common):
    at_min: float | None = None
    """When the fault strikes, in minutes from the recording start (default: from the seed)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.at_min is not None and self.at_min < 0:
            raise ValueError("at_min must be >= 0")


Inject = Callable[[World, Run, Any], None]


def _fields(params: Any, *names: str) -> dict[str, Any]:
    return {name: getattr(params, name) for name in names}


@dataclass(frozen=True)
class Scenario:
    """A recipe: name, one-line description, the label kind it produces (None: healthy),
    its parameters (a frozen dataclass with defaults) and the fault it injects."""

    name: str
    description: str
    label_kind: str | None
    params: type[Common]
    inject: Inject | None = None
    default_traps: tuple[str, ...] = ()
    datasets: tuple[tuple[int, Mapping[str, Any]], ...] = ()
    """The recordings of it the ``datasets`` suite commits, as (seed, parameters); empty: the
    suite's default for its group."""

    def parameters(self) -> list[tuple[str, str, Any]]:
        """(name, type, default) of every parameter, for ``medic simulate list``."""
        hints = typing.get_type_hints(self.params)
        return [
            (f.name, type_name(hints[f.name]), f.default) for f in dataclasses.fields(self.params)
        ]


def type_name(hint: Any) -> str:
    """``int``, ``'vanish' | 'null'``, ``list of str``: how a parameter's type reads in help."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args if a is not type(None))
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    return str(getattr(hint, "__name__", hint))


def inject_with(fn: Callable[..., None], *names: str) -> Inject:
    """An ``Inject`` calling ``fn(world, run, <names from the params>, at_min=...)``."""

    def run(world: World, target: Run, params: Any) -> None:
        fn(world, target, **_fields(params, *names), at_min=getattr(params, "at_min", None))

    return run
