"""Log lines per second through the signature matcher and the crash, gpu_fault and node_failure
detectors, on one core.

Synthetic job output: mostly training progress, NCCL INFO and warning lines, with a small
share of lines that match a signature (``--hits``, default 0.1 %). Batches of ``--batch``
lines, as replay and the live sources hand them over. Printed, each against a baseline run in
the same process (one ``str.contains`` of a single literal over the same lines, the least any
log consumer does):

1. the matcher (``SignatureParser.parse``: combined prefilter, then per-entry patterns and
   extraction on the candidates only);
2. the matcher plus the three detectors' handling of the logs and signatures batches.

    POLARS_MAX_THREADS=1 .venv/bin/python bench/evidence_detectors.py --lines 2000000
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import numpy as np
import polars as pl

from medic.detectors.crash import CrashDetector
from medic.detectors.gpu_fault import GpuFaultDetector
from medic.detectors.node_failure import NodeFailureDetector
from medic.ingest.base import Batch
from medic.parse.signatures import SignatureParser
from medic.timeutil import US, to_us

HEALTHY = [
    "[rank{r}]: iteration {i}/100000 | consumed samples: {s} | lm loss: 2.3 | grad norm: 0.4",
    "node-{n}:{p}:{p} [{g}] NCCL INFO Channel 03/0 : {r}[3] -> {r}[4] via P2P/IPC/read",
    "[rank{r}]:[W1218 20:27:21.426415540 socket.cpp:697] [c10d] The client socket has timed out",
    "Epoch 0:  42%|████▏     | {i}/15567 [2:41:33<3:10:48,  0.79it/s, train_loss=7.092]",
    "/usr/lib/python3.11/site-packages/torch/utils/data/dataloader.py:554: UserWarning: slow",
]
HITS = [
    "[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE) ran for 600060 ms",
    "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB.",
    "[rank{r}]: Traceback (most recent call last):",
]


def make_batches(lines: int, batch: int, hit_share: float, seed: int) -> list[Batch]:
    rng = np.random.default_rng(seed)
    start = to_us("2026-03-01T10:00:00Z")
    out = []
    for first in range(0, lines, batch):
        n = min(batch, lines - first)
        hit = rng.random(n) < hit_share
        templates = [
            (HITS[i % len(HITS)] if h else HEALTHY[i % len(HEALTHY)]) for i, h in enumerate(hit)
        ]
        ranks = rng.integers(0, 1024, n)
        messages = [
            t.format(r=r, i=first + i, s=(first + i) * 2048, n=r // 8, p=4000 + r, g=r % 8)
            for i, (t, r) in enumerate(zip(templates, ranks, strict=True))
        ]
        frame = pl.DataFrame(
            {
                "time": pl.Series(start + (first + np.arange(n)) * US // 50_000).cast(
                    pl.Datetime("us", "UTC")
                ),
                "job_id": ["4242"] * n,
                "node": [f"node-{r // 8:03d}" for r in ranks],
                "rank": pl.Series([None] * n, dtype=pl.Int32),
                "source": ["app"] * n,
                "message": messages,
            }
        )
        out.append(Batch("logs", frame.to_arrow()))
    return out


def rate(lines: int, run: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return lines / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=65_536)
    parser.add_argument("--hits", type=float, default=0.001, help="share of matching lines")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batches = make_batches(args.lines, args.batch, args.hits, seed=7)
    frames = [b.frame for b in batches]
    signatures = SignatureParser()

    def baseline() -> None:
        for frame in frames:
            frame.get_column("message").str.contains("loss", literal=True).sum()

    def matcher() -> None:
        for batch in batches:
            signatures.parse(batch)

    def detectors() -> None:
        crash, gpu, node = CrashDetector(), GpuFaultDetector(), NodeFailureDetector()
        for batch in batches:
            node.update(batch)
            derived = signatures.parse(batch)
            if derived is not None:
                for detector in (crash, gpu, node):
                    detector.update(derived)

    base = rate(args.lines, baseline, args.repeat)
    print(f"{args.lines} lines, batches of {args.batch}, {args.hits:.2%} matching, 1 thread")
    print(f"baseline (one literal scan)   {base / 1e6:8.2f} M lines/s")
    for name, run in (("signature matcher", matcher), ("matcher + 3 detectors", detectors)):
        lines_per_s = rate(args.lines, run, args.repeat)
        print(
            f"{name:29s} {lines_per_s / 1e6:8.2f} M lines/s   {base / lines_per_s:6.2f}x baseline"
        )


if __name__ == "__main__":
    main()
