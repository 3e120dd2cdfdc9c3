"""Placement: a log line's node from the line itself and its job's nodes in Slurm, the same for
serve (event by event), backtest (read ahead) and diagnose."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from medic.diagnose.lines import LogText, lines_frame
from medic.diagnose.run import MatchedLines, diagnose
from medic.ingest.base import Batch, Watermark
from medic.parse.placement import UNKNOWN_NODE, Placement, line_host
from medic.parse.prefixes import PrefixStripper
from medic.pipeline import Pipeline
from medic.testing.builders import at, batch, log

XID = "NVRM: Xid (PCI:0000:5d:00): 79, pid=2718, GPU has fallen off the bus."


def job_row(t: float, job_id: str, nodes: list[str], state: str = "RUNNING") -> dict[str, Any]:
    return {"time": at(t), "kind": "job", "job_id": job_id, "state": state, "nodes": nodes}


def placed(placement: Placement, *rows: dict[str, Any]) -> list[str]:
    return placement.place(batch("logs", list(rows)).frame).get_column("node").to_list()


@pytest.fixture
def two_nodes() -> Placement:
    placement = Placement()
    placement.observe(batch("scheduler", [job_row(0, "7", ["n1", "n2"])]).frame)
    return placement


def test_a_host_prefix_names_the_node_when_it_is_one_of_the_jobs(two_nodes: Placement) -> None:
    nodes = placed(
        two_nodes,
        log(1, f"n2: {XID}", node="", job_id="7"),
        log(1, f"n1: {XID}", node="vm", job_id="7"),
        log(1, "gpu-b3:4242:4250 [1] NCCL INFO comm 0x1 rank 3 nranks 8", node="", job_id="7"),
    )
    assert nodes == ["n2", "n1", ""]
    assert two_nodes.stats[UNKNOWN_NODE] == 1


def test_a_node_that_is_not_the_jobs_is_never_named_and_is_counted(two_nodes: Placement) -> None:
    nodes = placed(
        two_nodes,
        log(1, f"n3: {XID}", node="", job_id="7"),
        log(1, f"gpu-zz9: {XID}", node="n1", job_id="7"),
        log(1, "plain line from the host that reads the file", node="vm", job_id="7"),
    )
    assert nodes == ["", "", ""]
    assert two_nodes.stats[UNKNOWN_NODE] == 3


def test_a_line_naming_no_host_keeps_a_record_node_of_the_job_or_the_jobs_only_node() -> None:
    placement = Placement()
    placement.observe(
        batch("scheduler", [job_row(0, "7", ["n1", "n2"]), job_row(0, "8", ["n4"])]).frame
    )
    nodes = placed(
        placement,
        log(1, "loss 2.3", node="n2", job_id="7"),
        log(1, "loss 2.3", node="", job_id="7"),
        log(1, "loss 2.3", node="", job_id="8"),
        log(1, XID, node="vm", job_id="8"),
    )
    # a one-node job's lines are its node's, whichever host read them
    assert nodes == ["n2", "", "n4", "n4"]
    assert placement.stats[UNKNOWN_NODE] == 0


def test_srun_task_numbers_follow_the_node_the_jobs_own_lines_tie_them_to(
    two_nodes: Placement,
) -> None:
    first = placed(
        two_nodes,
        log(1, "1: n2:4242:4250 [0] NCCL INFO Bootstrap : Using eth0", node="", job_id="7"),
        log(1, "1: RuntimeError: CUDA error: an illegal memory access", node="", job_id="7"),
        log(1, "0: RuntimeError: CUDA error: an illegal memory access", node="", job_id="7"),
    )
    later = placed(
        two_nodes,
        log(2, "   1: Traceback (most recent call last):", node="", job_id="7"),
        log(2, "[7,1]<stderr>: NCCL watchdog timeout", node="", job_id="7"),
        log(2, "[rank1]: RuntimeError: NCCL error", node="", job_id="8"),
    )
    assert first == ["n2", "n2", ""]
    assert later == ["n2", "n2", ""]


def test_a_rank_in_pytorchs_logging_header_follows_the_node_its_job_ties_it_to(
    two_nodes: Placement,
) -> None:
    # our values, in the shape of ProcessGroupNCCL's C++ log lines: severity and source
    # location, then the process group's own rank (the default group's is the job's rank)
    found = placed(
        two_nodes,
        log(1, "1: n2:4242:4250 [0] NCCL INFO Bootstrap : Using eth0", node="", job_id="7"),
        log(2, "[E zork.cpp:916] [Rank 1] CUDA error: misaligned address", node="", job_id="7"),
        log(
            2,
            "[E1023 02:44:30.94 zork.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 1] x",
            node="",
            job_id="7",
        ),
        log(
            2, "[E zork.cpp:1537] [PG 1 Rank 1] CUDA error: misaligned address", node="", job_id="7"
        ),
    )
    assert found == ["n2", "n2", "n2", ""]


def test_lines_of_a_job_slurm_has_not_shown_are_taken_as_they_say() -> None:
    placement = Placement()
    rows = [log(1, f"gpu-a01: {XID}", node="", job_id="9"), log(1, "step 3", node="n5")]
    assert placed(placement, *rows) == ["gpu-a01", "n5"]
    placement.observe(batch("scheduler", [job_row(5, "9", ["gpu-b02"])]).frame)
    # the layout holds from the time Slurm showed it, as when the lines were read live
    assert placed(placement, *rows) == ["gpu-a01", "n5"]
    assert placed(placement, log(6, f"gpu-a01: {XID}", node="", job_id="9")) == [""]


def test_a_frame_placing_changes_nothing_in_is_handed_back_as_it_is(two_nodes: Placement) -> None:
    frame = batch("logs", [log(1, "loss 2.3", node="n1", job_id="7")]).frame
    assert two_nodes.place(frame) is frame


def test_placing_reuses_the_stripped_lines_for_the_parsers(two_nodes: Placement) -> None:
    frame = batch("logs", [log(1, f"n2: {XID}", node="", job_id="7")]).frame
    out = two_nodes.place(frame)
    stripped = two_nodes.prefixes.strip(out)
    assert stripped.get_column("node").to_list() == ["n2"]
    assert stripped.get_column("message").to_list() == [XID]


def test_the_host_a_line_names_is_read_the_same_for_diagnose() -> None:
    frame = pl.DataFrame(
        {
            "message": [
                f"n1: {XID}",
                "gpu-b3:4242:4250 [1] NCCL WARN NET/IB : Got async event : port error",
                "  host      : gpu-c07",
                "loss 2.3",
                # a shipper's time, Open MPI's --tag-output, and NCCL's WARN naming its source
                # file:line after the device (src/debug.cc)
                "2026-03-01T10:00:00.123Z: [1,12]<stdout>:gpu-b4:815:864 [0] "
                "transport/net_ib.cc:80 NCCL WARN NET/IB : Got async event : port error",
            ]
        }
    )
    hosts = line_host(PrefixStripper().strip(frame)).to_list()
    assert hosts == ["n1", "gpu-b3", "gpu-c07", None, "gpu-b4"]


def events(nodes: list[str], *messages: str) -> list[Batch | Watermark]:
    out: list[Batch | Watermark] = [batch("scheduler", [job_row(0, "7", nodes)])]
    for i, message in enumerate(messages):
        out.append(batch("logs", [log(1 + i, message, node="", job_id="7")]))
    out.extend(Watermark(at(t)) for t in range(2, 60))
    return out


@pytest.mark.parametrize("read_ahead", [True, False], ids=["backtest", "serve"])
def test_the_pipeline_blames_the_node_the_line_names_and_never_an_unknown_one(
    read_ahead: bool,
) -> None:
    pipeline = Pipeline.from_settings()
    stream = events(["n1", "n2"], f"n9: {XID}", f"n2: {XID}")
    if read_ahead:
        found = pipeline.run(stream)
    else:
        found = [d for event in stream for d in pipeline.process(event)]
    faults = [d for d in found if d.kind == "gpu_fault"]
    assert faults and {n for d in faults for n in d.culprits} == {"n2"}
    assert pipeline.placement.stats[UNKNOWN_NODE] == 1


def test_diagnose_of_one_output_file_names_the_node_of_the_line() -> None:
    text = "\n".join(
        [
            "n1: 0: step 1 loss 2.3",
            "n2: 1: step 1 loss 2.3",
            f"n2: {XID}",
        ]
    )
    findings = diagnose([LogText("slurm-4242.out", text)])
    lines = lines_frame([LogText("slurm-4242.out", text)])
    assert lines.get_column("node").to_list() == ["n1", "n2", "n2"]
    assert [f.culprits for f in findings if f.kind == "gpu_fault"] == [("n2",)]


def test_a_host_named_in_a_lines_text_is_kept_only_when_it_is_one_of_the_jobs() -> None:
    matched = MatchedLines()
    pipeline = Pipeline.from_settings(observers=[matched])
    pipeline.run(
        events(
            ["n1", "n2"],
            "srun: error: n9: task 3: Out Of Memory",
            "srun: error: n2: task 1: Out Of Memory",
        )
    )
    hosts = matched.rows().get_column("host").to_list()
    assert hosts == [None, "n2"]
    assert pipeline.placement.stats[UNKNOWN_NODE] == 1
