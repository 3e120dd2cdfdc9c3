"""``medic rules test``: what one detection would trigger under a config, and why.

It runs the real actions stage on the detection, with the recording executor standing in for
Slurm (so nothing is touched) and fresh guard state: the answer shows each route's verdict and
each action's decision, suppressions and the guard behind them included. The NVRx guard reads
what serve would: the cycle files of ``[rules.nvrx] cycle_info_dir``, and the job's exit status
under ``ft_launcher`` when it is given (93: NVRx decided not to restart). The restart-loop guard
judges a job's attempts from its progress, which a single detection does not carry:
``medic diagnose`` on the job's logs applies it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medic.actions.config import RulesConfig
from medic.actions.model import Decision, JobFacts
from medic.actions.recorder import RecordingExecutor
from medic.actions.rules import RouteVerdict, describe
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.timeutil import iso, to_us

DETECTION_KEYS = ("job_id", "kind", "culprits", "ranks", "score", "detector", "summary", "tier")
FACT_KEYS = ("partition", "user", "exit_code")
TIME_KEYS = ("detected_at", "onset")


@dataclass(frozen=True)
class Explanation:
    detection: Detection
    facts: JobFacts | None
    mode: str
    cluster_nodes: int | None
    verdicts: tuple[RouteVerdict, ...]
    decisions: tuple[Decision, ...]


def exit_code_from_json(text: str) -> int | None:
    """The ``exit_code`` of a detection JSON object (see ``detection_from_json``), if any."""
    value = json.loads(text).get("exit_code")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"detection JSON: exit_code must be an integer, got {value!r}")
    return value


def detection_from_json(text: str) -> tuple[Detection, JobFacts | None]:
    """A detection (and its job's partition/user) from a JSON object; ValueError names the
    problem. Times are ISO-8601 strings or microseconds since the epoch."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"detection JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("detection JSON must be an object")
    unknown = sorted(set(data) - {*DETECTION_KEYS, *FACT_KEYS, *TIME_KEYS})
    if unknown:
        known = ", ".join((*DETECTION_KEYS, *TIME_KEYS, *FACT_KEYS))
        raise ValueError(f"detection JSON: unknown key '{unknown[0]}' (known: {known})")
    if "kind" not in data:
        raise ValueError("detection JSON: 'kind' is required")
    fields = {k: data[k] for k in DETECTION_KEYS if k in data}
    for key in TIME_KEYS:
        if data.get(key) is not None:
            value = data[key]
            fields[key] = to_us(value) if isinstance(value, str) else int(value)
    return make_detection(**fields), make_facts(
        data.get("job_id"), data.get("partition"), data.get("user")
    )


def make_detection(
    kind: str,
    job_id: str | None = None,
    culprits: Sequence[str] = (),
    ranks: Sequence[int] = (),
    score: float = 1.0,
    detector: str = "rules-test",
    summary: str = "",
    detected_at: int = 0,
    onset: int | None = None,
    tier: str = "confirmed",
) -> Detection:
    """A Detection from loosely typed input; ValueError on a bad kind, score or list."""
    try:
        return Detection(
            job_id=None if job_id is None else str(job_id),
            kind=str(kind),
            culprits=tuple(str(c) for c in culprits),
            ranks=tuple(int(r) for r in ranks),
            score=float(score),
            detector=str(detector),
            summary=str(summary),
            detected_at=int(detected_at),
            onset=onset,
            tier=str(tier),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"detection: {exc}") from None


def make_facts(job_id: Any, partition: str | None, user: str | None) -> JobFacts | None:
    if job_id is None or (partition is None and user is None):
        return None
    return JobFacts(str(job_id), partition, user)


def explain(
    config: RulesConfig,
    detection: Detection,
    facts: JobFacts | None = None,
    cluster_nodes: int | None = None,
    exit_code: int | None = None,
) -> Explanation:
    """Run the stage on ``detection`` against a recorder; ``cluster_nodes`` sizes the
    drained-fraction budget (the config's ``cluster_nodes`` wins when set); ``exit_code`` is
    the job's exit status, when it ended under NVRx's ``ft_launcher``."""
    if config.guards.cluster_nodes is None and cluster_nodes is not None:
        guards = dataclasses.replace(config.guards, cluster_nodes=cluster_nodes)
        config = dataclasses.replace(config, guards=guards)
    jobs: Mapping[str, JobFacts] = {facts.job_id: facts} if facts else {}
    recorder = RecordingExecutor(jobs=jobs)
    stage = ActionStage(config, recorder, notifier=recorder)
    if config.nvrx.cycle_info_dir:
        stage.nvrx.read_cycle_files(Path(config.nvrx.cycle_info_dir))
    if exit_code is not None and detection.job_id is not None:
        stage.nvrx.ended(detection.job_id, exit_code)
    verdicts = stage.rules.match(detection, facts).verdicts
    decisions = stage.respond(detection, detection.detected_at)
    return Explanation(
        detection,
        facts,
        config.mode,
        config.guards.cluster_nodes,
        verdicts,
        tuple(decisions),
    )


def render(explanation: Explanation) -> list[str]:
    """The explanation as lines of plain text."""
    d = explanation.detection
    facts = explanation.facts
    known = f"partition {facts.partition or '?'}, user {facts.user or '?'}" if facts else ""
    lines = [
        f"detection: {describe(d)}" + (f" ({known})" if known else ""),
        f"detection id {d.id}" + (f", at {iso(d.detected_at)}" if d.detected_at else ""),
        f"mode: {explanation.mode}"
        + (" (decide and record, touch nothing)" if explanation.mode == "monitor" else ""),
        "cluster size for the drain budget: "
        + (f"{explanation.cluster_nodes} nodes" if explanation.cluster_nodes else "unknown"),
        "routes:",
    ]
    for verdict in explanation.verdicts:
        mark = "matched" if verdict.matched else "skipped"
        lines.append(f"  {mark:8} {verdict.route}: {verdict.why}")
    if not explanation.verdicts:
        lines.append("  (no routes configured)")
    lines.append("actions:")
    for decision in explanation.decisions:
        if decision.guard:
            outcome = f"suppressed by guard {decision.guard}"
        else:
            outcome = "would run" if decision.status == "recorded" else decision.status
        lines.append(f"  {outcome}: {decision.reason}")
    if not explanation.decisions:
        lines.append("  none: no route asks for an action")
    return lines
