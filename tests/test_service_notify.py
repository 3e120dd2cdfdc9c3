"""`medic serve` notifies every kind of receiver exactly once per incident group, across a
kill -9 and a restart (a real process, a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from medic.actions.notifiers.delivery import DeliveryLog
from tests.actions.notifiers.server import HookServer, serve
from tests.actions.notifiers.test_notifiers import KINDS, group_of
from tests.test_service import OOM, Served, append, wait_for, write_config


@pytest.fixture
def hooks() -> Iterator[HookServer]:
    yield from serve()


def config(tmp_path: Path, hooks: HookServer) -> Path:
    path = write_config(tmp_path)
    lines = [path.read_text()]
    for kind in KINDS:
        lines += ["[[rules.receivers]]", f'name = "{kind}"', f'kind = "{kind}"']
        lines.append(f'url = "{hooks.url("/" + kind)}"')
        if kind == "pagerduty":
            lines.append('token_env = "MEDIC_TEST_ROUTING_KEY"')
    lines += ["[[rules.routes]]", 'name = "tell"', 'kinds = ["crash"]']
    lines.append(f"notify = {json.dumps(list(KINDS))}")
    path.write_text("\n".join(lines) + "\n")
    return path


def sent(deliveries: Path) -> int:
    """How many deliveries the service has recorded as sent."""
    return sum(entry.state == "sent" for entry in DeliveryLog(deliveries).entries.values())


def delivered(hooks: HookServer) -> Counter[tuple[str, str]]:
    return Counter((r.path.strip("/"), group_of(r.path.strip("/"), r.body)) for r in hooks.received)


def test_each_receiver_hears_of_each_incident_group_once_across_a_kill_and_restart(
    tmp_path: Path, hooks: HookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_ROUTING_KEY", "R0UTING")
    settings = config(tmp_path, hooks)
    first, second = tmp_path / "jobs" / "job-42-n1.out", tmp_path / "jobs" / "job-43-n2.out"
    append(first, "[rank0]: starting")
    service = Served(settings, tmp_path / "serve-0.log")
    try:
        append(first, OOM.replace("rank3", "rank0"))
        wait_for(lambda: len(hooks.received) >= len(KINDS), 90)
        # killed once every delivery is recorded as sent: a kill between a receiver's 2xx and
        # that line repeats the POST by design (the receivers fold it by group), not tested here
        wait_for(lambda: sent(tmp_path / "state" / "notifications.jsonl") >= len(KINDS), 30)
    finally:
        service.stop(signal.SIGKILL)
    # the worst case: killed before the cursor of the detected line was saved, so the
    # restarted service reads job 42's fault again
    for cursor in (tmp_path / "state" / "cursors").glob("*.json"):
        cursor.unlink()
    append(second, "[rank0]: starting", OOM.replace("rank3", "rank0"))
    restarted = Served(settings, tmp_path / "serve-1.log")
    try:
        wait_for(lambda: len(hooks.received) >= 2 * len(KINDS), 90)
        time.sleep(2)  # a repeat would come within the service's next ticks
        text = restarted.get("/metrics").text
        assert 'medic_source_stalled{source="files"} 0.0' in text
        assert "medic_notifications_pending 0.0" in text
        assert "medic_drains_by_others_total 0.0" in text
        assert 'medic_node_lifecycle_events_total{event="check_started"} 0.0' in text
    finally:
        assert restarted.stop() == 0
    assert delivered(hooks) == Counter({(k, j): 1 for k in KINDS for j in ("42", "43")})


def test_a_source_that_stops_delivering_raises_the_dead_man_alert(
    tmp_path: Path, hooks: HookServer
) -> None:
    from medic.service import Service, SourceState
    from medic.settings import load_settings
    from tests.test_service import FailingSource

    settings = load_settings(write_config(tmp_path))
    settings["service"]["retry_initial_s"] = 0.05
    settings["service"]["retry_max_s"] = 0.1
    settings["rules"] = {
        "receivers": [{"name": "oncall", "kind": "alertmanager", "url": hooks.url("/am")}],
        "deadman": {"after_s": 1.0, "notify": ["oncall"]},
    }

    async def scenario() -> dict[str, object]:
        service = Service(settings)
        service.sources["flaky"] = SourceState(FailingSource(), resumable=False)
        task = asyncio.create_task(service.run())
        for _ in range(100):
            if hooks.received:
                break
            await asyncio.sleep(0.1)
        report = service.health()
        service.stop()
        await task
        return report

    report = asyncio.run(scenario())
    assert report["stalled"] == ["flaky"] and report["healthy"] is False
    [alert] = hooks.received
    assert alert.body["groupLabels"] == {"group": "deadman:flaky"}
    assert alert.body["alerts"][0]["labels"]["source"] == "flaky"
