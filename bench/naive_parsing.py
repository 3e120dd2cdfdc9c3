"""The baseline of ``pipeline_throughput.py``: medic's log parsing written the naive way.

One Python loop over the lines, Python's ``re`` per line: the same signature catalogue
(``medic/detectors/signatures.toml``, first matching entry wins, its named groups extracted,
the Xid table applied) and the same progress formats (``medic.ingest.progress.FORMATS``, first
matching format wins, its values read). Each entry's or format's literals gate its regex, as
anyone writing this loop would. ``pipeline_throughput.py`` checks that it finds exactly the
rows medic's vectorised parsers find before it times either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from medic.detectors.catalogue import GROUPS, Catalogue
from medic.detectors.jobs import RANK_PREFIX
from medic.ingest.progress import ANSI_ESCAPE, FORMATS, RANK_PATTERNS

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
        self.rank_prefix = re.compile(RANK_PREFIX)

    def match(self, lines: Iterable[Line]) -> list[tuple[Any, ...]]:
        """One row per matching line: (time, rank, signature, kind, severity, action, xid,
        xid_name, pci, host, exit_code)."""
        out = []
        for time, _job, _node, rank, _source, message in lines:
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
                    prefix = self.rank_prefix.search(message)
                    rank = _int(prefix.group(1)) if prefix else None
                pci = groups["pci"]
                out.append(
                    (
                        time,
                        rank,
                        entry.id,
                        table["kind"] if table else entry.kind,
                        table["severity"] if table else entry.severity,
                        table["action"] if table else entry.action,
                        xid,
                        known["mnemonic"] if known else None,
                        pci.lower() if pci is not None else None,
                        groups["host"],
                        _int(groups["exit_code"]),
                    )
                )
                break
        return out


class NaiveProgress:
    """Progress extraction, one line at a time."""

    def __init__(self) -> None:
        self.ansi = re.compile(ANSI_ESCAPE)
        self.formats = [(f, re.compile(f.pattern)) for f in FORMATS]
        self.rank_patterns = [re.compile(p) for p in RANK_PATTERNS]

    def match(self, lines: Iterable[Line]) -> list[tuple[Any, ...]]:
        """One row per progress line: (time, job_id, node, rank, framework, event, step,
        step_time_s, throughput, throughput_unit)."""
        out = []
        for time, job_id, node, rank, _source, message in lines:
            if job_id is None:
                continue
            text = None
            for fmt, regex in self.formats:
                if not any(anchor in message for anchor in fmt.anchors):
                    continue
                if text is None:
                    text = self.ansi.sub("", message)
                found = regex.search(text)
                if found is None:
                    continue
                values = {
                    name: _number(found.group(name)) if name in regex.groupindex else None
                    for name in ("step", "step_time_s", "step_time_ms", "s_per_it", "it_per_s")
                }
                throughput = (
                    _number(found.group("throughput")) if "throughput" in regex.groupindex else None
                )
                step_time = _first(
                    values["step_time_s"],
                    None if values["step_time_ms"] is None else values["step_time_ms"] / 1000.0,
                    values["s_per_it"],
                    None if values["it_per_s"] is None else _inverse(values["it_per_s"]),
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
        for regex in self.rank_patterns:
            found = regex.search(message)
            if found:
                return _int(found.group(1))
        return None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _inverse(value: float) -> float:
    return math.inf if value == 0 else 1.0 / value
