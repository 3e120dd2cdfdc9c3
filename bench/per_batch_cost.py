"""What one batch of a replay costs: CPU and wall time per event (batch or watermark), and the
runs of polars' query engine (a lazy query, or any eager DataFrame call) per event.

The query count does not depend on the machine's load, the times do: to compare two trees on a
shared machine, run this with each tree on ``PYTHONPATH`` in turn, a few times, in one period.
A ``--scenario`` recording (``medic simulate``, 8 GPUs a node) is simulated here unless
``--recording`` names one on disk.

    taskset -c 0 .venv/bin/python bench/per_batch_cost.py --gpus 128 --minutes 60
    taskset -c 0 .venv/bin/python bench/per_batch_cost.py --recording /tmp/rec --profile out.prof
"""

from __future__ import annotations

import argparse
import cProfile
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from medic.backtest import backtest_path
from medic.recording import write_recording
from medic.simulate import simulate

QUERIES = ("collect", "_collect_eager")
"""The two ways into polars' query engine: lazy queries, and every eager DataFrame call
(``filter``, ``select``, ``group_by().agg``, ``join``, ...)."""


class QueryCount:
    """Counts runs of polars' query engine while installed (wrappers, removed on exit)."""

    def __init__(self) -> None:
        self.count = 0
        self._originals = {name: getattr(pl.LazyFrame, name) for name in QUERIES}

    def __enter__(self) -> QueryCount:
        for name, original in self._originals.items():
            setattr(pl.LazyFrame, name, self._counted(original))
        return self

    def _counted(self, original: Any) -> Any:
        def counted(frame: pl.LazyFrame, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(frame, *args, **kwargs)

        return counted

    def __exit__(self, *_: object) -> None:
        for name, original in self._originals.items():
            setattr(pl.LazyFrame, name, original)


def measure(path: Path, profile: Path | None) -> dict[str, Any]:
    """Backtest ``path`` as ``medic backtest`` does, counting events and queries."""
    from medic.pipeline import Pipeline

    events = 0
    process = Pipeline.process

    def counted(self: Pipeline, event: Any) -> Any:
        nonlocal events
        events += 1
        return process(self, event)

    Pipeline.process = counted  # type: ignore[method-assign]
    profiler = cProfile.Profile(time.process_time) if profile else None
    try:
        with QueryCount() as queries:
            wall, cpu = time.perf_counter(), time.process_time()
            if profiler:
                profiler.enable()
            result = backtest_path(path)
            if profiler:
                profiler.disable()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        Pipeline.process = process  # type: ignore[method-assign]
    if profiler and profile:
        profiler.dump_stats(profile)
    detections = getattr(result, "detections", None)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "events": events,
        "queries": queries.count,
        "queries_per_event": round(queries.count / max(events, 1), 2),
        "cpu_us_per_event": round(cpu / max(events, 1) * 1e6),
        "detections": None if detections is None else detections.num_rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", type=Path)
    parser.add_argument("--gpus", type=int, default=128)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the replay here")
    args = parser.parse_args()
    if args.recording is not None:
        print(json.dumps(measure(args.recording, args.profile)))
        return
    recording = simulate(
        args.scenario, args.seed, cluster_nodes=args.gpus // 8, duration_min=args.minutes
    )
    with tempfile.TemporaryDirectory(prefix="medic-bench-") as workdir:
        path = write_recording(Path(workdir) / recording.name, recording)
        del recording
        print(json.dumps({"gpus": args.gpus, **measure(path, args.profile)}))


if __name__ == "__main__":
    main()
