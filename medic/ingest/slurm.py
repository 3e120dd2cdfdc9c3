"""Slurm source: polls job and node state and emits only the changes, as ``scheduler`` rows.

State comes from ``squeue --json`` and ``sinfo --json`` (through an injected command runner)
or from slurmrestd's ``/slurm/<version>/jobs`` and ``/nodes`` (through an injected httpx
client): both speak the same OpenAPI documents. Slurm 22.05 ignores squeue's filters with
``--json`` (docs/slurm-localhost.md), so ``partitions`` filters on this side.
Both document shapes are read: 22.05's (``job_state`` a string, ``exit_code`` the raw wait
status, node ``state`` plus ``state_flags``) and 23.02's and later (lists and objects).

A job row carries the job id (``4242``, or ``4242_7`` for an array task), its state, its
allocated nodes (from ``job_resources``, already expanded by Slurm), its exit code once it
has ended (the exit status, or 128 + signal) and Slurm's reason; a node row its state with
flags joined by ``+`` (``IDLE+DRAIN``) and its reason. A row is emitted when any of these
changed since the previous poll; jobs that leave squeue (after MinJobAge) are forgotten.

Jobs that had already ended when medic first looked (squeue still lists them for MinJobAge,
five minutes by default) are history, not news: the first poll without a cursor emits no row
for them (they are kept in the snapshot, and counted as ``ended_before_start``), so a failure
from before ``medic serve`` started never becomes a detection, nor an action. A job that ends
while medic runs, or while it was stopped (a restart resumes from the cursor), is emitted.

Time and watermark (this source reads the wall clock): rows are stamped with the time the
poll began; after a successful poll the watermark is that time. A poll that fails (the
controller is unreachable, the output is not JSON) is logged, counted and retried at the
next interval, and the watermark waits. A missing ``squeue``/``sinfo`` or a rejected REST
request is a ``SourceError``. The cursor is the last snapshot, so after a restart only what
changed meanwhile is emitted; without one, the first poll emits every job and node.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pyarrow as pa

from medic import schema
from medic.config import Positive
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.live import SourceError, SourceStats, first_line, wall_us
from medic.probe import Probe
from medic.slurm import JOB_ENDED_STATES, MISSING_PROGRAM_RC, CommandRunner, run_command

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlurmSourceConfig:
    """``[sources.slurm]``: job and node state from Slurm; none when absent."""

    poll_interval_s: Positive = 5.0
    """How often job and node state is read."""
    squeue: tuple[str, ...] = ("squeue", "--json")
    """The command that prints the jobs as JSON."""
    sinfo: tuple[str, ...] = ("sinfo", "--json")
    """The command that prints the nodes as JSON."""
    rest_url: str = ""
    """slurmrestd's base URL; when set, state is read over REST instead of the CLI."""
    rest_version: str = "v0.0.38"
    """slurmrestd's API version (Slurm 22.05 serves v0.0.38)."""
    rest_user: str = ""
    """``X-SLURM-USER-NAME`` sent with the token."""
    rest_token: str = ""
    """JWT for ``X-SLURM-USER-TOKEN`` (``scontrol token``); empty with rest_auth/local."""
    partitions: tuple[str, ...] = ()
    """Only jobs and nodes of these partitions; all when empty."""
    timeout_s: Positive = 30.0
    """Time one command or request may take."""

    def __post_init__(self) -> None:
        if not self.squeue or not self.sinfo:
            raise ValueError("squeue and sinfo must name a command")


class _Unavailable(Exception):
    """Slurm could not be read this time; the next poll tries again."""


JobState = tuple[str, tuple[str, ...] | None, int | None, str | None]
NodeState = tuple[str, str | None]


OWN_JOB_COMMENT = "medic: node check"
"""The comment (``sbatch --comment``) of the jobs medic submits itself (the node lifecycle's
checks): the source leaves them out and lists them in ``own_jobs``."""


class SlurmSource:
    """Job and node state changes as ``scheduler`` batches, one poll per interval; medic's own
    jobs (``OWN_JOB_COMMENT``) are left out: their outcome is the node lifecycle's alone."""

    name = "slurm"
    resumable = False
    """A fresh snapshot on start tells the detectors which jobs run where."""
    title = "slurm state"
    Config = SlurmSourceConfig
    stream = "scheduler"
    fallback = False

    @classmethod
    def open(
        cls,
        config: SlurmSourceConfig,
        client: httpx.AsyncClient,
        cursor: dict[str, Any] | None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
    ) -> SlurmSource:
        """Never resumed: a fresh snapshot on start tells the detectors which jobs run where."""
        return cls(config, client=client if config.rest_url else None)

    @classmethod
    def probe(cls, config: SlurmSourceConfig) -> list[Probe]:
        """One poll, as the service's first."""

        async def fetch() -> tuple[list[Any], list[Any]]:
            async with httpx.AsyncClient() as client:
                return await cls.open(config, client, None).fetch()

        how = (
            f"slurmrestd {config.rest_url}"
            if config.rest_url
            else " and ".join(" ".join(argv) for argv in (config.squeue, config.sinfo))
        )
        try:
            jobs, nodes = asyncio.run(fetch())
        except Exception as exc:  # the check reports whatever stops the service's source
            return [Probe("fail", f"{how}: {first_line(str(exc))}")]
        return [Probe("ok", f"{how} answered: {len(jobs)} job(s), {len(nodes)} node(s)")]

    @classmethod
    def absent(cls) -> list[Probe]:
        return [
            Probe(
                "warn",
                "[sources.slurm] not configured: medic cannot tell which jobs run where, nor see "
                "jobs end or nodes fail in Slurm",
            )
        ]

    @property
    def poll_interval_s(self) -> float | None:
        """How often it polls; None: its watermark is its own (event time)."""
        return self.config.poll_interval_s

    def __init__(
        self,
        config: SlurmSourceConfig,
        cursor: dict[str, Any] | None = None,
        *,
        runner: CommandRunner = run_command,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], int] = wall_us,
    ) -> None:
        if config.rest_url and client is None:
            raise SourceError("slurm: rest_url is set but no HTTP client was given")
        self.config = config
        self.runner = runner
        self.client = client
        self.clock = clock
        self.stats = SourceStats()
        self.watermark: int | None = None
        self.own_jobs: set[str] = set()
        """Ids of medic's own jobs seen (``OWN_JOB_COMMENT``)."""
        cursor = cursor or {}
        self.jobs: dict[str, JobState] = {
            k: (v[0], None if v[1] is None else tuple(v[1]), v[2], v[3])
            for k, v in cursor.get("jobs", {}).items()
        }
        self.nodes: dict[str, NodeState] = {
            k: (v[0], v[1]) for k, v in cursor.get("nodes", {}).items()
        }
        self.first_look = cursor.get("watermark") is None
        """No successful poll yet: the next one shows what was there before medic."""

    def checkpoint(self) -> dict[str, Any]:
        """The last snapshot seen: a restart then emits only what changed since."""
        return {
            "watermark": self.watermark,
            "jobs": {
                job: [state, None if nodes is None else list(nodes), code, reason]
                for job, (state, nodes, code, reason) in self.jobs.items()
            },
            "nodes": {k: list(v) for k, v in self.nodes.items()},
        }

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            started = time.monotonic()
            for event in await self.poll():
                yield event
            elapsed = time.monotonic() - started
            await asyncio.sleep(max(0.0, self.config.poll_interval_s - elapsed))

    async def poll(self) -> list[Event]:
        """Read Slurm once: a batch of the changes (when any) and the watermark."""
        now = self.clock()
        if self.watermark is not None:
            now = max(now, self.watermark)
        try:
            jobs, nodes = await self.fetch()
        except _Unavailable as exc:
            self.stats.add("poll_errors")
            log.warning("slurm: %s; trying again at the next poll", exc)
            return []
        rows = self._job_changes(jobs, now) + self._node_changes(nodes, now)
        events: list[Event] = []
        if rows:
            columns = {f.name: [r.get(f.name) for r in rows] for f in schema.SCHEDULER}
            table = pa.Table.from_pydict(columns, schema=schema.SCHEDULER)
            self.stats.add("changes", table.num_rows)
            events.append(Batch("scheduler", table))
        self.watermark = now
        events.append(Watermark(now))
        return events

    async def fetch(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Jobs and nodes as Slurm lists them now (CLI or REST); raises on any failure."""
        if self.config.rest_url:
            jobs_doc = await self._rest("jobs")
            nodes_doc = await self._rest("nodes")
        else:
            jobs_doc = await self._cli(self.config.squeue)
            nodes_doc = await self._cli(self.config.sinfo)
        return _list(jobs_doc, "jobs"), _list(nodes_doc, "nodes")

    async def _cli(self, argv: Sequence[str]) -> dict[str, Any]:
        result = await asyncio.to_thread(self.runner, argv, self.config.timeout_s)
        if result.returncode == MISSING_PROGRAM_RC:
            raise SourceError(f"slurm: cannot run {argv[0]}: {result.message}")
        if result.returncode != 0:
            command = " ".join(argv)
            raise _Unavailable(f"{command} failed (rc {result.returncode}): {result.message}")
        return _document(result.stdout, " ".join(argv))

    async def _rest(self, what: str) -> dict[str, Any]:
        assert self.client is not None
        url = f"{self.config.rest_url.rstrip('/')}/slurm/{self.config.rest_version}/{what}"
        headers = {}
        if self.config.rest_user:
            headers["X-SLURM-USER-NAME"] = self.config.rest_user
        if self.config.rest_token:
            headers["X-SLURM-USER-TOKEN"] = self.config.rest_token
        try:
            response = await self.client.get(url, headers=headers, timeout=self.config.timeout_s)
        except httpx.HTTPError as exc:
            why = exc or type(exc).__name__
            raise _Unavailable(f"slurmrestd at {url} unreachable ({why})") from None
        answer = f"{url} answered {response.status_code}: {first_line(response.text)}"
        if response.status_code >= 500:
            raise _Unavailable(answer)
        if response.status_code != 200:
            raise SourceError(f"slurm: {answer}")
        return _document(response.text, url)

    def _wanted(self, partitions: Sequence[str]) -> bool:
        return not self.config.partitions or bool(set(partitions) & set(self.config.partitions))

    def _job_changes(self, jobs: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
        current: dict[str, JobState] = {}
        for job in jobs:
            if not self._wanted(str(job.get("partition") or "").split(",")):
                continue
            parsed = _job(job)
            if parsed is None:
                continue
            if str(job.get("comment") or "").startswith(OWN_JOB_COMMENT):
                self.own_jobs.add(parsed[0])
                continue
            current[parsed[0]] = parsed[1]
        if self.first_look:
            self._keep_ended_as_seen(current)
        rows = [
            {
                "time": now,
                "kind": "job",
                "job_id": job_id,
                "state": state,
                "nodes": None if nodes is None else list(nodes),
                "exit_code": exit_code,
                "reason": reason,
            }
            for job_id, (state, nodes, exit_code, reason) in current.items()
            if self.jobs.get(job_id) != (state, nodes, exit_code, reason)
        ]
        self.jobs = current
        self.first_look = False
        return rows

    def _keep_ended_as_seen(self, current: dict[str, JobState]) -> None:
        """Take the jobs that ended before medic started as already seen (no row for them)."""
        ended = {j: s for j, s in current.items() if s[0].split("+")[0].upper() in JOB_ENDED_STATES}
        if ended:
            self.jobs.update(ended)
            self.stats.add("ended_before_start", len(ended))
            log.info("slurm: %d job(s) had ended before medic started; not reported", len(ended))

    def _node_changes(self, nodes: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
        current: dict[str, NodeState] = {}
        for node in nodes:
            if node.get("name") and self._wanted(node.get("partitions") or []):
                reason = str(node.get("reason") or "") or None
                current[str(node["name"])] = (_node_state(node), reason)
        rows = [
            {"time": now, "kind": "node", "node": name, "state": state, "reason": reason}
            for name, (state, reason) in current.items()
            if self.nodes.get(name) != (state, reason)
        ]
        self.nodes = current
        return rows


def _document(text: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise _Unavailable(f"{what} printed something that is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise _Unavailable(f"{what} printed JSON that is not an object")
    for error in document.get("errors") or []:
        log.warning("slurm: %s reported: %s", what, error)
    return document


def _list(document: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = document.get(key)
    if not isinstance(items, list):
        raise _Unavailable(f"the answer has no '{key}' list")
    return [item for item in items if isinstance(item, dict)]


def _number(value: Any) -> int | None:
    """An integer field: plain in 22.05, ``{"set": .., "number": ..}`` from 23.02 on."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _job(job: dict[str, Any]) -> tuple[str, JobState] | None:
    job_id = _number(job.get("job_id"))
    if job_id is None:
        return None
    array_job, array_task = _number(job.get("array_job_id")), _number(job.get("array_task_id"))
    name = f"{array_job}_{array_task}" if array_job and array_task is not None else str(job_id)
    raw_state = job.get("job_state")
    state = "+".join(raw_state) if isinstance(raw_state, list) else str(raw_state or "UNKNOWN")
    base = state.split("+")[0].upper()
    exit_code = _exit_code(job.get("exit_code")) if base in JOB_ENDED_STATES else None
    reason = str(job.get("state_reason") or "")
    return name, (state, _allocated(job), exit_code, None if reason in ("", "None") else reason)


def _allocated(job: dict[str, Any]) -> tuple[str, ...] | None:
    """The job's nodes, expanded by Slurm: 22.05 ``allocated_nodes[].nodename``, later
    ``nodes.allocation[].name``; None while nothing is allocated."""
    resources = job.get("job_resources") or {}
    listed = resources.get("allocated_nodes")
    if listed is None and isinstance(resources.get("nodes"), dict):
        listed = resources["nodes"].get("allocation")
    names = [str(n.get("nodename") or n.get("name")) for n in listed or [] if isinstance(n, dict)]
    if names:
        return tuple(names)
    plain = str(job.get("nodes") or "")
    if plain and "[" not in plain:
        return tuple(plain.split(","))
    return None


def _exit_code(value: Any) -> int | None:
    """The exit status of an ended job: 22.05 gives the raw wait status, later versions
    ``{"status": [...], "return_code": .., "signal": {"id": ..}}``."""
    if isinstance(value, dict):
        signal = _number((value.get("signal") or {}).get("id"))
        if signal:
            return 128 + signal
        return _number(value.get("return_code"))
    status = _number(value)
    if status is None:
        return None
    return 128 + (status & 0x7F) if status & 0x7F else status >> 8


def _node_state(node: dict[str, Any]) -> str:
    state = node.get("state")
    listed = state if isinstance(state, list) else [state or "UNKNOWN"]
    parts = [str(s).upper() for s in listed]
    for flag in node.get("state_flags") or []:
        if str(flag).upper() not in parts:
            parts.append(str(flag).upper())
    return "+".join(parts)
