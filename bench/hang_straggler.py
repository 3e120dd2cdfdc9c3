"""Hang and straggler detectors on GPU telemetry at scale, per core.

A synthetic cluster of ``--gpus`` GPUs in jobs of ``--job-gpus`` samples at 1 Hz for
``--seconds``; every job prints a Megatron-LM step line each second. Batches are what replay
hands the pipeline (one per stream per second, the progress stream already derived), their
polars frames converted up front as the pipeline shares them between detectors. Printed, each
against a baseline run in the same process (one polars ``group_by`` of every batch by GPU):

1. ``hang``: progress and gpu batches through ``update`` and a watermark per second;
2. ``straggler``: the same;
3. both together, in GPU samples per second of one core.

    POLARS_MAX_THREADS=1 .venv/bin/python bench/hang_straggler.py --gpus 16384 --seconds 120
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema
from medic.detectors.hang import HangDetector
from medic.detectors.straggler import StragglerDetector
from medic.ingest.base import Batch
from medic.parse.progress import ProgressParser
from medic.timeutil import US, to_us

T0 = to_us("2026-03-01T00:00:00Z")


def gpu_batch(gpus: int, job_gpus: int, second: int, rng: np.random.Generator) -> Batch:
    index = np.arange(gpus)
    columns = {
        "time": pa.array(np.full(gpus, T0 + second * US), schema.TIME),
        "node": pa.array([f"node{i // 8:05d}" for i in index]),
        "gpu": pa.array(index % 8, pa.int16()),
        "job_id": pa.array([str(1000 + i // job_gpus) for i in index]),
        "util": pa.array(rng.uniform(95, 100, gpus), pa.float32()),
        "power_w": pa.array(rng.uniform(600, 660, gpus), pa.float32()),
        "temp_c": pa.array(rng.uniform(60, 70, gpus), pa.float32()),
        "sm_clock_mhz": pa.array(rng.uniform(1950, 1990, gpus), pa.float32()),
        "throttle_reasons": pa.array(np.zeros(gpus, np.int64)),
        "pcie_replay": pa.array(np.zeros(gpus, np.int64)),
        "nvlink_errors": pa.array(np.zeros(gpus, np.int64)),
        "ecc_dbe": pa.array(np.zeros(gpus, np.int64)),
    }
    return Batch("gpu", schema.conform(pa.table(columns), schema.GPU))


def progress_batch(jobs: int, second: int, parser: ProgressParser) -> Batch:
    message = (
        f" iteration {second + 1:8d}/  500000 | consumed samples: {second * 512:12d} |"
        " elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 180.0 |"
    )
    rows = {
        "time": pa.array(np.full(jobs, T0 + second * US + US // 2), schema.TIME),
        "job_id": pa.array([str(1000 + j) for j in range(jobs)]),
        "node": pa.array([f"node{j:05d}" for j in range(jobs)]),
        "source": pa.array(["app"] * jobs),
        "message": pa.array([message] * jobs),
    }
    parsed = parser.parse(Batch("logs", schema.conform(pa.table(rows), schema.LOGS)))
    assert parsed is not None
    return parsed


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument("--job-gpus", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=120)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    jobs = -(-args.gpus // args.job_gpus)
    progress_parser = ProgressParser()
    gpu = [gpu_batch(args.gpus, args.job_gpus, s, rng) for s in range(args.seconds)]
    progress = [progress_batch(jobs, s, progress_parser) for s in range(args.seconds)]
    for batch in gpu + progress:
        batch.frame  # noqa: B018 - converted once, shared by every detector in the pipeline

    def baseline() -> None:
        for batch in gpu:
            batch.frame.group_by("node", "gpu").agg(pl.col("util").mean())

    def drive(*detectors: HangDetector | StragglerDetector) -> Callable[[], None]:
        def run() -> None:
            for second in range(args.seconds):
                for detector in detectors:
                    detector.update(progress[second])
                    detector.update(gpu[second])
                    detector.advance(T0 + (second + 1) * US)

        return run

    samples = args.gpus * args.seconds
    base = timed(baseline)
    print(f"{samples:,} GPU samples, {jobs} jobs of {args.job_gpus} GPUs, {args.seconds} s")
    print(f"baseline group_by per batch: {samples / base / 1e6:6.2f} M samples/s")
    for name, run in (
        ("hang", drive(HangDetector())),
        ("straggler", drive(StragglerDetector())),
        ("hang + straggler", drive(HangDetector(), StragglerDetector())),
    ):
        elapsed = timed(run)
        print(
            f"{name:>17}: {samples / elapsed / 1e6:6.2f} M samples/s "
            f"({elapsed / base:.2f}x the baseline's time)"
        )


if __name__ == "__main__":
    main()
