"""Slurm's vocabulary in one place: the job and node states and the commands' runner that the
sources, detectors and actions read.

States are Slurm's base names, upper case (``squeue``'s ``%T``, the JSON ``job_state``); a
job state may carry a suffix (``CANCELLED by 0``) and a node state flags (``IDLE+DRAIN``),
which ``job_state`` and the node readers strip.

Every Slurm command runs through a ``CommandRunner`` (argv and timeout in, ``CommandResult``
out), so tests and sites can answer for Slurm; ``run_command`` is the real one. A missing
program and a timeout are results with their own exit status, never exceptions.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RUNNING = "RUNNING"
PENDING = "PENDING"
COMPLETED = "COMPLETED"
CANCELLED = "CANCELLED"
NODE_FAIL = "NODE_FAIL"
REQUEUED = "REQUEUED"
JOB_TERMINAL_STATES = frozenset(
    {
        COMPLETED,
        "FAILED",
        CANCELLED,
        "TIMEOUT",
        NODE_FAIL,
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        REQUEUED,
    }
)
"""States after which a job no longer runs (a REQUEUED job comes back as a new attempt)."""
JOB_ENDED_STATES = JOB_TERMINAL_STATES - {REQUEUED}
"""States of a job that has ended for good: ``scancel`` has nothing left to do."""
JOB_FAILURE_STATES = frozenset({"FAILED", NODE_FAIL, "OUT_OF_MEMORY", "BOOT_FAIL"})
"""Terminal states of a job that something went wrong in (the others are deliberate ends)."""
JOB_DELIBERATE_END_STATES = JOB_ENDED_STATES - JOB_FAILURE_STATES
"""States of a job that was ended on purpose (completed, cancelled, out of time, preempted):
``scontrol requeue`` would bring it back to life (Slurm requeues an ended job), so medic never
requeues one, even when its detection was made while the job still ran."""
JOB_CRASH_STATES = frozenset({"FAILED", "OUT_OF_MEMORY"})
"""Failure states that the job's own processes caused."""
JOB_NODE_FAILURE_STATES = frozenset({NODE_FAIL, "BOOT_FAIL"})
"""Failure states that a node caused (it failed under the job, or did not boot for it)."""
NODE_FAILED_STATES = ("NOT_RESPONDING", "DOWN", "FAIL", "FAILING")
"""Node states and flags that say the node failed (an admin's DRAIN does not)."""
NODE_DRAIN_FLAG = "DRAIN"
"""The flag of a node that is draining or drained (``IDLE+DRAIN``, ``state_flags``)."""


def job_state(state: str) -> str:
    """The base Slurm job state without flags (``CANCELLED by 0`` -> ``CANCELLED``)."""
    return state.split()[0].split("+")[0].upper() if state else state


TIMEOUT_RC = 124
"""Exit status of a command that ran past its timeout (as ``timeout(1)`` gives)."""
MISSING_PROGRAM_RC = 127
"""Exit status of a command whose program could not be run (as a shell gives)."""
TRANSIENT = re.compile(
    r"unable to contact slurm controller|socket timed out|zero bytes were transmitted"
    r"|connection refused|resource temporarily unavailable|timed out after"
    r"|backup controller in standby",
    re.IGNORECASE,
)
"""What Slurm's commands print when the controller could not be reached this time."""


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def message(self) -> str:
        """The first line the command printed on stderr (else stdout), for errors."""
        for text in (self.stderr, self.stdout):
            for line in text.splitlines():
                if line.strip():
                    return line.strip()
        return f"exit status {self.returncode}"


CommandRunner = Callable[[Sequence[str], float], CommandResult]


def run_command(argv: Sequence[str], timeout_s: float) -> CommandResult:
    """Run ``argv`` (no shell) with a timeout; a missing program or a timeout is a result."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return CommandResult(TIMEOUT_RC, "", f"{argv[0]}: timed out after {timeout_s:g} s")
    except OSError as exc:
        return CommandResult(MISSING_PROGRAM_RC, "", f"{argv[0]}: {exc.strerror or exc}")
    return CommandResult(proc.returncode, proc.stdout, proc.stderr)


def transient(result: CommandResult) -> bool:
    """The command failed for a reason that may pass (controller unreachable, timeout)."""
    return result.returncode != 0 and bool(TRANSIENT.search(result.stderr + result.stdout))
