"""``medic report``: the operator's figures, read from the history's report views.

Time to detect and to act (mean and percentiles), detections and actions per day, the nodes
and GPUs that fail most, restarts per job, and GPU-hours saved against waiting for the NCCL
watchdog: only by incidents an action was taken on; what monitor mode held back is counted
apart, as what medic would have saved. ``build_report`` runs the queries; ``print_report``
renders rich tables; ``medic.history.html`` renders the same report as one HTML file with plots.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

from medic.actions.recovery_config import LemonConfig
from medic.history.config import HistoryConfig
from medic.history.goodput import Goodput, goodput
from medic.history.nodes import report_lemons
from medic.history.store import HistoryStore
from medic.history.tables import format_cell, frame_table

OVERVIEW = """
SELECT
    (SELECT count(*) FROM v_incidents) AS incidents,
    (SELECT count(*) FILTER (WHERE NOT closed) FROM v_incidents) AS open_incidents,
    (SELECT min(detected_at) FROM detections) AS first_detection,
    (SELECT max(detected_at) FROM detections) AS last_detection,
    (SELECT count(*) FILTER (WHERE coalesce(tier, 'confirmed') = 'confirmed') FROM detections)
        AS confirmed_detections,
    (SELECT count(*) FILTER (WHERE tier = 'suspect') FROM detections) AS suspect_detections,
    (SELECT count(*) FROM actions) AS action_decisions,
    (SELECT count(*) FILTER (WHERE taken(status, guard)) FROM actions) AS actions_taken,
    (SELECT count(*) FILTER (WHERE guard = 'monitor') FROM actions) AS actions_monitor,
    (SELECT count(*) FILTER (WHERE guard <> 'monitor') FROM actions) AS actions_suppressed,
    (SELECT count(*) FILTER (WHERE status = 'failed') FROM actions) AS actions_failed
"""

LATENCY_SAMPLES = """
SELECT 1 AS position, 'time to detect' AS measure, kind, seconds FROM v_time_to_detect
UNION ALL
SELECT 2, 'time to detect (wall clock)', kind, wall_seconds FROM v_time_to_detect
WHERE wall_seconds IS NOT NULL
UNION ALL
SELECT 3, 'time to act', kind, seconds_from_onset FROM v_time_to_act
WHERE seconds_from_onset IS NOT NULL
UNION ALL
SELECT 4, 'act after detection', kind, seconds_from_detection FROM v_time_to_act
"""

LATENCY = f"""
SELECT
    measure,
    coalesce(kind, 'all') AS kind,
    count(*) AS n,
    avg(seconds) AS mean_s,
    quantile_cont(seconds, 0.5) AS p50_s,
    quantile_cont(seconds, 0.9) AS p90_s,
    quantile_cont(seconds, 0.99) AS p99_s,
    max(seconds) AS max_s
FROM ({LATENCY_SAMPLES})
GROUP BY GROUPING SETS ((position, measure), (position, measure, kind))
ORDER BY position, GROUPING(kind) DESC, kind
"""

ACTIONS_DAILY = """
SELECT
    day,
    action,
    sum(actions) AS decisions,
    sum(taken) AS taken,
    coalesce(sum(actions) FILTER (WHERE guard IS NOT NULL), 0) AS suppressed
FROM v_actions_daily
GROUP BY day, action
ORDER BY day, action
"""

NODES = """
SELECT node, incidents, jobs, kinds, drains, last_at FROM v_node_failures LIMIT ?
"""

GPUS = """
SELECT node, gpu, fault_minutes, xids, ecc_dbe, nvlink_errors, pcie_replays, last_fault
FROM v_gpu_failures LIMIT ?
"""

RESTARTS = """
SELECT * FROM v_job_restarts
WHERE restarts > 0 OR medic_requeues > 0 OR incidents > 0
LIMIT ?
"""

SAVED = """
WITH held_back AS (
    SELECT detection_id AS incident_id, min(time) AS would_act_at
    FROM actions
    WHERE action <> 'notify' AND guard = 'monitor'
    GROUP BY detection_id
)
SELECT
    s.kind,
    s.detected_at,
    s.onset_known,
    s.gpus,
    CASE WHEN s.acted_at IS NOT NULL THEN s.gpu_hours_saved END AS saved,
    CASE WHEN s.acted_at IS NULL AND h.would_act_at IS NOT NULL THEN
        greatest(
            $1 - greatest(
                epoch_us(h.would_act_at) - epoch_us(coalesce(s.onset, s.detected_at)), 0
            ) / 1e6,
            0
        ) * s.gpus / 3600.0
    END AS would_have_saved
FROM gpu_hours_saved($1, $2) s
LEFT JOIN held_back h USING (incident_id)
"""

SAVINGS = f"""
SELECT
    coalesce(kind, 'all') AS kind,
    count(*) AS incidents,
    count(saved) AS acted_on,
    coalesce(sum(saved), 0) AS gpu_hours_saved,
    count(would_have_saved) AS held_back,
    coalesce(sum(would_have_saved), 0) AS would_have_saved,
    count(*) FILTER (WHERE NOT onset_known) AS onset_assumed,
    count(*) FILTER (WHERE gpus IS NULL) AS gpus_unknown
FROM ({SAVED})
GROUP BY ROLLUP (kind)
ORDER BY GROUPING(kind), kind
"""

SAVINGS_TIMELINE = f"""
SELECT detected_at, kind, coalesce(saved, 0) AS saved, coalesce(would_have_saved, 0) AS would_have
FROM ({SAVED})
WHERE saved > 0 OR would_have_saved > 0
ORDER BY detected_at
"""


@dataclass(frozen=True)
class Report:
    """Every figure of the report, as small frames."""

    watchdog_s: float
    gpus_per_node: int
    overview: dict[str, Any]
    latency: pl.DataFrame
    latency_samples: pl.DataFrame
    detections_daily: pl.DataFrame
    actions_daily: pl.DataFrame
    nodes: pl.DataFrame
    gpus: pl.DataFrame
    restarts: pl.DataFrame
    savings: pl.DataFrame
    savings_timeline: pl.DataFrame
    lemons: pl.DataFrame
    goodput: Goodput

    @property
    def gpu_hours_saved(self) -> float:
        """By the incidents an action was taken on."""
        return self._total("gpu_hours_saved")

    @property
    def would_have_saved(self) -> float:
        """By the incidents whose actions monitor mode held back, had they run."""
        return self._total("would_have_saved")

    def _total(self, column: str) -> float:
        total = self.savings.filter(pl.col("kind") == "all").get_column(column)
        return float(total[0]) if total.len() else 0.0


def build_report(
    store: HistoryStore, config: HistoryConfig, top: int = 10, lemon: LemonConfig | None = None
) -> Report:
    """Query the report views of ``store``; ``top`` bounds the node, GPU and job lists;
    ``lemon`` scores lemon nodes (``[rules.lifecycle.lemon]``, its defaults when None)."""

    def frame(query: str, *params: Any) -> pl.DataFrame:
        result = pl.from_arrow(store.sql(query, params))
        assert isinstance(result, pl.DataFrame)
        return result

    costs = (config.watchdog_timeout_s, config.gpus_per_node)
    return Report(
        watchdog_s=config.watchdog_timeout_s,
        gpus_per_node=config.gpus_per_node,
        overview=frame(OVERVIEW).row(0, named=True),
        latency=frame(LATENCY),
        latency_samples=frame(LATENCY_SAMPLES).drop("position"),
        detections_daily=frame("FROM v_detections_daily"),
        actions_daily=frame(ACTIONS_DAILY),
        nodes=frame(NODES, top),
        gpus=frame(GPUS, top),
        restarts=frame(RESTARTS, top),
        savings=frame(SAVINGS, *costs),
        savings_timeline=frame(SAVINGS_TIMELINE, *costs),
        lemons=report_lemons(store, lemon or LemonConfig(), top),
        goodput=goodput(store, *costs),
    )


def savings_note(report: Report) -> str:
    return (
        f"per incident other than stragglers that an action was taken on: max({report.watchdog_s:g}"
        " s watchdog - (first action taken - onset), 0) x the job's GPUs (telemetry, else "
        f"allocated nodes x {report.gpus_per_node}) / 3600; would have saved: the same with the "
        "first action monitor mode held back"
    )


def detections_by_day(report: Report) -> pl.DataFrame:
    """Detections per day (rows) and kind (columns)."""
    daily = report.detections_daily
    if daily.is_empty():
        return pl.DataFrame({"day": []})
    return daily.pivot("kind", index="day", values="detections").fill_null(0).sort("day")


def overview_rows(report: Report) -> list[tuple[str, Any]]:
    o = report.overview
    return [
        ("incidents", o["incidents"]),
        ("open incidents", o["open_incidents"]),
        ("first detection", o["first_detection"]),
        ("last detection", o["last_detection"]),
        ("detections confirmed", o["confirmed_detections"]),
        ("detections suspected (silence or slowness alone; not acted on)", o["suspect_detections"]),
        ("action decisions", o["action_decisions"]),
        ("actions taken", o["actions_taken"]),
        ("actions not run (monitor mode)", o["actions_monitor"]),
        ("actions suppressed by a guard", o["actions_suppressed"]),
        ("actions failed", o["actions_failed"]),
        ("GPU-hours saved (actions taken)", report.gpu_hours_saved),
        ("GPU-hours monitor mode would have saved", report.would_have_saved),
    ]


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    frame: pl.DataFrame
    note: str = ""


def sections(report: Report) -> list[Section]:
    """The report's tables, in order."""
    return [
        Section(
            "latency",
            "Time to detect and to act (seconds)",
            report.latency,
            "from the onset, in event time: the matching label's in a backtest's history (the "
            "backtest's latency), else the detector's estimate (wall clock: from the onset to "
            "when medic serve recorded the detection); act = first Slurm action taken (done or "
            "recorded)",
        ),
        Section("detections", "Detections per day (UTC)", detections_by_day(report)),
        Section("actions", "Actions per day (UTC)", report.actions_daily),
        Section(
            "nodes", "Nodes blamed most", report.nodes, "incidents whose culprits include the node"
        ),
        Section(
            "gpus",
            "GPUs with most faults",
            report.gpus,
            "minutes with an Xid or a new uncorrectable ECC error",
        ),
        Section(
            "goodput",
            "Goodput: GPU-hours lost per incident, with medic and with the watchdog alone",
            report.goodput.by_kind,
            report.goodput.note(),
        ),
        Section(
            "lemons",
            "Lemon nodes",
            report.lemons,
            "incidents blaming the node and failed checks, weighted by kind, halved per "
            "half-life; a lemon needs incidents in several jobs (medic keeps it drained)",
        ),
        Section("restarts", "Restarts per job", report.restarts),
        Section(
            "savings",
            f"GPU-hours saved against the NCCL watchdog ({report.watchdog_s:g} s)",
            report.savings,
            savings_note(report),
        ),
    ]


def print_report(report: Report, console: Console) -> None:
    overview = Table(title="medic report", title_justify="left", show_header=False)
    overview.add_column("figure")
    overview.add_column("value", justify="right")
    for name, value in overview_rows(report):
        overview.add_row(name, format_cell(value))
    console.print(overview)
    for section in sections(report):
        console.print(frame_table(section.title, section.frame, section.note))


def report_text(report: Report) -> str:
    """The report as ``medic report`` prints it, as plain text."""
    buffer = io.StringIO()
    print_report(report, Console(file=buffer, width=160, color_system=None))
    return buffer.getvalue()
