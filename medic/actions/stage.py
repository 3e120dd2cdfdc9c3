"""The actions stage: the Pipeline's Responder that turns new incidents into guarded, audited
Slurm actions.

For each detection: read the job's partition and user from Slurm when a route or guard needs
them, match the routes, let the guards review the intents (in event time ``now``, so replay
behaves like live), claim each surviving action in the ledger, execute it (the Slurm actions
first, then the webhooks, which carry what was done), and log one ``Decision`` per intent,
suppressed ones included. Executors report failures as outcomes, so a Slurm that is down
costs a ``failed`` row, never the service.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from medic.actions.config import RulesConfig, SlurmConfig, load_rules
from medic.actions.executor import Executor, Notifier
from medic.actions.guards import Guards, Verdict
from medic.actions.ledger import Ledger, action_key
from medic.actions.model import NOTIFY, Decision, Intent, JobFacts, Outcome, Status
from medic.actions.notifiers import Notifiers
from medic.actions.recorder import ActionLog, RecordingExecutor
from medic.actions.restart_loop import JobAttempts, RestartLoopGuard
from medic.actions.rules import RuleSet, describe
from medic.actions.slurm_cli import SlurmCli
from medic.actions.slurmrest import SlurmRest
from medic.config import ConfigError
from medic.detectors.base import Detection
from medic.nvrx import NvrxGuard, NvrxWatch
from medic.pipeline import PipelineConfig, pipeline_config
from medic.recording import Recording

log = logging.getLogger(__name__)

MAX_REASON = 200


def build_executor(config: SlurmConfig) -> Executor:
    if config.executor == "rest":
        return SlurmRest(config)
    return SlurmCli(config)


def drain_reason(prefix: str, detection: Detection) -> str:
    """The node's drain reason in Slurm: names medic, the detection and what it saw."""
    job = f"job {detection.job_id}" if detection.job_id else "no job"
    text = f"{prefix}: {detection.kind} {job} detection {detection.id}: {detection.summary}"
    return " ".join(text.split())[:MAX_REASON]


class ActionStage:
    """Detections in, decisions out (see the module docstring)."""

    def __init__(
        self,
        config: RulesConfig,
        executor: Executor,
        notifier: Notifier | None = None,
        ledger: Ledger | None = None,
        action_log: ActionLog | None = None,
        incident_window_s: float = PipelineConfig.incident_window_s,
    ) -> None:
        for route in config.routes:
            for action in route.actions:
                if action not in executor.supports:
                    raise ConfigError(
                        f"rules: route '{route.name}' asks for {action}, which the "
                        f"{executor.name} executor cannot do"
                    )
        self.config = config
        self.executor = executor
        self.notifier = notifier or Notifiers(config.receivers)
        self.ledger = ledger if ledger is not None else Ledger()
        self.log = action_log if action_log is not None else ActionLog()
        self.rules = RuleSet(config)
        self.guards = Guards(config.guards, config.mode, incident_window_s)
        self.attempts = JobAttempts()
        """Each job's attempts and their progress: a pipeline observer the stage's owner adds."""
        self.restart_loop = RestartLoopGuard(config.restart_loop, self.attempts, self.guards)
        self.nvrx = NvrxWatch()
        self.nvrx_guard = NvrxGuard(config.nvrx, self.nvrx)

    @classmethod
    def from_settings(
        cls,
        settings: Mapping[str, Any],
        executor: Executor | None = None,
        notifier: Notifier | None = None,
        ledger: Ledger | None = None,
    ) -> ActionStage:
        """From a settings mapping's ``[rules]`` table (the shipped defaults when absent)."""
        config = load_rules(settings.get("rules"))
        executor = executor or build_executor(config.slurm)
        window = pipeline_config(settings).incident_window_s
        return cls(config, executor, notifier, ledger, incident_window_s=window)

    @classmethod
    def for_recording(cls, recording: Recording, settings: Mapping[str, Any]) -> ActionStage:
        """The backtest's actions stage: ``[rules]`` from ``settings``, the recording executor
        (which also takes the notifications down instead of sending them)."""
        recorder = RecordingExecutor.for_recording(recording)
        window = pipeline_config(settings).incident_window_s
        return cls(
            load_rules(settings.get("rules")), recorder, notifier=recorder, incident_window_s=window
        )

    def handle(self, detections: list[Detection], now: int) -> None:
        for detection in detections:
            self.log.extend(self.respond(detection, now))

    def actions_table(self) -> pa.Table:
        """Every decision so far in the ``actions`` schema (what a backtest writes)."""
        return self.log.table()

    @property
    def observers(self) -> list[JobAttempts | NvrxWatch]:
        """What the stage needs to see of the streams (progress, logs, scheduler): the pipeline
        that feeds the stage adds these as observers."""
        return [self.attempts, self.nvrx]

    def state_size(self) -> int:
        return self.guards.state_size() + self.attempts.state_size()

    def respond(self, detection: Detection, now: int) -> list[Decision]:
        """Decide and act on one detection; one decision per action a route asked for."""
        facts = self._facts(detection)
        match = self.rules.match(detection, facts)
        if not match.intents:
            return []
        cluster_nodes = None
        if any(intent.action == "drain" for intent in match.intents):
            if self.config.mode == "enforce":
                self._sync_drained()
            if self.config.guards.cluster_nodes is None:
                cluster_nodes = self.executor.node_count()
        verdicts = self.guards.review(detection, match.intents, facts, now, cluster_nodes)
        verdicts = self.nvrx_guard.review(verdicts, detection, now)
        verdicts = self.restart_loop.review(verdicts, detection, now)
        decisions: list[Decision] = []
        for verdict in verdicts:
            decisions.append(self._decide(verdict, detection, now, decisions))
        return decisions

    def _facts(self, detection: Detection) -> JobFacts | None:
        if not self.rules.needs_job_facts or detection.job_id is None:
            return None
        return self.executor.job(detection.job_id)

    def _sync_drained(self) -> None:
        """Enforce mode takes Slurm's word for the nodes medic drained (monitor mode keeps its
        own count of what it would have drained)."""
        drained = self.executor.drained_nodes()
        if drained is not None:
            prefix = self.config.slurm.reason_prefix
            self.guards.sync_drained(n for n, why in drained.items() if why.startswith(prefix))

    def _decide(
        self, verdict: Verdict, detection: Detection, now: int, earlier: list[Decision]
    ) -> Decision:
        intent = verdict.intent

        def decision(status: Status, guard: str | None, reason: str) -> Decision:
            return Decision(
                time=now,
                detection_id=detection.id,
                job_id=intent.job_id,
                node=intent.node,
                action=intent.action,
                mode=self.config.mode,
                status=status,
                guard=guard,
                reason=(
                    f"route {intent.route} ({describe(detection)}): "
                    f"{intent.action} {intent.target}: {reason}"
                ),
            )

        if verdict.guard is not None:
            return decision("suppressed", verdict.guard, verdict.reason)
        key = action_key(verdict.incident, intent.action, intent.target)
        if not self.ledger.claim(key, now):
            return decision("suppressed", "ledger", f"already run (idempotency key {key})")
        if intent.action == NOTIFY:
            outcome = self._notify(intent.receiver or "", detection, earlier)
        else:
            outcome = self._execute(intent, detection)
        if outcome.ok:
            log.info("%s %s: %s", intent.action, intent.target, outcome.detail)
        else:
            log.warning("%s %s failed: %s", intent.action, intent.target, outcome.detail)
            if intent.action == "drain" and intent.node is not None:
                self.guards.undo_drain(intent.node)
        return decision(outcome.status, None, outcome.detail)

    def _execute(self, intent: Intent, detection: Detection) -> Outcome:
        node, job_id = intent.node or "", intent.job_id or ""
        if intent.action == "drain":
            reason = drain_reason(self.config.slurm.reason_prefix, detection)
            return self.executor.drain(node, reason)
        if intent.action == "requeue":
            return self.executor.requeue(job_id, intent.exclude)
        if intent.action == "hold":
            return self.executor.hold(job_id)
        if intent.action == "release":
            return self.executor.release(job_id)
        if intent.action == "cancel":
            return self.executor.cancel(job_id)
        raise AssertionError(f"no executor call for {intent.action}")

    def _notify(self, receiver: str, detection: Detection, earlier: Iterable[Decision]) -> Outcome:
        payload = {
            "detection": {**detection.row(), "id": detection.id},
            "mode": self.config.mode,
            "decisions": [d.row() for d in earlier],
            "text": f"medic: {describe(detection)}: {detection.summary}",
        }
        return self.notifier.notify(receiver, payload)
