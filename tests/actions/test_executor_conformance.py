"""The executor conformance suite: every registered executor through the same checks, as
``tests/detectors/test_conformance.py`` runs every detector.

Each check is parametrised over the registry (``medic.actions.registry.EXECUTORS``), so a new
executor is checked the moment it registers. An executor is built from ``[rules.slurm]`` by its
name; every verb it claims can be asked of it through ``carry_out``; the actions stage accepts
exactly the routes whose verbs it claims; and a backend that is down or answers garbage ends
every verb as a ``failed`` outcome and every read as None, after a bounded number of tries,
never an exception; ``medic doctor``'s probe of a backend that is not there is a one-line
failure, never an exception. A new executor adds its backend's two bad days to ``BACKENDS``
and a ``[rules.slurm]`` whose backend is not there to ``ABSENT``
(``test_every_executor_has_its_bad_backends`` says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from medic.actions.config import SlurmConfig, load_rules
from medic.actions.executor import VERBS, Order, carry_out
from medic.actions.model import SLURM_ACTIONS
from medic.actions.registry import EXECUTORS, build_executor, executor_class
from medic.actions.slurm_cli import SlurmCli
from medic.actions.slurmrest import SlurmRest
from medic.actions.stage import ActionStage
from medic.config import ConfigError
from medic.slurm import CommandResult

KINDS = sorted(EXECUTORS)
FAST = {"retries": 2, "backoff_s": 0.0, "verify_timeout_s": 0.0, "poll_s": 0.01}


class Calls:
    """Counts what an executor asked of its backend."""

    def __init__(self) -> None:
        self.count = 0


def _cli(answer: CommandResult) -> Callable[[SlurmConfig, Calls], Any]:
    def build(config: SlurmConfig, calls: Calls) -> SlurmCli:
        def runner(argv: Sequence[str], timeout_s: float) -> CommandResult:
            calls.count += 1
            return answer

        return SlurmCli(config, runner=runner, sleep=lambda _: None)

    return build


def _rest(answer: Callable[[httpx.Request], httpx.Response]) -> Callable[[SlurmConfig, Calls], Any]:
    def build(config: SlurmConfig, calls: Calls) -> SlurmRest:
        def handler(request: httpx.Request) -> httpx.Response:
            calls.count += 1
            return answer(request)

        client = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://slurm")
        return SlurmRest(config, client=client, sleep=lambda _: None)

    return build


def _refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


BACKENDS: dict[str, dict[str, Callable[[SlurmConfig, Calls], Any]]] = {
    "cli": {
        "down": _cli(
            CommandResult(1, "", "slurm_load_jobs error: Unable to contact slurm controller")
        ),
        "garbage": _cli(CommandResult(0, "<html>not slurm</html>\n", "")),
    },
    "rest": {
        "down": _rest(_refused),
        "garbage": _rest(lambda _: httpx.Response(200, text="<html>not slurm</html>")),
    },
}
"""Per executor, its backend down (controller unreachable) and answering garbage."""

ABSENT: dict[str, dict[str, Any]] = {
    "cli": {},
    "rest": {"rest_url": "http://127.0.0.1:1"},
}
"""Per executor, ``[rules.slurm]`` settings whose backend is not there (with no Slurm command
on ``PATH``)."""


def test_every_executor_has_its_bad_backends() -> None:
    assert sorted(BACKENDS) == KINDS
    assert sorted(ABSENT) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_its_probe_of_a_missing_backend_fails_in_one_line(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    config = SlurmConfig(executor=kind, timeout_s=2.0, **ABSENT[kind])
    probe = executor_class(kind).probe(config)
    assert probe.status == "fail", probe
    assert probe.detail and "\n" not in probe.detail


@pytest.mark.parametrize("kind", KINDS)
def test_built_by_its_name_from_the_config(kind: str) -> None:
    cls = EXECUTORS[kind]
    executor = build_executor(SlurmConfig(executor=kind))
    assert isinstance(executor, cls)  # type: ignore[arg-type]
    assert executor.name
    assert executor_class(kind) is cls


def test_an_unknown_executor_is_a_one_line_error_naming_the_known() -> None:
    with pytest.raises(ConfigError) as error:
        build_executor(SlurmConfig(executor="ssh"))
    message = str(error.value)
    assert message.startswith("'rules.slurm.executor' must be one of ")
    assert all(f'"{kind}"' in message for kind in KINDS)
    assert "'ssh'" in message


@pytest.mark.parametrize("kind", KINDS)
def test_every_verb_it_claims_can_be_asked_of_it(kind: str) -> None:
    executor = build_executor(SlurmConfig(executor=kind))
    assert executor.supports, "an executor that can do nothing"
    assert executor.supports <= set(VERBS), sorted(executor.supports - set(VERBS))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("action", SLURM_ACTIONS)
def test_the_stage_takes_exactly_the_routes_it_can_serve(kind: str, action: str) -> None:
    rules = load_rules({"routes": [{"name": "r", "kinds": ["crash"], "actions": [action]}]})
    executor = build_executor(SlurmConfig(executor=kind))
    if action in executor.supports:
        ActionStage(rules, executor)
    else:
        with pytest.raises(ConfigError, match=f"asks for {action}, which the"):
            ActionStage(rules, executor)


@pytest.mark.parametrize("day", ["down", "garbage"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_backend_fails_every_verb_and_read_cleanly(kind: str, day: str) -> None:
    calls = Calls()
    config = SlurmConfig(executor=kind, **FAST)
    executor = BACKENDS[kind][day](config, calls)
    for action in VERBS:
        before = calls.count
        order = Order(action, node="n1", job_id="42", reason="medic: test", exclude=("n2",))
        outcome = carry_out(executor, order)
        assert outcome.status == "failed", (action, outcome)
        assert outcome.detail and "\n" not in outcome.detail
        # Each command or request is tried at most 1 + retries times, and a verb reads,
        # acts and verifies: a handful of calls, never an endless loop.
        assert calls.count - before <= 3 * (1 + config.retries), action
    assert executor.job("42") is None
    assert executor.node_count() is None
    assert executor.drained_nodes() is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_verb_it_does_not_claim_is_refused_without_asking(kind: str) -> None:
    calls = Calls()
    executor = BACKENDS[kind]["down"](SlurmConfig(executor=kind, **FAST), calls)
    for action in ("cordon", *sorted(set(VERBS) - executor.supports)):
        outcome = carry_out(executor, Order(action, node="n1", job_id="42"))
        assert outcome.status == "failed"
        assert f"cannot {action}" in outcome.detail
    assert calls.count == 0


@pytest.mark.parametrize("kind", KINDS)
def test_node_checks_are_offered_or_declined_never_half(kind: str) -> None:
    executor = build_executor(SlurmConfig(executor=kind))
    checks = executor.node_checks()
    if checks is None:
        return
    for method in ("list_nodes", "reservations", "reserve", "unreserve", "submit"):
        assert callable(getattr(checks, method)), method
