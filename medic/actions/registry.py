"""The registry of executors, by the name ``[rules.slurm] executor`` gives them.

Importing this module registers the built-ins from the one explicit list in
``medic.actions.builtin``; a site's own executor (a class with ``kind``, ``supports``, the
verbs of ``medic.actions.executor.VERBS`` it claims, the reads, ``node_checks`` and a
``probe`` classmethod, built from ``SlurmConfig``) calls ``register_executor``. The stage,
the recovery loop and ``medic doctor`` find executors here and never branch on their types.
"""

from __future__ import annotations

from typing import Any

from medic.actions import builtin
from medic.actions.config import SlurmConfig
from medic.actions.executor import Executor, ExecutorClass
from medic.config import ConfigError

__all__ = ["EXECUTORS", "build_executor", "executor_class", "register_executor"]

EXECUTORS: dict[str, ExecutorClass] = {}


def register_executor(cls: Any) -> Any:
    """Class decorator: make an executor available by its ``kind``."""
    if cls.kind in EXECUTORS and EXECUTORS[cls.kind] is not cls:
        raise ValueError(f"executor {cls.kind!r} registered twice")
    EXECUTORS[cls.kind] = cls
    return cls


def executor_class(kind: str) -> ExecutorClass:
    """The executor registered as ``kind``; a one-line ConfigError naming the known ones."""
    found = EXECUTORS.get(kind)
    if found is None:
        known = ", ".join(f'"{k}"' for k in sorted(EXECUTORS))
        raise ConfigError(f"'rules.slurm.executor' must be one of {known}, got {kind!r}")
    return found


def build_executor(config: SlurmConfig) -> Executor:
    """The executor ``config`` names, built from it."""
    return executor_class(config.executor)(config)


for _executor in builtin.EXECUTORS:
    register_executor(_executor)
