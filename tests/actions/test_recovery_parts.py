"""The dead-man alert, drains by others and lemon scores."""

from __future__ import annotations

import pyarrow as pa

from medic.actions.deadman import DeadMan
from medic.actions.drains import ExternalDrains
from medic.actions.model import Outcome, done
from medic.actions.node_journal import NodeEvent, NodeJournal, node_event_rows
from medic.actions.notifiers import Alert
from medic.actions.recovery_config import DeadmanConfig, LemonConfig
from medic.detectors.base import Detection
from medic.history.nodes import LemonScorer, lemon_scores, node_table
from medic.history.store import DuckDBStore
from medic.history.writer import detection_rows
from medic.testing.builders import at, batch
from medic.timeutil import US

DAY = 86_400


class Sent:
    def __init__(self) -> None:
        self.alerts: list[tuple[str, Alert]] = []

    def __call__(self, receiver: str, alert: Alert) -> Outcome:
        self.alerts.append((receiver, alert))
        return done("sent")


def test_a_stalled_source_raises_one_alert_and_one_when_it_delivers_again() -> None:
    sent = Sent()
    deadman = DeadMan(DeadmanConfig(after_s=60, notify=("oncall",)), sent)
    assert deadman.check({"files": at(0), "slurm": at(0)}, at(0)) == []
    assert deadman.check({"files": at(0), "slurm": at(50)}, at(50)) == []
    assert deadman.check({"files": at(0), "slurm": at(100)}, at(100)) == ["files"]
    assert deadman.check({"files": at(0), "slurm": at(150)}, at(150)) == ["files"]
    assert deadman.check({"files": at(160), "slurm": at(160)}, at(160)) == []
    assert [(a.group, a.status) for _, a in sent.alerts] == [
        ("deadman:files", "firing"),
        ("deadman:files", "resolved"),
    ]
    assert "watermark stopped for 100 s" in sent.alerts[0][1].text


def test_a_source_that_never_delivered_is_stalled_too() -> None:
    deadman = DeadMan(DeadmanConfig(after_s=30))
    deadman.check({"vl": None}, at(0))
    assert deadman.check({"vl": None}, at(31)) == ["vl"]


def node_row(t: float, node: str, state: str, reason: str | None) -> dict[str, object]:
    return {"time": at(t), "kind": "node", "node": node, "state": state, "reason": reason}


def test_drains_by_others_are_recorded_once_and_medics_own_are_not() -> None:
    journal = NodeJournal()
    drains = ExternalDrains(journal, "medic")
    rows = [
        node_row(0, "n1", "IDLE+DRAIN", "nhc: ECC errors"),
        node_row(0, "n2", "MIXED+DRAIN", "medic: gpu_fault job 4 detection x: Xid 79"),
        node_row(1, "n3", "IDLE", None),
    ]
    drains.update(batch("scheduler", rows))
    drains.update(batch("scheduler", [node_row(5, "n1", "MIXED+DRAIN", "nhc: ECC errors")]))
    drains.update(batch("scheduler", [node_row(9, "n1", "IDLE", None)]))
    drains.update(batch("scheduler", [node_row(12, "n1", "IDLE+DRAIN", "ops: reseat")]))
    events = [(e.node, e.event, e.detail) for n in journal.nodes() for e in journal.by_node[n]]
    assert events == [
        ("n1", "drained_by_other", "nhc: ECC errors"),
        ("n1", "drained_by_other", "ops: reseat"),
    ]
    assert drains.count == 2


def blame(store: DuckDBStore, node: str, job: str, kind: str, days_ago: float, now: int) -> None:
    t = now - round(days_ago * DAY * US)
    detection = Detection(job, kind, (node,), detector="x", detected_at=t)
    store.append("detections", detection_rows([detection]))


def test_lemon_scores_weigh_kind_and_age_and_need_several_jobs() -> None:
    now = at(100 * DAY)
    with DuckDBStore() as store:
        for job in ("1", "2", "3"):
            blame(store, "n7", job, "gpu_fault", 0, now)
        for second in range(6):  # one job blaming a node many times
            blame(store, "n8", "9", "gpu_fault", second / DAY, now)
        blame(store, "n9", "4", "gpu_fault", 28, now)  # two half-lives old: 0.25 each
        blame(store, "n9", "5", "straggler", 0, now)
        store.append(
            "node_events",
            node_event_rows([NodeEvent(now, "n7", "check_failed", "exit 1", "77")]),
        )
        scores = lemon_scores(store, LemonConfig(), now)
        by_node = {r["node"]: r for r in scores.to_dicts()}
        assert by_node["n7"]["score"] == 4.0 and by_node["n7"]["lemon"]
        assert by_node["n7"]["jobs"] == 3
        assert round(by_node["n8"]["score"], 3) == 6.0 and not by_node["n8"]["lemon"]
        assert abs(by_node["n9"]["score"] - 0.5) < 1e-9
        scorer = LemonScorer(store, LemonConfig())
        assert scorer("n7", now) == 4.0 and scorer("n8", now) == 0.0 and scorer("n0", now) == 0
        table = node_table(store, LemonConfig(), now)
        assert table["node"].to_list()[0] == "n7"
        first = table.row(0, named=True)
        assert (first["checks_failed"], first["lemon"]) == (1, True)


def test_node_events_survive_a_restart_of_the_journal() -> None:
    with DuckDBStore() as store:
        NodeJournal(store).record(NodeEvent(at(0), "n1", "check_started", "dcgmi diag", "5"))
        restored = NodeJournal.restore(store, at(-10))
        last = restored.last("n1")
        assert last is not None and (last.event, last.job_id) == ("check_started", "5")
        assert NodeJournal.restore(store, at(10)).last("n1") is None
        assert isinstance(store.sql("FROM node_events"), pa.Table)
