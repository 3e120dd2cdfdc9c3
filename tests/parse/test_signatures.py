"""The signature catalogue and its vectorised matcher, on lines in real public formats.

Every line below follows the format of the public source named next to it (issue threads,
driver and framework sources), with our own values; the catalogue cites the same sources.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl
import pytest

from medic.config import from_dict
from medic.ingest.base import Batch
from medic.parse.catalogue import CatalogueError, builtin_catalogue, parse_catalogue
from medic.parse.signatures import (
    SIGNATURES,
    UNMATCHED,
    SignatureParser,
    SignaturesConfig,
    unmatched_only,
)
from medic.testing.builders import batch, log
from medic.timeutil import US
from tests.corpus.bundled import bundled_logs
from tests.detectors.scenarios import Job, detect

CATALOGUE = builtin_catalogue()


def match(*messages: str, **fields: Any) -> list[dict[str, Any]]:
    """The rows that catalogue entries name (the second layer's are tested on their own)."""
    rows = [log(i, m, **fields) for i, m in enumerate(messages)]
    parsed = SignatureParser().parse(batch("logs", rows))
    found = [] if parsed is None else parsed.frame.to_dicts()
    return [row for row in found if not row["signature"].startswith(UNMATCHED)]


def one(message: str, **fields: Any) -> dict[str, Any]:
    rows = match(message, **fields)
    assert len(rows) == 1, f"{message!r} matched {len(rows)} times"
    return rows[0]


@pytest.mark.parametrize("entry", CATALOGUE.signatures.to_dicts(), ids=lambda e: e["id"])
def test_every_catalogue_example_is_named_by_its_own_entry(entry: dict[str, Any]) -> None:
    assert entry["source"].startswith("https://")
    assert any(lit in entry["example"] for lit in entry["literals"])
    assert one(entry["example"])["signature"] == entry["id"]


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        # c10d logs the store's connect timeout at its error level before it raises it: the
        # line holds no exception's "Error: "
        (
            "[E socket.cpp:860] [c10d] The client socket has timed out after 900s while trying"
            " to connect to (gpu-a01, 29500).",
            "rendezvous_timeout",
        ),
        # Slurm's older wording names slurmstepd's own host between its words
        (
            "slurmstepd: error: *** JOB 971827 CANCELLED AT 2026-11-30T06:00:00 DUE TO NODE"
            " gpu-c07 FAILURE ***",
            "slurm_cancelled_node_failure",
        ),
    ],
)
def test_every_wording_an_entry_reads_holds_one_of_its_literals(line: str, signature: str) -> None:
    assert one(line)["signature"] == signature


def test_every_xid_row_cites_nvidia_actions_and_fatal_codes_are_the_known_ones() -> None:
    xids = CATALOGUE.xids
    assert xids["code"].is_unique().all()
    fatal = set(CATALOGUE.fatal_xids())
    assert {46, 48, 62, 64, 74, 79, 95, 119, 120, 122, 123, 136, 140, 143}.issubset(fatal)
    assert set(range(144, 151)).issubset(fatal)
    assert fatal.isdisjoint({13, 31, 43, 45, 63, 92, 109, 154})
    assert set(CATALOGUE.per_process_xids()) == {13, 31, 43, 109}
    restart_app = xids.filter(pl.col("nvidia_action") == "RESTART_APP")
    assert set(restart_app["action"]) == {"restart_job"}
    ignore = xids.filter(pl.col("nvidia_action") == "IGNORE")
    assert set(ignore["severity"]) == {"info"}


@pytest.mark.parametrize(
    ("line", "xid", "pci", "kind", "severity", "action"),
    [
        # NVIDIA/NVSentinel#155
        (
            "NVRM: Xid (PCI:0000:5d:00): 79, GPU has fallen off the bus",
            79,
            "0000:5d:00",
            "gpu_fault",
            "fatal",
            "reboot",
        ),
        # leptonai/gpud#1174
        (
            "NVRM: Xid (PCI:0000:ad:00): 94, pid=70215, name=python3, Contained ECC error",
            94,
            "0000:ad:00",
            "gpu_fault",
            "fatal",
            "restart_job",
        ),
        # NVLink5 Xids: NVIDIA's decode table by unit and error status (a link down: reset)
        (
            "NVRM: Xid (PCI:0000:19:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 04 "
            "(0x0310a1c2 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
            149,
            "0000:19:00",
            "gpu_fault",
            "fatal",
            "reset_gpu",
        ),
        (
            "NVRM: Xid (PCI:0009:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 06 "
            "(0x0211a0c4 0x00000008 0x00000001 0x00000000 0x00100000 0x00000002)",
            145,
            "0009:01:00",
            "gpu_fault",
            "warning",
            "none",
        ),
        # leptonai/gpud#46: an application's illegal instruction, NVIDIA says restart the app
        (
            "[Mon Nov 30 04:21:17 2026] NVRM: Xid (PCI:0000:4c:00): 13, pid='<unknown>', "
            "name=<unknown>, Graphics SM Warp Exception on (GPC 2, TPC 5, SM 1): "
            "Illegal Instruction Parameter",
            13,
            "0000:4c:00",
            "crash",
            "error",
            "restart_job",
        ),
        # NVIDIA/open-gpu-kernel-modules#1150: a follow-on of another Xid
        (
            "kernel: NVRM: Xid (PCI:0000:9a:00): 45, pid=403177, name=python3, "
            "Ch 00000005 caused by previous Xid 149",
            45,
            "0000:9a:00",
            "none",
            "info",
            "none",
        ),
        # row remapping recorded: NVIDIA says ignore (reset at the end of the job)
        (
            "NVRM: Xid (PCI:0000:2a:00): 63, pid=6120, Row Remapper: New row marked for "
            "remapping, reset gpu to activate.",
            63,
            "0000:2a:00",
            "none",
            "info",
            "none",
        ),
    ],
)
def test_xid_lines_take_nvidias_recommended_action_per_code(
    line: str, xid: int, pci: str, kind: str, severity: str, action: str
) -> None:
    row = one(line, job_id=None, source="system")
    assert (row["xid"], row["pci"], row["kind"], row["severity"], row["action"]) == (
        xid,
        pci,
        kind,
        severity,
        action,
    )


def test_unknown_xid_codes_are_kept_as_warnings() -> None:
    row = one("NVRM: Xid (PCI:0000:3b:00): 999, something new")
    assert (row["xid"], row["kind"], row["severity"], row["xid_name"]) == (
        999,
        "gpu_fault",
        "warning",
        None,
    )


def test_multi_line_fallen_off_the_bus_message_is_a_gpu_fault() -> None:
    # NVIDIA/NVSentinel#155: newer drivers split the message over several kernel lines
    rows = match(
        "NVRM: The NVIDIA GPU 0000:c1:00.0",
        "NVRM: (PCI ID: 10de:2330) installed in this system has",
        "NVRM: fallen off the bus and is not responding to commands.",
        job_id=None,
    )
    assert [(r["signature"], r["severity"]) for r in rows] == [("gpu_fallen_off_bus", "fatal")]


@pytest.mark.parametrize(
    ("line", "signature", "kind", "role", "rank"),
    [
        # hiyouga/LlamaFactory#7396
        (
            "[rank4]:[E1130 06:41:19.002917611 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=2217, OpType=ALLREDUCE, "
            "NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000) ran for 600141 "
            "milliseconds before timing out.",
            "nccl_watchdog_timeout",
            "hang",
            "collateral",
            4,
        ),
        # pytorch/pytorch#152780: the watchdog reports the CUDA error of this very rank
        (
            "[rank0]:[E1130 07:02:51.718830142 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID "
            "0(default_pg) Rank 0] Process group watchdog thread terminated with exception: "
            "CUDA error: an illegal memory access was encountered",
            "cuda_illegal_memory_access",
            "crash",
            "root",
            0,
        ),
        # NVIDIA/nccl#1928
        (
            "[rank3]: torch.distributed.DistBackendError: NCCL error in: "
            "/opt/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3120, "
            "remote process exited or there was a network error, NCCL version 2.26.2",
            "nccl_remote_error",
            "crash",
            "collateral",
            3,
        ),
        # tatsu-lab/stanford_alpaca#207
        (
            "[E ProcessGroupNCCL.cpp:481] Some NCCL operations have failed or timed out. Due to "
            "the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data. [E ProcessGroupNCCL.cpp:487] To avoid data "
            "inconsistency, we are taking the entire process down.",
            "nccl_taking_process_down",
            "crash",
            "collateral",
            None,
        ),
        # murong-xu/CADS#4
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has "
            "a total capacity of 79.11 GiB of which 2.06 GiB is free.",
            "cuda_oom",
            "crash",
            "root",
            None,
        ),
        # vllm-project/vllm#5222
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "cuda_uncorrectable_ecc",
            "gpu_fault",
            "root",
            None,
        ),
        # ultralytics/yolov5#1752
        (
            "  what():  CUDA error: unspecified launch failure",
            "cuda_error",
            "crash",
            "root",
            None,
        ),
        # NVIDIA/nccl#795
        (
            "gpu-st-p5-07:92011:92240 [3] misc/socket.cc:538 NCCL WARN Net : "
            "Connection closed by remote peer gpu-st-p5-09.cluster.internal<51207>",
            "nccl_socket_error",
            "crash",
            "collateral",
            None,
        ),
        # NVIDIA/nvidia-resiliency-ext straggler guide
        (
            "STRAGGLER DETECTION WARNING: Some GPUs performance dropped. Affected ranks: [12, 40]",
            "nvrx_straggler",
            "straggler",
            "root",
            None,
        ),
    ],
)
def test_framework_lines_name_their_signature_role_and_rank(
    line: str, signature: str, kind: str, role: str, rank: int | None
) -> None:
    row = one(line)
    assert (row["signature"], row["kind"], row["role"], row["rank"]) == (
        signature,
        kind,
        role,
        rank,
    )


def test_named_groups_are_extracted_only_for_their_entry() -> None:
    rows = match(
        # chrisknewman/tusas#149
        "srun: error: gpu-f03: tasks 4-7: Out Of Memory",
        # nebius/soperator#854
        "salloc: error: Node failure on worker-6",
        # TuSimple/centerformer#4
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: "
        "2 (pid: 51873) of binary: /opt/venv/bin/python",
    )
    got = [(r["signature"], r["host"], r["exit_code"], r["xid"]) for r in rows]
    assert got == [
        ("srun_task_oom", "gpu-f03", None, None),
        ("slurm_node_failure", "worker-6", None, None),
        ("torchrun_worker_failed", None, -11, None),
    ]


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        # ZettaAI/zetta_utils#671 (host redacted by the reporter)
        (
            "slurmstepd: error: *** JOB 611204 ON ... CANCELLED AT 2026-11-29T21:00:05 DUE TO "
            "TIME LIMIT ***",
            "slurm_cancelled_time_limit",
        ),
        # qiskit-community/spank-plugins#17: scancel
        ("slurmstepd: error: *** JOB 58 ON c4 CANCELLED AT 2026-11-30T10:12:01 ***", None),
        # bcbio/bcbio-nextgen#741: older slurmstepd format
        ("slurmstepd: *** JOB 2210457 CANCELLED AT 2026-11-30T11:40:02 *** on sh-4-1", None),
    ],
)
def test_deliberate_ends_are_benign(line: str, signature: str | None) -> None:
    row = one(line)
    assert (row["role"], row["kind"], row["severity"]) == ("benign", "none", "info")
    if signature:
        assert row["signature"] == signature


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA/nccl#1609
        "sc-h800-r2n05:811:2013 [2] NCCL INFO NVLS comm 0x7f20b14c1a10 headRank 2 "
        "nHeads 4 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize "
        "805306368",
        # NVIDIA/nccl-tests#252
        "gpu-a04:41822:42015 [0] NCCL INFO [Service thread] Connection closed by localRank 5",
        # pytorch/pytorch#118369 (a progress bar)
        "Epoch 1:  12%|███ | 6114/50000 [1:02:11<7:26:40,  1.64it/s, loss=3.1, v_num=7k2a]",
        # enhuiz/vall-e#30
        "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:617: "
        "UserWarning: This DataLoader will create 12 worker processes in total. Our suggested "
        "max number of worker in current system is 6, which is smaller than what this "
        "DataLoader is going to create.",
        # pytorch/pytorch#16417 comment: a deprecation warning
        "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use "
        "`torch.amp.autocast('cuda', args...)` instead.",
        # torchrun's own shutdown of healthy workers (Salience-DETR#4)
        "[2026-11-30 08:47:31,261] torch.distributed.elastic.multiprocessing.api: [WARNING] "
        "Sending process 77104 closing signal SIGTERM",
        "Epoch  1,   100/15756; ; ppl: 29296.45 ; lr: 0.0000084 ; updates:      25",
        "[rank0]: iteration 1200/100000 | consumed samples: 2457600 | lm loss: 2.315E+00",
    ],
)
def test_healthy_lines_match_nothing(line: str) -> None:
    assert match(line) == []


@pytest.mark.parametrize(
    ("line", "signature", "kind", "implicates"),
    [
        # lyulyul/shine-cluster#30: driver libraries upgraded under the loaded module
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "nvml_driver_library_mismatch",
            "node_failure",
            "node",
        ),
        (
            "[ 9042.118207] NVRM: API mismatch: the client has the version 550.127.05, but",
            "nvml_driver_library_mismatch",
            "node_failure",
            "node",
        ),
        # pytorch/pytorch#35710: no fabric manager on an NVSwitch system
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            "functions before calling NumCudaDevices() that might have already set an error? "
            "Error 802: system not yet initialized",
            "cuda_system_not_ready",
            "node_failure",
            "node",
        ),
        # the THC form is taken before the generic `cuda runtime error (N)`
        (
            "RuntimeError: cuda runtime error (802) : system not yet initialized at "
            "/opt/conda/work/aten/src/THC/THCGeneral.cpp:50",
            "cuda_system_not_ready",
            "node_failure",
            "node",
        ),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
            "sure that the latest NVIDIA driver is installed and running.",
            "nvidia_smi_no_driver",
            "node_failure",
            "node",
        ),
        # the job's own set-up: a crash that blames no node
        ("[rank2]: RuntimeError: No CUDA GPUs are available", "cuda_no_device", "crash", "none"),
        (
            "RuntimeError: CUDA error: no CUDA-capable device is detected",
            "cuda_no_device",
            "crash",
            "none",
        ),
        (
            "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime "
            "version",
            "cuda_driver_too_old",
            "crash",
            "none",
        ),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11080).",
            "cuda_driver_too_old",
            "crash",
            "none",
        ),
        (
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
            "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
            "cuda_no_driver",
            "crash",
            "none",
        ),
    ],
)
def test_driver_and_init_errors_blame_the_node_only_when_the_node_is_broken(
    line: str, signature: str, kind: str, implicates: str
) -> None:
    row = one(line)
    assert (row["signature"], row["kind"], row["implicates"]) == (signature, kind, implicates)


@pytest.mark.parametrize(
    "line",
    [
        "gpu-a11:4100:4100 [0] NCCL INFO cudaDriverVersion 12040",
        "deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = 12.4, CUDA Runtime Version = "
        "12.4, NumDevs = 8",
        "NVML version        : 550.127",
    ],
)
def test_driver_version_lines_of_healthy_nodes_match_nothing(line: str) -> None:
    assert match(line) == []


@pytest.mark.parametrize(
    "line",
    [
        "2026-11-30 05:12:40.300118: E tensorflow/stream_executor/cuda/cuda_driver.cc:271] "
        "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
        # XLA's form since 2024: a status that holds "CUDA error: " (cuda_error's fatal form)
        "2026-11-30 05:12:40.300118: E external/local_xla/xla/stream_executor/cuda/"
        "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call to "
        "cuInit: UNKNOWN ERROR (303)",
    ],
)
def test_a_runtime_probing_cuda_at_start_up_reports_an_error_not_an_end(line: str) -> None:
    """TensorFlow and JAX log a failed cuInit and go on with another platform."""
    row = one(line)
    assert (row["signature"], row["kind"], row["severity"]) == ("cuda_init_probe", "crash", "error")


def test_parser_output_has_the_stream_schema_and_prefers_the_rank_column() -> None:
    rows = [log(0, "[rank7]: torch.OutOfMemoryError: CUDA out of memory.", rank=3)]
    parsed = SignatureParser().parse(batch("logs", rows))
    assert parsed is not None
    assert parsed.stream == "signatures"
    assert parsed.data.schema == SIGNATURES
    assert parsed.frame["rank"].to_list() == [3]


def test_batches_without_candidates_or_optional_columns_are_handled() -> None:
    parser = SignatureParser()
    quiet = batch("logs", [log(i, f"step {i} loss 1.0") for i in range(100)])
    assert parser.parse(quiet) is None
    bare = pl.DataFrame(
        {
            "time": pl.Series([0]).cast(pl.Datetime("us", "UTC")),
            "node": ["n1"],
            "message": ["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
        }
    )
    parsed = parser.parse(Batch("logs", bare.to_arrow()))
    assert parsed is not None
    assert parsed.frame.select("job_id", "rank", "signature").row(0) == (
        None,
        None,
        "cuda_uncorrectable_ecc",
    )


def test_first_matching_entry_wins() -> None:
    # pytorch/pytorch#152780 quoted above also has a watchdog line: the CUDA error names it
    row = one(
        "Process group watchdog thread terminated with exception: CUDA error: uncorrectable "
        "ECC error encountered"
    )
    assert row["signature"] == "cuda_uncorrectable_ecc"


def test_every_bundled_log_line_is_named_as_a_line_by_line_reading_names_it() -> None:
    # The reference: each line on its own, the first entry (in catalogue order) whose literal it
    # holds and whose pattern matches names it; a traceback's frames aside (the parser keeps a
    # process's first one only where no header came before: tested below).
    logs = bundled_logs()
    entries = [
        (row["id"], row["literals"], re.compile(row["pattern"]))
        for row in CATALOGUE.signatures.iter_rows(named=True)
    ]
    expected = []
    for message in logs.column("message").to_pylist():
        for name, literals, regex in entries:
            if any(lit in message for lit in literals) and regex.search(message):
                expected.append(name)
                break
    parsed = SignatureParser().parse(Batch("logs", logs))
    assert parsed is not None and len(expected) > 1_000
    named = parsed.frame.filter(~pl.col("signature").str.starts_with(UNMATCHED))
    frame = "traceback_frame"
    named = named.filter(pl.col("signature") != frame)
    assert named.get_column("signature").to_list() == [e for e in expected if e != frame]


def test_a_catalogue_without_entries_no_longer_names_their_lines() -> None:
    line = (
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5,"
        " OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012"
        " milliseconds before timing out."
    )
    named = SignatureParser(catalogue=CATALOGUE).parse(batch("logs", [log(0, line)]))
    assert named is not None and "nccl_watchdog_timeout" in named.frame["signature"].to_list()
    reduced = CATALOGUE.without(["nccl_watchdog_timeout"])
    assert len(reduced.signatures) == len(CATALOGUE.signatures) - 1
    assert reduced.signatures["entry"].to_list() == list(range(len(reduced.signatures)))
    left = SignatureParser(catalogue=reduced).parse(batch("logs", [log(0, line)]))
    assert left is None or "nccl_watchdog_timeout" not in left.frame["signature"].to_list()
    with pytest.raises(CatalogueError, match="no signature 'nope'"):
        CATALOGUE.without(["nope"])


def test_malformed_catalogues_fail_with_one_line() -> None:
    entry = dict(CATALOGUE.signatures.drop("entry").row(0, named=True))
    with pytest.raises(CatalogueError, match="kind 'oops'"):
        parse_catalogue({"signature": [{**entry, "kind": "oops"}]})
    with pytest.raises(CatalogueError, match="unknown group 'gpu'"):
        parse_catalogue({"signature": [{**entry, "pattern": "(?P<gpu>x)"}]})
    with pytest.raises(CatalogueError, match="duplicate id"):
        parse_catalogue({"signature": [entry, entry]})
    with pytest.raises(CatalogueError, match="missing key 'source'"):
        parse_catalogue({"signature": [{k: v for k, v in entry.items() if k != "source"}]})


SITE_SIGNATURE = """
[[signature]]
id = "site_fabric_manager_down"
literals = ["fabricmanager"]
pattern = 'fabricmanager.*(?P<host>gpu-\\w+) lost'
kind = "node_failure"
implicates = "node"
severity = "fatal"
role = "root"
action = "drain"
source = "https://example.org/our-runbook"
example = "fabricmanager: NVSwitch fabric on gpu-x1 lost"

[[xid]]
code = 63
mnemonic = "INFOROM_DRAM_RETIREMENT_EVENT"
nvidia_action = "IGNORE"
kind = "gpu_fault"
severity = "fatal"
action = "drain"
"""


def test_a_sites_catalogue_file_is_read_by_the_parser_and_the_detectors_alike(
    tmp_path: Any,
) -> None:
    from medic.pipeline import Pipeline

    site = tmp_path / "site.toml"
    site.write_text(SITE_SIGNATURE)
    pipeline = Pipeline.from_settings({"parsers": {"signatures": {"extra": [str(site)]}}})
    parser = next(p for p in pipeline.parsers if isinstance(p, SignatureParser))
    gpu_fault = next(d for d in pipeline.detectors if d.name == "gpu_fault")
    crash = next(d for d in pipeline.detectors if d.name == "crash")
    assert crash.catalogue is parser.catalogue
    assert 63 in gpu_fault.fatal_xids
    rows = parser.parse(batch("logs", [log(0, "fabricmanager: NVSwitch fabric on gpu-x1 lost")]))
    assert rows is not None
    assert rows.frame.select("signature", "host").row(0) == ("site_fabric_manager_down", "gpu-x1")


def test_a_broken_site_catalogue_is_a_one_line_config_error(tmp_path: Any) -> None:
    from medic.config import ConfigError
    from medic.pipeline import Pipeline

    site = tmp_path / "site.toml"
    site.write_text(SITE_SIGNATURE.replace('kind = "node_failure"', 'kind = "flaky"'))
    with pytest.raises(ConfigError, match=r"site.toml: signature #1 .* kind 'flaky'") as info:
        Pipeline.from_settings({"parsers": {"signatures": {"extra": [str(site)]}}})
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        Pipeline.from_settings({"parsers": {"signatures": {"extra": ["/nonexistent.toml"]}}})
    clash = tmp_path / "clash.toml"
    clash.write_text(SITE_SIGNATURE.replace("site_fabric_manager_down", "xid"))
    with pytest.raises(ConfigError, match="'xid' is already built in"):
        Pipeline.from_settings({"parsers": {"signatures": {"extra": [str(clash)]}}})


def test_a_line_naming_several_ranks_is_one_row_per_rank() -> None:
    # torch/csrc/distributed/c10d/TraceUtils.h desync report (TORCH_NCCL_DESYNC_DEBUG=1): the
    # ranks it names, not the rank that printed it.
    rows = match(
        "[rank0]:\t - To our best knowledge, ranks [4, 11] are the lagging ranks that caused "
        "this timeout. They never joined any collectives",
        "[rank0]:\t     [0, 2] finished collective #88, but didn't join collective #89 "
        "(count from 1)",
        rank=0,
    )
    assert [(r["signature"], r["rank"], r["kind"], r["role"]) for r in rows] == [
        ("nccl_desync_missing_ranks", 4, "hang", "root"),
        ("nccl_desync_missing_ranks", 11, "hang", "root"),
        ("nccl_desync_lagging_ranks", 0, "hang", "root"),
        ("nccl_desync_lagging_ranks", 2, "hang", "root"),
    ]


# --- the second layer: failure lines no entry matches -------------------------------------------

UNKNOWN = "[rank{rank}]: quux writer: flushing shard 12 failed (ENOSPC)"
"""A failure line in no catalogue entry's wording (a made-up library's storage error)."""


def rows_of(*lines: str | tuple[str | None, str], **settings: Any) -> pl.DataFrame:
    """The signature rows of ``lines`` (a message of job 100, or a (job, message) pair)."""
    pairs = [("100", line) if isinstance(line, str) else line for line in lines]
    parser = SignatureParser(from_dict(SignaturesConfig, settings))
    rows = [log(i, message, job_id=job) for i, (job, message) in enumerate(pairs)]
    parsed = parser.parse(batch("logs", rows))
    return pl.DataFrame() if parsed is None else parsed.frame


def test_a_failure_line_no_entry_matches_is_a_sign_saying_so() -> None:
    found = rows_of(
        "step 10 loss 2.1",
        UNKNOWN.format(rank=3),
        ("200", "RuntimeError: CUDA error: an illegal memory access was encountered"),
    )
    assert found.select("signature", "kind", "severity", "role", "rank", "reading").rows() == [
        ("unmatched:storage", "crash", "error", "context", 3, "crash"),
        ("cuda_illegal_memory_access", "crash", "fatal", "root", None, None),
    ]
    assert found.get_column("implicates").to_list()[0] == "none"
    assert found.get_column("message").to_list()[0] == UNKNOWN.format(rank=3)


def test_the_other_failure_lines_of_a_job_whose_root_cause_an_entry_names_are_not_read() -> None:
    # the catalogue named job 100's failure: its other lines are that report's context
    found = rows_of(
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        UNKNOWN.format(rank=3),
        ("200", UNKNOWN.format(rank=5)),
    )
    assert found.select("job_id", "signature").rows() == [
        ("100", "cuda_illegal_memory_access"),
        ("200", "unmatched:storage"),
    ]


@pytest.mark.parametrize(
    ("line", "host"),
    [
        # Ray's GCS on a node it stopped hearing from, by name or by address
        (
            "The node with node id: 9f3e and address: 10.20.3.4 and node name: 10.20.3.4 has "
            "been marked dead because the detector has missed too many heartbeats from it.",
            "10.20.3.4",
        ),
        (
            "zork: error: a worker died unexpectedly. Worker IP address: 10.20.3.5 Worker exit "
            "type: SYSTEM_ERROR",
            "10.20.3.5",
        ),
        ("quux actor died unexpectedly; ip: 10.20.3.6, its node has died", "10.20.3.6"),
        ("zorkd: error: node gpu-b17 failed its health check", "gpu-b17"),
        # an address that is not said to be a host's: where a connection went, not who failed
        ("quux: error: connect to 10.20.3.7:29500 failed", None),
    ],
)
def test_an_unmatched_line_names_its_host_by_name_or_by_address(line: str, host: str) -> None:
    assert rows_of(line).get_column("host").to_list() == [host]


def test_a_host_failure_naming_no_host_takes_the_one_its_reports_field_names() -> None:
    # a launcher's report: its own daemon's node, then the one it lost (our wording)
    lines = (
        "zorkrun has lost communication with a remote daemon.",
        "  Local daemon : [[7,0],0] on node z-head",
        "  Remote daemon: [[7,0],3] on node z-worker-3",
        "zorkrun will now terminate the job.",
    )
    rows = rows_of(*lines)
    assert rows.filter(pl.col("message") == lines[0]).get_column("host").to_list() == ["z-worker-3"]
    # a field whose key the failure does not name says nothing of it
    assert rows_of(lines[0], lines[1]).get_column("host").to_list() == [None]
    # a field that is a host answers a failure that names a node (older Open MPI's form)
    lost = "zorkrun has lost communication with its daemon located on node:"
    rows = rows_of(lost, "", "   hostname:  z-worker-7.cluster.internal", "zorkrun will stop.")
    named = rows.filter(pl.col("message") == lost).get_column("host").to_list()
    assert named == ["z-worker-7.cluster.internal"]
    # ... not one that names neither
    rows = rows_of("zork daemon: lost communication with its peer", "  host: z-worker-8")
    assert rows.get_column("host").to_list() == [None]


def test_an_errno_alone_is_a_value_not_a_report() -> None:
    # a library's note with its errno (a copy refused, done another way): a mention
    noted = rows_of("[0f3c1a:00351] Read -1, expected 268960, errno = 1")
    assert noted.get_column("severity").to_list() == ["warning"]
    # beside a failure, or as an error's code, it is the report's
    failed = rows_of("zork: connect to the store failed, errno = 111", "zork raised error: 2")
    assert failed.get_column("severity").to_list() == ["error", "error"]


def test_lines_of_no_job_make_no_unmatched_sign() -> None:
    assert rows_of((None, UNKNOWN.format(rank=3))).is_empty()


def test_the_second_layer_can_be_switched_off() -> None:
    assert rows_of(UNKNOWN.format(rank=3), unmatched=False).is_empty()
    assert rows_of(UNKNOWN.format(rank=3), unmatched=True).height == 1


def test_a_lone_unmatched_line_of_a_job_that_keeps_training_makes_no_detection() -> None:
    job = Job()
    logs = job.progress(0, 200) + job.rank_logs(40, UNKNOWN, ranks=[3])
    scheduler = [job.start(), job.end(190, "COMPLETED", 0)]
    assert detect(200, logs, job.telemetry(0, 200), scheduler) == []


def test_an_unmatched_line_confirmed_by_the_jobs_failure_is_its_crash_with_that_evidence() -> None:
    job = Job()
    logs = job.progress(0, 40) + job.rank_logs(40, UNKNOWN, ranks=[3])
    scheduler = [job.start(), job.end(45, "FAILED", 1)]
    found = detect(120, logs, job.telemetry(0, 120), scheduler)
    assert [(d.kind, d.culprits) for d in found] == [("crash", ())]
    assert found[0].evidence["signatures"] == ["unmatched:storage"]
    assert "flushing shard 12 failed" in found[0].summary
    assert unmatched_only(found[0].evidence)


def test_only_evidence_made_of_unmatched_signs_is_unmatched() -> None:
    assert unmatched_only({"signatures": ["unmatched:fabric", "unmatched:general"]})
    assert not unmatched_only({"signatures": ["unmatched:fabric", "nccl_watchdog_timeout"]})
    assert not unmatched_only({"signatures": []}) and not unmatched_only({})


def test_a_line_naming_ranks_at_fault_names_them_as_the_root_not_the_printer() -> None:
    # our wording; the shapes are those of runtimes' reports (NCCL's desync report, Horovod's
    # stall inspector, a barrier's timeout): the ranks at fault, before or after the word
    found = rows_of(
        "[rank0]: zork: to our knowledge, ranks [5, 7] are the lagging ranks of this step",
        "[rank2]: zork barrier: missing ranks: 3, 14",
        "[rank1]: zork: Rank 0 is the slowest rank this epoch",
        # where a peer's errors came from (a monitored barrier's peer), and a faulty rank
        "[rank6]: E zork: got errors waiting for the send from rank 2, giving up",
        "[rank4]: zork: faulty rank: 9",
        # its number in brackets right after the word (a serving engine's worker report)
        "2026-12-01 10:42:00,218 - zork - ERROR - agent.py:489 - Rank[4] failed.",
    )
    assert found.select("rank", "role", "implicates").rows() == [
        (5, "root", "none"),
        (7, "root", "none"),
        (3, "root", "none"),
        (14, "root", "none"),
        (2, "root", "none"),
        (9, "root", "none"),
        (4, "root", "none"),
    ]
    # a rank glued to the word is a launcher's label of the printer, not one it names
    glued = rows_of("zork: rank3 failed to reach the store")
    assert glued.select("rank", "role").rows() == [(None, "context")]


def test_a_runtime_error_header_names_the_rank_that_printed_it() -> None:
    # torch_npu's error header: the process's ids, its rank among them (values ours)
    found = rows_of(
        "[ERROR] 2026-12-01-10:45:23 (PID:4117, Device:3, RankID:11) ERR00100 zork failed"
    )
    assert found.select("rank").to_series().to_list() == [11]
    # an MPICH-family abort names its own rank in MPI_COMM_WORLD (comm 0), another comm's not
    found = rows_of(
        "Abort(1) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Recv: zork",
        "MPICH ERROR [Rank 21] - Abort(88) (rank 21 in comm 0): Fatal error in PMPI_Iprobe",
        "Abort(5) (rank 2 in comm 480): Fatal error in PMPI_Bcast: zork",
    )
    assert found.select("rank").to_series().to_list() == [3, 21, None]
    # Open MPI's: in MPI_COMM_WORLD or a duplicate of it, not in a communicator split from it
    found = rows_of(
        "MPI_ABORT was invoked on rank 6 in communicator MPI_COMM_WORLD",
        "MPI_ABORT was invoked on rank 2 in communicator MPI COMMUNICATOR 4 DUP FROM 0",
        "MPI_ABORT was invoked on rank 1 in communicator MPI COMMUNICATOR 7 SPLIT FROM 0",
    )
    assert found.select("rank").to_series().to_list() == [6, 2, None]


def test_a_failure_line_naming_a_peers_address_is_about_that_peer() -> None:
    found = rows_of(
        "gpu-a1:811:900 [0] ERROR zorkfab: retries exhausted talking to peer 10.0.0.9<4001>",
        "[rank3]: ERROR zork: connection closed by peer [10.0.0.4]:29500",
        "[rank3]: zork: connection to 10.0.0.4 failed",
    )
    assert found.select("peer", "implicates").rows() == [
        ("10.0.0.9", "peer"),
        ("10.0.0.4", "peer"),
        (None, "none"),
    ]


def test_a_line_binding_an_interface_to_its_address_announces_its_hosts_address() -> None:
    found = rows_of(
        "n7:811:811 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.7<0>",
        "n7: zork sockets on [0]eth0:10.1.0.7<0> [1]enp65s0f1:10.2.0.7<0>",
        # a GID names both ends, a word's "addr:" no interface; neither is learned
        "n7: zork link localGid ::ffff:10.0.0.7 remoteGid ::ffff:10.0.0.9",
        "n7: inet addr:10.0.0.7  Bcast:10.0.0.255",
    )
    assert found.select("signature", "kind", "implicates", "role", "host", "peer").rows() == [
        ("unmatched:address", "none", "node", "context", "n7", "10.0.0.7"),
        ("unmatched:address", "none", "node", "context", "n7", "10.1.0.7"),
        ("unmatched:address", "none", "node", "context", "n7", "10.2.0.7"),
    ]
    assert rows_of("n7: zork sockets on eth0:10.1.0.7", unmatched=False).is_empty()
    # a line with no node says whose it is; a line of a node Slurm refused ("") teaches none
    lines = [
        {**log(0, "n7:811:811 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.7<0>"), "node": None},
        log(1, "n8:811:811 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.8<0>", node=""),
    ]
    parsed = SignatureParser(SignaturesConfig()).parse(batch("logs", lines))
    assert parsed is not None
    assert parsed.frame.select("host", "peer").rows() == [("n7", "10.0.0.7"), (None, "10.0.0.8")]


def test_ranks_listed_under_a_header_naming_them_at_fault_are_the_root() -> None:
    # our wording; the shapes of Horovod's stall inspector and NCCL's desync report: a header
    # ending in a colon, then one rank (maybe marked) or a bracketed list per line
    found = rows_of(
        "W zork.cc:107] some tensors wait for the remainder of ranks for more than 60 seconds",
        "Missing ranks:",
        "14: [zork.layer3.weight]",
        "7!: [zork.layer5.bias]",
        "the zork barrier goes on",
        "the lagging/dead ranks of the zork barrier are:",
        "  [6, 9] entered barrier #3306, but never left it",
        "  - snapshot of the ranks' latest states:",
        "  #3306 started ranks:",
        "  [0, 1, 2] started BARRIER",
    )
    listed = found.filter(pl.col("role") == "root")
    assert listed.get_column("rank").to_list() == [14, 7, 6, 9]
    assert listed.get_column("reading").to_list() == [None] * 4
    # tasks as JAX's coordination service names them, under a barrier's timeout
    found = rows_of(
        "zork.ZorkError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: Zork. Timed out task"
        " names:",
        "/job:zork_worker/replica:0/task:3",
        "/job:zork_worker/replica:0/task:1",
    )
    # (the header itself is the timeout's report, of no rank)
    assert found.filter(pl.col("role") == "root").get_column("rank").to_list() == [None, 3, 1]


def test_a_stall_report_listing_the_ready_ranks_blames_the_others() -> None:
    # our wording, in the shape of older Horovod stall reports: each stalled tensor is
    # followed by the ranks that did submit it; the rest of the job's ranks hold it up
    stall = (
        "WARNING: some tensors were sent by a subset of ranks and are waiting for remainder of "
        "ranks for more than 60 seconds. Stalled ops: zork.grad_0 [ready ranks: {}]"
    )
    found = rows_of(stall.format("3, 0, 5, 1, 2"))
    assert found.select("signature", "role", "rank").rows() == [("horovod_stall", "root", 4)]
    # a rank above the highest listed is not seen; none left out below it names none
    found = rows_of(stall.format("2, 0, 1"))
    assert found.select("signature", "role", "rank").rows() == [
        ("horovod_stall", "collateral", None)
    ]
    # a number no job's rank reaches names none, and costs nothing
    found = rows_of(stall.format("0, 4000000000"))
    assert found.select("role", "rank").rows() == [("collateral", None)]
    # the rank that printed a reporter's line is no culprit
    found = rows_of("[1,3]<stderr>:" + stall.format("0, 1, 2, 3"))
    assert found.get_column("role").to_list() == ["collateral"]


def test_the_rank_pytorchs_logging_header_names_printed_the_line() -> None:
    # our wording, in the shape of ProcessGroupNCCL's log lines: the default group's rank
    # (no group named, or group 0) printed the line; another group's numbers its own members
    found = rows_of(
        "[E zork.cpp:916] [Rank 1] watchdog caught: CUDA error: misaligned address",
        "[E1023 02:44:30.941 zork.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] watchdog "
        "caught: CUDA error: misaligned address",
        "[E zork.cpp:1537] [PG 2 Rank 5] watchdog caught: CUDA error: misaligned address",
        "[rank6]:[E zork.cpp:916] [Rank 1] watchdog caught: CUDA error: misaligned address",
        "zork says [Rank 4] CUDA error: misaligned address",
    )
    assert found.get_column("rank").to_list() == [1, 3, None, 6, None]


def test_a_list_under_another_writers_header_names_no_rank() -> None:
    lines = [("100", "Missing ranks:"), ("200", "14: [zork.layer3.weight]")]
    assert rows_of(*lines).is_empty()


def test_the_oom_killer_s_summary_is_a_kill_of_the_job_s_process() -> None:
    # mm/oom_kill.c's dump_oom_summary line, printed before its "Killed process" line (our
    # values); an excerpt may end with it
    row = one(
        "[4242.377396] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=zork,"
        "mems_allowed=0-1,task=python,pid=4242,uid=1000"
    )
    assert (row["signature"], row["kind"]) == ("sigkill", "crash")


def test_a_live_process_s_stack_dump_is_a_hang() -> None:
    # our values, in the forms Python's faulthandler, py-spy and gdb print them
    for line, signature in [
        ("Timeout (0:30:00)!", "faulthandler_timeout"),
        ('Thread 0x7F3A2C1B5740 (idle): "MainThread"', "pyspy_thread_dump"),
        ('Thread 48213 (active+gil): "MainThread"', "pyspy_thread_dump"),
        ("Thread 12 (Thread 0x7f2c4a7fe640 (LWP 48213)):", "gdb_thread_dump"),
        (
            '* 1    Thread 0x7f2c4b8a1740 (LWP 48201) "python" 0x00007f2c4bd1a9dd in poll ()',
            "gdb_thread_dump",
        ),
    ]:
        row = one(line)
        assert (row["signature"], row["kind"]) == (signature, "hang"), line
    # a timeout's own words and a thread's mention are none
    assert match("zork: Timeout (0:30:00) set for the store", "Thread 3 (idle) joined") == []


def test_an_allocation_report_is_the_cuda_oom_it_ends() -> None:
    # our values; the report's forms before and after PyTorch 2.1, on a line of their own
    for line in [
        "Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.2 GiB already allocated)",
        "Tried to allocate 3.12 GiB. GPU 6 has a total capacity of 79 GiB of which 1 GiB is free",
    ]:
        assert one(line)["signature"] == "cuda_oom"


def test_no_rocm_device_is_a_step_given_no_gpu_as_no_cuda_device_is() -> None:
    row = one("  what():  HIP error: no ROCm-capable device is detected")
    assert (row["signature"], row["kind"]) == ("cuda_no_device", "crash")


def test_an_oom_the_trainer_caught_and_skipped_is_benign() -> None:
    # fairseq's forms, our values
    row = one(
        "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 1 GiB"
    )
    assert (row["signature"], row["kind"]) == ("cuda_oom_recovered", "none")
    assert one("attempting to recover from OOM in forward/backward pass")["kind"] == "none"


def test_nccl_ras_reports_a_dead_process_with_its_node_and_a_minute_waited() -> None:
    # our lines, in the shapes of NCCL's RAS client (src/ras/client_support.cc, peers.cc,
    # rasnet.cc): the monitor's events and the status report's DEAD section
    found = rows_of(
        "[2026-05-02 03:10:11] PEER_UNRESPONSIVE: Process 7001 on node hgx-c4 managing GPU 6 "
        "peer not responding for 5s (connect timeout)",
        "[2026-05-02 03:11:07] PEER_TIMEOUT_DEAD: Process 7001 on node hgx-c4 managing GPU 6 "
        "peer failed to respond for 75s, declaring dead",
        "[2026-05-02 03:11:07] PEER_DEAD: Process 7001 on node hgx-c4 managing GPUs 6,7 ",
        "[2026-05-02 03:11:09] PEER_DEAD: 10.4.0.17<43117> ",
        "  3 job processes are considered dead (unreachable via the RAS network)",
        "  Missing communicator data from 2 job processes",
        "[2026-05-02 03:12:00] PEER_RECOVERED: Process 7002 on node hgx-c5 managing GPU 1 "
        "peer responding again",
    )
    rows = found.select("signature", "kind", "role", "host", "pid", "peer", "waited_us").rows()
    minute = 60 * US
    assert rows == [
        ("nccl_ras_peer_trouble", "hang", "context", "hgx-c4", 7001, None, None),
        ("nccl_ras_peer_dead", "hang", "root", "hgx-c4", 7001, None, 75 * US),
        ("nccl_ras_peer_dead", "hang", "root", "hgx-c4", 7001, None, minute),
        ("nccl_ras_peer_dead", "hang", "root", None, None, "10.4.0.17", minute),
        ("nccl_ras_dead_report", "hang", "root", None, None, None, minute),
        ("nccl_ras_peer_trouble", "hang", "context", None, None, None, None),
    ]


def test_a_traceback_without_its_header_is_one_report_at_its_first_frame() -> None:
    # our frames, in the shape of CPython's traceback module ('  File "<path>", line N, in
    # <name>'), pasted from a report's middle: the first frame of each process stands for the
    # header; a header, or a frame before, makes the others the same report
    frame = '[rank{r}]:   File "/opt/app/train.py", line {n}, in step'
    found = rows_of(
        frame.format(r=3, n=10),
        "[rank3]:     loss = model(batch)",
        frame.format(r=3, n=20),
        frame.format(r=5, n=10),
        "[rank6]: Traceback (most recent call last):",
        frame.format(r=6, n=30),
        # faulthandler's dump writes no comma: no exception's frame
        'File "/opt/app/train.py", line 40 in step',
    )
    assert found.select("signature", "rank").rows() == [
        ("traceback_frame", 3),
        ("traceback_frame", 5),
        ("python_traceback", 6),
    ]
    # other tracebacks' frames, one job each: Rich's box (rich/traceback.py), dmlc's fatal
    # check (dmlc-core logging.h), Lua's (lauxlib.c), c10's (c10/util/Backtrace.cpp); a
    # debugger's frame is no exception's
    frames = {
        "1": "│ /opt/app/zork/strategies/ddp.py:204 in setup_distributed          │",
        "2": "[bt] (3) /opt/lib/libzork.so(ZorkOp::Forward()+0x5d) [0x7f0a1c2d3e4f]",
        "3": "        [C]: in function 'error'",
        "4": "        /opt/zork/init.lua:44: in function 'forward'",
        "5": "#3  0x00007f0a1c2d3e4f in zork_wait () from /opt/lib/libzork.so",
        "6": "frame #4: <unknown function> + 0x1a2b3 (0x7f0a1c2d3e4f in /opt/lib/libzork.so)",
    }
    found = rows_of(*frames.items())
    assert found.select("job_id", "signature").rows() == [
        (job, "traceback_frame") for job in ("1", "2", "3", "4", "6")
    ]


def test_the_frames_of_a_listing_that_is_no_exception_are_its_own() -> None:
    # our lines, in the shapes of Inductor's cudagraph note, Dynamo's graph-break log and
    # Python logging's stack_info: each header is no failure, and its frames are its own
    frame = '  File "/opt/app/zork/model.py", line {n}, in forward'
    found = rows_of(
        "skipping cudagraphs due to cpu device (arg3_1). Found from :",
        frame.format(n=88),
        "[rank2]:W1203 10:01:02.000000 4242 symbolic_convert.py:551] User code traceback:",
        "[rank2]:" + frame.format(n=91),
        "Stack (most recent call last):",
        frame.format(n=95),
    )
    assert found.select("signature", "kind").rows() == [("stack_listing", "none")] * 3


def test_a_traceback_read_with_other_batches_is_judged_within_its_own() -> None:
    # a replay reads a stretch of batches in one call: a frame after the batch its header was
    # in stands for a header of its own, as when its batch is read alone (a live feed's)
    parser = SignatureParser()
    first = batch("logs", [log(1, "[rank3]: Traceback (most recent call last):", job_id="7")])
    second = batch(
        "logs", [log(2, '[rank3]:   File "/opt/app/train.py", line 9, in step', job_id="7")]
    )
    alone = [parser.parse(b) for b in (first, second)]
    together = parser.parse_apart([first, second])
    assert (
        [b.frame.get_column("signature").to_list() for b in together if b is not None]
        == [b.frame.get_column("signature").to_list() for b in alone if b is not None]
        == [["python_traceback"], ["traceback_frame"]]
    )
