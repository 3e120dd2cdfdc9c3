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
from medic.actions.recovery_config import (
    DeadmanConfig,
    LifecycleConfig,
    NvrxConfig,
    RestartLoopConfig,
)
from medic.config import Count, Fraction, NonNegative, Positive, PositiveCount, from_dict

Mode = Literal["monitor", "enforce"]
MERGED_TABLES = ("guards", "slurm", "lifecycle", "restart_loop", "deadman", "nvrx")


@dataclass(frozen=True)
class RouteConfig:
    """Which detections a route matches and what it does with them. Empty lists match all."""

    name: str
    """Names the route in the actions table and in `medic rules test`."""
    kinds: tuple[str, ...] = ()
    """Detection kinds the route matches."""
    culprits: bool | None = None
    """True: only detections that blame nodes; False: only those that blame none."""
    min_score: NonNegative = 0.0
    """Least detection score the route matches."""
    tiers: tuple[str, ...] = ()
    """Detection tiers the route matches (``confirmed``, ``suspect``; empty: both). The default
    routes that act ask for ``confirmed``: a suspect is silence or slowness alone."""
    partitions: tuple[str, ...] = ()
    """Partitions of the jobs the route matches."""
    users: tuple[str, ...] = ()
    """Users whose jobs the route matches."""
    users_deny: tuple[str, ...] = ()
    """Users whose jobs the route never matches."""
    jobs: tuple[str, ...] = ()
    """Job ids the route matches."""
    jobs_deny: tuple[str, ...] = ()
    """Job ids the route never matches."""
    actions: tuple[SlurmAction, ...] = ()
    """Slurm actions taken, in order: drain (the culprit nodes), requeue, hold, release, cancel
    (the job)."""
    notify: tuple[str, ...] = ()
    """Receiver names to post the detection and its decisions to."""
    continue_matching: bool = False
    """Go on to the next routes after this one matched (Alertmanager's ``continue``)."""

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in schema.DETECTION_KINDS]
        if unknown:
            known = ", ".join(schema.DETECTION_KINDS)
            raise ValueError(f"route '{self.name}': unknown kind '{unknown[0]}' ({known})")
        odd = [t for t in self.tiers if t not in schema.DETECTION_TIERS]
        if odd:
            known = ", ".join(schema.DETECTION_TIERS)
            raise ValueError(f"route '{self.name}': unknown tier '{odd[0]}' ({known})")
        if len(set(self.actions)) != len(self.actions):
            raise ValueError(f"route '{self.name}': an action is listed twice")
        if "cancel" in self.actions and {"requeue", "hold", "release"} & set(self.actions):
            raise ValueError(f"route '{self.name}': cancel conflicts with requeue/hold/release")
        if "drain" in self.actions and self.culprits is False:
            raise ValueError(f"route '{self.name}': drain needs culprits (culprits = false)")
        if not self.actions and not self.notify:
            raise ValueError(f"route '{self.name}': no actions and nothing to notify")

    @property
    def needs_job_facts(self) -> bool:
        return bool(self.partitions or self.users or self.users_deny)


@dataclass(frozen=True)
class GuardConfig:
    """Limits that hold whatever the routes say; each one that stops an action is recorded."""

    partitions: tuple[str, ...] = ()
    """Partition allow-list for Slurm actions; empty allows every partition."""
    node_cooldown_s: NonNegative = 600.0
    """No node action on a node within this span after the previous one."""
    max_drained_nodes: Count = 1
    """Nodes medic may hold drained at once, whatever the cluster's size (the budget is this or
    ``max_drained_fraction`` of the cluster, whichever is more)."""
    max_drained_fraction: Fraction = 0.1
    """Fraction of the cluster's nodes medic may hold drained at once, when that is more than
    ``max_drained_nodes``."""
    max_drains_per_hour: Count = 10
    """Drains by medic within any hour, cluster-wide."""
    max_restarts_per_job: Count = 3
    """Requeues of one job by medic within ``restart_window_s``."""
    restart_window_s: NonNegative = 86_400.0
    """The span ``max_restarts_per_job`` counts over."""
    cluster_nodes: PositiveCount | None = None
    """Cluster size for the drained fraction; by default asked from Slurm (or the recording)."""


@dataclass(frozen=True)
class SlurmConfig:
    """How actions reach Slurm: its CLI (default) or slurmrestd."""

    executor: str = "cli"
    """A registered executor: ``cli`` (scontrol on this host, the built-in default) or
    ``rest`` (slurmrestd)."""
    timeout_s: Positive = 10.0
    """Per command or request."""
    retries: Count = 3
    """Further attempts after a transient failure (controller unreachable, timeout)."""
    backoff_s: NonNegative = 0.2
    """First pause between attempts; doubles each time."""
    verify_timeout_s: NonNegative = 10.0
    """How long to re-read Slurm until the action's effect shows."""
    poll_s: Positive = 0.1
    """Pause between two reads while verifying."""
    restart_now: bool = False
    """After a requeue, set ``StartTime=now`` so the job need not wait out Slurm's credential
    expiry (``cred_expire``, 120 s by default) before it runs again; only when the requeue keeps
    it off every node it ran on (Slurm kills a job started sooner on one of those)."""
    reason_prefix: str = "medic"
    """Drain reasons start with this, so medic's drains can be told from an operator's."""
    rest_url: str = "http://localhost"
    """slurmrestd's base URL (with ``executor = "rest"``)."""
    rest_socket: str | None = None
    """A unix socket of slurmrestd (``rest_auth/local``); else ``rest_url`` with JWT headers."""
    rest_api: str = "v0.0.38"
    """slurmrestd's API version (Slurm 22.05 serves v0.0.38)."""
    rest_user: str | None = None
    """``X-SLURM-USER-NAME`` sent with the token."""
    rest_token_env: str = "SLURM_JWT"
    """Environment variable holding the JWT (``scontrol token``), kept out of the file."""


@dataclass(frozen=True)
class RulesConfig:
    """``[rules]``: what detections trigger, behind which guards (see docs/rules.md)."""

    mode: Mode = "monitor"
    """``monitor`` records what would run and touches nothing; ``enforce`` acts on Slurm."""
    guards: GuardConfig = field(default_factory=GuardConfig)
    """Limits that hold whatever the routes say."""
    receivers: tuple[ReceiverConfig, ...] = ()
    """Receivers (webhook, Slack, PagerDuty, Alertmanager) routes and alerts may notify."""
    routes: tuple[RouteConfig, ...] = ()
    """Tried in order; the first that matches decides (unless it says ``continue_matching``).
    Given routes replace the built-in ones (``medic/actions/default_rules.toml``)."""
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    """How actions reach Slurm."""
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    """Drained nodes: checked through Slurm, then resumed or kept (see docs/recovery.md)."""
    restart_loop: RestartLoopConfig = field(default_factory=RestartLoopConfig)
    """Jobs that restart without progress are held instead of requeued again."""
    deadman: DeadmanConfig = field(default_factory=DeadmanConfig)
    """An alert when a source stops delivering data."""
    nvrx: NvrxConfig = field(default_factory=NvrxConfig)
    """Jobs under NVRx ``ft_launcher``: no requeue while it restarts them in place."""

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
