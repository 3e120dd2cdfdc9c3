"""File source: tails job output files (``slurm-%j.out`` and the like) into ``logs`` batches.

The embedded default when no log store is configured. ``paths`` are Slurm filename patterns
(``%j`` job id, ``%A``/``%a`` array job and task, ``%J`` job.step, ``%N`` node, ``%t`` task id
= rank, ``%n`` node index, ``%x`` job name, ``%u`` user, ``%s`` step, ``%%``; a width such
as ``%4t`` is allowed) and may hold shell wildcards in directories (``/scratch/*/%x-%j.out``).
Each pattern is globbed every poll; the job id, node and rank of a line come from its file's
path, and the rank otherwise from a line prefix such as torchrun's ``[rank3]:``. A file whose
path has no ``%N`` (Slurm's default ``slurm-%j.out``, which every node of a job writes to)
gives its lines no node: the pipeline places each line from its own text and the job's nodes
in Slurm (``medic.parse.placement``), never on the host that runs medic.

Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (tqdm redraws its bar after ``\\r``); empty
lines are dropped. A last line without its end is held until it completes, or until it has
not changed for ``partial_flush_s`` (a job that died mid-line). Files are followed by
(device, inode): a file renamed away (rotation) is read to its end before its successor is
read from the start; a file that shrank (copytruncate) is read again from the start; a
deleted file is read to its end and forgotten. Handles of files unchanged for
``idle_close_s`` are closed (their offsets are kept).

A pattern matching no file is logged as a warning (again whenever it stops matching) and
``files_matched`` counts the files followed, for ``medic_log_files_matched``. Lines of binary
junk (a NUL byte, or more than a tenth control characters and undecodable bytes) are skipped
and counted (``junk_lines``, ``junk_bytes``) rather than handed to the detectors.

Time and watermark (this source reads the wall clock): output files carry no timestamps, so
every line read in a poll is stamped with that poll's time, and the watermark after the poll
is that time (later lines are stamped later). The cursor holds each file's identity and the
offset just past its last complete line, so a restart resumes where the previous run stopped,
without gap or duplicate.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import polars as pl
import pyarrow as pa

from medic import schema
from medic.config import NonNegative, Positive, PositiveCount
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.live import SourceStats, wall_us
from medic.probe import Probe

log = logging.getLogger(__name__)

TORCHRUN_RANK = r"^\[rank(\d+)\]:"
_TOKEN = re.compile(r"%(\d*)([a-zA-Z%])")
_GROUPS = {
    "j": ("job", r"\d+"),
    "A": ("array_job", r"\d+"),
    "a": ("array_task", r"\d+"),
    "J": ("job_step", r"\d+(?:\.\d+)?"),
    "N": ("node", r"[^/]+?"),
    "n": ("node_index", r"\d+"),
    "t": ("rank", r"\d+"),
    "s": ("step", r"\d+"),
    "x": ("name", r"[^/]*?"),
    "u": ("user", r"[^/]*?"),
}
_LINE_END = re.compile(r"\r\n|\r|\n")
_JUNK_CHARS = r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x{FFFD}]"
"""Control characters other than tab, line ends and escape (colours), and the replacement
character that undecodable bytes became."""
HEAD_BYTES = 1024


def _digest(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class FilesConfig:
    """``[sources.files]``: logs from the jobs' output files (the default log source)."""

    paths: tuple[str, ...] = ("slurm-%j.out",)
    """Slurm filename patterns of the jobs' output files (``%j``, ``%N``, ``%t``, ... and shell
    wildcards in directories), globbed every poll."""
    node: str = ""
    """Node of lines whose path has no ``%N``; empty: each line's own, read from the line and
    the job's nodes in Slurm (the host medic runs on is none of them)."""
    rank_prefixes: tuple[str, ...] = (TORCHRUN_RANK,)
    """Regular expressions whose first group is the rank of a line (tried in order)."""
    source: str = "app"
    """The ``source`` column of the lines: app, system or slurm."""
    poll_interval_s: Positive = 0.5
    """How often the patterns are globbed and the files read."""
    partial_flush_s: NonNegative = 5.0
    """A last line without its end is emitted once it has not changed for this long."""
    idle_close_s: NonNegative = 300.0
    """Handles of files unchanged this long are closed (their offsets are kept)."""
    max_read_bytes: PositiveCount = 8 << 20
    """Read at most this much of one file per poll (the rest follows in the next polls)."""
    max_rows: PositiveCount = 65_536
    """Largest batch handed downstream."""

    def __post_init__(self) -> None:
        if not self.paths:
            raise ValueError("paths must name at least one pattern")
        if self.source not in schema.LOG_SOURCES:
            raise ValueError(f"source must be one of {', '.join(schema.LOG_SOURCES)}")
        for prefix in self.rank_prefixes:
            try:
                if re.compile(prefix).groups < 1:
                    raise ValueError(f"rank prefix {prefix!r} needs a group for the rank")
            except re.error as exc:
                raise ValueError(f"rank prefix {prefix!r} is not a regex: {exc}") from None
        for pattern in self.paths:
            OutputPattern(pattern)


class OutputPattern:
    """A Slurm filename pattern as a glob (to find files) and a regex (to read their path)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        glob_parts: list[str] = []
        regex_parts: list[str] = []
        pos = 0
        for match in _TOKEN.finditer(pattern):
            literal = pattern[pos : match.start()]
            glob_parts.append(literal)
            regex_parts.append(_glob_regex(literal))
            letter = match.group(2)
            if letter == "%":
                glob_parts.append("[%]")
                regex_parts.append("%")
            elif letter in _GROUPS:
                name, body = _GROUPS[letter]
                glob_parts.append("*")
                seen = f"(?P={name})" if f"(?P<{name}>" in "".join(regex_parts) else None
                regex_parts.append(seen or f"(?P<{name}>{body})")
            else:
                raise ValueError(f"unknown Slurm filename token %{letter} in {pattern!r}")
            pos = match.end()
        glob_parts.append(pattern[pos:])
        regex_parts.append(_glob_regex(pattern[pos:]))
        self.glob = "".join(glob_parts)
        self.regex = re.compile("^" + "".join(regex_parts) + "$")

    def fields(self, path: str) -> dict[str, str] | None:
        """``job_id``, ``node``, ``rank`` read from ``path``; None when it does not match."""
        match = self.regex.match(path)
        if match is None:
            return None
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        out = {}
        if "array_job" in groups and "array_task" in groups:
            out["job_id"] = f"{int(groups['array_job'])}_{int(groups['array_task'])}"
        elif "job" in groups:
            out["job_id"] = str(int(groups["job"]))
        elif "job_step" in groups:
            out["job_id"] = str(int(groups["job_step"].split(".")[0]))
        if "node" in groups:
            out["node"] = groups["node"]
        if "rank" in groups:
            out["rank"] = str(int(groups["rank"]))
        return out


def _glob_regex(text: str) -> str:
    """Regex for a literal stretch of a pattern in which ``*``, ``?`` and ``[...]`` are globs."""
    out = []
    for part in re.split(r"(\*|\?|\[[^\]]*\])", text):
        if part == "*":
            out.append("[^/]*")
        elif part == "?":
            out.append("[^/]")
        elif part.startswith("[") and part.endswith("]") and len(part) > 2:
            out.append(part)
        else:
            out.append(re.escape(part))
    return "".join(out)


@dataclass
class _File:
    """One followed file: where reading stands, and what its path says about its lines."""

    path: str
    dev: int
    ino: int
    offset: int
    meta: dict[str, str]
    partial: bytes = b""
    head_len: int = 0
    head: str = ""
    """Digest of the file's first ``head_len`` bytes, to notice an inode number reused."""
    handle: BinaryIO | None = None
    changed_at: float = 0.0

    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


@dataclass
class _Read:
    """Complete lines read from one file in one poll."""

    meta: dict[str, str]
    lines: list[str] = field(default_factory=list)


class FileSource:
    """Job output files as ``logs`` batches, one poll per ``poll_interval_s``.

    ``start_at_end`` (without a cursor) skips what the files hold at the first poll: lines
    carry their read time, so old content would be stamped as new (``medic record``)."""

    name = "files"
    resumable = True
    title = "logs (files)"
    Config = FilesConfig
    stream = "logs"
    fallback = True
    """Opened (with its defaults when ``[sources.files]`` is absent) when no other log source
    is configured, and only then."""

    @classmethod
    def open(
        cls,
        config: FilesConfig,
        client: Any,
        cursor: dict[str, Any] | None,
        *,
        start_us: int | None = None,
        until_us: int | None = None,
    ) -> FileSource:
        """From its cursor; a bounded capture (``start_us``) reads only what files gain."""
        return cls(config, cursor, start_at_end=start_us is not None)

    @classmethod
    def probe(cls, config: FilesConfig) -> list[Probe]:
        """Each path's pattern globbed: a warning for one no job output matches yet."""
        probes = []
        for path in config.paths:
            pattern = OutputPattern(path)
            found = [p for p in glob.glob(pattern.glob) if pattern.fields(p) is not None]
            if found:
                probes.append(Probe("ok", f"{len(found)} file(s) match {path}"))
            else:
                probes.append(
                    Probe(
                        "warn",
                        f"no file matches {path} yet (a job's output file appears when it "
                        "starts; check [sources.files] paths)",
                    )
                )
        return probes

    @classmethod
    def absent(cls) -> list[Probe]:
        return []

    @property
    def poll_interval_s(self) -> float | None:
        """How often it polls; None: its watermark is its own (event time)."""
        return self.config.poll_interval_s

    def __init__(
        self,
        config: FilesConfig,
        cursor: dict[str, Any] | None = None,
        *,
        start_at_end: bool = False,
        clock: Callable[[], int] = wall_us,
    ) -> None:
        self.config = config
        self._at_end = start_at_end and cursor is None
        self.clock = clock
        self.stats = SourceStats()
        self.patterns = [OutputPattern(p) for p in config.paths]
        self.node = config.node
        self.files: dict[str, _File] = {}
        self.matching: dict[str, int] = {}
        """Files each pattern matched at the last poll."""
        self.watermark: int | None = None
        self._resume = dict((cursor or {}).get("files", {}))

    def checkpoint(self) -> dict[str, Any]:
        """Each file's identity and the offset past its last line handed out."""
        return {
            "files": {
                path: {
                    "dev": f.dev,
                    "ino": f.ino,
                    "offset": f.offset,
                    "head_len": f.head_len,
                    "head": f.head,
                }
                for path, f in self.files.items()
            }
        }

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            while True:
                for event in await asyncio.to_thread(self.poll):
                    yield event
                await asyncio.sleep(self.config.poll_interval_s)
        finally:
            self.close()

    def close(self) -> None:
        for tracked in self.files.values():
            tracked.close()

    def poll(self) -> list[Event]:
        """Read what the files gained since the last poll; batches then the watermark."""
        now = self.clock()
        if self.watermark is not None:
            now = max(now, self.watermark)
        reads = self._scan(time.monotonic())
        events: list[Event] = list(self._batches(reads, now))
        self.watermark = now
        events.append(Watermark(now))
        return events

    def _scan(self, mono: float) -> list[_Read]:
        found: dict[str, dict[str, str]] = {}
        for pattern in self.patterns:
            hits = 0
            for path in glob.glob(pattern.glob):
                meta = pattern.fields(path)
                hits += meta is not None
                if meta is not None and path not in found:
                    found[path] = meta
            self._note_matches(pattern.pattern, hits)
        self.stats.counts["files_matched"] = len(found)
        sizes: dict[str, int] = {}
        where: dict[tuple[int, int], str] = {}
        for path in sorted(found):
            try:
                stat = os.stat(path)
            except OSError:
                continue
            sizes[path] = stat.st_size
            where[(stat.st_dev, stat.st_ino)] = path
        reads: list[_Read] = []
        followed: dict[str, _File] = {}
        for tracked in self.files.values():
            now_at = where.get(tracked.key())
            if now_at is None or now_at in followed:
                reads.append(self._drain(tracked))
                self.stats.add("files_left")
                continue
            if now_at != tracked.path:
                self.stats.add("renames")
            tracked.path, tracked.meta = now_at, found[now_at]
            followed[now_at] = tracked
        for path, key in ((p, k) for k, p in where.items() if p not in followed):
            followed[path] = self._start(path, key, found[path])
            if self._at_end:
                followed[path].offset = sizes[path]
        self._at_end = False
        self.files = followed
        for path, tracked in followed.items():
            if sizes[path] < tracked.offset + len(tracked.partial):
                log.info("files: %s shrank (truncated); reading it again from the start", path)
                self.stats.add("truncations")
                tracked.offset, tracked.partial = 0, b""
            reads.append(self._read(tracked, sizes[path], mono))
        return [r for r in reads if r.lines]

    def _note_matches(self, pattern: str, hits: int) -> None:
        before = self.matching.get(pattern)
        self.matching[pattern] = hits
        if hits == 0 and before != 0:
            log.warning(
                "files: no file matches %s (check [sources.files] paths; a job's output file "
                "appears when the job starts)",
                pattern,
            )
        elif hits and not before:
            log.info("files: %d file(s) match %s", hits, pattern)

    def _start(self, path: str, key: tuple[int, int], meta: dict[str, str]) -> _File:
        tracked = _File(path, key[0], key[1], 0, meta)
        saved = self._resume.pop(path, None)
        if isinstance(saved, dict) and (saved.get("dev"), saved.get("ino")) == key:
            tracked.offset = int(saved.get("offset", 0))
            tracked.head_len = int(saved.get("head_len", 0))
            tracked.head = str(saved.get("head", ""))
        return tracked

    def _read(self, tracked: _File, size: int, mono: float) -> _Read:
        if size > tracked.offset + len(tracked.partial):
            data = self._read_bytes(tracked)
            if data:
                tracked.changed_at = mono
                return self._split(tracked, data, final=False)
        elif tracked.partial and mono - tracked.changed_at >= self.config.partial_flush_s:
            return self._split(tracked, b"", final=True)
        elif tracked.handle is not None and mono - tracked.changed_at >= self.config.idle_close_s:
            tracked.close()
        return _Read(tracked.meta)

    def _drain(self, tracked: _File) -> _Read:
        """Everything left in a file that was renamed away or deleted (through its handle)."""
        data = b""
        if tracked.handle is not None:
            tracked.handle.seek(tracked.offset + len(tracked.partial))
            data = tracked.handle.read()
        read = self._split(tracked, data, final=True)
        tracked.close()
        return read

    def _read_bytes(self, tracked: _File) -> bytes:
        try:
            if tracked.handle is None:
                tracked.handle = open(tracked.path, "rb")  # noqa: SIM115 - kept open across polls
                if os.fstat(tracked.handle.fileno()).st_ino != tracked.ino:
                    tracked.close()
                    return b""
                if not self._same_content(tracked, tracked.handle):
                    log.info(
                        "files: %s is another file than before; reading it from the start",
                        tracked.path,
                    )
                    self.stats.add("replaced")
                    tracked.offset, tracked.partial, tracked.head_len = 0, b"", 0
            start = tracked.offset + len(tracked.partial)
            tracked.handle.seek(start)
            data = tracked.handle.read(self.config.max_read_bytes)
        except OSError as exc:
            self.stats.add("read_errors")
            log.warning("files: cannot read %s: %s", tracked.path, exc)
            tracked.close()
            return b""
        if start == 0 and data:
            tracked.head_len = min(HEAD_BYTES, len(data))
            tracked.head = _digest(data[: tracked.head_len])
        return data

    @staticmethod
    def _same_content(tracked: _File, handle: BinaryIO) -> bool:
        """Whether the file still starts as it did (an inode number can be reused)."""
        if not tracked.head_len:
            return True
        handle.seek(0)
        return _digest(handle.read(tracked.head_len)) == tracked.head

    def _split(self, tracked: _File, data: bytes, final: bool) -> _Read:
        buffer = tracked.partial + data
        if final:
            complete, rest = buffer, b""
        else:
            cut = max(buffer.rfind(b"\n"), buffer.rfind(b"\r")) + 1
            if cut and buffer[cut - 1 : cut] == b"\r" and cut == len(buffer):
                cut = max(buffer.rfind(b"\n", 0, cut - 1), buffer.rfind(b"\r", 0, cut - 1)) + 1
            complete, rest = buffer[:cut], buffer[cut:]
        tracked.offset += len(complete)
        tracked.partial = rest
        text = complete.decode("utf-8", errors="replace")
        return _Read(tracked.meta, [line for line in _LINE_END.split(text) if line.strip()])

    def _batches(self, reads: list[_Read], now: int) -> Iterator[Batch]:
        if not reads:
            return
        frames = [
            pl.DataFrame({"message": r.lines}).with_columns(
                pl.lit(r.meta.get("job_id"), pl.String).alias("job_id"),
                pl.lit(r.meta.get("node", self.node)).alias("node"),
                pl.lit(r.meta.get("rank"), pl.String).cast(pl.Int32).alias("rank"),
            )
            for r in reads
        ]
        frame = self._without_junk(pl.concat(frames))
        if frame.is_empty():
            return
        prefix_rank = pl.coalesce(
            [pl.col("message").str.extract(p, 1) for p in self.config.rank_prefixes]
        ).cast(pl.Int32, strict=False)
        frame = frame.select(
            pl.lit(now).cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("time"),
            "job_id",
            "node",
            pl.coalesce(pl.col("rank"), prefix_rank).alias("rank"),
            pl.lit(self.config.source).alias("source"),
            "message",
        )
        table: pa.Table = schema.conform(frame.to_arrow(), schema.LOGS)
        self.stats.add("lines", table.num_rows)
        for offset in range(0, table.num_rows, self.config.max_rows):
            yield Batch("logs", table.slice(offset, self.config.max_rows))

    def _without_junk(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The lines that are text; binary junk is counted and logged, not passed on."""
        message = pl.col("message")
        junk = message.str.contains("\x00", literal=True) | (
            message.str.count_matches(_JUNK_CHARS) * 10 > message.str.len_chars()
        )
        marked = frame.with_columns(junk.alias("_junk"))
        skipped = marked.filter(pl.col("_junk"))
        if skipped.is_empty():
            return frame
        first = not self.stats["junk_lines"]
        self.stats.add("junk_lines", skipped.height)
        self.stats.add("junk_bytes", int(skipped.get_column("message").str.len_bytes().sum()))
        if first:
            log.warning(
                "files: skipped %d line(s) of binary junk (counted in medic_source_events)",
                skipped.height,
            )
        return marked.filter(~pl.col("_junk")).drop("_junk")
