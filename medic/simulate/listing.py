"""``medic simulate list`` and ``--set key=value`` parsing for the simulate commands."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from medic.config import ConfigError
from medic.simulate.catalog import SCENARIOS


def parse_assignments(assignments: Iterable[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are read as TOML (``4``, ``1.5``, ``true``, ``["a", "b"]``)
    and anything that is not valid TOML is taken as a plain string."""
    values: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            values[key] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            values[key] = raw.strip()
    return values


def print_scenarios(console: Console) -> None:
    table = Table(title="medic simulate scenarios", show_lines=True)
    table.add_column("scenario", style="bold")
    table.add_column("labels")
    table.add_column("description")
    table.add_column("parameters (default: drawn from the seed)")
    for name, scenario in SCENARIOS.items():
        params = ", ".join(
            f"{pname}: {ptype}" + ("" if default is None else f" = {default}")
            for pname, ptype, default in scenario.parameters()
        )
        table.add_row(name, scenario.label_kind or "none (healthy)", scenario.description, params)
    console.print(table)
