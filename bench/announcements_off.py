"""Precision without phase announcements: the perturbation suite backtested with every reader of
a phase announcement on, then off (``[parsers.progress] phase_announcements = false``: no line
saying a checkpoint or an evaluation starts, ends or counts its batches is read), as
``bench/generalization.py`` leaves a family of signatures out.

Per run, on the detections that act (the confirmed tier; scoring in ``medic.scoring``):
precision and false detections, recall, the p50 latency of hangs confirmed by positive evidence
(a stuck GPU, hardware or kernel evidence against a node, a watchdog line), and the latency of
hangs confirmed by silence alone (past the bound the job's own history sets, or with every GPU
waiting past the bound of its own such spells); suspects and
false suspects apart. And how well the shipped calibration's scores say which detections are
real, suspects included (``medic.tuning.reliability``): Brier score, expected calibration
error, ROC AUC of real against false detections (null without both).

    .venv/bin/python bench/announcements_off.py SUITE_DIR [--jobs 2]
    .venv/bin/python bench/announcements_off.py --seeds 3 --out /tmp/suite   # generate first
    .venv/bin/python bench/announcements_off.py --seeds 3 --first-seed 101 --out /tmp/held

``--first-seed`` generates seeds the detectors were never tuned on (held out: the suite's own
seeds start at 1).

``SUITE_DIR`` holds recordings (``medic simulate suite perturbed --seeds N --out DIR``).
``--read ON OFF`` reads both runs from ``medic backtest --out`` directories instead of
replaying (the second made with ``--config`` holding ``phase_announcements = false``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from medic.backtest import BacktestReport, read_backtest, run_backtest  # noqa: E402
from medic.calibration import default_calibration  # noqa: E402
from medic.recording import find_recordings, write_recording  # noqa: E402
from medic.simulate import simulate  # noqa: E402
from medic.simulate.suites import suite_entries  # noqa: E402
from medic.tuning import calibration_outcomes, reliability  # noqa: E402

OFF: Mapping[str, Any] = {"parsers": {"progress": {"phase_announcements": False}}}
SILENCE_ONLY = ("confirmed: silent past", "confirmed: every GPU waiting")
"""What the summary of a hang confirmed by silence alone says (``hang_policy.Tier.why``): past
the bound of the job's pauses, or with every GPU waiting past the bound of the job's own such
spells (silence and waiting GPUs, nothing against a node)."""


def figures(report: BacktestReport) -> dict[str, Any]:
    """The figures of one run (see the module docstring)."""
    total = report.overall
    evidence, silence = [], []
    for result in report.results:
        rows = result.detections.to_pylist()
        summaries = {
            (row["job_id"], int(row["detected_at"].timestamp() * 1e6)): row["summary"]
            for row in rows
        }
        for outcome in result.score.outcomes:
            if not outcome.detected or outcome.kind != "hang" or outcome.latency_s is None:
                continue
            summary = summaries.get((outcome.job_id, outcome.detected_at), "")
            (silence if any(s in summary for s in SILENCE_ONLY) else evidence).append(
                outcome.latency_s
            )
    return {
        "recordings": len(report.results),
        "labels": total.labels,
        "confirmed": total.detections,
        "false_confirmed": total.false_positives,
        "precision": _round(total.precision),
        "recall": _round(total.recall),
        "hang_p50_evidence_s": _percentile(evidence, 50),
        "hangs_by_evidence": len(evidence),
        "silence_only_p50_s": _percentile(silence, 50),
        "silence_only_max_s": _percentile(silence, 100),
        "hangs_by_silence": len(silence),
        "suspects": total.suspects,
        "false_suspects": total.false_suspects,
        **_reliability(report),
        "false": [
            f"{r.name}: {row['kind']} of job {row['job_id']}"
            for r in report.results
            for row in r.score.false_positive_rows
        ],
    }


def _reliability(report: BacktestReport) -> dict[str, Any]:
    """Brier score, calibration error and ROC AUC of the scores the run gave, both tiers."""
    outcomes = calibration_outcomes(report)
    if outcomes.is_empty():
        return {"brier": None, "ece": None, "auc": None}
    every = reliability(default_calibration(), outcomes).filter(pl.col("kind") == "all")
    row = every.row(0, named=True)
    return {name: _round(row[name]) for name in ("brier", "ece", "auc")}


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def run(paths: list[Path], jobs: int) -> dict[str, dict[str, Any]]:
    """Both runs' figures over the recordings at ``paths``."""
    return {
        "announcements_on": figures(run_backtest(paths, {}, jobs=jobs)),
        "announcements_off": figures(run_backtest(paths, OFF, jobs=jobs)),
    }


def generate(seeds: int, out: Path, first: int = 1) -> list[Path]:
    """The perturbation suite on ``seeds`` seeds from ``first`` on, written under ``out``."""
    paths = []
    entries = suite_entries("perturbed", first + seeds - 1)
    for entry in (e for e in entries if e.seed >= first):
        target = out / entry.name
        if not (target / "meta.json").exists():
            recording = simulate(entry.scenario, entry.seed, entry.perturbed, **entry.params)
            write_recording(target, recording)
        paths.append(target)
    return paths


def suite_arguments(description: str) -> argparse.ArgumentParser:
    """A bench's arguments naming its suite: a directory, or seeds to generate first."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("suite", nargs="?", type=Path, help="a directory of recordings")
    parser.add_argument("--seeds", type=int, help="generate the perturbation suite first")
    parser.add_argument("--out", type=Path, help="where --seeds writes it")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed --seeds makes")
    parser.add_argument("--jobs", type=int, default=2)
    return parser


def suite_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Path]:
    """The recordings ``suite_arguments`` named, generated first when it gave seeds."""
    if args.seeds:
        if args.out is None:
            parser.error("--seeds needs --out")
        return generate(args.seeds, args.out, args.first_seed)
    if args.suite is None:
        parser.error("give a SUITE_DIR or --seeds with --out")
    return find_recordings([args.suite])


def main(argv: Sequence[str] | None = None) -> None:
    parser = suite_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--read", nargs=2, type=Path, metavar=("ON", "OFF"), help="backtest --out directories"
    )
    args = parser.parse_args(argv)
    paths = suite_paths(parser, args)
    if args.read:
        on, off = (figures(read_backtest(paths, d)) for d in args.read)
        print(json.dumps({"announcements_on": on, "announcements_off": off}, indent=2))
        return
    print(json.dumps(run(paths, args.jobs), indent=2))


if __name__ == "__main__":
    main()
