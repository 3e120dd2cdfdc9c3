"""Golden digests of the detections the quality floor's backtests emit (``datasets/`` and its
perturbed set): a change meant to leave detection alone (a speed-up, a refactor) must leave
every recording's detections as they were, row for row and value for value.

A change that is meant to alter detections rewrites the digests, and its commit says why:

    PYTHONPATH=$PWD .venv/bin/python -m tests.detection_digests --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

import pyarrow as pa

from medic.backtest import BacktestReport

GOLDEN = Path(__file__).resolve().parent / "data" / "detection_digests.json"


def digest(table: pa.Table) -> str:
    """SHA-256 of a detections table: its schema and every row in emission order, each value
    exactly (floats by ``repr``, which round-trips), whatever the table's chunking."""
    text = json.dumps(
        {"schema": str(table.schema), "rows": table.to_pylist()},
        default=repr,
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def digests(reports: dict[str, BacktestReport]) -> dict[str, dict[str, str]]:
    """By set, then recording: the digest of its detections (a failed recording counts as
    ``failed``, so that it cannot pass unnoticed)."""
    out: dict[str, dict[str, str]] = {}
    for group, report in reports.items():
        found = {r.name: digest(r.detections) for r in report.results}
        found.update({f.path.name: "failed" for f in report.failures})
        out[group] = dict(sorted(found.items()))
    return out


def main() -> None:
    from tests.test_quality_floor import backtest_both

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="medic-digests-") as out:
        found = digests(backtest_both(Path(out)))
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
