"""The second layer's lexicon: which lines read as failures, and what about.

The lines are our own, in the shapes of common logging conventions (Python's logging and
exceptions, glog/absl, syslog and the kernel, Slurm's and MPI launchers' reports)."""

from __future__ import annotations

import polars as pl
import pytest

from medic.parse.failure_lines import (
    END,
    FAMILY,
    FATAL,
    MENTION,
    READING,
    FailureLines,
    LexiconError,
    builtin_lexicon,
    listed_ranks,
    parse_lexicon,
)
from medic.parse.prefixes import RAW, PrefixStripper

LAYER = FailureLines()


def rows_of(*lines: str) -> pl.DataFrame:
    frame = PrefixStripper().strip(pl.DataFrame({"message": list(lines)}))
    marked = frame.filter(LAYER.failure_like(pl.col(RAW)))
    return LAYER.read(marked, RAW, "message")


def read(*lines: str) -> list[dict[str, str]]:
    """The lines that read as failures."""
    rows = rows_of(*lines).filter(~pl.col(END))
    return rows.select(RAW, FAMILY, READING).to_dicts()


def reading(line: str) -> tuple[str, str] | None:
    rows = read(line)
    assert len(rows) <= 1
    return (rows[0][FAMILY], rows[0][READING]) if rows else None


@pytest.mark.parametrize(
    ("line", "family", "kind"),
    [
        ("quux.io.PermanentWriteError: ENOSPC while flushing shard 12", "storage", "crash"),
        # a connection whose other end went away, or stopped answering, is given up: the
        # process that says so fails (a collective's wait is the collectives' family)
        ("zork.StoreError: Connection reset by peer", "peer", "crash"),
        ("zork.StoreError: Socket Timeout", "peer", "crash"),
        # a crashed process's memory image that could not be written is about the dump
        ("GPU core dump failed", "memory", "crash"),
        (
            "E1130 02:11:09.511 4411 agent.cc:88] ring allreduce timed out after 600s",
            "collectives",
            "hang",
        ),
        (
            "2026-11-30 02:11:09 ERROR fabric agent: link down on hca 2, "
            "transport retry count exceeded",
            "fabric",
            "node_failure",
        ),
        ("[rank4]: zork.RuntimeFault: uncorrectable ECC error on gpu 3", "device", "gpu_fault"),
        # c10's header alone says error: its date is month * 100 + day, three digits in June
        (
            "[rank2]:[E602 11:17:52.185053341 Zork.cpp:71] [Rank 2] watchdog saw the collective"
            " wait",
            "collectives",
            "hang",
        ),
        ("worker 7 got signal 11 (SIGSEGV) in a heap walk", "memory", "crash"),
        # a sentence led by the word Error says what it happened in
        (
            "Error while creating shared memory segment /dev/shm/zork-pZaf (size 7340384)",
            "memory",
            "crash",
        ),
        # a warning of what an error might cause is no report of it (vLLM's worker wrapper)
        (
            "ERROR 11-02 09:41:07 zork.py:467] Error executing method push_shard. This might"
            " cause deadlock in distributed execution.",
            "general",
            "crash",
        ),
        # Python's base class itself, as SWIG-wrapped C++ libraries raise it
        (
            "Exception: Error synchronizing on event for zork: code 700 at zork.cpp:736",
            "general",
            "crash",
        ),
        ("kernel: BUG: soft lockup - CPU#12 stuck for 23s! [python:7712]", "host", "node_failure"),
        # a CPU named as where a tensor lives: the program's placement, not the node's CPU
        (
            "RuntimeError: Expected all zork tensors on the same device, found cuda:0 and cpu!",
            "config",
            "crash",
        ),
        ("fatal: unknown option '--lr-sheduler' given to launcher", "config", "crash"),
        # retries exhausted is a failure report, whatever its level's word
        (
            "[h1:8:0:9] zork_log.c:171  Transport retry count exceeded on mlx5_0:1/RoCE",
            "fabric",
            "node_failure",
        ),
        # a GPU named just before its bus id
        (
            "Unable to determine the handle for GPU0000:C3:00.0: Unknown Error",
            "device",
            "gpu_fault",
        ),
        # the node's driver stack, not one GPU: user and kernel sides at different versions
        (
            "zork: failed to initialize NVML: Driver/library version mismatch",
            "driver",
            "node_failure",
        ),
        ("job step 3 exited with exit code 2", "general", "crash"),
        # a wait that ran out, naming no family: what it waited for never came, a hang
        ("E0903 16:50:00 zork.cc:41] stream synchronize timeout, result 507046", "general", "hang"),
        ("EI0006: fetching the tile times out. Reason: peer 3 sent nothing", "general", "hang"),
        ("ERROR: deadline exceeded while zorking shard 7", "general", "hang"),
        # a lower-case "error:" after the program's name or the time stamp is its error level;
        # a node whose scheduler script failed to ready it for a job, or to clean up, is lost
        ("zorkd[812]: error: epilog error on rack7-06 after job 57", "host", "node_failure"),
        # a component whose heartbeats stopped coming: waiting on it
        (
            "[12][3341] No heartbeat for components: ZorkWorker_p0 (337 seconds)",
            "collectives",
            "hang",
        ),
        # a launcher's agent on another node gone; the kernel's own crash
        ("zorkrun has lost communication with a remote daemon.", "host", "node_failure"),
        ("kernel: BUG: unable to handle kernel paging request at ffff9a01", "host", "node_failure"),
        # a kernel reading where it may not, as ROCm reports it: the program's, not the GPU's
        (
            "Memory access fault by GPU node-2 (Agent handle: 0x55aa) on address 0x7f00. Reason: "
            "Page not present or supervisor privilege.",
            "memory",
            "crash",
        ),
        ("[2026-11-30T02:11:09.511] error: prolog failed on node rack7-06", "host", "node_failure"),
        # a driver stating the recovery its device needs reports a fault, whatever its code
        (
            "zork: Xid (0000:c3:00): 999, recovery action now 0x1 (GPU Reset Required)",
            "device",
            "gpu_fault",
        ),
        # another vendor's kernel GPU driver: a fault of the GPU's memory by its kind, a job
        # the GPU never finished ("Timedout", one word), an engine the driver reset; the
        # kernel's GPU subsystem by its tag
        (
            "zorkgpu 0000:c1:00.0: [hub0] page fault (vmid:3 pasid:32771)",
            "general",
            "crash",
        ),
        ("zorkgpu 0000:c1:00.0: [drm] GT0: Timedout job: seqno=7, guc_id=2", "device", "gpu_fault"),
        (
            "zorkgpu 0000:c1:00.0: [drm] GT0: Engine reset: class=ccs, guc_id=2",
            "device",
            "gpu_fault",
        ),
        ("amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!", "device", "gpu_fault"),
        # a state set to an error is an event, not a setting; JAX's and TensorFlow's
        # coordination service is their rendezvous
        (
            "E zork.cc:9] task 37 has been set to ERROR in coordination service: zork timed out",
            "collectives",
            "hang",
        ),
        # a status with its canonical code, as Abseil and gRPC write it (TensorFlow, JAX, XLA)
        ("Exception in zork=TPU:6: RESOURCE_EXHAUSTED: From /job:zork/task:0:", "general", "crash"),
        ("  (0) RESOURCE_EXHAUSTED: zork needs 10.5G of memory, 8.9G free", "memory", "crash"),
        ("zork.RuntimeFault: DEADLINE_EXCEEDED: barrier of 8 workers", "collectives", "hang"),
        # an exception's name with a note before its message (TensorFlow 1's re-raised error)
        (
            "ZorkExhaustedError (see above for traceback): OOM when allocating zork",
            "memory",
            "crash",
        ),
        # a child's end as its supervisor reports it
        ("[rank: 1] Child process with PID 23026 terminated with code 1.", "general", "crash"),
        # an index out of range is a bug, not an input's end
        ("IndexError: list index out of range", "general", "crash"),
    ],
)
def test_failure_lines_no_catalogue_knows_get_a_family_and_kind(
    line: str, family: str, kind: str
) -> None:
    assert reading(line) == (family, kind)


@pytest.mark.parametrize(
    "line",
    [
        "step 1200 | loss 2.31 | error rate 0.12",  # a metric, not a failure
        "reconstruction error: 0.0131",  # a metric's value after its name
        "validation error: nan",
        "INFO all-reduce failed over to the ring algorithm",  # a lower severity
        "[W1130 02:00:03.118 230 client.py:86] socket failed to connect, retrying",
        "W1130 02:00:03.118 230 store.cc:12] connection refused by store",
        "connection refused, will retry in 5 s",  # a retry
        "zorklib: Network error (ReadTimeout), entering retry loop.",
        "Backing off zork_upload(...) for 0.8s (zork.ConnectionError: connection refused)",
        "zorkd: error: connection refused, retrying in 5 s",
        "Retired pages pending        : No",  # a field answering no
        "    Drain and Reset Recommended   : No",
        "collective timeout set to 1800 s",  # a setting, not an event
        "zork store backend set to 'file', error handling set to true",
        "slurmstepd: error: *** STEP 12.0 ON n3 CANCELLED AT 2026-11-30T02:11:09 ***",
        "job preempted: checkpoint saved, exiting",
        "all ranks finished, 0 errors",
        # the word in its other senses: a default, the tolerance of faults
        "fault tolerance enabled: zork keeps a spare worker per node (default store)",
        "vision.py:12: UserWarning: Failed to load image Python extension",  # Python's warnings
        # a program's own warning in title case, as ssh and other tools write it
        "Warning: zork forwarding setup failed: key data not generated",
        # a structured logger's level field, as JSON (slog, zap, logrus) or logfmt writes it
        '{"time":"2026-11-30T02:00:03Z","level":"INFO","msg":"zork reset failed"}',
        '{"ts":1764468003.1,"lvl":"warn","msg":"zork device error"}',
        'time=2026-11-30T02:00:03Z level=info msg="zork reset failed"',
        # glog's warning letter before a Windows path of its source file
        "2026-11-30 02:00:03.118: W c:\\zork\\core\\alloc.cc:217] allocation failed: 2.1G",
        # a kernel feature named after a panic, at start-up
        "amdgpu 0000:12:00.0: [drm] Registered 4 planes with drm panic",
        # an error its program calls no failure, and one announced as being handled
        "zork: allocation failed. The caller indicates that this is not a failure.",
        "EDAC zork MC0: HANDLING MCE MEMORY ERROR",
    ],
)
def test_lines_that_only_look_like_failures_stay_silent(line: str) -> None:
    assert read(line) == []


def test_a_retry_loop_that_gave_up_is_no_retry() -> None:
    assert reading("zorklib: ERROR upload failed, retry loop exhausted after 5 tries") is not None


def test_a_fatal_word_is_heard_under_a_lower_severity() -> None:
    # some libraries print their errors at a WARN level: the fatal word still counts
    assert reading("host1:4:4 [2] ZZZ WARN net plugin: fatal event on port 1: link down") == (
        "fabric",
        "node_failure",
    )
    assert reading("host1:4:4 [2] ZZZ WARN net plugin: event on port 1: link down") is None


@pytest.mark.parametrize(
    ("line", "family"),
    [
        # a connection's other end went away: the peer ended, the network did not fail
        ("host1:4:4 [1] misc/net.cc:51 ZZZ ERROR recv from peer failed : Broken pipe", "peer"),
        ("RuntimeError: zork store: Connection reset by peer", "peer"),
        ("E1130 02:11:09 agent.cc:12] qp 7 error on hca mlx5_2: retry count exceeded", "fabric"),
        # identifiers' words count: a stack frame's function names what failed
        ("Exception raised from zorkCommWatchdog at ../zork/GroupBarrier.cpp:88", "collectives"),
        # a "kernel" is a GPU's as often as the OS's: the word alone names no host failure
        ("!!!! zork kernel execution error. (m: 768, n: 64, error: 13)", "general"),
        ("zorkd: Kernel panic - not syncing: Fatal exception", "host"),
        # the host's memory by its parts: its DRAM's ECC is no GPU's
        ("zork: [Hardware Error]: MC2 Error (node 1): DRAM ECC error detected on the NB.", "host"),
        # a command's options say what it was asked to do, not what failed
        ("./run.sh: line 9:  4411 Killed  zork-train --cpu --nccl-port=2 -x data.bin", "general"),
        ("zork: error: unrecognized arguments: --gpu-count 4", "config"),
    ],
)
def test_what_a_line_is_about_is_read_from_its_words_and_its_identifiers(
    line: str, family: str
) -> None:
    assert reading(line) is not None
    assert reading(line)[0] == family  # type: ignore[index]


def test_a_watchdog_passing_on_an_exception_names_no_family_the_exception_does() -> None:
    # a process group's watchdog thread ends with the exception that ended it: what failed is
    # that exception's, not a collective's, unless the exception is a collective's timeout
    passed_on = "[Rank 2] Process group watchdog thread terminated with exception: zork failure"
    assert reading(passed_on) == ("general", "crash")
    timed_out = (
        "[Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600010 "
        "milliseconds before timing out."
    )
    assert reading(timed_out) == ("collectives", "hang")


def test_nccl_warn_is_nccls_error_level_and_its_tag_names_no_family() -> None:
    # NCCL logs nothing above WARN: its WARN lines are its error reports
    line = "h1:7:9 [3] NCCL WARN NET/IB : mlx5_2:1 Got async error event: zork error"
    assert reading(line) == ("fabric", "node_failure")
    # a link that comes back is a recovery, whatever its level, and goes on
    back = "h1:7:9 [3] NCCL WARN NET/IB : mlx5_2:1 Got async error event: port active"
    assert read(back) == []
    frame = pl.DataFrame({"message": [line, back, "h1:7:9 [3] NCCL INFO comm 0x1 rank 3 ok"]})
    assert frame.select(LAYER.going_on(pl.col("message"))).to_series().to_list() == [
        False,
        True,
        True,
    ]
    # a count of failures that is zero, as a health check's JSON summary prints it, is none;
    # a number before "failed" is what failed, no count
    summary = ['  "passed": 6,', '  "failed": 0,', "  errors=0 warnings=2", "failures: 0"]
    assert [read(line) for line in summary] == [[], [], [], []]
    launch = "srun: error: Task launch for 36.0 failed on node cn131: Job credential expired"
    replica = "E zork.cc:20] Execution of replica 0 failed: Resource exhausted: Out of memory"
    assert all(read(line) != [] for line in (launch, replica, "zork: rank 0 failed"))
    # a program's own error header in a line a wrapper relays at its INFO level is the line's
    relayed = (
        "I0922 09:49:00.854184 1400 run_zork.py:193] 2026-09-22 16:49:00.853879: E"
        " zork/client.cc:2040] Execution of replica 0 failed: Resource exhausted: Out of memory"
    )
    assert reading(relayed) == ("memory", "crash")
    assert read("I0922 09:49:00.854184 1400 run_zork.py:193] zork: replica 0 ready") == []
    # a segmentation fault as programs shorten it is a signal's end
    assert reading("!!!!!!! Segfault encountered !!!!!!!") == ("memory", "crash")
    # a stack frame's unknown line (":0") is no field answering "0": no sign of life
    frame = pl.DataFrame({"message": [" 1 0x00142cb zork_completion_with_err()  ???:0"]})
    assert frame.select(LAYER.going_on(pl.col("message"))).to_series().to_list() == [False]


def test_a_level_in_angle_brackets_is_a_level_and_an_error_number_no_sign_of_life() -> None:
    # a fabric library's warning, as it probes every memory interface at start-up
    probe = "zorkfabric:71:1700000000::core:core:zork_hmem_init():209<warn> Failed to init zork"
    assert read(probe) == []
    # its report of a failed completion is no failure of its own, nor a sign that the job goes
    # on: the error number says what it is
    failed = "zorkfabric:71:1700000000::efa:cq:zork_write_tx_error():243<warn> err: 20, zork"
    chosen = "zorkfabric:71:1700000000::core:core:zork_getinfo():101<info> chose provider zork"
    frame = pl.DataFrame({"message": [chosen, failed]})
    assert frame.select(LAYER.going_on(pl.col("message"))).to_series().to_list() == [True, False]
    assert read(failed) == []


def test_a_stall_report_is_heard_at_a_warning_level() -> None:
    # frameworks log a stall (a wait past a stated time) as a warning; a job that stops
    # after one is hung
    stall = (
        "[2026-12-11 15:46:40.187: W zork/stall_check.cc:107] tensors submitted by a subset "
        "of ranks are waiting for the remaining ranks for more than 120 seconds: deadlock?"
    )
    assert reading(stall) == ("collectives", "hang")
    frame = pl.DataFrame({"message": [stall]})
    assert frame.select(LAYER.going_on(pl.col("message"))).item() is False
    assert read("huggingface/tokenizers: forked after use; disabling it to avoid deadlocks") == []
    assert read("WARNING zork: rank 3 waiting for 30 seconds on the barrier, retrying") == []
    # a runtime saying an operation takes so long that it may be deadlocked, at its W level
    suspicion = (
        "W0311 08:02:11.5 zork_runtime.cc:88] Zork step execution is taking a long time; the "
        "cores may be deadlocked, or the program is very slow."
    )
    assert reading(suspicion) == ("collectives", "hang")
    assert read("W zork.cc:12] Compiling the graph is taking a long time; this is expected.") == []
    forking = "DeprecationWarning: use of fork() in a threaded process may lead to deadlocks"
    assert read(forking) == []


def test_a_generic_entrys_line_takes_a_reading_only_from_a_strong_term() -> None:
    lines = pl.Series(
        [
            "RuntimeError: zork: uncorrectable ECC error on the device",  # device, strong
            "ConnectionError: HTTPSConnectionPool(host='hub.example'): connection failed",
            "RuntimeError: NCCL communicator was aborted on rank 3",  # plain terms only
            "ValueError: bad shape (3, 4)",
        ]
    )
    assert LAYER.strong_reading(lines).to_list() == ["gpu_fault", None, None, None]


def test_a_hardware_exception_a_runtime_reports_is_read_by_what_it_names() -> None:
    # ROCm's runtime reports a GPU that hung or faulted as a hardware exception
    line = "HW Exception by GPU node-4 (Agent handle: 0x1ebc04e0) reason :GPU Hang"
    assert reading(line) == ("device", "gpu_fault")


def test_a_line_reporting_an_end_is_fatal_and_an_error_a_program_may_survive_is_not() -> None:
    lines = {
        "Segmentation fault (core dumped)": True,  # a death
        "worker 3 exited with exit code 1": True,
        "E1130 02:11:09.511 4411 agent.cc:88] ring allreduce timed out after 600s": True,
        "zork: GPU 0000:3b:00.0 is lost, reboot to recover it": True,  # its family's end
        "zorkd: ERROR: job 12 stopped after a failure of node rack7-04": True,  # a node's end
        "fabric agent: catastrophic event on hca 2": True,  # a fatal word
        "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3": True,  # an abort
        "ERROR could not open checkpoint shard 3": False,  # may be handled
        "quux.io.PermanentWriteError: ENOSPC while flushing shard 12": False,
        "FATAL: zork ring 2 lost its barrier": True,  # the level's word
        "Fatal error in zork: ring state 7 unknown": True,
        # a command-line tool's header: the tool ended (a job's start-up probe), not the job
        "fatal: not a git repository (or any of the parent directories): .git": False,
        # Open MPI's default error handler (our values): an error said to have occurred, an
        # error constant without the word error, and the abort it announces
        "[h5:1130] *** An error occurred in MPI_Zorkreduce": False,
        "[h5:1130] *** MPI_ERR_ZORK: operation not supported": False,
        "[h5:1130] *** MPI_ZORKS_ARE_FATAL (processes in this communicator will now abort,": True,
        # Open MPI's report of a rank's MPI_Abort (its help text, the code on the next line)
        "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD": True,
        # an abort a condition would bring is no end
        "zork: ERROR: the run will abort if its loss diverges again": False,
        # a program saying it exits where it reports an error
        "CRITICAL trainer.py: 88: gradient norm is inf, exiting...": True,
        # a panic as programs report one (Go's, Rust's, the kernel's)
        "panic: runtime error: invalid memory address or nil pointer dereference": True,
        "thread 'main' panicked at src/zork.rs:41:9:": True,
        "zorkd: Kernel panic - not syncing: Fatal exception": True,
    }
    rows = rows_of(*lines)
    assert dict(zip(rows.get_column(RAW), rows.get_column(FATAL), strict=True)) == lines


def test_deliberate_ends_are_read_as_ends_unless_something_failed() -> None:
    rows = rows_of(
        "slurmstepd: error: *** JOB 12 ON n3 CANCELLED AT 2026-11-30T02:11:09 ***",
        "zorkd: error: job 12 cancelled due to a node failure on n4",
        "RuntimeError: worker died",
    )
    assert rows.get_column(END).to_list() == [True, False, False]
    assert rows.get_column(FAMILY).to_list() == [None, "host", "general"]


def test_a_time_limit_in_other_schedulers_words_is_a_deliberate_end() -> None:
    # Torque's, PBS Pro's and Flux's words for a job out of its time (our values)
    rows = rows_of(
        "Job exceeded its walltime limit. Job was aborted",
        "=>> PBS: job killed: walltime 7215 exceeded limit 7200",
        "0.981s: job.exception type=timeout severity=0 resource allocation expired",
        "zorkd: error: wall clock of the node failed",
    )
    assert rows.get_column(END).to_list() == [True, True, True, False]


def test_an_interrupt_from_the_keyboard_is_a_deliberate_end() -> None:
    # Python's exception for SIGINT ends its traceback (bare, or with a message, behind a
    # launcher's rank tag), or a framework says it caught one, or Julia's; the source line
    # raising it is no end, nor a note that a handler is installed
    rows = rows_of(
        "KeyboardInterrupt",
        "[rank3]: KeyboardInterrupt: interrupted by the operator",
        "Detected KeyboardInterrupt, attempting graceful shutdown ...",
        "    raise KeyboardInterrupt(zork)",
        "zork: error: KeyboardInterrupt handler installed for worker 3",
        "ERROR: InterruptException:",
        "W1130 02:00:03.118 73 api.py:739] Received 2 death signal, shutting down workers",
        "W1130 02:00:03.119 73 api.py:1012] Sending process 3792 closing signal SIGINT",
        "W1130 02:00:03.119 73 api.py:1012] Sending process 3793 closing signal SIGTERM",
    )
    ended = dict(zip(rows.get_column(RAW), rows.get_column(END), strict=True))
    assert ended == {
        "KeyboardInterrupt": True,
        "[rank3]: KeyboardInterrupt: interrupted by the operator": True,
        "Detected KeyboardInterrupt, attempting graceful shutdown ...": True,
        "ERROR: InterruptException:": True,
        "W1130 02:00:03.118 73 api.py:739] Received 2 death signal, shutting down workers": True,
        "W1130 02:00:03.119 73 api.py:1012] Sending process 3792 closing signal SIGINT": True,
    }


def test_a_user_is_a_deliberate_end_only_with_the_end_they_made() -> None:
    rows = rows_of(
        "zork: process 4411 terminated by user request",
        "zorkd: job 12 killed by the user (SIGINT)",
        # a scheduler's report names who submitted the job beside its exit code
        "Job <run_7> was submitted from host <n-4> by user <ana>, exited with exit code 137.",
    )
    assert rows.get_column(END).to_list() == [True, True, False]


def test_a_success_beside_what_failed_or_a_tally_of_nothing_is_no_recovery() -> None:
    # a success said beside errors from a peer does not silence the line
    contrast = (
        "E zork.cc:9] Rank 3 successfully reached the barrier, but received errors while "
        "waiting for rank 0"
    )
    assert [row[RAW] for row in read(contrast)] == [contrast]
    frame = pl.DataFrame(
        {
            "message": [
                "0 successful operations.",
                "0 derived errors ignored.",
                "shard 4 written successfully",
                "a transient error was ignored, going on",
                "zork INFO comm 0x55d0 rank 0 nranks 3 cudaDev 0 - Abort COMPLETE",
                "zork INFO comm 0x55d0 rank 0 nranks 3 cudaDev 0 - Init COMPLETE",
            ]
        }
    )
    # an error's summary tallies nothing that succeeded, a communicator torn down is the
    # error's end: no sign of life after the error
    assert frame.select(LAYER.going_on(pl.col("message"))).to_series().to_list() == [
        False,
        False,
        True,
        True,
        False,
        True,
    ]


def test_a_preemption_that_did_not_succeed_is_no_deliberate_end() -> None:
    rows = rows_of("zorkgpu: queues may be unrecoverable after an unsuccessful preemption")
    assert rows.get_column(END).to_list() == [False]


def test_the_kernels_preemptible_build_is_no_deliberate_end() -> None:
    oops = "[812.55] BUG: kernel NULL pointer dereference, address: 0000000000000010"
    cancel = "slurmstepd: error: *** JOB 12 ON n3 CANCELLED AT 2026-11-30T02:11 DUE TO PREEMPTION"
    rows = rows_of(
        oops,
        "[812.55] Oops: 0000 [#1] PREEMPT SMP NOPTI",
        "[812.56] CPU: 3 PID: 991 Comm: zork Not tainted 6.8.0-31-generic #31 SMP PREEMPT_DYNAMIC",
        cancel,
    )
    # the oops's own lines say how the kernel was built: no job's end silences the oops
    assert rows.select(RAW, END).rows() == [(oops, False), (cancel, True)]


def test_words_guessing_at_a_cause_neither_end_nor_silence_the_line() -> None:
    # our wording: a cluster manager's report, then its guesses at why (a preempted node, a
    # retry that may succeed)
    lost = (
        "ERROR zork.py:12 -- The node with node id: 7f3a has been marked dead. This can happen "
        "when (1) its agent crashed (OOM, preempted node, etc.) (2) a retry was ignored."
    )
    rows = rows_of(lost)
    assert rows.select(RAW, END, FAMILY).rows() == [(lost, False, "host")]
    # nor is a death among the guesses an end the line reports
    guessed = "zork: error: widget 7 failed. Possible causes: (1) it was killed by signal 9"
    assert rows_of(guessed).get_column(FATAL).to_list() == [False]


def test_a_heartbeat_said_to_come_is_no_failure() -> None:
    assert rows_of(
        "zork: heartbeat sent to the coordinator at step 100",
        "[W zork.cc:157] Last heartbeat was sent 6901 ms ago. There might be pressure here.",
    ).is_empty()


def test_the_fast_path_marks_few_of_a_training_log() -> None:
    lines = [f"step {i} loss {2.0 - i / 1e4:.4f} lr 3e-4 tokens/s 1.2e5" for i in range(500)]
    lines.append("RuntimeError: worker died")
    frame = pl.DataFrame({RAW: lines})
    assert frame.filter(LAYER.failure_like(pl.col(RAW))).height == 1


def test_malformed_lexicons_fail_with_one_line() -> None:
    with pytest.raises(LexiconError, match="literals"):
        parse_lexicon({"marker": [{"name": "a", "pattern": "b"}]})
    with pytest.raises(LexiconError, match=r"\[\[marker\]\]"):
        parse_lexicon({"fast": {"literals": ["x"]}, "quiet": [], "loud": []})
    with pytest.raises(LexiconError, match="family"):
        parse_lexicon(
            {
                "fast": {"literals": ["x"]},
                "marker": [{"name": "a", "pattern": "b"}],
                "loud": [{"name": "a", "pattern": "b"}],
                "family": [{"name": "f"}],
            }
        )
    valid = {
        "fast": {"literals": ["x"]},
        "marker": [{"name": "a", "pattern": "b"}],
        "loud": [{"name": "a", "pattern": "b"}],
    }
    with pytest.raises(LexiconError, match=r"\[\[unsilenced\]\]"):
        parse_lexicon({**valid, "unsilenced": [{"name": "stall"}]})
    with pytest.raises(LexiconError, match=r"\[\[quiet\]\]"):
        parse_lexicon({**valid, "quiet": [{"pattern": "debug", "unless_loud": True}]})
    with pytest.raises(LexiconError, match=r"\[reporter\]"):
        parse_lexicon({**valid, "reporter": {"patterns": "NCCL WARN"}})
    with pytest.raises(LexiconError, match=r"\[fast\] headers must be a list of strings"):
        parse_lexicon({**valid, "fast": {**valid["fast"], "headers": "E0602"}})
    family = {"name": "f", "kind": "hang", "terms": ["zork"], "kind_when": ["wait"]}
    with pytest.raises(LexiconError, match="kind_when and kind_otherwise go together"):
        parse_lexicon({**valid, "family": [family]})
    with pytest.raises(LexiconError, match="kind_when and kind_otherwise go together"):
        parse_lexicon({**valid, "general": {"kind": "hang", "kind_when": ["wait"]}})
    with pytest.raises(LexiconError, match=r"\[general\] holds kind"):
        parse_lexicon({**valid, "general": {"kind": "hang", "terms": ["zork"]}})


def test_a_lexicon_s_fragments_are_written_out_in_each_of_its_regexes() -> None:
    lexicon = parse_lexicon(
        {
            "fragments": {"code": "(?:code|status)"},
            "fast": {"literals": ["x"], "headers": ["E{{code}}"]},
            "marker": [{"name": "exit", "pattern": r"exited with {{code}} [1-9]"}],
            "loud": [{"name": "a", "pattern": "b"}],
            "despite": [{"name": "child", "pattern": r"pod failed with {{code}}"}],
            "reporter": {"patterns": ["R{{code}}"]},
            "family": [{"name": "f", "kind": "crash", "terms": ["zork"], "fatal": ["{{code}}"]}],
        }
    )
    assert lexicon.markers == (("exit", r"exited with (?:code|status) [1-9]"),)
    assert lexicon.despite == (("child", r"pod failed with (?:code|status)"),)
    assert lexicon.headers == ("E(?:code|status)",)
    assert lexicon.reporters == ("R(?:code|status)",)
    assert lexicon.families[0].fatal == ("(?:code|status)",)
    assert "{{" not in repr(builtin_lexicon())


def test_a_lexicon_naming_a_fragment_it_lacks_fails_with_one_line_naming_the_row() -> None:
    valid = {
        "fast": {"literals": ["x"]},
        "marker": [{"name": "a", "pattern": "b"}],
        "loud": [{"name": "a", "pattern": "b"}],
    }
    with pytest.raises(LexiconError, match=r"\[quiet\] 'q': 'pattern' names no fragment 'cod'"):
        parse_lexicon({**valid, "quiet": [{"name": "q", "pattern": "exit {{cod}}"}]})
    with pytest.raises(LexiconError, match=r"\[fragments\] must map names to regex strings"):
        parse_lexicon({**valid, "fragments": {"code": 1}})


def test_a_family_term_is_found_in_the_line_s_words_whatever_lies_between_them() -> None:
    # "i o error" is a storage phrase: found across the slash, never inside another word
    assert reading("ERROR: shard 3: I/O error") == ("storage", "crash")
    assert reading("ERROR: shard 3: radio error") == ("general", "crash")
    # a word's beginning ("alloc*") finds every word it begins
    assert reading("ERROR: reallocation of arena failed") == ("general", "crash")
    assert reading("ERROR: allocation of arena failed") == ("memory", "crash")


def test_a_collective_is_a_hang_when_ranks_wait_and_a_crash_when_it_returned_an_error() -> None:
    assert reading("E zork.cc:9] ring allreduce on comm 3 timed out after 600 s") == (
        "collectives",
        "hang",
    )
    assert reading("E zork.cc:9] ring allreduce stuck waiting for rank 5") == (
        "collectives",
        "hang",
    )
    # a communicator that failed to start, or a CUDA error inside a collective, ended the
    # process that called it
    assert reading(
        "INTERNAL: zork.cc:275: NCCL operation ncclCommInitRank(&comm) failed: unhandled cuda error"
    ) == ("collectives", "crash")
    assert reading("ERROR: allreduce on comm 3 returned an unhandled system error") == (
        "collectives",
        "crash",
    )


def test_a_timeout_named_as_what_happened_is_a_wait_that_ran_out_and_a_setting_is_not() -> None:
    # the report wrapped after its colon, and the timed-out operation's object after it
    assert reading("Zork caught collective operation timeout:") == ("collectives", "hang")
    assert reading("ring allreduce timeout: ZorkWork(SeqNum=16, OpType=ALLREDUCE)") == (
        "collectives",
        "hang",
    )
    settings = (
        "timeout: 1800",
        "  timeout: None",
        "ring timeout: timedelta(seconds=1800)",
        "Setting the ring timeout",
        "  timeout:",
        # a watchdog's timeout as a setting
        "Setting scheduler watchdog timeout to 600s",
        "zork watchdog timeout: 600",
        "zork watchdog timeout = 300",
    )
    for line in settings:
        assert rows_of(line).is_empty(), line
    # a watchdog's timeout that fired (SGLang's scheduler prints it so before dumping its
    # threads): what it watched stopped moving
    for line in ("[TP3] Watchdog timeout (self.zork_timeout=300)", "zork: watchdog timeout!"):
        found = reading(line)
        assert found is not None and found[1] == "hang", line


def test_a_list_of_the_ranks_ready_while_the_others_are_waited_for_is_a_stall_report() -> None:
    # no severity word, no timeout: the ranks the line lists came, the others hold them up
    rows = rows_of("Stalled ops: zork_broadcast_weights_0 [ready ranks: 5, 6, 3, 1, 4, 0]")
    assert rows.select(FAMILY, READING, MENTION).rows() == [("collectives", "hang", False)]


def test_a_vendors_name_written_in_mixed_case_stays_one_word() -> None:
    # "PCIe" is no "PC Ie": its bus error is the link's, not a process's SIGBUS
    assert reading(
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction"
    ) == ("device", "gpu_fault")
    assert reading("ERROR: zorkd: InfiniBand port 1 state changed, transport failed") == (
        "fabric",
        "node_failure",
    )
    # identifiers still come apart into their words
    assert reading("E zork.cc:9] ProcessGroupNCCL watchdog caught a timeout") == (
        "collectives",
        "hang",
    )
    # the kernel's PCIe error reporting names the device behind the port
    assert reading("nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)") is None
    assert reading("pcieport 0000:00:03.0: AER: device recovery failed") == ("device", "gpu_fault")


def test_a_kernel_panic_over_hung_tasks_is_the_hosts() -> None:
    assert reading("Kernel panic - not syncing: softlockup: hung tasks") == ("host", "node_failure")


def test_an_error_codes_constant_is_a_report_and_its_words_say_what_failed() -> None:
    assert reading("CUDA_ERROR_CONTAINED: invalid access of peer GPU memory over nvlink") == (
        "device",
        "gpu_fault",
    )
    assert reading("zork: call failed: cudaErrorDevicesUnavailable on the gpu") == (
        "device",
        "gpu_fault",
    )
    # a kernel hardware-error record's number in braces is no template of source code
    assert reading("amdgpu 0000:1c:00.0: {1}uncorrectable hardware error(ATHUB) detected!") == (
        "device",
        "gpu_fault",
    )
    # the address of the vendor's documentation in a library's hint names no device
    hint = (
        "Search for `cudaErrorLaunchFailure' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
        "group__CUDART__TYPES.html for more information."
    )
    assert reading(hint) is not None and reading(hint)[1] == "crash"
    # a name that merely holds the word is none (an environment variable, a setting)
    assert reading("INFO set NCCL_DEBUG_SUBSYS=INIT and CUDA_LAUNCH_BLOCKING=1") is None


def test_nccl_s_older_warnings_without_its_name_are_its_error_reports_too() -> None:
    # NCCL 2.3 and older (include/debug.h): "WARN" alone after the device and the file
    failed = "h1:71:71 [0] include/zork.h:311 WARN Socket creation failed : zork not supported"
    assert reading(failed) is not None
    assert reading("h1:71:71 [0] misc/ibvwrap.cu:61 WARN Failed to open libibverbs.so[.1]") is None
    # a logger's WARN after a file and line, without NCCL's device, is a warning
    assert reading("zork.py:311 WARN Socket creation failed, retrying") is None


def test_a_library_or_symbol_a_program_probes_for_and_goes_on_without_is_no_failure() -> None:
    # our lines, in the shapes NCCL and the loaders print: an ABI version probed newest first,
    # a library absent from a host without its hardware, an optional plugin
    for line in (
        "NET/Plugin: Failed to find ncclNetPlugin_v11 symbol.",
        "node3:71:71 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        "W zork/loader.cc:60] Could not load dynamic library 'libzork.so.3'; dlerror: not found",
    ):
        assert reading(line) is None
    # a program that could not start for a missing library failed
    started = "./train: error while loading shared libraries: libzork.so.3: cannot open shared"
    assert reading(started + " object file: No such file or directory") is not None


def test_a_node_a_cluster_manager_marked_dead_is_heard_at_its_error_level_only() -> None:
    marked = (
        " -- The node with node id: 8f20 and ip: 10.1.0.3 has been marked dead because the"
        " detector has missed too many heartbeats from it."
    )
    # the driver's warning: the runtime retries elsewhere (an idle node scaled down reads so)
    assert reading("2026-11-30 02:11:09,096 WARNING worker.py:1462" + marked) is None
    assert reading("2026-11-30 02:11:09,096 ERROR gcs.cc:88" + marked) == ("host", "node_failure")
    # a node agent told it was declared dead (Ray's raylet, at its fatal level, before it exits)
    line = "[2026-11-30 02:11:10,400 C 88 88] node_agent.cc:170: This node was marked as dead."
    assert reading(line) == ("host", "node_failure")


def test_the_causes_a_message_guesses_at_do_not_name_what_failed() -> None:
    # a cluster manager's verdict, then its list of what may have led to it
    line = (
        "2026-11-30 02:11:09,096 ERROR gcs.cc:88 -- Node 8f20 at 10.1.0.3 has been marked dead"
        " after missed heartbeats. This can happen when (1) its agent crashes (OOM, segfault)"
        " (2) its heartbeats lag behind a busy network."
    )
    assert reading(line) == ("host", "node_failure")
    # a single cause it suggests is its reading
    stalled = "W tpu_client.cc:612] Execute is taking a long time. This might be due to a deadlock"
    assert reading(stalled) is not None and reading(stalled)[1] == "hang"


def test_a_container_its_orchestrator_evicted_is_a_crash_at_a_warning_level() -> None:
    assert reading(
        "4m11s  Warning  Evicted  pod/trainer-0  The node was low on resource: memory."
    ) == ("memory", "crash")
    assert reading("The node was low on resource: memory.") == ("memory", "crash")
    # kubectl describe's event row: its type's column, then the reason's
    row = "  Warning  Evicted   109s  kubelet  Pod ephemeral local storage usage exceeds 5Gi."
    assert reading(row) is not None
    assert reading("zork-0   0/1   OOMKilled   3   12m") == ("memory", "crash")
    # a cache evicting its entries is no container's end
    assert reading("INFO block cache evicted 312 entries (4.1 GiB)") is None
    assert reading("prefix cache: evicted 12 blocks") is None
    assert reading("Evicted 3 blocks from the KV cache") is None


def test_a_family_term_must_be_lowercase_words() -> None:
    lexicon = {
        "fast": {"literals": ["x"]},
        "marker": [{"name": "a", "pattern": "b"}],
        "loud": [{"name": "a", "pattern": "b"}],
    }
    with pytest.raises(LexiconError, match="lowercase words"):
        parse_lexicon(lexicon | {"family": [{"name": "f", "kind": "crash", "terms": [r"\bx\b"]}]})
    with pytest.raises(LexiconError, match="lowercase words"):
        parse_lexicon(lexicon | {"family": [{"name": "f", "kind": "crash", "terms": ["GPU"]}]})


def test_a_host_s_name_is_no_word_of_what_failed() -> None:
    # "gpu" in a node's name would tie the device family with the host's "dimm"
    for host in ("gpu-b17", "dgx-h100-031", "ip-10-2-41-7"):
        assert reading(f"ERROR: dimm failure reported on {host}") == ("host", "node_failure")


def test_a_sign_of_life_is_a_retry_or_a_lower_severity_line_reporting_nothing_failing() -> None:
    lines = {
        "I1130 02:11:09.511 4411 loader.cc:88] shard 12 opened": True,
        "2026-11-30 02:11:09 INFO trainer: epoch 3 begins": True,
        "WARNING: shard fetch failed, retrying (attempt 2/5)": True,  # a retry
        "node7:2708:3002 [0] NCCL INFO transport/net.cc:1298 -> 6": False,  # an error passed up
        "2026-11-30 02:11:09 INFO trainer: fatal error in the loader": False,  # a loud word
        "RuntimeError: widget alignment failed": False,
        "loader.py:557: UserWarning: this DataLoader will create 16 worker processes": True,
    }
    frame = pl.DataFrame({"message": list(lines)})
    alive = frame.select(LAYER.going_on(pl.col("message"))).to_series().to_list()
    assert dict(zip(lines, alive, strict=True)) == lines


def test_a_device_written_with_its_index_is_that_device() -> None:
    # "GPU3", "nvme0": the device's word, whatever index follows it; "s3" keeps its digit
    assert reading("Unable to determine the device handle for GPU3: Unknown Error") == (
        "device",
        "gpu_fault",
    )
    assert reading("ERROR: nvme0: controller is down; will reset") == ("storage", "crash")
    assert reading("ERROR: upload to s3 bucket failed") == ("storage", "crash")


def test_a_device_that_cannot_start_is_heard_at_any_level() -> None:
    # libraries warn and fall back to the CPU (our wording, torch's and TF's shapes)
    warned = (
        "zork/__init__.py:88: UserWarning: CUDA initialization: unexpected error from "
        "zorkGetDeviceCount(). Error 802: system not yet initialized"
    )
    assert reading(warned) == ("driver", "node_failure")
    assert reading("W zork_driver.cc:152] failed call to cuInit: CUDA_ERROR_NO_DEVICE") is not None
    # healthy traps: a CPU-only step's warning names no error; a runtime probing the backends
    # it was not built for says so at INFO on every healthy start
    assert read("UserWarning: CUDA initialization: Found no NVIDIA driver on your system.") == []
    assert read("I1204 03:10:00.1 xla_bridge.py:889] Unable to initialize backend 'rocm'") == []


def test_an_error_at_a_source_location_is_reported() -> None:
    assert reading("zork error at kernel.cu:256 code=802(zorkErrorSystemNotReady)") is not None
    assert read("loss went from 2.1 to 1.9 at train.py:256") == []


def test_the_directories_of_a_source_file_name_no_family() -> None:
    # where the code lives in its tree ("gpu/" of a compiler's) is not what failed
    line = "F0423 20:35:34.618 77 external/zork/service/gpu/tuning/tuner.cc:1099] build status 3"
    assert reading(line) == ("general", "crash")
    assert reading("F0423 20:35:34.618 77 tuning/tuner.cc:1099] GPU build status 3") == (
        "device",
        "gpu_fault",
    )


@pytest.mark.parametrize(
    "line",
    [
        # a failure in the present tense, a library's internal error, a level in brackets
        "src/zork/Solver.cpp (859) : zork solveBlock fail to launch kernel!!",
        "zork/Loader.cpp (148) : internal error : libzork.so!",
        "2026-11-30 02:11:09 [11,526ms] [Error] [zork.plugin] solver stopped, code 700",
        # a library's error string: the one word naming what erred, then the words of it
        "ZORK error: unhandled system error (run with ZORK_DEBUG=INFO for details)",
    ],
)
def test_failures_in_other_words_and_levels(line: str) -> None:
    assert reading(line) is not None


def test_a_lower_level_in_brackets_is_quiet_in_any_case() -> None:
    assert read("[Warning] [zork.plugin] Failed to create a context manager. Falling back.") == []


@pytest.mark.parametrize(
    "line",
    [
        "已杀死",
        "段错误 (核心已转储)",
        "已放弃 (核心已转储)",
        "Speicherzugriffsfehler (Speicherabzug geschrieben)",
        "Erreur de segmentation (core dumped)",
        "Ошибка сегментирования",
        "Violación de segmento ('core' generado)",
        "セグメンテーション違反です (コアダンプ)",
        # a bar redrawn in place never ends its line: the shell writes after its last number
        "120/500 [=====>........................] - ETA: 61s - loss: 0.4417Killed",
        "zork epoch 3 | 812/1000 | 2.31 s/it | loss 0.982Segmentation fault (core dumped)",
    ],
)
def test_a_shell_s_report_of_a_signal_s_end_reads_in_its_locale_and_after_a_bar(
    line: str,
) -> None:
    (row,) = rows_of(line).to_dicts()
    assert (row[READING], row[FATAL]) == ("crash", True)


@pytest.mark.parametrize(
    "line",
    [
        # glog and absl abort the process once a FATAL line is written: the line is an end
        "F0428 15:45:58.664613 20024 zork.cpp:347] Check failed: Zork::root() ",
        "2020-08-05 09:28:40.563723: F zork/core/gpu_util.cc:292] GPU->CPU Memcpy failed",
        "*** Check failure stack trace: ***",
    ],
)
def test_a_line_at_glog_s_fatal_level_is_the_process_s_end(line: str) -> None:
    (row,) = rows_of(line).to_dicts()
    assert row[FATAL]


def test_glog_s_error_level_is_no_end_of_its_own() -> None:
    line = "E0428 15:45:58.664613 20024 zork.cpp:347] Check failed: Zork::root()"
    (row,) = rows_of(line).to_dicts()
    assert not row[FATAL]


def test_a_word_ending_in_killed_is_no_shell_s_report() -> None:
    assert read("zork: 3 workers NotKilled") == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # kernel lines print no severity word: the statement itself is the report (our wording)
        ("zorkdrv: GPU 0000:3b:00.0: GPU has fallen off the bus.", ("device", "gpu_fault")),
        ("zorkdrv: adapter is not present after the reset", None),
        ("Result = FAIL", None),
        # a runtime's words for a lost node
        ("zork worker exit detail: the owner's node has crashed.", ("host", "node_failure")),
        (
            "zork: node 7f3a at 10.0.0.4 has been marked dead: heartbeats missed",
            ("host", "node_failure"),
        ),
        ("zork actor died because its worker has died", ("general", "crash")),
    ],
)
def test_a_failure_stated_without_a_severity_word_is_read(
    line: str, expected: tuple[str, str] | None
) -> None:
    found = reading(line)
    assert found is not None
    if expected is not None:
        assert found == expected


@pytest.mark.parametrize(
    "line",
    [
        # a runbook quoting what to look for; an option absent from a config
        "runbook: if dmesg says 'GPU has fallen off the bus', reseat the GPU",
        "config key 'warmup' not present, using the default 100",
        "the zork option is no longer available, see --zork-new",
        # a shutdown explaining what may have happened
        "zork shutdown failed. This is expected if one of the workers has crashed.",
    ],
)
def test_what_only_mentions_a_thing_gone_or_dead_is_no_report(line: str) -> None:
    assert read(line) == []


def test_a_non_zero_status_is_an_error_code_without_an_error_word() -> None:
    # a completion or request reported with its status field, abbreviating "error" (our wording)
    assert reading("zork: completion from peer 10.0.0.9 with status=12 vendor err 129") is not None
    assert reading("zorkd: request ended, status: 5 (remote access)") is not None
    assert read("zork: completion with status=0") == []


def test_a_status_at_a_lower_level_an_input_s_end_or_a_cancel_is_no_report() -> None:
    # statuses with their canonical codes (the table above) that report no failure
    assert read("INFO:zork:backend 'tpu' skipped: NOT_FOUND: no platform named tpu") == []
    assert read("W0102 03:04:05.678 1 zork.cc:404] zork stopped: OUT_OF_RANGE: End of input") == []
    assert read("zork: stream closed: CANCELLED: by the client") == []


def test_an_input_s_end_reported_as_a_status_is_no_failure() -> None:
    # a sampler or an input pipeline ends its epoch with OUT_OF_RANGE, even at error level
    assert (
        read("E0717 17:30:22.467953 589 zork.cc:194] GetNodes failed: status:Out of range:") == []
    )
    assert read("zork.errors_impl.OutOfRangeError: End of sequence") == []


def test_a_child_s_end_its_supervisor_reports_with_a_code() -> None:
    # our wording, in the forms launchers report a child process's end with (and the table)
    assert reading("zork worker finished with exit code 137") is not None
    assert read("zork worker finished with exit code 0") == []
    assert read("[rank: 1] Child process with PID 23026 terminated with code -15.") == []
    # a status rather than a code, said to be non-zero (a cloud platform's replica report)
    assert reading("The zork replica 2 exited with a non-zero status of 3.") is not None
    assert reading("zork: worker 1 exited with status 9") is not None
    assert read("The zork replica 2 exited with a non-zero status of 143.") == []


def test_a_traced_command_or_a_quoted_line_is_no_report() -> None:
    # bash's xtrace ("+ " per level) echoes a job script's commands; "> " quotes text
    assert read("+ grep -c 'zork error' run.log") == []
    assert read("++ zorkctl check --fail-on-error") == []
    assert read("> the job failed due to a node failure, it is requeued") == []
    # what the command printed is read
    assert reading("zorkctl: ERROR: device 3 failed its self test") is not None


def test_a_list_of_ranks_at_fault_runs_until_a_line_that_lists_none() -> None:
    # our wording; the list's numbers after a launcher's prefix read as its rank labels
    lines = [
        "[1,0]<stderr>:Stalled ranks:",
        "[1,0]<stderr>:6: [zork.w]",
        "[1,0]<stderr>:11!: [zork.b]",
        "[2026-11-30 04:10:24] zork: training goes on",
        "[1,0]<stderr>:7: [zork.w]",
    ]
    frame = PrefixStripper().strip(
        pl.DataFrame({"job_id": ["1"] * 5, "node": ["n1"] * 5, "message": lines})
    )
    listed = listed_ranks(frame, RAW, "message", ["job_id", "node"])
    assert listed.to_list() == [None, "6", "11", None, None]


def test_a_port_denied_its_active_state_is_no_healthy_port() -> None:
    healthy = "zork-hc: INFO: port mlx5_ib7:1 is ACTIVE (LinkUp 400 Gb/sec)"
    down = "n-273 | ERROR: zork-hc: check failed: No IB port mlx5_ib7:1 is ACTIVE (LinkUp)"
    assert [row[RAW] for row in read(healthy, down)] == [down]


def test_python_s_memory_error_is_the_job_s_allocation_not_the_host_s_memory() -> None:
    # our wording; the class name, split by case, holds a host's "memory error"
    assert reading("MemoryError") == ("memory", "crash")
    assert reading("zork.ShardError: MemoryError while packing shard 3") == ("memory", "crash")
    # a machine's memory error is still the host's
    assert reading("zorkd: ERROR: uncorrected memory error on DIMM B2") == ("host", "node_failure")


def test_a_container_s_start_up_is_the_job_s_set_up_not_its_gpu() -> None:
    # our wording, in the forms container runtimes and the GPU toolkit's CLI report a start
    assert reading(
        'FATAL:   container creation failed: exec: "/opt/zork/bin/nvidia-container-cli": '
        "no such file or directory"
    ) == ("config", "crash")
    assert reading("zork-run: nvidia-container-cli failed; no GPU here?") == ("config", "crash")


def test_a_machine_restarted_unasked_is_a_node_failure() -> None:
    # our wording, as a scheduler's node reason and a BMC's event say it
    assert reading("Reason=Node unexpectedly rebooted [root@2026-11-30T02:11:09]") == (
        "host",
        "node_failure",
    )
    assert reading("zork-bmc: n-273 unexpected power loss") == ("host", "node_failure")
    # a restart someone asked for is none
    assert read("Reason=reboot requested by operator [root@2026-11-30T02:11:09]") == []


def test_a_driver_s_own_failed_assertion_is_no_fault() -> None:
    # our wording, in the form NVIDIA's driver logs its NV_ASSERT checks
    assert read("[ 4242.123456] NVRM: nvAssertFailedNoLog: Assertion failed: zork @ z.c:12") == []
    assert (
        read("NVRM: nvAssertOkFailedNoLog: Assertion failed: Call timed out [NV_ERR_TIMEOUT]") == []
    )
    # a program's failed assertion is its end
    assert reading("zork: zork.c:12: main: Assertion `n > 0' failed.") is not None


def test_an_exception_s_repr_and_a_sentence_led_by_error_are_failures() -> None:
    # our wording; a caught exception printed as its repr, Hydra's forms of a sentence
    assert reading("ZorkException('You asked for 6 devices\\n but have 3')") is not None
    assert reading("Error executing job with overrides: ['experiment=zork']") is not None
    assert reading("Error in call to target 'zork.Trainer':") is not None
    # a metric named error is none
    assert read("Error rate on the zork set: 0.02") == []


def test_a_misconfiguration_is_the_job_s_set_up() -> None:
    line = "MisconfigurationException('You requested gpu: [0, 1, 2, 3]\\n your machine has: [0]')"
    assert reading(line) == ("config", "crash")


def test_a_program_going_on_without_a_feature_is_no_failure() -> None:
    # our wording, in the forms Ray's processes and libraries say what they go on without
    assert (
        read("zorkd: E main.cc:975: Failed to reach the zork agent. Metrics will not be exported.")
        == []
    )
    assert read("ERROR: zork plugin failed to load, falling back to sockets") == []
    # a loud word still ends it
    assert reading("FATAL: zork agent failed, falling back to nothing") is not None


def test_tensorflow_s_status_in_words_is_a_failure() -> None:
    # the forms of TensorFlow before 2.6, with our values
    assert reading("Resource exhausted: OOM when allocating tensor with shape[64,1024]") == (
        "memory",
        "crash",
    )
    assert reading("  (1) Internal: zork kernel launch failed") is not None
    assert read("Unknown: 3 zork files") == []


def test_a_compiler_s_error_and_a_binary_for_other_devices_are_the_job_s_build() -> None:
    # our wording; a logger's dotted name says which module logs (a compiler's driver), not
    # what failed
    assert reading("ERROR 4242 [zorkcc.driver.CommandDriver]: An Internal Compiler Error") == (
        "config",
        "crash",
    )
    assert reading(
        "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"
    ) == (
        "config",
        "crash",
    )
    # a driver said so outside a logger's name is still the node's
    assert reading("zorkd: ERROR: cannot communicate with the NVIDIA driver") == (
        "driver",
        "node_failure",
    )


def test_a_supervisor_s_report_of_a_child_s_failed_exit_is_a_failure_at_any_level() -> None:
    # our wording, in the forms a trial master and a training operator report a child's end
    assert (
        reading("<info>    [2026-11-30, 11:26:48] pod failed with exit code: 1  id=zork")
        is not None
    )
    assert reading("DEBUG\tevents\tPod: zork.job-worker-0 exited with code 1") is not None
    # a stop's code and a clean exit are none
    assert read("INFO: container exited with code 0") == []
    assert read("[rank: 1] Child process with PID 4242 terminated with code -15.") == []


def test_an_exception_wrapping_another_s_class_is_an_exception() -> None:
    # Ray's form, our values
    line = "ray.exceptions.RayTaskError(ZorkError): ray::_Inner.train() (pid=249, ip=10.0.0.78)"
    assert reading(line) is not None


def test_an_error_level_in_a_structured_loggers_field_is_a_severity() -> None:
    assert reading('{"level":"error","msg":"zork device lost","module":"zorkd"}') is not None
    assert reading('time=2026-11-30T02:00:03Z level=error msg="zork device lost"') is not None


def test_errors_counted_as_uncorrected_are_the_hosts() -> None:
    line = "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#2_DIMM#0 (channel:2)"
    assert reading(line) == ("host", "node_failure")


def test_nccls_trace_of_a_returned_error_is_heard_at_its_info_level() -> None:
    # NCCLCHECK logs each caller's file:line and the result, at INFO, only for an error
    assert reading("n1:35819:35819 [0] NCCL INFO init.cc:101 -> 3") is not None
    assert read("n1:35819:35819 [0] NCCL INFO init.cc:101 -> 0") == []
    assert read("n1:35819:35819 [0] NCCL INFO Channel 00/02 : 0 1 -> 3") == []


def test_a_shells_report_of_a_killed_command_is_heard_whatever_the_commands_options() -> None:
    # bash running a batch script reports the signal, then the command line it ended
    line = "/var/spool/slurmd/job41/slurm_script: line 31:  6521 Killed  python -W ignore train.py"
    assert reading(line) is not None
    # a quiet word of the command's own stays quiet where no shell reports an end
    assert read("zork: error: python -W ignore train.py") == []
