"""The systemd units under deploy/ run medic commands that exist, with options they take."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest

from medic.cli import main

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def commands(unit: Path) -> list[list[str]]:
    lines = [line.strip() for line in unit.read_text().splitlines()]
    return [
        shlex.split(line.split("=", 1)[1])
        for line in lines
        if line.startswith(("ExecStart=", "ExecStartPre="))
    ]


def parse(argv: list[str]) -> str:
    """The command path ``argv`` names, after checking its options against the command."""
    command: click.Command = main
    path: list[str] = []
    while isinstance(command, click.Group):
        path.append(argv[len(path)])
        command = command.commands[path[-1]]
    command.make_context(path[-1], argv[len(path) :])
    return " ".join(path)


@pytest.mark.parametrize("unit", sorted(DEPLOY.glob("*.service")), ids=lambda p: p.name)
def test_unit_commands_parse(unit: Path) -> None:
    found = commands(unit)
    assert found, f"{unit.name} runs nothing"
    for argv in found:
        assert argv[0] == "/opt/medic/bin/medic"
        assert parse(argv[1:]) in {"serve", "agent", "config check"}
