"""A corpus of real frameworks' progress lines with their truth, and how a reading is scored.

One TOML file per framework or launcher (``tests/data/real/progress/*.toml``)::

    [source]
    framework = "nanoGPT"
    formats = ["nanogpt"]      # the built-in formats written for it (their ``framework``)
    observed = ["karpathy/nanoGPT train.py"]     # where the format was observed

    [[case]]
    line = "iter 100: loss 2.3456, time 123.45ms, mfu 45.67%"   # or lines = [...] for a record
    step = 100                 # absent: the line names no step
    step_time_s = 0.12345      # absent: the line gives no step time
    throughput = 1234.5        # optional, with its unit
    unit = "tokens/s"

    [[case]]
    line = "Map: 100%|...| 10000/10000 [00:01<00:00, 8000.00 examples/s]"
    not_a_step = true          # a look-alike: it must not be read as a training step
    why = "datasets.map"

A file's cases are one job's log, in order (the learning reader may learn from the lines
before a case). A case is right when its lines give exactly one training step with the truth's
step, step time and throughput (each absent in the truth must be absent in the reading), and a
look-alike when its lines give no training step at all.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from medic.ingest.base import Batch
from medic.parse.progress import ProgressParser
from medic.schema import LOGS

CASE_KEYS = {"line", "lines", "step", "step_time_s", "throughput", "unit", "not_a_step", "why"}
CASE_KEYS |= {"event"}
"""``event``: a look-alike's own progress event (eval_step, eval_end...), for the record."""


class CorpusError(ValueError):
    """A corpus file is malformed; the message names the file and the case."""


@dataclass(frozen=True)
class Case:
    framework: str
    index: int
    lines: tuple[str, ...]
    step: int | None = None
    step_time_s: float | None = None
    throughput: float | None = None
    not_a_step: bool = False


@dataclass(frozen=True)
class Verdict:
    """What the reading of a case got right."""

    recognised: bool
    """A step for a progress case; no step for a look-alike."""
    step: bool
    timing: bool
    """Step time and throughput as the truth says (absent where it gives none)."""
    problem: str = ""

    @property
    def right(self) -> bool:
        return self.recognised and self.step and self.timing


def load_file(path: Path) -> list[Case]:
    """The cases of one corpus file; CorpusError naming the file and case when malformed."""
    try:
        data = tomllib.loads(path.read_text())
        framework = str(data["source"]["framework"])
        if not data["source"].get("observed"):
            raise KeyError("source.observed")
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise CorpusError(f"{path}: {exc}") from None
    cases = []
    for index, raw in enumerate(data.get("case", [])):
        unknown = sorted(set(raw) - CASE_KEYS)
        if unknown or ("line" in raw) == ("lines" in raw):
            problem = f"unknown key '{unknown[0]}'" if unknown else "needs line or lines"
            raise CorpusError(f"{path}: case {index + 1}: {problem}")
        lines = (raw["line"],) if "line" in raw else tuple(raw["lines"])
        cases.append(
            Case(
                framework,
                index,
                lines,
                raw.get("step"),
                raw.get("step_time_s"),
                raw.get("throughput"),
                bool(raw.get("not_a_step", False)),
            )
        )
    return cases


def load_corpus(directory: Path) -> dict[str, list[Case]]:
    """Every file's cases, by file stem."""
    return {path.stem: load_file(path) for path in sorted(directory.glob("*.toml"))}


def load_formats(directory: Path) -> dict[str, tuple[str, ...]]:
    """Per file (by stem), the built-in formats written for its framework (``[source]
    formats``, by their ``framework``): what a leave-one-framework-out run takes out."""
    formats: dict[str, tuple[str, ...]] = {}
    for path in sorted(directory.glob("*.toml")):
        try:
            names = tomllib.loads(path.read_text())["source"]["formats"]
        except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise CorpusError(f"{path}: {exc}") from None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CorpusError(f"{path}: [source] formats must list format framework names")
        formats[path.stem] = tuple(names)
    return formats


def read_job(cases: list[Case], parser: ProgressParser | None = None) -> list[list[dict[str, Any]]]:
    """The progress rows each case's lines give, the cases read as one job's log (one line a
    second, in order) through the progress parser."""
    lines = [line for case in cases for line in case.lines]
    owner = [i for i, case in enumerate(cases) for _ in case.lines]
    logs = pl.DataFrame(
        {
            "time": pl.Series(range(len(lines)), dtype=pl.Int64) * 1_000_000,
            "job_id": ["corpus"] * len(lines),
            "node": ["n1"] * len(lines),
            "rank": pl.Series([None] * len(lines), dtype=pl.Int32),
            "source": ["app"] * len(lines),
            "message": lines,
        }
    ).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")))
    out = (parser or ProgressParser()).parse(Batch("logs", logs.to_arrow().cast(LOGS)))
    found: list[list[dict[str, Any]]] = [[] for _ in cases]
    if out is None:
        return found
    for row in out.frame.to_dicts():
        found[owner[int(row["time"].timestamp())]].append(row)
    return found


def score(case: Case, rows: list[dict[str, Any]]) -> Verdict:
    """How the rows read from a case's lines compare with its truth."""
    steps = [row for row in rows if row["event"] == "step"]
    if case.not_a_step:
        ok = not steps
        return Verdict(ok, ok, ok, "" if ok else f"read as step {steps[0]['step']}")
    if len(steps) != 1:
        return Verdict(False, False, False, f"{len(steps)} step rows")
    row = steps[0]
    step_ok = row["step"] == case.step
    timing_ok = _same(row["step_time_s"], case.step_time_s) and _same(
        row["throughput"], case.throughput
    )
    problem = (
        ""
        if step_ok and timing_ok
        else (f"read step {row['step']} time {row['step_time_s']} throughput {row['throughput']}")
    )
    return Verdict(True, step_ok, timing_ok, problem)


def _same(read: float | None, truth: float | None) -> bool:
    """Equal to a truth written with four significant digits or more: a collector writes the
    reciprocal of a bar's rate rounded (0.813 for "1.23it/s")."""
    if read is None or truth is None:
        return read is None and truth is None
    return math.isclose(read, truth, rel_tol=5e-4)
