"""The detection-quality floor: the bundled ``datasets/`` and a small perturbed set (replayed
with log delivery delays, as a shipper batches them) are backtested with the default
configuration, and every kind's recall, precision and attribution accuracy must stay at or
above the floor set from the figures measured when the floor was introduced (issue 19), less a
small margin. A change that makes the detectors miss, blame or cry wolf more than they did
fails here; one that does better may raise the floors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from medic.backtest import BacktestReport, run_backtest
from medic.ingest.replay import with_delays
from medic.recording import find_recordings, write_recording
from medic.simulate import simulate

DATASETS = Path(__file__).resolve().parent.parent / "datasets"

# The perturbed set: generated here, deterministically, small enough to replay in seconds.
PERTURBED_PARAMS: dict[str, Any] = {"job_nodes": 2, "jobs": 1, "duration_min": 20.0}
DELIVERY = ("logs=1:30",)
PERTURBED = (
    ("xid79_cascade", 3),
    ("gpu_hang", 1),
    ("host_hang", 1),
    ("nfs_hang", 2),
    ("thermal_straggler", 1),
    ("power_cap_straggler", 2),
    ("ib_flap_straggler", 1),
    ("node_failure", 1),
    ("healthy_checkpoints", 1),
    ("healthy_checkpoints", 2),
    ("deadlock", 3),
    ("oom", 3),
    ("pcie_straggler", 3),
    ("healthy_slow", 3),
    ("healthy_noisy", 3),
)
# Replaying datasets/ and the perturbed set takes about two minutes on two idle cores; far longer
# on a loaded machine, hence a timeout of its own.
SLOW = pytest.mark.timeout(1200)

MARGIN = 0.05
FIGURES = ("recall", "precision", "attribution_accuracy")
# Per set and kind: (recall, precision, attribution accuracy) measured with the default
# configuration (None: nothing of that kind to measure). Raised on 2026-12-01 (main at a98aa94,
# the perturbed set grown by a deadlock, an out-of-memory crash, a PCIe straggler and two healthy
# traps): every figure of both sets measured 1.0.
MEASURED: dict[str, dict[str, tuple[float | None, float | None, float | None]]] = {
    group: {
        kind: (1.0, 1.0, 1.0)
        for kind in ("crash", "hang", "straggler", "gpu_fault", "node_failure")
    }
    for group in ("datasets", "perturbed")
}


def floors() -> list[tuple[str, str, str, float]]:
    """(set, kind, figure, floor) for every measured figure."""
    return [
        (group, kind, figure, round(max(0.0, value - MARGIN), 4))
        for group, kinds in MEASURED.items()
        for kind, values in kinds.items()
        for figure, value in zip(FIGURES, values, strict=True)
        if value is not None
    ]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BacktestReport]:
    out = tmp_path_factory.mktemp("perturbed")
    perturbed = [
        write_recording(out / f"{name}-p{seed}", simulate(name, seed, True, **PERTURBED_PARAMS))
        for name, seed in PERTURBED
    ]
    return {
        "datasets": run_backtest(find_recordings([DATASETS]), jobs=2),
        "perturbed": run_backtest(perturbed, with_delays({}, DELIVERY), jobs=2),
    }


@SLOW
def test_every_kind_stays_above_its_detection_quality_floor(
    reports: dict[str, BacktestReport],
) -> None:
    below = []
    for group, kind, figure, floor in floors():
        value = reports[group].by_kind().get(kind, {}).get(figure)
        if value is None and figure == "precision":
            continue  # no detection of the kind: none of them false
        if value is None or value < floor:
            below.append(f"{group} {kind} {figure}: {value} < floor {floor}")
    assert not below, "detection quality fell below its floor:\n" + "\n".join(below)


@SLOW
def test_the_floor_covers_every_kind_of_both_sets(reports: dict[str, BacktestReport]) -> None:
    for group, report in reports.items():
        labelled = {kind for kind, part in report.by_kind().items() if part["labels"]}
        assert labelled <= set(MEASURED[group]), group
