"""The write-ahead journal of action decisions: what medic planned to do about a detection,
written down before the first action runs, and how far each step got.

A decision is the list of steps (drain, requeue, notify, ...) that the guards let through for
one detection. Its ``plan`` line names each step's incident, action, target, job and what the
executor needs to run it again (the drain reason, the nodes to exclude, the job's restart count
before the requeue); then each step gets an ``issued`` line before its command runs and a
``verified`` line with the outcome Slurm showed; a ``closed`` line ends the decision. Lines are
JSON objects, each written to the file at once, so a kill -9 loses none: on start,
``unfinished()`` gives the decisions to resume (their executors re-read the target's state
first, so a step that ran before the crash is not run twice). The plan line, and the issued
line of a notification (which cannot be read back), are fsync'd before anything runs, so a
crash of the machine loses neither; the other lines are not (an fsync costs up to 0.1 s on a
busy disk, and each of them would only spare a re-read of Slurm's state on resume).

A step's key (incident, action, target) is claimed by its plan line: a key in the journal is
never planned again, so an action runs at most once per incident, across restarts too.
Unreadable lines are skipped and counted, never fatal. Closed decisions older than the retention
(event time) are dropped, and the file is rewritten with the decisions kept (atomically) when
it holds more than ``compact_factor`` times the lines these need.

``MEDIC_JOURNAL_KILL_AFTER=<n>`` is a test hook: the process ends (``os._exit``, as abruptly as
kill -9) right after its n-th journal line is on disk.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medic.actions.model import NODE_ACTIONS, NOTIFY, Outcome
from medic.timeutil import US, iso

log = logging.getLogger(__name__)

KILL_AFTER_ENV = "MEDIC_JOURNAL_KILL_AFTER"
MIN_COMPACT_LINES = 1024
"""A file shorter than this is never compacted (rewriting it would cost more than it saves)."""


def step_key(incident: str, action: str, target: str) -> str:
    """The idempotency key of one action: once per incident and target."""
    return f"{incident} {action} {target}"


@dataclass
class Step:
    """One planned action and how far it got."""

    key: str
    action: str
    target: str
    route: str
    node: str | None = None
    job_id: str | None = None
    receiver: str | None = None
    exclude: tuple[str, ...] = ()
    reason: str | None = None
    """For ``drain``: the reason set on the node."""
    restarts: int | None = None
    """For ``requeue``: the job's restart count when it was planned (None: unknown)."""
    issued: int | None = None
    verified: int | None = None
    status: str | None = None
    detail: str | None = None

    def plan_row(self) -> dict[str, Any]:
        row = {name: getattr(self, name) for name in PLAN_FIELDS}
        row["exclude"] = list(self.exclude)
        return row


PLAN_FIELDS = (
    "key",
    "action",
    "target",
    "route",
    "node",
    "job_id",
    "receiver",
    "exclude",
    "reason",
    "restarts",
)


@dataclass
class Entry:
    """One decision: its steps, the detection it answers and the incident it belongs to."""

    id: str
    time: int
    incident: str
    detection: dict[str, Any]
    about: str
    """The detection in words (``describe``), for the decisions' reasons."""
    steps: list[Step]
    closed: int | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def unverified(self) -> list[int]:
        return [i for i, step in enumerate(self.steps) if step.verified is None]


class Journal:
    """The journal file (or, without a path, the same in memory)."""

    exit: Callable[[int], object] = staticmethod(os._exit)
    """How the ``kill_after`` hook ends the process."""

    def __init__(
        self,
        path: Path | None = None,
        retention_s: float = 7 * 86_400,
        compact_factor: int = 2,
        kill_after: int | None = None,
    ) -> None:
        self.path = path
        self.retention_us = round(retention_s * US)
        self.compact_factor = compact_factor
        self.kill_after = kill_after
        self.entries: dict[str, Entry] = {}
        self.keys: dict[str, str] = {}
        """Each claimed key and the decision that planned it."""
        self.skipped_lines = 0
        self.file_lines = 0
        self.writes = 0
        if path is not None and path.exists():
            self._load(path)

    @classmethod
    def for_service(cls, path: Path, env: Mapping[str, str] = os.environ) -> Journal:
        """The service's journal, with the test hook ``MEDIC_JOURNAL_KILL_AFTER`` read."""
        raw = env.get(KILL_AFTER_ENV, "").strip()
        return cls(path, kill_after=int(raw) if raw.isdigit() else None)

    def __len__(self) -> int:
        return len(self.entries)

    def planned_by(self, key: str) -> str | None:
        """The decision that planned ``key``, None when it is free."""
        return self.keys.get(key)

    def plan(
        self, time: int, incident: str, detection: dict[str, Any], about: str, steps: list[Step]
    ) -> Entry:
        """Write a decision's steps down (before any runs) and claim their keys."""
        self._expire(time)
        entry = Entry(uuid.uuid4().hex[:12], time, incident, detection, about, steps)
        self._add(entry)
        self._append(
            entry,
            {
                "op": "plan",
                "decision": entry.id,
                "time": time,
                "incident": incident,
                "detection": detection,
                "about": about,
                "steps": [s.plan_row() for s in steps],
            },
            durable=True,
        )
        return entry

    def issued(self, entry: Entry, index: int, time: int) -> None:
        step = entry.steps[index]
        step.issued = time
        record = {"op": "issued", "decision": entry.id, "step": index, "time": time}
        self._append(entry, record, durable=step.action == NOTIFY)

    def verified(self, entry: Entry, index: int, outcome: Outcome, time: int) -> None:
        step = entry.steps[index]
        step.verified, step.status, step.detail = time, outcome.status, outcome.detail
        self._append(
            entry,
            {
                "op": "verified",
                "decision": entry.id,
                "step": index,
                "time": time,
                "status": outcome.status,
                "detail": outcome.detail,
            },
        )

    def close(self, entry: Entry, time: int) -> None:
        entry.closed = time
        self._append(entry, {"op": "closed", "decision": entry.id, "time": time})

    def unfinished(self) -> list[Entry]:
        """Decisions not closed, oldest first: to resume."""
        return [e for e in self.entries.values() if e.closed is None]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries.values())

    def compact(self) -> None:
        """Rewrite the file with the kept decisions only; a crash midway leaves the old whole."""
        if self.path is None:
            return
        partial = self.path.with_name(self.path.name + ".compacting")
        with partial.open("w") as file:
            for entry in self.entries.values():
                file.writelines(entry.lines)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(self.path)
        self.file_lines = sum(len(e.lines) for e in self.entries.values())

    def _add(self, entry: Entry) -> None:
        self.entries[entry.id] = entry
        for step in entry.steps:
            self.keys[step.key] = entry.id

    def _append(self, entry: Entry, record: dict[str, Any], durable: bool = False) -> None:
        line = json.dumps(record, default=str) + "\n"
        entry.lines.append(line)
        if self.path is None:
            return
        kept = sum(len(e.lines) for e in self.entries.values())
        if self.file_lines >= max(MIN_COMPACT_LINES, self.compact_factor * kept):
            self.compact()
        else:
            with self.path.open("a") as file:
                file.write(line)
                file.flush()
                if durable:
                    os.fsync(file.fileno())
            self.file_lines += 1
        self.writes += 1
        if self.kill_after is not None and self.writes >= self.kill_after:
            log.critical("%s=%d: ending the process now", KILL_AFTER_ENV, self.kill_after)
            self.exit(137)

    def _expire(self, now: int) -> None:
        for entry in list(self.entries.values()):
            if entry.closed is not None and now - entry.time >= self.retention_us:
                del self.entries[entry.id]
                for step in entry.steps:
                    if self.keys.get(step.key) == entry.id:
                        del self.keys[step.key]

    def _load(self, path: Path) -> None:
        for line in path.read_text().splitlines(keepends=True):
            self.file_lines += 1
            try:
                self._replay(json.loads(line), line if line.endswith("\n") else line + "\n")
            except (ValueError, KeyError, TypeError, IndexError, AttributeError):
                self.skipped_lines += 1
        if self.skipped_lines:
            log.warning("journal %s: skipped %d unreadable lines", path, self.skipped_lines)

    def _replay(self, record: dict[str, Any], line: str) -> None:
        op = record["op"]
        if op == "plan":
            steps = [_step(row) for row in record["steps"]]
            entry = Entry(
                str(record["decision"]),
                int(record["time"]),
                str(record["incident"]),
                dict(record["detection"]),
                str(record["about"]),
                steps,
                lines=[line],
            )
            self._add(entry)
            return
        entry = self.entries[str(record["decision"])]
        time = int(record["time"])
        if op == "issued":
            entry.steps[int(record["step"])].issued = time
        elif op == "verified":
            step = entry.steps[int(record["step"])]
            step.verified, step.status, step.detail = time, record["status"], record["detail"]
        elif op == "closed":
            entry.closed = time
        else:
            raise ValueError(f"unknown op {op!r}")
        entry.lines.append(line)


def _step(row: Mapping[str, Any]) -> Step:
    values: dict[str, Any] = {name: row.get(name) for name in PLAN_FIELDS}
    values["exclude"] = tuple(row.get("exclude") or ())
    step = Step(**values)
    if not step.key or not step.action:
        raise ValueError("a step without key or action")
    return step


def step_state(step: Step) -> str:
    """Where a step got: ``planned``, ``issued`` (its outcome unknown) or its verified status."""
    if step.status is not None:
        return step.status
    return "issued" if step.issued is not None else "planned"


def render(journal: Journal, unfinished: bool = False) -> str:
    """The journal for a person: each decision, oldest first, then its steps."""
    entries = journal.unfinished() if unfinished else list(journal)
    if not entries:
        return "no unfinished decisions\n" if unfinished else "no decisions in the journal\n"
    lines = []
    for entry in entries:
        state = "finished" if entry.closed is not None else "UNFINISHED"
        lines.append(
            f"{iso(entry.time)}  decision {entry.id}  {state}  incident {entry.incident}, "
            f"detection {entry.detection.get('id')}: {entry.about}"
        )
        for step in entry.steps:
            job = f" (job {step.job_id})" if step.job_id and step.action in NODE_ACTIONS else ""
            detail = f": {step.detail}" if step.detail else ""
            lines.append(f"    {step.action} {step.target}{job}  {step_state(step)}{detail}")
    if journal.skipped_lines:
        lines.append(f"({journal.skipped_lines} unreadable lines skipped)")
    return "\n".join(lines) + "\n"
