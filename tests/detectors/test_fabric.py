"""Fabric errors wait until they are sure: a port that comes back was a flap, a peer whose
process died first is no failed node, and a peer's address is read from NCCL's start-up."""

from __future__ import annotations

import polars as pl

from medic.detectors.fabric import FabricEvidence
from medic.parse.signatures import SignatureParser
from medic.testing.builders import at, batch, log
from medic.timeutil import US

OOB = "{host}:811:811 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:{ip}<0>"
RETRY = (
    "gpu-a1:811:900 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4001> with "
    "status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 "
    "remoteGids::ffff:10.0.0.2 hca mlx5_1"
)
PORT = "gpu-a3:811:900 [0] NCCL WARN NET/IB : mlx5_1:1 Got async event : port {what}"
FATAL = "gpu-a4:811:900 [0] NCCL WARN NET/IB : Got async event : local catastrophic error"


def no_lag(job_id: str | None) -> int:
    return 0


def fabric() -> FabricEvidence:
    return FabricEvidence(hold_us=20 * US, slack_us=5 * US, recovered_by=("ib_port_active",))


def signs(*lines: tuple[float, str]) -> pl.DataFrame:
    rows = [log(t, m, job_id="7") for t, m in lines]
    parsed = SignatureParser().parse(batch("logs", rows))
    assert parsed is not None
    return parsed.frame


def test_a_catastrophic_hca_error_is_sure_at_once() -> None:
    sure = fabric().observe(signs((10, FATAL)))
    assert [(job, e.node) for job, e in sure] == [("7", "gpu-a4")]


def test_a_peers_retries_exhausted_blame_the_host_of_its_address_after_the_wait() -> None:
    f = fabric()
    assert f.observe(signs((1, OOB.format(host="gpu-a2", ip="10.0.0.2")), (10, RETRY))) == []
    assert f.release(at(29), {}, no_lag) == []
    assert [(job, e.node) for job, e in f.release(at(30), {}, no_lag)] == [("7", "gpu-a2")]


def test_an_error_of_the_jobs_own_explains_a_peers_retries() -> None:
    f = fabric()
    f.observe(signs((1, OOB.format(host="gpu-a2", ip="10.0.0.2")), (10, RETRY)))
    assert f.release(at(40), {"7": at(8)}, no_lag) == []


def test_an_unknown_peer_address_blames_no_node() -> None:
    f = fabric()
    f.observe(signs((10, RETRY)))
    assert [(job, e.node) for job, e in f.release(at(30), {}, no_lag)] == [("7", None)]


def test_a_port_that_comes_back_was_a_flap() -> None:
    f = fabric()
    f.observe(signs((10, PORT.format(what="error")), (18, PORT.format(what="active"))))
    assert f.release(at(60), {}, no_lag) == []
    g = fabric()
    g.observe(signs((10, PORT.format(what="error"))))
    assert [(job, e.node) for job, e in g.release(at(60), {}, no_lag)] == [("7", "gpu-a3")]


def test_the_wait_covers_the_jobs_log_delivery_lag() -> None:
    """Lines of the job's own arrive up to its delivery lag late: the wait is that much longer,
    so a crash line written before the peer's retries, but shipped later, still explains them."""
    f = fabric()
    f.observe(signs((1, OOB.format(host="gpu-a2", ip="10.0.0.2")), (10, RETRY)))
    late = {"7": 25 * US}.get
    assert f.release(at(40), {}, lambda job: late(job or "", 0)) == []
    assert f.release(at(56), {"7": at(9)}, lambda job: late(job or "", 0)) == []


def test_a_process_that_died_while_its_peer_retried_explains_the_retries() -> None:
    # NCCL's defaults (NCCL_IB_TIMEOUT 20, NCCL_IB_RETRY_CNT 7) retry for about half a minute:
    # the peer's own error 25 s before the retries ran out explains them; one 40 s before not
    f = fabric()
    f.observe(signs((1, OOB.format(host="gpu-a2", ip="10.0.0.2")), (50, RETRY)))
    assert f.release(at(80), {"7": at(25)}, no_lag) == []
    g = fabric()
    g.observe(signs((1, OOB.format(host="gpu-a2", ip="10.0.0.2")), (50, RETRY)))
    assert [(job, e.node) for job, e in g.release(at(80), {"7": at(10)}, no_lag)] == [
        ("7", "gpu-a2")
    ]
