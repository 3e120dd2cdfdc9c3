"""Detection without a framework's progress formats: the perturbation suite backtested with all
built-in formats, then, per simulated framework, with every built-in format that reads that
framework's lines left out (``[parsers.progress] frameworks_off``), so that only the learning
reader reads its jobs' steps; as ``bench/generalization.py`` leaves a framework out of the line
corpus, here at the level of what medic detects and acts on.

A framework the site runs and medic has no format for is the common case on a new cluster: its
hangs and stragglers must still be found, and its healthy pauses must still not be taken for
hangs. Per framework, on the recordings with a job of it: the figures of
``bench/announcements_off.py`` (confirmed detections, false ones, precision, recall, hang
latencies, suspects), with the formats on and off.

The formats left out are found from the data: the built-in formats that read a step or phase
line of the framework's jobs (the recording's ``meta.json`` names each job's framework), less
those that read every framework's jobs (the scheduler's own lines in a job's output are no
framework's format).

    .venv/bin/python bench/frameworks_off.py SUITE_DIR [--jobs 2] [--only megatron ...]
    .venv/bin/python bench/frameworks_off.py --seeds 1 --out /tmp/suite
    .venv/bin/python bench/frameworks_off.py --seeds 1 --first-seed 101 --out /tmp/held
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from bench.announcements_off import figures, suite_arguments, suite_paths  # noqa: E402
from medic.backtest import run_backtest  # noqa: E402
from medic.detectors.registry import build_detectors  # noqa: E402
from medic.ingest.base import Batch  # noqa: E402
from medic.parse.registry import build_parsers  # noqa: E402
from medic.recording import read_recording  # noqa: E402


def formats_reading(paths: Sequence[Path]) -> dict[str, dict[str, set[str]]]:
    """Per simulated framework: the recordings with a job of it, and the built-in formats'
    frameworks that read a line of those jobs."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"paths": set(), "formats": set()})
    for path in paths:
        recording = read_recording(path)
        jobs: dict[str, str] = recording.meta.get("jobs") or {}
        parsers = [p for p in build_parsers(build_detectors()) if p.output_stream == "progress"]
        logs = Batch("logs", recording.logs)
        for parser in parsers:
            parsed = parser.parse(logs)
            if parsed is None:
                continue
            read = (
                parsed.frame.filter(pl.col("framework") != "learned")
                .select("job_id", "framework")
                .unique()
            )
            for job_id, fmt in read.iter_rows():
                if job_id in jobs:
                    found[jobs[job_id]]["formats"].add(fmt)
        for framework in set(jobs.values()):
            found[framework]["paths"].add(str(path))
    everyones = set.intersection(*(seen["formats"] for seen in found.values())) if found else set()
    for seen in found.values():
        seen["formats"] -= everyones
    return dict(found)


def run(paths: list[Path], jobs: int, only: Sequence[str] = ()) -> dict[str, Any]:
    """Per framework: its recordings' figures with every format, and with its formats off."""
    out: dict[str, Any] = {}
    for framework, seen in sorted(formats_reading(paths).items()):
        if only and framework not in only:
            continue
        mine = sorted(Path(p) for p in seen["paths"])
        off = {"parsers": {"progress": {"frameworks_off": sorted(seen["formats"])}}}
        out[framework] = {
            "formats_off": sorted(seen["formats"]),
            "formats_on": figures(run_backtest(mine, {}, jobs=jobs)),
            "formats_off_run": figures(run_backtest(mine, off, jobs=jobs)),
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = suite_arguments(__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=(), help="simulated frameworks to run")
    args = parser.parse_args(argv)
    print(json.dumps(run(suite_paths(parser, args), args.jobs, args.only), indent=2))


if __name__ == "__main__":
    main()
