"""The configs under examples/ load, and each runs as `medic serve` against real inputs: job
output files, the local Slurm, a local VictoriaLogs and a telemetry endpoint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from medic.config_tables import effective_settings
from medic.service import Service
from medic.settings import load_settings
from medic.testing.victorialogs import VictoriaLogsServer
from tests.conftest import ROOT, SlurmCluster
from tests.test_doctor import exporter  # noqa: F401  (the fixture)
from tests.test_service import OOM, rows

EXAMPLES = ROOT / "examples"
PROGRESS = (
    " [2026-12-01 10:00:0{i}] iteration        {i}/  100000 | consumed samples:          256 | "
    "elapsed time per iteration (ms): 1003.7 | throughput per GPU (TFLOP/s/GPU): 181.9 |"
)


def localised(name: str, tmp: Path, **replace: str) -> Path:
    """The example with its listen address free, its files under ``tmp`` and ``replace``d."""
    text = (EXAMPLES / name).read_text().replace("127.0.0.1:9464", "127.0.0.1:0")
    for old, new in {"/var/lib/medic": str(tmp), **replace}.items():
        text = text.replace(old, new)
    config = tmp / name
    config.write_text(text)
    return config


def serve_until(service: Service, done: Callable[[Service], bool], timeout: float = 90) -> None:
    async def scenario() -> None:
        task = asyncio.create_task(service.run())
        deadline = time.monotonic() + timeout
        while not done(service) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        service.stop()
        await task

    asyncio.run(scenario())


def counted(service: Service, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (whatever their others)."""
    return sum(
        sample.value
        for metric in service.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def crashes(service: Service) -> float:
    return counted(service, "medic_detections_total", kind="crash", detector="crash")


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_every_example_is_a_valid_config(name: str) -> None:
    effective = effective_settings(load_settings(EXAMPLES / name))
    assert effective["rules"]["mode"] == "monitor"


def write_job(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def test_files_only_detects_a_crash_from_a_job_output_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = localised("files-only.toml", tmp_path)
    write_job(tmp_path / "jobs" / "slurm-42.out", *(PROGRESS.format(i=i) for i in range(1, 4)))
    service = Service(load_settings(config))
    write_job(
        tmp_path / "jobs" / "slurm-43.out", "[rank3]: Traceback (most recent call last):", OOM
    )
    serve_until(service, lambda s: crashes(s) > 0)
    found = rows(tmp_path / "medic-history.duckdb", "SELECT job_id, kind FROM detections")
    assert found == [("43", "crash")]


def test_monitor_evaluation_watches_slurm_and_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm: SlurmCluster
) -> None:
    monkeypatch.chdir(tmp_path)
    config = localised("monitor-evaluation.toml", tmp_path)
    job = slurm.sbatch(script="sleep 60")
    write_job(
        tmp_path / "jobs" / f"slurm-{job}.out", "[rank0]: starting", OOM.replace("rank3", "rank0")
    )
    service = Service(load_settings(config))
    try:
        serve_until(
            service,
            lambda s: (
                counted(s, "medic_ingested_rows_total", source="slurm", stream="scheduler") > 0
                and crashes(s) > 0
            ),
        )
    finally:
        slurm.run("scancel", job)
    assert counted(service, "medic_ingested_rows_total", source="slurm", stream="scheduler") > 0
    found = rows(tmp_path / "medic-history.duckdb", "SELECT job_id, kind FROM detections")
    assert (job, "crash") in found  # other users' jobs that failed lately may show up too


def test_victorialogs_slurm_and_nvml_agent(
    tmp_path: Path,
    slurm: SlurmCluster,
    exporter: str,  # noqa: F811
) -> None:
    with VictoriaLogsServer() as vl:
        config = localised(
            "victorialogs-slurm-nvml.toml",
            tmp_path,
            **{
                "http://127.0.0.1:9428": vl.url,
                '"http://gpu-node-01:9400/metrics", "http://gpu-node-02:9400/metrics"': (
                    f'"{exporter}/metrics"'
                ),
            },
        )
        now = time.time_ns()
        fields = {"job_id": "77", "host": "n1", "rank": "0", "source": "app"}
        lines = ["[rank0]: Traceback (most recent call last):", OOM.replace("rank3", "rank0")]
        vl.ingest(
            {"_time": str(now - (2 - i) * 10**9), "_msg": line, **fields}
            for i, line in enumerate(lines)
        )
        service = Service(load_settings(config))
        serve_until(
            service,
            lambda s: (
                crashes(s) > 0
                and counted(s, "medic_ingested_rows_total", source="prometheus", stream="gpu") > 0
                and counted(s, "medic_ingested_rows_total", source="slurm", stream="scheduler") > 0
            ),
        )
    assert counted(service, "medic_ingested_rows_total", source="victorialogs", stream="logs") >= 2
    assert counted(service, "medic_ingested_rows_total", source="prometheus", stream="gpu") > 0
    found = rows(tmp_path / "history.duckdb", "SELECT job_id, kind FROM detections")
    assert ("77", "crash") in found
