"""What ``medic nodes`` shows: the history's node table, next to Slurm's current word."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from medic.actions.config import load_rules
from medic.actions.slurm_cli import SlurmCli, SlurmError
from medic.history.config import history_config
from medic.history.nodes import node_table, with_slurm
from medic.history.store import DuckDBStore

log = logging.getLogger(__name__)


def nodes_report(
    settings: Mapping[str, Any], db_path: Path | None, ask_slurm: bool
) -> pl.DataFrame:
    """What ``medic nodes`` shows: the history's nodes (read-only) and, unless told not to ask
    or Slurm cannot answer, Slurm's current state of each node."""
    rules = load_rules(settings.get("rules"))
    path = db_path or Path(history_config(settings).path)
    with DuckDBStore(path, read_only=True) as store:
        now = int(store.sql("SELECT epoch_us(now())").column(0)[0].as_py())
        table = node_table(store, rules.lifecycle.lemon, now)
    slurm = None
    if ask_slurm:
        try:
            slurm = [(n.name, n.state, n.reason) for n in SlurmCli(rules.slurm).list_nodes()]
        except SlurmError as exc:
            log.warning("Slurm not asked: %s", exc)
    return with_slurm(table, slurm)
