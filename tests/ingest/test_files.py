"""The file source: Slurm output patterns, line endings, rotation, truncation, resuming."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pytest

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch, Watermark
from medic.ingest.files import FilesConfig, FileSource, OutputPattern
from medic.testing.builders import T0
from medic.testing.clock import TickingClock


def source(
    tmp_path: Path, *patterns: str, cursor: dict | None = None, **settings: object
) -> FileSource:
    paths = [str(tmp_path / p) for p in patterns] or [str(tmp_path / "slurm-%j.out")]
    config = from_dict(FilesConfig, {"paths": paths, "node": "login1", **settings})
    return FileSource(config, cursor, clock=TickingClock(T0, 1_000_000))


def rows(events: list[Batch | Watermark]) -> list[dict[str, object]]:
    batches = [e for e in events if isinstance(e, Batch)]
    for b in batches:
        assert b.data.schema == schema.LOGS
    return pa.concat_tables([pa.table(b.data) for b in batches]).to_pylist() if batches else []


def messages(events: list[Batch | Watermark]) -> list[str]:
    return [str(r["message"]) for r in rows(events)]


def test_patterns_read_job_node_and_rank_from_paths() -> None:
    assert OutputPattern("/d/slurm-%j.out").fields("/d/slurm-4242.out") == {"job_id": "4242"}
    assert OutputPattern("/d/slurm-%j.out").fields("/d/slurm-4242.out.1") is None
    assert OutputPattern("/d/%x-%A_%a.out").fields("/d/train-x-7_3.out") == {"job_id": "7_3"}
    pattern = OutputPattern("/d/*/%N/job-%j-%4t.out")
    assert pattern.glob == "/d/*/*/job-*-*.out"
    assert pattern.fields("/d/u1/gpu-12/job-88-0003.out") == {
        "job_id": "88",
        "node": "gpu-12",
        "rank": "3",
    }
    assert OutputPattern("/d/100%%-%j.log").fields("/d/100%-5.log") == {"job_id": "5"}
    with pytest.raises(ConfigError, match="unknown Slurm filename token %q"):
        from_dict(FilesConfig, {"paths": ["x-%q.out"]}, "sources.files")
    with pytest.raises(ConfigError, match="needs a group"):
        from_dict(FilesConfig, {"rank_prefixes": ["^rank"]}, "sources.files")


def test_lines_end_at_newlines_and_carriage_returns_and_partial_lines_wait(tmp_path: Path) -> None:
    src = source(tmp_path)
    out = tmp_path / "slurm-42.out"
    out.write_bytes(b"start\r\n[rank3]: loss 1.0\n 10%|#   \r 20%|##  \rhalf a li")
    first = src.poll()
    assert messages(first) == ["start", "[rank3]: loss 1.0", " 10%|#   ", " 20%|##  "]
    with out.open("ab") as f:
        f.write(b"ne\n\n\xff bad byte\n")
    second = src.poll()
    assert messages(second) == ["half a line", "\ufffd bad byte"]
    got = rows(first)
    assert [r["rank"] for r in got] == [None, 3, None, None]
    assert {(r["job_id"], r["node"], r["source"]) for r in got} == {("42", "login1", "app")}
    assert isinstance(first[-1], Watermark)
    assert first[-1].time == int(got[0]["time"].timestamp() * 1_000_000)
    assert second[-1].time > first[-1].time


def test_a_line_left_without_its_end_is_flushed_after_a_while(tmp_path: Path) -> None:
    src = source(tmp_path, partial_flush_s=0.0)
    (tmp_path / "slurm-1.out").write_bytes(b"ok\nTraceback (most recent call last")
    assert messages(src.poll()) == ["ok"]
    assert messages(src.poll()) == ["Traceback (most recent call last"]
    assert messages(src.poll()) == []


def test_rank_comes_from_per_task_file_names(tmp_path: Path) -> None:
    src = source(tmp_path, "%N/job-%j-%t.out")
    (tmp_path / "gpu7").mkdir()
    (tmp_path / "gpu7" / "job-5-12.out").write_text("a\n[rank3]: the prefix does not win\n")
    got = rows(src.poll())
    assert [(r["node"], r["job_id"], r["rank"]) for r in got] == [("gpu7", "5", 12)] * 2


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    src = source(tmp_path)
    out = tmp_path / "slurm-9.out"
    out.write_text("one\ntwo\n")
    assert messages(src.poll()) == ["one", "two"]
    with out.open("a") as f:
        f.write("three\nfour")
    out.rename(tmp_path / "slurm-9.out.1")
    out.write_text("five\n")
    assert messages(src.poll()) == ["three", "four", "five"]
    assert src.stats["files_left"] == 1


def test_a_rename_to_another_matching_name_is_followed_not_reread(tmp_path: Path) -> None:
    src = source(tmp_path, "run-%j.out")
    (tmp_path / "run-1.out").write_text("a\n")
    assert messages(src.poll()) == ["a"]
    (tmp_path / "run-1.out").rename(tmp_path / "run-2.out")
    with (tmp_path / "run-2.out").open("a") as f:
        f.write("b\n")
    got = rows(src.poll())
    assert [(r["message"], r["job_id"]) for r in got] == [("b", "2")]


def test_copytruncate_is_survived(tmp_path: Path) -> None:
    src = source(tmp_path)
    out = tmp_path / "slurm-3.out"
    out.write_text("a\nb\n")
    assert messages(src.poll()) == ["a", "b"]
    with out.open("r+") as f:
        f.truncate(0)
    with out.open("a") as f:
        f.write("c\n")
    assert messages(src.poll()) == ["c"]
    assert src.stats["truncations"] == 1


def test_a_restart_resumes_from_the_saved_offsets(tmp_path: Path) -> None:
    src = source(tmp_path)
    out = tmp_path / "slurm-4.out"
    out.write_text("a\nb\npart")
    assert messages(src.poll()) == ["a", "b"]
    cursor = src.checkpoint()
    src.close()
    with out.open("a") as f:
        f.write("ial\nc\n")
    (tmp_path / "slurm-5.out").write_text("new job\n")
    again = source(tmp_path, cursor=cursor)
    assert messages(again.poll()) == ["partial", "c", "new job"]


def test_a_cursor_of_a_file_replaced_meanwhile_starts_it_over(tmp_path: Path) -> None:
    src = source(tmp_path)
    out = tmp_path / "slurm-6.out"
    out.write_text("old\n")
    src.poll()
    cursor = src.checkpoint()
    src.close()
    out.unlink()
    out.write_text("rerun\n")
    assert messages(source(tmp_path, cursor=cursor).poll()) == ["rerun"]


def test_batches_are_bounded(tmp_path: Path) -> None:
    src = source(tmp_path, max_rows=3)
    (tmp_path / "slurm-7.out").write_text("".join(f"{i}\n" for i in range(10)))
    batches = [e for e in src.poll() if isinstance(e, Batch)]
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]


async def test_the_source_polls_as_an_async_stream(tmp_path: Path) -> None:
    src = source(tmp_path, poll_interval_s=0.01)
    out = tmp_path / "slurm-8.out"
    got: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(src.__aiter__()) as events:
            async for event in events:
                if isinstance(event, Batch):
                    got.extend(event.data.column("message").to_pylist())
                    if len(got) == 2:
                        return
                elif not out.exists():
                    out.write_text("x\n")
                elif len(got) == 1:
                    with out.open("a") as f:
                        f.write("y\n")

    await asyncio.wait_for(consume(), 10)
    assert got == ["x", "y"]
    assert all(f.handle is None for f in src.files.values())


def test_unreadable_files_are_skipped_and_counted(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    out = tmp_path / "slurm-2.out"
    out.write_text("secret\n")
    out.chmod(0)
    src = source(tmp_path)
    assert messages(src.poll()) == []
    assert src.stats["read_errors"] == 1
