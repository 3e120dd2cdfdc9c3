"""A job's reported failed ranks, in the order a crash names them."""

from __future__ import annotations

import polars as pl

from medic.detectors.failed_ranks import FailedRanks
from medic.parse.failed_ranks import FAILED_RANKS
from medic.testing.builders import at


def rows(*reports: tuple[float, int, str | None, str, int]) -> pl.DataFrame:
    frame = pl.DataFrame(
        [
            {"time": at(t), "job_id": "7", "node": "", "rank": rank, "local_rank": None,
             "host": host, "exit_code": None, "signal": None, "end": end, "primary": primary,
             "message": ""}
            for t, rank, host, end, primary in reports
        ],
    )  # fmt: skip
    empty = pl.from_arrow(FAILED_RANKS.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return frame.cast(dict(empty.schema))


def test_primary_reports_come_first_each_rank_once_and_old_ones_drop() -> None:
    failed = FailedRanks()
    failed.observe(rows((10, 30, "gpu-b10", "exit code 1", 0), (11, 21, "gpu-b09", "SIGKILL", 1)))
    failed.observe(rows((12, 21, None, "exit code 1", 0), (1, 4, "gpu-b01", "SIGSEGV", 0)))
    named = failed.reported("7", since=at(5))
    assert [(e.rank, e.node, e.what) for e in named] == [
        (21, "gpu-b09", "SIGKILL"),
        (30, "gpu-b10", "exit code 1"),
    ]
    assert failed.reported("8", since=0) == []
    failed.forget_before(at(11))
    assert [e.rank for e in failed.reported("7", since=0)] == [21]


def test_a_local_rank_is_the_rank_only_on_a_one_node_job() -> None:
    failed = FailedRanks()
    report = rows((10, 0, None, "SIGKILL", 0)).with_columns(
        pl.lit(None, pl.Int32).alias("rank"), pl.lit(3, pl.Int32).alias("local_rank")
    )
    failed.observe(report)
    [one_node] = failed.reported("7", since=0, one_node=True)
    [spread] = failed.reported("7", since=0)
    assert (one_node.rank, spread.rank) == (3, None)
    assert spread.what == "local rank 3, SIGKILL"
