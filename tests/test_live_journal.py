"""The action journal and verified outcomes on the real local Slurm: `medic serve` killed
(as kill -9 does) after each line it writes about a drain-and-requeue decision, then started
again, leaves the node drained and the job requeued with its exclusion exactly once; an
action's outcome is what Slurm shows afterwards, whatever its command said."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SlurmCluster
from tests.test_live_faults import Live
from tests.test_service import append, rows, wait_for


@pytest.fixture
def live(slurm: SlurmCluster, tmp_path: Path) -> Iterator[Live]:
    slurm.reset()  # nodes an earlier test left drained would keep the requeued job pending
    found = Live(slurm, tmp_path)
    yield found
    found.close()


def journal_ops(live: Live) -> list[str]:
    path = live.tmp / "state" / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["op"] for line in path.read_text().splitlines()]


def requeue_status(live: Live) -> tuple[str, str]:
    query = (
        "SELECT status, reason FROM actions WHERE action = 'requeue' AND guard IS NULL "
        f"AND job_id = '{live.job_id}'"
    )
    [row] = rows(live.tmp / "history.duckdb", query)
    return row[0], row[1]


@pytest.mark.parametrize("kill_after", range(1, 6))
def test_serve_killed_after_each_journal_line_drains_and_requeues_exactly_once(
    live: Live, kill_after: int
) -> None:
    """Lines 1 to 5: the plan, the drain issued, the drain verified, the requeue issued, the
    requeue verified (the last step; the decision is not closed yet)."""
    node = live.running(0)
    served = live.serve({**os.environ, "MEDIC_JOURNAL_KILL_AFTER": str(kill_after)})
    live.xid(node)
    assert served.proc.wait(timeout=60) == 137
    assert len(journal_ops(live)) == kill_after
    assert journal_ops(live)[0] == "plan"

    restarted = live.serve()
    job = live.job_running(1)
    time.sleep(5)  # a second requeue or drain would show by now
    assert restarted.stop() == 0
    assert live.drained_by_medic(node)
    assert live.cluster.job(live.job_id)["Restarts"] == "1"
    assert node in live.nodes({"NodeList": job["ExcNodeList"]})
    assert job["BatchHost"] != node
    assert live.actions() == [("drain", node, "done"), ("requeue", None, "done")]
    assert journal_ops(live)[-1] == "closed"


def scontrol_shim(live: Live, body: str) -> dict[str, str]:
    """``scontrol`` on medic's PATH runs ``body`` (a shell snippet, ``$real`` the real
    command) before the real one; the environment to serve with."""
    shim = live.tmp / "bin"
    shim.mkdir()
    real = shutil.which("scontrol")
    (shim / "scontrol").write_text(f'#!/bin/sh\nreal="{real}"\n{body}\nexec "$real" "$@"\n')
    (shim / "scontrol").chmod(0o755)
    return {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}


def test_a_requeue_whose_command_failed_but_happened_is_done(live: Live) -> None:
    """The operator's case: the log said the requeue failed while Slurm showed it done."""
    env = scontrol_shim(
        live,
        'if [ "$1" = requeue ]; then "$real" "$@"; '
        'echo "scontrol: error: Invalid node name specified" >&2; exit 1; fi',
    )
    node = live.running(0)
    served = live.serve(env)
    live.xid(node)
    job = live.job_running(1)
    wait_for(lambda: journal_ops(live)[-1:] == ["closed"], 30)
    assert served.stop() == 0
    assert node in live.nodes({"NodeList": job["ExcNodeList"]})
    status, reason = requeue_status(live)
    assert status == "done"
    assert "(scontrol requeue said: scontrol: error: Invalid node name specified)" in reason


def test_a_requeue_without_its_exclusion_is_partial(live: Live) -> None:
    env = scontrol_shim(
        live,
        'case "$*" in *ExcNodeList*) '
        'echo "scontrol: error: Invalid node name specified" >&2; exit 1;; esac',
    )
    node = live.running(0)
    served = live.serve(env)
    live.xid(node)
    wait_for(lambda: journal_ops(live)[-1:] == ["closed"], 60)
    assert served.stop() == 0
    assert live.cluster.job(live.job_id)["Restarts"] == "1"
    assert live.cluster.job(live.job_id)["ExcNodeList"] == "(null)"
    status, reason = requeue_status(live)
    assert status == "partial"
    assert reason.endswith(
        f"but not excluded from {node} (scontrol update: scontrol: error: Invalid node name "
        "specified)"
    )


def test_a_node_slurm_does_not_know_is_never_named_in_an_action(live: Live) -> None:
    """An Xid in an output file placed on a host Slurm does not know (``vm``): placement puts
    the line on the job's one node, so the actions name that node and never ``vm``."""
    live.running(0)
    served = live.serve()
    append(live.output("vm"), "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
    wait_for(lambda: journal_ops(live)[-1:] == ["closed"], 30)
    time.sleep(2)
    assert served.stop() == 0
    assert live.actions()
    assert all(node != "vm" for _, node, _ in live.actions())
    assert "vm" not in live.cluster.job(live.job_id)["ExcNodeList"]


pytestmark = pytest.mark.slurm
