"""Backtest wall time and peak memory of a one-hour recording at 128, 1,024 and 8,192 GPUs.

For each size a ``--scenario`` recording (``medic simulate``, 8 GPUs a node, ``--minutes``
long) is written to a temporary directory (deleted afterwards), then backtested in a fresh
process, as ``medic backtest`` does (``backtest_path``: read the recording, its GPU telemetry
a batch at a time as the replay goes, through every detector and the rules, score). That
process reports its wall and CPU time and its peak resident memory (``VmHWM``) and, as a
baseline, the interpreter with medic imported. The other baselines are taken in this process,
so that they do not raise the child's peak: reading the whole recording (the I/O floor of any
backtest) and its size in memory (Arrow).

    .venv/bin/python bench/backtest_scaling.py
    .venv/bin/python bench/backtest_scaling.py --gpus 128 1024 --minutes 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from medic.backtest import backtest_path
from medic.recording import read_recording, write_recording
from medic.schema import STREAMS
from medic.simulate import simulate

MIB = 1024 * 1024


def peak_rss_mib() -> float:
    """This process's own peak resident memory. Not ``ru_maxrss``: a child started by
    ``subprocess`` (vfork, then exec) inherits its parent's peak there, so the child would
    report the memory the parent used to simulate the recording."""
    status = Path("/proc/self/status").read_text()
    (kib,) = (line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) / 1024


def child(path: Path) -> dict[str, Any]:
    """Runs in a fresh process: the backtest, as ``medic backtest`` runs it."""
    idle = peak_rss_mib()
    started, cpu = time.perf_counter(), time.process_time()
    result = backtest_path(path)
    return {
        "idle_mib": idle,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "peak_mib": peak_rss_mib(),
        "detections": result.detections.num_rows,
        "recall": result.score.recall,
    }


def read_whole(path: Path) -> dict[str, Any]:
    """The baselines: the recording read whole into memory, how long that takes, its size."""
    started = time.perf_counter()
    recording = read_recording(path)
    return {
        "read_s": time.perf_counter() - started,
        "arrow_mib": sum(recording.stream(s).nbytes for s in STREAMS) / MIB,
        "samples": recording.gpu.num_rows,
        "lines": recording.logs.num_rows,
    }


def measure(gpus: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    recording = simulate(
        args.scenario, args.seed, cluster_nodes=gpus // 8, duration_min=args.minutes
    )
    path = write_recording(workdir / f"{gpus}gpus", recording)
    del recording
    generated_s = time.perf_counter() - started
    disk_mib = sum(f.stat().st_size for f in path.iterdir()) / MIB
    baselines = read_whole(path)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    found.update(baselines, gpus=gpus, generated_s=generated_s, disk_mib=disk_mib)
    for file in path.iterdir():
        file.unlink()
    path.rmdir()
    return found


def report(rows: list[dict[str, Any]], minutes: float) -> None:
    header = (
        "| GPUs | samples | log lines | on disk MiB | read s | backtest wall s | CPU s "
        "| x real time | wall / read | peak MiB | Arrow MiB | peak / Arrow | MiB per 1k GPUs |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    first = rows[0]
    for r in rows:
        growth = (
            (r["peak_mib"] - first["peak_mib"]) / (r["gpus"] - first["gpus"]) * 1024
            if r is not first
            else None
        )
        print(
            f"| {r['gpus']:,} | {r['samples']:,} | {r['lines']:,} | {r['disk_mib']:.0f} "
            f"| {r['read_s']:.2f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} "
            f"| {minutes * 60 / r['wall_s']:.0f}x | {r['wall_s'] / r['read_s']:.0f}x "
            f"| {r['peak_mib']:.0f} | {r['arrow_mib']:.0f} | {r['peak_mib'] / r['arrow_mib']:.1f}x "
            f"| {'-' if growth is None else f'{growth:.0f}'} |"
        )
    print(
        f"\nbaseline process (python + medic imported, nothing read): {first['idle_mib']:.0f} MiB; "
        "MiB per 1k GPUs: growth of the peak from the smallest size (linear when constant)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[128, 1024, 8192])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    load = os.getloadavg()
    print(
        f"'{args.scenario}' seed {args.seed}, {args.minutes:g} min, 8 GPUs a node; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; POLARS_MAX_THREADS="
        f"{os.environ.get('POLARS_MAX_THREADS', '(all cores)')}\n"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="medic-bench-") as workdir:
        for gpus in args.gpus:
            rows.append(measure(gpus, args, Path(workdir)))
            r = rows[-1]
            print(
                f"{gpus:,} GPUs: generated in {r['generated_s']:.0f} s, backtest "
                f"{r['wall_s']:.1f} s wall, peak {r['peak_mib']:.0f} MiB, "
                f"{r['detections']} detections",
                flush=True,
            )
    print()
    report(rows, args.minutes)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
