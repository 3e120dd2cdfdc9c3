"""The Slurm source: canned 22.05 JSON through a command runner, then the real local Slurm."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from medic import schema
from medic.ingest.base import Batch, Watermark
from medic.ingest.live import SourceError
from medic.ingest.slurm import SlurmSource, SlurmSourceConfig
from medic.slurm import CommandResult
from medic.testing.builders import T0
from medic.testing.clock import TickingClock
from medic.testing.slurm import SlurmJson


def polls() -> TickingClock:
    """Five seconds between polls."""
    return TickingClock(T0, 5_000_000)


def rows(events: list[Batch | Watermark]) -> list[dict[str, Any]]:
    assert isinstance(events[-1], Watermark)
    out = []
    for event in events[:-1]:
        assert isinstance(event, Batch) and event.data.schema == schema.SCHEDULER
        out.extend(event.data.to_pylist())
    return out


def brief(found: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {
        (
            r["kind"],
            r["job_id"] or r["node"],
            r["state"],
            tuple(r["nodes"]) if r["nodes"] is not None else None,
            r["exit_code"],
            r["reason"],
        )
        for r in found
    }


async def test_the_first_poll_emits_every_job_and_node_as_slurm_shows_them() -> None:
    """... except the jobs that had ended before (squeue lists them for MinJobAge): a failure
    from before medic started is no news to detect or act on."""
    slurm = SlurmJson()
    source = SlurmSource(SlurmSourceConfig(), runner=slurm, clock=polls())
    found = rows(await source.poll())
    assert brief(found) == {
        ("job", "1", "RUNNING", ("n1", "n2"), None, None),
        ("job", "2_1", "RUNNING", ("n1",), None, None),
        ("job", "2_2", "RUNNING", ("n1",), None, None),
        ("job", "6", "PENDING", None, None, "PartitionNodeLimit"),
        ("node", "n1", "MIXED", None, None, None),
        ("node", "n2", "MIXED", None, None, None),
        ("node", "n3", "IDLE+DRAIN", None, None, "medic test: bad gpu"),
        ("node", "n4", "IDLE", None, None, None),
    }
    assert {r["time"].timestamp() * 1e6 for r in found} == {T0 + 5_000_000}
    assert slurm.calls == [["squeue", "--json"], ["sinfo", "--json"]]
    assert source.stats["ended_before_start"] == 2
    assert rows(await source.poll()) == []


async def test_jobs_that_end_while_medic_runs_or_is_stopped_are_emitted() -> None:
    slurm = SlurmJson()
    failed_before = slurm.job(3)
    source = SlurmSource(SlurmSourceConfig(), runner=slurm, clock=polls())
    slurm.fail = CommandResult(1, "", "slurm_load_jobs error: Unable to contact slurm controller")
    await source.poll()
    stopped_early = json.loads(json.dumps(source.checkpoint()))
    slurm.fail = None
    assert "3" not in {r["job_id"] for r in rows(await source.poll())}
    slurm.jobs["jobs"].remove(failed_before)
    slurm.job(1).update(job_state="FAILED", exit_code=256)
    assert brief(rows(await source.poll())) == {("job", "1", "FAILED", ("n1", "n2"), 1, None)}
    cursor = json.loads(json.dumps(source.checkpoint()))
    slurm.job(2).update(job_state="FAILED", exit_code=512)
    restarted = SlurmSource(SlurmSourceConfig(), cursor, runner=slurm, clock=polls())
    assert {r["job_id"] for r in rows(await restarted.poll())} == {"2_2"}
    never_polled = SlurmSource(SlurmSourceConfig(), stopped_early, runner=slurm, clock=polls())
    assert "5" not in {r["job_id"] for r in rows(await never_polled.poll())}


async def test_later_polls_emit_only_changes_and_a_restart_resumes_from_the_cursor() -> None:
    slurm = SlurmJson()
    source = SlurmSource(SlurmSourceConfig(), runner=slurm, clock=polls())
    await source.poll()
    assert rows(await source.poll()) == []
    slurm.job(1)["job_state"] = "COMPLETED"
    slurm.job(1)["exit_code"] = 0
    slurm.nodes["nodes"][2]["state_flags"] = []
    slurm.nodes["nodes"][2]["reason"] = ""
    slurm.jobs["jobs"] = [j for j in slurm.jobs["jobs"] if j["job_id"] != 3]
    assert brief(rows(await source.poll())) == {
        ("job", "1", "COMPLETED", ("n1", "n2"), 0, None),
        ("node", "n3", "IDLE", None, None, None),
    }
    assert "3" not in source.jobs
    restarted = SlurmSource(
        SlurmSourceConfig(), json.loads(json.dumps(source.checkpoint())), runner=slurm
    )
    assert rows(await restarted.poll()) == []


async def test_an_unreachable_controller_skips_the_poll_and_holds_the_watermark() -> None:
    slurm = SlurmJson()
    source = SlurmSource(SlurmSourceConfig(), runner=slurm, clock=polls())
    await source.poll()
    held = source.watermark
    slurm.fail = CommandResult(1, "", "slurm_load_jobs error: Unable to contact slurm controller")
    assert await source.poll() == []
    assert source.watermark == held and source.stats["poll_errors"] == 1
    slurm.fail = CommandResult(0, "squeue: error: Invalid --json", "")
    assert await source.poll() == []
    slurm.fail = CommandResult(127, "", "squeue: No such file or directory")
    with pytest.raises(SourceError, match="slurm: cannot run squeue: squeue: No such file"):
        await source.poll()


async def test_documents_of_slurm_23_and_later_are_read_too() -> None:
    slurm = SlurmJson()
    job = slurm.job(5)
    job.update(
        job_state=["RUNNING"],
        array_job_id={"set": True, "infinite": False, "number": 0},
        array_task_id={"set": False, "infinite": False, "number": 0},
        job_id=5,
        job_resources={"nodes": {"count": 2, "allocation": [{"name": "n1"}, {"name": "n2"}]}},
    )
    slurm.jobs["jobs"] = [job]
    node = copy.deepcopy(slurm.nodes["nodes"][2])
    node.update(state=["IDLE", "DRAIN"], state_flags=None)
    slurm.nodes["nodes"] = [node]
    source = SlurmSource(SlurmSourceConfig(), runner=slurm)
    assert brief(rows(await source.poll())) == {
        ("job", "5", "RUNNING", ("n1", "n2"), None, "NonZeroExitCode"),
        ("node", "n3", "IDLE+DRAIN", None, None, "medic test: bad gpu"),
    }
    job.update(
        job_state=["FAILED"],
        exit_code={
            "status": ["SIGNALED"],
            "return_code": {"set": True, "number": 0},
            "signal": {"id": {"set": True, "number": 9}, "name": "KILL"},
        },
    )
    assert brief(rows(await source.poll())) == {
        ("job", "5", "FAILED", ("n1", "n2"), 137, "NonZeroExitCode"),
    }


async def test_partitions_filter_on_this_side() -> None:
    slurm = SlurmJson()
    config = SlurmSourceConfig(partitions=("gpu",))
    assert rows(await SlurmSource(config, runner=slurm).poll()) == []


async def test_slurmrestd_answers_are_read_the_same_way() -> None:
    slurm = SlurmJson()

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["X-SLURM-USER-TOKEN"] == "jwt"
        if request.url.path == "/slurm/v0.0.38/jobs":
            return httpx.Response(200, json=slurm.jobs)
        if request.url.path == "/slurm/v0.0.38/nodes":
            return httpx.Response(200, json=slurm.nodes)
        return httpx.Response(404, text="not found")

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    config = SlurmSourceConfig(rest_url="http://rest:6820", rest_user="root", rest_token="jwt")
    found = rows(await SlurmSource(config, client=client).poll())
    assert len(found) == 8, "4 jobs (2 had ended before) and 4 nodes"
    wrong = SlurmSourceConfig(rest_url="http://rest:6820/x", rest_user="root", rest_token="jwt")
    with pytest.raises(SourceError, match="answered 404"):
        await SlurmSource(wrong, client=client).poll()


@pytest.mark.slurm
async def test_state_changes_of_the_real_local_slurm(slurm: Any) -> None:
    source = SlurmSource(SlurmSourceConfig())
    await source.poll()

    async def change(wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for _ in range(600):
            found = [r for r in rows(await source.poll()) if wanted(r)]
            if found:
                return found[0]
            await asyncio.sleep(0.1)
        raise AssertionError("Slurm never showed the change")

    job = slurm.sbatch("-N2")
    running = await change(lambda r: r["job_id"] == job and r["state"] == "RUNNING")
    assert len(running["nodes"]) == 2 and running["exit_code"] is None
    slurm.run("scancel", job)
    ended = await change(lambda r: r["job_id"] == job and r["state"] == "CANCELLED")
    assert ended["nodes"] == running["nodes"]
    node = running["nodes"][0]
    slurm.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=medic: test")
    drained = await change(lambda r: r["node"] == node and "DRAIN" in r["state"])
    assert drained["reason"] == "medic: test"
