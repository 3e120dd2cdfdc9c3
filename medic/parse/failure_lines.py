"""The second layer under the signature catalogue: failure lines that no entry describes.

A line that no signature matched is not silence when it reads as a failure. The lexicon
(``failure_lexicon.toml``) says how, in three steps that run on fewer and fewer lines:

1. ``failure_like``: a case-blind scan for the few words every failure report holds one of
   (error, fail, timeout, killed, ...): the fast path. The signature matcher folds these words
   into its own scan of every line (``literal_scan``), so this runs on its few candidates only;
2. ``read``, on the marked lines only: a marker of what failure reports share across
   ecosystems (a severity word, an exception or abort report, a signal or a non-zero exit, a
   timeout, an error code) and none of the words that make it no failure (a lower severity, a
   retry, a deliberate end);
3. the family whose vocabulary the line holds most of (the driver stack, device, fabric, peer,
   collectives, storage, memory, host, config; ``general`` when none): what the line is about,
   and the kind it reads as. The families' words and phrases are looked up in the line's words
   (an identifier's camel-case words apart, host names and reporters' tags out), all in one
   Aho-Corasick scan, not with a regex per family. The host and ranks a line names as failing
   (``NAMED_HOST``, ``NAMED_RANKS``) are its culprits, not the node or rank that printed it;
4. whether the line reports an end rather than an error a program may survive (``_fatal``): a
   death (an abort, a signal, a non-zero exit), a fatal word (``[[loud]]``) or a term its
   family holds for an end (``fatal``: a collective that timed out, a GPU lost).

A failure-like line holding a ``deliberate_end`` word (a cancel, the time limit, a preemption)
is read too, as the job's deliberate end (``_end``): what fails around it is its consequence.

Everything is polars expressions over the batch's rows; no per-line Python.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import polars as pl

from medic.parse.first_match import escaped
from medic.parse.fragments import FragmentError, expanded, fragments_of
from medic.parse.prefixes import IPV4

_WORDS = re.compile(r"(?:\w+ )*\w+\*?")
"""A family's term: words, one space between each, the last maybe ending in ``*``."""
GENERAL = "general"
"""The family of a failure line whose vocabulary names no family."""
FAMILY = "_family"
READING = "_reading"
FATAL = "_fatal"
MENTION = "_mention"
END = "_end"
DELIBERATE_END = "deliberate_end"
DEATHS = ("death", "signal", "exit")
"""The markers that report a process's end, not an error it may survive."""
MENTIONS = ("device_code", "errno")
"""Markers that only name a thing failures are reported about (an Xid) or a value a report
gives (an errno), not a report: a line holding no other (``_mention``) may be a health check's,
a document's or a library's note on a fallback."""
HEADER = "header"
"""The marker of a severity header without a word (``Lexicon.headers``): an error's level."""
FAILED = "failure"
"""The marker of a line that says something failed: a deliberate end's words beside it (a job
cancelled due to a node's failure) are no deliberate end."""
HOST_NAME = (
    r"\b(?:(?:[a-z0-9]+-)+[a-z]*\d[a-z0-9]*(?:-[a-z0-9]+)*|[a-z]*\d[a-z0-9]*(?:-[a-z0-9]+)+)\b"
)
"""A host's name as clusters write them, lowercased: words of letters and digits joined by
hyphens, one holding a digit (``gpu-b17``, ``dgx-h100-031``, ``ip-10-2-41-7``). Its words say
nothing of what failed (a node named ``gpu-...`` is no GPU fault), so no family reads them."""
NAMED_HOST = (
    r"(?i:\b(?:(?:nodes?|hosts?|hostname)(?:\s+(?:name|address|addr|ip))*\b\s*[=:]?"
    rf"|ip(?:\s+address)?\s*[=:])\s*([a-z][\w.-]*\d[\w-]*|{IPV4})"
    r"|\bon\s+([a-z]\w*-[\w-]*\d[\w-]*|[a-z]\w*\d\w*-[\w-]*)\b)"
)
"""A host a line names as its subject, as schedulers and daemons write it: after a node or host
word (``Killing job on failed node gpu-b17``, ``Nodes gpu-b17 not responding``), by name or
by address where the words say it is one (Ray's ``node name: 10.0.0.5``, ``Worker IP address:
10.0.0.5``, an actor's ``ip: 10.0.0.5``), or after "on" when it has a host's form, a hyphen
and a digit (``Node failure on hpc-gpu0413``): a line of the job's shared output names the
node it is about, not the one that printed it. An address is no Slurm node's name: the
service drops it as it drops any host outside the job's nodes; a diagnosis names it."""
_RANK_LIST = r"\[?(\d+(?:\s*,\s*\d+)*)\]?"
_AT_FAULT = r"(?:missing|stuck|stalled|unresponsive|lagging|dead|hung|faulty)"
NAMED_RANKS = (
    rf"(?i:\branks?\b\s*{_RANK_LIST}\s+(?:failed|did not|didn't|has not|have not|is not"
    r"|are not|timed out|died|exited|crashed|hung"
    rf"|(?:is|are|was|were)\s+(?:the\s+)?{_AT_FAULT})\b"
    rf"|\b{_AT_FAULT}\s+ranks?\s*(?:(?:is|are|were)\b|[:=])?\s*{_RANK_LIST}"
    rf"|\b(?:errors?|failures?)\b[^.]{{0,60}}?\bfrom\s+ranks?\s+{_RANK_LIST})"
)
"""The ranks a line names as failing: before a failure verb or an at-fault word (``Ranks 19,
24 failed to pass ...``, ``ranks [5] are the lagging ranks``), after an at-fault word
(``Missing ranks: 3, 14``), or as where errors came from (PyTorch's monitored barrier on a
peer: ``received errors while waiting for send/recv from rank 0``): the ranks at fault, not
the rank that printed the line."""


LOGGED_RANK = (
    r"^\[[IWEF][\d :.]*[\w.-]+\.\w+:\d+\]\s*"
    r"\[(?:PG (?:ID )?0 (?:PG GUID 0(?:\(\w+\))? )?)?Rank (\d+)\]"
)
"""The rank that printed a line, where PyTorch's C++ logging header names it after the
severity and source location (``[E ProcessGroupNCCL.cpp:916] [Rank 1] ...``, ``[E1023
02:44:30.94 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 3] ...``): the
process group's own rank, so only the default group's (``PG 0``, or no group named, as older
releases wrote it) is a rank of the job; another group's rank numbers its members only."""


HEADER_RANK_ID = r"\(PID:\s*\d+,[^)]*\bRankID:\s*(\d+)\)"
"""The rank a runtime's error header names among the process's ids (torch_npu's ``[ERROR]
2026-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 ...``): the rank that printed it."""


MPI_ABORT_RANK = r"\bAbort\(-?\d+\)(?: on node \d+)? \(rank (\d+) in comm 0\)"
"""The rank an MPICH-family library's abort names as its own, in ``MPI_COMM_WORLD`` (comm 0):
``Abort(1) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Recv`` (MPICH, Intel MPI),
``Abort(539602063) (rank 519 in comm 0): Fatal error in PMPI_Iprobe`` (Cray MPICH)."""

OMPI_ABORT_RANK = (
    r"\bMPI_ABORT was invoked on rank (\d+) in communicator"
    r" (?:MPI_COMM_WORLD|MPI COMMUNICATOR \d+ DUP FROM 0)\b"
)
"""The rank Open MPI's abort report names, in ``MPI_COMM_WORLD`` or a duplicate of it (the same
ranks): ``MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD`` (its help text, the
error code on the next line); a rank of another communicator numbers its members only."""


def logged_rank(text: pl.Expr) -> pl.Expr:
    """The rank each line of ``text`` says printed it in its logging header (``LOGGED_RANK``),
    its error header (``HEADER_RANK_ID``) or its MPI abort (``MPI_ABORT_RANK``,
    ``OMPI_ABORT_RANK``), else null."""
    said = (LOGGED_RANK, HEADER_RANK_ID, MPI_ABORT_RANK, OMPI_ABORT_RANK)
    return pl.coalesce(*(text.str.extract(p, 1) for p in said)).cast(pl.Int32, strict=False)


_LISTED_AT_FAULT = rf"(?:{_AT_FAULT}|timed[ -]out)"
_MEMBERS = r"(?:ranks?|tasks?)"
RANKS_HEADER = (
    rf"(?i:(?:\b{_LISTED_AT_FAULT}\b[^:]*\b{_MEMBERS}\b|\b{_MEMBERS}\b[^:]*\b{_LISTED_AT_FAULT}\b)"
    r"[^:]*:\s*$)"
)
"""A line ending in a colon that announces a list of ranks (or tasks: a process of a job is a
task to Slurm, JAX and TensorFlow) at fault on the lines after it (Horovod's stall inspector:
``Missing ranks:``; NCCL's desync report: ``the lagging/dead/mismatched ranks that caused the
desync are:``; JAX's coordination service: ``Barrier timed out. ... Timed out task names:``)."""
LISTED = (
    r"^\s*(?:[-*]?\s*\[?(\d+(?:\s*,\s*\d+)*)\]?[!*]?(?::|\s|$)"
    r"|/job:[\w-]+/replica:\d+/task:(\d+)\s*$)"
)
"""A line of such a list: the ranks it starts with, maybe marked (``14: [allreduce.layer3]``,
``7!: [...]``, ``[6, 9] finished collective #3306, but didn't join``), or a task's name as
TensorFlow and JAX write it (``/job:jax_worker/replica:0/task:3``: task 3 is process 3)."""
LISTED_LABEL = r"(?:^|[\s>\]]|[^\d\s]:)(\d+(?:\s*,\s*\d+)*)[!*]?:\s*$"
"""A list line's ranks where its prefixes end: its number and colon read as a launcher's rank
label, maybe after the launcher's own prefix (``[1,0]<stderr>:6: [...]``); not a time stamp's
last digits (``10:44:24]``, ``10:44:24:``)."""


def listed_ranks(frame: pl.DataFrame, raw: str, text: str, keys: list[str]) -> pl.Series:
    """Per line of ``frame``: the ranks it lists ("6, 9") in a run of list lines (``LISTED``,
    in the line without its prefixes, ``text``, else at the end of the prefixes of the line as
    it came, ``raw``: ``LISTED_LABEL``) right after a header announcing ranks at fault
    (``RANKS_HEADER``), the lines of one writer (``keys``) read in their order; else null.
    Only a batch holding such a header pays for more than two literal scans."""
    message = pl.col(text)
    gate = message.str.ends_with(":") & message.str.contains("rank|task")
    headers = frame.with_row_index("_at").filter(gate).filter(message.str.contains(RANKS_HEADER))
    if headers.is_empty():
        return pl.Series("_listed", [None] * frame.height, dtype=pl.String)
    header = pl.int_range(pl.len()).is_in(headers.get_column("_at").implode())
    prefixes = pl.col(raw).str.head(pl.col(raw).str.len_chars() - message.str.len_chars())
    item = pl.coalesce(
        message.str.extract(LISTED, 1),
        message.str.extract(LISTED, 2),
        prefixes.str.extract(LISTED_LABEL, 1),
    )
    run = item.is_null().cum_sum().over(keys).alias("_run")
    return (
        frame.select(*keys, item.alias("_item"), header.alias("_header"), run)
        .select(
            pl.when(pl.col("_header").any().over([*keys, "_run"]))
            .then(pl.col("_item"))
            .alias("_listed")
        )
        .to_series()
    )


REPORT_FIELD = (
    r"^\s*([A-Za-z][A-Za-z0-9 _-]{1,40}?)\s*:\s*\S.*?\bon (?:node|host)\s+"
    r"([A-Za-z0-9][\w.-]*[\w])\s*$"
)
"""A field of a report that names a host (``Remote daemon: [[10092,0],2] on node r712``): its
key and the host."""
HOST_FIELD = r"^\s*(?i:(host ?name|host|node ?name|node))\s*:\s*([A-Za-z0-9][\w.-]*[\w])\s*$"
"""A field that is a host (older Open MPI: "ORTE has lost communication with its daemon located
on node:", then "hostname:  r712"): it answers a failure line that names a node or a host."""
_HOST_WORD = re.compile(r"\b(?:node|host)\b")
_HOST_KEY = "\x00host"
"""The key every ``HOST_FIELD`` is read under (no report field's key)."""
FIELD_LINES = 12
"""Lines after a failure line in which its report's fields are looked for."""


def field_hosts(frame: pl.DataFrame, rows: pl.DataFrame, line: str, text: str) -> pl.Series:
    """Per row of ``rows`` (failure lines of ``frame``, ``line`` their row in it, ``text`` the
    lines without prefixes): the host a field of its report names, where the field's key is
    what the line says failed (Open MPI's "ORTE has lost communication with a remote daemon.",
    then "HNP daemon : ... on node r537" and "Remote daemon: ... on node r712": the remote
    one's), in the ``FIELD_LINES`` lines of the same job and node after it; else null. The
    fields are read in one query; Python per row asked for and field near it."""
    hosts: list[str | None] = [None] * rows.height
    message = pl.col(text)
    host_field = message.str.extract(HOST_FIELD, 2)
    fields = (
        frame.with_row_index("_at")
        .with_columns(host_field.alias("_host_field"))
        .filter(
            message.str.contains(" on node ", literal=True)
            | message.str.contains(" on host ", literal=True)
            | pl.col("_host_field").is_not_null()
        )
        .select(
            "_at",
            "job_id",
            "node",
            pl.coalesce(
                message.str.extract(REPORT_FIELD, 1).str.to_lowercase(),
                pl.when(pl.col("_host_field").is_not_null()).then(pl.lit(_HOST_KEY)),
            ).alias("_key"),
            pl.coalesce(message.str.extract(REPORT_FIELD, 2), "_host_field").alias("_host"),
        )
        .drop_nulls("_key")
    )
    if fields.is_empty():
        return pl.Series("_field_host", hosts, dtype=pl.String)
    at = fields.get_column("_at").to_numpy()
    found = fields.rows()
    writers = frame.select("job_id", "node")
    for i, (row, failed) in enumerate(rows.select(line, text).iter_rows()):
        said, writer = failed.lower(), writers.row(row)
        first = int(np.searchsorted(at, row + 1, side="left"))
        end = int(np.searchsorted(at, row + FIELD_LINES, side="right"))
        for _, job_id, node, key, host in found[first:end]:
            answers = _HOST_WORD.search(said) if key == _HOST_KEY else " ".join(key.split()) in said
            if (job_id, node) == writer and answers:
                hosts[i] = host
                break
    return pl.Series("_field_host", hosts, dtype=pl.String)


MAX_RANK = 1 << 17
"""The highest rank a ready list may name for its complement to be read: a larger number is
no rank of a job (a garbled line), and listing the ranks below it would cost memory."""
READY_RANKS = (
    r"(?i:\b(?:ready|arrived|joined|submitted|reached)\s+ranks?\s*[:=]\s*\[?"
    r"(\d+(?:\s*,\s*\d+)+)\]?)"
)
"""The ranks a line lists as having come to a collective the others still wait on (older
Horovod stall reports: ``[ready ranks: 0, 2, 3]``): those at fault are the rest of the job's
ranks. Two listed at least, so that the list shows a job's ranks."""


def named_ranks(text: pl.Expr) -> pl.Expr:
    """The ranks each line of ``text`` names as failing (``NAMED_RANKS``: "3, 14"), else those
    missing from a list of ranks ready (``READY_RANKS``), else null."""
    return pl.coalesce(
        *(text.str.extract(NAMED_RANKS, group) for group in (1, 2, 3)),
        _not_ready(text),
    )


def _not_ready(text: pl.Expr) -> pl.Expr:
    """The ranks below the highest a ready list names that it leaves out ("16"), as a list
    like ``NAMED_RANKS``'s; null when it leaves none out. A rank above the highest listed is
    not seen: the job's size is not in the line, and naming no rank is better than a wrong
    one."""
    ready = (
        text.str.extract(READY_RANKS, 1)
        .str.split(",")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int64, strict=False))
    )
    top = ready.list.max()
    missing = pl.int_ranges(0, pl.when(top <= MAX_RANK).then(top)).list.set_difference(ready)
    missing = missing.list.sort()
    joined = missing.list.eval(pl.element().cast(pl.String)).list.join(", ")
    return pl.when(missing.list.len() > 0).then(joined)


NAMED_PEER = (
    r"(?i:\b(?:peer|remote(?:\s+(?:peer|host|side|end))?)(?:\s+address)?\s*[=:]?\s*\[?"
    rf"({IPV4}))"
)
"""The address of the other end a line names (``Got completion from peer 10.0.0.2<4001>``,
``Connection closed by peer [10.0.0.2]:29500``): the line is about that peer, whose host the
job's start-up lines may map (``medic.detectors.fabric.Addresses``), not about the node that
printed it."""


BOUND_ADDRESS = r"[A-Za-z]\w*[0-9]:(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b"
"""A network interface bound to its IPv4 address (``ib0:10.0.0.4``), as a host announces its
own at start-up: NCCL's ``Bootstrap : Using ib0:10.0.0.4<0>``, ``NET/Socket : Using
[0]eth0:...`` and ``NET/IB : ... ; OOB ib0:...``, and the like of other runtimes. The interface
ends with its number, which keeps out a GID's ``::ffff:10.0.0.4`` and a word's ``addr:``."""
ADDRESS_GATE = r":[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]"
"""What every ``BOUND_ADDRESS`` holds, scanned for on every line: led by its colon, a literal
the regex engine jumps to, it costs a sixth of the full pattern (a leading class of letters or
digits gives the engine nothing to look for)."""


def bound_addresses(text: pl.Expr) -> pl.Expr:
    """The IPv4 addresses each line of ``text`` binds to an interface (``BOUND_ADDRESS``): a
    list, empty where none."""
    return text.str.extract_all(BOUND_ADDRESS).list.eval(pl.element().str.split(":").list.last())


CANCELLED_ON = r"(?i:\bon\s+\S+\s+(?:was\s+)?(?:cancel+ed|terminated|killed)\b)"
"""A thing stopped on a host (``JOB 12 ON n3 CANCELLED AT ... DUE TO NODE FAILURE``): the host
is where it ran, not what failed, whatever the cause the line gives."""


def named_host(text: pl.Expr) -> pl.Expr:
    """The host each line of ``text`` names as its subject (``NAMED_HOST``), else null: after
    a node or host word, or after "on" unless the line says what ran there was stopped
    (``CANCELLED_ON``)."""
    on = (
        pl.when(text.str.contains(CANCELLED_ON))
        .then(None)
        .otherwise(text.str.extract(NAMED_HOST, 2))
    )
    return pl.coalesce(text.str.extract(NAMED_HOST, 1), on)


PCI_ID = r"(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?\b"
"""A PCI bus id, lowercased (``0000:c3:00.0``): where a device sits, read apart from the word
it follows (``GPU0000:C3:00.0`` is a GPU)."""
CAMEL_CASE = r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]"
"""Where ``_words_apart`` splits a word: a line holding none reads the same split or not."""
SOURCE_DIRECTORIES = (
    r"(?:[\w.~-]*/)+([\w.-]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hh|hpp|py|pyx|rs|go|java|scala)\b)"
)
"""The directories of a source file a line names where its code sits (glog's ``external/xla/
xla/service/gpu/autotuning/gemm_fusion_autotuner.cc:1099]``, a PhysX build's ``/buildAgent/.../
gpunarrowphase/src/PxgNarrowphaseCore.cpp (9908)``): where the code lives in its tree (a
compiler's "gpu" directory), not what failed. The file's own name stays: it names the code
that reports (``socket.cpp``'s lines are a socket's)."""
LOGGER_NAME = r"\[(?:[a-z_][a-z0-9_]*\.)+[A-Za-z_]\w*\]"
"""A dotted logger's name in brackets (Python logging's ``%(name)s``: ``[neuronxcc.driver.
CommandDriver]``, a compiler's command driver): which module logs, not what failed."""
WEB_ADDRESS = r"\b(?:https?|ftp)://\S+"
"""A web address (a library's "see https://docs.nvidia.com/..." hint): where to read more,
not what failed; its words name the vendor of every CUDA error."""
FRAME = r'^\s*File "[^"]*", line \d+'
"""A Python traceback's frame, indented or not (a wrapper relaying each line at its own level,
as AlphaFold's docker runner does at INFO, strips the indentation), its code line after it:
where the error was raised, in the error's report, never a failure or a sign of life itself."""
LOWER_SEVERITY, RECOVERED = "lower_severity", "recovered"
"""The quiet words that may say a program goes on (a line at a lower severity, a retry or a
recovery): a job that prints one after an error was not stopped by it (``going_on``)."""
_LOWER, _PLAIN, _BLIND, _DEATH, _LOUD = "_lower", "_plain", "_blind", "_death", "_loud"
"""Working columns of ``read``, dropped before it returns."""


class LexiconError(ValueError):
    """A lexicon file is malformed; the message names the key."""


@dataclass(frozen=True)
class Family:
    """One family of failures: the kind it reads as and its vocabulary."""

    name: str
    kind: str
    terms: tuple[str, ...]
    strong: tuple[str, ...] = ()
    fatal: tuple[str, ...] = ()
    """Terms that make a line of this family report an end (a collective timed out: the job
    cannot go on), not an error a program may survive."""
    kind_when: tuple[str, ...] = ()
    """Terms a line must hold to read as ``kind``; a line of the family without one reads as
    ``kind_otherwise``. A collective's line is a hang when it says ranks wait (a timeout, a
    stall, a watchdog); a collective that returned an error (a communicator that failed to
    start, a CUDA error inside it) ended its process, a crash."""
    kind_otherwise: str | None = None


Named = tuple[tuple[str, str], ...]
"""A table's rows as (name, pattern)."""


@dataclass(frozen=True)
class Lexicon:
    """The lexicon's tables, as read from its TOML."""

    literals: tuple[str, ...]
    markers: tuple[tuple[str, str], ...]
    quiet: tuple[tuple[str, str], ...]
    """Words that silence a line whatever else it holds."""
    soft_quiet: tuple[tuple[str, str], ...]
    """Words that silence a line unless it holds a ``loud`` word."""
    loud: tuple[tuple[str, str], ...]
    families: tuple[Family, ...]
    reporters: tuple[str, ...] = ()
    """Tags naming who reports a line (``NCCL WARN``), removed before families are scored."""
    unsilenced: tuple[tuple[str, str], ...] = ()
    """Reports at whatever level their line is logged: a convention's word for its errors that
    reads as a lower severity elsewhere (NCCL has no level above WARN), a stall report (a wait
    past a stated time, which frameworks log as a warning): a line holding one is a report at
    error severity."""
    headers: tuple[str, ...] = ()
    """Severity headers that hold no word of ``literals`` (glog's and c10's ``E0602 11:17:52``,
    a letter and the date): a line holding one is failure-like, and the header is its marker
    (Rust regexes)."""
    general: Family = Family(GENERAL, "crash", ())
    """The kind of a line that names no family (no terms: ``kind``, ``kind_when`` and
    ``kind_otherwise`` only)."""
    despite: tuple[tuple[str, str], ...] = ()
    """What leaves a quiet word no sign that the program goes on: a success said beside what
    failed, a tally of nothing that succeeded. A line holding one is not silenced by its quiet
    words and is no sign of life after an error."""


def builtin_lexicon() -> Lexicon:
    """The lexicon shipped with medic (``medic/parse/failure_lexicon.toml``)."""
    text = resources.files("medic.parse").joinpath("failure_lexicon.toml").read_text()
    return parse_lexicon(tomllib.loads(text))


def parse_lexicon(data: dict[str, Any]) -> Lexicon:
    """A lexicon from its TOML tables, its ``{{name}}`` fragments expanded; LexiconError (one
    line) when a table is missing or empty, or a pattern names a fragment the file lacks."""
    try:
        return _lexicon(_expanded(data, fragments_of(data)))
    except FragmentError as exc:
        raise LexiconError(f"failure lexicon: {exc}") from None


_REGEX_KEYS = frozenset({"pattern", "patterns", "headers", "fatal", "kind_when"})
"""The keys of the lexicon's tables and rows that hold regexes (alone or in a list)."""


def _expanded(data: Any, fragments: dict[str, str], where: str = "", key: str = "") -> Any:
    """``data`` with the fragments named in its regexes (``_REGEX_KEYS``) written out;
    ``where``: the table and row it is in, for the error."""
    if isinstance(data, dict):
        where = f"{where} {data['name']!r}" if isinstance(data.get("name"), str) else where
        return {
            k: _expanded(v, fragments, where or f"[{k}]", k)
            for k, v in data.items()
            if k != "fragments"
        }
    if isinstance(data, list):
        return [_expanded(v, fragments, where, key) for v in data]
    if isinstance(data, str) and key in _REGEX_KEYS:
        try:
            return expanded(data, fragments)
        except FragmentError as exc:
            raise FragmentError(f"{where}: '{key}' {exc}") from None
    return data


def _lexicon(data: dict[str, Any]) -> Lexicon:
    def named(key: str, rows: list[Any] | None = None, required: bool = True) -> Named:
        rows = data.get(key, []) if rows is None else rows
        if (required and not rows) or any(
            not isinstance(row, dict) or {"name", "pattern"} - set(row) for row in rows
        ):
            raise LexiconError(f"failure lexicon: [[{key}]] needs rows with name and pattern")
        return tuple((row["name"], row["pattern"]) for row in rows)

    literals = tuple(data.get("fast", {}).get("literals", ()))
    if not literals:
        raise LexiconError("failure lexicon: [fast] literals is empty")
    families = [_family(row) for row in data.get("family", [])]
    general = data.get("general", {})
    if not isinstance(general, dict) or set(general) - {"kind", "kind_when", "kind_otherwise"}:
        raise LexiconError("failure lexicon: [general] holds kind, kind_when and kind_otherwise")
    quiet = named("quiet", required=False)
    loud_only = [bool(row.get("unless_loud", False)) for row in data.get("quiet", [])]
    reporters = data.get("reporter", {}).get("patterns", [])
    if not isinstance(reporters, list) or not all(isinstance(p, str) for p in reporters):
        raise LexiconError("failure lexicon: [reporter] patterns must be a list of strings")
    headers = data.get("fast", {}).get("headers", [])
    if not isinstance(headers, list) or not all(isinstance(p, str) for p in headers):
        raise LexiconError("failure lexicon: [fast] headers must be a list of strings")
    return Lexicon(
        literals,
        named("marker"),
        tuple(row for row, soft in zip(quiet, loud_only, strict=True) if not soft),
        tuple(row for row, soft in zip(quiet, loud_only, strict=True) if soft),
        named("loud"),
        tuple(families),
        tuple(reporters),
        named("unsilenced", required=False),
        tuple(headers),
        _kinded(Family(GENERAL, general.get("kind", "crash"), ()), general),
        named("despite", required=False),
    )


def _family(row: Any) -> Family:
    """A ``[[family]]`` row; LexiconError (one line) when it lacks a key or a term is odd."""
    if not isinstance(row, dict) or {"name", "kind", "terms"} - set(row):
        raise LexiconError("failure lexicon: a [[family]] needs name, kind and terms")
    terms = (*row["terms"], *row.get("strong", ()))
    odd = [t for t in terms if not _WORDS.fullmatch(t) or t != t.lower()]
    if odd:
        raise LexiconError(
            f"failure lexicon: family {row['name']!r}: {odd[0]!r} is not lowercase words"
            " (a last one may end in *)"
        )
    family = Family(
        row["name"],
        row["kind"],
        tuple(row["terms"]),
        tuple(row.get("strong", ())),
        tuple(row.get("fatal", ())),
    )
    return _kinded(family, row)


def _kinded(family: Family, row: dict[str, Any]) -> Family:
    """``family`` with the ``kind_when`` and ``kind_otherwise`` of its ``row``, which go
    together."""
    when, otherwise = tuple(row.get("kind_when", ())), row.get("kind_otherwise")
    if bool(when) != (otherwise is not None):
        raise LexiconError(
            f"failure lexicon: family {family.name!r}: kind_when and kind_otherwise go together"
        )
    return dataclasses.replace(family, kind_when=when, kind_otherwise=otherwise)


def _lowered(pattern: str) -> str:
    """``pattern`` with its letters lowercased, escapes (``\\b``, ``\\S``) left as they are:
    it matches a line's lowercased text where the pattern matches the line regardless of
    case."""
    return re.sub(r"\\.|[^\\]+", lambda m: m[0] if m[0][0] == "\\" else m[0].lower(), pattern)


def _any(patterns: tuple[str, ...] | list[str], flags: str = "") -> str:
    return (
        f"(?{flags}:" + "|".join(f"(?:{p})" for p in patterns) + ")"
        if flags
        else ("|".join(f"(?:{p})" for p in patterns))
    )


class FailureLines:
    """The lexicon compiled into polars expressions."""

    def __init__(self, lexicon: Lexicon | None = None) -> None:
        self.lexicon = lexicon or builtin_lexicon()
        self._literals = [w.lower() for w in self.lexicon.literals]
        self._headers = "|".join(self.lexicon.headers)
        levels = [p for _, p in self.lexicon.unsilenced]
        self._level = _any(levels) if levels else None
        """Reports at whatever level their line is logged (``unsilenced``)."""
        # the fast path's severity headers are markers too (written once, in ``headers``)
        markers = [*self.lexicon.markers, *((HEADER, p) for p in self.lexicon.headers)]
        self._marker = _any([*(p for _, p in markers), *levels])
        others = [p for n, p in self.lexicon.quiet if n != DELIBERATE_END]
        self._quiet = _any(others) if others else None
        ends = [p for n, p in self.lexicon.quiet if n == DELIBERATE_END]
        self._end = _Regex.of(ends) if ends else None
        failed = [p for n, p in markers if n == FAILED]
        self._failed = _Regex.of(failed) if failed else None
        self._soft_quiet = _any([p for _, p in self.lexicon.soft_quiet])
        self._despite = _any([p for _, p in self.lexicon.despite]) if self.lexicon.despite else None
        self._loud = _Regex.of([p for _, p in self.lexicon.loud])
        self._families = self.lexicon.families
        kinded = (*self._families, self.lexicon.general)
        self._names = pl.Series([f.name for f in kinded])
        self._kinds = pl.Series([f.kind for f in kinded])
        """Per family, then for a line that names none: the family's name and its kind."""
        reports = [*(p for n, p in markers if n not in MENTIONS), *levels]
        self._report = _any(reports) if reports else None
        deaths = [p for n, p in markers if n in DEATHS]
        self._death = _any(deaths) if deaths else None
        self._unnamed = _any([WEB_ADDRESS, HOST_NAME, PCI_ID, *self.lexicon.reporters])
        """What names who or where, not what failed: web addresses, host names, bus ids,
        reporters' tags."""
        self._needles, self._weights = _vocabulary(self._families)
        self._needle_type = pl.Enum(self._needles)
        """The words and phrases of every family as the texts looked for in a line's words
        (``_needle``; as an Enum, each text's index), and per text its weight in each
        family's score."""
        self._fatal = [
            (i, _lowered(_any(f.fatal))) for i, f in enumerate(self._families) if f.fatal
        ]
        """The families with fatal terms, and the regex of those terms, lowercased to run on
        the lowercased text: a case-blind regex finds its words three times slower (no
        literal search for a word in every case)."""
        self._kind_when = [
            (i, _lowered(_any(f.kind_when)), f.kind_otherwise)
            for i, f in enumerate(kinded)
            if f.kind_when
        ]
        """The families (the general one last) whose kind depends on the line
        (``Family.kind_when``), the regex of the terms their kind needs, lowercased, and the
        kind without one."""
        self._plans: dict[tuple[str, str], _Plan] = {}

    @property
    def literal_scan(self) -> str:
        """A regex that matches every line ``failure_like`` marks: a caller folds it into a
        scan of its own, then marks the few lines it matches with ``failure_like``. Only the
        ASCII words are matched without regard to case, as ``failure_like`` matches them (a
        case-blind non-ASCII word costs the whole scan an eighth more)."""
        folded = [w for w in self._literals if w.isascii()]
        exact = [w for w in self._literals if not w.isascii()]
        parts = ["(?i:" + "|".join(map(escaped, folded)) + ")", *map(escaped, exact)]
        return "|".join([*parts, self._headers] if self._headers else parts)

    def failure_like(self, raw: pl.Expr) -> pl.Expr:
        """True on the lines that hold one of the fast path's words (case-blind) or a
        severity header without one."""
        marked = raw.str.contains_any(self._literals, ascii_case_insensitive=True)
        return marked | raw.str.contains(self._headers) if self._headers else marked

    def going_on(self, raw: pl.Expr) -> pl.Expr:
        """True on the lines that say their program goes on, a sign of life after an error: a
        retry or a recovery (``RECOVERED``), or a line at a lower severity (``LOWER_SEVERITY``)
        that reports nothing failing (no marker, an error level such as NCCL's WARN included:
        NCCL passes an error's code up its calls in INFO lines); never one holding a ``loud``
        word, nor one holding a ``despite`` pattern."""
        quiet = dict((*self.lexicon.quiet, *self.lexicon.soft_quiet))
        recovered = quiet.get(RECOVERED)
        lower = quiet.get(LOWER_SEVERITY)
        said = pl.lit(False)
        if lower:  # the unsilenced reports are among the markers
            said = raw.str.contains(lower) & ~raw.str.contains(self._marker)
        if recovered:
            said = said | raw.str.contains(recovered)
        if self._despite:
            said = said & ~raw.str.contains(self._despite)
        return said & ~self._loud.on(raw, raw.str.to_lowercase())

    def read(self, frame: pl.DataFrame, raw: str, message: str) -> pl.DataFrame:
        """The rows of ``frame`` that read as failures or as the job's deliberate end, with
        ``_family``, ``_reading`` (the family's kind), ``_fatal`` (the line reports an end),
        ``_mention`` (its only marker names a thing failures are about: no report) and ``_end``
        (a deliberate end: the other columns null) added. ``raw`` names the column of
        lines as they came (markers and quiet words: a logging level is in the prefix),
        ``message`` the lines without their prefixes (vocabulary).

        In stages over fewer and fewer rows: the lines holding a marker or a deliberate end's
        words; of those, the ones no quiet word silences; of those, their family and whether
        they report an end. Every line of the second stage that is no deliberate end holds a
        marker (a ``failure`` marker is what makes a line holding an end's words no end)."""
        plan = self._plans.get((raw, message))
        if plan is None:
            plan = self._plans[(raw, message)] = self._plan(pl.col(raw), pl.col(message))
        read = (
            frame.with_columns(plan.blind)
            .filter(plan.found)
            .with_columns(plan.flags)
            .filter(plan.quiet)
            .drop(_BLIND)
        )
        if read.is_empty():
            return read.drop(_LOUD).with_columns(plan.nothing)
        read = read.with_columns(plan.lowered)
        return read.with_columns(self._readings(read)).drop(_LOWER, _PLAIN, _DEATH, _LOUD)

    def _readings(self, read: pl.DataFrame) -> list[pl.Series]:
        """``_family``, ``_reading`` and ``_fatal`` of the lines ``read`` (with ``_end``,
        ``_loud``, ``_death`` and the lowercased text ``_lower``)."""
        lower = read.get_column(_LOWER)
        chosen, named, _ = self._families_of(lower, read.get_column(_PLAIN))
        stated = np.zeros(read.height, dtype=bool)
        for family, fatal in self._fatal:
            theirs = named & (chosen == family)
            if theirs.any():
                stated[theirs] = lower.filter(pl.Series(theirs)).str.contains(fatal).to_numpy()
        failing = ~read.get_column(END).to_numpy()
        death = read.get_column(_DEATH).to_numpy() | read.get_column(_LOUD).to_numpy()
        which = pl.Series(np.where(named, chosen, len(self._families)).astype(np.uint32))
        kept, nulls = pl.Series(failing), pl.repeat(None, read.height, dtype=pl.String, eager=True)
        kinds = self._kinds_of(which, lower)
        return [
            self._names.gather(which).zip_with(kept, nulls).alias(FAMILY),
            kinds.zip_with(kept, nulls).alias(READING),
            pl.Series(FATAL, failing & (death | stated)),
        ]

    def strong_reading(self, text: pl.Series) -> pl.Series:
        """The kind each line reads as when a strong term of its family is in it, else null:
        for the lines a ``generic`` catalogue entry matched (a Python exception's last line),
        whose form the entry names but not what failed. A plain term is not enough there
        (``ConnectionError``, ``DistBackendError`` say little of what broke)."""
        if text.is_empty():
            return pl.Series(READING, [], dtype=pl.String)
        line = _located(pl.col("text"))
        words = text.to_frame("text").select(_words_apart(line), _as_written(line).alias("plain"))
        lower = words.get_column("text")
        chosen, named, strong = self._families_of(lower, words.get_column("plain"))
        sure = named & strong[np.arange(len(chosen)), chosen]
        which = pl.Series(np.where(sure, chosen, len(self._families)).astype(np.uint32))
        nulls = pl.repeat(None, len(which), dtype=pl.String, eager=True)
        kinds = self._kinds_of(which, lower)
        return kinds.zip_with(pl.Series(sure), nulls).alias(READING)

    def _kinds_of(self, which: pl.Series, lower: pl.Series) -> pl.Series:
        """The kind of each line's family (``which``: its index, or the general one's), the
        other kind of a family whose kind needs a term (``Family.kind_when``) where the line
        (``lower``, lowercased) holds none."""
        kinds = self._kinds.gather(which)
        index = which.to_numpy()
        for family, needed, otherwise in self._kind_when:
            theirs = index == family
            if theirs.any():
                holds = np.ones(len(which), dtype=bool)
                holds[theirs] = lower.filter(pl.Series(theirs)).str.contains(needed).to_numpy()
                other = pl.repeat(otherwise, len(which), dtype=pl.String, eager=True)
                kinds = kinds.zip_with(pl.Series(holds), other)
        return kinds

    def _families_of(
        self, lower: pl.Series, plain: pl.Series
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per line of ``lower`` (lowercased, identifiers' words apart): the index of its family
        (the first of the highest scores), whether any family's term is in it, and per family
        whether one of its strong terms is. Counted from the families' words found in the
        line's words (one scan for every family), not with a regex per family. A term is
        counted as often as the line holds it, split as an identifier's words or as written
        (``plain``, lowercased; null where nothing was split): the vendors' names mix cases as
        identifiers do ("PCIe", "NVLink", "InfiniBand") and must not come apart ("PC Ie")."""
        split = self._term_counts(lower, np.arange(lower.len()))
        written = plain.is_not_null().to_numpy()
        whole = self._term_counts(plain.filter(pl.Series(written)), np.flatnonzero(written))
        keys, at = np.unique(np.concatenate([split[0], whole[0]]), return_inverse=True)
        counts = np.zeros(len(keys), dtype=np.int64)
        np.maximum.at(counts, at, np.concatenate([split[1], whole[1]]))
        rows, needles = np.divmod(keys, len(self._needles))
        scores = np.zeros((lower.len(), len(self._families)), dtype=np.int64)
        np.add.at(scores, rows, self._weights[needles] * counts[:, None])
        strong = np.zeros(scores.shape, dtype=bool)
        np.logical_or.at(strong, rows, self._weights[needles] >= 2)
        return scores.argmax(axis=1), scores.max(axis=1) > 0, strong

    def _term_counts(self, lower: pl.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (line, text) pairs of the families' terms that ``lower``'s lines (``rows``:
        their indices) hold, as ``line * texts + text``, and how often each line holds each."""
        unnamed = lower.str.replace_all(self._unnamed, " ")
        words = (" " + unnamed.str.replace_all(r"\W+", " ") + " ").str.extract_many(
            self._needles, overlapping=True
        )
        found = words.explode(empty_as_null=False, keep_nulls=False).cast(self._needle_type)
        holder = np.repeat(rows, words.list.len().fill_null(0).to_numpy())
        keys = holder * len(self._needles) + found.to_physical().to_numpy()
        return np.unique(keys, return_counts=True)

    def _plan(self, lines: pl.Expr, text: pl.Expr) -> _Plan:
        """``read``'s expressions over the columns ``lines`` and ``text``: built once, as
        building them costs more than running them on a batch's few failure lines."""
        blind = pl.col(_BLIND)
        # ranks named at fault (a failure stated, or a clean exit: "rank 2 exited with exit
        # code 0"), or the ranks ready while the others are waited for (a stall report,
        # whatever else the line holds)
        waited = text.str.contains(READY_RANKS)
        found = (
            text.str.contains(self._marker)
            | lines.str.contains(self._marker)
            | text.str.contains(NAMED_RANKS)
            | waited
        )
        # the words of an end, of a recovery or of a lower level, as the line states them: not
        # in its guesses at what caused it (``HYPOTHESES``: "preempted node" among them)
        said = _stated(lines)
        read_text = _located(_stated(text))  # the text whose words the families read
        ends = self._end.on(said, blind) if self._end else pl.lit(False)
        failed = self._failed.on(said, blind) if self._failed else pl.lit(False)
        quiet = said.str.contains(self._quiet) if self._quiet else pl.lit(False)
        soft = said.str.contains(self._soft_quiet) & ~pl.col(_LOUD)
        if self._despite:
            despite = said.str.contains(self._despite)
            quiet, soft = quiet & ~despite, soft & ~despite
        if self._level:
            soft = soft & ~said.str.contains(self._level)
        death = said.str.contains(self._death) if self._death else pl.lit(False)
        mention = (
            ~(text.str.contains(self._report) | lines.str.contains(self._report) | waited)
            if self._report
            else ~waited
        )
        return _Plan(
            blind=said.str.to_lowercase().alias(_BLIND),
            found=found | ends,
            flags=[(ends & ~failed).alias(END), self._loud.on(said, blind).alias(_LOUD)],
            quiet=pl.col(END) | ~(quiet | soft),
            lowered=[
                _words_apart(read_text).alias(_LOWER),
                _as_written(read_text).alias(_PLAIN),
                death.alias(_DEATH),
                (mention & ~pl.col(END)).alias(MENTION),
            ],
            nothing=[
                pl.lit(None, pl.String).alias(FAMILY),
                pl.lit(None, pl.String).alias(READING),
                pl.lit(None, pl.Boolean).alias(FATAL),
                pl.lit(None, pl.Boolean).alias(MENTION),
            ],
        )


@dataclass(frozen=True)
class _Plan:
    """The expressions of ``FailureLines.read`` over one pair of columns, stage by stage."""

    blind: pl.Expr
    found: pl.Expr
    flags: list[pl.Expr]
    quiet: pl.Expr
    lowered: list[pl.Expr]
    nothing: list[pl.Expr]


HYPOTHESES = (
    r"(?i)\b(?:th(?:is|at)|it) (?:can|could|may|might) (?:also )?happen (?:when|if)\b"
    r"|\b(?:possible|potential|common|likely) (?:root )?(?:causes|reasons)\b"
    r"|\b(?:th(?:is|at)|it|which) (?:can|could|may|might) (?:also |potentially |"
    r"possibly |eventually )?(?:cause|lead to|result in)\b"
    r"|[;,.!]\s*[^;,.!?]{1,60}\?\s*$"
)
"""Where a message goes on to list what might have caused it (Ray's "This can happen when (1)
raylet crashes unexpectedly (OOM, ...) (2) ...", "There are some potential root causes. (1)
..."), to warn what it might cause (vLLM's "Error executing method X. This might cause
deadlock in distributed execution."), or ends asking its reader about a cause (Charliecloud's
"nvidia-container-cli failed; does this host have GPUs?"): guesses, whose words say nothing of
what failed. A single cause a message suggests ("This might be due to a deadlock") is its
reading, and kept."""


HYPOTHESIS_WORDS = ["happen", "cause", "reasons", "lead to", "result in", "?"]
"""A word every guess of ``HYPOTHESES`` holds: a literal search finds the few lines that may
make one (the regex is case-blind throughout, which no literal search leads)."""


def _stated(text: pl.Expr) -> pl.Expr:
    """``text`` up to the guesses at its cause (``HYPOTHESES``), if it makes any."""
    guessing = text.str.contains_any(HYPOTHESIS_WORDS, ascii_case_insensitive=True)
    return pl.when(guessing).then(text.str.replace(f"(?:{HYPOTHESES}).*$", "")).otherwise(text)


def _located(text: pl.Expr) -> pl.Expr:
    """``text`` with the directories of the source files it names left out
    (``SOURCE_DIRECTORIES``), and a logger's dotted name (``LOGGER_NAME``)."""
    return text.str.replace_all(SOURCE_DIRECTORIES, "${1}").str.replace_all(LOGGER_NAME, "[]")


def _words_apart(text: pl.Expr) -> pl.Expr:
    """``text`` lowercased, with the words of an identifier written in camel case apart
    (``ncclCommWatchdog``: "nccl comm watchdog"; ``ProcessGroupNCCL``: "process group nccl"),
    and a device's index apart from its name (``GPU3``, ``nvme0``, ``hca2``: "gpu 3"; a word of
    fewer than three letters keeps its digits, as ``s3`` does): stack frames and exception
    names hold what failed in their identifiers, and devices are written with their index."""
    return (
        text.str.replace_all(r"([a-z0-9])([A-Z])", "$1 $2")
        .str.replace_all(r"([A-Z])([A-Z][a-z])", "$1 $2")
        .str.to_lowercase()
        .str.replace_all(r"\b([a-z]{3,})(\d+)\b", "$1 $2")
    )


def _as_written(text: pl.Expr) -> pl.Expr:
    """``text`` lowercased where ``_words_apart`` splits a word of it (``CAMEL_CASE``), else
    null: the same words either way."""
    return pl.when(text.str.contains(CAMEL_CASE)).then(text.str.to_lowercase())


def _vocabulary(families: tuple[Family, ...]) -> tuple[list[str], np.ndarray]:
    """The texts that find the families' terms in a line's words, and per text its weight in
    each family's score: 1 per term, 2 per strong term (a text both is counts 3)."""
    needles: dict[str, int] = {}
    weights: list[np.ndarray] = []
    for family, terms, weight in [
        (i, terms, weight)
        for i, f in enumerate(families)
        for terms, weight in ((f.terms, 1), (f.strong, 2))
    ]:
        for term in dict.fromkeys(terms):
            at = needles.setdefault(_needle(term), len(needles))
            if at == len(weights):
                weights.append(np.zeros(len(families), dtype=np.int64))
            weights[at][family] += weight
    return list(needles), np.array(weights, dtype=np.int64).reshape(len(needles), len(families))


def _needle(term: str) -> str:
    """The text that finds ``term`` in a line's words (lowercased, each run of non-word
    characters one space, a space at each end): the term between spaces, or only after one
    for a word's beginning (``alloc*``)."""
    return f" {term[:-1]}" if term.endswith("*") else f" {term} "


@dataclass(frozen=True)
class _Regex:
    """A regex of the lexicon, run on the lowercased lines (``blind``) where it is
    case-blind throughout: the regex crate finds lowercase words with a literal search, a
    case-blind regex without (three times slower)."""

    pattern: str
    blind: bool

    @staticmethod
    def of(patterns: list[str]) -> _Regex:
        lowered = [_caseless(p) for p in patterns]
        if all(p is not None for p in lowered):
            return _Regex(_any([p for p in lowered if p is not None]), True)
        return _Regex(_any(patterns), False)

    def on(self, lines: pl.Expr, blind: pl.Expr) -> pl.Expr:
        """Whether each line holds a match (``blind``: the lines lowercased)."""
        return (blind if self.blind else lines).str.contains(self.pattern)


def _caseless(pattern: str) -> str | None:
    """The inside of a pattern that is one case-blind group, ``(?i:...)``, lowercased to run
    on lowercased text; None for any other pattern."""
    if not pattern.startswith("(?i:") or not pattern.endswith(")") or "(?-i" in pattern:
        return None
    depth, at, in_class = 0, 0, False
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
            if depth == 0 and at != len(pattern) - 1:
                return None
        at += 1
    return _lowered(pattern[4:-1])
