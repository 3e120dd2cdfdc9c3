"""Raw log files through the one pipeline: the incidents they show, their evidence and the
actions the rules would take.

The lines (``medic.diagnose.lines``) become ``logs`` batches of one second of event time each,
with a watermark every second in between, as a replay sends them; every job found gets a
``RUNNING`` scheduler row (its nodes: those its lines name, and the nodes of the kernel and
Slurm logs when there is one job only) so that node evidence reaches it. Kernel lines of a node
no job was seen on are that node's own pseudo-job (``node:<host>``), so a ``dmesg`` alone is
diagnosed too. The pipeline, detectors and rules are the real ones, built from the config;
nothing here detects. The matched lines the pipeline derived (its ``signatures`` stream) are
mapped back to their file and line to show the evidence of each incident.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from medic import schema
from medic.actions.config import RulesConfig
from medic.actions.explain import explain
from medic.actions.model import Decision
from medic.actions.recorder import RecordingExecutor
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.diagnose.lines import LogText, lines_frame
from medic.incident import Incident
from medic.ingest.base import Batch, Event, Watermark
from medic.parse.catalogue import Catalogue
from medic.parse.failure_lines import FRAME, FailureLines
from medic.parse.prefixes import PrefixStripper
from medic.parse.signatures import SignatureParser
from medic.pipeline import Pipeline
from medic.settings_tree import Settings
from medic.timeutil import US

TAIL_S = 45
"""Event time run past the last line, for held detections (a crash waits for hardware
evidence a few seconds, for a fabric error's verdict half a minute) to come out; shorter than
any silence the hang detector acts on without telemetry (a minute)."""
MAX_TICKS = 4 * 3600
"""Watermarks a gap between lines gets at most (one a second, then spread evenly)."""
MAX_EVIDENCE_LINES = 8
PSEUDO_JOB = "node:"


@dataclass(frozen=True)
class EvidenceLine:
    """A matched line shown as evidence: where it is, what it is and its text."""

    file: str
    line: int
    time: int
    signature: str
    kind: str
    message: str


@dataclass
class Finding:
    """One incident of one job, as diagnose reports it."""

    job_id: str
    kind: str
    culprits: tuple[str, ...]
    ranks: tuple[int, ...]
    onset: int | None
    detected_at: int
    summary: str
    detections: list[Detection]
    evidence: list[EvidenceLine] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


class MatchedLines:
    """Observer keeping the pipeline's ``signatures`` rows (the lines the catalogue named)."""

    streams = frozenset({"signatures"})

    def __init__(self) -> None:
        self.frames: list[pl.DataFrame] = []

    def update(self, batch: Batch) -> None:
        self.frames.append(batch.frame)

    def advance(self, watermark: int) -> None:
        return None

    def rows(self) -> pl.DataFrame:
        if not self.frames:
            return pl.DataFrame()
        return pl.concat(self.frames, how="diagonal_relaxed").with_columns(
            pl.col("time").dt.epoch("us").alias("time_us")
        )


class Steps:
    """Observer keeping each job's latest training progress (its ``progress`` rows, but the
    scheduler's cancel: ``job_end`` is no sign of the job's life, nor a bar drawn before its
    first step, at 0 with no rate yet: "0/26001 [00:00<?, ?it/s]" says a loop began, not that
    it did any work, nor a step a process shows again at the count it showed last: tqdm draws
    its bar once more when its loop ends by an exception, "6/9 [05:34<02:47, 55.74s/it]" after
    "6/9 [05:20<02:11, 43.90s/it]", a redraw, not a step)."""

    streams = frozenset({"progress"})

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}
        self._shown: dict[tuple[str, int | None], int] = {}
        """Each process's (job, rank) last step shown."""

    def update(self, batch: Batch) -> None:
        begun = (pl.col("step") == 0) & pl.col("step_time_s").is_null()
        rows = batch.frame.filter(
            (pl.col("event") != "job_end") & ~begun.fill_null(False)
        ).with_columns(pl.col("time").dt.epoch("us"))
        counted = rows.filter(pl.col("step").is_not_null())
        if not counted.is_empty():
            who = ["job_id", "rank"]
            shown = pl.DataFrame(
                [(*key, step) for key, step in self._shown.items()],
                schema={"job_id": pl.String, "rank": pl.Int32, "_shown": pl.Int64},
                orient="row",
            )
            counted = counted.join(
                shown, on=who, how="left", nulls_equal=True, maintain_order="left"
            )
            previous = pl.coalesce(pl.col("step").shift(1).over(who), pl.col("_shown"))
            for job, rank, step in counted.group_by(who).agg(pl.col("step").last()).iter_rows():
                self._shown[(job, rank)] = step
            fresh = counted.filter((pl.col("step") != previous).fill_null(True))
            rows = pl.concat([rows.filter(pl.col("step").is_null()), fresh.drop("_shown")])
        latest = rows.group_by("job_id").agg(pl.col("time").max())
        for job_id, time in latest.iter_rows():
            self.latest[job_id] = max(time, self.latest.get(job_id, time))

    def advance(self, watermark: int) -> None:
        return None


def alive(
    lines: pl.DataFrame,
    steps: Mapping[str, int],
    going_on: pl.Expr,
    signs: pl.DataFrame,
    prefixes: PrefixStripper,
) -> dict[str, int]:
    """Each job's last sign of life in the text: its latest step, its latest line of its own
    saying that it goes on (``FailureLines.going_on``) that is none of its errors (``signs``:
    the matched lines, by time and text, at an error's severity) nor a line of a report (a
    traceback's, ``FRAME`` and its code line; one explaining what may have caused an error,
    ``EXPLAINING``; the header of one Python ignored) nor one said as its program exits
    (``EXITING``), or the end of a report Python says it ignored (``dismissed``, read without
    the lines' prefixes)."""
    own = lines.filter((pl.col("source") == "app") & pl.col("job_id").is_not_null())
    bare = prefixes.strip(own.select("job_id", "time", "message"))
    frame = pl.col("message").str.contains(FRAME)
    reporting = bare.select(
        (
            pl.col("message").str.contains(TRACEBACK_HEADER)
            | frame
            | frame.shift(1).over("job_id").fill_null(False)
            | pl.col("message").str.contains(EXPLAINING)
            | pl.col("message").str.contains(ADVISING)
            | pl.col("message").str.contains(EXITING)
            | pl.col("message").str.contains(DISMISSED)
        ).alias("_reporting")
    ).to_series()
    said = (
        own.with_columns(reporting)
        .filter(going_on & ~pl.col("_reporting"))
        .select("job_id", "time", "message")
    )
    if not signs.is_empty():
        errors = (
            signs.filter(pl.col("severity").is_in(("error", "fatal")))
            .select(pl.col("time_us").alias("time"), "message")
            .unique()
        )
        said = said.join(errors, on=["time", "message"], how="anti")
    found = pl.concat([said.select("job_id", "time"), dismissed(bare)])
    latest = dict(steps)
    for job_id, time in found.group_by("job_id").agg(pl.col("time").max()).iter_rows():
        latest[job_id] = max(time, latest.get(job_id, time))
    return latest


EXITING = (
    r"(?i)\b(?:program|process|interpreter)\s+(?:exit|shutdown)\b|\bbefore\s+we\s+destruct\b"
    r"|\bat\s+(?:interpreter\s+)?(?:exit|shutdown)\b|^sys:1: "
)
"""A line said as its program exits, of what was left undone (PyTorch's warnings that a process
group was not destroyed, "destroy_process_group() was not called before program exit", printed
by the group's destructor after an exception ended the program as after a clean end; a warning
Python places at ``sys:1``, raised with no frame of Python's running, as modules are torn down
at the interpreter's end): the program's end, no sign that it goes on."""
DISMISSED = r"^Exception ignored\b"
"""Python's header of an exception it reports and ignores (in a finaliser, at exit)."""
EXCEPTION_LINE = r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit)\b(?::|$)"
"""A Python exception's line, the last of its report (``Exception: ...``, ``x.ZorkError: ...``)."""
_TRACEBACK = r"Traceback \(most recent call last\):"
INSIDE_REPORT = rf"^(?:\s|{_TRACEBACK})"
"""A traceback's own lines: its header and its indented frames."""
TRACEBACK_HEADER = rf"^\s*{_TRACEBACK}"
EXPLAINING = (
    r"(?i)\b(?:may|might|could|can)\s+(?:also\s+)?(?:have\s+been|be)\s+(?:caused\s+by|due\s+to|"
    r"because\s+of|the\s+result\s+of)\b|\b(?:possible|potential|likely|common)\s+(?:root\s+)?"
    r"(?:causes?|reasons?)\b"
)
"""A line explaining what may have caused an error (MindSpore's warning after a failed task,
"GetNext error may be caused by slow data processing ..."): the error's report, logged at a lower
level, no sign that the job goes on."""
ADVISING = (
    r"(?i)\byou\s+(?:can|may|might|could|should|need\s+to|want\s+to)\b|^\W*(?:please|consider)\b"
    r"|^\W*to\s+\w+\b[^,;]{0,120},\s*(?:set|use|pass|add|run|call|increase|decrease|enable)\b"
)
"""A line telling the reader what to do about an error (Ray Train's "To start a new run that
will retry on training failures, set ... FailureConfig(max_failures)", "you can restart the
run"): the error's report, no retry under way and no sign that the job goes on."""


def dismissed(lines: pl.DataFrame) -> pl.DataFrame:
    """The job and time of the last line of each report Python says it ignored (the first line
    after its header that is no traceback line: the exception), in each job's lines in order
    (``message``: without its prefixes), a microsecond on: the job's life goes on after it.
    Not a report right after an exception's line (``EXCEPTION_LINE``): an uncaught one ended
    the program, whose objects' finalisers then fail as the interpreter shuts down."""
    message = pl.col("message")
    blocks = lines.select(
        "job_id",
        "time",
        message.str.contains(DISMISSED).alias("_header"),
        message.str.contains(EXCEPTION_LINE).alias("_exception"),
        (~message.str.contains(INSIDE_REPORT)).alias("_starts"),
    ).filter(pl.col("_starts"))
    before = pl.col("_exception").shift(1).over("job_id").fill_null(False)
    living = blocks.with_columns((pl.col("_header") & ~before).alias("_living"))
    ended = living.filter(pl.col("_living").shift(1).over("job_id").fill_null(False))
    return ended.select("job_id", pl.col("time") + 1)  # the job went on after the report


def placed_lines(lines: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, list[str]]]:
    """The lines with node logs of unplaced nodes given their pseudo-job, and each job's
    nodes."""
    jobs = lines.filter(pl.col("job_id").is_not_null() & (pl.col("kind") == "app"))
    nodes: dict[str, list[str]] = {
        str(job): sorted(n for n in group.get_column("node").unique().to_list() if n)
        for (job,), group in jobs.group_by("job_id", maintain_order=True)
    }
    for (job,), group in lines.filter(
        pl.col("job_id").is_not_null() & (pl.col("kind") != "app")
    ).group_by("job_id", maintain_order=True):
        named = {n for n in group.get_column("node").to_list() if n}
        nodes[str(job)] = sorted(set(nodes.get(str(job), [])) | named)
    logged = {n for n in lines.filter(pl.col("kind") != "app").get_column("node").to_list() if n}
    if len(nodes) == 1:
        only = next(iter(nodes))
        nodes[only] = sorted(set(nodes[only]) | logged)
    placed = set().union(*nodes.values()) if nodes else set()
    orphans = sorted(logged - placed)
    for node in orphans:
        nodes[PSEUDO_JOB + node] = [node]
    pseudo = (
        pl.when(pl.col("job_id").is_null() & pl.col("node").is_in(orphans))
        .then(pl.lit(PSEUDO_JOB) + pl.col("node"))
        .otherwise(pl.col("job_id"))
    )
    return lines.with_columns(pseudo.alias("job_id")), nodes


def events(lines: pl.DataFrame, nodes: Mapping[str, list[str]]) -> tuple[list[Event], list[Event]]:
    """Scheduler rows starting every job, then the lines in one-second batches, with a
    watermark every second (``MAX_TICKS`` at most per gap); and apart, the watermarks of the
    ``TAIL_S`` past the end, which come after the text has ended."""
    start = int(lines.get_column("time").min()) - US  # type: ignore[arg-type]
    count = len(nodes)
    scheduler = pa.Table.from_pydict(
        {
            "time": [start] * count,
            "kind": ["job"] * count,
            "job_id": list(nodes),
            "node": [None] * count,
            "state": ["RUNNING"] * count,
            "nodes": list(nodes.values()),
            "exit_code": [None] * count,
            "reason": [None] * count,
        },
        schema=schema.SCHEDULER,
    )
    out: list[Event] = [Batch("scheduler", scheduler)]
    logs = lines.select(
        pl.col("time").cast(pl.Datetime("us", "UTC")),
        "job_id",
        "node",
        "rank",
        "source",
        "message",
        (pl.col("time") // US).alias("_second"),
    )
    last = start // US
    for (second,), rows in logs.group_by("_second", maintain_order=True):
        out.extend(Watermark(t * US) for t in _ticks(last, int(second)))
        out.append(Batch.from_frame("logs", rows.drop("_second"), schema.LOGS))
        last = int(second)
    return out, [Watermark(t * US) for t in range(last + 1, last + TAIL_S + 1)]


def _ticks(after: int, upto: int) -> range:
    """Whole seconds in (after, upto], at most ``MAX_TICKS`` of them, evenly spread."""
    step = max(1, (upto - after) // MAX_TICKS)
    return range(after + step, upto + 1, step) if upto > after else range(0)


def diagnose(
    texts: Sequence[LogText],
    settings: Settings | Mapping[str, Any] | None = None,
    year: int | None = None,
    catalogue: Catalogue | None = None,
) -> list[Finding]:
    """The incidents the pipeline finds in ``texts`` under ``settings`` (a medic config as a
    mapping: detectors, parsers, pipeline and rules), earliest first; with ``catalogue`` in
    place of the one the settings name."""
    settings = Settings.load(settings)
    matched, steps = MatchedLines(), Steps()
    rules = settings.rules
    stage = _stage(rules, settings)
    pipeline = Pipeline.from_settings(
        settings,
        responders=[stage],
        observers=[matched, steps, *stage.observers],
        catalogue=catalogue,
    )
    reader = next(p for p in pipeline.parsers if isinstance(p, SignatureParser))
    lines = lines_frame(texts, year, reader.matcher.prefixes)
    if lines.is_empty():
        return []
    lines, nodes = placed_lines(lines)
    read, tail = events(lines, nodes)
    pipeline.run(read)
    lexicon = reader.matcher.unmatched or FailureLines()
    going_on = lexicon.going_on(pl.col("message"))
    pipeline.finish(alive(lines, steps.latest, going_on, matched.rows(), reader.matcher.prefixes))
    pipeline.run(tail)
    incidents = [*pipeline.correlator.take_closed(), *pipeline.correlator.open.values()]
    located = _located(matched.rows(), lines)
    decided: dict[str, list[Decision]] = {}
    for decision in stage.log.decisions:
        decided.setdefault(decision.detection_id, []).append(decision)
    findings = [_finding(incident, located, nodes, rules, decided) for incident in incidents]
    return sorted(findings, key=lambda f: (f.onset or f.detected_at, f.job_id))


def _stage(rules: RulesConfig, settings: Settings) -> ActionStage:
    """The actions stage serve runs, on a recorder: it sees the lines' streams as serve's does
    (its NVRx and restart-loop observers included) and decides at each detection's time, so its
    guards say what serve's would."""
    recorder = RecordingExecutor()
    window = settings.pipeline.incident_window_s
    return ActionStage(rules, recorder, notifier=recorder, incident_window_s=window)


def _located(rows: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """Matched rows with the file and line they came from (joined on time and text)."""
    if rows.is_empty():
        return rows
    where = lines.select(pl.col("time").alias("time_us"), "message", "file", "line")
    return rows.join(where, on=["time_us", "message"], how="left").sort("time_us")


def _finding(
    incident: Incident,
    located: pl.DataFrame,
    nodes: Mapping[str, list[str]],
    rules: RulesConfig,
    decided: Mapping[str, list[Decision]],
) -> Finding:
    """The incident as reported: named after its strongest detection, with the decisions the
    stage took on it in the stream (on a recorder: nothing is touched); a detection the stage
    was not handed is explained alone."""
    detections = [incident.first, *incident.symptoms]
    strongest = incident.strongest or incident.first
    decisions = decided.get(strongest.id) or explain(rules, strongest).decisions
    job = str(incident.first.job_id)
    onsets = [d.onset for d in detections if d.onset is not None]
    return Finding(
        job_id=job,
        kind=incident.kind,
        culprits=strongest.culprits,
        ranks=strongest.ranks,
        onset=min(onsets) if onsets else None,
        detected_at=incident.first.detected_at,
        summary=strongest.summary,
        detections=detections,
        evidence=_evidence(located, job, nodes.get(job, []), incident),
        actions=[_action_text(d.action, d.node, d.status, d.guard) for d in decisions],
    )


def _evidence(
    located: pl.DataFrame, job: str, nodes: list[str], incident: Incident
) -> list[EvidenceLine]:
    """The job's matched lines up to the incident's last detection: lines of the incident's
    kind first, then its other errors and the lines that corroborate them, earliest first."""
    if located.is_empty():
        return []
    until = max(d.detected_at for d in [incident.first, *incident.symptoms])
    mine = located.filter(
        ((pl.col("job_id") == job) | (pl.col("job_id").is_null() & pl.col("node").is_in(nodes)))
        & (pl.col("time_us") <= until)
        & ((pl.col("kind") != "none") | pl.col("cause_xid").is_not_null())
        & (pl.col("role") != "benign")
    )
    ordered = mine.with_columns((pl.col("kind") != incident.kind).alias("_other")).sort(
        "_other", "time_us", maintain_order=True
    )
    return [
        EvidenceLine(
            r["file"] or "?", r["line"] or 0, r["time_us"], r["signature"], r["kind"], r["message"]
        )
        for r in ordered.head(MAX_EVIDENCE_LINES).iter_rows(named=True)
    ]


def _action_text(action: str, node: str | None, status: str, guard: str | None) -> str:
    target = f" {node}" if node else ""
    if guard == "monitor":
        return f"{action}{target}: would run (monitor mode: recorded, nothing touched)"
    if guard:
        return f"{action}{target}: suppressed by guard {guard}"
    return f"{action}{target}: " + ("would run" if status == "recorded" else status)
