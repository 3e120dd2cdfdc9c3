"""The report as one self-contained HTML file: the tables of ``medic report`` plus plots,
drawn with matplotlib and embedded as inline SVG (no scripts, no external files). A plot that
would show nothing the table does not (no actions taken, every node blamed once, nothing
saved) is left out."""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from medic.history.report import (
    Report,
    detections_by_day,
    overview_rows,
    sections,
)
from medic.history.tables import format_cell

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 68em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 0.3em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.7em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #666; font-size: 0.85em; margin-top: 0; }
figure { margin: 0.5em 0 1.5em; }
"""


def _svg(draw: Callable[[Axes], None], height: float = 3.0) -> str:
    figure = Figure(figsize=(9, height), layout="constrained")
    draw(figure.subplots())
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _latency(report: Report) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        samples = report.latency_samples
        edges = np.histogram_bin_edges(samples.get_column("seconds").to_numpy(), bins=30)
        for (measure,), part in samples.group_by("measure", maintain_order=True):
            ax.hist(
                part.get_column("seconds").to_numpy(),
                bins=edges.tolist(),
                alpha=0.6,
                label=str(measure),
            )
        ax.set_xlabel("seconds")
        ax.set_ylabel("incidents")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()

    return draw


def _stacked_days(frame: pl.DataFrame, ylabel: str) -> Callable[[Axes], None]:
    """Bars per day (the frame's first column), one stacked layer per other column."""

    def draw(ax: Axes) -> None:
        days = [day.isoformat() for day in frame.get_column("day").to_list()]
        bottom = [0.0] * len(days)
        for name in frame.columns[1:]:
            values = [float(v) for v in frame.get_column(name).to_list()]
            ax.bar(days, values, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_ylabel(ylabel)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
        ax.tick_params(axis="x", labelrotation=30)

    return draw


def _nodes(report: Report) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        nodes = report.nodes.reverse()
        ax.barh(nodes.get_column("node").to_list(), nodes.get_column("incidents").to_list())
        ax.set_xlabel("incidents blaming the node")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))

    return draw


def _savings(report: Report) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        timeline = report.savings_timeline.with_columns(
            pl.col("saved").cum_sum(), pl.col("would_have").cum_sum()
        )
        times = timeline.get_column("detected_at").to_list()
        for column, label in (("saved", "saved"), ("would_have", "would have saved (monitor)")):
            values = timeline.get_column(column)
            if (values > 0).any():
                ax.step(times, values.to_list(), where="post", label=label)
        ax.set_ylabel("GPU-hours (cumulative)")
        ax.legend()
        ax.tick_params(axis="x", labelrotation=30)

    return draw


def _table(frame: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(name.replace('_', ' '))}</th>" for name in frame.columns)
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    rows = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{html.escape(format_cell(v))}</td>'
            if is_number
            else f"<td>{html.escape(format_cell(v))}</td>"
            for v, is_number in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in frame.iter_rows()
    )
    return f"<table><tr>{head}</tr>{rows}</table>"


def _plots(report: Report) -> dict[str, Callable[[Axes], None]]:
    """Plots by the key of the section they follow, for the sections that have data."""
    plots: dict[str, Callable[[Axes], None]] = {}
    if not report.latency_samples.is_empty():
        plots["latency"] = _latency(report)
    daily = detections_by_day(report)
    if not daily.is_empty():
        plots["detections"] = _stacked_days(daily, "detections")
    taken = report.actions_daily.filter(pl.col("taken") > 0)
    if not taken.is_empty():
        by_day = taken.pivot("action", index="day", values="taken").fill_null(0)
        plots["actions"] = _stacked_days(by_day.sort("day"), "actions taken")
    if not report.nodes.filter(pl.col("incidents") > 1).is_empty():
        plots["nodes"] = _nodes(report)
    if not report.savings_timeline.is_empty():
        plots["savings"] = _savings(report)
    return plots


def render_html(report: Report) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>medic report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>medic report</h1>",
        "<table>",
        *(
            f'<tr><th>{html.escape(name)}</th><td class="n">{html.escape(format_cell(v))}</td></tr>'
            for name, v in overview_rows(report)
        ),
        "</table>",
    ]
    plots = _plots(report)
    for section in sections(report):
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        empty = section.frame.is_empty()
        parts.append("<p>None recorded.</p>" if empty else _table(section.frame))
        if section.note:
            parts.append(f'<p class="note">{html.escape(section.note)}</p>')
        if section.key in plots:
            parts.append(f"<figure>{_svg(plots[section.key])}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Report, path: Path) -> Path:
    path.write_text(render_html(report), encoding="utf-8")
    return path
