"""What ``medic nodes`` shows: the history's node table, next to Slurm's current word."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from medic.actions.slurm_cli import SlurmCli, SlurmError
from medic.history.nodes import with_slurm
from medic.settings_tree import Settings

log = logging.getLogger(__name__)


def nodes_report(
    settings: Settings | Mapping[str, Any], table: pl.DataFrame, ask_slurm: bool
) -> pl.DataFrame:
    """What ``medic nodes`` shows: the history's nodes (``table``, see
    ``medic.remote_report.history_node_table``) and, unless told not to ask or Slurm cannot
    answer, Slurm's current state of each node."""
    rules = Settings.load(settings).rules
    slurm = None
    if ask_slurm:
        try:
            slurm = [(n.name, n.state, n.reason) for n in SlurmCli(rules.slurm).list_nodes()]
        except SlurmError as exc:
            log.warning("Slurm not asked: %s", exc)
    return with_slurm(table, slurm)
