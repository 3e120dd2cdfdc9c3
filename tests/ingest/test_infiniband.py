"""InfiniBand port counters read from a sysfs tree laid out as the kernel exposes it
(drivers/infiniband/core/sysfs.c: ``<root>/<hca>/ports/<port>/counters/<counter>``, a decimal
number and a newline, ``N/A (no PMA)`` on a device without a PMA), and from node_exporter's
``node_infiniband_*`` exposition (prometheus/node_exporter collector/infiniband_linux.go)."""

from __future__ import annotations

from pathlib import Path

import httpx

from medic import schema
from medic.ingest.base import Batch
from medic.ingest.infiniband import NODE_EXPORTER, SysfsCounters, port_totals
from medic.ingest.prometheus import PrometheusConfig, PrometheusSource
from medic.testing.builders import T0
from medic.testing.dcgm import exposition as dcgm_exporter

DATA = Path(__file__).parent / "data"


def port(root: Path, hca: str, number: int, **counters: str) -> None:
    """One port's counter files, plus the data counters the reader must leave alone."""
    directory = root / hca / "ports" / str(number) / "counters"
    directory.mkdir(parents=True)
    files = {"port_xmit_data": "88120004", "port_xmit_discards": "17", **counters}
    for name, text in files.items():
        (directory / name).write_text(text + "\n")


def test_counters_of_every_port_are_summed_per_node(tmp_path: Path) -> None:
    port(tmp_path, "mlx5_0", 1, symbol_error="12", link_error_recovery="1", link_downed="1")
    port(tmp_path, "mlx5_1", 1, symbol_error="65535", port_rcv_errors="7", link_downed="0")
    ports = SysfsCounters(tmp_path).read()
    assert [(p.device, p.port) for p in ports] == [("mlx5_0", "1"), ("mlx5_1", "1")]
    assert port_totals(ports) == {"ib_errors": 12 + 1 + 65535 + 7, "ib_link_downed": 1}


def test_unreadable_and_unavailable_files_are_counted_skips(tmp_path: Path) -> None:
    port(tmp_path, "mlx5_0", 1, symbol_error="N/A (no PMA)", link_downed="2")
    port(tmp_path, "mlx5_1", 1, symbol_error="3", port_rcv_errors="garbage")
    (tmp_path / "mlx5_1" / "ports" / "1" / "counters" / "link_downed").mkdir()
    reader = SysfsCounters(tmp_path)
    assert port_totals(reader.read()) == {"ib_errors": 3, "ib_link_downed": 2}
    assert reader.stats["ib_counter_unavailable"] == 1
    assert reader.stats["ib_garbage"] == 1
    assert reader.stats["ib_counter_unreadable"] == 1
    assert reader.stats["ib_counter_missing"] == 2 * 7 - 5  # files neither port has


def test_a_node_without_infiniband_reads_nothing(tmp_path: Path) -> None:
    reader = SysfsCounters(tmp_path / "absent")
    assert reader.read() == []
    assert port_totals([]) == {"ib_errors": None, "ib_link_downed": None}
    assert not reader.stats.counts


def test_names_are_node_exporters() -> None:
    text = (DATA / "node_exporter_infiniband.prom").read_text()
    assert all(f"\n{name}{{" in text for name in NODE_EXPORTER.values())


class Targets:
    """dcgm-exporter on :9400 and node_exporter on :9100 of each host."""

    def __init__(self) -> None:
        self.node_exporter = (DATA / "node_exporter_infiniband.prom").read_text()

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.port == 9100:
            return httpx.Response(200, text=self.node_exporter)
        return httpx.Response(200, text=dcgm_exporter(request.url.host, job="4242"))


async def scrape(*targets: str) -> tuple[list[dict[str, object]], PrometheusSource]:
    config = PrometheusConfig(targets=targets)
    client = httpx.AsyncClient(transport=httpx.MockTransport(Targets().handler))
    src = PrometheusSource(config, client, clock=lambda: T0)
    batches = [e for e in await src.scrape_round() if isinstance(e, Batch)]
    assert all(b.data.schema == schema.GPU for b in batches)
    return [r for b in batches for r in b.data.to_pylist()], src


async def test_node_exporter_counters_land_on_the_nodes_gpu_rows() -> None:
    got, src = await scrape(
        "http://gpu001:9400/metrics", "http://gpu001:9100/metrics", "http://gpu002:9400/metrics"
    )
    by_node = {(r["node"], r["gpu"]): (r["ib_errors"], r["ib_link_downed"]) for r in got}
    # symbol 14 + 3071, recovery 6, received 25, remote physical 2, integrity 1; discards and
    # transmit waits are congestion, not errors
    assert by_node[("gpu001", 0)] == by_node[("gpu001", 1)] == (3119, 4)
    assert by_node[("gpu002", 0)] == (None, None)  # no node_exporter scraped: unknown
    assert src.stats["ib_unmatched"] == 0


async def test_counters_of_a_node_without_gpu_rows_are_counted_and_dropped() -> None:
    got, src = await scrape("http://gpu001:9400/metrics", "http://login01:9100/metrics")
    assert {r["ib_errors"] for r in got} == {None}
    assert src.stats["ib_unmatched"] == 1
