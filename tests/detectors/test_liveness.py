"""Liveness: vanished GPUs, silent nodes and how chatty a writer is."""

from __future__ import annotations

import numpy as np
import polars as pl

from medic.detectors.crash import CrashDetector
from medic.detectors.gpu_fault import GpuFaultDetector
from medic.detectors.incidents import ReadsLiveness, WatchesLiveness
from medic.detectors.liveness import NO_JOB, Cadence, JobCodes, Liveness
from medic.detectors.node_failure import NodeFailureDetector
from medic.ingest.base import Batch
from medic.pipeline import Pipeline
from medic.testing.builders import at, batch, gpu_latest, gpu_sample, log
from medic.timeutil import US


def test_vanished_gpus_and_silent_nodes_are_measured_against_the_rest_of_the_cluster() -> None:
    liveness = Liveness()
    for second in range(30):
        rows = [gpu_sample(second, "a", g) for g in range(4) if not (g == 2 and second >= 10)]
        rows += [gpu_sample(second, "b", g) for g in range(4) if second < 5]
        rows += [gpu_sample(second, "c", g) for g in range(4)]
        liveness.observe_gpu(gpu_latest(rows))
    liveness.observe_logs(batch("logs", [log(29, "still here", node="b")]).frame)
    vanished = liveness.vanished_gpus(10 * US, 5 * US)
    assert [(g.node, g.gpu, g.since) for g in vanished] == [("a", 2, at(9))]
    assert liveness.silent_nodes(10 * US, at(29)) == []
    silent = liveness.silent_nodes(10 * US, at(45))
    assert [(g.node, g.since, g.length) for g in silent] == [("b", at(4), 25 * US)]
    gap = liveness.longest_gap(["a", "c"])
    assert gap is not None and (gap.node, gap.gpu) == ("a", 2)


def test_a_feed_that_stops_everywhere_shows_no_gap() -> None:
    liveness = Liveness()
    for second in range(10):
        liveness.observe_gpu(gpu_latest([gpu_sample(second, n, 0) for n in ("a", "b")]))
    assert liveness.silent_nodes(1 * US, at(100)) == []
    assert liveness.vanished_gpus(1 * US, 1 * US) == []


def test_quiet_means_something_only_for_a_regular_writer() -> None:
    cadence = Cadence()
    for second in range(20):
        cadence.observe(["fast"], [at(second)])
    for second in range(0, 40, 10):
        cadence.observe(["slow"], [at(second)])
    for second in (0, 10):
        cadence.observe(["twice"], [at(second)])
    slack, longest = 5 * US, 30 * US
    assert cadence.went_quiet("fast", at(20), at(23), slack, longest)
    assert not cadence.went_quiet("fast", at(20), at(21), slack, longest)
    assert not cadence.went_quiet("fast", at(40), at(60), slack, longest)
    assert not cadence.went_quiet("slow", at(31), at(40), slack, longest)
    assert cadence.went_quiet("slow", at(31), at(65), slack, longest)
    assert not cadence.went_quiet("slow", at(31), at(65), slack, 5 * US)
    # Two lines (a progress line and the save after it) are one spacing, no rhythm yet.
    assert not cadence.went_quiet("twice", at(11), at(45), slack, longest)


def test_detectors_accept_batches_with_missing_optional_columns_and_unseen_jobs() -> None:
    bare_logs = pl.DataFrame(
        {
            "time": pl.Series([at(1)]).cast(pl.Datetime("us", "UTC")),
            "node": ["n9"],
            "message": ["NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"],
        }
    )
    bare_sched = batch("scheduler", [{"time": at(2), "kind": "job", "state": "FAILED"}])
    for detector in (CrashDetector(), GpuFaultDetector(), NodeFailureDetector()):
        for stream in detector.streams:
            if stream == "logs":
                assert detector.update(Batch("logs", bare_logs.to_arrow())) == []
        assert detector.update(bare_sched) == []
        assert detector.advance(at(10)) == []


def test_a_pipeline_folds_telemetry_once_for_every_detector_that_watches_it() -> None:
    pipeline = Pipeline.from_settings()
    watchers = [d for d in pipeline.detectors if isinstance(d, WatchesLiveness)]
    assert {d.name for d in watchers} == {"crash", "gpu_fault", "node_failure"}
    shared = watchers[0].liveness
    assert all(d.liveness is shared and d.book.liveness is shared for d in watchers)
    readers = [d for d in pipeline.detectors if isinstance(d, ReadsLiveness)]
    assert {d.name for d in readers} == {"crash", "gpu_fault", "node_failure", "hang"}
    assert all(d.liveness is shared for d in readers)
    pipeline.process(batch("gpu", [gpu_sample(1, "a", 0, job_id="7"), gpu_sample(1, "b", 1)]))
    assert shared.gpu_seen == {("a", 0): at(1), ("b", 1): at(1)}
    assert shared.gpu_job == {("a", 0): "7"}


def test_batches_of_the_same_gpus_fold_like_any_other() -> None:
    liveness = Liveness()
    order = [("a", 0), ("b", 0), ("a", 1)]  # a node's rows need not be together
    liveness.observe_gpu(gpu_latest([gpu_sample(1, n, g, job_id="7") for n, g in order]))
    liveness.observe_gpu(gpu_latest([gpu_sample(2, n, g, job_id="7") for n, g in order]))
    assert liveness.gpu_job == {("a", 0): "7", ("b", 0): "7", ("a", 1): "7"}
    moved = [
        gpu_sample(3, "a", 0, job_id="8"),
        gpu_sample(3.5, "b", 0),
        gpu_sample(3.2, "a", 1, job_id="8"),
    ]
    liveness.observe_gpu(gpu_latest(moved))
    assert liveness.gpu_job == {("a", 0): "8", ("a", 1): "8"}
    assert liveness.node_seen == {"a": at(3.2), "b": at(3.5)}
    assert liveness.gpu_seen[("a", 1)] == at(3.2)
    liveness.observe_gpu(
        gpu_latest([gpu_sample(4, "b", 0), gpu_sample(4, "a", 1)])
    )  # a GPU missing
    assert liveness.gpu_seen == {("a", 0): at(3), ("b", 0): at(4), ("a", 1): at(4)}
    assert liveness.jobs_on("a") == {"8"} and liveness.node_seen["a"] == at(4)


def test_pruned_nodes_leave_no_trace_and_new_nodes_take_their_place() -> None:
    liveness = Liveness()
    liveness.observe_gpu(
        gpu_latest([gpu_sample(0, "a", 0, job_id="7"), gpu_sample(0, "b", 3, job_id="8")])
    )
    for second in range(1, 200):
        liveness.observe_gpu(gpu_latest([gpu_sample(second, "b", 3, job_id="8")]))
        liveness.forget_before(at(second) - 100 * US)
    assert liveness.prunes > 0 and "a" not in liveness.node_seen
    liveness.observe_gpu(gpu_latest([gpu_sample(200, "c", 1, job_id="9"), gpu_sample(200, "b", 3)]))
    assert liveness.gpu_seen == {("b", 3): at(200), ("c", 1): at(200)}
    assert liveness.gpu_job == {("c", 1): "9"}
    assert liveness.jobs_on("a") == set() and liveness.jobs_on("c") == {"9"}
    assert liveness.node_seen == {"b": at(200), "c": at(200)} and len(liveness) == 4
    assert liveness.vanished_gpus(1 * US, 1 * US) == []


def test_rows_with_a_gpu_index_no_node_has_are_left_out_and_counted() -> None:
    liveness = Liveness()
    rows = [
        gpu_sample(1, "a", 0),
        gpu_sample(1, "a", 30000),
        gpu_sample(1, "b", -1),
        gpu_sample(1, "b", 2),
    ]
    liveness.observe_gpu(gpu_latest(rows))
    assert liveness.gpu_seen == {("a", 0): at(1), ("b", 2): at(1)}
    assert liveness.unaddressable == 2 and liveness.node_seen == {"a": at(1), "b": at(1)}


def test_a_node_is_silent_only_once_overdue_for_its_own_next_sample() -> None:
    # dcgm-exporter behind a 30 s Prometheus scrape: node "sparse" reports every 30 s, "dense"
    # every second. 28 s after its last sample "sparse" is not silent; 20 s past its next one
    # it is.
    liveness = Liveness()
    for second in range(200):
        rows = [gpu_sample(second, "dense", 0)]
        if second % 30 == 0 and second <= 120:
            rows.append(gpu_sample(second, "sparse", 0))
        liveness.observe_gpu(gpu_latest(rows))
        if second == 148:
            assert liveness.silent_nodes(20 * US, at(second)) == []
    silent = liveness.silent_nodes(20 * US, at(199))
    assert [(g.node, g.since) for g in silent] == [("sparse", at(120))]


def test_a_late_delivered_writer_is_not_quiet_for_its_delivery_lag() -> None:
    # A shipper flushing every ~25 s: lines written every second arrive 25 s late. The key is
    # quiet only once its newest line is older than its cadence allows *after* that lag.
    cadence = Cadence()
    for second in range(30, 100):
        cadence.observe(["late"], [at(second - 25)], arrived=at(second))
    slack, longest = 5 * US, 30 * US
    assert cadence.lag("late") == 25 * US
    assert not cadence.went_quiet("late", at(74), at(100), slack, longest)
    assert cadence.went_quiet("late", at(74), at(104), slack, longest)
    assert cadence.silence("late", at(100)) == 1 * US


def test_job_codes_encode_a_column_and_keep_only_the_jobs_still_held() -> None:
    codes = JobCodes()
    assert codes.encode(pl.Series(["7", None, "9", "7"])).tolist() == [0, NO_JOB, 1, 0]
    assert codes.encode(pl.Series([None, None], dtype=pl.String)).tolist() == [NO_JOB] * 2
    held = codes.kept(np.array([[1, NO_JOB], [1, 1]], np.int32))
    assert held.tolist() == [[0, NO_JOB], [0, 0]] and codes.names == ["9"]
    assert codes.encode(pl.Series(["9", "8"])).tolist() == [0, 1]
