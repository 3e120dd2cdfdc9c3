"""The ``[rules]`` settings: mode, guards, webhook receivers, routes and the Slurm executor.

``load_rules`` merges a user's ``[rules]`` table over the defaults shipped in
``default_rules.toml`` and validates the result once, into frozen dataclasses; every problem
is a one-line ``ConfigError`` naming the setting (``rules.routes[1].kinds[0]: ...``).
Merging: ``mode`` and the keys of ``[rules.guards]`` and ``[rules.slurm]`` override the
defaults one by one; ``routes`` and ``receivers``, when given, replace the default lists.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from medic import schema
from medic.actions.model import SlurmAction
from medic.actions.notifiers.config import ReceiverConfig
from medic.actions.recovery_config import DeadmanConfig, LifecycleConfig, RestartLoopConfig
from medic.config import from_dict

Mode = Literal["monitor", "enforce"]
MERGED_TABLES = ("guards", "slurm", "lifecycle", "restart_loop", "deadman")


@dataclass(frozen=True)
class RouteConfig:
    """Which detections a route matches and what it does with them. Empty lists match all."""

    name: str
    kinds: tuple[str, ...] = ()
    culprits: bool | None = None
    """True: only detections that blame nodes; False: only those that blame none."""
    min_score: float = 0.0
    partitions: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    users_deny: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    jobs_deny: tuple[str, ...] = ()
    actions: tuple[SlurmAction, ...] = ()
    notify: tuple[str, ...] = ()
    """Receiver names to post the detection and its decisions to."""
    continue_matching: bool = False
    """Go on to the next routes after this one matched (Alertmanager's ``continue``)."""

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in schema.DETECTION_KINDS]
        if unknown:
            known = ", ".join(schema.DETECTION_KINDS)
            raise ValueError(f"route '{self.name}': unknown kind '{unknown[0]}' ({known})")
        if len(set(self.actions)) != len(self.actions):
            raise ValueError(f"route '{self.name}': an action is listed twice")
        if "cancel" in self.actions and {"requeue", "hold", "release"} & set(self.actions):
            raise ValueError(f"route '{self.name}': cancel conflicts with requeue/hold/release")
        if "drain" in self.actions and self.culprits is False:
            raise ValueError(f"route '{self.name}': drain needs culprits (culprits = false)")
        if not self.actions and not self.notify:
            raise ValueError(f"route '{self.name}': no actions and nothing to notify")
        if self.min_score < 0:
            raise ValueError(f"route '{self.name}': min_score must be >= 0")

    @property
    def needs_job_facts(self) -> bool:
        return bool(self.partitions or self.users or self.users_deny)


@dataclass(frozen=True)
class GuardConfig:
    """Limits that hold whatever the routes say; each one that stops an action is recorded."""

    partitions: tuple[str, ...] = ()
    """Partition allow-list for Slurm actions; empty allows every partition."""
    incident_window_s: float = 600.0
    """Detections of one job within this span of the incident's first are one incident, and an
    incident gets each action at most once (a detection whose onset follows medic's requeue of
    the job opens a new one)."""
    node_cooldown_s: float = 600.0
    """No node action on a node within this span after the previous one."""
    max_drained_fraction: float = 0.1
    """At most this fraction of the cluster's nodes drained by medic at once."""
    max_drains_per_hour: int = 10
    max_restarts_per_job: int = 3
    """Requeues of one job by medic within ``restart_window_s``."""
    restart_window_s: float = 86_400.0
    cluster_nodes: int | None = None
    """Cluster size for the drained fraction; by default asked from Slurm (or the recording)."""

    def __post_init__(self) -> None:
        if not 0 <= self.max_drained_fraction <= 1:
            raise ValueError("max_drained_fraction must be between 0 and 1")
        for name in ("incident_window_s", "node_cooldown_s", "restart_window_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.max_drains_per_hour < 0 or self.max_restarts_per_job < 0:
            raise ValueError("budgets must be >= 0")
        if self.cluster_nodes is not None and self.cluster_nodes < 1:
            raise ValueError("cluster_nodes must be at least 1")


@dataclass(frozen=True)
class SlurmConfig:
    """How actions reach Slurm: its CLI (default) or slurmrestd."""

    executor: Literal["cli", "rest"] = "cli"
    timeout_s: float = 10.0
    """Per command or request."""
    retries: int = 3
    """Further attempts after a transient failure (controller unreachable, timeout)."""
    backoff_s: float = 0.2
    """First pause between attempts; doubles each time."""
    verify_timeout_s: float = 10.0
    """How long to re-read Slurm until the action's effect shows."""
    poll_s: float = 0.1
    restart_now: bool = False
    """After a requeue, set ``StartTime=now`` so the job need not wait out Slurm's credential
    expiry (``cred_expire``, 120 s by default) before it runs again."""
    reason_prefix: str = "medic"
    """Drain reasons start with this, so medic's drains can be told from an operator's."""
    rest_url: str = "http://localhost"
    rest_socket: str | None = None
    """A unix socket of slurmrestd (``rest_auth/local``); else ``rest_url`` with JWT headers."""
    rest_api: str = "v0.0.38"
    rest_user: str | None = None
    rest_token_env: str = "SLURM_JWT"

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.verify_timeout_s < 0 or self.poll_s <= 0:
            raise ValueError("timeouts must be positive")
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError("retries and backoff_s must be >= 0")


@dataclass(frozen=True)
class RulesConfig:
    mode: Mode = "monitor"
    guards: GuardConfig = field(default_factory=GuardConfig)
    receivers: tuple[ReceiverConfig, ...] = ()
    routes: tuple[RouteConfig, ...] = ()
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    restart_loop: RestartLoopConfig = field(default_factory=RestartLoopConfig)
    deadman: DeadmanConfig = field(default_factory=DeadmanConfig)

    def __post_init__(self) -> None:
        for what, names in (
            ("route", [r.name for r in self.routes]),
            ("receiver", [r.name for r in self.receivers]),
        ):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what} name '{twice[0]}' is used twice")
        receivers = {r.name for r in self.receivers}
        notified = [(f"route '{r.name}'", r.notify) for r in self.routes] + [
            ("lifecycle", self.lifecycle.notify),
            ("restart_loop", self.restart_loop.notify),
            ("deadman", self.deadman.notify),
        ]
        for what, wanted in notified:
            missing = [n for n in wanted if n not in receivers]
            if missing:
                raise ValueError(f"{what}: unknown receiver '{missing[0]}'")

    def receiver(self, name: str) -> ReceiverConfig:
        return next(r for r in self.receivers if r.name == name)


@cache
def default_table() -> dict[str, Any]:
    """The ``[rules]`` table of the shipped ``default_rules.toml``."""
    text = resources.files("medic.actions").joinpath("default_rules.toml").read_text()
    table: dict[str, Any] = tomllib.loads(text)["rules"]
    return table


def merged_table(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """The user's ``[rules]`` table laid over the defaults (see the module docstring)."""
    merged = dict(default_table())
    for key, value in (user or {}).items():
        if key in MERGED_TABLES and isinstance(value, Mapping):
            merged[key] = {**merged.get(key, {}), **value}
        else:
            merged[key] = value
    return merged


def load_rules(user: Mapping[str, Any] | None = None) -> RulesConfig:
    """Validated rules from a ``[rules]`` table (None: the defaults). Raises ConfigError."""
    return from_dict(RulesConfig, merged_table(user), "rules")
