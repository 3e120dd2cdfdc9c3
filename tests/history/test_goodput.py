"""The goodput ledger: GPU-hours lost per incident to detection, action, requeue wait and
recomputation since the last checkpoint, against the watchdog alone, from measured times."""

from __future__ import annotations

import pytest

from medic.history.config import HistoryConfig
from medic.history.goodput import goodput
from medic.history.report import build_report
from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter
from medic.testing.builders import at, batch
from tests.history.rows import action, actions, detection, job, progress


def history(store: DuckDBStore) -> None:
    """Job 100 on 2 nodes (16 GPUs) checkpoints in minute 2, crashes at 190 s, is detected at
    200 s, requeued at 205 s and runs again at 235 s; it ends at 600 s."""
    writer = HistoryWriter(store)
    found = detection(200, "crash", "100", ["n1"], onset=190)
    writer.handle([found], found.detected_at)
    writer.record_actions(
        actions(
            action(204, found.id, "drain", node="n1"),
            action(205, found.id, "requeue"),
        )
    )
    writer.update(
        batch(
            "scheduler",
            [
                job(0, "100", "RUNNING", ["n1", "n2"]),
                job(206, "100", "PENDING", ["n1", "n2"]),
                job(235, "100", "RUNNING", ["n2", "n3"]),
                job(600, "100", "COMPLETED", ["n2", "n3"]),
            ],
        )
    )
    steps = [
        {"time": at(t), "job_id": "100", "event": "step", "step": t} for t in range(0, 180, 10)
    ]
    saved = [{"time": at(130), "job_id": "100", "event": "checkpoint_end", "step": 130}]
    writer.update(progress(sorted(steps + saved, key=lambda r: r["time"])))
    writer.flush()


def test_each_phase_is_measured_and_priced_in_gpu_hours() -> None:
    with DuckDBStore() as store:
        history(store)
        row = store.sql("FROM goodput(600, 8)").to_pylist()[0]
        assert row["gpus"] == 16
        assert (row["detect_s"], row["act_s"]) == (10.0, 4.0)
        assert row["requeue_wait_s"] == 30.0
        assert row["recompute_s"] == 190.0 - 120.0  # the checkpoint's minute began at 120 s
        assert row["lost_gpu_hours"] == pytest.approx((10 + 4 + 30 + 70) * 16 / 3600)
        assert row["watchdog_gpu_hours"] == pytest.approx((600 + 30 + 70) * 16 / 3600)
        assert row["saved_gpu_hours"] == pytest.approx((600 - 14) * 16 / 3600)
        ledger = goodput(store, 600, 8)
        assert ledger.allocated_gpu_hours == pytest.approx((206 * 2 + 365 * 2) * 8 / 3600)
        assert ledger.ratio == pytest.approx(1 - row["lost_gpu_hours"] / ledger.allocated_gpu_hours)


def test_the_report_shows_goodput_and_what_medic_saved() -> None:
    with DuckDBStore() as store:
        history(store)
        report = build_report(store, HistoryConfig())
    total = report.goodput.by_kind.filter(report.goodput.by_kind["kind"] == "all").row(
        0, named=True
    )
    assert total["incidents"] == 1
    assert total["saved_gpu_h"] == pytest.approx(total["watchdog_only_gpu_h"] - total["lost_gpu_h"])
    assert "goodput" in report.goodput.note() and "allocated GPU-hours" in report.goodput.note()


def test_an_unknown_onset_leaves_detection_and_recompute_unmeasured() -> None:
    with DuckDBStore() as store:
        writer = HistoryWriter(store)
        writer.handle([detection(50, "hang", "7")], 0)
        row = store.sql("FROM goodput(600, 8)").to_pylist()[0]
        assert (row["detect_s"], row["recompute_s"], row["requeue_wait_s"]) == (None, None, None)
