"""A corpus of real-world log excerpts with their truth, and how a diagnosis of one is scored.

One TOML file per family (``tests/data/real/failures/*.toml``)::

    [source]
    family = "nccl_watchdog"
    signatures = ["nccl_watchdog_timeout", ...]   # the catalogue entries written for it
    observed = ["https://...", "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"]

    [[case]]
    id = "new-format-rank-prefix"
    kind = "hang"              # crash, hang, gpu_fault, node_failure, or none (a look-alike)
    culprit = ""               # the node to blame ("": none); absent: not checked
    onset = "2026-11-30T03:42:55.133Z"   # optional, within a second
    ranks = [6]                # optional: ranks the incident must name
    year = 2026                # optional: the year of timestamps that omit it
    file = "slurm-552190.out"  # the file the lines are in (default: output.log)
    lines = '''...'''          # or several [[case.file]] tables with name and lines

A case is right when its first incident (earliest onset) has the truth's onset and its first
detection (the one the rules act on first, and a backtest scores) the truth's kind and
culprit, and a look-alike yields no incident at all.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medic.diagnose.lines import LogText
from medic.diagnose.run import Finding
from medic.timeutil import US, to_us

KINDS = ("crash", "hang", "gpu_fault", "node_failure", "straggler", "none")
CASE_KEYS = {"id", "kind", "culprit", "onset", "ranks", "year", "note", "file", "lines"}


class CorpusError(ValueError):
    """A corpus file is malformed; the message names the file and the case."""


@dataclass(frozen=True)
class Case:
    family: str
    id: str
    kind: str
    texts: tuple[LogText, ...]
    culprit: str | None = None
    onset: int | None = None
    ranks: tuple[int, ...] = ()
    year: int | None = None

    @property
    def negative(self) -> bool:
        return self.kind == "none"


@dataclass(frozen=True)
class Verdict:
    """How a diagnosis of a case compares with its truth."""

    recognised: bool
    kind: bool
    culprit: bool
    onset: bool
    problems: tuple[str, ...] = field(default=())
    ranks: bool = True
    """The ranks the truth names are among the incident's."""

    @property
    def right(self) -> bool:
        return not self.problems


def load_corpus(folder: Path) -> list[Case]:
    """Every case of every ``*.toml`` family file under ``folder``, in file and case order."""
    cases: list[Case] = []
    for path in sorted(folder.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CorpusError(f"{path}: {exc}") from None
        source = data.get("source", {})
        if not source.get("observed"):
            raise CorpusError(f"{path}: [source] must cite where the formats were observed")
        family = str(source.get("family", path.stem))
        seen: set[str] = set()
        for number, entry in enumerate(data.get("case", []), 1):
            case = _case(family, entry, f"{path.name} case #{number}")
            if case.id in seen:
                raise CorpusError(f"{path.name}: duplicate case id '{case.id}'")
            seen.add(case.id)
            cases.append(case)
    return cases


def load_families(folder: Path) -> dict[str, tuple[str, ...]]:
    """Per family, the catalogue entries written for it (``[source] signatures``): what a
    leave-one-family-out run takes out. A family of look-alikes only names none."""
    families: dict[str, tuple[str, ...]] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            source = tomllib.loads(path.read_text()).get("source", {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CorpusError(f"{path}: {exc}") from None
        ids = source.get("signatures")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise CorpusError(f"{path}: [source] signatures must list catalogue entry ids")
        families[str(source.get("family", path.stem))] = tuple(ids)
    return families


def _case(family: str, entry: dict[str, Any], where: str) -> Case:
    unknown = sorted(set(entry) - CASE_KEYS)
    if unknown:
        raise CorpusError(f"{where}: unknown key '{unknown[0]}'")
    if entry.get("kind") not in KINDS:
        raise CorpusError(f"{where}: kind must be one of {', '.join(KINDS)}")
    if "lines" in entry:
        texts: tuple[LogText, ...] = (
            LogText(str(entry.get("file", "output.log")), str(entry["lines"])),
        )
    else:
        files = entry.get("file")
        if not isinstance(files, list) or not files:
            raise CorpusError(f"{where}: needs lines, or [[case.file]] tables")
        texts = tuple(LogText(str(f["name"]), str(f["lines"])) for f in files)
    onset = entry.get("onset")
    return Case(
        family=family,
        id=str(entry.get("id", where)),
        kind=str(entry["kind"]),
        texts=texts,
        culprit=None if entry.get("culprit") is None else str(entry["culprit"]),
        onset=None if onset is None else to_us(str(onset)),
        ranks=tuple(int(r) for r in entry.get("ranks", ())),
        year=entry.get("year"),
    )


def score(case: Case, findings: Sequence[Finding]) -> Verdict:
    """Compare a diagnosis with the case's truth."""
    if case.negative:
        found = tuple(f"found {f.kind} in job {f.job_id}: {f.summary}" for f in findings)
        return Verdict(not findings, not findings, not findings, True, found)
    if not findings:
        return Verdict(False, False, False, False, ("nothing found",))
    first = findings[0]
    detection = first.detections[0]
    problems: list[str] = []
    kind = detection.kind == case.kind
    if not kind:
        problems.append(f"kind {detection.kind}, not {case.kind}")
    expected = None if case.culprit is None else ((case.culprit,) if case.culprit else ())
    culprit = expected is None or tuple(detection.culprits) == expected
    if not culprit:
        problems.append(f"culprits {detection.culprits}, not {expected}")
    onset = case.onset is None or (first.onset is not None and abs(first.onset - case.onset) <= US)
    if not onset:
        problems.append(f"onset {first.onset}, not {case.onset}")
    ranks = set(case.ranks) <= set(first.ranks)
    if not ranks:
        problems.append(f"ranks {first.ranks}, not including {case.ranks}")
    return Verdict(True, kind, culprit, onset, tuple(problems), ranks)
