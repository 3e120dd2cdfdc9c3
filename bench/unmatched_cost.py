"""What the second layer (``medic.parse.failure_lines``) costs the log parsers, as a ratio.

Every log line of the recordings under ``--datasets``, tiled to ``--lines`` lines and cut into
batches of ``--batch-lines``, goes through the signature parser and the progress parser batch
by batch, as the pipeline runs them (one prefix stripper shared; the parsers' regexes compete
for polars' per-thread regex cache as they do in the service). Once with the second layer on,
once with it off (``[parsers.signatures] unmatched = false``), alternating batch by batch in
one process for ``--rounds`` rounds; each side keeps per batch its fewest CPU seconds
(``time.process_time``, polars on one thread), summed over the batches. A shared machine's
speed drifts from second to second, so only the ratios mean anything: the layer's share of
the parsers' time, and of the signature parser's alone.

    .venv/bin/python bench/unmatched_cost.py [--lines 400000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from medic import schema  # noqa: E402
from medic.ingest.base import Batch  # noqa: E402
from medic.parse.prefixes import PrefixStripper  # noqa: E402
from medic.parse.progress import ProgressParser  # noqa: E402
from medic.parse.signatures import SignatureParser, SignaturesConfig  # noqa: E402
from medic.recording import find_recordings  # noqa: E402


def batches_of(datasets: Path, lines: int, batch_lines: int) -> list[Batch]:
    """The logs of every recording under ``datasets``, tiled to ``lines`` rows, in batches."""
    corpus = pa.concat_tables(
        schema.conform(pq.read_table(path / "logs.parquet"), schema.LOGS)
        for path in find_recordings([datasets])
    )
    table = pa.concat_tables([corpus] * -(-lines // corpus.num_rows)).slice(0, lines)
    return [Batch("logs", table.slice(lo, batch_lines)) for lo in range(0, lines, batch_lines)]


def parsers(unmatched: bool) -> tuple[SignatureParser, ProgressParser]:
    """Both log parsers sharing one prefix stripper, the second layer on or off."""
    prefixes = PrefixStripper()
    signatures = SignatureParser(SignaturesConfig(unmatched=unmatched), prefixes=prefixes)
    return signatures, ProgressParser(prefixes=prefixes)


def batch_seconds(
    signatures: SignatureParser, progress: ProgressParser, batch: Batch
) -> tuple[float, float]:
    """CPU seconds of both parsers on ``batch``, and of the signature parser's share."""
    started = time.process_time()
    signatures.parse(batch)
    between = time.process_time()
    progress.parse(batch)
    return time.process_time() - started, between - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    parser.add_argument("--lines", type=int, default=400_000)
    parser.add_argument("--batch-lines", type=int, default=65_536)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    batches = batches_of(args.datasets, args.lines, args.batch_lines)
    sides = {True: parsers(True), False: parsers(False)}
    best = {side: [(float("inf"), float("inf"))] * len(batches) for side in sides}
    for _ in range(args.rounds):
        for at, batch in enumerate(batches):
            for side, (signatures, progress) in sides.items():
                took = batch_seconds(signatures, progress, batch)
                best[side][at] = (min(best[side][at][0], took[0]), min(best[side][at][1], took[1]))
    (on, on_signatures), (off, off_signatures) = (
        tuple(sum(column) for column in zip(*best[side], strict=True)) for side in (True, False)
    )
    print(
        f"{args.lines:,} lines in batches of {args.batch_lines:,}, "
        f"each batch's best of {args.rounds} rounds\n"
        f"both parsers:     layer on / off = {on / off:.3f}\n"
        f"signature parser: layer on / off = {on_signatures / off_signatures:.3f}"
    )


if __name__ == "__main__":
    main()
