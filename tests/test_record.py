"""``medic record`` and ``medic label``: real sources into a recording, ground truth onto it."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.ingest.files import FilesConfig, FileSource
from medic.ingest.live import wall_us
from medic.record import capture, parse_when, record
from medic.recording import RecordingError, read_recording, validate_recording
from medic.testing.builders import T0, log, recording, write
from medic.testing.nvml import FakeGpu, FakeNvml
from medic.testing.victorialogs import VictoriaLogsServer
from medic.timeutil import US, iso


@pytest.fixture
def vl() -> Iterator[VictoriaLogsServer]:
    with VictoriaLogsServer() as server:
        yield server


def vl_settings(vl: VictoriaLogsServer) -> dict[str, object]:
    return {
        "sources": {
            "victorialogs": {
                "url": vl.url,
                "offset_s": 0.05,
                "refresh_interval_s": 0.05,
                "watermark_lag_s": 0.2,
            }
        }
    }


async def test_a_past_incident_is_recorded_from_the_log_store(
    vl: VictoriaLogsServer, tmp_path: Path
) -> None:
    t0 = time.time_ns() - 600 * 10**9
    vl.ingest(
        [
            {"_time": str(t0 + i * 10**9), "_msg": f"step {i}", "host": "gpu7", "job_id": "42"}
            for i in range(100)
        ],
        stream_fields=["host"],
    )
    vl.flush()
    start_us, end_us = (t0 + 10 * 10**9) // 1000, (t0 + 19 * 10**9) // 1000
    out = tmp_path / "xid79-gpu7"
    rec = await record(vl_settings(vl), start_us, end_us, out, description="bad GPU")
    assert validate_recording(out) == []
    back = read_recording(out)
    assert back.logs.column("message").to_pylist() == [f"step {i}" for i in range(10, 20)]
    assert back.meta["sources"] == ["victorialogs"] and back.meta["incomplete_sources"] == []
    assert (back.meta["name"], back.meta["description"]) == ("xid79-gpu7", "bad GPU")
    assert rec.start_us == start_us


async def test_live_sources_are_captured_until_the_end(tmp_path: Path) -> None:
    out = tmp_path / "slurm-9.out"
    out.write_text("written before the recording\n")
    files = FileSource(
        FilesConfig(paths=(str(tmp_path / "slurm-%j.out"),), poll_interval_s=0.05),
        start_at_end=True,
    )
    start = wall_us()

    async def write_meanwhile() -> None:
        await asyncio.sleep(0.2)
        with out.open("a") as f:
            f.write("during the recording\n")

    writer = asyncio.create_task(write_meanwhile())
    streams, late = await capture([files], start, start + US, grace_s=5)
    await writer
    assert late == []
    assert streams["logs"].column("message").to_pylist() == ["during the recording"]
    assert streams["logs"].column("job_id").to_pylist() == ["9"]


async def test_a_source_that_never_completes_is_named_after_the_grace(tmp_path: Path) -> None:
    with VictoriaLogsServer() as down:
        url = down.url
    settings = {"sources": {"victorialogs": {"url": url, "backoff_max_s": 0.1}}}
    now = wall_us()
    rec = await record(settings, now - 60 * US, now - 30 * US, tmp_path / "r", grace_s=0.5)
    assert rec.meta["incomplete_sources"] == ["victorialogs"]
    assert rec.logs.num_rows == 0


def test_times_are_iso_or_relative_to_now() -> None:
    assert parse_when("now", T0) == T0
    assert parse_when("now-10m", T0) == T0 - 600 * US
    assert parse_when("now + 1.5h", T0) == T0 + 5400 * US
    assert parse_when(iso(T0), 0) == T0
    with pytest.raises(RecordingError, match="no time zone"):
        parse_when("2026-03-01T10:00:00", T0)


def test_record_command_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main, ["record", "--start", "now", "--end", "now-1m", "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2
    assert result.stderr == "medic: error: the end of the range must come after its start\n"
    result = runner.invoke(main, ["record", "--start", "yesterday", "--end", "now", "--out", "x"])
    assert result.exit_code == 2 and "not an ISO-8601 timestamp: 'yesterday'" in result.stderr


def test_labels_are_added_listed_and_removed(tmp_path: Path) -> None:
    path = write(tmp_path / "r", recording(logs=[log(1, "x")]))
    runner = CliRunner()
    onset = iso(T0 + 5 * US)
    added = runner.invoke(
        main,
        [
            "label",
            str(path),
            "--job",
            "100",
            "--kind",
            "gpu_fault",
            "--onset",
            onset,
            "--culprit",
            "gpu7",
            "--rank",
            "3",
            "--note",
            "Xid 79 on GPU 2",
        ],
    )
    assert added.exit_code == 0, added.output
    assert added.stdout.splitlines() == [
        "added 100-gpu_fault-1",
        f"100-gpu_fault-1  job 100  gpu_fault  onset {onset}  culprits gpu7  ranks 3"
        "  (Xid 79 on GPU 2)",
    ]
    assert validate_recording(path) == []
    labels = read_recording(path).labels
    assert labels is not None and labels.to_pylist()[0]["culprit_ranks"] == [3]
    again = runner.invoke(
        main,
        [
            "label",
            str(path),
            "--job",
            "100",
            "--kind",
            "hang",
            "--onset",
            onset,
            "--id",
            "100-gpu_fault-1",
        ],
    )
    assert again.exit_code == 2 and "exists already" in again.stderr
    removed = runner.invoke(main, ["label", str(path), "--remove", "100-gpu_fault-1"])
    assert removed.stdout == "removed 100-gpu_fault-1\n"
    assert runner.invoke(main, ["label", str(path), "--job", "1"]).exit_code == 2


def test_agent_once_prints_the_exposition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([FakeGpu("GPU-aaaa")]))
    result = CliRunner().invoke(main, ["agent", "--once", "--hostname", "gpu001"])
    assert result.exit_code == 0, result.output
    assert 'DCGM_FI_DEV_GPU_TEMP{Hostname="gpu001",UUID="GPU-aaaa"' in result.stdout


def test_agent_without_nvml_is_a_one_line_error() -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has NVML")
    result = CliRunner().invoke(main, ["agent", "--once"])
    assert result.exit_code == 2
    assert result.stderr.startswith("medic: error: NVML unavailable: ")
    assert result.stderr.count("\n") == 1
