"""Where to put the rules' ``min_score``: held-out detections' precision and recall at bars.

Fits the calibration on the recordings whose names match none of ``--holdout`` (as ``medic
calibrate`` does), scores the held-out ones' detections of each backtest directory by it,
and prints, per directory, kind and bar, the detections kept, how many of them were real,
the precision, and the share of the real ones kept (recall of true detections). A bar is
worth having when it bars the near misses and keeps the default replay's real detections.
With ``--compare``, another calibration file (the one shipped before) is measured on the
same held-out detections.

    python bench/calibration_gate.py SUITE --detections results/ --detections near/ \\
        --holdout '*-p4' [--bars 0.5 0.7 0.8 0.9]
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from medic.backtest import BacktestReport, read_backtest  # noqa: E402
from medic.calibration import read_calibration  # noqa: E402
from medic.recording import find_recordings  # noqa: E402
from medic.tuning import (  # noqa: E402
    calibration_outcomes,
    fit_calibration,
    outcome_features,
    reliability,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--detections", type=Path, action="append", required=True)
    parser.add_argument("--holdout", action="append", required=True)
    parser.add_argument("--bars", type=float, nargs="+", default=[0.5, 0.7, 0.8, 0.9, 0.95])
    parser.add_argument(
        "--compare", type=Path, help="a calibration file to measure on the held-out detections too"
    )
    args = parser.parse_args()
    paths = find_recordings([args.suite])
    outcomes = {}
    for out in args.detections:
        present = [p for p in paths if (out / p.name / "detections.parquet").is_file()]
        outcomes[out.name] = calibration_outcomes(
            BacktestReport(read_backtest(present, out).results)
        )
    every = pl.concat(list(outcomes.values()))
    held = every["recording"].map_elements(
        lambda n: any(fnmatch.fnmatchcase(n, g) for g in args.holdout), return_dtype=pl.Boolean
    )
    calibration = fit_calibration(every.filter(~held))
    with pl.Config(tbl_rows=20, tbl_cols=12, tbl_width_chars=160):
        print("fitted on the others, measured on the held-out detections:")
        print(reliability(calibration, every.filter(held)))
        if args.compare is not None:
            print(f"{args.compare.name}, measured on the same:")
            print(reliability(read_calibration(args.compare), every.filter(held)))
    print("directory  kind  bar  kept  real  precision  real kept")
    for name, frame in outcomes.items():
        checked = frame.filter(
            pl.col("recording").map_elements(
                lambda n: any(fnmatch.fnmatchcase(n, g) for g in args.holdout),
                return_dtype=pl.Boolean,
            )
        )
        score = calibration.probabilities(
            checked["kind"].to_numpy(), checked["raw"].to_numpy(), outcome_features(checked)
        )
        real = checked["real"].to_numpy()
        kinds = checked["kind"].to_numpy()
        for kind in [*sorted(set(kinds)), "all"]:
            part = np.ones(kinds.size, bool) if kind == "all" else kinds == kind
            for bar in args.bars:
                kept = part & (score >= bar)
                found = int((kept & real).sum())
                precision = f"{found / kept.sum():.3f}" if kept.any() else "-"
                recall = f"{found / (part & real).sum():.3f}" if (part & real).any() else "-"
                print(
                    f"{name}  {kind}  {bar:.2f}  {int(kept.sum())}  {found}  {precision}  {recall}"
                )


if __name__ == "__main__":
    main()
