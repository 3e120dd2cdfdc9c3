"""The node agent against a fake NVML at the pynvml seam, and its endpoint read back by the
Prometheus source over a real socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

from medic import schema
from medic.ingest.base import Batch
from medic.ingest.nvml import (
    Agent,
    AgentConfig,
    DcgmCollector,
    NvmlSampler,
    exposition,
    readings_table,
)
from medic.ingest.prometheus import PrometheusConfig, PrometheusSource
from medic.testing.builders import T0
from medic.testing.nvml import FakeGpu, FakeNvml
from tests.ingest.test_infiniband import port as ib_port

FLIT, DATA = pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA
REPLAY, RECOVERY = pynvml.NVML_NVLINK_ERROR_DL_REPLAY, pynvml.NVML_NVLINK_ERROR_DL_RECOVERY


def gpus() -> list[FakeGpu]:
    return [
        FakeGpu(
            "GPU-aaaa",
            nvlink={0: {FLIT: 1, REPLAY: 2}, 3: {RECOVERY: 4, DATA: 5}},
            ecc_sbe=7,
            pcie_replay=3,
            reasons=0x4,
        ),
        FakeGpu(
            "GPU-bbbb",
            util=0,
            unsupported={"nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetTotalEccErrors"},
        ),
    ]


@pytest.fixture
def nvml() -> FakeNvml:
    return FakeNvml(gpus())


def test_a_sample_fills_every_gpu_column_in_the_schema_units(nvml: FakeNvml) -> None:
    sampler = NvmlSampler(nvml, hostname="gpu001")
    table = readings_table(sampler.sample(T0))
    assert table.schema == schema.GPU
    first, second = table.to_pylist()
    assert first["node"] == "gpu001" and first["gpu"] == 0 and first["job_id"] is None
    assert first["util"] == 97.0
    assert first["mem_used_mib"] == 60 * 1024.0
    assert first["power_w"] == pytest.approx(612.345)
    assert (first["temp_c"], first["sm_clock_mhz"], first["throttle_reasons"]) == (61.0, 1980.0, 4)
    assert (first["ecc_sbe"], first["ecc_dbe"], first["pcie_replay"]) == (7, 0, 3)
    assert first["nvlink_errors"] == 1 + 2 + 4 + 5
    assert first["xid"] is None
    assert (second["ecc_sbe"], second["ecc_dbe"], second["pcie_replay"]) == (None, None, None)
    assert second["nvlink_errors"] is None  # no active link


def test_unsupported_metrics_are_not_asked_again(nvml: FakeNvml) -> None:
    sampler = NvmlSampler(nvml, hostname="gpu001")
    for _ in range(3):
        sampler.sample(T0)
    assert nvml.calls["nvmlDeviceGetPcieReplayCounter"] == 3 + 1  # GPU 0 every time, GPU 1 once
    assert sampler.stats["nvml_errors"] == 0


def test_xid_events_mark_one_sample_and_are_counted_for_the_endpoint(nvml: FakeNvml) -> None:
    sampler = NvmlSampler(nvml, hostname="gpu001")
    nvml.xid(1, 48)
    nvml.xid(1, 79)
    first = readings_table(sampler.sample(T0)).column("xid").to_pylist()
    second = readings_table(sampler.sample(T0 + 1)).column("xid").to_pylist()
    assert (first, second) == ([None, 79], [None, None])
    collector = DcgmCollector()
    collector.update(sampler.sample(T0 + 2))
    samples = {
        (s.name, s.labels.get("gpu"), s.labels.get("xid")): s.value
        for family in text_string_to_metric_families(exposition(collector))
        for s in family.samples
    }
    assert samples[("DCGM_FI_DEV_XID_ERRORS", "1", None)] == 79
    assert samples[("DCGM_FI_DEV_XID_ERRORS", "0", None)] == 0
    assert samples[("DCGM_EXP_XID_ERRORS_TOTAL", "1", "79")] == 1
    assert samples[("DCGM_EXP_XID_ERRORS_TOTAL", "1", "48")] == 1


def test_exposition_uses_dcgm_exporter_names_and_labels(nvml: FakeNvml, tmp_path: Path) -> None:
    (tmp_path / "0").write_text("4242\n")
    sampler = NvmlSampler(nvml, hostname="gpu001", job_map_dir=tmp_path)
    collector = DcgmCollector()
    collector.update(sampler.sample(T0))
    text = exposition(collector)
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
    assert "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER untyped" in text
    assert (
        'DCGM_FI_DEV_SM_CLOCK{Hostname="gpu001",UUID="GPU-aaaa",device="nvidia0",gpu="0",'
        'hpc_job="4242",modelName="NVIDIA H100 80GB HBM3"} 1980.0'
    ) in text
    assert 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{Hostname="gpu001",UUID="GPU-bbbb"' not in text


@pytest.fixture
def agent(nvml: FakeNvml, tmp_path: Path) -> Iterator[tuple[Agent, int]]:
    (tmp_path / "1").write_text("77\n")
    ib_port(tmp_path / "ib", "mlx5_0", 1, symbol_error="40", link_downed="1")
    ib_port(tmp_path / "ib", "mlx5_2", 1, link_error_recovery="2", link_downed="0")
    config = AgentConfig(
        address="127.0.0.1",
        port=0,
        hostname="gpu001",
        job_map_dir=str(tmp_path),
        infiniband_root=str(tmp_path / "ib"),
    )
    running = Agent(config, nvml)
    port = running.start()
    yield running, port
    running.close()
    assert not nvml.initialised


async def test_the_scraper_reads_back_what_the_agent_sampled(
    agent: tuple[Agent, int], nvml: FakeNvml
) -> None:
    running, port = agent
    readings = running.step()
    config = PrometheusConfig(targets=(f"http://127.0.0.1:{port}/metrics",))
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(config, client, clock=lambda: T0)
        nvml.xid(0, 94)
        running.step()
        events = await source.scrape_round()
    batch = events[0]
    assert isinstance(batch, Batch)
    scraped = batch.data.to_pylist()
    sampled = readings_table(readings).to_pylist()
    for row in (*scraped, *sampled):
        row.pop("time")
        row.pop("xid")
    assert scraped == sampled
    assert [r["job_id"] for r in scraped] == [None, "77"]
    assert [(r["ib_errors"], r["ib_link_downed"]) for r in scraped] == [(42, 1), (42, 1)]


def test_infiniband_ports_are_served_as_node_exporter_serves_them(
    nvml: FakeNvml, tmp_path: Path
) -> None:
    ib_port(tmp_path, "mlx5_0", 1, symbol_error="9", link_downed="3")
    sampler = NvmlSampler(nvml, hostname="gpu001", infiniband=tmp_path)
    collector = DcgmCollector()
    collector.update(sampler.sample(T0), sampler.ib_ports)
    text = exposition(collector)
    assert "# TYPE node_infiniband_link_downed_total counter" in text
    assert 'node_infiniband_link_downed_total{device="mlx5_0",port="1"} 3.0' in text
    assert 'node_infiniband_symbol_error_total{device="mlx5_0",port="1"} 9.0' in text
    assert "port_recv_errors" not in text and "xmit" not in text


def test_without_infiniband_the_columns_stay_null(nvml: FakeNvml) -> None:
    table = readings_table(NvmlSampler(nvml, hostname="gpu001").sample(T0))
    assert table.column("ib_errors").null_count == table.num_rows
