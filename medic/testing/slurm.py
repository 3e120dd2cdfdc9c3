"""Fake Slurms for tests of what medic reads from and does to a cluster.

* ``FakeSlurm``: an in-memory Slurm behind the Executor seam;
* ``SlurmCommands``: a command runner answering as Slurm 22.05's commands do, over an
  in-memory cluster (for ``SlurmCli`` and anything built on ``medic.slurm.CommandRunner``);
* ``SlurmJson``: a command runner answering ``squeue --json``/``sinfo --json`` with documents
  captured on Slurm 22.05 (for the Slurm source);
* ``ScriptedRunner``: a command runner that expects exact commands in order;
* ``FakeSlurmrestd``: slurmrestd 22.05 behind an ``httpx`` transport.

``FakeSlurm`` keeps the state an executor reads back (drained nodes and their reasons, each
job's state, restart count and excluded nodes) and counts the commands that change it, so a
test can assert that an action ran exactly once. It behaves as ``SlurmCli`` does: a node or
job it does not know fails, draining a drained node changes nothing, a requeue whose restart
count rose since ``since_restarts`` is not issued again, and a requeue naming an unknown node
to exclude is refused before anything runs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import httpx

from medic.actions.model import JobFacts, Outcome, done, failed
from medic.slurm import JOB_ENDED_STATES, CommandResult

DOWN = failed("Unable to contact slurm controller (connect failure)")


@dataclass
class FakeJob:
    state: str = "RUNNING"
    restarts: int = 0
    excluded: set[str] = field(default_factory=set)
    held: bool = False


class FakeSlurm:
    """Executor over an in-memory cluster (see the module docstring)."""

    name = "fake-slurm"
    supports = frozenset({"drain", "resume", "requeue", "hold", "release", "cancel"})

    def __init__(self, nodes: Iterable[str], jobs: Iterable[str] = ()) -> None:
        self.drained: dict[str, str] = {}
        self.nodes = set(nodes)
        self.jobs = {job_id: FakeJob() for job_id in jobs}
        self.commands: Counter[tuple[str, str]] = Counter()
        """Commands that changed the cluster, by (action, target)."""
        self.up = True
        """False: the controller does not answer (every call fails, nothing changes)."""

    def drain(self, node: str, reason: str) -> Outcome:
        if not self.up:
            return DOWN
        if node not in self.nodes:
            return failed(f"node {node} is not known to Slurm")
        if node in self.drained:
            return done(f"node {node} already drained: {self.drained[node]}", changed=False)
        self.commands["drain", node] += 1
        self.drained[node] = reason
        return done(f"node {node} draining, reason set")

    def resume(self, node: str) -> Outcome:
        if node not in self.nodes:
            return failed(f"node {node} is not known to Slurm")
        if self.drained.pop(node, None) is None:
            return done(f"node {node} is idle, not drained", changed=False)
        self.commands["resume", node] += 1
        return done(f"node {node} idle")

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        if not self.up:
            return DOWN
        unknown = sorted(set(exclude) - self.nodes)
        if unknown:
            return failed(f"node {', '.join(unknown)} is not known to Slurm")
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        already = since_restarts is not None and job.restarts > since_restarts
        if not already:
            self.commands["requeue", job_id] += 1
            job.restarts += 1
            job.state = "PENDING"
        job.excluded |= set(exclude)
        where = f", excluding {', '.join(sorted(job.excluded))}" if job.excluded else ""
        return done(f"job {job_id} requeued (restarts {job.restarts}){where}")

    def hold(self, job_id: str) -> Outcome:
        return self._hold(job_id, True)

    def release(self, job_id: str) -> Outcome:
        return self._hold(job_id, False)

    def cancel(self, job_id: str) -> Outcome:
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        if job.state == "CANCELLED":
            return done(f"job {job_id} already ended (CANCELLED)", changed=False)
        self.commands["cancel", job_id] += 1
        job.state = "CANCELLED"
        return done(f"job {job_id} cancelled")

    def _hold(self, job_id: str, held: bool) -> Outcome:
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        if job.held != held:
            self.commands["hold" if held else "release", job_id] += 1
            job.held = held
        return done(f"job {job_id} {'held' if held else 'released'} ({job.state})")

    def job(self, job_id: str) -> JobFacts | None:
        job = self.jobs.get(job_id)
        return None if job is None else JobFacts(job_id, state=job.state, restarts=job.restarts)

    def node_count(self) -> int | None:
        return len(self.nodes) if self.up else None

    def node_checks(self) -> None:
        return None

    def drained_nodes(self) -> dict[str, str] | None:
        return dict(self.drained)


@dataclass
class CommandJob:
    """A job as ``SlurmCommands`` keeps it."""

    state: str = "RUNNING"
    partition: str = "gpu"
    user: str = "alice"
    priority: int = 100
    restarts: int = 0
    required: str = ""
    """ReqNodes: the nodes the job asked for (a hostlist)."""
    nodes: tuple[str, ...] = ()
    """The nodes allocated to it while it runs."""
    excluded: set[str] = field(default_factory=set)
    requeue: bool = True
    """False: submitted with ``--no-requeue`` (Slurm refuses to requeue it)."""
    exit_code: int = 0
    name: str = "train"


CONTROLLER_DOWN = "Unable to contact slurm controller (connect failure)"
META_22_05 = {
    "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
    "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"},
}
"""The ``meta`` of a 22.05 ``--json`` answer."""


class SlurmCommands:
    """A command runner (``medic.slurm.CommandRunner``) that answers the commands medic's Slurm
    executor and its Slurm source run as Slurm 22.05 does, over an in-memory cluster:
    ``squeue`` and ``sinfo`` in the formats medic asks for (``--json`` included),
    ``scontrol update``/``requeue``/``requeuehold``/``hold``/``release``/``show job``/
    ``show hostnames`` and ``scancel``, with Slurm's own refusals (an unknown node or job, a
    drain without a reason, a resume of a node that is not drained, a requeue of a pending job
    or of one submitted with ``--no-requeue``; ``scancel`` of an unknown job is silent).
    ``refuse`` makes a command fail as it does for a user without the rights; ``up = False``
    makes every command fail as when the controller is down. Every command is recorded in
    ``calls``; a command it does not know fails with rc 2 and is
    recorded in ``unanswered``."""

    def __init__(self, nodes: Iterable[str], jobs: dict[str, CommandJob] | None = None) -> None:
        self.nodes = list(nodes)
        self.jobs = dict(jobs or {})
        self.drained: dict[str, str] = {}
        """Drained nodes and their reasons."""
        self.refuse: dict[str, str] = {}
        """Command word (``update``, ``hold``, ``requeue``, ``scancel``...) -> the error it
        answers, rc 1, changing nothing."""
        self.up = True
        self.calls: list[list[str]] = []
        self.unanswered: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        if not self.up:
            return CommandResult(1, "", f"{argv[0]}: error: {CONTROLLER_DOWN}")
        word = argv[1] if argv[0] == "scontrol" and len(argv) > 1 else argv[0]
        if word == "-o" and len(argv) > 2:
            word = argv[2]
        if word in self.refuse:
            return CommandResult(1, "", self.refuse[word])
        answer = self._answer(argv)
        if answer is None:
            self.unanswered.append(argv)
            return CommandResult(2, "", f"medic.testing: no fake answer for {' '.join(argv)}")
        return answer

    def _answer(self, argv: list[str]) -> CommandResult | None:
        match argv:
            case ["squeue", "--json"]:
                jobs = [self._job_json(job_id, job) for job_id, job in self.jobs.items()]
                return _ok(json.dumps({"meta": META_22_05, "errors": [], "jobs": jobs}))
            case ["sinfo", "--json"]:
                nodes = [self._node_json(node) for node in self.nodes]
                return _ok(json.dumps({"meta": META_22_05, "errors": [], "nodes": nodes}))
            case ["squeue", "-h", "-t", "all", "-j", job_id, "-O", _]:
                job = self.jobs.get(job_id)
                if job is None:
                    return _error("slurm_load_jobs error: Invalid job id specified")
                fields = (job_id, job.state, job.partition, job.user, job.priority, job.restarts)
                values = [*map(str, fields), job.required, ",".join(job.nodes)]
                return _ok("".join(f"{value}|" for value in values) + "\n")
            case ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%x"]:
                job = self.jobs.get(job_id)
                if job is None:
                    return _error("slurm_load_jobs error: Invalid job id specified")
                return _ok(",".join(sorted(job.excluded)) + "\n")
            case ["sinfo", "-h", "-N", "-n", node, "-o", "%N|%T|%E"]:
                return _ok(self._node_line(node, 3) if node in self.nodes else "")
            case ["sinfo", "-h", "-N", "-o", "%N"]:
                return _ok("".join(f"{node}\n" for node in self.nodes))
            case ["sinfo", "-h", "-N", "-o", "%N|%T|%E|%u|%H"]:
                return _ok("".join(self._node_line(node, 5) for node in self.nodes))
            case ["sinfo", "-h", "-N", "-t", "drain", "-o", "%N|%E"]:
                return _ok("".join(f"{node}|{reason}\n" for node, reason in self.drained.items()))
            case ["scontrol", "show", "hostnames", hostlist]:
                return _ok("".join(f"{node}\n" for node in hostnames(hostlist)))
            case ["scontrol", "-o", "show", "job", job_id]:
                job = self.jobs.get(job_id)
                if job is None:
                    return _error("slurm_load_jobs error: Invalid job id specified")
                return _ok(f"JobId={job_id} JobState={job.state} ExitCode={job.exit_code}:0\n")
            case ["scontrol", "-o", "show", "reservation"]:
                return _ok("No reservations in the system\n")
            case ["scontrol", "update", target, *updates] if target.startswith("nodename="):
                return self._update_node(target.removeprefix("nodename="), updates)
            case ["scontrol", "update", target, *updates] if target.startswith("jobid="):
                return self._update_job(target.removeprefix("jobid="), updates)
            case ["scontrol", ("requeue" | "requeuehold") as verb, job_id]:
                return self._requeue(job_id, held=verb == "requeuehold")
            case ["scontrol", ("hold" | "release") as verb, job_id]:
                job = self.jobs.get(job_id)
                if job is None:
                    return _error(f"Invalid job id specified for job {job_id}")
                if job.state == "PENDING":  # a running job's hold has no effect (22.05)
                    job.priority = 0 if verb == "hold" else 100
                return _ok()
            case ["scancel", job_id]:
                job = self.jobs.get(job_id)
                if job is not None and job.state not in JOB_ENDED_STATES:
                    job.state, job.nodes = "CANCELLED", ()
                return _ok()
        return None

    def _job_json(self, job_id: str, job: CommandJob) -> dict[str, Any]:
        """The job as 22.05's ``squeue --json`` lists it (the fields medic reads)."""
        allocated = [{"nodename": node} for node in job.nodes]
        return {
            "job_id": int(job_id) if job_id.isdigit() else job_id,
            "array_job_id": 0,
            "array_task_id": None,
            "name": job.name,
            "job_state": job.state,
            "state_reason": "None",
            "partition": job.partition,
            "user_name": job.user,
            "priority": job.priority,
            "restart_cnt": job.restarts,
            "comment": "",
            "exit_code": job.exit_code << 8,  # 22.05 gives the raw wait status
            "nodes": ",".join(job.nodes),
            "job_resources": {"nodes": ",".join(job.nodes), "allocated_nodes": allocated}
            if job.nodes
            else {},
        }

    def _node_json(self, node: str) -> dict[str, Any]:
        """The node as 22.05's ``sinfo --json`` lists it (the fields medic reads)."""
        busy = self._busy(node)
        return {
            "name": node,
            "state": "allocated" if busy else "idle",
            "state_flags": ["DRAIN"] if node in self.drained else [],
            "reason": self.drained.get(node, ""),
            "partitions": sorted({job.partition for job in self.jobs.values()}) or ["gpu"],
        }

    def _busy(self, node: str) -> bool:
        return any(node in job.nodes for job in self.jobs.values() if job.state == "RUNNING")

    def _node_line(self, node: str, width: int) -> str:
        busy = self._busy(node)
        if node in self.drained:
            state, reason = ("draining" if busy else "drained"), self.drained[node]
            fields = [node, state, reason, "root", "2026-03-01T10:00:00"]
        else:
            fields = [node, "allocated" if busy else "idle", "none", "Unknown", "Unknown"]
        return "|".join(fields[:width]) + "\n"

    def _update_node(self, node: str, updates: list[str]) -> CommandResult:
        settings = dict(update.partition("=")[::2] for update in updates)
        if node not in self.nodes:
            return _error("slurm_update error: Invalid node name specified")
        state = settings.get("state", "").lower()
        if state == "drain":
            if not settings.get("reason"):
                return _error(
                    "You must specify a reason when DOWNING or DRAINING a node. Request denied"
                )
            self.drained[node] = settings["reason"]
            return _ok()
        if state == "resume" and node in self.drained:
            del self.drained[node]
            return _ok()
        return _error("slurm_update error: Invalid node state specified")

    def _update_job(self, job_id: str, updates: list[str]) -> CommandResult:
        job = self.jobs.get(job_id)
        if job is None:
            return _error(f"Invalid job id specified for job {job_id}")
        for update in updates:
            key, _, value = update.partition("=")
            if key == "ExcNodeList":
                job.excluded = set(hostnames(value)) if value else set()
            elif key == "ReqNodeList":
                job.required = value
        return _ok()

    def _requeue(self, job_id: str, held: bool) -> CommandResult:
        job = self.jobs.get(job_id)
        if job is None:
            return _error(f"Invalid job id specified for job {job_id}")
        if job.state == "PENDING":
            return _error(f"Job is pending execution for job {job_id}")
        if not job.requeue:
            return _error(f"Requested operation is presently disabled for job {job_id}")
        job.state, job.nodes, job.restarts = "PENDING", (), job.restarts + 1
        if held:
            job.priority = 0
        return _ok()


def hostnames(hostlist: str) -> list[str]:
    """A Slurm hostlist (``n[1-3,7],gpu01``) as node names, as ``scontrol show hostnames``."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)", hostlist):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            names += [f"{prefix}{n:0{width}d}" for n in range(int(low), int(high or low) + 1)]
    return names


def _ok(stdout: str = "") -> CommandResult:
    return CommandResult(0, stdout, "")


def _error(message: str) -> CommandResult:
    return CommandResult(1, "", message)


class SlurmJson:
    """A command runner answering ``squeue --json`` and ``sinfo --json`` with documents
    captured on a Slurm 22.05 cluster (``jobs``, ``nodes``: edit them to change what Slurm
    shows); ``fail`` answers every command with that result instead."""

    def __init__(self) -> None:
        data = resources.files("medic.testing").joinpath("data")
        self.jobs: dict[str, Any] = json.loads(data.joinpath("squeue-22.05.json").read_text())
        self.nodes: dict[str, Any] = json.loads(data.joinpath("sinfo-22.05.json").read_text())
        self.fail: CommandResult | None = None
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        self.calls.append(list(argv))
        if self.fail is not None:
            return self.fail
        doc = self.jobs if argv[0] == "squeue" else self.nodes
        return CommandResult(0, json.dumps(doc), "")

    def job(self, job_id: int) -> dict[str, Any]:
        """The job's entry in ``jobs``."""
        return next(j for j in self.jobs["jobs"] if j["job_id"] == job_id)


class ScriptedRunner:
    """A command runner that expects exactly these argv, in order, and answers each: for a test
    of the exact commands a piece of code runs."""

    def __init__(self, *steps: tuple[list[str], CommandResult]) -> None:
        self.steps = list(steps)
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        assert self.steps, f"unexpected command {list(argv)}"
        expected, result = self.steps.pop(0)
        assert list(argv) == expected, f"ran {list(argv)}, expected {expected}"
        self.calls.append(list(argv))
        return result

    def finished(self) -> bool:
        """Whether every expected command ran."""
        return not self.steps


REST_API = "/slurm/v0.0.38"
REST_META = {"meta": {"plugin": {"type": "openapi/v0.0.38"}}}


class FakeSlurmrestd:
    """An ``httpx`` transport handler answering like slurmrestd 22.05 (``openapi/v0.0.38``)
    for one job, 42, and two nodes, n1 idle and n2 drained: a POST of ``{"hold": ...}`` holds
    or releases the job, a DELETE cancels it, an unknown job is a 500 with Slurm's error, and
    ``fail_next`` answers the next requests with those HTTP statuses (a gateway's page).
    ``requests`` records (method, path, JSON body) of each."""

    def __init__(self, state: str = "PENDING", priority: int = 100) -> None:
        self.job: dict[str, Any] = {
            "job_id": 42,
            "job_state": state,
            "priority": priority,
            "partition": "gpu",
            "user_name": "alice",
        }
        self.requests: list[tuple[str, str, Any]] = []
        self.fail_next: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        if self.fail_next:
            return httpx.Response(self.fail_next.pop(0), text="<html>bad gateway</html>")
        path = request.url.path.removeprefix(REST_API)
        if path == "/job/42":
            if request.method == "POST" and isinstance(body, dict):
                self.job["priority"] = 0 if body.get("hold") else 90
            if request.method == "DELETE":
                self.job["job_state"] = "CANCELLED"
            return httpx.Response(200, json={**REST_META, "errors": [], "jobs": [self.job]})
        if path.startswith("/job/"):
            error = {"error": "Invalid job id specified", "description": "Unable to find JobId"}
            return httpx.Response(500, json={**REST_META, "errors": [error]})
        if path == "/nodes":
            nodes = [
                {"name": "n1", "state": "idle", "state_flags": [], "reason": ""},
                {"name": "n2", "state": "mixed", "state_flags": ["DRAIN"], "reason": "medic: x"},
            ]
            return httpx.Response(200, json={**REST_META, "errors": [], "nodes": nodes})
        return httpx.Response(404, text="not found")
