"""Verbatim texts that real GPU clusters print, as templates.

Sources: NVIDIA's Xid catalogue and driver
messages, PyTorch ProcessGroupNCCL / torch.distributed.elastic sources, NCCL debug output,
Slurm's slurmstepd/srun messages. Placeholders in ``{braces}`` are filled per run with
``fill`` or per rank by ``sink.fill_templates`` (``{rank}``, ``{local_rank}``, ``{host}``,
``{pid}``, ``{tid}``, ``{ip}``, ``{glog}``, ``{pylog}``, ``{p}`` = torchrun's ``[rankN]:``
prefix when the job's launcher adds one).
"""

from __future__ import annotations

from typing import Any


class _Keep(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(template: str, **values: Any) -> str:
    """Fill the named placeholders, leaving the others for the per-rank renderer."""
    return template.format_map(_Keep(values))


def fill_all(templates: list[str] | tuple[str, ...], **values: Any) -> list[str]:
    return [fill(t, **values) for t in templates]


# --- NVIDIA driver (kernel log, source "system") -------------------------------------------

XID_TEXT = {
    13: "Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of Range Address",
    31: "Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_2 faulted @ 0x7f2a_"
    "3c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
    "partition {partition}, subpartition {subpartition}.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    74: "NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
    109: "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x1c062",
    119: "Timeout after 6s of waiting for RPC response from GPU{gpu} GSP! Expected function 76 "
    "(GSP_RM_CONTROL) (0x20802a02 0x8).",
}
# Driver generations print the process differently.
XID_LINE = {
    "r535": "NVRM: Xid (PCI:{bus}): {xid}, pid={pid}, name={name}, {text}",
    "r470": "NVRM: Xid (PCI:{bus}): {xid}, pid={pid}, {text}",
    "r550": "NVRM: Xid (PCI:{bus}): {xid}, pid='<unknown>', name=<unknown>, {text}",
}
GPU_IDENTITY = (
    "NVRM: GPU at PCI:{bus}: GPU-{uuid}",
    "NVRM: GPU Board Serial Number: {serial}",
)
FALLEN_OFF_TAIL = (
    "NVRM: GPU {pci}: GPU has fallen off the bus.",
    "NVRM: A GPU crash dump has been created. If possible, please run",
    "NVRM: nvidia-bug-report.sh as root to collect this data before",
    "NVRM: the NVIDIA kernel module is unloaded.",
)

# Harmless journal lines every node writes now and then.
SYSTEM_NOISE = (
    "systemd[1]: Started Session {n} of User root.",
    "systemd[1]: session-{n}.scope: Deactivated successfully.",
    "sshd[{pid}]: Accepted publickey for root from 10.0.0.{n} port {port} ssh2: ED25519 SHA256:"
    "q3kLzT1mV0u9m4Y2bF0s8pXcQwR7eJhN5aKdUo6iGvE",
    "systemd[1]: Starting nvidia-dcgm.service - NVIDIA DCGM service...",
    "kernel: mlx5_core 0000:{nic}:00.0: mlx5_pcie_event:299:(pid {pid}): PCIe slot advertised "
    "sufficient power (27W).",
    "chronyd[{pid}]: Selected source 10.0.0.1 (ntp1.cluster.local)",
    "nvidia-persistenced[{pid}]: device 0000:{bus}.0 - persistence mode enabled.",
)

# --- NCCL (stdout of every rank with NCCL_DEBUG=INFO) ------------------------------------

NCCL_BOOT = (
    "{host}:{pid}:{pid} [{local_rank}] NCCL INFO cudaDriverVersion 12040",
    "{host}:{pid}:{pid} [{local_rank}] NCCL INFO Bootstrap : Using ib0:{ip}<0>",
    "{host}:{pid}:{pid} [{local_rank}] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot "
    "open shared object file: No such file or directory No plugin found (libnccl-net.so), using "
    "internal implementation",
)
NCCL_VERSION = "NCCL version {nccl}+cuda12.4"
NCCL_COMM_INIT = (
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB "
    "[2]mlx5_2:1/IB [3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB "
    "[RO]; OOB ib0:{ip}<0>",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Using non-device net plugin version 0",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Using network IB",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO ncclCommInitRank comm 0x{comm} rank {rank} "
    "nranks {nranks} cudaDev {local_rank} nvmlDev {local_rank} busId {busid} commId 0x{commid} "
    "- Init START",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Setting affinity for GPU {local_rank} to "
    "ffffffff,00000000,ffffffff",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO NVLS multicast support is available on dev "
    "{local_rank}",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO comm 0x{comm} rank {rank} nRanks {nranks} "
    "nNodes {nnodes} localRanks 8 localRank {local_rank} MNNVL 0",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO P2P Chunksize set to 524288",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Connected all rings",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Connected all trees",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls "
    "channels, 32 p2p channels, 32 p2p channels per peer",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO ncclCommInitRank comm 0x{comm} rank {rank} "
    "nranks {nranks} cudaDev {local_rank} nvmlDev {local_rank} busId {busid} commId 0x{commid} "
    "- Init COMPLETE",
    "{host}:{pid}:{tid} [{local_rank}] NCCL INFO Init timings: rank {rank} nranks {nranks} total "
    "1.08 (kernels 0.51, bootstrap 0.22, allgathers 0.01, topo 0.28, graphs 0.04, connections "
    "0.02, rest 0.01)",
)
# Harmless warnings: an InfiniBand async event mid-run, proxy threads at teardown.
NCCL_WARN_BENIGN = (
    "{host}:{pid}:{tid} [{local_rank}] NCCL WARN NET/IB : mlx5_{hca}:1 Got async event : GID "
    "table change",
    "{host}:{pid}:{tid} [{local_rank}] NCCL WARN [Service thread] Accept failed Resource "
    "temporarily unavailable",
    "{host}:{pid}:{tid} [{local_rank}] NCCL WARN [Proxy Service {local_rank}] Failed to execute "
    "operation Close from rank {rank}, retcode 3",
)
NCCL_IB_ERROR = {
    "old": "NET/IB : Got completion from peer {peer_ip}<{port}> with error 12, opcode 0, len 0, "
    "vendor err 129 (Recv) localGid ::ffff:{ip} remoteGid ::ffff:{peer_ip}",
    "new": "NET/IB : Got completion from peer {peer_ip}<{port}> with status=12 opcode=0 len=0 "
    "vendor err 129 (Recv) localGid ::ffff:{ip} remoteGids::ffff:{peer_ip}",
}

# --- PyTorch start-up warnings -------------------------------------------------------------

SOCKET_RETRY = (
    "{p}[W{glog} socket.cpp:752] [c10d] The client socket has failed to connect to "
    "[{master}]:{port} (errno: 111 - Connection refused)."
)
STARTUP_WARNINGS = (
    (
        "{p}/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py:4631: "
        "UserWarning: No device id is provided via `init_process_group` or `barrier `. Using the "
        "current device set by the user. ",
        "{p}  warnings.warn(  # warn only once",
    ),
    (
        "[rank{rank}]:[W{glog} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {rank}]  using "
        "GPU {local_rank} to perform barrier as devices used by this process are currently "
        "unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.",
    ),
    (
        "{p}/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:1399: FutureWarning:"
        " `torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', "
        "args...)` instead.",
        "{p}  with device_autocast_ctx, torch.cpu.amp.autocast(**cpu_autocast_kwargs), "
        "recompute_context:  # type: ignore[attr-defined]",
    ),
    (
        "{p}/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/module/base.py:630:"
        " UserWarning: To guarantee overlapping TP and SP collectives with the backwardGEMMs, set "
        "environment variable CUDA_DEVICE_MAX_CONNECTIONS = 1",
        "{p}  warnings.warn(",
    ),
    (
        "{p}/usr/local/lib/python3.10/dist-packages/torch/_dynamo/variables/functions.py:700: "
        "UserWarning: Graph break due to unsupported builtin None._SimpleCData.__new__. This "
        "function is either a Python builtin (e.g. _warnings.warn) or a third-party C/C++ Python "
        "extension (perhaps created with pybind).",
        "{p}  torch._dynamo.utils.warn_once(msg)",
    ),
)

# --- PyTorch ProcessGroupNCCL watchdog ---------------------------------------------------------

WATCHDOG = {
    # PyTorch >= 2.5 (verbatim, see the notes).
    "new": (
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel},"
        " Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank "
        "{rank}]  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued"
        " work: {enqueued}, last completed work: {completed}",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:667] Stack trace of the failed collective not "
        "found, potentially because FlightRecorder is disabled. You can enable it by setting "
        "TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:681] [Rank {rank}] Some NCCL operations have "
        "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
        "operations might run on corrupted/incomplete data.",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:695] [Rank {rank}] To avoid data "
        "inconsistency, we are taking the entire process down.",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank "
        "{rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}"
        ", NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing"
        " out.",
        "{p}terminate called after throwing an instance of 'c10::DistBackendError'",
        "{p}  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread "
        "terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)="
        "{timeout_ms}) ran for {ran_ms} milliseconds before timing out.",
        "{p}Exception raised from checkTimeout at /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:632 (most recent call first):",
        "{p}frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f4c1e2b9446 "
        "in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
    ),
    # PyTorch 2.0 - 2.1 (no rank prefix, std::runtime_error).
    "old": (
        "{p}[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
        "Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds before timing out.",
        "{p}[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.",
        "{p}[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire "
        "process down.",
        "{p}terminate called after throwing an instance of 'std::runtime_error'",
        "{p}  what():  [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
        "{seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for"
        " {ran_ms} milliseconds before timing out.",
    ),
}
# A rank whose peer died: NCCL notices the broken connection long before the watchdog.
REMOTE_ERROR = {
    "new": (
        "{host}:{pid}:{tid} [{local_rank}] NCCL WARN {ib_error}",
        "{host}:{pid}:{tid} [{local_rank}] NCCL INFO transport/net.cc:1298 -> 6",
        "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1575] [PG ID 0 PG GUID 0(default_pg) Rank "
        "{rank}] Process group watchdog thread terminated with exception: NCCL error: remote "
        "process exited or there was a network error, NCCL version {nccl}",
        "{p}ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.",
        "{p}Last error:",
        "{p}{ib_error}",
        "{p}terminate called after throwing an instance of 'c10::DistBackendError'",
    ),
    "old": (
        "{host}:{pid}:{tid} [{local_rank}] NCCL WARN {ib_error}",
        "{p}[E ProcessGroupNCCL.cpp:852] [Rank {rank}] NCCL watchdog thread terminated with "
        "exception: NCCL error: remote process exited or there was a network error, NCCL version "
        "{nccl}",
        "{p}ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.",
        "{p}Last error:",
        "{p}{ib_error}",
        "{p}terminate called after throwing an instance of 'std::runtime_error'",
    ),
}
# The faulty GPU's own rank once the driver has given up on the device.
CUDA_FAILURE = {
    "ecc": "CUDA error: uncorrectable ECC error encountered",
    "lost": "CUDA error: unspecified launch failure",
    "illegal": "CUDA error: an illegal memory access was encountered",
}
CUDA_ERROR_HINTS = (
    "{p}CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "{p}For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "{p}Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)
CUDA_WATCHDOG = (
    "[rank{rank}]:[E{glog} ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    " Process group watchdog thread terminated with exception: {cuda}",
    "{p}terminate called after throwing an instance of 'c10::DistBackendError'",
    "{p}  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread "
    "terminated with exception: {cuda}",
)

# --- torch.distributed.elastic (torchrun's agent, one per node) ----------------------------

# torchrun's agent logs through glog-style records since PyTorch 2.4, plain logging before.
AGENT_SIGTERM = {
    "new": "W{pylog} {agent} torch/distributed/elastic/multiprocessing/api.py:897] Sending "
    "process {pid} closing signal SIGTERM",
    "old": "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {pid} closing "
    "signal SIGTERM",
}
AGENT_FAILED = {
    "new": "E{pylog} {agent} torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of binary: /usr/bin/python3",
    "old": "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {exitcode}) "
    "local_rank: {local_rank} (pid: {pid}) of binary: /usr/bin/python3",
}
AGENT_SIGNAL = {
    "new": "W{pylog} {agent} torch/distributed/elastic/agent/server/api.py:704] Received "
    "Signals.SIGTERM death signal, shutting down workers",
    "old": "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting "
    "down workers",
}
CHILD_FAILED_HEAD = (
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/'
    'errors/__init__.py", line 355, in wrapper',
    "    return f(*args, **kwargs)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 919, in main',
    "    run(args)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 910, in run',
    "    elastic_launch(",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 138,'
    " in __call__",
    "    return launch_agent(self._config, self._entrypoint, list(args))",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 269,'
    " in launch_agent",
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "{script} FAILED",
    "------------------------------------------------------------",
)
CHILD_FAILURE = (
    "[{index}]:",
    "  time      : {when}",
    "  host      : {host}",
    "  rank      : {rank} (local_rank: {local_rank})",
    "  exitcode  : {exitcode} (pid: {pid})",
    "  error_file: <N/A>",
    "  traceback : {traceback}",
)
SIGNAL_TRACEBACK = {
    -6: "Signal 6 (SIGABRT) received by PID {pid}",
    -9: "Signal 9 (SIGKILL) received by PID {pid}",
    -11: "Signal 11 (SIGSEGV) received by PID {pid}",
    -15: "Signal 15 (SIGTERM) received by PID {pid}",
    1: "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
}
SIGNAL_EXCEPTION = (
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/'
    'api.py", line 84, in _terminate_process_handler',
    '    raise SignalException(f"Process {{os.getpid()}} got signal: {{sigval}}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process {agent} got signal: 15",
)

# --- Python exceptions in a rank ---------------------------------------------------------------

OOM = (
    "{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc:.2f} GiB. GPU "
    "{local_rank} has a total capacity of 79.11 GiB of which {free:.2f} GiB is free. Including "
    "non-PyTorch memory, this process has {used:.2f} GiB memory in use. Of the allocated memory "
    "{allocated:.2f} GiB is allocated by PyTorch, and {reserved:.2f} GiB is reserved by PyTorch "
    "but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
    "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-"
    "variables)"
)
DATALOADER_FRAMES = (
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 701,'
    " in __next__",
    "{p}    data = self._next_data()",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line '
    "1465, in _next_data",
    "{p}    return self._process_data(data)",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line '
    "1491, in _process_data",
    "{p}    data.reraise()",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/_utils.py", line 715, in reraise',
    "{p}    raise exception",
)
USER_ERRORS = {
    "KeyError": (
        "{p}KeyError: Caught KeyError in DataLoader worker process 3.",
        "{p}Original Traceback (most recent call last):",
        '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/worker.py", '
        "line 351, in _worker_loop",
        "{p}    data = fetcher.fetch(index)  # type: ignore[possibly-undefined]",
        '{p}  File "/workspace/data/packed_dataset.py", line 88, in __getitem__',
        '{p}    tokens = sample["input_ids"]',
        "{p}KeyError: 'input_ids'",
    ),
    "FileNotFoundError": (
        "{p}FileNotFoundError: Caught FileNotFoundError in DataLoader worker process 0.",
        "{p}Original Traceback (most recent call last):",
        '{p}  File "/workspace/data/packed_dataset.py", line 61, in _open_shard',
        '{p}    return np.memmap(path, dtype=np.uint16, mode="r")',
        "{p}FileNotFoundError: [Errno 2] No such file or directory: "
        "'/lustre/datasets/fineweb-edu/train_00{shard}.bin'",
    ),
    "ValueError": ("{p}ValueError: Expected input batch_size (4) to match target batch_size (3).",),
}
SEGFAULT = (
    "{p}Fatal Python error: Segmentation fault",
    "{p}",
    "{p}Current thread 0x00007f3d2a7fc740 (most recent call first):",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/autograd/graph.py", line 825 in '
    "_engine_run_backward",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/autograd/__init__.py", line 289 in '
    "backward",
    '{p}  File "/usr/local/lib/python3.10/dist-packages/torch/_tensor.py", line 581 in backward',
    "{p}",
    "{p}Extension modules: numpy.core._multiarray_umath, numpy.core._multiarray_tests, torch._C, "
    "torch._C._fft, torch._C._linalg, torch._C._nn, torch._C._sparse (total: 98)",
)

# --- Slurm (slurmstepd / srun in the job's output, slurmd / slurmctld in the journal) ------

SLURM_TASK_EXIT = "srun: error: {node}: task {task}: Exited with exit code {code}"
SLURM_STEP_ABORTED = "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."
SLURM_NODE_FAILURE = "srun: error: Node failure on {node}"
# slurmstepd announces why it kills a job or a step; {what} is "JOB 4242" or "STEP 4242.0".
SLURM_CANCELLED = "slurmstepd: error: *** {what} ON {node} CANCELLED AT {when}{why} ***"
CANCEL_REASONS = {
    "scancel": "",
    "timeout": " DUE TO TIME LIMIT",
    "requeue": " DUE TO JOB REQUEUE",
    "node_fail": " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS",
}
SLURMD_LAUNCH = (
    "slurmd[{pid}]: launch task StepId={raw}.0 request from UID:{uid} GID:{uid} HOST:{ip} "
    "PORT:{port}"
)
SLURMCTLD_NOT_RESPONDING = "slurmctld[{pid}]: error: Nodes {node} not responding"
SLURMCTLD_KILL = "slurmctld[{pid}]: Killing JobId={raw} on failed node {node}"
SLURMCTLD_REQUEUE = "slurmctld[{pid}]: requeue job JobId={raw} due to failure of node {node}"
SLURMCTLD_DOWN = "slurmctld[{pid}]: error: Nodes {node} not responding, setting DOWN"

# --- InfiniBand, NFS and the kernel's hung-task watchdog (source "system") ------------------
# The mlx5 driver names the port's netdev when its carrier changes ("mlx5_core <pci> <dev>:
# Link down|up", mlx5e_update_carrier; observed e.g. in bigstack-oss/cubecos#733); NCCL prints
# the verbs async event of a device it has open ("NET/IB : <dev>:<port> Got async event :
# <ibv_event_type_str>", transport/net_ib.cc: "port error", "port active").
IB_LINK = "kernel: mlx5_core {nic} ib{port}: Link {state}"
IB_ASYNC_EVENT = (
    "{host}:{pid}:{tid} [{local_rank}] NCCL WARN NET/IB : mlx5_{hca}:1 Got async event : {event}"
)
# Bus ids of the eight ConnectX adapters of a node, one per GPU (rail-optimised HGX).
IB_NIC_BUS = (
    "0000:1a:00.0",
    "0000:2c:00.0",
    "0000:3c:00.0",
    "0000:5e:00.0",
    "0000:9c:00.0",
    "0000:ad:00.0",
    "0000:bc:00.0",
    "0000:dc:00.0",
)
# net/sunrpc/clnt.c (call_timeout / call_decode) and kernel/hung_task.c.
NFS_NOT_RESPONDING = "kernel: nfs: server {server} not responding, still trying"
NFS_OK = "kernel: nfs: server {server} OK"
HUNG_TASK = (
    "kernel: INFO: task {comm}:{pid} blocked for more than {seconds} seconds.",
    "kernel:       Tainted: P           OE     5.15.0-{build}-generic #{build}-Ubuntu",
    'kernel: "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
)
