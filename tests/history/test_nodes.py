"""``medic nodes``: nodes by state with their lifecycle and incident history; lemons in the
report."""

from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner

from medic.actions.node_journal import NodeEvent, NodeJournal
from medic.actions.recovery_config import LemonConfig
from medic.cli import main
from medic.detectors.base import Detection
from medic.history.config import HistoryConfig
from medic.history.nodes import with_slurm
from medic.history.report import build_report
from medic.history.store import DuckDBStore
from medic.history.writer import detection_rows
from medic.timeutil import US


def recent(seconds: float) -> int:
    """Wall time ``seconds`` after a minute ago (``medic nodes`` scores at the wall clock)."""
    return time.time_ns() // 1000 - 60 * US + round(seconds * US)


def history(path: Path) -> None:
    with DuckDBStore(path) as store:
        journal = NodeJournal(store)
        for t, event in enumerate(("drained", "check_started", "check_failed", "kept")):
            journal.record(NodeEvent(recent(t), "n2", event, f"{event} detail", "5"))
        journal.record(NodeEvent(recent(9), "n3", "drained_by_other", "nhc: ECC errors"))
        for job in ("1", "2", "3"):
            detection = Detection(
                job, "gpu_fault", ("n2",), detector="x", detected_at=recent(int(job))
            )
            store.append("detections", detection_rows([detection]))


def test_nodes_lists_lifecycle_and_incident_history(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    history(path)
    result = CliRunner().invoke(main, ["nodes", "--db", str(path), "--no-slurm"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "n2" in line or "n3" in line]
    assert "kept" in lines[0] and "yes" in lines[0]
    assert "drained_by_other" in lines[1]


def test_slurm_state_orders_the_nodes_and_names_the_ones_the_history_lacks(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    history(path)
    from medic.history.nodes import node_table

    with DuckDBStore(path, read_only=True) as store:
        table = node_table(store, LemonConfig(), recent(10))
    slurm = [
        ("n1", "idle", ""),
        ("n2", "drained", "medic: health check failed"),
        ("n3", "drained", "nhc"),
    ]
    shown = with_slurm(table, slurm)
    assert shown.select("node", "state").rows() == [
        ("n2", "drained"),
        ("n3", "drained"),
        ("n1", "idle"),
    ]


def test_the_report_shows_lemon_nodes(tmp_path: Path) -> None:
    path = tmp_path / "h.duckdb"
    history(path)
    with DuckDBStore(path, read_only=True) as store:
        report = build_report(store, HistoryConfig(), lemon=LemonConfig())
    assert report.lemons.select("node", "lemon").rows() == [("n2", True)]
