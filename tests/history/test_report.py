"""``medic report``: figures from the views, terminal tables, the HTML file, the command."""

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from medic.cli import main
from medic.history.config import HistoryConfig
from medic.history.html import render_html, write_html
from medic.history.report import Report, build_report, print_report
from medic.history.store import DuckDBStore
from medic.history.writer import detection_rows
from tests.history.rows import detection
from tests.history.scenario import fill

SAVED = (600 - 31) * 4 / 3600  # A, acted on at 131 s; see tests/history/scenario.py
WOULD = 600 * 16 / 3600  # B, whose requeue monitor mode held back at its detection


def render(report: Report) -> str:
    console = Console(width=200, record=True)
    print_report(report, console)
    return console.export_text()


def test_the_report_counts_suspects_apart_from_confirmed_detections(store: DuckDBStore) -> None:
    suspect = replace(detection(900, "hang", "400", detector="hang"), tier="suspect")
    store.append("detections", detection_rows([suspect]))
    report = build_report(fill(store), HistoryConfig())
    assert report.overview["suspect_detections"] == 1
    assert "detections suspected" in render(report)


def test_report_figures_come_from_the_views(store: DuckDBStore) -> None:
    report = build_report(fill(store), HistoryConfig())

    assert report.overview["incidents"] == 3
    assert report.overview["open_incidents"] == 2
    assert report.overview["action_decisions"] == 5
    assert report.overview["actions_taken"] == 3
    assert report.overview["actions_monitor"] == 1
    assert report.overview["actions_suppressed"] == 1
    assert (report.overview["confirmed_detections"], report.overview["suspect_detections"]) == (
        3,
        0,
    )
    latency = {(r["measure"], r["kind"]): r for r in report.latency.to_dicts()}
    assert latency["time to detect", "all"]["n"] == 2
    assert latency["time to detect", "all"]["mean_s"] == 165.0
    assert latency["time to detect", "gpu_fault"]["p90_s"] == 30.0
    assert latency["time to act", "all"]["p50_s"] == 31.0
    assert latency["act after detection", "all"]["max_s"] == 1.0
    assert report.gpu_hours_saved == pytest.approx(SAVED)
    assert report.would_have_saved == pytest.approx(WOULD)
    savings = {r["kind"]: r for r in report.savings.to_dicts()}
    assert savings["hang"]["onset_assumed"] == 1
    assert (savings["hang"]["acted_on"], savings["hang"]["held_back"]) == (0, 1)
    assert (savings["gpu_fault"]["acted_on"], savings["gpu_fault"]["held_back"]) == (1, 0)
    assert report.restarts.get_column("job_id").to_list() == ["100", "200", "300"]


def test_top_bounds_the_lists_and_the_watchdog_is_a_setting(store: DuckDBStore) -> None:
    report = build_report(fill(store), HistoryConfig(watchdog_timeout_s=300), top=1)

    assert report.nodes.get_column("node").to_list() == ["n1"]
    assert report.restarts.height == 1
    assert report.gpu_hours_saved == pytest.approx((300 - 31) * 4 / 3600)
    assert report.would_have_saved == pytest.approx(300 * 16 / 3600)


def test_terminal_report_prints_every_section(store: DuckDBStore) -> None:
    text = render(build_report(fill(store), HistoryConfig()))

    for title in (
        "Time to detect and to act (seconds)",
        "Detections per day (UTC)",
        "Actions per day (UTC)",
        "Nodes blamed most",
        "GPUs with most faults",
        "Restarts per job",
        "GPU-hours saved against the NCCL watchdog (600 s)",
    ):
        assert title in text
    assert f"{SAVED:,.2f}" in text
    assert "2026-03-01" in text


def test_an_empty_history_reports_nothing_recorded(store: DuckDBStore) -> None:
    report = build_report(store, HistoryConfig())

    assert "none recorded" in render(report)
    assert report.gpu_hours_saved == 0.0
    assert "<svg" not in render_html(report)


def test_html_report_is_one_self_contained_file_with_plots(
    store: DuckDBStore, tmp_path: Path
) -> None:
    fill(store)
    store.append("detections", detection_rows([detection(900, "crash", "<b>9</b>", ["n1"])]))

    page = write_html(build_report(store, HistoryConfig()), tmp_path / "r.html").read_text()

    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 5
    assert "<script" not in page and " src=" not in page
    assert "&lt;b&gt;9&lt;/b&gt;" in page and "<b>9</b>" not in page


def test_report_command_prints_and_writes_html(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    with DuckDBStore(db) as store:
        fill(store)
    html = tmp_path / "report.html"

    result = CliRunner().invoke(main, ["report", "--db", str(db), "--html", str(html)])

    assert result.exit_code == 0, result.output
    assert "GPU-hours saved against the NCCL watchdog (600 s)" in result.output
    assert html.read_text().count("<svg") == 5


def test_report_command_takes_the_watchdog_from_the_config_or_a_flag(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    with DuckDBStore(db) as store:
        fill(store)
    config = tmp_path / "medic.toml"
    config.write_text(f'[history]\npath = "{db}"\nwatchdog_timeout_s = 900\n')

    from_config = CliRunner().invoke(main, ["report", "--config", str(config)])
    from_flag = CliRunner().invoke(main, ["report", "--config", str(config), "--watchdog-s", "60"])

    assert "NCCL watchdog (900 s)" in from_config.output
    assert "NCCL watchdog (60 s)" in from_flag.output


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such database"),
        ("bad-config", "unknown setting 'history.colour'"),
        ("not-a-db", "cannot open"),
    ],
)
def test_report_command_errors_are_one_line(tmp_path: Path, setup: str, message: str) -> None:
    db = tmp_path / "history.duckdb"
    args = ["report", "--db", str(db)]
    if setup == "bad-config":
        config = tmp_path / "medic.toml"
        config.write_text("[history]\ncolour = 1\n")
        args += ["--config", str(config)]
    if setup == "not-a-db":
        db.write_text("hello\n" * 1000)

    result = CliRunner().invoke(main, args)

    assert result.exit_code == 2
    assert message in result.output
    assert result.output.count("\n") == 1


def test_plots_that_would_show_nothing_are_left_out(store: DuckDBStore) -> None:
    from medic.history.writer import HistoryWriter
    from medic.testing.builders import batch
    from tests.history.rows import action, actions, job
    from tests.history.scenario import B

    writer = HistoryWriter(store)
    writer.update(batch("scheduler", [job(10, "200", "RUNNING", ["n3", "n4"])]))
    writer.flush()
    store.append("detections", detection_rows([B]))
    store.append(
        "actions",
        actions(action(400, B.id, "requeue", job_id="200", status="suppressed", guard="monitor")),
    )
    report = build_report(store, HistoryConfig())
    page = render_html(report)
    assert report.gpu_hours_saved == 0.0
    assert report.would_have_saved == pytest.approx(WOULD)
    sections = dict(part.split("</h2>", 1) for part in page.split("<h2>")[1:])
    assert "<svg" not in sections["Actions per day (UTC)"]
    assert "<svg" not in sections["Nodes blamed most"]
    assert "<svg" in sections["GPU-hours saved against the NCCL watchdog (600 s)"]


def test_time_to_detect_is_reported_in_event_time_and_by_the_wall_clock(
    store: DuckDBStore,
) -> None:
    from medic.detectors.base import Detection
    from medic.history.writer import HistoryWriter
    from medic.testing.builders import at

    writer = HistoryWriter(store, wall_clock=lambda: at(104))
    xid = Detection("7", "gpu_fault", ("n2",), detector="gpu_fault", onset=at(100))
    writer.handle([replace(xid, detected_at=at(100.5), incident="i7")], at(100.5))
    report = build_report(store, HistoryConfig())
    latency = {(r["measure"], r["kind"]): r for r in report.latency.to_dicts()}
    assert latency["time to detect", "gpu_fault"]["p50_s"] == 0.5
    assert latency["time to detect (wall clock)", "gpu_fault"]["p50_s"] == 4.0
    (row,) = store.sql("SELECT incident_id, detected_wall FROM detections").to_pylist()
    assert row["incident_id"] == "i7"
