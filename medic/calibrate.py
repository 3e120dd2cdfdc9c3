"""What ``medic calibrate`` does: a calibration fitted on a labelled backtest's outcomes, its
held-out check and its provenance, written to the file ``[pipeline] calibration`` names.

The outcomes come from a backtest replayed here or read back from a ``medic backtest --out``
directory (``medic.backtest.read_backtest``); the fit and the check are
``medic.tuning.fit_calibration`` and ``held_out_check``. The held-out check fits on the
recordings whose names match none of the ``--holdout`` patterns and measures reliability on
those that match; the file's maps are then fitted on every recording, and both the check's
figures and what the fit saw (recordings, scenarios, seeds, date, commit) go into its
``[provenance]``.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from medic.backtest import BacktestReport
from medic.calibration import Calibration
from medic.recording import RecordingError
from medic.tuning import calibration_outcomes, fit_calibration, held_out_check


@dataclass(frozen=True)
class CalibrationRun:
    """The fitted calibration and, when a hold-out was asked for, its check's reliability."""

    calibration: Calibration
    check: pl.DataFrame | None


def require_labels(paths: Iterable[Path]) -> None:
    """Calibration learns from outcomes: every recording must carry its labels (a recording of
    live traffic without ``labels.parquet`` has none to learn from)."""
    for path in paths:
        if not (path / "labels.parquet").is_file():
            raise RecordingError(
                f"{path}: no labels.parquet: a calibration needs labelled recordings"
            )


def require_unique_names(paths: Iterable[Path]) -> None:
    """A backtest keeps a recording's detections under its name, and its outcomes are scored
    by the labels of the recording of that name: two recordings of one name (``deadlock-p1``
    in two suites) would score each one's detections by the other's labels."""
    seen: dict[str, Path] = {}
    for path in paths:
        first = seen.setdefault(path.name, path)
        if first.resolve() != path.resolve():
            raise RecordingError(
                f"{path}: named like {first}: a calibration needs each recording's name once"
            )


def held_out_names(paths: Sequence[Path], patterns: Sequence[str]) -> list[str]:
    """Names of the recordings matching any of the glob ``patterns``."""
    return [p.name for p in paths if any(fnmatch.fnmatchcase(p.name, g) for g in patterns)]


def calibrate_backtest(
    report: BacktestReport,
    paths: Sequence[Path],
    holdout: Sequence[str] = (),
    method: str = "logistic",
    source: str = "replayed",
) -> CalibrationRun:
    """Fit the calibration on every recording of ``report`` (the recordings at ``paths``);
    with ``holdout`` patterns, first check a fit on the others against the matching ones.
    ``source`` names where the detections came from (a folder's name, or ``replayed``), for
    the provenance. ValueError when the backtest has no detection, or a side of the hold-out
    split has none."""
    outcomes = calibration_outcomes(report)
    if outcomes.is_empty():
        raise ValueError("the backtest has no detections to fit a calibration on")
    check = None
    names = held_out_names(paths, holdout)
    if holdout:
        check = held_out_check(outcomes, names, method)
    provenance = {
        **what_was_fitted(paths, method, source),
        **({} if check is None else {"check": check_provenance(check, holdout, names, paths)}),
    }
    return CalibrationRun(fit_calibration(outcomes, method, provenance), check)


def what_was_fitted(paths: Sequence[Path], method: str, source: str) -> dict[str, Any]:
    """The provenance of a fit on the recordings at ``paths``: their suites (the names of their
    parent directories, never a machine's paths), count, generators, scenarios and seeds (from
    meta.json, where a generator recorded them), the method, the date, medic's version and the
    commit of its source tree."""
    metas = [_meta(path) for path in paths]
    found = {
        "fitted_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "medic_version": metadata.version("medic"),
        "commit": source_commit(),
        "method": method,
        "detections": source,
        "suites": sorted({path.resolve().parent.name for path in paths}),
        "recordings": len(paths),
        "generators": sorted({str(m["generator"]) for m in metas if "generator" in m}),
        "scenarios": sorted({str(m["scenario"]) for m in metas if "scenario" in m}),
        "seeds": sorted({m["seed"] for m in metas if isinstance(m.get("seed"), int)}),
    }
    return {key: value for key, value in found.items() if value not in (None, [])}


def _meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def source_commit() -> str | None:
    """The git commit of the tree medic runs from, when it is a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def check_provenance(
    check: pl.DataFrame, patterns: Sequence[str], names: Sequence[str], paths: Sequence[Path]
) -> dict[str, Any]:
    """The held-out check as the file records it: the split and, per kind, its figures."""
    kinds = {}
    for row in check.iter_rows(named=True):
        kind = row.pop("kind")
        kinds[kind] = {
            k: round(v, 4) if isinstance(v, float) else v
            for k, v in row.items()
            if v is not None  # no AUC where the held-out detections were all real
        }
    return {
        "held_out": list(patterns),
        "fitted_recordings": len(paths) - len(names),
        "held_out_recordings": len(names),
        "kinds": kinds,
    }
