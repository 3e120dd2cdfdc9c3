"""``medic``: the command-line entry point. Each command parses its arguments and calls into
the module that does the work; errors in user input end as one line on stderr, exit 2."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from medic.config import ConfigError
from medic.history import HistoryError
from medic.recording import RecordingError, find_recordings, validate_recording
from medic.schema import DETECTION_KINDS, DETECTION_TIERS, SchemaError
from medic.settings import load_settings

if TYPE_CHECKING:
    from medic.settings_tree import Settings

F = TypeVar("F", bound=Callable[..., Any])

USER_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    HistoryError,
    RecordingError,
    SchemaError,
    OSError,
)


def load_tree(raw: Mapping[str, Any]) -> Settings:
    """A loaded config file checked into the settings tree (imported here: the tree pulls in
    every part of medic, and the CLI starts before it knows what it will run)."""
    from medic.settings_tree import Settings

    return Settings.load(raw)


def fail(message: str) -> None:
    click.echo(f"medic: error: {message}", err=True)
    sys.exit(2)


def user_errors(func: F) -> F:
    """Turn expected input errors (a bad config, recording or history, a path that cannot be
    read or written, a port in use) into one line on stderr and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            # The reader went away (`medic ... | head`): stop quietly, as the Python docs advise.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except USER_ERRORS as exc:
            fail(_one_line(exc))

    return wrapper  # type: ignore[return-value]


def _one_line(error: Exception) -> str:
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def wide_console() -> Console:
    """stdout console; tables keep all their columns when piped into a file or CI log."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def expand_recordings(paths: tuple[Path, ...]) -> list[Path]:
    found = find_recordings(paths)
    if not found:
        fail(f"no recordings found under {', '.join(map(str, paths))}")
    return found


def replay_options(func: F) -> F:
    """Where recordings are replayed (``replay_runner``), for every command that replays them:
    ``--jobs`` local processes, or ``--ray`` and ``--ray-data`` for a Ray cluster
    (docs/scaling.md)."""
    func = click.option(
        "--ray-data",
        type=click.Choice(["auto", "shared", "ship"]),
        default="auto",
        show_default=True,
        help="With --ray: read recordings where they are (shared: a shared file system), ship "
        "them through Ray's object store (ship), or ship those some node does not see (auto).",
    )(func)
    func = click.option(
        "--ray",
        "ray_address",
        metavar="auto|ADDRESS",
        help="Replay on this Ray cluster (auto: the one started on this machine or named by "
        "RAY_ADDRESS; else its head's host:port) instead of --jobs local processes; "
        "needs pip install 'medic[ray]'.",
    )(func)
    return click.option(
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        show_default="the CPU count, at most 4",
        help="Recordings replayed at once, each in its own process (same results as one).",
    )(func)


def delay_option(func: F) -> F:
    """``--delay``: replay a stream late (``[[replay.delays]]`` from the command line)."""
    return click.option(
        "--delay",
        "delays",
        multiple=True,
        metavar="STREAM=MIN:MAX",
        help="Deliver a stream's rows MIN-MAX s late, per node, jittered (e.g. logs=0:30); "
        "overrides [[replay.delays]].",
    )(func)


@contextlib.contextmanager
def replay_runner(
    jobs: int | None, ray_address: str | None, ray_data: str
) -> Iterator[Callable[..., Any]]:
    """Where recordings are replayed: ``jobs`` local worker processes, or a Ray cluster."""
    from medic.backtest import default_jobs, local_runner

    if ray_address is None:
        yield local_runner(default_jobs() if jobs is None else jobs)
        return
    try:
        from medic.ray_cluster import RayClusterError, RayRunner
    except ImportError:
        fail("--ray needs Ray: pip install 'medic[ray]'")
    try:
        with RayRunner(ray_address, ray_data) as runner:
            yield runner
    except RayClusterError as exc:
        fail(str(exc))


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
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option("--json", "as_json", is_flag=True, help="Print the incidents as JSON.")
@click.option(
    "--year",
    type=int,
    help="Year of timestamps that omit it (default: the logs', else the files' mtime).",
)
@user_errors
def diagnose(
    paths: tuple[Path, ...], config_file: Path | None, as_json: bool, year: int | None
) -> None:
    """Find the incidents in raw log files or folders (job output, dmesg/journal exports,
    Slurm logs): kind, culprit, the evidence lines and the actions the rules would take."""
    from medic.diagnose.lines import DiagnoseError, read_paths
    from medic.diagnose.render import as_json as findings_json
    from medic.diagnose.render import as_text
    from medic.diagnose.run import diagnose as run_diagnose
    from medic.settings import load_settings

    try:
        texts = read_paths(paths)
    except DiagnoseError as exc:
        fail(str(exc))
    found = run_diagnose(texts, load_tree(load_settings(config_file)), year)
    if as_json:
        click.echo(json.dumps(findings_json(found)))
    else:
        click.echo("\n".join(as_text(found)))


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write results here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option(
    "--history",
    "history_path",
    type=click.Path(path_type=Path),
    help="Also write what medic serve would have into this DuckDB history file.",
)
@delay_option
@replay_options
@user_errors
def backtest(
    paths: tuple[Path, ...],
    out_dir: Path | None,
    as_json: bool,
    config_file: Path | None,
    history_path: Path | None,
    jobs: int | None,
    delays: tuple[str, ...],
    ray_address: str | None,
    ray_data: str,
) -> None:
    """Replay recordings through the detectors and rules (recording executor: nothing is
    touched) and score them against their labels. Progress goes to stderr: a bar on a terminal,
    else a line per recording (none with --json: the program reading the JSON may take both
    streams as one). A recording that cannot be read is skipped with an error, and
    the exit status is then 1."""
    import contextlib

    from medic.backtest import run_backtest
    from medic.history.store import DuckDBStore
    from medic.ingest.replay import with_delays
    from medic.render import print_backtest

    if history_path is not None and ray_address is not None:
        fail("--history is written while replaying in this process: leave out --ray")
    raw = load_settings(config_file)
    settings = load_tree(with_delays(raw, delays) if delays else raw)
    recordings = expand_recordings(paths)
    history = None if history_path is None else DuckDBStore(history_path)
    with (
        replay_runner(jobs, ray_address, ray_data) as runner,
        backtest_progress(len(recordings), lines=not as_json) as progress,
        contextlib.closing(history) if history else contextlib.nullcontext(),
    ):
        report = run_backtest(
            recordings,
            settings,
            out_dir,
            on_result=progress,
            history=history,
            runner=None if history else runner,
        )
    data = report.to_json()
    if as_json:
        click.echo(json.dumps(data, indent=None))
    else:
        print_backtest(data, wide_console())
        if out_dir is not None:
            click.echo(f"results written under {out_dir}/")
    if report.failures:
        click.echo(
            f"medic: error: {len(report.failures)} of {len(recordings)} recording(s) could not "
            "be read and are left out of the scores: "
            + ", ".join(str(f.path) for f in report.failures),
            err=True,
        )
        sys.exit(1)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The calibration file to write ([pipeline] calibration = this path).",
)
@click.option(
    "--detections",
    "detections_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A medic backtest --out directory: read each recording's detections.parquet (and "
    "features.parquet) there instead of replaying; repeatable, e.g. a default replay and a "
    "near-miss one (bench/calibration/near_miss.toml), each recording in at least one.",
)
@click.option(
    "--holdout",
    multiple=True,
    metavar="GLOB",
    help="Recordings (by directory name) left out of a first fit and used to measure its "
    "reliability (repeatable), e.g. '*-p1[1-9]'.",
)
@click.option(
    "--method",
    type=click.Choice(["logistic", "isotonic", "sigmoid"]),
    default="logistic",
    show_default=True,
    help="A logistic model of each detection's evidence features, or a map of the raw score "
    "alone: isotonic regression, or Platt's sigmoid for few detections.",
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@delay_option
@replay_options
@user_errors
def calibrate(
    paths: tuple[Path, ...],
    out_file: Path,
    detections_dirs: tuple[Path, ...],
    holdout: tuple[str, ...],
    method: str,
    config_file: Path | None,
    jobs: int | None,
    delays: tuple[str, ...],
    ray_address: str | None,
    ray_data: str,
) -> None:
    """Fit what detection scores mean: per kind, the probability that a detection with a given
    raw score is real, from labelled recordings' outcomes (a backtest replayed here, or read
    from --detections). Prints the held-out check, writes the calibration file."""
    from medic.backtest import BacktestReport, read_backtest, run_backtest
    from medic.calibrate import calibrate_backtest, require_labels, require_unique_names
    from medic.ingest.replay import with_delays
    from medic.render import print_calibration

    recordings = expand_recordings(paths)
    require_labels(recordings)
    require_unique_names(recordings)

    def replayed(out: Path) -> list[Path]:
        """The recordings ``out`` holds detections of; with one directory, every one (a
        missing one is an error there); with several, each recording in at least one."""
        if len(detections_dirs) == 1:
            return recordings
        return [p for p in recordings if (out / p.name / "detections.parquet").is_file()]

    if len(detections_dirs) > 1:
        held = {p.name for d in detections_dirs for p in replayed(d)}
        missing = [p for p in recordings if p.name not in held]
        if missing:
            fail(f"{missing[0]}: no detections of it in any --detections directory")
    if detections_dirs:
        report = BacktestReport(
            [r for d in detections_dirs for r in read_backtest(replayed(d), d).results]
        )
        source = ", ".join(d.resolve().name for d in detections_dirs)
    else:
        raw = load_settings(config_file)
        settings = load_tree(with_delays(raw, delays) if delays else raw)
        with (
            replay_runner(jobs, ray_address, ray_data) as runner,
            backtest_progress(len(recordings)) as progress,
        ):
            report = run_backtest(recordings, settings, on_result=progress, runner=runner)
        if report.failures:
            fail(f"{report.failures[0].error} (calibration needs every recording)")
        source = "replayed"
    try:
        run = calibrate_backtest(report, recordings, holdout, method, source)
    except ValueError as exc:
        fail(str(exc))
    print_calibration(run.calibration, run.check, wide_console())
    run.calibration.write(out_file)
    click.echo(f"calibration written to {out_file}")


@main.command()
@click.argument("spec_file", type=click.Path(path_type=Path))
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="Base medic.toml.")
@click.option(
    "--out", "out_file", type=click.Path(path_type=Path), help="Write the table (Parquet)."
)
@click.option(
    "--history",
    "history_path",
    type=click.Path(path_type=Path),
    help="Also append the table to this DuckDB history file (table sweep_points).",
)
@click.option(
    "--write-config",
    "chosen_file",
    type=click.Path(path_type=Path),
    help="Write the chosen point's [detectors.*] values here (a --config file): the highest "
    "recall at the spec's min_precision, then the lowest p50 latency.",
)
@replay_options
@user_errors
def sweep(
    spec_file: Path,
    paths: tuple[Path, ...],
    config_file: Path | None,
    out_file: Path | None,
    history_path: Path | None,
    chosen_file: Path | None,
    jobs: int | None,
    ray_address: str | None,
    ray_data: str,
) -> None:
    """Search detector settings (SPEC_FILE: a grid or random search, docs/sweeps.md) over
    recordings: replay every point on every recording, score it by the spec's rules and
    print the precision/recall/latency frontier."""
    from datetime import UTC, datetime

    from medic.history.store import DuckDBStore
    from medic.history.tables import frame_table
    from medic.sweep import (
        choose,
        frontier,
        history_rows,
        load_spec,
        point_settings,
        run_sweep,
        write_config,
    )

    started = datetime.now(UTC)
    spec = load_spec(spec_file)
    base = load_settings(config_file)
    recordings = expand_recordings(paths)
    with (
        replay_runner(jobs, ray_address, ray_data) as runner,
        backtest_progress(len(recordings) * spec.points_count()) as progress,
    ):
        table = run_sweep(spec, recordings, runner, base, on_result=progress)
    if out_file is not None:
        table.write_parquet(out_file)
    if history_path is not None:
        rows = history_rows(table, spec, spec_file.stem, started, len(recordings))
        with DuckDBStore(history_path) as store:
            store.append("sweep_points", rows)
    title = f"sweep frontier: {table.height} point(s) x {len(recordings)} recording(s)"
    wide_console().print(frame_table(title, frontier(table)))
    if chosen_file is not None:
        try:
            chosen = choose(table, spec)
        except ValueError as exc:
            fail(str(exc))
        write_config(chosen_file, point_settings(chosen, spec))
        click.echo(f"point {chosen['point']} written to {chosen_file}")


@contextlib.contextmanager
def backtest_progress(total: int, lines: bool = True) -> Iterator[Callable[[Any], None]]:
    """Progress on stderr, whatever stdout is: a bar on a terminal, else one line per recording
    done (a CI log or a redirected run still shows that it advances), unless ``lines`` is
    false (then nothing)."""
    console = Console(stderr=True)
    if not console.is_terminal and not lines:
        yield lambda result: None
        return
    if not console.is_terminal:
        done = 0

        def line(result: Any) -> None:
            nonlocal done
            done += 1
            took = f" in {result.elapsed_s:.1f} s" if hasattr(result, "elapsed_s") else " skipped"
            click.echo(f"backtest: {done}/{total} {result.name}{took}", err=True)

        yield line
        return
    columns = (TextColumn("backtest"), BarColumn(), MofNCompleteColumn())
    with Progress(
        *columns,
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("", total=total)
        yield lambda result: progress.update(task, advance=1, description=result.name)


@main.group()
def config() -> None:
    """Check a config file; print the configuration reference."""


@config.command("check")
@click.argument("config_file", type=click.Path(path_type=Path))
@click.option(
    "--quiet",
    is_flag=True,
    help="Only say whether the file is valid (for a service manager's pre-start check).",
)
@user_errors
def config_check(config_file: Path, quiet: bool) -> None:
    """Validate CONFIG_FILE (names, types, ranges) and print the effective configuration, every
    default filled in, as TOML."""
    import tomli_w

    from medic.config_tables import effective_settings

    effective = effective_settings(load_settings(config_file))
    if not quiet:
        click.echo(tomli_w.dumps(_without_none(effective)), nl=False)
    click.echo(f"{config_file}: valid", err=True)


def _without_none(value: Any) -> Any:
    """TOML has no null: unset optional keys are left out."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


@config.command("reference")
def config_reference() -> None:
    """Print the configuration reference (docs/configuration.md) from the config classes."""
    from medic.config_reference import reference_markdown

    click.echo(reference_markdown(), nl=False)


@main.command()
@click.option(
    "--config", "config_file", required=True, type=click.Path(path_type=Path), help="medic.toml"
)
@user_errors
def doctor(config_file: Path) -> None:
    """Try every dependency CONFIG names, for real and harmlessly: Slurm commands or slurmrestd
    (and the right to drain and requeue), VictoriaLogs and its query, log paths, telemetry
    endpoints or NVML, the history, the state directory and the listen address. One line per
    check; exit status 1 when one failed."""
    from medic.doctor import diagnose, print_checks

    if not print_checks(diagnose(load_settings(config_file)), click.echo):
        sys.exit(1)


@main.group()
def rules() -> None:
    """Inspect the rules that turn detections into Slurm actions."""


@rules.command("test")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option("--json", "json_text", help="The detection as a JSON object ('-': read stdin).")
@click.option("--kind", type=click.Choice(DETECTION_KINDS), help="Detection kind.")
@click.option("--job", "job_id", help="Job id.")
@click.option("--culprit", "culprits", multiple=True, help="A blamed node (repeatable).")
@click.option("--score", type=float, default=1.0, show_default=True)
@click.option("--tier", type=click.Choice(DETECTION_TIERS), default="confirmed", show_default=True)
@click.option("--partition", help="The job's partition (Slurm is not asked).")
@click.option("--user", help="The job's user (Slurm is not asked).")
@click.option(
    "--exit-code",
    type=int,
    help="The job's exit status, when it ended under NVRx's ft_launcher (93: NVRx stopped it).",
)
@click.option(
    "--nodes",
    "cluster_nodes",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Cluster size for the drained-fraction budget.",
)
@user_errors
def rules_test(
    config_file: Path | None,
    json_text: str | None,
    kind: str | None,
    job_id: str | None,
    culprits: tuple[str, ...],
    score: float,
    tier: str,
    partition: str | None,
    user: str | None,
    exit_code: int | None,
    cluster_nodes: int,
) -> None:
    """Show what a detection would trigger under a config, and why (touches nothing)."""
    from medic.actions.explain import (
        detection_from_json,
        exit_code_from_json,
        explain,
        make_detection,
        make_facts,
        render,
    )

    config = load_tree(load_settings(config_file)).rules
    try:
        if json_text is not None:
            text = sys.stdin.read() if json_text == "-" else json_text
            detection, facts = detection_from_json(text)
            exit_code = exit_code_from_json(text) if exit_code is None else exit_code
        elif kind is None:
            raise ValueError("give the detection with --kind (and --job, --culprit, ...) or --json")
        else:
            detection = make_detection(kind, job_id, culprits, score=score, tier=tier)
            facts = make_facts(job_id, partition, user)
    except ValueError as exc:
        fail(str(exc))
    for line in render(explain(config, detection, facts, cluster_nodes, exit_code)):
        click.echo(line)


@main.command()
@click.option(
    "--db", "--history", "db_path", type=click.Path(path_type=Path), help="History database."
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option("--html", "html_file", type=click.Path(path_type=Path), help="Also write HTML.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--watchdog-s", type=click.FloatRange(min=0, min_open=True))
@click.option(
    "--url",
    help="Ask a running medic serve (e.g. http://127.0.0.1:9464) instead of opening the file.",
)
@user_errors
def report(
    db_path: Path | None,
    config_file: Path | None,
    html_file: Path | None,
    top: int,
    watchdog_s: float | None,
    url: str | None,
) -> None:
    """Time to detect and to act, detections and actions per day, the nodes and GPUs that fail
    most, restarts per job and GPU-hours saved against the NCCL watchdog, from the history
    database ([history] path unless --db). While medic serve holds the database, the report
    comes from the service's /report endpoint ([service] listen, or --url). --html writes one
    self-contained file with plots; --top bounds the node, GPU and job lists; --watchdog-s
    overrides [history] watchdog_timeout_s."""
    from medic.history.pages import render_report
    from medic.history.store import DuckDBStore
    from medic.remote_report import fetch_report, held_by_another_process, service_url

    settings = load_tree(load_settings(config_file))
    config = settings.history
    lemon = settings.rules.lifecycle.lemon
    params = {"top": str(top)}
    if watchdog_s is not None:
        params["watchdog_s"] = repr(watchdog_s)
    kinds = ["text", "html"] if html_file is not None else ["text"]
    if url is None:
        try:
            with DuckDBStore(db_path or config.path, read_only=True) as store:
                pages = {kind: render_report(store, config, kind, params, lemon) for kind in kinds}
        except HistoryError as exc:
            if not held_by_another_process(exc):
                raise
            url = service_url(settings)
            click.echo(f"medic: the history is held by medic serve; asking {url}", err=True)
    if url is not None:
        pages = {kind: fetch_report(url, kind, params) for kind in kinds}
    click.echo(pages["text"], nl=False)
    if html_file is not None:
        html_file.write_text(pages["html"], encoding="utf-8")
        click.echo(f"report written to {html_file}")


@main.command()
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(path_type=Path),
    help="Journal file (default: journal.jsonl in [service] state_dir).",
)
@click.option("--unfinished", is_flag=True, help="Only decisions not finished yet.")
@user_errors
def actions(config_file: Path | None, journal_path: Path | None, unfinished: bool) -> None:
    """The action journal: each decision medic planned, its steps (action, target, job) and
    how far each got (planned, issued, done, partial, failed). Reads the file only, so it
    works while serve runs; unfinished decisions are resumed when serve starts."""
    from medic.actions.journal import Journal, render
    from medic.settings import load_settings

    if journal_path is None:
        state_dir = Path(load_tree(load_settings(config_file)).service.state_dir)
        journal_path = state_dir / "journal.jsonl"
    if not journal_path.exists():
        raise click.ClickException(f"no journal at {journal_path}")
    click.echo(render(Journal(journal_path), unfinished), nl=False)


@main.command()
@click.option(
    "--db", "--history", "db_path", type=click.Path(path_type=Path), help="History database."
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option("--slurm/--no-slurm", default=True, show_default=True, help="Ask Slurm (sinfo).")
@user_errors
def nodes(db_path: Path | None, config_file: Path | None, slurm: bool) -> None:
    """Nodes by Slurm state with their history: medic's checks and resumes, drains by others,
    incidents that blamed them, jobs hit and lemon score ([rules.lifecycle.lemon])."""
    from medic.actions.nodes_report import nodes_report
    from medic.history.nodes import print_nodes
    from medic.remote_report import history_node_table
    from medic.settings import load_settings

    settings = load_tree(load_settings(config_file))
    table = history_node_table(settings, db_path)
    print_nodes(nodes_report(settings, table, slurm), wide_console())


@main.group()
def history() -> None:
    """The history database: detections, actions, incidents, job progress, GPU telemetry."""


@history.command("import")
@click.argument("results", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--recordings",
    "recording_paths",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Recordings to replay for job events, GPU telemetry and progress (repeatable).",
)
@click.option(
    "--db", "--history", "db_path", type=click.Path(path_type=Path), help="History database."
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@user_errors
def history_import(
    results: tuple[Path, ...],
    recording_paths: tuple[Path, ...],
    db_path: Path | None,
    config_file: Path | None,
) -> None:
    """Load backtest results (the detections.parquet and actions.parquet files under RESULTS,
    as `medic backtest --out` writes them) into the history database ([history] path unless
    --db), created if needed. Importing the same files again adds nothing."""
    from medic.history.store import DuckDBStore
    from medic.history_import import import_backtest

    if not results and not recording_paths:
        fail("nothing to import: name backtest result directories or --recordings")
    settings = load_tree(load_settings(config_file))
    recordings = expand_recordings(recording_paths) if recording_paths else []
    path = db_path or Path(settings.history.path)
    with DuckDBStore(path) as store:
        counts = import_backtest(store, results, recordings, settings)
    for table in sorted(counts.inserted.keys() | counts.read.keys()):
        read = f" of {counts.read[table]} read" if table in counts.read else ""
        click.echo(f"{table}: {counts.inserted[table]} new row(s){read}")
    click.echo(f"{counts.recordings} recording(s) replayed into {path}")


@main.group()
def simulate() -> None:
    """Generate realistic recordings with labelled faults and healthy traps."""


@simulate.command("list")
def simulate_list() -> None:
    """List the scenarios, the label kind each produces and their parameters."""
    from medic.simulate.listing import print_scenarios

    print_scenarios(wide_console())


@simulate.command("run")
@click.argument("scenario")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    required=True,
    help="Parent directory; the recording is written to OUT/<scenario>-s<seed>.",
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="KEY=VALUE",
    help="Scenario parameter (repeatable), e.g. --set job_nodes=16.",
)
@user_errors
def simulate_run(scenario: str, seed: int, out_dir: Path, assignments: tuple[str, ...]) -> None:
    """Generate one recording of SCENARIO."""
    from medic.recording import write_recording
    from medic.simulate import simulate as generate
    from medic.simulate.listing import parse_assignments

    recording = generate(scenario, seed, **parse_assignments(assignments))
    path = write_recording(out_dir / recording.name, recording)
    labels = 0 if recording.labels is None else recording.labels.num_rows
    click.echo(f"{path}: {labels} label(s)")


@simulate.command("suite")
@click.argument("name")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True)
@click.option(
    "--seeds", type=int, default=None, help="Seeds per scenario (broad and perturbed suites)."
)
@user_errors
def simulate_suite(name: str, out_dir: Path, seeds: int | None) -> None:
    """Generate suite NAME: 'datasets' (the committed datasets/), 'broad' (evaluation) or
    'perturbed' (the faults and traps under realistic variation)."""
    from medic.simulate import write_suite

    paths = write_suite(name, out_dir, seeds)
    click.echo(f"{len(paths)} recording(s) written under {out_dir}/")


@main.command()
@click.option("--address", default="0.0.0.0", show_default=True, help="Listen address.")
@click.option("--port", default=9400, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--interval",
    "interval_s",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds between samples.",
)
@click.option("--hostname", default="", help="Hostname label (default: this host's name).")
@click.option(
    "--job-map-dir",
    default="",
    type=click.Path(),
    help="dcgm-exporter style job mapping: a file per GPU index holding the job id.",
)
@click.option(
    "--infiniband-root",
    default="/sys/class/infiniband",
    show_default=True,
    help="Where the kernel exposes InfiniBand port counters (empty: read none).",
)
@click.option("--once", is_flag=True, help="Sample once, print the exposition and exit.")
def agent(
    address: str,
    port: int,
    interval_s: float,
    hostname: str,
    job_map_dir: str,
    infiniband_root: str,
    once: bool,
) -> None:
    """Sample this node's GPUs through NVML and serve them as Prometheus text under
    dcgm-exporter's metric names (GET /metrics)."""
    import signal
    import threading

    import pynvml

    from medic.ingest.nvml import Agent, AgentConfig, exposition

    config = AgentConfig(address, port, interval_s, hostname, job_map_dir, infiniband_root)
    try:
        running = Agent(config, pynvml)
    except pynvml.NVMLError as exc:
        fail(f"NVML unavailable: {exc}")
    if once:
        running.step()
        click.echo(exposition(running.collector), nl=False)
        running.sampler.close()
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    bound = running.start()
    gpus = running.sampler.gpus
    click.echo(
        f"medic agent: {len(gpus)} GPU(s) on {running.sampler.hostname}: "
        + ", ".join(f"{g.index}={g.model} {g.uuid}" for g in gpus)
    )
    click.echo(f"medic agent: serving http://{address}:{bound}/metrics every {interval_s:g} s")
    try:
        running.run(stop, lambda readings: None)
    except KeyboardInterrupt:
        pass
    finally:
        running.close()


@main.command()
@click.option("--start", "start", required=True, help="ISO-8601 time, now, or now-10m.")
@click.option("--end", "end", required=True, help="ISO-8601 time, now, or now+5m.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="medic.toml")
@click.option("--name", default=None, help="Recording name (default: the directory's name).")
@click.option("--description", default="", help="Free text for meta.json.")
@click.option(
    "--grace",
    "grace_s",
    default=60.0,
    show_default=True,
    type=float,
    help="Seconds past --end to wait for a lagging source.",
)
@user_errors
def record(
    start: str,
    end: str,
    out_dir: Path,
    config_file: Path | None,
    name: str | None,
    description: str,
    grace_s: float,
) -> None:
    """Capture a time range from the configured sources ([sources] in medic.toml) into a
    recording, so that a real incident becomes a backtest case (add labels with medic label)."""
    import asyncio

    from medic.ingest.live import SourceError, wall_us
    from medic.record import parse_when
    from medic.record import record as capture_range

    settings = load_tree(load_settings(config_file))
    now = wall_us()
    start_us, end_us = parse_when(start, now), parse_when(end, now)
    try:
        recording = asyncio.run(
            capture_range(settings, start_us, end_us, out_dir, name, description, grace_s)
        )
    except SourceError as exc:
        fail(str(exc))
    counts = ", ".join(
        f"{recording.stream(s).num_rows} {s} rows" for s in ("logs", "gpu", "scheduler")
    )
    click.echo(f"{out_dir}: {counts}")
    for late in recording.meta.get("incomplete_sources", []):
        click.echo(f"warning: {late} did not deliver up to --end", err=True)


@main.command()
@click.argument("recording_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--job", "job_id", help="The affected job.")
@click.option("--kind", type=click.Choice(DETECTION_KINDS), help="What went wrong.")
@click.option("--onset", help="When the fault first shows (ISO-8601 with a zone).")
@click.option("--culprit", "culprits", multiple=True, help="A node to isolate (repeatable).")
@click.option("--rank", "ranks", multiple=True, type=int, help="A root-cause rank (repeatable).")
@click.option("--note", default=None, help="Free text.")
@click.option("--id", "incident_id", default=None, help="Incident id (default: job-kind-N).")
@click.option("--list", "show", is_flag=True, help="Print the recording's labels.")
@click.option("--remove", "remove_id", default=None, help="Remove the label with this id.")
@user_errors
def label(
    recording_dir: Path,
    job_id: str | None,
    kind: str | None,
    onset: str | None,
    culprits: tuple[str, ...],
    ranks: tuple[int, ...],
    note: str | None,
    incident_id: str | None,
    show: bool,
    remove_id: str | None,
) -> None:
    """Add ground truth to a recording (labels.parquet): one label per incident."""
    from medic.record import add_label, remove_label
    from medic.recording import read_recording
    from medic.timeutil import iso

    if remove_id is not None:
        remove_label(recording_dir, remove_id)
        click.echo(f"removed {remove_id}")
    elif not show:
        if job_id is None or kind is None or onset is None:
            fail("give --job, --kind and --onset (or --list, --remove ID)")
        row = add_label(
            recording_dir, str(job_id), str(kind), str(onset), culprits, ranks, note, incident_id
        )
        click.echo(f"added {row['incident_id']}")
    labels = read_recording(recording_dir).labels
    for item in [] if labels is None else labels.to_pylist():
        culprit = ",".join(item["culprit_nodes"]) or "-"
        click.echo(
            f"{item['incident_id']}  job {item['job_id']}  {item['kind']}  "
            f"onset {iso(int(item['onset'].timestamp() * 1_000_000))}  culprits {culprit}"
            + (
                f"  ranks {','.join(map(str, item['culprit_ranks']))}"
                if item["culprit_ranks"]
                else ""
            )
            + (f"  ({item['note']})" if item["note"] else "")
        )


@main.command()
@click.option(
    "--config", "config_file", required=True, type=click.Path(path_type=Path), help="medic.toml"
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
@user_errors
def serve(config_file: Path, log_level: str) -> None:
    """Run medic as a service: live sources through the detectors, rules and Slurm executor
    into the history, with /metrics, /healthz and /report (loopback by default). Logs one line
    per detection and per action decision. Stops on SIGTERM."""
    from medic.service import serve as run_service
    from medic.service_log import configure_logging

    settings = load_tree(load_settings(config_file))
    config = settings.service
    configure_logging(
        log_level,
        config.log_format,
        config.log_file,
        config.log_file_max_mb,
        config.log_file_backups,
    )
    run_service(settings)
