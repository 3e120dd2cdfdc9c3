"""``medic diagnose``: raw files through the one pipeline, evidence by file and line, the
actions the rules would take, text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.diagnose.lines import LogText
from medic.diagnose.run import diagnose
from medic.timeutil import to_us

WATCHDOG = (
    "[rank2]:[E1130 04:30:00.500000000 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, "
    "Timeout(ms)=600000) ran for 600250 milliseconds before timing out."
)
XID = (
    "[Mon Nov 30 04:10:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=881, "
    "GPU has fallen off the bus."
)


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_watchdog_timeout_is_a_hang_from_the_moment_the_collective_began() -> None:
    [finding] = diagnose([LogText("slurm-31.out", WATCHDOG)], year=2026)
    assert (finding.job_id, finding.kind, finding.culprits) == ("31", "hang", ())
    assert finding.onset == to_us("2026-11-30T04:20:00.250Z")
    assert [(e.file, e.line, e.signature) for e in finding.evidence] == [
        ("slurm-31.out", 1, "nccl_watchdog_timeout")
    ]
    assert finding.actions == ["requeue: would run (monitor mode: recorded, nothing touched)"]


STALL_WARNING = (
    "[2026-11-30 05:00:00.000000: W /tmp/build/horovod/common/stall_inspector.cc:107] One or "
    "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
    "and are waiting for remainder of ranks for more than 60 seconds. This may indicate "
    "that different ranks are trying to submit different tensors or that only subset of "
    "ranks is submitting tensors, which will cause deadlock.\n"
)


@pytest.mark.parametrize(
    ("listing", "ranks"),
    [
        # horovod/common/stall_inspector.cc: the warning, then "Missing ranks:" and one line
        # per rank the others wait on ("!" once it is past the shutdown time)
        (
            "Missing ranks:\n5: [allreduce.head.weight, allreduce.head.bias]\n"
            "9!: [allreduce.head.weight]\n",
            (5, 9),
        ),
        # the same under mpirun, which prefixes each line with its [job,rank]<stream>; a newer
        # release names them stalled
        (
            "[1,0]<stderr>:Stalled ranks:\n[1,0]<stderr>:6: [allreduce.head.weight]\n"
            "[1,0]<stderr>:11: [allreduce.head.bias]\n",
            (6, 11),
        ),
        # its older wording, which no entry reads (our tensor names): the op, then the ranks
        # it misses, named at fault by a line of the second layer
        (
            "zorkBroadcast_head_w_0 [missing ranks: 3]\n"
            "zorkBroadcast_head_b_0 [missing ranks: 3, 7]\n",
            (3, 7),
        ),
    ],
)
def test_the_ranks_a_stall_report_names_missing_are_the_hang_s_ranks(
    listing: str, ranks: tuple[int, ...]
) -> None:
    [finding] = diagnose([LogText("slurm-44.out", STALL_WARNING + listing)], year=2026)
    assert (finding.kind, finding.culprits, finding.ranks) == ("hang", (), ranks)
    assert f"lagging rank(s) {', '.join(map(str, ranks))}" in finding.summary
    assert finding.onset == to_us("2026-11-30T04:59:00Z")


def test_a_node_log_alone_is_its_nodes_pseudo_job_and_blames_the_node() -> None:
    [finding] = diagnose([LogText("gpu-c9/dmesg.txt", XID)])
    assert (finding.job_id, finding.kind, finding.culprits) == (
        "node:gpu-c9",
        "gpu_fault",
        ("gpu-c9",),
    )
    assert [a.split(":")[0] for a in finding.actions] == ["drain gpu-c9", "requeue"]


def test_a_job_and_its_nodes_kernel_log_make_one_job_incidents(tmp_path: Path) -> None:
    write(tmp_path, {"slurm-31.out": WATCHDOG + "\n", "gpu-c9/dmesg.txt": XID + "\n"})
    runner = CliRunner()
    text = runner.invoke(main, ["diagnose", str(tmp_path)])
    assert text.exit_code == 0, text.output
    assert "incident 1: gpu_fault in job 31, blames gpu-c9" in text.output
    assert f"{tmp_path}/gpu-c9/dmesg.txt:1 [xid]" in text.output
    assert "incident 2: hang in job 31, blames no node" in text.output
    as_json = runner.invoke(main, ["diagnose", "--json", str(tmp_path)])
    data = json.loads(as_json.output)
    assert [(d["kind"], d["culprits"], d["evidence"][0]["line"]) for d in data] == [
        ("gpu_fault", ["gpu-c9"], 1),
        ("hang", [], 1),
    ]


def test_the_config_rules_decide_the_actions(tmp_path: Path) -> None:
    write(tmp_path, {"gpu-c9/dmesg.txt": XID + "\n"})
    config = tmp_path / "medic.toml"
    config.write_text(
        '[rules]\nmode = "monitor"\n[[rules.routes]]\nname = "tell"\nkinds = ["gpu_fault"]\n'
        'notify = ["ops"]\n[[rules.receivers]]\nname = "ops"\nurl = "http://127.0.0.1:9/hook"\n'
    )
    result = CliRunner().invoke(
        main, ["diagnose", "--config", str(config), str(tmp_path / "gpu-c9")]
    )
    assert result.exit_code == 0, result.output
    assert "drain" not in result.output
    assert "notify" in result.output


def test_nothing_found_and_bad_paths() -> None:
    runner = CliRunner()
    assert diagnose([LogText("x.log", "step 1 loss 2.0\nstep 2 loss 1.9\n")]) == []
    assert diagnose([]) == []
    missing = runner.invoke(main, ["diagnose", "/nonexistent/medic"])
    assert missing.exit_code == 2
    assert "medic: error: /nonexistent/medic: no such file or directory" in missing.output


def test_a_crash_is_headed_by_the_line_that_says_what_failed() -> None:
    text = (
        "2026-11-30 04:00:00,000 step 10 loss 2.1\n"
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/app/train.py", line 61, in main\n'
        "[rank3]:     batch = next(loader)\n"
        "[rank3]: KeyError: 'input_ids'\n"
        "srun: error: n2: task 3: Exited with exit code 1\n"
    )
    (found,) = diagnose([LogText("slurm-4301.out", text)])
    assert found.kind == "crash"
    assert found.summary == (
        "Job 4301 crashed: \"KeyError: 'input_ids'\" at rank 3; 2 more signs followed; "
        "reported failed: rank 3 on n2 (exit code 1)"
    )
    assert found.ranks == (3,)


def test_diagnose_applies_the_nvrx_guard_serve_applies(tmp_path: Path) -> None:
    launcher = "2026-11-30 04:0{}:00,000 [INFO] [ft_launcher@n1] [default] "
    write(
        tmp_path,
        {
            "logs/slurm-4280.out": launcher.format(0)
            + "Worker group FAILED. 1/3 attempts left; will restart worker group\n"
            + launcher.format(1)
            + "Progress tracker detected no progress across restarts. "
            "No more restarts will be attempted.\n"
            "2026-11-30 04:01:01,000 [rank0]: RuntimeError: loss is NaN\n"
            "srun: error: n1: task 0: Exited with exit code 93\n",
            "medic.toml": "[rules]\nmode = 'enforce'\n[[rules.routes]]\nname = 'crashes'\n"
            "kinds = ['crash']\nactions = ['requeue']\n",
        },
    )
    result = CliRunner().invoke(
        main,
        [
            "diagnose",
            "--json",
            "--config",
            str(tmp_path / "medic.toml"),
            str(tmp_path / "logs"),
        ],
    )
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.stdout)
    assert found["actions"] == ["requeue: suppressed by guard nvrx"]


TRACEBACK = """\
[rank3]: Traceback (most recent call last):
[rank3]:   File "/opt/app/train.py", line 210, in step
[rank3]:     loss.backward()
[rank3]: ValueError: expected a non-empty batch of token ids
"""


def kind_and_tier(name: str, text: str) -> tuple[str, str]:
    """The kind and the first detection's tier of the one finding ``text`` makes."""
    [finding] = diagnose([LogText(name, text)], year=2026)
    return finding.kind, finding.detections[0].tier


def test_a_text_that_ends_at_an_error_is_an_unconfirmed_crash() -> None:
    [finding] = diagnose([LogText("slurm-41.out", TRACEBACK)], year=2026)
    [detection] = finding.detections
    assert (finding.kind, finding.ranks, detection.tier) == ("crash", (3,), "suspect")
    assert detection.evidence["fate"] == "unknown"
    assert "unconfirmed: the text ends before the job's fate" in finding.summary
    assert not any("would run" in action for action in finding.actions)


def test_a_text_ending_after_a_peers_retries_waits_for_the_fabric_verdict() -> None:
    """A flushed completion (status 5) after a peer's retries ran out (status 12) is the
    failure's consequence: the text's first detection is the node failure, as in a stream."""
    peer = "NCCL WARN NET/IB : Got completion from peer 10.9.0.4<5001> with status={} opcode=0"
    text = "".join(
        f"gpu-b2:71:90 [1] {peer.format(status)} len=0 vendor err {err} (Recv)\n"
        for status, err in ((12, 129), (5, 249))
    )
    [finding] = diagnose([LogText("slurm-44.out", text)], year=2026)
    assert [d.kind for d in finding.detections] == ["node_failure"]


def test_an_error_the_job_went_on_from_is_no_crash() -> None:
    retried = TRACEBACK + "[rank3]: WARNING: skipping the batch and retrying\n"
    stepped = TRACEBACK + "".join(
        f"[rank0]:  iteration {i:>8}/ 100000 | consumed samples: {i * 256:>12} | elapsed time per"
        f" iteration (ms): 1012.{i} | learning rate: 1.0E-04 | lm loss: 2.1E+00 |\n"
        for i in range(11, 14)
    )
    assert diagnose([LogText("slurm-42.out", retried)], year=2026) == []
    assert diagnose([LogText("slurm-43.out", stepped)], year=2026) == []


def test_errors_after_the_job_s_last_sign_of_life_end_its_text() -> None:
    retried_then_failed = TRACEBACK + "[rank3]: WARNING: retrying the batch\n" + TRACEBACK
    assert kind_and_tier("slurm-47.out", retried_then_failed) == ("crash", "suspect")
    # Python reports an exception raised in a finaliser at exit and ignores it
    ignored = (
        "Exception ignored in: <function _Loader.__del__ at 0x7f1c2c0e2f80>\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/app/data.py", line 40, in __del__\n'
        "    self._shutdown_workers()\n"
        "AttributeError: '_Loader' object has no attribute '_workers'\n"
    )
    assert diagnose([LogText("slurm-48.out", ignored)], year=2026) == []
    tagged = "".join(f"[rank2]: {line}\n" for line in ignored.splitlines())
    assert diagnose([LogText("slurm-51.out", tagged)], year=2026) == []
    assert diagnose([LogText("slurm-49.out", ignored + TRACEBACK)], year=2026) != []
    # ... but not the finalisers failing as the interpreter shuts down after an uncaught one
    finalised = TRACEBACK + "".join(
        f"Exception ignored in: <built-in function delete_{name}>\n"
        f"Exception: Error deleting array {name}Params: zork error (700)\n"
        for name in ("Context", "Integrator")
    )
    assert kind_and_tier("slurm-55.out", finalised) == ("crash", "suspect")
    # a step printed on the error's own line (a bar left without its newline) came before it
    glued = "  1%|▏    | 24/1752 [01:08<1:22:56,  2.88s/it]frobnicator: ERROR: widget failed\n"
    assert kind_and_tier("slurm-52.out", glued) == ("crash", "suspect")
    # the scheduler ending the step is no sign of the job's life
    stopped = (
        "srun: error: n1: task 3: Bus error\n"
        "slurmstepd: error: *** STEP 50.0 ON n1 CANCELLED AT 2026-11-30T04:10:00 ***\n"
    )
    [finding] = diagnose([LogText("slurm-50.out", stopped)], year=2026)
    assert (finding.kind, finding.ranks) == ("crash", (3,))
    # a bar drawn at 0, before its first step (no rate yet), is no step the job went on to
    begun = TRACEBACK + "  0%|          | 0/26001 [00:00<?, ?it/s]\n"
    assert kind_and_tier("slurm-53.out", begun) == ("crash", "suspect")
    after = begun + "  0%|          | 1/26001 [00:02<14:26:40,  2.00s/it]\n"
    assert diagnose([LogText("slurm-54.out", after)], year=2026) == []
    # a wrapper relaying the program's lines at its own INFO level (our values): the traceback
    # after the error is its report, no sign of life
    relayed = "".join(
        f"I0922 16:49:0{i}.8 1400 run_zork.py:193] {line}\n"
        for i, line in enumerate(
            [
                "2026-09-22 16:49:00.800000: E zork/client.cc:2040] Execution of replica 0"
                " failed: Resource exhausted: Out of memory while allocating 48803099744 bytes.",
                "Traceback (most recent call last):",
                'File "/app/zork/run_zork.py", line 302, in <module>',
                "app.run(main)",
            ]
        )
    )
    assert kind_and_tier("zork.log", relayed) == ("crash", "suspect")
    # a runtime's warning after the error, explaining what may have caused it: its report
    explained = (
        "[ERROR] ZORK(4411,python):2026-11-20-15:34:32.886 [zork_runtime.cc:761] task 2 failed,"
        " retcode: 507011 (model execute failed)\n"
        "[WARNING] ZORK(4411,python):2026-11-20-15:34:32.887 [zork_runtime.cc:777] the task's"
        " error may be caused by slow data processing (over 20 s a batch)\n"
    )
    assert kind_and_tier("zork.log", explained) == ("crash", "suspect")
    # a runtime's advice after the error, on how a new run would retry: no retry under way
    advised = (
        "zork.TrainingFailedError: The zork run failed. Please inspect the previous errors.\n"
        "To continue this run, you can use: trainer = Zork.restore('/ckpt/run-3').\n"
        "To start a new run that will retry on training failures, set"
        " failure_config=FailureConfig(max_failures) with max_failures > 0.\n"
    )
    assert kind_and_tier("zork.log", advised) == ("crash", "suspect")


BAR = "Train:  40%|████      | 4/10 [01:{}<02:{}, 2{}.00s/it]\n"
REDRAWN = BAR.format(20, 0, 0) + TRACEBACK + BAR.format(31, 44, 2)
"""tqdm draws its bar once more, at the count it showed, when its loop ends by an exception."""


@pytest.mark.parametrize(
    "text",
    [
        # PyTorch's destructor warning, printed at every exit that left the group up
        TRACEBACK + "[rank3]:[W1130 04:10:02.512345678 ProcessGroupNCCL.cpp:1250] Warning:"
        " WARNING: destroy_process_group() was not called before program exit, which can leak"
        " resources.\n",
        # a warning Python raised with no frame running, as modules are torn down at its end
        TRACEBACK + "sys:1: ResourceWarning: unclosed file <_io.BufferedReader>\n",
        REDRAWN,
        # a field of the error's report, though it says nothing is wrong
        "ZORK error 999 at /src/zork-cuda.cu:512: unknown error\ncurrent device: 0\n",
        # the C library's words for errno 0 after the failure's message
        "CUDA Error: invalid argument\nCUDA Error: invalid argument: No error\n",
        # a warning stamped to the microsecond before an error stamped to the second
        "[W1130 04:00:01.823833318 socket.cpp:460] [c10d] waitForInput: poll returned 0\n"
        "[2026-11-30 04:00:01 TP1] Scheduler hit an exception: Traceback"
        " (most recent call last):\n",
    ],
    ids=["group-destructor", "sys-1-warning", "bar-redrawn", "report-field", "errno-0", "finer"],
)
def test_what_a_program_says_as_it_exits_after_an_error_is_no_sign_of_life(text: str) -> None:
    assert kind_and_tier("slurm-56.out", text) == ("crash", "suspect")


def test_a_bar_that_counts_on_after_its_redraw_is_a_sign_of_life() -> None:
    went_on = REDRAWN + BAR.format(52, 12, 1).replace("4/", "5/")
    assert diagnose([LogText("slurm-59.out", went_on)], year=2026) == []


def test_text_no_entry_names_is_read_as_a_report_or_a_mention() -> None:
    unnamed = "frobnicator: ERROR: widget alignment failed\n"
    assert kind_and_tier("slurm-44.out", unnamed) == ("crash", "suspect")
    ended = unnamed + "srun: error: n1: task 0: Exited with exit code 1\n"
    [finding] = diagnose([LogText("slurm-45.out", ended)], year=2026)
    assert finding.kind == "crash" and finding.detections[0].tier == "confirmed"
    mention = "gpu-health: scanning the kernel log for Xid 79 and Xid 48 lines\n"
    assert diagnose([LogText("slurm-46.out", mention)], year=2026) == []


def test_a_kernel_log_that_names_no_host_is_diagnosed_as_its_own_node() -> None:
    # a dmesg saved on the node itself: no host in its name, folder or lines
    line = "[ 1843.308145] NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, GPU has fallen off the bus."
    [finding] = diagnose([LogText("/var/log/dmesg.txt", line)], year=2026)
    assert (finding.kind, finding.culprits) == ("gpu_fault", ("(node of dmesg.txt)",))
    assert any(a.startswith("drain (node of dmesg.txt)") for a in finding.actions)


def test_a_node_log_no_entry_names_reads_as_its_hardware_failure() -> None:
    # a node's own kernel log is its text: a GPU or node failure read in it is a suspect
    gpu = "Dec 10 12:08:20 gpu-q07 kernel: NVRM: GPU 0000:9c:00.0: zorkinit failed! (0x62:0x1f)\n"
    [finding] = diagnose([LogText("journal.txt", gpu)], year=2026)
    assert (finding.kind, finding.culprits) == ("gpu_fault", ("gpu-q07",))
    assert finding.detections[0].tier == "suspect"
    assert not any("would run" in action for action in finding.actions)
    # what reads as no GPU or node failure says nothing of the node
    other = "Dec 10 12:08:20 gpu-q07 kernel: zorkfs: mount option foo failed\n"
    assert diagnose([LogText("journal.txt", other)], year=2026) == []


def test_an_exception_named_only_by_its_form_takes_its_words_reading() -> None:
    # a Python exception's last line names its form; a strong term names what failed
    ecc = "trn-q12: [rank14]: RuntimeError: zork: uncorrectable ECC error in HBM stack 2\n"
    [finding] = diagnose([LogText("pdsh.log", ecc)], year=2026)
    assert (finding.kind, finding.culprits) == ("gpu_fault", ("trn-q12",))
    # a reset connection is a peer that ended, not a failed network
    reset = "[rank2]: RuntimeError: zork store: Connection reset by peer\n"
    [finding] = diagnose([LogText("slurm-52.out", reset)], year=2026)
    assert finding.kind == "crash"


def test_the_node_and_ranks_a_line_names_as_failing_are_its_culprits() -> None:
    # the shared output file's line names the failed node, not the one that printed it
    node = "zorkd: error: job 53 stopped after a failure of node rack7-04\n"
    [finding] = diagnose([LogText("slurm-53.out", node)], year=2026)
    assert (finding.kind, finding.culprits) == ("node_failure", ("rack7-04",))
    # a node whose scheduler script failed to ready it for the job, or to clean up after it
    # ... or whose tasks outlived the kill signal (stuck in its kernel)
    for said in (
        "zorkctl: prolog failed on node rack7-06",
        "zorkctl: error: epilog error on rack7-06 after job 57",
        "zorkctl: error: task 7 is unkillable, kill task failed on node rack7-06",
    ):
        [finding] = diagnose([LogText("slurm-57.out", said + "\n")], year=2026)
        assert (finding.kind, finding.culprits) == ("node_failure", ("rack7-06",)), said
    ranks = "[rank0]: RuntimeError: zork group: Ranks 3, 9 failed to reach the barrier\n"
    [finding] = diagnose([LogText("slurm-54.out", ranks)], year=2026)
    assert finding.kind == "hang"
    assert {3, 9} <= set(finding.ranks)


def test_a_host_where_something_was_stopped_is_not_what_failed() -> None:
    # our wording, the scheduler's banner shape: the host is where the job ran and was
    # cancelled, the cause is elsewhere; where a failure happened on the host, it is the culprit
    cancelled = "zorkd: error: *** JOB 55 ON rack7-04 CANCELLED DUE TO A NODE FAILURE ***\n"
    [finding] = diagnose([LogText("slurm-55.out", cancelled)], year=2026)
    assert (finding.kind, finding.culprits) == ("node_failure", ())
    failed = "zorkd: error: *** JOB 56 ON rack7-05 HIT AN UNCORRECTABLE MEMORY ERROR ***\n"
    [finding] = diagnose([LogText("slurm-56.out", failed)], year=2026)
    assert finding.culprits == ("rack7-05",)


def test_an_end_after_a_process_failed_by_itself_is_that_failures_consequence() -> None:
    # our wording for the end: the launcher stops the other tasks after one exited with code 1
    failed = (
        "[rank0]: ValueError: zork shard 386 is missing\n"
        "srun: error: n1: task 0: Exited with exit code 1\n"
    )
    ended = "zorkd: error: step 57.0 on n1 cancelled\n"
    [finding] = diagnose([LogText("slurm-57.out", failed + ended)], year=2026)
    assert (finding.kind, finding.ranks) == ("crash", (0,))
    # ended first: the exit is the end's consequence, and so is the error before it
    assert diagnose([LogText("slurm-58.out", ended + failed)], year=2026) == []
    killed = failed.replace("Exited with exit code 1", "Exited with exit code 143")
    assert diagnose([LogText("slurm-59.out", killed + ended)], year=2026) == []


def test_a_step_ended_alone_or_a_preemption_after_failures_is_no_crash() -> None:
    # Slurm's banner for a step it ended prints for a user's cancel too: alone, it says the
    # step ended, not that it failed (a failed task says so on its own line)
    cancelled = "slurmstepd-n1: error: *** STEP 60.0 ON n1 CANCELLED AT 2026-11-30T04:10:00 ***\n"
    assert diagnose([LogText("slurm-60.out", cancelled)], year=2026) == []
    # our wording: workers die with their node, then the node is said to be preempted, a word
    # no failure-like line holds: the deaths are the preemption's consequence
    preempted = (
        "(Controller pid=12) The worker died because its node has died. Node Id: 4f2a\n"
        "(Controller pid=12)     the worker's node was preempted by the cloud provider\n"
    )
    assert diagnose([LogText("slurm-61.out", preempted)], year=2026) == []
    died = preempted.splitlines(keepends=True)[0]
    [finding] = diagnose([LogText("slurm-62.out", died)], year=2026)
    assert finding.kind == "node_failure"
