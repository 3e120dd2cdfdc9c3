"""Ray's own overhead on a backtest, as a ratio against ``--jobs 2`` on the same recordings.

``--recordings`` recordings (``medic simulate``, ``--minutes`` long, ``--nodes`` nodes of 8
GPUs, scenarios in turn) are written to a temporary directory; a local Ray cluster is started
on this machine (``medic.testing.ray_local``: a head and a worker node, ``--cpus`` CPUs each,
so two task workers with the default of 1); then, in this one process and alternating, so that
a noisy machine weighs on both alike:

- ``jobs2``: ``run_backtest`` with ``local_runner(2)``, two worker processes (what ``medic
  backtest --jobs 2`` does, spawning its pool each run);
- ``ray``: ``run_backtest`` on the cluster (``RayRunner``, recordings read in place); the
  first run includes starting the task workers, the later ones reuse them, as the runs of a
  sweep do;
- ``ray_ship``: the same with every recording shipped through the object store.

Every run's detections must equal the first local run's. It prints one JSON object: each
run's wall time, the median per mode, and the ratios against jobs2. A round is one run of each
mode, back to back (in the reverse order every other round); ``ratio_ray_vs_jobs2`` is the
median over the rounds of the round's Ray wall time over its jobs2 wall time, so that a load
that drifts over minutes (a shared machine) weighs on both sides of each ratio alike;
``ratio_warm_...`` leaves out the first round, whose Ray run starts the task workers. The load
average before and after goes with the figures.

    .venv/bin/python bench/ray_overhead.py
    .venv/bin/python bench/ray_overhead.py --recordings 8 --minutes 30 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from medic.backtest import BacktestReport, Runner, local_runner, run_backtest
from medic.ray_cluster import RayRunner
from medic.recording import write_recording
from medic.simulate import simulate
from medic.testing.ray_local import start_cluster

SCENARIOS = ("xid79_cascade", "oom", "gpu_hang", "segfault")


def timed(paths: list[Path], runner: Runner) -> tuple[float, BacktestReport]:
    started = time.perf_counter()
    report = run_backtest(paths, runner=runner)
    return time.perf_counter() - started, report


def paired(runs: dict[str, list[float]], mode: str, skip: int = 0) -> float:
    """The median over the rounds (after the first ``skip``) of ``mode``'s wall time over that
    round's jobs2 wall time."""
    rounds = list(zip(runs[mode], runs["jobs2"], strict=True))[skip:] or [
        (runs[mode][-1], runs["jobs2"][-1])
    ]
    return round(statistics.median(mine / jobs2 for mine, jobs2 in rounds), 2)


def same(report: BacktestReport, reference: BacktestReport) -> bool:
    return len(report.results) == len(reference.results) and all(
        mine.detections.equals(theirs.detections)
        for mine, theirs in zip(report.results, reference.results, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of each Ray node")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="medic-ray-bench-") as tmp:
        paths = []
        for index in range(args.recordings):
            scenario = SCENARIOS[index % len(SCENARIOS)]
            recording = simulate(
                scenario, index, duration_min=args.minutes, cluster_nodes=args.nodes, jobs=1
            )
            paths.append(write_recording(Path(tmp) / recording.name, recording))
        started = time.perf_counter()
        cluster = start_cluster(num_cpus=args.cpus)
        cluster_start_s = time.perf_counter() - started
        runs: dict[str, list[float]] = {"jobs2": [], "ray": [], "ray_ship": []}
        reference: BacktestReport | None = None
        identical = True
        try:
            with (
                RayRunner(cluster.address, data="shared") as shared,
                RayRunner(cluster.address, data="ship") as ship,
            ):
                runners: dict[str, Runner] = {
                    "jobs2": local_runner(2),
                    "ray": shared,
                    "ray_ship": ship,
                }
                for repeat in range(args.repeats):
                    order = list(runners.items())
                    for mode, runner in order[:: -1 if repeat % 2 else 1]:  # ABC, CBA, ...
                        wall, report = timed(paths, runner)
                        reference = reference or report
                        identical &= same(report, reference)
                        runs[mode].append(round(wall, 2))
        finally:
            cluster.stop()
    median = {mode: statistics.median(walls) for mode, walls in runs.items()}
    out: dict[str, Any] = {
        "recordings": args.recordings,
        "minutes": args.minutes,
        "gpus": args.nodes * 8,
        "cluster_start_s": round(cluster_start_s, 1),
        "wall_s": runs,
        "median_s": median,
        "ratio_ray_vs_jobs2": paired(runs, "ray"),
        "ratio_ray_ship_vs_jobs2": paired(runs, "ray_ship"),
        "ratio_warm_ray_vs_jobs2": paired(runs, "ray", skip=1),
        "ratio_warm_ray_ship_vs_jobs2": paired(runs, "ray_ship", skip=1),
        "identical_detections": identical,
        "load_avg_before": [round(load, 2) for load in load_before],
        "load_avg_after": [round(load, 2) for load in os.getloadavg()],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
