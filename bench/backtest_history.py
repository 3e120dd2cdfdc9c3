"""``medic backtest --history`` against a plain backtest of the same recordings, in one process.

Each round backtests the recordings one after the other (``run_backtest``, one worker, as
``--history`` runs), first plain, then writing what ``medic serve`` would have into a fresh
DuckDB file; the best of ``--repeat`` interleaved rounds of each is kept, so a neighbour's
burst of CPU does not count. Printed: the two wall times and their ratio (the target is at
most 1.2), the same for the process's CPU time (all threads, DuckDB's included), which a busy
machine disturbs far less than wall time, then where the history's extra time goes
(``--profile``: the functions of ``medic.history`` and DuckDB's calls that cost the most,
cumulative, from one profiled round).

    .venv/bin/python bench/backtest_history.py datasets/oom-s1 datasets/gpu_hang-s1
    .venv/bin/python bench/backtest_history.py datasets --repeat 2 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from medic.backtest import run_backtest
from medic.history.store import DuckDBStore
from medic.recording import find_recordings


def plain(paths: list[Path]) -> tuple[float, float]:
    """Wall and CPU seconds of a plain backtest."""
    wall, cpu = time.perf_counter(), time.process_time()
    run_backtest(paths, {}, jobs=1)
    return time.perf_counter() - wall, time.process_time() - cpu


def with_history(paths: list[Path]) -> tuple[float, float]:
    """Wall and CPU seconds of a backtest that also writes a fresh history."""
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu = time.perf_counter(), time.process_time()
        with DuckDBStore(Path(tmp) / "history.duckdb") as store:
            run_backtest(paths, {}, history=store, jobs=1)
        return time.perf_counter() - wall, time.process_time() - cpu


def profile(paths: list[Path], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(with_history, paths)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"medic/history|duckdb", top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    paths = find_recordings(args.paths)
    plain(paths[:1])  # warm: imports, the signature catalogue, polars' first plans
    rounds = [(plain(paths), with_history(paths)) for _ in range(args.repeat)]
    print(f"recordings                 {len(paths)}")
    for clock, index in (("wall", 0), ("CPU", 1)):
        base = min(r[0][index] for r in rounds)
        history = min(r[1][index] for r in rounds)
        ratio = history / base
        print(f"backtest            {clock:>4}   {base:8.2f} s   1.00x")
        print(
            f"backtest --history  {clock:>4}   {history:8.2f} s   {ratio:.2f}x  (target <= 1.20x)"
        )
    if args.profile:
        print(profile(paths, args.top))


if __name__ == "__main__":
    main()
