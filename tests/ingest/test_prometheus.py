"""The Prometheus source reading dcgm-exporter's exposition (through an httpx transport)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch, Watermark
from medic.ingest.prometheus import PrometheusConfig, PrometheusSource
from medic.testing.builders import T0
from medic.testing.dcgm import DcgmExporter
from medic.testing.dcgm import exposition as dcgm_exporter

DATA = Path(__file__).parent / "data"


def exporter() -> DcgmExporter:
    fake = DcgmExporter({"gpu001": dcgm_exporter("gpu001", job="4242")})
    fake.refused.add("down")
    fake.errors["broken"] = (500, "internal error\nmore")
    fake.pages["garbage"] = "{not: prometheus}\n"
    return fake


def source(endpoints: DcgmExporter, *hosts: str, cursor: dict | None = None) -> PrometheusSource:
    config = PrometheusConfig(targets=tuple(f"http://{h}:9400/metrics" for h in hosts))
    client = httpx.AsyncClient(transport=httpx.MockTransport(endpoints.handler))
    return PrometheusSource(config, client, cursor, clock=lambda: T0)


async def rows(src: PrometheusSource) -> list[dict[str, object]]:
    events = await src.scrape_round()
    assert isinstance(events[-1], Watermark) and events[-1].time == T0
    batches = [e for e in events if isinstance(e, Batch)]
    for b in batches:
        assert b.data.schema == schema.GPU
    return [r for b in batches for r in b.data.to_pylist()]


async def test_dcgm_exporter_text_becomes_gpu_rows() -> None:
    got = await rows(source(exporter(), "gpu001"))
    assert [(r["node"], r["gpu"], r["job_id"]) for r in got] == [
        ("gpu001", 0, "4242"),
        ("gpu001", 1, "4242"),
    ]
    busy = got[1]
    assert (busy["util"], busy["mem_used_mib"], busy["power_w"]) == (100.0, 80050.0, 423.5)
    assert (busy["temp_c"], busy["sm_clock_mhz"], busy["throttle_reasons"]) == (36.0, 1395.0, 4)
    assert (busy["pcie_replay"], busy["nvlink_errors"], busy["ecc_dbe"]) == (2, 4, 0)
    assert busy["ecc_sbe"] is None  # not exported: null, not zero
    assert busy["time"].timestamp() * 1_000_000 == T0


async def test_xid_is_reported_once_when_the_last_xid_changes() -> None:
    endpoints = exporter()
    src = source(endpoints, "gpu001")
    endpoints.pages["gpu001"] = dcgm_exporter("gpu001", xid=31)
    assert [r["xid"] for r in await rows(src)] == [None, None]  # seen before medic started
    endpoints.pages["gpu001"] = dcgm_exporter("gpu001", xid=79)
    assert [r["xid"] for r in await rows(src)] == [None, 79]
    assert [r["xid"] for r in await rows(src)] == [None, None]
    restarted = source(endpoints, "gpu001", cursor=src.checkpoint())
    assert [r["xid"] for r in await rows(restarted)] == [None, None]


async def test_xid_counters_catch_repeats_of_one_code() -> None:
    endpoints = exporter()
    total = 'DCGM_EXP_XID_ERRORS_TOTAL{{gpu="1",Hostname="gpu001",xid="{code}"}} {n}\n'
    base = dcgm_exporter("gpu001", xid=79)
    src = source(endpoints, "gpu001")
    endpoints.pages["gpu001"] = base + total.format(code=79, n=1)
    await rows(src)
    endpoints.pages["gpu001"] = base + total.format(code=79, n=2)
    assert [r["xid"] for r in await rows(src)] == [None, 79]


async def test_failing_endpoints_are_skipped_and_counted() -> None:
    src = source(exporter(), "down", "broken", "garbage", "gpu001")
    got = await rows(src)
    assert {r["node"] for r in got} == {"gpu001"}
    assert src.stats["scrape_errors"] == 3


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="targets must list"):
        from_dict(PrometheusConfig, {}, "sources.prometheus")
    with pytest.raises(ConfigError, match="must start with http"):
        from_dict(PrometheusConfig, {"targets": ["gpu001:9400"]}, "sources.prometheus")


async def test_medic_agent_text_from_a_real_h200_becomes_gpu_rows() -> None:
    """What ``medic agent`` served on an NVIDIA H200 (driver 580.159.04) under a bf16 matmul load;
    the GPU has no active NVLink, so its NVLink counters are absent and the column stays null."""
    endpoints = exporter()
    endpoints.pages["h200-node"] = (DATA / "h200_agent_busy.prom").read_text()
    [row] = await rows(source(endpoints, "h200-node"))
    assert row["node"] == "h200-node" and row["gpu"] == 0 and row["job_id"] is None
    assert row["util"] == 100 and row["power_w"] == pytest.approx(690.835)
    assert (row["sm_clock_mhz"], row["throttle_reasons"], row["temp_c"]) == (1410, 4, 60)
    assert (row["ecc_dbe"], row["ecc_sbe"], row["pcie_replay"]) == (0, 0, 0)
    assert row["mem_used_mib"] == pytest.approx(1625.875)
    assert row["xid"] is None and row["nvlink_errors"] is None
