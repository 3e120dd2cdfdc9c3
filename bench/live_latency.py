"""Wall-clock latency of ``medic serve``: from a fault's line being written to the detection, and
to the verified Slurm action, per kind (p50/p90 over ``--injections`` faults of each kind).

Two setups, each a real ``medic serve`` process:

* ``files``: the file source alone, reading the jobs' output files (``jobs/<job>/<node>.out``)
  and the nodes' kernel logs (``kern/<node>.log``); no Slurm, no telemetry: jobs are known only
  from their own lines. Monitor mode: detection only.
* ``slurm``: the same files plus the real local Slurm (``[sources.slurm]`` at its default
  poll interval), enforce mode, real jobs (``sbatch``). The actions: a gpu_fault drains the node
  and requeues the job (the default rules); a crash and a node failure that blame no node are
  requeued (a route this bench adds, as an operator would). "Action" is the moment medic
  logs the requeue of the faulty job ``done``, i.e. after its executor re-read Slurm and saw the
  effect (that job's own requeue: an action on another job does not count).

Faults, one at a time, each in a fresh job: ``crash`` (a rank's sticky CUDA error,
pytorch/pytorch#49832), ``gpu_fault`` (the kernel's Xid 79 line on the job's node, NVIDIA's
Xid catalogue; format as leptonai/gpud#46 shows it) and ``node_failure`` (slurmstepd's
``*** JOB ... CANCELLED AT ... DUE TO NODE FAILURE ***``, SchedMD slurm
src/slurmd/slurmstepd/req.c). Detection: from the write of the fault's line to the wall clock medic
recorded with the job's detection (``detected_wall`` in the history, read afterwards); its
event-time latency (onset to detection) is printed too. Action: from the write until medic's
log says the job's requeue was verified, polled every 50 ms.

Baseline: PyTorch's NCCL watchdog, which ends a job stuck after a fault 600 s later naming no
node; the ratio column is that over medic's p50.

    MEDIC_SLURM=.slurm .venv/bin/python bench/live_latency.py
    .venv/bin/python bench/live_latency.py --setups files --injections 20
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

KINDS = ("crash", "gpu_fault", "node_failure")
TARGET_DETECT_S = 5.0
TARGET_ACT_S = 7.0
WATCHDOG_S = 600.0
"""PyTorch's default NCCL process-group timeout."""
WARMUP_S = 3.0
"""Progress lines a job writes before its fault (so its placement is known from its lines)."""
STEP_EVERY_S = 0.5
POLL_S = 0.05
TIMEOUT_S = 60.0
ENDED = frozenset(
    {"CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
)
"""Slurm job states a job does not leave (a requeue may race a cancel: it is cancelled again)."""
USER = "nobody"
"""The user the slurm setup's jobs run as (the routes act on this user's jobs only)."""
FILES_JOB_BASE = 7_700_000
"""Job ids of the files setup (no Slurm there), far from the local Slurm's."""

STEP = "[rank{rank}]: iteration {step} | consumed samples: {samples} | lm loss: 2.341E+00"
"""Megatron-LM's training log line (megatron/training/training.py, training_log)."""
CUDA_ERROR = "[rank{rank}]: RuntimeError: CUDA error: unspecified launch failure"
XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, GPU has fallen off the bus."
NODE_FAILURE = (
    "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT {at} DUE TO NODE FAILURE, "
    "SEE SLURMCTLD LOG FOR DETAILS ***"
)


@dataclass
class Job:
    job_id: str
    node: str
    output: Path
    step: int = 0


class Writer:
    """Appends a progress line to every active job's output every ``STEP_EVERY_S``."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(STEP_EVERY_S):
            with self.lock:
                for job in self.jobs.values():
                    job.step += 1
                    line = STEP.format(rank=0, step=job.step, samples=job.step * 512)
                    append(job.output, line)

    def start(self, job: Job) -> None:
        with self.lock:
            self.jobs[job.job_id] = job

    def stop(self, job: Job) -> None:
        with self.lock:
            self.jobs.pop(job.job_id, None)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()


def append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write(line + "\n")


class Served:
    """A ``medic serve`` process (``medic serve --config``) and its log, read as it grows."""

    def __init__(self, config: Path, log: Path) -> None:
        argv = [sys.executable, "-m", "medic", "serve", "--config", str(config)]
        with log.open("a") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        listening(log, self.proc)
        self.log = log
        self.log_read = 0
        self.log_text = ""

    def logged(self, text: str) -> float:
        """1 once medic's log holds ``text``, else 0."""
        with self.log.open() as out:
            out.seek(self.log_read)
            self.log_text += out.read()
            self.log_read = out.tell()
        return 1.0 if text in self.log_text else 0.0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def listening(log: Path, proc: subprocess.Popen[bytes]) -> int:
    """The port ``medic serve`` reports listening on in its log, once it does."""
    deadline = time.monotonic() + TIMEOUT_S
    while not (found := re.search(r"on 127\.0\.0\.1:(\d+)", log.read_text())):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"medic serve did not start: see {log}")
        time.sleep(0.1)
    return int(found.group(1))


def wait_above(read: Callable[[], float], before: float, since: float) -> float | None:
    """Seconds from ``since`` until ``read()`` exceeds ``before`` (None: not within the timeout)."""
    while time.monotonic() - since < TIMEOUT_S:
        if read() > before:
            return time.monotonic() - since
        time.sleep(POLL_S)
    return None


@dataclass
class Results:
    detect: dict[str, list[float]] = field(default_factory=dict)
    """Per kind: wall seconds from the fault's line written to the detection."""
    act: dict[str, list[float]] = field(default_factory=dict)
    """Per kind: wall seconds from the fault's line written to the verified action."""
    event: dict[str, list[float]] = field(default_factory=dict)
    """Per kind: event-time seconds from the onset to the detection (what a backtest sees)."""
    missed: dict[str, int] = field(default_factory=dict)
    unacted: dict[str, int] = field(default_factory=dict)
    """Per kind: faults detected whose job medic did not requeue within the timeout."""


class Setup:
    """One ``medic serve`` under test: its config, its jobs and its fault injections."""

    name = ""
    acts = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.jobs_dir = root / "jobs"
        self.kern_dir = root / "kern"
        self.db = root / "history.duckdb"

    def config(self) -> str:
        return f"""
[service]
listen = "127.0.0.1:0"
state_dir = "{self.root / "state"}"

[history]
path = "{self.db}"

[sources.files]
paths = ["{self.jobs_dir}/%j/%N.out", "{self.kern_dir}/%N.log"]
"""

    def new_job(self, index: int) -> Job | None:
        """A job started for injection ``index`` (None: it did not start; try another)."""
        raise NotImplementedError

    def alive(self, job: Job) -> bool:
        """Whether the job still runs (another user of a shared cluster may have ended it)."""
        return True

    def end_job(self, job: Job) -> None:
        """Clean up after the fault (nothing to do without Slurm)."""

    def close(self) -> None:
        """Clean up after the run."""


class FilesSetup(Setup):
    name = "files"

    def config(self) -> str:
        return super().config() + '\n[rules]\nmode = "monitor"\n'

    def new_job(self, index: int) -> Job:
        job_id = str(FILES_JOB_BASE + index)
        node = f"n{index % 4 + 1}"
        return Job(job_id, node, self.jobs_dir / job_id / f"{node}.out")


class SlurmSetup(Setup):
    """Real jobs on the shared local Slurm, submitted as the user ``nobody``: the routes act on
    that user's jobs only, so medic leaves the other users' jobs of the cluster alone."""

    name = "slurm"
    acts = True

    def config(self) -> str:
        return (
            super().config()
            + f"""
[sources.slurm]

[rules]
mode = "enforce"

[rules.guards]
node_cooldown_s = 0
max_drained_nodes = 4
max_drains_per_hour = 100000
max_restarts_per_job = 100

[rules.slurm]
restart_now = true

[[rules.routes]]
name = "hardware-fault"
kinds = ["gpu_fault", "node_failure"]
culprits = true
users = ["{USER}"]
actions = ["drain", "requeue"]

[[rules.routes]]
name = "unblamed-crash-or-node-failure"
kinds = ["crash", "node_failure"]
culprits = false
users = ["{USER}"]
actions = ["requeue"]
"""
        )

    def new_job(self, index: int) -> Job | None:
        argv = ["sbatch", "--parsable", "--requeue", "-N1", "--output=/dev/null", "--chdir=/tmp"]
        out = run("runuser", "-u", USER, "--", *argv, "--wrap", "sleep 900")
        job_id = out.strip().split(";")[0]
        fields = wait_job(job_id, lambda state: state not in ("PENDING", "CONFIGURING"))
        if fields.get("JobState") != "RUNNING":
            return None
        node = fields["BatchHost"]
        return Job(job_id, node, self.jobs_dir / job_id / f"{node}.out")

    def alive(self, job: Job) -> bool:
        return show("job", job.job_id).get("JobState") == "RUNNING"

    def end_job(self, job: Job) -> None:
        """Cancel the job (again if a requeue raced the cancel) and resume medic's drain."""
        wait_job(job.job_id, lambda state: state in ENDED, cancel=True)
        node = show("node", job.node)
        if "DRAIN" in node.get("State", "") and node.get("Reason", "").startswith("medic:"):
            subprocess.run(  # someone else may resume it first on a shared cluster
                ["scontrol", "update", f"nodename={job.node}", "state=resume"],
                capture_output=True,
                check=False,
            )


def wait_job(job_id: str, ok: Callable[[str], bool], cancel: bool = False) -> dict[str, str]:
    deadline = time.monotonic() + TIMEOUT_S
    while not ok((fields := show("job", job_id)).get("JobState", "")):
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id}: still {fields.get('JobState')}")
        if cancel:
            run("scancel", job_id)
        time.sleep(0.2)
    return fields


def run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout


def show(what: str, name: str) -> dict[str, str]:
    text = run("scontrol", "-o", "show", what, name)
    return dict(re.findall(r"(\w+)=(\S*)", text))


def inject(setup: Setup, kind: str, job: Job) -> None:
    """Write the fault's line where it would appear."""
    if kind == "crash":
        append(job.output, CUDA_ERROR.format(rank=0))
    elif kind == "gpu_fault":
        append(setup.kern_dir / f"{job.node}.log", XID_79.format(pid=4000 + job.step))
    else:
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        append(job.output, NODE_FAILURE.format(job=job.job_id, node=job.node, at=at))


@dataclass(frozen=True)
class Injection:
    job_id: str
    kind: str
    written_us: int
    """Wall clock (µs since the epoch) when the fault's line was written and flushed."""
    act_s: float | None
    """Seconds from the write until medic logged the job's verified requeue (slurm setup;
    None: none within the timeout, or a setup without actions)."""
    acts: bool
    """Whether the setup acts (a missing action is then a miss)."""


def measure(setup: Setup, kinds: list[str], injections: int) -> Results:
    done: list[Injection] = []
    config = setup.root / "medic.toml"
    config.write_text(setup.config())
    served = Served(config, setup.root / "serve.log")
    writer = Writer()

    try:
        index = 0
        while len(done) < injections * len(kinds):
            kind = kinds[len(done) % len(kinds)]
            job = setup.new_job(index)
            index += 1
            if job is None:
                continue
            writer.start(job)
            time.sleep(WARMUP_S)
            writer.stop(job)
            if not setup.alive(job):
                setup.end_job(job)
                continue
            inject(setup, kind, job)
            written_us, since = time.time_ns() // 1000, time.monotonic()
            detected = f"detection kind={kind} job={job.job_id} "
            wait_above(functools.partial(served.logged, detected), 0.0, since)
            # the stage logs each action that ran with the state it then saw in Slurm
            requeued = f"medic.actions.stage: requeue job {job.job_id}: job {job.job_id} requeued"
            acted = functools.partial(served.logged, requeued)
            act_s = wait_above(acted, 0.0, since) if setup.acts else None
            done.append(Injection(job.job_id, kind, written_us, act_s, setup.acts))
            setup.end_job(job)
    finally:
        writer.close()
        served.stop()
    return results(setup.db, done)


def results(db: Path, injections: list[Injection]) -> Results:
    """Each injection's first detection of its kind for its job, read from the history: wall
    seconds from the write (``detected_wall``), and event seconds from the onset."""
    found = Results()
    with duckdb.connect(str(db), read_only=True) as con:
        for item in injections:
            row = con.execute(
                "SELECT epoch_us(detected_wall), seconds FROM v_time_to_detect "
                "WHERE job_id = ? AND kind = ? ORDER BY detected_at LIMIT 1",
                [item.job_id, item.kind],
            ).fetchone()
            if row is None:
                found.missed[item.kind] = found.missed.get(item.kind, 0) + 1
                continue
            found.detect.setdefault(item.kind, []).append((row[0] - item.written_us) / 1e6)
            found.event.setdefault(item.kind, []).append(row[1])
            if item.act_s is not None:
                found.act.setdefault(item.kind, []).append(item.act_s)
            elif item.acts:
                found.unacted[item.kind] = found.unacted.get(item.kind, 0) + 1
    return found


def quantiles(values: list[float]) -> tuple[float, float]:
    if len(values) == 1:
        return values[0], values[0]
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return statistics.median(values), cuts[8]


def report(setup: str, results: Results, kinds: list[str]) -> None:
    print(f"\n{setup}: seconds from the fault's line written, by the wall clock")
    print(
        f"{'kind':<13} {'n':>3} {'miss':>4} {'detect p50':>10} {'p90':>6} {'no act':>6} "
        f"{'act p50':>8} {'p90':>6} {'event-time p50':>14} {'watchdog / detect p50':>22}"
    )
    nan = float("nan")
    for kind in kinds:
        detect, act = results.detect.get(kind, []), results.act.get(kind, [])
        d50, d90 = quantiles(detect) if detect else (nan, nan)
        a50, a90 = quantiles(act) if act else (nan, nan)
        event = results.event.get(kind, [])
        e50 = statistics.median(event) if event else nan
        ratio = WATCHDOG_S / d50 if detect and d50 > 0 else nan
        print(
            f"{kind:<13} {len(detect):>3} {results.missed.get(kind, 0):>4} {d50:>10.2f} "
            f"{d90:>6.2f} {results.unacted.get(kind, 0):>6} {a50:>8.2f} {a90:>6.2f} "
            f"{e50:>14.2f} {ratio:>21.0f}x"
        )
    print(
        f"targets: detect p50 <= {TARGET_DETECT_S:g} s, verified action p50 <= {TARGET_ACT_S:g} s"
    )


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    if keep:
        yield Path(tempfile.mkdtemp(prefix="medic-live-"))
        return
    with tempfile.TemporaryDirectory(prefix="medic-live-") as tmp:
        yield Path(tmp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="files,slurm", help="files, slurm or both")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--injections", type=int, default=20, help="faults per kind")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"unknown kind {unknown[0]} (known: {', '.join(KINDS)})")
    setups: dict[str, Callable[[Path], Setup]] = {"files": FilesSetup, "slurm": SlurmSetup}
    for name in args.setups.split(","):
        if name not in setups:
            raise SystemExit(f"unknown setup {name} (known: files, slurm)")
        with workdir(args.keep) as root:
            results = measure(setups[name](root), kinds, args.injections)
            report(name, results, kinds)
            if args.keep:
                print(f"work directory: {root}")


if __name__ == "__main__":
    main()
