"""``medic``: the command-line entry point. Each command parses its arguments and calls into
the module that does the work; errors in user input end as one line on stderr, exit 2."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from medic.config import ConfigError
from medic.recording import RecordingError, find_recordings, validate_recording
from medic.schema import SchemaError

F = TypeVar("F", bound=Callable[..., Any])

USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    RecordingError,
    SchemaError,
    FileNotFoundError,
)


def fail(message: str) -> None:
    click.echo(f"medic: error: {message}", err=True)
    sys.exit(2)


def user_errors(func: F) -> F:
    """Turn expected input errors into one line on stderr and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except USER_ERRORS as exc:
            fail(str(exc))

    return wrapper  # type: ignore[return-value]


def wide_console() -> Console:
    """stdout console; tables keep all their columns when piped into a file or CI log."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def expand_recordings(paths: tuple[Path, ...]) -> list[Path]:
    found = find_recordings(paths)
    if not found:
        fail(f"no recordings found under {', '.join(map(str, paths))}")
    return found


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="medic")
def main() -> None:
    """medic keeps distributed GPU training jobs running: it detects crashes, hangs,
    stragglers, GPU and node faults, and acts on them through Slurm."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check recordings against the recording spec; print every problem, one per line."""
    problems: list[str] = []
    recordings = expand_recordings(paths)
    for path in recordings:
        problems.extend(validate_recording(path))
    for problem in problems:
        click.echo(problem)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {len(recordings)} recording(s)", err=True)
        sys.exit(2)
    click.echo(f"{len(recordings)} recording(s) valid")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write results here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@user_errors
def backtest(
    paths: tuple[Path, ...], out_dir: Path | None, as_json: bool, config_file: Path | None
) -> None:
    """Replay recordings through the detectors and score them against their labels."""
    from medic.backtest import run_backtest
    from medic.render import print_backtest
    from medic.settings import load_settings

    settings = load_settings(config_file)
    recordings = expand_recordings(paths)
    console = Console(stderr=True)
    with Progress(
        TextColumn("backtest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=as_json or not console.is_terminal,
    ) as progress:
        task = progress.add_task("", total=len(recordings))
        report = run_backtest(
            recordings,
            settings,
            out_dir,
            on_result=lambda r: progress.update(task, advance=1, description=r.name),
        )
    data = report.to_json()
    if as_json:
        click.echo(json.dumps(data, indent=None))
    else:
        print_backtest(data, wide_console())
        if out_dir is not None:
            click.echo(f"results written under {out_dir}/")
