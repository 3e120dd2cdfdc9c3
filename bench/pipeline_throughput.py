"""Pipeline throughput on one core: log lines/s and GPU samples/s through parsing and every
detector, each against baselines run in the same process.

Logs: every log line of the recordings under ``--datasets`` (faults, tracebacks, NCCL
errors, progress bars of every framework, noise), tiled to ``--lines`` lines and cut into
batches of ``--batch-lines`` lines, one second of event time each (a cluster printing that
many lines a second). Printed against:

* the naive baseline (``naive_parsing.py``): the same signature catalogue and progress formats
  applied line by line with Python's ``re``, checked first to find exactly the rows medic's
  parsers find;
* drain3 template mining (for context: what a generic log parser costs per line).

The same lines are then sorted by what reads them (the naive loop decides): lines matching
nothing, progress lines, signature lines. The parsers run on each kind alone, tiled to
``--kind-lines``, against the naive loop on ``--kind-naive-lines`` of them: what a cluster's own
mix of lines will cost.

GPU telemetry: a simulated ``--gpus`` cluster (``medic simulate`` scenario ``--scenario``)
replayed for ``--minutes`` through every detector, one batch per stream per second as
``medic backtest`` does (its few log lines and scheduler rows included), and its telemetry
alone in batches of ``--batch-lines`` samples (per-batch costs amortised), against a naive
per-sample Python fold of the newest state of each GPU (what the ``gpu_latest`` stream holds).
The 1 s replay then runs at the smaller ``--sizes`` too: the growth of a second's cost from the
smallest cluster to ``--gpus`` is what each GPU costs a second, the fixed costs aside.

Per core: polars runs on one thread (POLARS_MAX_THREADS=1, set here) and figures are CPU
seconds of this process (``time.process_time``), each the best of ``--repeat`` runs (a shared
machine's speed drifts by a third from one run to the next); pin it to one core for clean
figures:

    taskset -c 0 .venv/bin/python bench/pipeline_throughput.py
    taskset -c 0 .venv/bin/python bench/pipeline_throughput.py --lines 500000 --gpus 1024
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medic import schema
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.replay import ReplaySource
from medic.parse.catalogue import builtin_catalogue
from medic.parse.prefixes import PrefixStripper
from medic.parse.progress import PROGRESS, ProgressParser
from medic.parse.signatures import UNMATCHED, SignatureParser
from medic.pipeline import Pipeline
from medic.recording import Recording, find_recordings
from medic.simulate import simulate
from medic.timeutil import US, to_us

sys.path.insert(0, str(Path(__file__).parent))
from naive_parsing import Line, NaiveProgress, NaiveSignatures

T0 = to_us("2026-03-01T00:00:00Z")
ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(
    work: Callable[[Any], Any], repeat: int, setup: Callable[[], Any] = lambda: None
) -> float:
    """The fewest CPU seconds ``work(setup())`` took in ``repeat`` runs (``setup`` untimed)."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        prepared = setup()
        started = time.process_time()
        work(prepared)
        best = min(best, time.process_time() - started)
    return best


def read_logs(datasets: Path) -> pa.Table:
    """The logs of every recording under ``datasets``."""
    return pa.concat_tables(
        schema.conform(pq.read_table(path / "logs.parquet"), schema.LOGS)
        for path in find_recordings([datasets])
    )


def tiled(corpus: pa.Table, lines: int, batch_lines: int) -> pa.Table:
    """``corpus`` repeated to ``lines`` rows and re-stamped so that each ``batch_lines`` rows span
    one second."""
    repeats = -(-lines // corpus.num_rows)
    table = pa.concat_tables([corpus] * repeats).slice(0, lines)
    index = np.arange(lines, dtype=np.int64)
    times = T0 + (index // batch_lines) * US + (index % batch_lines) * (US // batch_lines)
    column = table.schema.get_field_index("time")
    return table.set_column(column, "time", pa.array(times, schema.TIME))


def naive_parse(lines: list[Line]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The naive loop's signature rows and progress rows of ``lines``."""
    return NaiveSignatures(builtin_catalogue()).match(lines), NaiveProgress().match(lines)


def line_kinds(corpus: pa.Table) -> dict[str, pa.Table]:
    """The corpus's lines by what reads them, as the naive loop decides line by line: a
    progress format only, a catalogue signature (with or without a progress format), or
    neither."""
    signatures, progress = NaiveSignatures(builtin_catalogue()), NaiveProgress()
    lines = as_lines(corpus)
    signature = np.array([bool(signatures.match([line])) for line in lines])
    step = np.array([bool(progress.match([line])) for line in lines])
    kinds = {
        "matching nothing": ~signature & ~step,
        "progress lines": step & ~signature,
        "signature lines": signature,
    }
    return {name: corpus.filter(pa.array(mask)) for name, mask in kinds.items() if mask.any()}


def log_events(table: pa.Table, batch_lines: int) -> Iterator[Event]:
    for lo in range(0, table.num_rows, batch_lines):
        batch = Batch("logs", table.slice(lo, batch_lines))
        yield batch
        yield Watermark((batch.max_time or T0) + 1)


def gpu_events(table: pa.Table, batch_rows: int) -> Iterator[Event]:
    for lo in range(0, table.num_rows, batch_rows):
        batch = Batch("gpu", table.slice(lo, batch_rows))
        yield batch
        yield Watermark((batch.max_time or T0) + 1)


def as_lines(table: pa.Table) -> list[Line]:
    names = ("time", "job_id", "node", "rank", "source", "message")
    times = table.column("time").cast(pa.int64()).to_pylist()
    columns = [times, *(table.column(n).to_pylist() for n in names[1:])]
    return list(zip(*columns, strict=True))


def medic_parse(table: pa.Table, batch_lines: int) -> tuple[list[Batch], list[Batch]]:
    """What the parsers make of each batch, as the detectors get it (in polars: its Arrow form
    is only built when read). They share one prefix stripper, as in the pipeline."""
    prefixes = PrefixStripper()
    signatures, progress = SignatureParser(prefixes=prefixes), ProgressParser(prefixes=prefixes)
    found_signatures: list[Batch] = []
    found_progress: list[Batch] = []
    for lo in range(0, table.num_rows, batch_lines):
        batch = Batch("logs", table.slice(lo, batch_lines))
        for parser, found in ((signatures, found_signatures), (progress, found_progress)):
            derived = parser.parse(batch)
            if derived is not None:
                found.append(derived)
    return found_signatures, found_progress


SIGNATURE_COLUMNS = (
    "rank",
    "signature",
    "kind",
    "severity",
    "action",
    "xid",
    "xid_name",
    "pci",
    "host",
    "exit_code",
)
PROGRESS_COLUMNS = tuple(name for name in PROGRESS.names[1:] if name != "loss")
"""The columns compared with the naive loop's rows (after the time; the naive loop reads no
loss)."""


def rows_of(batches: list[Batch], names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return [row for batch in batches for row in _rows(pa.table(batch.data), names)]


def _rows(table: pa.Table, names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    times = table.column("time").cast(pa.int64()).to_pylist()
    columns = [times, *(table.column(n).to_pylist() for n in names)]
    return list(zip(*columns, strict=True))


def known_formats(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows of the formats (the naive loop has no learning reader)."""
    framework = 1 + PROGRESS_COLUMNS.index("framework")
    return [row for row in rows if row[framework] != "learned"]


def catalogue_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows of catalogue entries (the naive loop has no second layer)."""
    signature = 1 + SIGNATURE_COLUMNS.index("signature")
    return [row for row in rows if not row[signature].startswith(UNMATCHED)]


def check_same_output(table: pa.Table, batch_lines: int) -> tuple[int, int]:
    """medic's parsers and the naive loop find the same rows; returns the row counts."""
    signatures, progress = medic_parse(table, batch_lines)
    lines = as_lines(table)
    naive_signatures, naive_progress = naive_parse(lines)
    for what, ours, theirs in (
        (
            "signatures",
            _rounded(catalogue_rows(rows_of(signatures, SIGNATURE_COLUMNS))),
            _rounded(naive_signatures),
        ),
        (
            "progress",
            _rounded(known_formats(rows_of(progress, PROGRESS_COLUMNS))),
            _rounded(naive_progress),
        ),
    ):
        if ours != theirs:
            diff = next((a, b) for a, b in zip(ours, theirs, strict=False) if a != b)
            sys.exit(
                f"{what}: medic found {len(ours)} rows, naive {len(theirs)}; first difference "
                f"{diff}"
            )
    return len(naive_signatures), len(naive_progress)


def _rounded(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Floats to 9 significant digits (polars divides by multiplying with the reciprocal)."""
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows]


def drain3_lines(messages: list[str]) -> int:
    import logging

    from drain3 import TemplateMiner

    logging.getLogger("drain3").setLevel(logging.ERROR)
    miner = TemplateMiner()
    for message in messages:
        miner.add_log_message(message)
    return len(miner.drain.clusters)


def naive_gpu_fold(table: pa.Table) -> int:
    """Per sample: newest time, job, first Xid and counters of each GPU (dicts)."""
    names = ("node", "gpu", "time", "job_id", "xid", "ecc_dbe", "nvlink_errors")
    columns = [table.column(n).to_pylist() for n in names]
    newest: dict[tuple[str, int], list[Any]] = {}
    for node, gpu, at, job_id, xid, ecc, nvlink in zip(*columns, strict=True):
        state = newest.get((node, gpu))
        if state is None:
            newest[(node, gpu)] = [at, job_id, xid, ecc, nvlink]
            continue
        state[0], state[1] = at, job_id
        if state[2] is None:
            state[2] = xid
        if ecc is not None:
            state[3] = ecc
        if nvlink is not None:
            state[4] = nvlink
    return len(newest)


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds / 1e6:.2f} M" if count / seconds >= 1e5 else f"{count / seconds:,.0f}"


def print_table(title: str, unit: str, rows: list[tuple[str, int, float, str]]) -> None:
    print(f"\n{title}")
    print(f"| {'stage':<58} | {unit:>10} | {'CPU s':>7} | {unit + '/s':>12} | {'ratio':>26} |")
    print(f"|{'-' * 60}|{'-' * 12}|{'-' * 9}|{'-' * 14}|{'-' * 28}|")
    for name, count, seconds, ratio in rows:
        print(
            f"| {name:<58} | {count:>10,} | {seconds:>7.2f} | {rate(count, seconds):>12} "
            f"| {ratio:>26} |"
        )


def log_seconds(table: pa.Table, batch_lines: int, repeat: int) -> tuple[float, float]:
    """CPU seconds of the parsers alone, and of the whole pipeline (parsers and every detector),
    over ``table`` in batches of ``batch_lines``: each the best of ``repeat`` runs."""
    parse_s = cpu_seconds(lambda _: medic_parse(table, batch_lines), repeat)
    full_s = cpu_seconds(
        lambda pipeline: pipeline.run(log_events(table, batch_lines)),
        repeat,
        Pipeline.from_settings,
    )
    return parse_s, full_s


def bench_logs(args: argparse.Namespace, corpus: pa.Table) -> None:
    table = tiled(corpus, args.lines, args.batch_lines)
    sample = table.slice(0, min(args.naive_lines, table.num_rows))
    hits, steps = check_same_output(sample, args.batch_lines)
    print(
        f"same output checked on {sample.num_rows:,} lines: {hits:,} signature rows, "
        f"{steps:,} progress rows, identical in medic and the naive loop"
    )
    lines = as_lines(sample)
    repeat = args.repeat
    naive_s = cpu_seconds(
        lambda _: naive_parse(lines),
        repeat,
    )
    messages = sample.column("message").to_pylist()[: args.drain3_lines]
    drain_s = cpu_seconds(lambda _: drain3_lines(messages), repeat)
    parse_s, full_s = log_seconds(table, args.batch_lines, repeat)
    naive_rate, drain3_rate = sample.num_rows / naive_s, len(messages) / drain_s

    def vs_naive(count: int, seconds: float) -> str:
        per_second = count / seconds
        return f"{per_second / naive_rate:.1f}x naive, {per_second / drain3_rate:.1f}x drain3"

    print_table(
        f"Log lines, {args.batch_lines:,} lines per batch (one core)",
        "lines",
        [
            ("naive: per-line Python re, signatures + progress", sample.num_rows, naive_s, "1.0x"),
            (
                "drain3 template mining (context)",
                len(messages),
                drain_s,
                f"{drain3_rate / naive_rate:.1f}x naive",
            ),
            (
                "medic parsers: signatures + progress",
                table.num_rows,
                parse_s,
                vs_naive(table.num_rows, parse_s),
            ),
            (
                "medic pipeline: parsers + every detector",
                table.num_rows,
                full_s,
                vs_naive(table.num_rows, full_s),
            ),
        ],
    )


def bench_line_kinds(args: argparse.Namespace, corpus: pa.Table) -> None:
    """The parsers on each kind of line alone: what a mix of them costs."""
    kinds = line_kinds(corpus)
    rows = []
    for name, lines in kinds.items():
        table = tiled(lines, args.kind_lines, args.batch_lines)
        sample = as_lines(table.slice(0, args.kind_naive_lines))
        naive_s = cpu_seconds(lambda _, sample=sample: naive_parse(sample), args.repeat)
        parse_s = cpu_seconds(
            lambda _, table=table: medic_parse(table, args.batch_lines), args.repeat
        )
        naive_rate = len(sample) / naive_s
        share = f"{lines.num_rows / corpus.num_rows:.0%} of lines"
        rows.append((f"naive, {name} ({share})", len(sample), naive_s, "1.0x"))
        rows.append(
            (
                f"medic parsers, {name}",
                table.num_rows,
                parse_s,
                f"{table.num_rows / parse_s / naive_rate:.1f}x naive",
            )
        )
    print_table(
        f"Log lines by kind: the parsers on each alone, {args.batch_lines:,} lines per batch "
        "(one core)",
        "lines",
        rows,
    )


def simulated(args: argparse.Namespace, gpus: int) -> Recording:
    return simulate(args.scenario, args.seed, cluster_nodes=gpus // 8, duration_min=args.minutes)


def replay_seconds(recording: Recording, repeat: int) -> float:
    """CPU seconds of ``recording`` replayed in 1 s batches through every detector."""
    return cpu_seconds(
        lambda pipeline: pipeline.run(ReplaySource(recording)), repeat, Pipeline.from_settings
    )


def bench_gpu(args: argparse.Namespace) -> None:
    recording = simulated(args, args.gpus)
    samples = recording.gpu.num_rows
    sample = recording.gpu.slice(0, args.naive_samples)
    repeat = args.repeat
    naive_s = cpu_seconds(lambda _: naive_gpu_fold(sample), repeat)
    full_s = replay_seconds(recording, repeat)
    big_s = cpu_seconds(
        lambda pipeline: pipeline.run(gpu_events(recording.gpu, args.batch_lines)),
        repeat,
        lambda: placed(recording),
    )
    naive_rate = sample.num_rows / naive_s
    print_table(
        f"GPU samples, {args.gpus:,} GPUs x {args.minutes:g} min of '{args.scenario}' replayed "
        f"in 1 s batches (one core; with its {recording.logs.num_rows:,} log lines)",
        "samples",
        [
            (
                "naive: per-sample Python fold of each GPU's newest state",
                sample.num_rows,
                naive_s,
                "1.0x",
            ),
            (
                "medic pipeline: replay + gpu_latest + every detector",
                samples,
                full_s,
                f"{samples / full_s / naive_rate:.1f}x naive",
            ),
            (
                f"medic pipeline: telemetry alone in {args.batch_lines:,}-sample batches",
                samples,
                big_s,
                f"{samples / big_s / naive_rate:.1f}x naive",
            ),
        ],
    )
    bench_gpu_sizes(args, recording, full_s)


def bench_gpu_sizes(args: argparse.Namespace, largest: Recording, largest_s: float) -> None:
    """The 1 s replay at smaller clusters: what a second costs per GPU, fixed costs aside."""
    seconds_of_replay = args.minutes * 60
    sizes = [(gpus, simulated(args, gpus)) for gpus in sorted(set(args.sizes)) if gpus < args.gpus]
    runs = [(gpus, rec, replay_seconds(rec, args.repeat)) for gpus, rec in sizes]
    runs.append((args.gpus, largest, largest_s))
    print_table(
        f"GPU samples by cluster size, {args.minutes:g} min of '{args.scenario}' replayed in 1 s "
        "batches (one core)",
        "samples",
        [
            (
                f"{gpus:,} GPUs",
                rec.gpu.num_rows,
                seconds,
                f"{seconds / seconds_of_replay * 1e3:.2f} ms per second",
            )
            for gpus, rec, seconds in runs
        ],
    )
    if len(runs) < 2:
        return
    (low, _, low_s), (high, _, high_s) = runs[0], runs[-1]
    per_gpu = (high_s - low_s) / seconds_of_replay / (high - low)
    print(
        f"\neach GPU (with its jobs' log lines) adds {per_gpu * 1e6:.2f} µs of CPU per second of "
        f"event time ({low:,} to {high:,} GPUs): at one sample per GPU a second, "
        f"{1 / per_gpu / 1e6:.2f} M samples/s even if every fixed cost were gone"
    )


def placed(recording: Recording) -> Pipeline:
    """A pipeline that has read the recording's scheduler rows (its jobs placed)."""
    pipeline = Pipeline.from_settings()
    pipeline.run([Batch("scheduler", recording.scheduler)])
    return pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--batch-lines", type=int, default=65_536)
    parser.add_argument("--naive-lines", type=int, default=200_000)
    parser.add_argument("--drain3-lines", type=int, default=50_000)
    parser.add_argument("--kind-lines", type=int, default=262_144)
    parser.add_argument("--kind-naive-lines", type=int, default=30_000)
    parser.add_argument("--naive-samples", type=int, default=500_000)
    parser.add_argument("--gpus", type=int, default=8192)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(gpus) for gpus in text.split(",")],
        default=[512, 2048],
        help="smaller clusters (GPUs, comma-separated) replayed to price a GPU-second",
    )
    parser.add_argument("--scenario", default="healthy_noisy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs per stage; the best is kept")
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"POLARS_MAX_THREADS={os.environ['POLARS_MAX_THREADS']}, CPU affinity "
        f"{sorted(os.sched_getaffinity(0))}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    corpus = read_logs(args.datasets)
    bench_logs(args, corpus)
    bench_line_kinds(args, corpus)
    bench_gpu(args)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
