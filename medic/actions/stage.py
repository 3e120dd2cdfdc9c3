"""The actions stage: the Pipeline's Responder that turns new incidents into guarded, audited
Slurm actions.

For each detection: read the job's partition and user from Slurm when a route or guard needs
them, match the routes, let the guards review the intents (in event time ``now``, so replay
behaves like live), write the surviving actions to the journal as one decision before the first
runs, execute them in order (the Slurm actions first, then the webhooks, which carry what was
done), each marked issued and verified in the journal, and log one ``Decision`` per intent,
suppressed ones included. After a restart, ``resume`` finishes the decisions the journal shows
unfinished. Executors report failures as outcomes, so a Slurm that is down
costs a ``failed`` row, never the service.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from medic.actions.config import RulesConfig
from medic.actions.executor import Executor, Notifier, Order, carry_out
from medic.actions.guards import Guards, Verdict
from medic.actions.journal import Entry, Journal, Step, step_key
from medic.actions.model import NOTIFY, Decision, Intent, JobFacts, Outcome, failed
from medic.actions.notifiers import Notifiers
from medic.actions.recorder import ActionLog, RecordingExecutor
from medic.actions.registry import build_executor
from medic.actions.restart_loop import JobAttempts, RestartLoopGuard
from medic.actions.rules import RuleSet, describe
from medic.config import ConfigError
from medic.detectors.base import Detection
from medic.nvrx import NvrxGuard, NvrxWatch
from medic.pipeline_config import PipelineConfig
from medic.recording import Recording
from medic.settings_tree import Settings

log = logging.getLogger(__name__)

MAX_REASON = 200


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
        journal: Journal | None = None,
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
        self.journal = journal if journal is not None else Journal()
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
        settings: Settings | Mapping[str, Any],
        executor: Executor | None = None,
        notifier: Notifier | None = None,
        journal: Journal | None = None,
    ) -> ActionStage:
        """From the settings' ``[rules]`` (the shipped defaults when absent) and incident
        window."""
        tree = Settings.load(settings)
        executor = executor or build_executor(tree.rules.slurm)
        window = tree.pipeline.incident_window_s
        return cls(tree.rules, executor, notifier, journal, incident_window_s=window)

    @classmethod
    def for_recording(
        cls, recording: Recording, settings: Settings | Mapping[str, Any]
    ) -> ActionStage:
        """The backtest's actions stage: ``[rules]`` from ``settings``, the recording executor
        (which also takes the notifications down instead of sending them)."""
        tree = Settings.load(settings)
        recorder = RecordingExecutor.for_recording(recording)
        window = tree.pipeline.incident_window_s
        return cls(tree.rules, recorder, notifier=recorder, incident_window_s=window)

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
        slots: list[Decision | None] = []
        planned: dict[int, Step] = {}
        keys: set[str] = set()
        for verdict in verdicts:
            intent = verdict.intent
            key = step_key(verdict.incident, intent.action, intent.target)
            earlier = self.journal.planned_by(key)
            if verdict.guard is not None:
                slots.append(self._decision(detection, intent, now, verdict.reason, verdict.guard))
            elif earlier is not None or key in keys:
                why = f"already planned (decision {earlier or 'this one'}, key {key!r})"
                slots.append(self._decision(detection, intent, now, why, "journal"))
            else:
                keys.add(key)
                planned[len(slots)] = self._step(key, verdict, detection, facts)
                slots.append(None)
        if planned:
            entry = self.journal.plan(
                now,
                verdicts[0].incident,
                {**detection.row(), "id": detection.id},
                describe(detection),
                list(planned.values()),
            )
            for index, slot in enumerate(planned):
                done_so_far = [d for d in slots if d is not None]
                slots[slot] = self._run_step(entry, index, now, done_so_far)
            self.journal.close(entry, now)
        return [d for d in slots if d is not None]

    def resume(self, now: int) -> None:
        """Finish the decisions the journal shows unfinished (medic stopped midway, kill -9
        included): every step not verified runs now, through an executor that re-reads the
        target's state first (a node already drained is left alone, a job whose restart count
        rose since the plan is not requeued again); a notification that may have gone out is
        not sent again. Each step's decision, those verified before the stop included (the
        history had not recorded them), goes to the action log. While Slurm does not answer,
        the decisions stay unfinished, for a later call (the service's checkpoint tick)."""
        unfinished = self.journal.unfinished()
        acts = any(s.action != NOTIFY for e in unfinished for s in e.steps if s.verified is None)
        if acts and self.executor.node_count() is None:
            log.error(
                "cannot resume %d unfinished decision(s): Slurm does not answer; trying again",
                len(unfinished),
            )
            return
        for entry in unfinished:
            log.warning(
                "resuming decision %s (%s): %d of %d steps not verified",
                entry.id,
                entry.about,
                len(entry.unverified),
                len(entry.steps),
            )
            done_so_far: list[Decision] = []
            for index, step in enumerate(entry.steps):
                if step.verified is None and step.action == NOTIFY and step.issued is not None:
                    outcome = failed("interrupted while sending: not sent again")
                    self.journal.verified(entry, index, outcome, now)
                if step.verified is None:
                    decision = self._run_step(entry, index, now, done_so_far)
                else:
                    decision = self._journaled(entry, step, now)
                done_so_far.append(decision)
            self.log.extend(done_so_far)
            self.journal.close(entry, now)

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

    def _step(
        self, key: str, verdict: Verdict, detection: Detection, facts: JobFacts | None
    ) -> Step:
        intent = verdict.intent
        step = Step(
            key,
            intent.action,
            intent.target,
            intent.route,
            intent.node,
            intent.job_id,
            intent.receiver,
            intent.exclude,
        )
        if intent.action == "drain":
            step.reason = drain_reason(self.config.slurm.reason_prefix, detection)
        if intent.action == "requeue" and intent.job_id is not None:
            if facts is None or facts.job_id != intent.job_id or facts.restarts is None:
                facts = self.executor.job(intent.job_id)
            step.restarts = None if facts is None else facts.restarts
        return step

    def _run_step(self, entry: Entry, index: int, now: int, earlier: list[Decision]) -> Decision:
        """Issue one planned step, journal its outcome and return its decision."""
        step = entry.steps[index]
        self.journal.issued(entry, index, now)
        if step.action == NOTIFY:
            outcome = self._notify(step.receiver or "", entry.detection, entry.about, earlier)
        else:
            outcome = self._execute(step)
        self.journal.verified(entry, index, outcome, now)
        if outcome.status == "done":
            log.info("%s %s: %s", step.action, step.target, outcome.detail)
        else:
            log.warning("%s %s %s: %s", step.action, step.target, outcome.status, outcome.detail)
            if outcome.status == "failed" and step.action == "drain" and step.node is not None:
                self.guards.undo_drain(step.node)
        return self._journaled(entry, step, now)

    def _journaled(self, entry: Entry, step: Step, now: int) -> Decision:
        """The decision of a verified step, as the journal holds it."""
        return Decision(
            time=now,
            detection_id=str(entry.detection.get("id", "")),
            job_id=step.job_id,
            node=step.node,
            action=step.action,
            mode=self.config.mode,
            status=step.status,  # type: ignore[arg-type]
            guard=None,
            reason=f"route {step.route} ({entry.about}): {step.action} {step.target}: "
            f"{step.detail}",
        )

    def _decision(
        self, detection: Detection, intent: Intent, now: int, reason: str, guard: str
    ) -> Decision:
        """A suppressed intent's decision."""
        return Decision(
            time=now,
            detection_id=detection.id,
            job_id=intent.job_id,
            node=intent.node,
            action=intent.action,
            mode=self.config.mode,
            status="suppressed",
            guard=guard,
            reason=(
                f"route {intent.route} ({describe(detection)}): "
                f"{intent.action} {intent.target}: {reason}"
            ),
        )

    def _execute(self, step: Step) -> Outcome:
        order = Order(
            step.action,
            node=step.node or "",
            job_id=step.job_id or "",
            reason=step.reason or self.config.slurm.reason_prefix,
            exclude=tuple(step.exclude),
            restarts=step.restarts,
        )
        return carry_out(self.executor, order)

    def _notify(
        self, receiver: str, detection: dict[str, Any], about: str, earlier: Iterable[Decision]
    ) -> Outcome:
        payload = {
            "detection": detection,
            "mode": self.config.mode,
            "decisions": [d.row() for d in earlier],
            "text": f"medic: {about}: {detection.get('summary', '')}",
        }
        return self.notifier.notify(receiver, payload)
