"""Write the recordings ``medic calibrate`` fits the shipped calibration on and checks it with.

Every fault scenario, quiet or not, and every healthy scenario, rhythm traps included
(``medic.simulate.rhythm_traps``: unannounced evaluation and checkpoint pauses, sparse
printing, data-loader stalls; ``medic.simulate.traps``: throttling within spec, slow jobs,
benign Xids, normal endings), under the perturbation suite's realistic variation, one job
alone over ``--minutes`` per recording: short enough to replay seeds on a laptop's two cores.
The healthy recordings carry no label, so every detection on them is false. ``--only``
keeps the scenarios whose names match one of its patterns (the healthy ones and the hangs,
say, where the false detections are), ``--job-nodes`` fixes the job's size.

``--perturbed`` writes the perturbation suite's own recordings of the scenarios instead
(``medic simulate suite perturbed``: the job beside one or two others, 30 to 50 minutes, long
enough for a job's pauses to recur), the same recordings that suite holds on those seeds:
seeds 1 to 20 are the suite's own, seeds from 101 on were never tuned on (held out).

    python bench/calibration_suite.py --seeds 1-4 --out /tmp/calib-suite
    python bench/calibration_suite.py --seeds 5-8 --job-nodes 2 \\
        --only 'healthy*' '*hang' deadlock node_failure --out /tmp/calib-suite
    python bench/calibration_suite.py --perturbed --seeds 101-103 \\
        --only 'healthy*' '*hang' deadlock node_failure --out /tmp/held-out
"""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path
from typing import Any

from medic.recording import write_recording
from medic.simulate.catalog import simulate
from medic.simulate.scenarios import FAULTS, HEALTHY, QUIET_FAULTS
from medic.simulate.suites import Entry, perturbed_entries


def seeds_of(text: str) -> list[int]:
    """``3`` or ``1-4``."""
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-4", help="a seed or a range, e.g. 1-4")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--job-nodes", type=int, default=None)
    parser.add_argument("--only", nargs="+", default=["*"], help="scenario name patterns")
    parser.add_argument("--perturbed", action="store_true", help="the perturbation suite's")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    names = sorted(
        n
        for n in {*FAULTS, *QUIET_FAULTS, *HEALTHY}
        if any(fnmatch.fnmatchcase(n, p) for p in args.only)
    )
    for seed in seeds_of(args.seeds):
        for name in names:
            params = (
                perturbed_params(name, seed)
                if args.perturbed
                else {"jobs": 0, "duration_min": args.minutes, "job_nodes": args.job_nodes}
            )
            recording = simulate(name, seed, True, **params)
            print(write_recording(args.out / f"{name}-p{seed}", recording), flush=True)


def perturbed_params(name: str, seed: int) -> dict[str, Any]:
    """What the perturbation suite simulates scenario ``name`` on ``seed`` with."""
    entry: Entry = next(e for e in perturbed_entries(seed) if (e.scenario, e.seed) == (name, seed))
    return entry.params


if __name__ == "__main__":
    main()
