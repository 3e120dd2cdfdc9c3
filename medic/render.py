"""Terminal tables for backtest and calibration results (rich)."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

from medic.calibration import Calibration, EvidenceModel, KindMap

COLUMNS = (
    ("labels", "labels"),
    ("detected", "found"),
    ("recall", "recall"),
    ("precision", "precision"),
    ("false_positives", "FP"),
    ("p50", "lat p50 s"),
    ("p90", "lat p90 s"),
    ("max", "lat max s"),
    ("kind_accuracy", "kind acc"),
    ("attribution_accuracy", "attrib acc"),
)


def _cell(summary: dict[str, Any], key: str) -> str:
    value = summary["latency_s"].get(key) if key in ("p50", "p90", "max") else summary.get(key)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if key in ("p50", "p90", "max") else f"{value:.3f}"
    return str(value)


def score_table(title: str, first: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(first, overflow="fold")
    for _, header in COLUMNS:
        table.add_column(header, justify="right")
    for name, summary in rows:
        table.add_row(name, *(_cell(summary, key) for key, _ in COLUMNS))
    return table


def print_backtest(report: dict[str, Any], console: Console) -> None:
    """The per-recording, per-kind and overall tables of a backtest's JSON report."""
    rows = [(r["name"], r) for r in report["recordings"]]
    rows.append(("overall", report["overall"]))
    console.print(score_table("Backtest", "recording", rows))
    kinds = [(kind, summary) for kind, summary in report["by_kind"].items()]
    if kinds:
        console.print(score_table("By kind", "kind", kinds))
    actions = report.get("actions", {})
    if actions.get("by_action"):
        table = Table(title="Actions (what would have been done)", title_justify="left")
        table.add_column("action")
        table.add_column("outcome")
        table.add_column("count", justify="right")
        for action, statuses in sorted(actions["by_action"].items()):
            for status, count in sorted(statuses.items()):
                table.add_row(action, status, str(count))
        for guard, count in sorted(actions["suppressed_by_guard"].items()):
            table.add_row("(suppressed)", f"guard {guard}", str(count))
        console.print(table)


def print_calibration(
    calibration: Calibration, check: pl.DataFrame | None, console: Console
) -> None:
    """A fitted calibration's maps (the detections each was fitted on and what it reads) and,
    when there was one, its held-out check."""
    table = Table(title="Calibration (fitted on every recording)", title_justify="left")
    for column in ("kind", "method", "real", "false", "reads"):
        table.add_column(column, justify="right" if column in ("real", "false") else "left")
    for kind, score_map in sorted(calibration.maps.items()):
        table.add_row(
            kind, score_map.method, str(score_map.true), str(score_map.false), _reads(score_map)
        )
    console.print(table)
    if check is None:
        return
    title = (
        "Held-out check (Brier score and expected calibration error: lower is better; "
        "ROC AUC of real against false detections: higher is better)"
    )
    held = Table(title=title, title_justify="left")
    columns = ("kind", "detections", "real", "brier", "brier_raw", "ece", "ece_raw", "auc")
    for column in (*columns, "auc_raw"):
        held.add_column(column, justify="left" if column == "kind" else "right")
    for row in check.iter_rows(named=True):
        held.add_row(*(_figure(row.get(c)) for c in (*columns, "auc_raw")))
    console.print(held)


def _reads(score_map: KindMap) -> str:
    if isinstance(score_map, EvidenceModel):
        weights = ", ".join(f"{n} {w:.2f}" for n, w in score_map.weights.items() if w > 0)
        return f"logit {score_map.intercept:.2f}" + (f" + {weights}" if weights else "")
    return f"raw score to {score_map.probability[0]:.3f}..{score_map.probability[-1]:.3f}"


def _figure(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)
