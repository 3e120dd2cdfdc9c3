"""Cells and tables as the history's reports show them (``medic report``, ``medic nodes``,
and the HTML report's cells)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
from rich.table import Table


def format_cell(value: Any) -> str:
    """One value as the report shows it."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def frame_table(title: str, frame: pl.DataFrame, note: str = "") -> Table:
    table = Table(title=title, title_justify="left", caption=note or None, caption_justify="left")
    for name, dtype in frame.schema.items():
        table.add_column(name.replace("_", " "), justify="right" if dtype.is_numeric() else "left")
    for row in frame.iter_rows():
        table.add_row(*(format_cell(value) for value in row))
    if frame.is_empty():
        table.caption = "none recorded" + (f"; {note}" if note else "")
    return table
