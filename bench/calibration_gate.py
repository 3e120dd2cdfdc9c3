"""Where to put the rules' ``min_score``: held-out detections' precision and recall at bars.

Fits the calibration on the recordings whose names match none of ``--holdout`` (as ``medic
calibrate`` does), scores the held-out ones' detections of each backtest directory by it,
confirmed and suspect alike (each tier de-duplicated apart), and prints its reliability on
them (Brier score, calibration error, ROC AUC of real against false detections) over both
tiers and over the confirmed ones, then, per directory, tier, kind and bar, the detections
kept, how many of them were real, the precision, and the share of the real ones kept. A bar
is worth having when it bars the near misses and keeps the default replay's real confirmed
detections. With ``--compare``, another calibration file (the one shipped before) is measured
on the same held-out detections; ``--without`` fits and measures as if the features named had
not been read (the figures before they were added).

    python bench/calibration_gate.py SUITE --detections results/ --detections near/ \\
        --holdout '*-p7' --holdout '*-p8' [--bars 0.5 0.7 0.8 0.9] \\
        [--without novel unprecedented off_rhythm]
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
from medic.calibration import Calibration, read_calibration  # noqa: E402
from medic.evidence_features import FEATURES  # noqa: E402
from medic.recording import find_recordings  # noqa: E402
from medic.tuning import (  # noqa: E402
    calibration_outcomes,
    fit_calibration,
    outcome_features,
    reliability,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path, nargs="+")
    parser.add_argument("--detections", type=Path, action="append", required=True)
    parser.add_argument("--holdout", action="append", required=True)
    parser.add_argument("--bars", type=float, nargs="+", default=[0.5, 0.7, 0.8, 0.9, 0.95])
    parser.add_argument("--without", nargs="+", default=[], choices=FEATURES[1:])
    parser.add_argument(
        "--compare", type=Path, help="a calibration file to measure on the held-out detections too"
    )
    args = parser.parse_args()
    paths = find_recordings(args.suite)
    outcomes = {}
    for out in args.detections:
        present = [p for p in paths if (out / p.name / "detections.parquet").is_file()]
        found = calibration_outcomes(BacktestReport(read_backtest(present, out).results))
        outcomes[out.name] = found.with_columns(pl.lit(0.0).alias(n) for n in args.without)
    every = pl.concat(list(outcomes.values()))
    held = held_out(every, args.holdout)
    calibration = fit_calibration(every.filter(~held))
    checked = every.filter(held)
    print(f"fitted on {every.filter(~held).height} detections", end="")
    print(f" ({int(every.filter(~held)['real'].sum())} real)", end="")
    print(f", without {', '.join(args.without)}" if args.without else "")
    with pl.Config(tbl_rows=20, tbl_cols=12, tbl_width_chars=160, float_precision=4):
        for title, part in (("both tiers", checked), ("confirmed", confirmed(checked))):
            print(f"measured on the held-out detections, {title}:")
            print(reliability(calibration, part))
            if args.compare is not None:
                print(f"{args.compare.name}, measured on the same:")
                print(reliability(read_calibration(args.compare), part))
    print("directory  tier  kind  bar  kept  real  precision  real kept")
    for name, frame in outcomes.items():
        part = frame.filter(held_out(frame, args.holdout))
        for tier, rows in (("all", part), ("confirmed", confirmed(part))):
            print_bars(name, tier, rows, calibration, args.bars)


def held_out(frame: pl.DataFrame, patterns: list[str]) -> pl.Series:
    return frame["recording"].map_elements(
        lambda n: any(fnmatch.fnmatchcase(n, g) for g in patterns), return_dtype=pl.Boolean
    )


def confirmed(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("tier") == "confirmed")


def print_bars(
    name: str, tier: str, rows: pl.DataFrame, calibration: Calibration, bars: list[float]
) -> None:
    score = calibration.probabilities(
        rows["kind"].to_numpy(), rows["raw"].to_numpy(), outcome_features(rows)
    )
    real = rows["real"].to_numpy()
    kinds = rows["kind"].to_numpy()
    for kind in [*sorted(set(kinds)), "all"]:
        part = np.ones(kinds.size, bool) if kind == "all" else kinds == kind
        for bar in bars:
            kept = part & (score >= bar)
            found = int((kept & real).sum())
            precision = f"{found / kept.sum():.3f}" if kept.any() else "-"
            recall = f"{found / (part & real).sum():.3f}" if (part & real).any() else "-"
            counts = f"{int(kept.sum())}  {found}  {precision}  {recall}"
            print(f"{name}  {tier}  {kind}  {bar:.2f}  {counts}")


if __name__ == "__main__":
    main()
