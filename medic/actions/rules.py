"""Routes: from a detection (and what Slurm says about its job) to the actions asked for.

Pure: no I/O, no clock. ``RuleSet`` holds the validated routes as an immutable tuple and tries
them in order, as Alertmanager walks its route tree: the first route that matches decides,
unless it sets ``continue_matching``. Every route gets a verdict that says why it matched or
why not, so ``medic rules test`` can show an operator the whole reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass

from medic.actions.config import RouteConfig, RulesConfig
from medic.actions.model import NOTIFY, SLURM_ACTIONS, Intent, JobFacts
from medic.detectors.base import Detection

ORDER = {action: i for i, action in enumerate((*SLURM_ACTIONS, NOTIFY))}
"""Drains first (so a requeued job cannot land on a culprit again), notifications last (so
they can report what was done)."""


@dataclass(frozen=True)
class RouteVerdict:
    route: str
    matched: bool
    why: str


@dataclass(frozen=True)
class Match:
    """The routes' verdicts on one detection and the actions they ask for, in execution order."""

    verdicts: tuple[RouteVerdict, ...]
    intents: tuple[Intent, ...]


def _job_listed(job_id: str, listed: tuple[str, ...]) -> bool:
    """A job is listed by its id or, for an array task ``4242_7``, by its array's id."""
    return job_id in listed or job_id.split("_", 1)[0] in listed


def _fact_check(
    name: str, value: str | None, allow: tuple[str, ...], deny: tuple[str, ...]
) -> str | None:
    """Why a partition/user filter rejects ``value``; an unknown value never passes a filter."""
    if not allow and not deny:
        return None
    if value is None:
        return f"{name} unknown (the route filters on it)"
    if allow and value not in allow:
        return f"{name} {value} not in {', '.join(allow)}"
    if value in deny:
        return f"{name} {value} is denied"
    return None


def _job_mismatch(route: RouteConfig, job_id: str | None) -> str | None:
    if not route.jobs and not route.jobs_deny:
        return None
    if job_id is None:
        return "the detection names no job"
    if route.jobs and not _job_listed(job_id, route.jobs):
        return f"job {job_id} not in jobs"
    if _job_listed(job_id, route.jobs_deny):
        return f"job {job_id} is in jobs_deny"
    return None


def _mismatch(route: RouteConfig, d: Detection, facts: JobFacts | None) -> str | None:
    """The first reason ``route`` does not match ``d``; None when it matches."""
    if route.kinds and d.kind not in route.kinds:
        return f"kind {d.kind} not in {', '.join(route.kinds)}"
    if route.culprits is True and not d.culprits:
        return "the detection blames no node"
    if route.culprits is False and d.culprits:
        return f"the detection blames {', '.join(d.culprits)}"
    if route.tiers and d.tier not in route.tiers:
        return f"tier {d.tier} not in {', '.join(route.tiers)}"
    if d.score < route.min_score:
        return f"score {d.score:.3g} below min_score {route.min_score:.3g}"
    return (
        _job_mismatch(route, d.job_id)
        or _fact_check("partition", facts.partition if facts else None, route.partitions, ())
        or _fact_check("user", facts.user if facts else None, route.users, route.users_deny)
    )


def _intents(route: RouteConfig, d: Detection) -> list[Intent]:
    culprits = tuple(sorted(set(d.culprits)))
    out: list[Intent] = []
    for action in route.actions:
        if action == "drain":
            nodes: tuple[str | None, ...] = culprits or (None,)
            out.extend(Intent("drain", route.name, node=n, job_id=d.job_id) for n in nodes)
        else:
            exclude = culprits if action == "requeue" else ()
            out.append(Intent(action, route.name, job_id=d.job_id, exclude=exclude))
    out.extend(Intent(NOTIFY, route.name, job_id=d.job_id, receiver=name) for name in route.notify)
    return out


def describe(d: Detection) -> str:
    """The detection in a few words, for verdicts and reasons."""
    blamed = f"on {', '.join(d.culprits)}" if d.culprits else "no culprit"
    job = f"job {d.job_id}" if d.job_id else "no job"
    tier = "" if d.confirmed else f"{d.tier} "
    return f"{tier}{d.kind} of {job}, {blamed}, score {d.score:.3g}"


class RuleSet:
    """The validated routes of a ``RulesConfig``, tried in order."""

    def __init__(self, config: RulesConfig) -> None:
        self.config = config
        self.routes = config.routes
        self.needs_job_facts = bool(config.guards.partitions) or any(
            r.needs_job_facts for r in self.routes
        )

    def match(self, detection: Detection, facts: JobFacts | None = None) -> Match:
        verdicts: list[RouteVerdict] = []
        intents: list[Intent] = []
        decided_by: str | None = None
        for route in self.routes:
            if decided_by is not None:
                verdicts.append(RouteVerdict(route.name, False, f"route {decided_by} decided"))
                continue
            why = _mismatch(route, detection, facts)
            if why is not None:
                verdicts.append(RouteVerdict(route.name, False, why))
                continue
            verdicts.append(RouteVerdict(route.name, True, f"matched {describe(detection)}"))
            intents.extend(_intents(route, detection))
            if not route.continue_matching:
                decided_by = route.name
        return Match(tuple(verdicts), _ordered_unique(intents))


def _ordered_unique(intents: list[Intent]) -> tuple[Intent, ...]:
    """Execution order; an action two routes ask for on the same target is kept once."""
    seen: set[tuple[str, str | None, str | None, str | None]] = set()
    out: list[Intent] = []
    for intent in sorted(intents, key=lambda i: ORDER[i.action]):
        key = (intent.action, intent.node, intent.job_id, intent.receiver)
        if key not in seen:
            seen.add(key)
            out.append(intent)
    return tuple(out)
