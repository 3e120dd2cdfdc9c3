"""The recordings look like what real Slurm GPU clusters print and measure."""

import re

import polars as pl
import pytest

from medic.simulate.cluster import PCI_BUS_IDS
from medic.timeutil import US
from tests.simulate.conftest import SMALL, Simulated, frames

PROGRESS = {
    "megatron": r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +\d+/ +\d+ \| consumed "
    r"samples: +\d+ \| elapsed time per iteration \(ms\): [\d.]+ \| throughput per GPU "
    r"\(TFLOP/s/GPU\): [\d.]+"
    r" \| learning rate: [\d.]+E[-+]\d\d \| global batch size: +\d+ \| lm loss: [\d.]+E[-+]\d\d"
    r" \| loss scale: 1\.0 \| grad norm: [\d.]+ \| number of skipped iterations: +0 \| number of"
    r" nan iterations: +0 \|$",
    "torchtitan": r"^\[rank0\]:\[titan\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - root - INFO - "
    r"(\x1b\[\d+m)?step: +\d+  (\x1b\[\d+m)?loss: +[\d.]+  "
    r"(\x1b\[\d+m)?memory: +[\d.]+GiB\([\d.]+%\)"
    r"  (\x1b\[\d+m)?tps: [\d,]+  (\x1b\[\d+m)?tflops: [\d,.]+  (\x1b\[\d+m)?mfu: [\d.]+%",
    "deepspeed": r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[logging\.py:96:log_dist\] "
    r"\[Rank 0\] step=\d+, skipped=0, lr=\[[\d.e-]+\], mom=\[\(0\.9, 0\.999\)\]$",
    "hf_trainer": r"^ *\d+%\|[█▏▎▍▌▋▊▉ ]{10}\| \d+/\d+ \[[\d:]+<[\d:?]+, +[\d.]+(s/it|it/s)\]$",
    "lightning": r"^Epoch \d+: +\d+%\|[█▏▎▍▌▋▊▉ ]{10}\| \d+/\d+ \[[\d:]+<[\d:]+, +[\d.]+it/s, "
    r"v_num=\d+, train_loss=[\d.]+\]$",
}


@pytest.mark.parametrize("framework", sorted(PROGRESS))
def test_progress_lines_in_each_frameworks_real_format_from_its_printing_rank(
    simulated: Simulated, framework: str
) -> None:
    recording = simulated("healthy", 11, **{**SMALL, "framework": framework, "jobs": 0})
    logs = frames(recording)["logs"]
    job = next(j for j, f in recording.meta["jobs"].items() if f == framework)
    lines = logs.filter(
        (pl.col("job_id") == job) & pl.col("message").str.contains(PROGRESS[framework])
    )
    assert lines.height >= 20
    assert lines.get_column("node").n_unique() == 1
    if framework == "hf_trainer":
        assert logs.filter(pl.col("message").str.contains(r"^\{'loss': [\d.]+, 'grad_norm'")).height


def test_megatron_prints_from_the_last_rank(simulated: Simulated) -> None:
    recording = simulated("healthy", 12, **{**SMALL, "framework": "megatron", "jobs": 0})
    logs = frames(recording)["logs"]
    job = next(iter(recording.meta["jobs"]))
    progress = logs.filter((pl.col("job_id") == job) & pl.col("message").str.contains("iteration"))
    ranks = set(progress.get_column("rank").drop_nulls())
    prefixes = set(progress.get_column("message").str.extract(r"^\[rank(\d+)\]:", 1).drop_nulls())
    world = 8 * SMALL["job_nodes"]
    assert ranks <= {world - 1} and prefixes <= {str(world - 1)}


def test_cluster_naming_and_gpu_addressing(simulated: Simulated) -> None:
    recording = simulated("xid79_cascade", 5, **SMALL)
    data = frames(recording)
    gpu = data["gpu"]
    assert set(gpu.get_column("gpu").unique()) == set(range(8))
    assert all(re.fullmatch(r"[a-z0-9-]+\d{3,4}", n) for n in gpu.get_column("node").unique())
    xid = data["logs"].filter(pl.col("message").str.contains("NVRM: Xid"))
    buses = {b.rsplit(".", 1)[0] for b in PCI_BUS_IDS}
    assert set(xid.get_column("message").str.extract(r"PCI:([0-9a-f:]+)\)", 1)) <= buses


def test_global_rank_is_node_index_times_8_plus_local_rank(simulated: Simulated) -> None:
    recording = simulated("node_failure", 2, **{**SMALL, "job_nodes": 3})
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    nodes = (
        data["scheduler"]
        .filter((pl.col("job_id") == label["job_id"]) & (pl.col("state") == "NODE_FAIL"))
        .get_column("nodes")[0]
        .to_list()
    )
    index = nodes.index(label["culprit_nodes"][0])
    assert label["culprit_ranks"] == list(range(index * 8, index * 8 + 8))
    logs = data["logs"].filter(
        (pl.col("job_id") == label["job_id"])
        & (pl.col("time") < label["onset"])
        & pl.col("message").str.contains(r"NCCL (INFO|WARN)")
    )
    assert logs.height > 0
    parsed = logs.select(
        "node",
        pl.col("message").str.extract(r"^[^ ]+ \[(\d)\]", 1).cast(pl.Int64).alias("local"),
        pl.coalesce(
            pl.col("rank"), pl.col("message").str.extract(r"rank (\d+) nranks", 1).cast(pl.Int32)
        ).alias("rank"),
    ).drop_nulls()
    for node, local, rank in parsed.iter_rows():
        assert rank == nodes.index(node) * 8 + local


def test_telemetry_is_1hz_per_gpu_with_nvml_like_values(simulated: Simulated) -> None:
    recording = simulated("healthy", 3, **SMALL)
    gpu = frames(recording)["gpu"]
    gaps = (
        gpu.sort("node", "gpu", "time")
        .group_by("node", "gpu", maintain_order=True)
        .agg(pl.col("time").diff().drop_nulls().median().alias("gap"))
    )
    assert (gaps.get_column("gap") == US).all()
    for column in ("util", "temp_c", "sm_clock_mhz", "mem_used_mib"):
        values = gpu.get_column(column).drop_nulls()
        assert (values == values.round(0)).all()
    power = gpu.get_column("power_w").drop_nulls().cast(pl.Float64)
    assert ((power * 1000 - (power * 1000).round(0)).abs() < 0.05).all()
    busy = gpu.filter(pl.col("util") >= 95)
    idle = gpu.filter(pl.col("job_id").is_null())
    assert 480 < busy.get_column("power_w").median() < 720
    assert 60 < idle.get_column("power_w").median() < 110
    assert (idle.get_column("throttle_reasons") & 0x1 == 0x1).all()
    assert gpu.get_column("temp_c").min() >= 25 and gpu.get_column("temp_c").max() <= 92
    per_gpu = busy.group_by("node", "gpu").agg(pl.col("power_w").mean())
    assert per_gpu.get_column("power_w").std() > 5
    assert gpu.filter(pl.col("job_id").is_not_null()).height > 0


def test_scrape_misses_happen_but_stay_rare(simulated: Simulated) -> None:
    recording = simulated("healthy", 3, **SMALL)
    gpu = frames(recording)["gpu"]
    seconds = (recording.end_us - recording.start_us) // US
    expected = gpu.select(pl.struct("node", "gpu").n_unique()).item() * seconds
    assert 0.97 * expected < gpu.height < expected


def test_nccl_waits_count_as_busy(simulated: Simulated) -> None:
    recording = simulated("deadlock", 4, **{**SMALL, "ending": "none"})
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    waiting = data["gpu"].filter(
        (pl.col("job_id") == label["job_id"]) & (pl.col("time") > label["onset"] + 5 * US)
    )
    assert waiting.get_column("util").min() >= 99
    assert waiting.get_column("power_w").max() < 350


def test_startup_is_nccl_chatter_without_progress_and_low_util(simulated: Simulated) -> None:
    recording = simulated(
        "healthy", 7, **{**SMALL, "traps": ["long_startup"], "framework": "torchtitan", "jobs": 0}
    )
    data = frames(recording)
    job = next(iter(recording.meta["jobs"]))
    running = data["scheduler"].filter((pl.col("job_id") == job) & (pl.col("state") == "RUNNING"))
    start = running.get_column("time")[0]
    logs = data["logs"].filter(pl.col("job_id") == job)
    first_step = logs.filter(pl.col("message").str.contains("Training starts at step"))
    first_step = first_step.get_column("time")[0]
    assert first_step - start > 240 * US
    before = logs.filter(pl.col("time") < first_step)
    assert not before.get_column("message").str.contains(r"step: +\d+ ").any()
    util = data["gpu"].filter(
        (pl.col("job_id") == job)
        & (pl.col("time") > start)
        & (pl.col("time") < first_step - 30 * US)
    )
    assert util.get_column("util").mean() < 30


def test_checkpoint_saves_pause_progress_for_minutes_in_healthy_jobs(simulated: Simulated) -> None:
    recording = simulated(
        "healthy_checkpoints", 2, **{**SMALL, "framework": "megatron", "duration_min": 40.0}
    )
    data = frames(recording)
    assert data["labels"].is_empty()
    job = next(j for j, f in recording.meta["jobs"].items() if f == "megatron")
    logs = data["logs"].filter(pl.col("job_id") == job)
    saves = logs.filter(pl.col("message").str.starts_with("saving checkpoint at iteration"))
    done = logs.filter(pl.col("message").str.contains("successfully saved checkpoint"))
    assert saves.height >= 1
    pauses = (done.get_column("time") - saves.get_column("time")[: done.height]).to_list()
    assert max(pauses) >= 60 * US
    gpu = data["gpu"].filter(
        (pl.col("job_id") == job)
        & (pl.col("time") > saves.get_column("time")[0] + 5 * US)
        & (pl.col("time") < done.get_column("time")[0] - 5 * US)
    )
    assert gpu.get_column("util").mean() < 20


def test_healthy_traps_include_scary_lines_but_no_labels(simulated: Simulated) -> None:
    recording = simulated("healthy", 2, **{**SMALL, "traps": ["benign_xid", "ecc_sbe"]})
    data = frames(recording)
    assert data["labels"].is_empty()
    messages = data["logs"].get_column("message")
    assert messages.str.contains(r"NVRM: Xid \(PCI:[0-9a-f:]+\): (63|92),").any()
    assert data["gpu"].get_column("ecc_sbe").max() > 0
    assert data["gpu"].get_column("ecc_dbe").max() == 0


def test_job_endings_in_slurm_terms(simulated: Simulated) -> None:
    recording = simulated("healthy_lifecycle", 1)
    data = frames(recording)
    states = set(data["scheduler"].filter(pl.col("kind") == "job").get_column("state"))
    assert {"COMPLETED", "TIMEOUT", "REQUEUED", "PENDING", "RUNNING"} <= states
    assert any(s.startswith("CANCELLED by ") for s in states)
    messages = data["logs"].get_column("message")
    assert messages.str.contains(r"CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*$").any()
    assert messages.str.contains(r"DUE TO JOB REQUEUE \*\*\*$").any()
    completed = data["scheduler"].filter(pl.col("state") == "COMPLETED")
    assert completed.get_column("exit_code").to_list() == [0] * completed.height


def test_uniformly_slow_job_is_slow_everywhere_and_unlabelled(simulated: Simulated) -> None:
    recording = simulated("healthy_slow", 1)
    assert recording.labels is not None and recording.labels.num_rows == 0
    assert "slow_job" in recording.meta["traps"]


def test_admin_drains_an_idle_node_with_a_reason(simulated: Simulated) -> None:
    recording = simulated("healthy_noisy", 1)
    drains = frames(recording)["scheduler"].filter(pl.col("state") == "IDLE+DRAIN")
    assert drains.height >= 1
    assert drains.get_column("reason").null_count() == 0


def test_large_job_scales_to_many_nodes(simulated: Simulated) -> None:
    recording = simulated("xid79_cascade", 9, job_nodes=32, jobs=0, duration_min=20.0)
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    ranks = data["logs"].filter(
        (pl.col("job_id") == label["job_id"]) & pl.col("message").str.contains("Watchdog caught")
    )
    assert ranks.select(pl.col("node").n_unique()).item() == 32


def test_a_mid_run_power_cap_slows_a_whole_job_uniformly_and_is_unlabelled(
    simulated: Simulated,
) -> None:
    recording = simulated("healthy", 5, **{**SMALL, "traps": ["power_cap"], "duration_min": 40.0})
    assert "power_cap" in recording.meta["traps"]
    data = frames(recording)
    assert data["labels"].is_empty()
    busy = (
        data["gpu"]
        .filter(pl.col("util") >= 95)
        .with_columns(capped=(pl.col("throttle_reasons") & 0x4) > 0)
    )
    third = (pl.col("time").max() - pl.col("time").min()) / 3
    share = busy.group_by("job_id").agg(
        early=pl.col("capped").filter(pl.col("time") < pl.col("time").min() + third).mean(),
        late=pl.col("capped").filter(pl.col("time") > pl.col("time").max() - third).mean(),
        late_gpus=pl.struct("node", "gpu")
        .filter(pl.col("time") > pl.col("time").max() - third)
        .n_unique(),
    )
    capped = share.filter((pl.col("late") > 0.95) & (pl.col("early") < 0.5))
    assert capped.height == 1
    assert capped.get_column("late_gpus")[0] % 8 == 0


def test_data_loader_stalls_idle_every_gpu_of_a_job_briefly(simulated: Simulated) -> None:
    recording = simulated("healthy", 6, **{**SMALL, "framework": "hf_trainer", "jobs": 0})
    gpu = frames(recording)["gpu"].filter(pl.col("job_id").is_not_null())
    per_second = gpu.group_by(pl.col("time") // US).agg(
        idle=(pl.col("util") == 0).mean(), n=pl.len()
    )
    assert per_second.filter(pl.col("idle") > 0.5).height > 0
