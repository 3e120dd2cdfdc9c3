"""Lines that NVIDIA's catalogues decide by what they carry: NVSwitch SXids (code and the
driver's severity word), NVLink5 Xids 144-150 (unit and error status) and Xid 154 (the
recovery action it states). Lines are ours, in the formats of NVIDIA's documents."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from medic.parse.catalogue import CatalogueError, builtin_catalogue, parse_catalogue
from medic.parse.signatures import SignatureParser
from medic.testing.builders import batch, log

CATALOGUE = builtin_catalogue()


def verdict(message: str) -> tuple[str, str, str, str]:
    parsed = SignatureParser().parse(batch("logs", [log(0, message, job_id=None)]))
    assert parsed is not None, f"{message!r} not recognised"
    row = parsed.frame.to_dicts()[0]
    return row["signature"], row["kind"], row["severity"], row["action"]


# --- (a) NVSwitch SXids ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "severity", "action"),
    [
        # the driver's word decides, whatever the code
        (
            "nvidia-nvswitch1: SXid (PCI:0000:86:00.0): 20012, Non-fatal, Link 17 ...",
            "warning",
            "none",
        ),
        (
            "[ 811.204117] nvidia-nvswitch4: SXid (PCI:0000:8a:00.0): 24007, "
            "Fatal, Link 3 sourcetrack",
            "fatal",
            "reboot",
        ),
        (
            "kernel: nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 22003, Fatal, Link 40 minion",
            "fatal",
            "reboot",
        ),
        # no word: the section of NVIDIA's SXid catalogue the code is in
        (
            "nvidia-nvswitch2: SXid (PCI:0000:a7:00.0): 12020, Data {0x00000011, 0x00000002}",
            "fatal",
            "reboot",
        ),
        ("nvidia-nvswitch2: SXid (PCI:0000:a7:00.0): 11012, Data {0x00000001}", "warning", "none"),
        # a code NVIDIA does not list, no word: kept as a warning, never acted on
        (
            "nvidia-nvswitch2: SXid (PCI:0000:a7:00.0): 29999, Severity 1 Engine instance 00",
            "warning",
            "none",
        ),
    ],
)
def test_sxid_severity_is_the_drivers_word_else_nvidias_section(
    line: str, severity: str, action: str
) -> None:
    assert verdict(line) == ("sxid", "gpu_fault", severity, action)


def test_sxid_driver_tag_is_not_taken_for_a_host() -> None:
    rows = SignatureParser().parse(
        batch(
            "logs",
            [
                log(
                    0,
                    "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 23001, Fatal, Link 2",
                    node="gpu-07",
                )
            ],
        )
    )
    assert rows is not None
    assert rows.frame["host"].to_list() == [None]


def test_every_sxid_row_has_a_known_class_and_fatal_ones_restart_the_node() -> None:
    sxids = CATALOGUE.sxids
    assert sxids["code"].is_unique().all()
    fatal = sxids.filter(sxids["nvidia_class"].is_in(["fatal", "always_fatal"]))
    assert set(fatal["severity"]) == {"fatal"} and set(fatal["action"]) == {"reboot"}
    rest = sxids.filter(~sxids["nvidia_class"].is_in(["fatal", "always_fatal"]))
    assert set(rest["severity"]) == {"warning"} and set(rest["action"]) == {"none"}


# --- (b) NVLink5 Xids by unit and error status -----------------------------------------------


@pytest.mark.parametrize(
    ("line", "severity", "action"),
    [
        # RLW_REMAP status 0x40: NVIDIA says reset the GPU; status 0x100: ignore
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, RLW_REMAP Fatal XC0 i0 Link 05 "
            "(0x00200082 0x00000040 0x0 0x0)",
            "fatal",
            "reset_gpu",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 05 "
            "(0x00200082 0x00000100 0x0 0x0)",
            "warning",
            "none",
        ),
        # a unit NVIDIA writes as TLW_RX/TLW_RX_PIPE0, printed either way
        (
            "NVRM: Xid (PCI:0000:3b:00): 146, TLW_RX/TLW_RX_PIPE0 Fatal XC0 i0 "
            "Link 01 (0x0000a0c3 0x00000004)",
            "fatal",
            "reset_gpu",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 146, TLW_RX_PIPE0 Nonfatal XC0 i0 Link 01 "
            "(0x0000a0c3 0x00000002)",
            "warning",
            "none",
        ),
        # NETIR_BER_EVENT: a bit-error-rate report, never fatal
        (
            "NVRM: Xid (PCI:0000:3b:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link "
            "11 (0x00089226 0x00000002)",
            "warning",
            "none",
        ),
        # MSE watchdog: fatal, reset
        (
            "NVRM: Xid (PCI:0000:3b:00): 150, MSE_WATCHDOG Fatal XC0 i0 Link -1 "
            "(0x00000000 0x00000000)",
            "fatal",
            "reset_gpu",
        ),
        # a status the table does not list: the line's own word
        (
            "NVRM: Xid (PCI:0000:3b:00): 147, TREX Nonfatal XC0 i0 Link 02 (0x0000e104 0x00000400)",
            "warning",
            "none",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 147, TREX Fatal XC0 i0 Link 02 (0x0000e104 0x00000400)",
            "fatal",
            "drain",
        ),
        # the driver's "Fatal" is never overruled by a status NVIDIA lists as non-fatal
        (
            "NVRM: Xid (PCI:0000:3b:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 13 "
            "(0x0409a0c2 0x00000008 0x00000000 0x00000000)",
            "fatal",
            "drain",
        ),
        # cut off before the status: the word
        ("NVRM: Xid (PCI:0000:3b:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe4", "fatal", "drain"),
    ],
)
def test_nvlink5_xid_takes_nvidias_verdict_for_its_unit_and_status(
    line: str, severity: str, action: str
) -> None:
    assert verdict(line) == ("xid_nvlink5", "gpu_fault", severity, action)


# --- (d) fields in any order: a non-fatal line is never drained ------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        "pid=31877, name=pt_main_thread, ",
        "name=pt_main_thread, pid=31877, ",
        "pid='<unknown>', name=<unknown>, ",
        "pid=31877, ",
        "",
    ],
)
def test_nonfatal_nvlink5_line_with_process_fields_is_not_a_fault(fields: str) -> None:
    line = (
        f"NVRM: Xid (PCI:0000:c4:00): 145, {fields}RLW_SRC_TRACK Nonfatal XC1 i0 Link 07 "
        "(0x0407a8e2 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)"
    )
    assert verdict(line) == ("xid_nvlink5", "gpu_fault", "warning", "none")


def test_generic_xid_reads_its_pid_wherever_it_stands() -> None:
    for line in (
        "NVRM: Xid (PCI:0000:c4:00): 31, pid=4412, name=python3, Ch 00000008",
        "NVRM: Xid (PCI:0000:c4:00): 31, name=python3, pid=4412, Ch 00000008",
    ):
        parsed = SignatureParser().parse(batch("logs", [log(0, line, job_id=None)]))
        assert parsed is not None
        assert parsed.frame["pid"].to_list() == [4412]


# --- (c) Xid 154: the recovery action it states ------------------------------------------------


@pytest.mark.parametrize(
    ("recovery", "kind", "severity", "action"),
    [
        ("0x1 (GPU Reset Required)", "gpu_fault", "fatal", "reset_gpu"),
        ("0x2 (Node Reboot Required)", "gpu_fault", "fatal", "reboot"),
        ("0x4 (Drain and Reset)", "gpu_fault", "fatal", "drain"),
        ("0x0 (None)", "none", "info", "none"),
    ],
)
def test_xid_154_takes_the_recovery_action_it_states(
    recovery: str, kind: str, severity: str, action: str
) -> None:
    line = (
        "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 "
        f"(None) to {recovery}"
    )
    assert verdict(line) == ("xid_recovery_action", kind, severity, action)


def test_xid_154_without_a_stated_action_stays_a_follow_on() -> None:
    assert verdict("NVRM: Xid (PCI:0000:5d:00): 154, pid=771, name=python3, see Xid 149") == (
        "xid_follow_on",
        "none",
        "info",
        "none",
    )


# --- the decode tables -------------------------------------------------------------------------


def test_decode_tables_are_validated_like_the_rest() -> None:
    with pytest.raises(CatalogueError, match=r"sxid #1 \(20034\): nvidia_class 'deadly'"):
        parse_catalogue(
            {
                "sxid": [
                    {
                        "code": 20034,
                        "name": "x",
                        "nvidia_class": "deadly",
                        "severity": "fatal",
                        "action": "reboot",
                    }
                ]
            }
        )
    with pytest.raises(CatalogueError, match=r"nvlink5 #1 \(145\): missing key 'status'"):
        parse_catalogue(
            {"nvlink5": [{"xid": 145, "unit": "RLW_REMAP", "severity": "fatal", "action": "none"}]}
        )


def test_a_site_catalogue_overrides_a_decode_row() -> None:
    site = parse_catalogue(
        {
            "nvlink5": [
                {
                    "xid": 145,
                    "unit": "RLW_REMAP",
                    "status": 0x100,
                    "severity": "fatal",
                    "action": "drain",
                }
            ]
        }
    )
    merged = CATALOGUE.extended(site)
    rows = merged.nvlink5.filter(
        (merged.nvlink5["unit"] == "RLW_REMAP") & (merged.nvlink5["status"] == 0x100)
    )
    assert rows.height == 1 and rows["action"].to_list() == ["drain"]


def nvlink5_rows(**where: Any) -> list[dict[str, Any]]:
    rows = CATALOGUE.nvlink5
    for key, value in where.items():
        rows = rows.filter(rows[key] == value)
    return rows.to_dicts()


def test_nvlink5_table_covers_every_nvlink5_xid_with_a_fatal_and_a_nonfatal_status() -> None:
    assert {r["xid"] for r in nvlink5_rows()} == set(range(144, 151))
    for xid in (144, 145, 146, 149):
        assert {r["severity"] for r in nvlink5_rows(xid=xid)} == {"fatal", "warning"}


# --- (e) kernel events that are context, not faults ------------------------------------------


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        ("kernel: XFS (nvme0n1p3): Remounting filesystem read-only", "fs_read_only"),
        ("EXT4-fs (md3): I/O error while writing superblock", "fs_superblock_io_error"),
        ("kernel: I/O error, dev nvme1n1, sector 88410 op 0x1:(WRITE) flags 0x0", "block_io_error"),
        ("md/raid10:md0: Disk failure on nvme7n1 detected, failing array.", "md_disk_failure"),
        ("nvme nvme5: I/O 19 QID 3 timeout, reset controller", "nvme_controller_reset"),
        ("nvme nvme5: controller is down; will reset: CSTS=0xffffffff", "nvme_controller_reset"),
        ("block nvme5n1: no available path - failing I/O", "nvme_controller_reset"),
        ("watchdog: BUG: soft lockup - CPU#7 stuck for 22s! [kworker/7:1:311]", "cpu_soft_lockup"),
        ("rcu: INFO: rcu_preempt self-detected stall on CPU", "cpu_soft_lockup"),
        (
            "nvidia-peermem nv_get_p2p_free_callback:131 ERROR detected invalid context, "
            "skipping further processing",
            "peermem_invalid_context",
        ),
        ("NETDEV WATCHDOG: eth2 (mlx5_core): transmit queue 12 timed out", "nic_hardware_event"),
        (
            "mlx5_core: Port module event[error]: module 3, Cable error, High Temperature",
            "nic_hardware_event",
        ),
        ("mlx5_core 0000:c1:00.0 ibp193s0: Link up", "nic_link_up"),
        ("VFS: file-max limit 65536 reached", "file_max_reached"),
        ("task kworker/u8:2:1133 blocked for more than 245 seconds.", "hung_task_blocked"),
    ],
)
def test_kernel_context_events_are_recognised_and_never_a_fault(line: str, signature: str) -> None:
    name, kind, severity, action = verdict(line)
    assert name == signature
    assert severity not in ("fatal", "error") and action == "none"
    assert kind in ("none", "hang")  # the hung task stays the hang detector's context


# --- (f) NCCL's InfiniBand async events as current releases word them ------------------------


@pytest.mark.parametrize(
    ("line", "signature", "kind"),
    [
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 async fatal event: "
            "local catastrophic error",
            "ib_hca_fatal",
            "node_failure",
        ),
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 Got non-fatal async event: "
            "port error(10)",
            "ib_port_error",
            "node_failure",
        ),
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 Got non-fatal async event: "
            "port active(9)",
            "ib_port_active",
            "none",
        ),
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 async fatal event on CQ "
            "(0x7f11c0012a40) handle=4 cqe=4095: CQ error",
            "ib_queue_fatal",
            "crash",
        ),
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 Got non-fatal async event: "
            "LID change(11)",
            "ib_async_nonfatal",
            "none",
        ),
        (
            "gpu-e03:7001:7090 [1] NCCL WARN NET/IB : mlx5_6:1 GID table changed",
            "ib_async_nonfatal",
            "none",
        ),
    ],
)
def test_current_nccl_ib_async_event_wordings(line: str, signature: str, kind: str) -> None:
    name, got_kind, _, _ = verdict(line)
    assert (name, got_kind) == (signature, kind)


# --- the corpus family that exercises this catalogue --------------------------------------------


def test_every_signature_a_corpus_family_lists_exists_and_is_exercised() -> None:
    folder = Path(__file__).resolve().parents[1] / "data" / "real" / "failures"
    ids = set(CATALOGUE.signatures["id"])
    listed = 0
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        names = data["source"].get("signatures", [])
        if not names:
            continue
        lines = [
            line
            for case in data["case"]
            for line in case.get("lines", "").splitlines()
            if line.strip()
        ]
        parsed = SignatureParser().parse(batch("logs", [log(i, m) for i, m in enumerate(lines)]))
        seen = set() if parsed is None else set(parsed.frame["signature"])
        for name in names:
            assert name in ids, f"{path.name}: '{name}' is no catalogue entry"
            assert name in seen, f"{path.name}: no line exercises '{name}'"
            listed += 1
    assert listed >= 10
