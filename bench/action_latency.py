"""Detection to verified action against the local Slurm (scripts/slurm-local start, as root).

Each round submits a job, waits until it runs, and hands the actions stage (enforce mode, Slurm
CLI executor) a gpu_fault detection blaming the job's node: the stage drains the node and
requeues the job away from it, each verified by re-reading Slurm. The time from handing over
the detection to both actions verified is the latency (target: p50 <= 2 s). The baseline, in
the same process, is the bare ``scontrol`` drain and requeue with no checks and no verification.

    python bench/action_latency.py [rounds]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from medic.actions.config import SlurmConfig, load_rules
from medic.actions.slurm_cli import SlurmCli
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.timeutil import US

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
RULES = {
    "mode": "enforce",
    "guards": {
        "max_drained_fraction": 1.0,
        "node_cooldown_s": 0,
        "incident_window_s": 0,
        "max_restarts_per_job": 1000,
        "max_drains_per_hour": 1000,
    },
}


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def running_job() -> tuple[str, str]:
    """Submit a job and wait until it runs; its id and node."""
    jobs = ROOT / ".slurm" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    job_id = run("sbatch", "--parsable", f"--chdir={jobs}", "--wrap", "sleep 600").strip()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state, _, node = run("squeue", "-h", "-j", job_id, "-o", "%T|%N").strip().partition("|")
        if state == "RUNNING":
            return job_id, node
        time.sleep(0.05)
    raise SystemExit(f"job {job_id} did not start")


def clean(job_id: str, node: str) -> None:
    subprocess.run(["scancel", job_id], check=False, timeout=30)
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"], check=False, timeout=30
    )
    while run("squeue", "-h", "-t", "R,CG", "-o", "%i").strip():
        time.sleep(0.05)


def medic_round(stage: ActionStage, i: int) -> float:
    job_id, node = running_job()
    detection = Detection(job_id, "gpu_fault", (node,), score=1.0, detector="bench")
    started = time.perf_counter()
    decisions = stage.respond(detection, i * 3600 * US)
    elapsed = time.perf_counter() - started
    statuses = [(d.action, d.status) for d in decisions]
    if statuses != [("drain", "done"), ("requeue", "done")]:
        raise SystemExit(f"round {i}: {[d.reason for d in decisions]}")
    clean(job_id, node)
    return elapsed


def bare_round() -> float:
    job_id, node = running_job()
    started = time.perf_counter()
    run("scontrol", "update", f"nodename={node}", "state=drain", "reason=bench")
    run("scontrol", "requeue", job_id)
    elapsed = time.perf_counter() - started
    clean(job_id, node)
    return elapsed


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    status = [str(ROOT / "scripts" / "slurm-local"), "status"]
    if subprocess.run(status, capture_output=True, check=False).returncode:
        raise SystemExit("no local Slurm: run scripts/slurm-local start (as root)")
    config = load_rules(RULES)
    stage = ActionStage(config, SlurmCli(SlurmConfig(restart_now=True)))
    medic = sorted(medic_round(stage, i) for i in range(rounds))
    bare = sorted(bare_round() for _ in range(rounds))
    p50, p90 = statistics.median(medic), medic[int(0.9 * (rounds - 1))]
    bare_p50 = statistics.median(bare)
    print(f"rounds: {rounds} (drain + requeue, each verified)")
    print(f"detection -> verified actions: p50 {p50:.3f} s, p90 {p90:.3f} s, max {medic[-1]:.3f} s")
    print(f"p50 / target {TARGET_S:g} s: {p50 / TARGET_S:.2f}")
    print(f"bare scontrol drain + requeue, no verification: p50 {bare_p50:.3f} s")
    print(f"p50 medic / bare: {p50 / bare_p50:.1f}x")


if __name__ == "__main__":
    main()
