"""Per-rank timings from the lines real jobs print (each case names the code that prints it)."""

from __future__ import annotations

from typing import Any

import pytest

from medic.config import ConfigError
from medic.detectors.registry import build_parsers
from medic.detectors.straggler import StragglerDetector
from medic.parse.rank_timings import (
    RANK_TIMING,
    RankTimingConfig,
    RankTimingParser,
    RankTimingPattern,
)
from medic.testing.builders import batch, log

KEEP = ["rank", "rank_node", "source", "metric", "kind", "value"]


def parse(
    *messages: str, parser: RankTimingParser | None = None, **extra: Any
) -> list[dict[str, Any]]:
    rows = [log(0.001 * i, m, **extra) for i, m in enumerate(messages)]
    out = (parser or RankTimingParser()).parse(batch("logs", rows))
    if out is None:
        return []
    assert out.data.schema == RANK_TIMING
    return out.frame.select(KEEP).to_dicts()


def test_nvrx_relative_scores_are_read_and_individual_scores_are_not() -> None:
    """nvidia-resiliency-ext ptl_resiliency/straggler_det_callback.py _print_gpu_scores: the
    logged message starts with a newline, so its header is a line of its own."""
    rows = parse(
        "[NeMo I 2026-05-02 11:04:10 straggler_det_callback:162] ",
        "GPU relative performance:",
        " Worst performing 2/32 ranks:",
        "  Rank=21 Node=gpu-b11 Score=0.58",
        "  Rank=4 Node=gpu-a03 Score=0.93",
        " Best performing 2/32 ranks:",
        "  Rank=30 Node=gpu-b14 Score=1.00",
        "  Rank=7 Node=gpu-a03 Score=0.99",
        "[NeMo I 2026-05-02 11:04:10 straggler_det_callback:171] ",
        "GPU individual performance:",
        "  Rank=21 Node=gpu-b11 Score=0.97",
    )
    assert [(r["rank"], r["rank_node"], r["value"]) for r in rows] == [
        (21, "gpu-b11", 0.58),
        (4, "gpu-a03", 0.93),
        (30, "gpu-b14", 1.0),
        (7, "gpu-a03", 0.99),
    ]
    assert {(r["source"], r["metric"], r["kind"]) for r in rows} == {
        ("nvrx", "gpu_relative", "score")
    }


def test_nvrx_warnings_name_each_rank_and_its_node() -> None:
    """straggler_det_callback.py _print_stragglers formats a set of StragglerId dataclasses."""
    rows = parse(
        "STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. Affected ranks: "
        "{StragglerId(rank=21, node='gpu-b11'), StragglerId(rank=5, node='gpu-a04')}",
        "STRAGGLER DETECTION WARNING: Some GPUs performance dropped. Affected ranks: [3, 12]",
    )
    assert [(r["rank"], r["rank_node"], r["metric"], r["kind"]) for r in rows] == [
        (21, "gpu-b11", "gpu_relative", "verdict"),
        (5, "gpu-a04", "gpu_relative", "verdict"),
        (3, None, "gpu_individual", "verdict"),
        (12, None, "gpu_individual", "verdict"),
    ]


def test_megatron_all_rank_timers_keep_only_each_ranks_own_work() -> None:
    """megatron/core/timers.py _get_all_ranks_time_string, printed by the last rank behind
    torchrun's prefix; forward-backward holds the all-reduce wait and is not read."""
    rows = parse(
        "[rank15]:times across ranks (ms):",
        "[rank15]:  forward-backward:",
        "[rank15]:     rank  0: 2210.44",
        "[rank15]:     rank 14: 2210.51",
        "[rank15]:  forward-compute:",
        "[rank15]:     rank  0: 512.30",
        "[rank15]:     rank 14: 655.01",
        "[rank15]:  optimizer:",
        "[rank15]:     rank  0: 40.10",
    )
    assert [(r["rank"], r["metric"], r["kind"], r["value"]) for r in rows] == [
        (0, "forward-compute", "time", pytest.approx(0.5123)),
        (14, "forward-compute", "time", pytest.approx(0.65501)),
    ]


def test_a_timer_record_split_over_two_batches_keeps_its_header() -> None:
    parser = RankTimingParser()
    assert parse("times across ranks (ms):", "  backward-compute:", parser=parser) == []
    rows = parse("     rank  3: 1024.00", "     rank  4: 1010.50", parser=parser)
    assert [(r["rank"], r["metric"]) for r in rows] == [
        (3, "backward-compute"),
        (4, "backward-compute"),
    ]


def test_megatron_straggler_detector_gives_the_slowest_rank_its_ratio() -> None:
    """megatron/core/utils.py StragglerDetector.report(), the min and max with their ranks."""
    (row,) = parse(
        "[2026-04-11 08:15:02] | MnRtt/Rnk: 2104.50ms/3 | MxRtt/Rnk: 2651.30ms/17 | "
        "MnPwr/Rnk: 590211W/3 | MxPwr/Rnk: 688000W/11 | MnTmp/Rnk: 50C/2 | MxTmp/Rnk: 63C/9"
    )
    assert (row["rank"], row["kind"]) == (17, "ratio")
    assert row["value"] == pytest.approx(2651.30 / 2104.50)


def test_any_frameworks_slow_rank_report_gives_a_ratio_or_a_verdict() -> None:
    """Reports in the two shapes frameworks print them (our own wordings): a rank's figure
    against its peers', and ranks called stragglers."""
    rows = parse(
        "ZORK_STRAGGLER: Rank r2 input wait was 199.7ms vs median rank r0 at 10.4ms.",
        "[zork] rank 5 forward 1.8 s compared to the average 1.2 s",
        "rank 6 is 1.4x slower than the median",
        "rank 7 step 30% slower than its peers",
    )
    read = [(r["rank"], r["kind"], r["source"]) for r in rows]
    assert read == [(r, "ratio", "log_report") for r in (2, 5, 6, 7)]
    assert [r["value"] for r in rows] == pytest.approx([199.7 / 10.4, 1.5, 1.4, 1.3])
    rows = parse(
        "Stragglers detected: ranks [3, 5]", "zork: straggler on rank 12", "rank 9 is lagging"
    )
    assert [(r["rank"], r["kind"]) for r in rows] == [(r, "verdict") for r in (3, 5, 12, 9)]


def test_reports_of_no_straggler_or_of_a_rank_against_its_past_are_not_read() -> None:
    assert (
        parse(
            "No stragglers detected.",
            "Straggler detection enabled for ranks 0-7",
            "rank 3 is not a straggler",
            "rank 0 step 1.2s vs last epoch 1.0s",
            "slowest rank: 3 (1.02s), fastest rank: 0 (1.00s)",
        )
        == []
    )


def test_wall_clock_step_lines_of_every_rank_are_not_rank_timings() -> None:
    """Each rank's own step time is the same for all in synchronous training: progress only."""
    assert parse("[rank3]:step 120 | loss 2.31 | step time 1.52s", rank=3) == []


def test_a_sites_own_per_rank_line_from_config() -> None:
    parsers = build_parsers(
        [StragglerDetector()],
        {"rank_timing": {"patterns": [{"pattern": r"compute (?P<time_ms>[\d.]+) ms"}]}},
    )
    (parser,) = [p for p in parsers if isinstance(p, RankTimingParser)]
    (row,) = parse("[rank6]:compute 830.5 ms", parser=parser, node="n2")
    assert (row["rank"], row["rank_node"], row["metric"]) == (6, "n2", "custom")
    assert row["value"] == pytest.approx(0.8305)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"rank (?P<rank>\d+)", "needs one of"),
        (r"(?P<elapsed>\d+)", "is not one of"),
        (r"(?P<time_s>[", "not a valid regex"),
    ],
)
def test_a_wrong_custom_pattern_is_a_clear_error(pattern: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        build_parsers([StragglerDetector()], {"rank_timing": {"patterns": [{"pattern": pattern}]}})
    with pytest.raises(ValueError, match=why):
        RankTimingConfig((RankTimingPattern(pattern),))


def test_megatron_arguments_give_the_jobs_pipeline_layout() -> None:
    """megatron/training/arguments.py _print_args on rank 0: the name, dots padding it to 48
    characters, the value; only the pipeline size and the world size are read."""
    rows = parse(
        "------------------------ arguments ------------------------",
        "  micro_batch_size ................................ 2",
        "  pipeline_model_parallel_size .................... 4",
        "  tensor_model_parallel_size ...................... 8",
        "  world_size ...................................... 128",
        "-------------------- end of arguments ---------------------",
        rank=0,
    )
    assert rows == [
        {
            "rank": 0,
            "rank_node": None,
            "source": "megatron_args",
            "metric": metric,
            "kind": "layout",
            "value": value,
        }
        for metric, value in (("pipeline_model_parallel_size", 4.0), ("world_size", 128.0))
    ]
