"""NVRx ``ft_launcher``: its cycle files, log lines and exit codes read, no requeue while it
restarts in place, and medic's verdicts written as its exclusion files.

The fixtures follow the formats of NVIDIA/nvidia-resiliency-ext with our own values:
``src/nvidia_resiliency_ext/fault_tolerance/cycle_info_writer.py`` (protobuf ``NVRxCycleInfo``
as JSON with its field names, indent 2, uint64 ``generation`` as a string),
``fault_tolerance/launcher.py`` (the restart and no-restart log lines, exit 93) and
``examples/fault_tolerance/deployment/slurm/drain_poller.sh`` (``task_<K>.drained``). The log
prefix is the one shown in NVIDIA-NeMo RL's ft-launcher guide.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from medic.actions.config import load_rules
from medic.actions.recorder import RecordingExecutor
from medic.actions.recovery import Recovery
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.frames import FEW_ROWS
from medic.nvrx import NvrxWatch, expand_hostlist, read_cycles, write_exclusions
from medic.testing.builders import T0, at, batch, log
from medic.timeutil import US

PREFIX = "[INFO] [ft_launcher@gpu-a017] [default] "
RULES: dict[str, Any] = {
    "mode": "enforce",
    "routes": [{"name": "crash", "kinds": ["crash"], "actions": ["requeue"]}],
    "nvrx": {"restart_window_s": 300},
}


def cycle_file(directory: Path, job: str, attempt: int, cycle: int, **fields: Any) -> Path:
    body = {
        "job_id": job,
        "attempt_index": attempt,
        "cycle_number": cycle,
        "cycle_start_time": "2026-03-01T10:00:05.250000Z",
        "cycle_end_time": "",
        "cycle_log_file": f"/lustre/runs/{job}/logs/train_cycle{cycle}.log",
        "active_nodes": "gpu-a[015-017,020]",
        "standby_nodes": "gpu-a021",
        "generation": "0",
        "active_ranks": "0-3",
        **fields,
    }
    path = directory / f"cycle_info.{job}.{attempt}.{cycle}"
    path.write_text(json.dumps(body, indent=2))
    return path


def test_hostlists_expand_with_their_padding() -> None:
    assert expand_hostlist("gpu-a[015-017,020],login1") == [
        "gpu-a015",
        "gpu-a016",
        "gpu-a017",
        "gpu-a020",
        "login1",
    ]
    assert expand_hostlist("") == []


def test_cycle_files_are_read_and_links_and_junk_are_skipped(tmp_path: Path) -> None:
    cycle_file(tmp_path, "4242", 0, 0, cycle_end_time="2026-03-01T10:20:00Z", generation="1")
    cycle_file(tmp_path, "4242", 0, 1, cycle_start_time="2026-03-01T10:21:30.500000Z")
    (tmp_path / "cycle_info.4242.current").symlink_to("cycle_info.4242.0.1")
    (tmp_path / "cycle_info.4242.0.2").write_text("{not json")
    (tmp_path / "cycle_info.4242.0.1.tmp").write_text("{}")
    cycles, bad = read_cycles(tmp_path)
    assert bad == 1
    assert [(c.job_id, c.attempt, c.cycle) for c in cycles] == [("4242", 0, 0), ("4242", 0, 1)]
    first, second = cycles
    assert first.active == ("gpu-a015", "gpu-a016", "gpu-a017", "gpu-a020")
    assert first.standby == ("gpu-a021",)
    assert first.end is not None and first.start is not None
    assert (first.end - first.start) / US == 20 * 60 - 5.25
    assert second.end is None and second.start == at(21 * 60 + 30.5)


def crash(job: str, t: float) -> Detection:
    return Detection(job, "crash", score=0.9, detector="crash", detected_at=at(t), onset=at(t - 1))


def decide(stage: ActionStage, detection: Detection) -> list[tuple[str, str, str | None]]:
    return [(d.action, d.status, d.guard) for d in stage.respond(detection, detection.detected_at)]


def test_no_requeue_while_nvrx_restarts_the_job_in_place() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    restart = PREFIX + "Worker group FAILED. 2/3 attempts left; will restart worker group"
    stage.nvrx.update(batch("logs", [log(10, restart, job_id="77")]))
    [held] = stage.respond(crash("77", 60), at(60))
    assert (held.action, held.status, held.guard) == ("requeue", "suppressed", "nvrx")
    assert "NVRx is restarting job 77 in place, 2 attempts left" in held.reason
    assert decide(stage, crash("77", 1000)) == [("requeue", "recorded", None)]


def test_an_nvrx_line_among_many_is_read() -> None:
    watch = NvrxWatch()
    restart = PREFIX + "Worker group FAILED. 1/3 attempts left; will restart worker group"
    chatter = [log(1 + i / 1000, f"step {i}", job_id="79") for i in range(FEW_ROWS)]
    watch.update(batch("logs", [*chatter, log(2, restart, job_id="79")]))
    job = watch.job("79")
    assert job is not None and job.attempts_left == 1


def test_no_requeue_after_nvrx_decided_not_to_restart() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    gave_up = (
        PREFIX + "Progress tracker detected no progress across restarts. "
        "No more restarts will be attempted."
    )
    stage.nvrx.update(batch("logs", [log(5, gave_up, job_id="78")]))
    assert decide(stage, crash("78", 2000)) == [("requeue", "suppressed", "nvrx")]


def test_exit_93_stops_medics_requeue_and_exit_1_does_not() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    for job, code in (("81", 93), ("82", 1)):
        restart = PREFIX + "Worker group FAILED. 0/3 attempts left; will restart worker group"
        stage.nvrx.update(batch("logs", [log(1, restart, job_id=job)]))
        end = {"time": at(400), "kind": "job", "job_id": job, "state": "FAILED", "exit_code": code}
        stage.nvrx.update(batch("scheduler", [end]))
    assert decide(stage, crash("81", 410)) == [("requeue", "suppressed", "nvrx")]
    assert decide(stage, crash("82", 410)) == [("requeue", "recorded", None)]


def test_a_new_cycle_file_is_an_in_place_restart(tmp_path: Path) -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    cycle_file(tmp_path, "79", 0, 0)
    cycle_file(tmp_path, "79", 0, 1, cycle_start_time="2026-03-01T10:05:00Z")
    stage.nvrx.read_cycle_files(tmp_path)
    assert decide(stage, crash("79", 5 * 60 + 30)) == [("requeue", "suppressed", "nvrx")]


def test_array_tasks_answer_to_the_cycle_files_nvrx_names_after_their_array(
    tmp_path: Path,
) -> None:
    """NVRx names cycle files after SLURM_ARRAY_JOB_ID: one directory for the whole array
    holds every task under the array's id; a directory per task (``<array>_<task>``, as
    docs/nvrx.md's job script makes) tells the tasks apart."""
    shared, own = tmp_path / "shared", tmp_path / "own"
    shared.mkdir()
    (own / "4260_1").mkdir(parents=True)
    (own / "4260_2").mkdir()
    cycle_file(shared, "4250", 0, 0)
    cycle_file(shared, "4250", 0, 1, cycle_start_time="2026-03-01T10:05:00Z")
    cycle_file(own / "4260_1", "4260", 0, 0)
    cycle_file(own / "4260_1", "4260", 0, 1, cycle_start_time="2026-03-01T10:05:00Z")
    cycle_file(own / "4260_2", "4260", 0, 0)
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    stage.nvrx.read_cycle_files(shared)
    stage.nvrx.read_cycle_files(own)
    assert decide(stage, crash("4250_1", 5 * 60 + 30)) == [("requeue", "suppressed", "nvrx")]
    assert decide(stage, crash("4260_1", 5 * 60 + 30)) == [("requeue", "suppressed", "nvrx")]
    assert decide(stage, crash("4260_2", 5 * 60 + 30)) == [("requeue", "recorded", None)]
    assert decide(stage, crash("4250_3", 1000)) == [("requeue", "recorded", None)]


def test_an_unhealthy_worker_group_restarting_in_place_stops_medics_requeue() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor())
    restart = PREFIX + "Worker group UNHEALTHY. 1/2 attempts left; will restart worker group"
    stage.nvrx.update(batch("logs", [log(10, restart, job_id="4270_0")]))
    assert decide(stage, crash("4270_0", 60)) == [("requeue", "suppressed", "nvrx")]


def test_exclusion_files_name_each_tasks_drained_nodes(tmp_path: Path) -> None:
    tasks = {"0": ["gpu-a015", "gpu-a016"], "1": ["gpu-a017", "gpu-a020"]}
    written = write_exclusions(tmp_path, tasks, ["gpu-a016", "gpu-b001"])
    assert (tmp_path / "task_0.drained").read_text() == "gpu-a016\n"
    assert (tmp_path / "task_1.drained").read_text() == ""
    assert len(written) == 2
    assert write_exclusions(tmp_path, tasks, ["gpu-a016"]) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task_0.drained", "task_1.drained"]


class DrainedExecutor(RecordingExecutor):
    def drained_nodes(self) -> dict[str, str] | None:
        return {"gpu-a016": "medic: gpu_fault job 4242_0 detection x: Xid 79", "gpu-a020": "ops"}


def test_the_service_writes_exclusions_for_running_array_tasks(tmp_path: Path) -> None:
    exclusions = tmp_path / "nvrx" / "{array_job_id}" / "drained"
    settings = {"rules": {**RULES, "nvrx": {"exclusion_dir": str(exclusions)}}}
    recovery = Recovery.from_settings(settings, None, tmp_path, T0)
    stage = ActionStage(recovery.config, DrainedExecutor(), recovery.notifiers)
    recovery.attach(stage)
    running = [
        {"time": at(0), "kind": "job", "job_id": f"4242_{k}", "state": "RUNNING", "nodes": nodes}
        for k, nodes in ((0, ["gpu-a015", "gpu-a016"]), (1, ["gpu-a017", "gpu-a020"]))
    ]
    stage.nvrx.update(batch("scheduler", running))
    recovery.tick(at(1), {})
    where = tmp_path / "nvrx" / "4242" / "drained"
    assert (where / "task_0.drained").read_text() == "gpu-a016\n"
    assert (
        where / "task_1.drained"
    ).read_text() == ""  # an operator's drain is not medic's verdict


def test_other_jobs_leave_no_state() -> None:
    watch = NvrxWatch()
    row = {"time": at(0), "kind": "job", "job_id": "500", "state": "RUNNING", "nodes": ["n1"]}
    watch.update(batch("scheduler", [row]))
    watch.update(batch("logs", [log(1, "iteration 5 | lm loss 2.1", job_id="500")]))
    assert watch.jobs == {}


def test_the_documented_job_script_gives_each_array_task_the_directory_medic_reads() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "nvrx.md").read_text()
    values = dict(re.findall(r"^(\w+)=(\S+)$", doc, re.MULTILINE))
    flag = re.search(r"--ft-cycle-info-dir=\$\{(\w+)\}", doc)
    configured = re.search(r'^cycle_info_dir = "([^"]+)"', doc, re.MULTILINE)
    assert flag is not None and configured is not None
    env = {"SLURM_ARRAY_JOB_ID": "4250", "SLURM_ARRAY_TASK_ID": "1"}
    directory = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], values[flag.group(1)])
    assert directory == f"{configured.group(1)}/4250_1"
