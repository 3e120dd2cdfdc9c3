"""The perturbation suite: realistic variation on top of the plain scenarios, and the quiet
faults (hangs with no node at fault, stragglers from the first step)."""

from pathlib import Path

import polars as pl

from medic.recording import Recording, validate_recording, write_recording
from medic.simulate import simulate
from medic.simulate.scenarios import FAULTS, HEALTHY, QUIET_FAULTS
from medic.simulate.suites import suite_entries
from medic.simulate.telemetry import GPU_IDLE, SW_POWER_CAP
from tests.simulate.conftest import SMALL, Simulated, frames

LONGER = {**SMALL, "duration_min": 45.0}


def test_the_perturbed_suite_runs_every_scenario_on_twenty_seeds_by_default() -> None:
    entries = suite_entries("perturbed")
    assert len({e.name for e in entries}) == len(entries)
    assert all(e.perturbed and e.name.endswith(f"-p{e.seed}") for e in entries)
    for name in (*FAULTS, *QUIET_FAULTS, *HEALTHY):
        assert sum(e.scenario == name for e in entries) >= 20
    assert any(e.scenario == "mixed" for e in entries)
    assert {e.seed for e in suite_entries("perturbed", 3)} == {1, 2, 3}


def test_a_perturbed_recording_is_valid_repeatable_and_keeps_the_plain_fault(
    simulated: Simulated, tmp_path: Path
) -> None:
    plain = simulated("gpu_hang", 4, **SMALL)
    perturbed = simulated("gpu_hang", 4, perturbed=True, **SMALL)
    again = simulate("gpu_hang", 4, perturbed=True, **SMALL)
    for name in ("logs", "gpu", "scheduler", "labels"):
        assert getattr(again, name).equals(getattr(perturbed, name)), name
    assert validate_recording(write_recording(tmp_path / perturbed.name, perturbed)) == []
    assert perturbed.name == "gpu_hang-p4" and "perturbation" in perturbed.meta
    assert "perturbation" not in plain.meta
    keep = ["job_id", "kind", "culprit_nodes", "culprit_ranks"]
    assert frames(perturbed)["labels"].select(keep).equals(frames(plain)["labels"].select(keep))


def test_telemetry_is_sampled_at_the_drawn_cadence(simulated: Simulated) -> None:
    cadences = {}
    for seed in range(1, 9):
        recording = simulated("healthy", seed, perturbed=True, **SMALL)
        cadence = recording.meta["perturbation"]["telemetry_cadence_s"]
        cadences[cadence] = recording
    assert len(cadences) >= 2
    for cadence, recording in cadences.items():
        gaps = (
            frames(recording)["gpu"]
            .sort("time")
            .select(pl.col("time").diff().over("node", "gpu").drop_nulls())
            .to_series()
        )
        assert (gaps % (cadence * 1_000_000) == 0).all()
        assert gaps.min() == cadence * 1_000_000


def test_barrier_checkpoints_spin_the_waiting_gpus_of_healthy_jobs(simulated: Simulated) -> None:
    """Non-writer ranks wait in the save's barrier: util pegged, power far below training."""
    spinning = 0
    for seed in range(1, 7):
        recording = simulated("healthy_checkpoints", seed, perturbed=True, **LONGER)
        assert recording.labels is not None and recording.labels.num_rows == 0
        styles = recording.meta["perturbation"]["checkpoints"]
        gpu = frames(recording)["gpu"]
        for job, style in styles.items():
            rows = gpu.filter(pl.col("job_id") == job)
            training = rows.filter(pl.col("util") >= 95)["power_w"].quantile(0.9)
            if training is None:
                continue
            spin = rows.filter((pl.col("util") >= 99) & (pl.col("power_w") < 0.45 * training))
            if style == "barrier":
                spinning += spin.height
    assert spinning > 0


def test_logs_are_prefixed_by_each_jobs_launcher_and_stay_sorted(simulated: Simulated) -> None:
    seen: set[str] = set()
    patterns = {
        "srun_label": r"^\d+: ",
        "srun_tee": r"^\d+: ",
        "torchrun_tee": r"^\[default\d\]:",
        "kubectl_timestamps": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ",
    }
    for seed in range(1, 9):
        recording = simulated("oom", seed, perturbed=True, **SMALL)
        logs = frames(recording)["logs"]
        assert logs["time"].is_sorted()
        for job, launcher in recording.meta["perturbation"]["launchers"].items():
            app = logs.filter((pl.col("job_id") == job) & (pl.col("source") == "app"))
            if launcher in patterns and app.height:
                seen.add(launcher)
                share = app["message"].str.contains(patterns[launcher]).mean()
                # torchrun prefixes its workers' lines, not its own.
                least = 0.25 if launcher == "torchrun_tee" else 0.5
                assert share is not None and share > least, (seed, launcher)
    assert len(seen) >= 2


def test_each_nodes_lines_carry_its_clock_skew(simulated: Simulated) -> None:
    """slurmd launches a step's tasks on every node at once: their launch lines are apart by
    the nodes' skews (and the 10 ms the plain simulator puts between them)."""
    recording = simulated("healthy", 3, perturbed=True, **SMALL)
    skew = recording.meta["perturbation"]["clock_skew_s"]
    assert max(abs(s) for s in skew.values()) <= 2.0
    launches = (
        frames(recording)["logs"]
        .filter(pl.col("message").str.contains("launch task StepId="))
        .with_columns(pl.col("message").str.extract(r"StepId=(\S+)").alias("step"))
    )
    compared = 0
    for _, lines in launches.group_by("step"):
        if lines.height < 2:
            continue
        written = lines["time"] / 1e6 - pl.Series([skew[n] for n in lines["node"]])
        assert written.max() - written.min() < 0.2
        compared += 1
    assert compared > 0


def test_a_host_hang_blames_the_rank_its_gpu_idle_while_the_others_spin(
    simulated: Simulated,
) -> None:
    recording = simulated("host_hang", 2, **SMALL)
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    assert label["culprit_nodes"] == [] and len(label["culprit_ranks"]) == 1
    after = data["gpu"].filter(
        (pl.col("job_id") == label["job_id"])
        & pl.col("time").is_between(label["onset"] + 30_000_000, label["onset"] + 90_000_000)
    )
    per_gpu = after.group_by("node", "gpu").agg(
        pl.col("util").max().alias("util"), (pl.col("throttle_reasons") & GPU_IDLE).min()
    )
    idle = per_gpu.filter(pl.col("util") == 0)
    assert idle.height == 1 and idle["throttle_reasons"][0] == GPU_IDLE
    assert per_gpu.filter(pl.col("util") >= 99).height == per_gpu.height - 1


def test_an_nfs_hang_leaves_kernel_complaints_but_no_culprit_node(simulated: Simulated) -> None:
    recording = simulated("nfs_hang", 1, **SMALL)
    data = frames(recording)
    assert data["labels"]["culprit_nodes"].to_list() == [[]]
    system = data["logs"].filter(pl.col("source") == "system")["message"]
    assert system.str.contains(r"nfs: server \S+ not responding, still trying").any()
    assert system.str.contains(r"INFO: task \S+:\d+ blocked for more than \d+ seconds\.").any()


def test_an_ib_flap_straggler_flaps_its_node_from_the_first_step(simulated: Simulated) -> None:
    recording = simulated("ib_flap_straggler", 1, **SMALL)
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    [node] = label["culprit_nodes"]
    flaps = data["logs"].filter(pl.col("message").str.contains(r"mlx5_core \S+ ib\d: Link down"))
    assert flaps.height >= 2 and set(flaps["node"]) == {node}
    assert flaps["time"].min() < label["onset"] + 600_000_000


def port_counts(recording: Recording) -> pl.DataFrame:
    """Per node: how much ``ib_errors`` and ``ib_link_downed`` rose over the recording."""
    return (
        frames(recording)["gpu"]
        .group_by("node")
        .agg((pl.col(c).max() - pl.col(c).min()).alias(c) for c in ("ib_errors", "ib_link_downed"))
        .sort("node")
    )


def test_an_ib_flap_straggler_counts_its_flaps_and_errors_on_its_node_only(
    simulated: Simulated,
) -> None:
    recording = simulated("ib_flap_straggler", 1, **SMALL)
    data = frames(recording)
    [node] = data["labels"].row(0, named=True)["culprit_nodes"]
    downs = data["logs"].filter(pl.col("message").str.contains(r"mlx5_core \S+ ib\d: Link down"))
    rose = port_counts(recording)
    culprit = rose.filter(pl.col("node") == node).row(0, named=True)
    assert culprit["ib_link_downed"] == downs.height  # one link-down per flap
    assert culprit["ib_errors"] > 100 * downs.height  # a bad link errs between its flaps
    assert rose.filter(pl.col("node") != node).select("ib_errors", "ib_link_downed").sum().row(
        0
    ) == (0, 0)
    boot = data["gpu"].group_by("node").agg(pl.col("ib_link_downed").min())
    assert boot["ib_link_downed"].max() > 0  # link training at boot left counts behind


def test_some_ib_flap_stragglers_ship_no_log_lines_only_counters(simulated: Simulated) -> None:
    recording = simulated("ib_flap_straggler", 2, perturbed=True, **SMALL)
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    assert "not collected" in label["note"]
    [node] = label["culprit_nodes"]
    link = pl.col("message").str.contains("Link down|async event")
    assert data["logs"].filter(link & (pl.col("node") == node)).is_empty()
    culprit = port_counts(recording).filter(pl.col("node") == node).row(0, named=True)
    assert culprit["ib_link_downed"] >= 2 and culprit["ib_errors"] > 0


def test_a_switch_retrain_counts_one_link_down_on_every_node(simulated: Simulated) -> None:
    recording = simulated("healthy", 1, perturbed=True, **SMALL)
    assert "ib_switch_retrain" in recording.meta["traps"]
    assert recording.labels is None or recording.labels.num_rows == 0
    rose = port_counts(recording)
    assert set(rose["ib_link_downed"]) == {1} and (rose["ib_errors"] > 0).all()


def test_a_power_capped_gpu_shows_its_cap_from_the_first_sample(simulated: Simulated) -> None:
    recording = simulated("power_cap_straggler", 1, **SMALL)
    data = frames(recording)
    label = data["labels"].row(0, named=True)
    [node] = label["culprit_nodes"]
    training = data["gpu"].filter(
        (pl.col("job_id") == label["job_id"]) & (pl.col("time") >= label["onset"])
    )
    share = (
        training.filter(pl.col("util") >= 90)
        .group_by("node", "gpu")
        .agg(((pl.col("throttle_reasons") & SW_POWER_CAP) > 0).mean().alias("capped"))
    )
    capped = share.filter(pl.col("capped") > 0.9)
    assert capped.height == 1 and capped["node"][0] == node
    assert share.filter(pl.col("capped") > 0.5).height == 1
    first = training.filter((pl.col("node") == node) & (pl.col("gpu") == capped["gpu"][0]))
    assert first["time"].min() < label["onset"] + 60_000_000
