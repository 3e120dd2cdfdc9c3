"""The prefix stripper: launchers', loggers' and log shippers' prefixes cut off log lines."""

from __future__ import annotations

import polars as pl
import pytest

from medic.config import ConfigError
from medic.detectors.registry import build_parsers
from medic.parse.prefixes import RAW, PrefixConfig, PrefixStripper
from medic.parse.progress import ProgressParser
from medic.parse.signatures import SignatureParser
from medic.pipeline import Pipeline
from medic.testing.builders import batch, log

MEGATRON = (
    " [2026-03-01 10:12:03] iteration      120/  500000 | consumed samples:        61440 | "
    "elapsed time per iteration (ms): 1234.5 | learning rate: 2.9E-04 |"
)


def stripped(*lines: str, config: PrefixConfig | None = None) -> list[dict]:
    frame = pl.DataFrame({"message": list(lines)})
    return PrefixStripper(config).strip(frame).to_dicts()


@pytest.mark.parametrize(
    ("line", "bare", "said"),
    [
        # srun --label: the task number, right-aligned to the widest one
        ("  3: step=10, skipped=0", "step=10, skipped=0", {"rank": 3}),
        ("117: step=10, skipped=0", "step=10, skipped=0", {"rank": 117}),
        # torchrun --tee: [<role><local rank>]:, and the workers' [rankN]:
        ("[default7]:{'loss': 1.25}", "{'loss': 1.25}", {"local_rank": 7}),
        ("[trainer12]:hello", "hello", {"local_rank": 12}),
        (
            "[rank5]:Traceback (most recent call last):",
            "Traceback (most recent call last):",
            {"rank": 5},
        ),
        # OpenMPI --tag-output
        ("[1,6]<stdout>:epoch 3", "epoch 3", {"rank": 6}),
        # horovodrun's own launcher tags a worker's lines with its rank alone
        ("[2]<stderr>:RuntimeError: boom", "RuntimeError: boom", {"rank": 2}),
        ("[rank=5] epoch 3", "epoch 3", {"rank": 5}),
        # Ray: a task's or an actor's lines as the driver prints them
        ("(pid=45113) step 4", "step 4", {}),
        ("(RayTrainWorker pid=48211, ip=10.0.3.17) step 4", "step 4", {}),
        # pdsh / clush
        (
            "gpu-a17: NVRM: Xid (PCI:0000:3b:00): 79",
            "NVRM: Xid (PCI:0000:3b:00): 79",
            {"host": "gpu-a17"},
        ),
        # CRI (containerd / CRI-O log files) and kubectl logs --prefix
        (
            "2026-03-01T10:00:00.123456789Z stdout F step 4",
            "step 4",
            {"time": "2026-03-01T10:00:00.123456789Z"},
        ),
        ("[pod/llama-worker-3/pytorch] step 4", "step 4", {"host": "llama-worker-3"}),
        # syslog / journal, dmesg
        (
            "Mar  1 10:00:00 node042 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-1",
            "NVRM: GPU at PCI:0000:3b:00: GPU-1",
            {"host": "node042", "time": "Mar  1 10:00:00"},
        ),
        (
            "Mar 13 11:01:55.588061 node042 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
            "NVRM: Xid (PCI:0000:3b:00): 79",
            {"host": "node042", "time": "Mar 13 11:01:55.588061"},
        ),
        (
            "2026-03-01T10:00:00+0000 node042 slurmd[2211]: error: Node failure",
            "error: Node failure",
            {"host": "node042", "time": "2026-03-01T10:00:00+0000"},
        ),
        (
            "2026-03-01T10:00:00.123456+00:00 node042 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
            "NVRM: Xid (PCI:0000:3b:00): 79",
            {"host": "node042", "time": "2026-03-01T10:00:00.123456+00:00"},
        ),
        # an application's "Word word: text" after a logging module's or a container runtime's
        # time (docker logs -t, kubectl logs --timestamps) is no syslog line: no host
        (
            "2026-03-01T10:00:00.123456789Z GPU available: True (cuda), used: True",
            "GPU available: True (cuda), used: True",
            {"time": "2026-03-01T10:00:00.123456789Z"},
        ),
        (
            "2026-03-01 10:00:00,123 Saving checkpoint: /ckpt/step_400",
            "Saving checkpoint: /ckpt/step_400",
            {"time": "2026-03-01 10:00:00,123"},
        ),
        (
            "10.2.0.7: kern:     err: [2026-03-01T10:00:00.466440686Z]: NVRM: Xid (PCI:0000:3b:00)",
            "NVRM: Xid (PCI:0000:3b:00)",
            {"host": "10.2.0.7", "time": "2026-03-01T10:00:00.466440686Z"},
        ),
        (
            "talos-g3: kern:    info: [2026-03-01T10:00:00.5Z]: mlx5_core 0000:0c:00.0: link down",
            "mlx5_core 0000:0c:00.0: link down",
            {"host": "talos-g3", "time": "2026-03-01T10:00:00.5Z"},
        ),
        (
            "10.2.0.7: zork: error: widget failed",
            "zork: error: widget failed",
            {"host": "10.2.0.7"},
        ),
        (
            "node042 kernel: mlx5_core 0000:0c:00.0: port 1 link down",
            "mlx5_core 0000:0c:00.0: port 1 link down",
            {"host": "node042"},
        ),
        (
            "[ 8812.004511] NVRM: Xid (PCI:0000:3b:00): 48",
            "NVRM: Xid (PCI:0000:3b:00): 48",
            {"time": "8812.004511"},
        ),
        # logging timestamps and levels
        (
            "2026-03-01 10:00:00,123 - root - INFO - {'loss': 2.0}",
            "{'loss': 2.0}",
            {"time": "2026-03-01 10:00:00,123"},
        ),
        (
            "2026-03-01 10:00:00 | INFO | fairseq.trainer | begin training epoch 2",
            "begin training epoch 2",
            {"time": "2026-03-01 10:00:00"},
        ),
        (
            "[2026-03-01 10:00:00,123] [INFO] [timer.py:264:stop] epoch=0/micro_step=5",
            "epoch=0/micro_step=5",
            {"time": "2026-03-01 10:00:00,123"},
        ),
        (
            "[INFO|trainer.py:2150] 2026-03-01 10:00:00,123 >> ***** Running training *****",
            "***** Running training *****",
            {"time": "2026-03-01 10:00:00,123"},
        ),
        (
            "I0301 10:00:00.123456 139921 train.py:512] completed step: 40",
            "completed step: 40",
            {"time": "0301 10:00:00.123456"},
        ),
        # PyTorch's own logging: the file's path from the package root, in either separator
        (
            "E0301 10:00:00.123000 4411 torch/distributed/elastic/multiprocessing/api.py:869]"
            " failed (exitcode: 1)",
            "failed (exitcode: 1)",
            {"time": "0301 10:00:00.123000"},
        ),
        (
            'E0301 10:00:00.123000 4411 torch\\distributed\\run.py:702]   File "x.py", line 3',
            '  File "x.py", line 3',
            {"time": "0301 10:00:00.123000"},
        ),
        (
            "[NeMo I 2026-03-01 10:00:00 exp_manager:400] Experiments are logged",
            "Experiments are logged",
            {"time": "2026-03-01 10:00:00"},
        ),
        ("WARNING:torch.distributed.run:Setting OMP_NUM_THREADS", "Setting OMP_NUM_THREADS", {}),
        (MEGATRON, MEGATRON[23:], {"time": "2026-03-01 10:12:03"}),
        (
            "2026-03-01T10:00:00.884Z: [1,12]<stdout>:epoch 3",
            "epoch 3",
            {"time": "2026-03-01T10:00:00.884Z", "rank": 12},
        ),
        # SGLang's scheduler: the TP index is the process's rank with no DP or PP tag before it
        (
            "[2026-03-01 10:00:00 TP5] Scheduler hit an exception: Traceback",
            "Scheduler hit an exception: Traceback",
            {"time": "2026-03-01 10:00:00", "rank": 5},
        ),
        (
            "[2026-03-01 10:00:00 DP1 TP5 EP5] Capture cuda graph begin.",
            "Capture cuda graph begin.",
            {"time": "2026-03-01 10:00:00"},
        ),
    ],
)
def test_a_prefix_is_cut_and_what_it_says_kept(line: str, bare: str, said: dict) -> None:
    (row,) = stripped(line)
    assert row["message"] == bare and row[RAW] == line
    for field in ("rank", "local_rank", "host", "time"):
        assert row[f"prefix_{field}"] == said.get(field), field


def test_stacked_prefixes_are_all_cut_the_outermost_saying_first() -> None:
    line = (
        "2026-03-01T10:00:00Z stderr F  12: [default4]:[rank12]:"
        "2026-03-01 10:00:00,001 - x - INFO - hi"
    )
    (row,) = stripped(line)
    assert row["message"] == "hi"
    assert (row["prefix_rank"], row["prefix_local_rank"]) == (12, 4)
    assert row["prefix_time"] == "2026-03-01T10:00:00Z"


@pytest.mark.parametrize(
    ("line", "rank", "local_rank"),
    [
        # srun --label over one torchrun a node numbers the nodes; the worker's tag is its rank
        ("5: [rank47]: iteration 300", 47, None),
        ("[1,5]<stdout>: [rank40]: iteration 300", 40, None),
        # a local rank and no rank inside the launcher's task number: the rank is unknown
        ("5: [default3]:iteration 300", None, 3),
        ("5: [default3]:[rank27]: iteration 300", 27, 3),
        ("5: iteration 300", 5, None),  # srun launching the workers: its task is the rank
    ],
)
def test_the_rank_of_stacked_prefixes_is_the_workers_own(
    line: str, rank: int | None, local_rank: int | None
) -> None:
    (row,) = stripped(line)
    assert row["message"] == "iteration 300"
    assert (row["prefix_rank"], row["prefix_local_rank"]) == (rank, local_rank)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "srun: error: n3: task 3: Out Of Memory",
        "step: 10  loss:  9.1234  memory: 45.67GiB(48.12%)  tps: 5,432",
        "Epoch 0:  12%|█▏   | 120/1000 [02:00<14:40,  1.00it/s]",
        "node1:2211:2290 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "[E301 10:00:00.123456 2211 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught",
        "12:00:01 step 3",
        "",
    ],
)
def test_a_message_without_a_prefix_is_left_alone(line: str) -> None:
    (row,) = stripped(line)
    assert row["message"] == line
    assert all(row[f"prefix_{f}"] is None for f in ("rank", "local_rank", "host", "time"))


def test_control_characters_rsyslog_escaped_are_written_back() -> None:
    # rsyslog writes a tab as "#011" and an escape as "#033": the program wrote them, its
    # format reads them; a "#" before other digits is text
    (row,) = stripped("Epoch [1][450/1833]#011lr: 3.592e-02, eta: 0:17:02, time: 0.651")
    assert row["message"] == "Epoch [1][450/1833]\tlr: 3.592e-02, eta: 0:17:02, time: 0.651"
    (row,) = stripped("#033[32mzork ready#033[0m on GPU #0123")
    assert row["message"] == "\x1b[32mzork ready\x1b[0m on GPU #0123"


def test_a_site_prefix_is_tried_before_the_built_in_ones_and_can_replace_them() -> None:
    own = PrefixConfig(patterns=(r"<(?P<host>[a-z0-9-]+)> ",))
    assert stripped("<n7> 3: x", config=own)[0] | {RAW: None} == {
        "message": "x",
        RAW: None,
        "prefix_rank": 3,
        "prefix_local_rank": None,
        "prefix_host": "n7",
        "prefix_time": None,
    }
    alone = PrefixConfig(patterns=(r"<(?P<host>[a-z0-9-]+)> ",), builtin=False)
    assert stripped("<n7> 3: x", config=alone)[0]["message"] == "3: x"
    assert stripped("3: x", config=PrefixConfig(builtin=False))[0]["message"] == "3: x"


@pytest.mark.parametrize(
    ("patterns", "error"),
    [
        (["(unclosed"], "parsers.prefixes: prefix '(unclosed' is not a valid regex"),
        (["(?P<pid>\\d+) "], "group 'pid' is not one of rank, local_rank, host, time"),
        (["x*"], "matches an empty line start"),
        ("x", "'parsers.prefixes.patterns' must be a list"),
    ],
)
def test_a_bad_site_prefix_is_a_one_line_config_error(patterns: object, error: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        build_parsers([], {"prefixes": {"patterns": patterns}})
    assert error in str(raised.value) and "\n" not in str(raised.value)


def test_both_parsers_read_lines_behind_prefixes_and_share_one_stripper() -> None:
    pipeline = Pipeline.from_settings({"parsers": {"prefixes": {"patterns": ["<n7> "]}}})
    progress = next(p for p in pipeline.parsers if isinstance(p, ProgressParser))
    signatures = next(p for p in pipeline.parsers if isinstance(p, SignatureParser))
    assert progress.prefixes is signatures.matcher.prefixes
    logs = batch(
        "logs",
        [
            log(0, "<n7>   5: " + MEGATRON.strip()),
            log(1, "node042: [rank5]:RuntimeError: CUDA error: an illegal memory access"),
        ],
    )
    (step,) = progress.parse(logs).frame.to_dicts()
    assert (step["step"], step["rank"], step["step_time_s"]) == (120, 5, 1.2345)
    (sign,) = signatures.parse(logs).frame.to_dicts()
    assert (sign["rank"], sign["host"]) == (5, "node042")
    assert sign["message"].startswith("node042: [rank5]:")
