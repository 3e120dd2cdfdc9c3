"""The recovery loop as ``medic serve`` runs it: notifiers with persisted delivery state, the
per-node journal, drains by others, the node lifecycle (enforce mode, ``[rules.lifecycle]
enabled``, the Slurm CLI executor), the dead-man alert, NVRx's cycle files and exclusion files.

The service builds one ``Recovery`` from its settings, hands ``notifiers`` to the actions stage,
adds ``observers`` to the pipeline, and calls ``tick`` on its checkpoint interval (wall clock).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from medic.actions.config import RulesConfig
from medic.actions.deadman import DeadMan
from medic.actions.drains import ExternalDrains
from medic.actions.lifecycle import NodeLifecycle
from medic.actions.node_journal import NodeEvent, NodeJournal
from medic.actions.notifiers import Alert, Notifiers
from medic.actions.stage import ActionStage
from medic.history.nodes import LemonScorer
from medic.history.store import HistoryStore
from medic.nvrx import write_exclusions
from medic.settings_tree import Settings
from medic.timeutil import US

log = logging.getLogger(__name__)

JOURNAL_DAYS = 30
"""Node events read back at start (the check budgets and cooldowns need far less)."""


class Recovery:
    def __init__(
        self, config: RulesConfig, store: HistoryStore | None, state_dir: Path, now: int
    ) -> None:
        self.config = config
        self.notifiers = Notifiers(config.receivers, state=state_dir / "notifications.jsonl")
        since = now - JOURNAL_DAYS * 86_400 * US
        self.journal = NodeJournal.restore(store, since) if store else NodeJournal()
        self.drains = ExternalDrains(self.journal, config.slurm.reason_prefix)
        self.deadman = DeadMan(config.deadman, self.notifiers.send)
        self.lifecycle: NodeLifecycle | None = None
        self.store = store
        self.stage: ActionStage | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings | Mapping[str, Any],
        store: HistoryStore | None,
        state_dir: Path,
        now: int,
    ) -> Recovery:
        return cls(Settings.load(settings).rules, store, state_dir, now)

    def attach(self, stage: ActionStage) -> None:
        """Follow the stage: its NVRx view of jobs, and its executor, which drives the
        lifecycle when it can (``node_checks``: the Slurm CLI does), in enforce mode, with
        ``[rules.lifecycle] enabled``."""
        self.stage = stage
        lifecycle = self.config.lifecycle
        if not lifecycle.enabled or self.config.mode != "enforce":
            return
        checks = stage.executor.node_checks()
        if checks is None:
            log.warning(
                "rules.lifecycle: the %s executor cannot check nodes; node checks are off",
                stage.executor.name,
            )
            return
        lemon = LemonScorer(self.store, lifecycle.lemon) if self.store is not None else None
        self.lifecycle = NodeLifecycle(
            lifecycle,
            checks,
            self.journal,
            self.config.slurm.reason_prefix,
            lemon=lemon,
            alert=self._node_alert,
        )

    @property
    def observers(self) -> list[ExternalDrains]:
        return [self.drains]

    def tick(self, now: int, watermarks: Mapping[str, int | None]) -> list[str]:
        """One pass at wall time ``now``: dead-man check, node lifecycle, pending notifications;
        the stalled sources."""
        stalled = self.deadman.check(watermarks, now)
        if self.lifecycle is not None:
            self.lifecycle.tick(now)
        if self.stage is not None:
            self._nvrx(self.stage)
        self.notifiers.flush()
        return stalled

    def _nvrx(self, stage: ActionStage) -> None:
        """Read NVRx cycle files; write its exclusion files with medic's drained nodes."""
        config = self.config.nvrx
        if config.cycle_info_dir:
            stage.nvrx.read_cycle_files(Path(config.cycle_info_dir))
        if not config.exclusion_dir:
            return
        drained = stage.executor.drained_nodes()
        if drained is None:
            return
        prefix = f"{self.config.slurm.reason_prefix}:"
        bad = [node for node, reason in drained.items() if reason.startswith(prefix)]
        for array, tasks in stage.nvrx.array_tasks().items():
            where = Path(config.exclusion_dir.replace("{array_job_id}", array))
            try:
                write_exclusions(where, tasks, bad)
            except OSError as exc:
                log.error("nvrx: cannot write exclusions under %s: %s", where, exc)

    def _node_alert(self, event: NodeEvent) -> None:
        """A lifecycle step people must hear of (a failed check, a node kept drained) to the
        receivers of [rules.lifecycle] notify, in the node's thread."""
        alert = Alert(
            group=f"node:{event.node}",
            title=f"medic: node {event.node} {NODE_NEWS.get(event.event, event.event)}",
            text=event.detail,
            time=event.time,
            severity="warning",
            labels={"kind": f"node_{event.event}", "nodes": event.node},
            news=(f"{event.event} {event.job_id or ''}".strip(),),
        )
        for receiver in self.config.lifecycle.notify:
            outcome = self.notifiers.send(receiver, alert)
            if not outcome.ok:
                log.warning("node %s: notification to %s: %s", event.node, receiver, outcome.detail)


NODE_NEWS = {"kept": "kept drained", "check_failed": "failed its health check"}
"""How a node alert's title says its lifecycle step."""


class RecoveryMetrics(Collector):
    """The recovery loop's series, read at scrape time: drains by others, stalled sources,
    node lifecycle events and notifications waiting."""

    def __init__(self, recovery: Recovery) -> None:
        self.recovery = recovery

    def collect(self) -> Iterator[Metric]:
        r = self.recovery
        drains = CounterMetricFamily(
            "medic_drains_by_others", "Slurm drains set by others (health checks, people)"
        )
        drains.add_metric([], r.drains.count)
        stalled = GaugeMetricFamily(
            "medic_source_stalled", "1 while a source's watermark stands still", labels=["source"]
        )
        for name in r.deadman.moved:
            stalled.add_metric([name], 1.0 if name in r.deadman.stalled else 0.0)
        events = CounterMetricFamily(
            "medic_node_lifecycle_events",
            "Node checks started, passed, failed; nodes resumed, kept, flagged lemons",
            labels=["event"],
        )
        counts = r.lifecycle.counts if r.lifecycle is not None else {}
        for event in ("check_started", "check_passed", "check_failed", "resumed", "kept", "lemon"):
            events.add_metric([event], counts.get(event, 0))
        pending = GaugeMetricFamily(
            "medic_notifications_pending", "Notifications waiting (rate limit, receiver down)"
        )
        pending.add_metric([], sum(1 for _ in r.notifiers.deliveries.pending()))
        yield from (drains, stalled, events, pending)
