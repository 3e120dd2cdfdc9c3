"""Each fault scenario produces its real cascade, and its label is consistent with the data:
the onset is the first abnormal row, the culprits are the nodes whose hardware is at fault."""

from typing import Any

import polars as pl
import pytest

from medic.simulate.cluster import nvrm_bus
from medic.timeutil import US
from tests.simulate.conftest import SMALL, Simulated, frames

ERRORS = r"NVRM: Xid|Error:|error:|Traceback|Watchdog caught|terminate called|FAILED"


def case(simulated: Simulated, scenario: str, seed: int = 1, **params: Any) -> dict[str, Any]:
    recording = simulated(scenario, seed, **{**SMALL, **params})
    data = frames(recording)
    assert data["labels"].height == 1
    label = data["labels"].row(0, named=True)
    job_logs = data["logs"].filter(pl.col("job_id") == label["job_id"])
    return {"data": data, "label": label, "job_logs": job_logs, "meta": recording.meta}


def culprit_gpu(c: dict[str, Any]) -> pl.DataFrame:
    label = c["label"]
    gpu = label["culprit_ranks"][0] % 8
    return c["data"]["gpu"].filter(
        (pl.col("node") == label["culprit_nodes"][0]) & (pl.col("gpu") == gpu)
    )


def job_gpus(c: dict[str, Any]) -> pl.DataFrame:
    return c["data"]["gpu"].filter(pl.col("job_id") == c["label"]["job_id"])


def onset_close(lines: pl.DataFrame, onset: int) -> bool:
    return bool(lines.height) and onset <= lines.get_column("time").min() <= onset + US


def final_state(c: dict[str, Any]) -> str:
    rows = c["data"]["scheduler"].filter(pl.col("job_id") == c["label"]["job_id"])
    return str(rows.get_column("state").to_list()[-1])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_xid79_cascade(simulated: Simulated, seed: int) -> None:
    c = case(simulated, "xid79_cascade", seed, culprit_reports=False)
    label, logs = c["label"], c["data"]["logs"]
    onset, node, rank = label["onset"], label["culprit_nodes"][0], label["culprit_ranks"][0]
    xid = logs.filter(pl.col("message").str.contains(r"NVRM: Xid \(PCI:[0-9a-f:]+\): 79,"))
    assert xid.height == 1
    row = xid.row(0, named=True)
    assert (row["time"], row["node"], row["source"]) == (onset, node, "system")
    assert row["job_id"] is None and row["rank"] is None
    assert nvrm_bus(rank % 8) in row["message"]
    lost = culprit_gpu(c).filter(pl.col("time") >= onset)
    assert lost.filter(pl.col("util").is_not_null()).is_empty()
    watchdog = c["job_logs"].filter(pl.col("message").str.contains("Watchdog caught collective"))
    assert watchdog.height >= 8
    assert watchdog.get_column("time").min() >= onset + 290 * US
    assert not watchdog.get_column("message").str.contains(rf"\[Rank {rank}\]").any()
    causes = c["job_logs"].get_column("message").str.extract(r"^  rank      : (\d+)", 1)
    root = (
        c["job_logs"]
        .with_columns(cause=causes)
        .filter(pl.col("message").shift(2) == "Root Cause (first observed failure):")
    )
    assert c["job_logs"].get_column("message").str.contains("ChildFailedError").any()
    assert root.height >= 1
    assert str(rank) not in set(
        c["job_logs"]
        .with_columns(cause=causes)
        .filter(pl.col("message").shift(3) == "Root Cause (first observed failure):")
        .get_column("cause")
        .to_list()
    )
    assert final_state(c) == "FAILED"


def test_xid79_telemetry_can_go_null_instead_of_vanishing(simulated: Simulated) -> None:
    c = case(simulated, "xid79_cascade", 1, telemetry="null")
    after = culprit_gpu(c).filter(pl.col("time") >= c["label"]["onset"])
    assert after.height > 10
    assert after.get_column("util").null_count() == after.height
    assert after.get_column("xid").to_list()[0] == 79


@pytest.mark.parametrize("seed", [1, 2])
def test_uncorrectable_ecc_surfaces_as_cuda_error_on_that_rank(
    simulated: Simulated, seed: int
) -> None:
    c = case(simulated, "ecc_uncorrectable", seed)
    label, logs = c["label"], c["data"]["logs"]
    onset, node = label["onset"], label["culprit_nodes"][0]
    xid = logs.filter(pl.col("message").str.contains(r"NVRM: Xid .*: (48|94|95),"))
    assert xid.row(0, named=True)["time"] == onset
    assert xid.row(0, named=True)["node"] == node
    gpu = culprit_gpu(c)
    before = gpu.filter(pl.col("time") < onset).get_column("ecc_dbe").max()
    first_after = gpu.filter(pl.col("time") >= onset).row(0, named=True)
    assert first_after["ecc_dbe"] > before
    cuda = c["job_logs"].filter(
        pl.col("message").str.contains("CUDA error: uncorrectable ECC error encountered")
    )
    assert cuda.height >= 1
    assert set(cuda.get_column("node")) == {node}
    assert onset < cuda.get_column("time").min() <= onset + 5 * US
    assert final_state(c) == "FAILED"


def test_nvlink_error_counters_rise_before_the_fatal_xid(simulated: Simulated) -> None:
    c = case(simulated, "nvlink_error", 1, precursor=True)
    onset = c["label"]["onset"]
    gpu = culprit_gpu(c)
    rising = gpu.filter(pl.col("nvlink_errors") > pl.col("nvlink_errors").shift(1))
    assert rising.get_column("time").min() == onset
    xid = c["data"]["logs"].filter(pl.col("message").str.contains(r"NVRM: Xid .*: 74,"))
    assert xid.height == 1
    assert xid.get_column("time")[0] > onset + 50 * US


@pytest.mark.parametrize("seed", [1, 2])
def test_gpu_hang_is_silent_while_one_gpu_stops_and_the_rest_spin(
    simulated: Simulated, seed: int
) -> None:
    c = case(simulated, "gpu_hang", seed, xid=0, stuck="idle")
    label = c["label"]
    onset = label["onset"]
    quiet = c["data"]["logs"].filter(
        (pl.col("time") >= onset)
        & (pl.col("time") < onset + 280 * US)
        & (pl.col("job_id") == label["job_id"])
    )
    assert quiet.is_empty()
    assert job_gpus(c).filter(pl.col("time") == onset).height >= 1
    later = job_gpus(c).filter(
        (pl.col("time") > onset + 5 * US) & (pl.col("time") < onset + 120 * US)
    )
    stuck = later.filter(
        (pl.col("node") == label["culprit_nodes"][0])
        & (pl.col("gpu") == label["culprit_ranks"][0] % 8)
    )
    spinning = later.join(stuck.select("node", "gpu").unique(), on=["node", "gpu"], how="anti")
    assert stuck.get_column("util").max() == 0
    assert spinning.get_column("util").min() >= 99


@pytest.mark.parametrize("seed", [1, 2])
def test_deadlock_spins_every_gpu_alike_and_blames_nobody(simulated: Simulated, seed: int) -> None:
    c = case(simulated, "deadlock", seed, ending="watchdog")
    label = c["label"]
    onset = label["onset"]
    assert label["culprit_nodes"] == [] and label["culprit_ranks"] == []
    gpus = job_gpus(c)
    before = gpus.filter((pl.col("time") < onset) & (pl.col("time") > onset - 60 * US))
    after = gpus.filter((pl.col("time") >= onset) & (pl.col("time") < onset + 60 * US))
    assert after.get_column("util").min() >= 99
    assert after.get_column("power_w").mean() < 0.7 * before.get_column("power_w").mean()
    assert after.get_column("time").min() == onset
    assert (
        c["job_logs"]
        .filter((pl.col("time") >= onset) & (pl.col("time") < onset + 290 * US))
        .is_empty()
    )
    assert c["job_logs"].get_column("message").str.contains("Watchdog caught").any()


def _iteration_ms(c: dict[str, Any]) -> pl.DataFrame:
    return (
        c["job_logs"]
        .select(
            "time",
            pl.col("message")
            .str.extract(r"elapsed time per iteration \(ms\): ([0-9.]+)", 1)
            .cast(pl.Float64)
            .alias("ms"),
        )
        .drop_nulls()
    )


def test_thermal_straggler_throttles_one_gpu_and_slows_the_job(simulated: Simulated) -> None:
    c = case(
        simulated, "thermal_straggler", 1, framework="megatron", slowdown=1.4, duration_min=40.0
    )
    onset = c["label"]["onset"]
    gpu = culprit_gpu(c)
    at_onset = gpu.filter(pl.col("time") == onset).row(0, named=True)
    assert at_onset["throttle_reasons"] & 0x20
    before = gpu.filter(pl.col("time") < onset)
    assert (before.get_column("throttle_reasons") & 0x60 == 0).all()
    assert at_onset["sm_clock_mhz"] < before.get_column("sm_clock_mhz").median()
    later = gpu.filter(pl.col("time") > onset + 300 * US)
    assert later.get_column("temp_c").mean() > before.get_column("temp_c").mean() + 8
    steps = _iteration_ms(c)
    slow = steps.filter(pl.col("time") > onset + 120 * US).get_column("ms").median()
    fast = steps.filter(pl.col("time") < onset).get_column("ms").median()
    assert slow > 1.25 * fast


def test_pcie_straggler_climbs_replay_counter(simulated: Simulated) -> None:
    c = case(simulated, "pcie_straggler", 1)
    onset = c["label"]["onset"]
    gpu = culprit_gpu(c)
    before = gpu.filter(pl.col("time") < onset).get_column("pcie_replay").max()
    at_onset = gpu.filter(pl.col("time") == onset).get_column("pcie_replay")[0]
    assert at_onset > before
    assert gpu.get_column("pcie_replay")[-1] > at_onset


TRACEBACK = "Traceback (most recent call last):"


@pytest.mark.parametrize(
    ("scenario", "params", "first_line", "error"),
    [
        ("oom", {"ranks": 1}, TRACEBACK, "torch.OutOfMemoryError: CUDA out of memory. Tried"),
        ("user_error", {"error": "KeyError"}, TRACEBACK, "KeyError: 'input_ids'"),
        ("user_error", {"error": "ValueError"}, TRACEBACK, "ValueError: Expected input batch"),
        ("segfault", {}, "Fatal Python error: Segmentation fault", "Current thread 0x"),
    ],
)
def test_software_crashes_blame_no_node(
    simulated: Simulated, scenario: str, params: dict[str, Any], first_line: str, error: str
) -> None:
    c = case(simulated, scenario, 1, **params)
    label = c["label"]
    assert label["culprit_nodes"] == []
    everyone = params.get("error") == "ValueError"
    assert bool(label["culprit_ranks"]) != everyone
    lines = c["job_logs"].filter(pl.col("message").str.contains(first_line, literal=True))
    assert lines.get_column("time").min() == label["onset"]
    failing = c["job_logs"].filter(pl.col("message").str.contains(error, literal=True))
    assert onset_close(failing, label["onset"])
    assert final_state(c) == "FAILED"
    system = c["data"]["logs"].filter(
        (pl.col("source") == "system")
        & pl.col("message").str.contains("NVRM: Xid")
        & ~pl.col("message").str.contains(r": (63|92),")
    )
    assert system.is_empty()


def test_segfault_shows_exit_code_minus_11(simulated: Simulated) -> None:
    c = case(simulated, "segfault", 1)
    messages = c["job_logs"].get_column("message")
    assert messages.str.contains(r"failed \(exitcode: -11\)").any()
    assert messages.str.contains(r"Signal 11 \(SIGSEGV\)").any()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_node_failure_goes_silent_then_slurm_notices(simulated: Simulated, seed: int) -> None:
    c = case(simulated, "node_failure", seed, requeue=True, fast_errors=True, slurmd_timeout_s=300)
    label, data = c["label"], c["data"]
    onset, node = label["onset"], label["culprit_nodes"][0]
    for table in ("logs", "gpu"):
        rows = data[table].filter(pl.col("node") == node)
        assert rows.filter(pl.col("time") >= onset).is_empty()
    last = data["gpu"].filter(pl.col("node") == node).get_column("time").max()
    assert onset - 3 * US < last < onset
    states = data["scheduler"].filter(pl.col("node") == node).filter(pl.col("time") > onset)
    assert states.get_column("state").to_list()[:2] == [
        "ALLOCATED+NOT_RESPONDING",
        "DOWN+NOT_RESPONDING",
    ]
    assert states.get_column("time")[0] >= onset + 200 * US
    job = data["scheduler"].filter(pl.col("job_id") == label["job_id"])
    sequence = job.get_column("state").to_list()
    assert "NODE_FAIL" in sequence
    rerun = job.filter((pl.col("state") == "RUNNING") & (pl.col("time") > onset))
    assert rerun.height == 1
    assert node not in rerun.get_column("nodes")[0].to_list()
    remote = c["job_logs"].filter(pl.col("message").str.contains("remote process exited"))
    assert remote.height > 0
    assert remote.get_column("time").min() > onset + 15 * US


FAULTS_WITH_ROWS = [
    "xid79_cascade",
    "ecc_uncorrectable",
    "nvlink_error",
    "gpu_hang",
    "deadlock",
    "thermal_straggler",
    "pcie_straggler",
    "oom",
    "user_error",
    "segfault",
]


@pytest.mark.parametrize("scenario", FAULTS_WITH_ROWS)
@pytest.mark.parametrize("seed", [1, 2])
def test_onset_is_the_first_abnormal_row(simulated: Simulated, scenario: str, seed: int) -> None:
    """A row of the recording sits exactly at the onset (on the culprit node for hardware
    faults and stragglers; a hang shows first on whichever node samples first), and no error
    precedes it."""
    c = case(simulated, scenario, seed)
    label, data = c["label"], c["data"]
    onset = label["onset"]
    at_onset = pl.concat(
        [
            data["logs"].filter(pl.col("time") == onset).select("node"),
            data["gpu"].filter(pl.col("time") == onset).select("node"),
        ]
    )
    assert at_onset.height >= 1
    if label["kind"] in ("gpu_fault", "straggler"):
        assert set(at_onset.get_column("node")) & set(label["culprit_nodes"])
    errors_before = c["job_logs"].filter(
        (pl.col("time") < onset) & pl.col("message").str.contains(ERRORS)
    )
    assert errors_before.is_empty()
