from typing import Any

import polars as pl
import pytest

from medic.detectors.jobs import JobTracker
from medic.detectors.telemetry import GpuWindows, node_jobs
from medic.testing.builders import at, batch


def sample(t: float, node: str = "n1", gpu: int = 0, job: str | None = "7", **values: Any) -> dict:
    return {"time": at(t), "node": node, "gpu": gpu, "job_id": job, **values}


def frame(*rows: dict) -> pl.DataFrame:
    return batch("gpu", rows).frame


def test_windows_average_per_gpu_and_close_when_the_watermark_passes() -> None:
    windows = GpuWindows(10, means=("util", "power_w"))
    windows.add(frame(*(sample(t, util=10.0 * t, power_w=100.0) for t in range(3, 13))))
    assert windows.close(at(9)) == []
    (first,) = windows.close(at(10))
    assert (first.start, first.end) == (at(0), at(10))
    assert first.gpus.select("job_id", "node", "gpu", "util", "power_w").rows() == [
        ("7", "n1", 0, 60.0, 100.0)
    ]
    (second,) = windows.close(at(20))
    assert second.gpus.get_column("util").to_list() == [110.0]


def test_late_means_are_over_the_last_third_of_each_gpus_samples() -> None:
    windows = GpuWindows(30, means=("sm_clock_mhz",), late=("sm_clock_mhz",))
    clock = {t: 1600.0 if t < 20 else 1980.0 for t in range(30)}  # back up 10 s before the end
    windows.add(frame(*(sample(t, sm_clock_mhz=clock[t]) for t in range(30))))
    windows.add(frame(sample(45, gpu=1, sm_clock_mhz=1500.0)))  # one sample: that sample
    first, second = windows.close(at(60))
    assert first.gpus.get_column("late_sm_clock_mhz").to_list() == [1980.0]
    assert first.gpus.get_column("sm_clock_mhz").item() < 1980.0
    assert second.gpus.select("sm_clock_mhz", "late_sm_clock_mhz").rows() == [(1500.0, 1500.0)]


def test_empty_windows_still_close_in_order() -> None:
    windows = GpuWindows(10, means=("util",))
    windows.add(frame(sample(1, util=1.0)))
    closed = windows.close(at(40))
    assert [w.end for w in closed] == [at(10), at(20), at(30), at(40)]
    assert [w.gpus.height for w in closed] == [1, 0, 0, 0]


def test_counters_rise_between_windows_and_never_go_negative() -> None:
    windows = GpuWindows(10, means=(), counters=("pcie_replay",))
    windows.add(frame(*(sample(t, pcie_replay=5) for t in range(0, 10))))
    windows.add(frame(*(sample(t, pcie_replay=5 + t) for t in range(10, 20))))
    windows.add(frame(sample(25, pcie_replay=0)))  # a reset (reboot) is no rise
    deltas = [w.gpus.get_column("pcie_replay_delta").to_list() for w in windows.close(at(30))]
    assert deltas == [[0], [24 - 5], [0]]


def test_throttle_share_and_xid_samples() -> None:
    windows = GpuWindows(10, means=(), throttle_mask=0x40, xid=True)
    windows.add(
        frame(
            sample(1, throttle_reasons=0x40),
            sample(2, throttle_reasons=0x1),
            sample(3, throttle_reasons=0x40 | 0x1, xid=79),
            sample(4, throttle_reasons=0),
        )
    )
    (window,) = windows.close(at(10))
    assert window.gpus.select("throttled", "xid").rows() == [(0.5, 1)]


def test_sampling_keeps_only_the_start_of_each_window() -> None:
    windows = GpuWindows(30, means=("util",), sample_s=10)
    for t in range(0, 60):
        windows.add(frame(sample(t, util=float(t))))
    means = [w.gpus.get_column("util").to_list() for w in windows.close(at(60))]
    assert means == [[4.5], [34.5]]


def test_sampling_covers_the_telemetry_spacing_and_all_of_a_window_while_it_is_unknown() -> None:
    # a node scraped once a minute, 40 s into each minute: outside a 30 s sample of a 60 s
    # window, whatever the window
    def scrape(windows: GpuWindows) -> list[list[float]]:
        for t in range(40, 300, 60):
            windows.add(frame(sample(t, util=float(t))))
        return [w.gpus.get_column("util").to_list() for w in windows.close(at(300))]

    assert scrape(GpuWindows(60, means=("util",), sample_s=30)) == []  # never sampled
    unknown = GpuWindows(60, means=("util",), sample_s=30)
    unknown.cover(0)
    assert scrape(unknown) == [[40.0], [100.0], [160.0], [220.0], [280.0]]
    minute = GpuWindows(60, means=("util",), sample_s=30)
    minute.cover(60_000_000)
    assert scrape(minute) == [[40.0], [100.0], [160.0], [220.0], [280.0]]
    # a spacing shorter than the sample keeps the sample as configured
    fast = GpuWindows(30, means=("util",), sample_s=10)
    fast.cover(1_000_000)
    for t in range(0, 60):
        fast.add(frame(sample(t, util=float(t))))
    assert [w.gpus.get_column("util").to_list() for w in fast.close(at(60))] == [[4.5], [34.5]]


def test_rows_without_a_job_take_the_job_slurm_placed_on_their_node() -> None:
    tracker = JobTracker()
    tracker.observe(
        batch(
            "scheduler",
            [
                {"time": at(0), "kind": "job", "job_id": "7", "state": "RUNNING", "nodes": ["a"]},
                {"time": at(0), "kind": "job", "job_id": "8", "state": "RUNNING", "nodes": ["b"]},
                {"time": at(0), "kind": "job", "job_id": "9", "state": "RUNNING", "nodes": ["b"]},
            ],
        )
    )
    placement = node_jobs(tracker)
    assert placement.rows() == [("a", "7")]  # b is shared: its rows stay unattributed
    windows = GpuWindows(10, means=("util",))
    windows.add(
        frame(sample(1, node="a", job=None, util=1.0), sample(1, node="b", job=None, util=2.0)),
        placement,
    )
    (window,) = windows.close(at(10))
    assert window.gpus.select("job_id", "node").rows() == [("7", "a")]


def test_only_the_wanted_jobs_are_kept_and_forget_frees_them() -> None:
    windows = GpuWindows(10, means=("util",), counters=("pcie_replay",))
    rows = frame(sample(1, job="7", util=1.0, pcie_replay=0), sample(1, job="8", util=2.0))
    windows.add(rows, jobs={"7"})
    (window,) = windows.close(at(10))
    assert window.gpus.get_column("job_id").to_list() == ["7"]
    assert windows.state_size() == 1
    windows.forget(["7"])
    assert windows.state_size() == 0


def test_wanted_jobs_keep_their_labelled_rows_and_the_unlabelled_rows_of_their_nodes() -> None:
    windows = GpuWindows(10, means=("util",))
    placement = pl.DataFrame({"node": ["a", "c"], "job_id": ["7", "9"]})
    rows = frame(
        sample(1, node="a", job=None, util=1.0),
        sample(1, node="b", job="7", util=2.0),
        sample(1, node="c", job=None, util=3.0),
        sample(1, node="d", job="8", util=4.0),
        sample(2, node="a", job=None, util=5.0),
    )
    windows.add(rows, placement, jobs={"7"})
    (window,) = windows.close(at(10))
    assert window.gpus.select("job_id", "node", "util").rows() == [("7", "a", 3.0), ("7", "b", 2.0)]


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        GpuWindows(0, means=())
    with pytest.raises(ValueError):
        GpuWindows(10, means=(), sample_s=20)


def test_rows_are_read_when_the_window_closes_with_the_placement_and_jobs_they_came_with() -> None:
    windows = GpuWindows(10, means=("util",))
    placed_a = pl.DataFrame({"node": ["a"], "job_id": ["7"]})
    placed_b = pl.DataFrame({"node": ["a"], "job_id": ["8"]})
    wanted = {"7", "8"}
    windows.add(frame(sample(1, node="a", job=None, util=1.0)), placed_a, wanted)
    windows.add(frame(sample(2, node="a", job=None, util=3.0)), placed_b, wanted)
    wanted.discard("8")  # the caller's set changes after the batch was added
    windows.add(frame(sample(3, node="a", job=None, util=5.0)), placed_b, wanted)
    (window,) = windows.close(at(10))
    assert window.gpus.select("job_id", "util").rows() == [("7", 1.0), ("8", 3.0)]


def test_forgetting_a_job_drops_its_rows_not_yet_read() -> None:
    windows = GpuWindows(10, means=("util",))
    windows.add(frame(sample(1, job="7", util=1.0), sample(1, node="n2", job="8", util=2.0)))
    windows.forget(["7"])
    (window,) = windows.close(at(10))
    assert window.gpus.get_column("job_id").to_list() == ["8"]


def test_windows_closed_as_they_end_are_those_closed_all_at_once() -> None:
    """A window closed as the watermark passes its end (its rows read and reduced in one query,
    its counters' rises taken column by column) is the one closed with later windows."""

    def batches() -> list[pl.DataFrame]:
        out = []
        for t in range(45):
            rows = [sample(t, gpu=0, util=float(t), pcie_replay=t // 7, throttle_reasons=t % 3)]
            if 10 <= t < 20 or t >= 30:  # a GPU missing from a window, then back
                rows.append(sample(t, gpu=1, util=2.0 * t, pcie_replay=40 - t, xid=79))
            if t % 2:
                rows.append(sample(t, node="b", job=None, util=1.0, pcie_replay=3))
            out.append(frame(*rows))
        return out

    def windows() -> GpuWindows:
        return GpuWindows(
            10, means=("util",), counters=("pcie_replay",), throttle_mask=0x2, xid=True
        )

    placement = pl.DataFrame({"node": ["b"], "job_id": ["8"]})
    as_they_end, at_once = windows(), windows()
    closed = []
    for t, rows in enumerate(batches()):
        closed += as_they_end.close(at(t))
        as_they_end.add(rows, placement)
        at_once.add(rows, placement)
    closed += as_they_end.close(at(50))
    all_of_them = at_once.close(at(50))
    assert (
        [w.end for w in closed] == [w.end for w in all_of_them] == [at(10 * n) for n in range(1, 6)]
    )
    for one, other in zip(closed, all_of_them, strict=True):
        assert one.gpus.equals(other.gpus)
    assert as_they_end.state_size() == at_once.state_size() == 3
