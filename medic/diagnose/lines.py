"""Raw log files as rows of the ``logs`` stream: time, job, node, rank and source of each line.

What each file is comes from its name, then its lines:

* ``system``: kernel and journal exports (``dmesg``, ``kern.log``, ``syslog``, ``messages``,
  ``journal*``, or mostly kernel lines): no job; the node is the host a journal line's prefix
  names, else the file's name or folder (``gpu-b17/dmesg.txt``, ``dmesg-gpu-b17.log``);
* ``slurm``: ``slurmd``/``slurmctld`` logs: a line's job is the ``JobId=`` (or older
  releases' ``job N``) it names;
* ``app``: a job's output: the job id from the name (``slurm-4242.out``, ``train-4242.log``)
  or the text (``*** JOB 4242``, ``StepId=4242.0``, ``SLURM_JOB_ID=4242``), else the file's
  name; a line's node is the host of its NCCL prefix (``host:pid:tid [dev] NCCL``), of a
  launcher's prefix (pdsh's ``host: ``) or of a torchrun root-cause block
  (``host : gpu-a01``), else the file's folder when it is named after a host
  (``gpu-c07/slurm-4242.out``); its rank is the one its prefix says (``[rankN]:``,
  ``srun --label``'s ``N:``, ...). The host a line names is read as the pipeline's placement
  reads it (``medic.parse.placement``), which then checks it against the jobs' nodes.

Text pasted from a terminal holds its shell's prompts (``[root@gpu-b17 ~]# nvidia-smi``,
``user@gpu-b17:~$ dmesg``): the output of a command that reports on the machine it runs on
(``LOCAL_COMMANDS``) is about the prompt's host, until the next prompt; a file shown with
``cat`` or ``tail`` is about wherever it was written.

Prefixes are read by the pipeline's own prefix stripper (``medic.parse.prefixes``, with the
site's ``[parsers.prefixes]``); the lines go to the pipeline as they were written. A node
nobody names is the empty string: evidence on it blames no node.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from medic.diagnose.times import event_times, first_year, year_before
from medic.parse.placement import line_host
from medic.parse.prefixes import PrefixStripper

SYSTEM_NAMES = re.compile(r"dmesg|kern|syslog|messages|journal", re.IGNORECASE)
SLURM_NAMES = re.compile(r"slurmd|slurmctld", re.IGNORECASE)
KERNEL_LINE = r"kernel: |^\[ *\d+\.\d+\] |^\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\] |NVRM: |mlx5_core "
JOB_IN_NAME = re.compile(r"(?:slurm|job)[-_]?(\d+)|[-_.](\d+)\.(?:out|err|log|txt)$|^(\d+)\.")
SLURM_IDS = r"\*\*\* (?:JOB|STEP) (\d+)|StepId=(\d+)|JobId=(\d+)"
"""A job as Slurm's own words name it: its ``*** JOB 4242 ...`` or ``*** STEP 4242.0 ...``
report, a step's ``StepId=4242.0``, ``JobId=4242``."""
SLURM_LOG_JOB = (
    rf"{SLURM_IDS}|\bjob (\d+)|^(?:\[[^\]]*\] )?\[(\d+)\.(?:\d+|batch|extern|interactive)\]"
)
"""The job a slurmd/slurmctld line names: as Slurm's words do (``SLURM_IDS``), ``job 4242`` in
older releases' wording ("requeue job 4242 due to failure of node ..."), or, from the step
daemon, the ``[4242.0]`` its log lines lead with (``[4242.batch]``, ``[4242.extern]``) after
their time."""
SYSTEM_LOG_JOB = rf"{SLURM_IDS}|\bjob (\d+)"
"""The job a kernel or system log line names: as ``SLURM_LOG_JOB`` without the step daemon's
``[4242.0]``, which a kernel line's time since boot looks like (``[588912.611023]``)."""
JOB_IN_TEXT = rf"{SLURM_IDS}|SLURM_JOB_ID=(\d+)|srun: job (\d+) "
SHELL_PROMPT = (
    r"^(?:\([\w.-]+\) )?\[?[A-Za-z_][\w.-]*@([A-Za-z0-9][\w.-]*)(?:[: ][^\]#$]*)?\]?[#$] +"
    r"(?:sudo +)?(?:\S*/)?([\w.-]+)"
)
"""A shell's prompt as bash's defaults write it (``[user@host dir]$ `` on Red Hat's,
``user@host:dir$ `` on Debian's, a conda environment's ``(env) `` before it), then the command
run: the host and the command's name."""
LOCAL_COMMANDS = {
    "nvidia-smi", "nvidia-debugdump", "nvidia-bug-report.sh", "dcgmi", "dmesg", "journalctl",
    "ibstat", "ibstatus", "ibv_devinfo", "ibv_devices", "mlxlink", "lspci", "rocm-smi",
    "amd-smi", "xpu-smi", "npu-smi", "edac-util", "ras-mc-ctl", "mcelog", "ipmitool", "sensors",
    "free", "uptime", "df", "lsblk", "nvcc", "deviceQuery",
}  # fmt: skip
"""Commands that report on the machine they run on: their output is the prompt's host's."""
CONTAINER_ID = r"^[0-9a-f]{12}$"
"""The host name a container gets from its id: no node of a cluster."""
FILE_WORDS = {"dmesg", "kern", "kernel", "syslog", "messages", "journal", "journalctl", "log"}
FILE_WORDS |= {"txt", "slurmd", "slurmctld", "out", "err"}
GENERIC_FOLDERS = {"", ".", "logs", "log", "tmp", "var"}


class DiagnoseError(ValueError):
    """An input cannot be read; the message names it."""


@dataclass(frozen=True)
class LogText:
    """One input: its name (a path, or a label for text handed over directly) and its text."""

    name: str
    text: str
    modified_us: int | None = None
    """When the file was last written (µs since the epoch), if it is one: no line is later."""


def read_paths(paths: Iterable[Path]) -> list[LogText]:
    """The files named, folders searched recursively (in name order)."""
    texts = []
    for path in paths:
        if not path.exists():
            raise DiagnoseError(f"{path}: no such file or directory")
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            try:
                text = file.read_text(errors="replace")
                texts.append(LogText(str(file), text, file.stat().st_mtime_ns // 1000))
            except OSError as exc:
                raise DiagnoseError(f"{file}: cannot read ({exc.strerror or exc})") from None
    return texts


def file_kind(text: LogText, messages: Sequence[str]) -> str:
    """``system``, ``slurm`` or ``app`` (see the module docstring)."""
    name = Path(text.name).name
    if SLURM_NAMES.search(name):
        return "slurm"
    if SYSTEM_NAMES.search(name):
        return "system"
    kernel = sum(1 for m in messages if re.search(KERNEL_LINE, m))
    return "system" if messages and kernel * 2 > len(messages) else "app"


UNNAMED_NODE = "(node of {})"
"""The node of a kernel log that names no host, in its path or in any line (a ``dmesg`` saved on
the node itself): named after the file, in a form no Slurm node name takes, so that its faults
are diagnosed and the actions they call for say where to look."""


def node_from_path(name: str) -> str:
    """A host name the path holds: the file name without log words, else its folder; as a
    cluster's hosts are named, with a digit (``output.log`` names no host, ``gpu-b17`` does)."""
    path = Path(name)
    words = [w for w in re.split(r"[._]", path.name) if w and w.lower() not in FILE_WORDS]
    words = [w for w in "-".join(words).split("-") if w.lower() not in FILE_WORDS]
    stem = "-".join(w for w in words if w)
    if _host_like(stem) and not stem.isdigit():
        return stem
    return folder_node(name)


def _host_like(name: str) -> bool:
    return any(c.isdigit() for c in name)


def folder_node(name: str) -> str:
    """The folder a job's output sits in, when it is named after a host (``gpu-c07/...``)."""
    folder = Path(name).parent.name
    return folder if _host_like(folder) and folder.lower() not in GENERIC_FOLDERS else ""


def job_of_file(text: LogText, messages: Sequence[str]) -> str:
    name = Path(text.name).name
    found = JOB_IN_NAME.search(name)
    if found:
        return next(g for g in found.groups() if g)
    for message in messages:
        hit = re.search(JOB_IN_TEXT, message)
        if hit:
            return next(g for g in hit.groups() if g)
    return Path(text.name).stem or text.name


def lines_frame(
    texts: Sequence[LogText], year: int | None = None, prefixes: PrefixStripper | None = None
) -> pl.DataFrame:
    """Every non-empty line of ``texts`` with ``file``, ``line`` (1-based), ``kind`` (of its
    file), ``time`` (µs), ``job_id`` (null for node logs), ``node``, ``rank``, ``source`` and
    ``message`` (as written), in time order; ``prefixes`` reads what the lines' prefixes say."""
    frames = []
    for order, text in enumerate(texts):
        raw = re.split(r"\r\n|\r|\n", text.text)
        numbered = [(i + 1, m) for i, m in enumerate(raw) if m.strip()]
        messages = [m for _, m in numbered]
        kind = file_kind(text, messages)
        node = node_from_path(text.name) if kind != "app" else folder_node(text.name)
        unnamed = (
            UNNAMED_NODE.format(Path(text.name).name) if kind == "system" and not node else None
        )
        frames.append(
            pl.DataFrame(
                {
                    "file": [text.name] * len(numbered),
                    "order": [order] * len(numbered),
                    "line": [i for i, _ in numbered],
                    "message": messages,
                },
                schema={
                    "file": pl.String,
                    "order": pl.Int32,
                    "line": pl.Int32,
                    "message": pl.String,
                },
            ).with_columns(
                kind=pl.lit(kind),
                file_job=pl.lit(job_of_file(text, messages) if kind == "app" else None, pl.String),
                file_node=pl.lit(node),
                _unnamed=pl.lit(unnamed, pl.String),
            )
        )
    if not frames:
        return pl.DataFrame()
    lines = pl.concat(frames)
    year = year or first_year(lines.get_column("message"))
    latest = None
    if year is None:  # no year anywhere: the newest file's mtime, else now (see times.py)
        latest = max(
            (t.modified_us for t in texts if t.modified_us), default=time.time_ns() // 1000
        )
        year = year_before(latest)
    lines = lines.with_columns(event_times(lines, year, latest))
    said = (prefixes or PrefixStripper()).strip(lines.select("message"))
    lines = lines.with_columns(
        said.get_column("prefix_rank").alias("_rank"),
        line_host(said).alias("_host"),
        _prompt_host(pl.col("message")).forward_fill().over("order").alias("_prompt"),
    )
    message = pl.col("message")
    app = pl.col("kind") == "app"
    file_node = (
        pl.when(pl.col("_host").is_null().all().over("order"))
        .then(pl.coalesce("_unnamed", "file_node"))
        .otherwise(pl.col("file_node"))
    )
    return (
        lines.with_columns(
            pl.when(app)
            .then(pl.col("file_job"))
            .when(pl.col("kind") == "slurm")
            .then(_job_named(message, SLURM_LOG_JOB))
            .otherwise(_job_named(message, SYSTEM_LOG_JOB))
            .alias("job_id"),
            pl.coalesce(pl.col("_host"), pl.col("_prompt").replace("", None), file_node).alias(
                "node"
            ),
            pl.when(app).then(pl.col("_rank")).alias("rank"),
            pl.when(app)
            .then(pl.lit("app"))
            .when(pl.col("kind") == "slurm")
            .then(pl.lit("slurm"))
            .otherwise(pl.lit("system"))
            .alias("source"),
        )
        .drop("_rank", "_host", "_prompt", "_unnamed")
        .sort("time", "order", "line", maintain_order=True)
    )


def _job_named(message: pl.Expr, pattern: str) -> pl.Expr:
    """The job id the first group of ``pattern`` that matches captures."""
    return pl.coalesce(
        message.str.extract(pattern, g) for g in range(1, re.compile(pattern).groups + 1)
    )


def _prompt_host(message: pl.Expr) -> pl.Expr:
    """On a shell prompt's line, the host its command reports on ("" where it reports on no
    host, or where the host is a container's id or has no host's form); null on other lines."""
    host = message.str.extract(SHELL_PROMPT, 1)
    command = message.str.extract(SHELL_PROMPT, 2)
    local = (
        command.is_in(sorted(LOCAL_COMMANDS))
        & host.str.contains(r"\d")
        & ~host.str.contains(CONTAINER_ID)
    )
    return pl.when(host.is_null()).then(None).when(local).then(host).otherwise(pl.lit(""))
