"""The baseline of ``pipeline_throughput.py``: medic's log parsing written the naive way.

One Python loop over the lines, Python's ``re`` per line: the same signature catalogue
(``medic/parse/signatures.toml``, first matching entry wins, its named groups extracted,
the Xid table applied) and the same progress formats (``medic.parse.progress.FORMATS``, first
matching format wins, its values read). Each entry's or format's literals gate its regex, as
anyone writing this loop would; of a stack's lines (a traceback's header, a listing's that
is no exception's, the frames), a process's frames after its first such line in the same
second are dropped, as medic's parser drops them within a batch (the benchmark's batches are
seconds). ``pipeline_throughput.py`` checks that it finds exactly the rows medic's vectorised
parsers find before it times either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from medic.parse.catalogue import GROUPS, Catalogue
from medic.parse.prefixes import MAX_ROUNDS, PrefixStripper
from medic.parse.progress import ANSI_ESCAPE, FORMATS, LOOKALIKE, RANK_IN_TEXT
from medic.parse.signatures import TRACEBACK, TRACEBACK_FRAME
from medic.timeutil import US

Line = tuple[Any, ...]
"""(time, job_id, node, rank, source, message), the columns of a logs row."""


@dataclass(frozen=True)
class _Entry:
    id: str
    literals: tuple[str, ...]
    regex: re.Pattern[str]
    kind: str
    implicates: str
    severity: str
    role: str
    action: str
    xid_table: bool


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


class NaivePrefixes:
    """Prefix stripping, one line at a time: the stripper's regex matched at the line's start
    again and again, each match cut off."""

    def __init__(self) -> None:
        self.regex = re.compile(PrefixStripper().pattern)

    def strip(self, message: str) -> tuple[str, int | None, str | None]:
        """The bare message, and the rank and host its prefixes name."""
        rank: int | None = None
        host: str | None = None
        for _ in range(MAX_ROUNDS):
            found = self.regex.match(message)
            if found is None:
                break
            said = {
                name.rsplit("_", 1)[0]: value
                for name, value in found.groupdict().items()
                if value is not None
            }
            rank = rank if rank is not None else _int(said.get("rank"))
            host = host or said.get("host")
            message = message[found.end() :]
        return message, rank, host


class NaiveSignatures:
    """Signature matching, one line at a time."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.entries = [
            _Entry(
                row["id"],
                tuple(row["literals"]),
                re.compile(row["pattern"]),
                row["kind"],
                row["implicates"],
                row["severity"],
                row["role"],
                row["action"],
                row["xid_table"],
            )
            for row in catalogue.signatures.iter_rows(named=True)
        ]
        self.xids = {row["code"]: row for row in catalogue.xids.iter_rows(named=True)}
        self.prefixes = NaivePrefixes()

    def match(self, lines: Iterable[Line]) -> list[tuple[Any, ...]]:
        """One row per matching line: (time, rank, signature, kind, severity, action, xid,
        xid_name, pci, host, exit_code)."""
        out = []
        told: set[tuple[Any, ...]] = set()  # (job, node, rank, second) with a traceback line
        for time, job, node, rank, _source, line in lines:
            message, prefix_rank, prefix_host = self.prefixes.strip(line)
            for entry in self.entries:
                if not any(literal in message for literal in entry.literals):
                    continue
                found = entry.regex.search(message)
                if found is None:
                    continue
                groups = {
                    name: found.group(name) if name in entry.regex.groupindex else None
                    for name in GROUPS
                }
                xid = _int(groups["xid"])
                known = self.xids.get(xid) if xid is not None else None
                table = known if entry.xid_table and known is not None else None
                if rank is None:
                    rank = _int(groups["rank"])
                if rank is None:
                    rank = prefix_rank
                if entry.id in TRACEBACK:
                    process = (job, node, rank, time // US)
                    if entry.id == TRACEBACK_FRAME and process in told:
                        break
                    told.add(process)
                named = groups["ranks"]
                ranks = [int(r) for r in named.split(",")] if named else [rank]
                pci = groups["pci"]
                out.extend(
                    (
                        time,
                        each,
                        entry.id,
                        table["kind"] if table else entry.kind,
                        table["severity"] if table else entry.severity,
                        table["action"] if table else entry.action,
                        xid,
                        known["mnemonic"] if known else None,
                        pci.lower() if pci is not None else None,
                        groups["host"] or prefix_host,
                        _int(groups["exit_code"]),
                    )
                    for each in ranks
                )
                break
        return out


class NaiveProgress:
    """Progress extraction, one line at a time."""

    def __init__(self) -> None:
        self.ansi = re.compile(ANSI_ESCAPE)
        self.lookalike = re.compile(LOOKALIKE)
        self.formats = [(f, re.compile(f.pattern)) for f in FORMATS]
        self.rank_in_text = re.compile(RANK_IN_TEXT)
        self.prefixes = NaivePrefixes()

    def match(self, lines: Iterable[Line]) -> list[tuple[Any, ...]]:
        """One row per progress line: (time, job_id, node, rank, framework, event, step,
        step_time_s, throughput, throughput_unit)."""
        out = []
        for time, job_id, node, rank, _source, line in lines:
            if job_id is None:
                continue
            message, prefix_rank, _ = self.prefixes.strip(line)
            if rank is None:
                rank = prefix_rank
            text = None
            for fmt, regex in self.formats:
                if fmt.anchors and not any(anchor in message for anchor in fmt.anchors):
                    continue
                if text is None:
                    text = self.ansi.sub("", message)
                found = regex.search(text)
                if found is None:
                    continue
                if fmt.bar and self.lookalike.search(found.groupdict().get("desc") or ""):
                    break
                if fmt.event == "part":
                    break
                values = {
                    name: _number(found.group(name)) if name in regex.groupindex else None
                    for name in (
                        "step",
                        "step_time_s",
                        "step_time_ms",
                        "step_time_us",
                        "s_per_it",
                        "it_per_s",
                    )
                }
                throughput = (
                    _number(found.group("throughput")) if "throughput" in regex.groupindex else None
                )
                step_time = _first(
                    values["step_time_s"],
                    None if values["step_time_ms"] is None else values["step_time_ms"] / 1000.0,
                    None if values["step_time_us"] is None else values["step_time_us"] / 1e6,
                    values["s_per_it"],
                    None if values["it_per_s"] is None else _inverse(values["it_per_s"]),
                    _clock(found.groupdict().get("step_time_clock")),
                )
                if step_time is not None and not (math.isfinite(step_time) and step_time > 0):
                    step_time = None
                step = values["step"]
                out.append(
                    (
                        time,
                        job_id,
                        node,
                        rank if rank is not None else self._rank(message),
                        fmt.framework,
                        fmt.event,
                        int(step) if step is not None and math.isfinite(step) else None,
                        step_time,
                        throughput,
                        fmt.unit if throughput is not None else None,
                    )
                )
                break
        return out

    def _rank(self, message: str) -> int | None:
        found = self.rank_in_text.search(message)
        return _int(found.group(1)) if found else None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _clock(text: str | None) -> float | None:
    """A clock ("mm:ss", "h:mm:ss") in seconds."""
    if text is None:
        return None
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _inverse(value: float) -> float:
    return math.inf if value == 0 else 1.0 / value
