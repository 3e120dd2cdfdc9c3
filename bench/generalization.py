"""What medic recognises of failures and progress lines nobody wrote an entry for:
leave-one-family-out over the corpus in ``tests/data/real``.

The full corpus scores 100% (``bench/real_corpus.py``) because it was written with the
catalogue and the formats. Here each family is taken out in turn and read with what remains:

Failures: per family (a ``tests/data/real/failures`` file), its catalogue entries (its
``[source] signatures``) are left out of the catalogue, and its failure cases go through
``medic diagnose``'s path with the rest: recognised (an incident found), kind right, culprit
right (of the cases whose truth names a node or ranks: the node, and the ranks among the
incident's). Look-alikes: every look-alike of the corpus
whose matched lines differ under the reduced catalogue is diagnosed with it; each incident it
gives is a firing (a look-alike whose lines match as before is diagnosed as before: none).

Progress: per framework (a ``tests/data/real/progress`` file whose ``[source] formats`` names
built-in formats), those formats are left out and its lines are read as one job with the
remaining formats and the learning reader: recognised (one step read), step right, timing
right (step time and throughput as the truth says). Look-alikes: the file's own and those of
the files of look-alikes only, read with the reduced formats; each one read as a step fires.
``--alone`` reads each case as a job of its own (one line or record, no run of lines to learn
a template from), as in a short excerpt.

Per family or framework, then the macro average (each family counts once).

    .venv/bin/python bench/generalization.py [--corpus tests/data/real] [--section progress]
        [--only FAMILY ...] [--failed] [--alone]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from medic.diagnose.lines import lines_frame  # noqa: E402
from medic.diagnose.run import diagnose  # noqa: E402
from medic.parse.catalogue import Catalogue, builtin_catalogue  # noqa: E402
from medic.parse.progress import FORMATS, ProgressParser  # noqa: E402
from medic.parse.progress_formats import ProgressFormat  # noqa: E402
from medic.parse.signatures import SignatureMatcher  # noqa: E402
from tests.corpus import failures as failure_corpus  # noqa: E402
from tests.corpus import progress as progress_corpus  # noqa: E402


@dataclass(frozen=True)
class Score:
    """One held-out family's figures: counts of right answers over the cases asked."""

    name: str
    left_out: tuple[str, ...]
    cases: int
    recognised: int
    kind: int
    """Failures: kind right; progress: step right."""
    named: int
    """Failures: cases whose truth names a culprit node or ranks; progress: progress cases."""
    culprit: int
    """Failures: culprit (node and ranks) right of ``named``; progress: timing right."""
    lookalikes: int
    fired: int
    problems: tuple[str, ...] = ()

    def rates(self) -> tuple[float | None, float | None, float | None]:
        def share(right: int, total: int) -> float | None:
            return right / total if total else None

        return (
            share(self.recognised, self.cases),
            share(self.kind, self.cases),
            share(self.culprit, self.named),
        )


def failure_families(
    corpus: Path, only: Sequence[str] = (), catalogue: Catalogue | None = None
) -> list[Score]:
    """Leave-one-family-out over the failure corpus: one score per family naming entries."""
    full = catalogue or builtin_catalogue()
    cases = failure_corpus.load_corpus(corpus / "failures")
    lookalikes = [c for c in cases if c.negative]
    full_hits = _hits(full, lookalikes)
    scores = []
    for family, ids in failure_corpus.load_families(corpus / "failures").items():
        if not ids or (only and family not in only):
            continue
        reduced = full.without(ids)
        mine = [c for c in cases if c.family == family and not c.negative]
        verdicts = [
            failure_corpus.score(c, diagnose(c.texts, year=c.year, catalogue=reduced)) for c in mine
        ]
        named = [v for c, v in zip(mine, verdicts, strict=True) if c.culprit or c.ranks]
        changed = [
            c
            for c, before, after in zip(
                lookalikes, full_hits, _hits(reduced, lookalikes), strict=True
            )
            if not before.equals(after)
        ]
        fired = [c for c in changed if diagnose(c.texts, year=c.year, catalogue=reduced)]
        problems = [
            f"{c.id}: {'; '.join(v.problems)}"
            for c, v in zip(mine, verdicts, strict=True)
            if not v.right
        ]
        problems += [f"look-alike {c.family}/{c.id} fired" for c in fired]
        scores.append(
            Score(
                family,
                ids,
                len(mine),
                sum(v.recognised for v in verdicts),
                sum(v.kind for v in verdicts),
                len(named),
                sum(v.culprit and v.ranks for v in named),
                len(lookalikes),
                len(fired),
                tuple(problems),
            )
        )
    return scores


def _hits(catalogue: Catalogue, cases: Sequence[failure_corpus.Case]) -> list[pl.DataFrame]:
    """Each case's lines the catalogue matches (signature and line), for comparison."""
    matcher = SignatureMatcher(catalogue)
    found = []
    for case in cases:
        lines = lines_frame(case.texts, case.year, matcher.prefixes)
        hits = matcher.match(lines) if not lines.is_empty() else pl.DataFrame()
        found.append(hits.select("time", "message", "signature") if not hits.is_empty() else hits)
    return found


def progress_frameworks(corpus: Path, only: Sequence[str] = (), alone: bool = False) -> list[Score]:
    """Leave-one-framework-out over the progress corpus: one score per framework with formats
    of its own. ``alone``: each case is read as a job of its own (one line or record, no run
    of lines to learn from), as in a short excerpt."""
    files = progress_corpus.load_corpus(corpus / "progress")
    formats = progress_corpus.load_formats(corpus / "progress")
    known = {f.framework for f in FORMATS}
    general = [name for name, cases in files.items() if all(c.not_a_step for c in cases)]
    scores = []
    for name, left_out in formats.items():
        if not left_out or (only and name not in only):
            continue
        unknown = sorted(set(left_out) - known)
        if unknown:
            raise ValueError(f"{name}: no built-in format of framework '{unknown[0]}'")
        kept = tuple(f for f in FORMATS if f.framework not in left_out)
        cases = files[name]
        verdicts = [v for _, v in _read(cases, kept, alone)]
        steps = [(c, v) for c, v in zip(cases, verdicts, strict=True) if not c.not_a_step]
        others = [
            v for other in general for c, v in _read(files[other], kept, alone) if c.not_a_step
        ]
        own = [v for c, v in zip(cases, verdicts, strict=True) if c.not_a_step]
        problems = [f"{c.index + 1}: {v.problem}" for c, v in steps if not v.right]
        problems += [f"look-alike read as a step: {v.problem}" for v in own + others if not v.right]
        scores.append(
            Score(
                name,
                left_out,
                len(steps),
                sum(v.recognised for _, v in steps),
                sum(v.step for _, v in steps),
                len(steps),
                sum(v.timing for _, v in steps),
                len(own) + len(others),
                sum(not v.right for v in own + others),
                tuple(problems),
            )
        )
    return scores


def _read(
    cases: list[progress_corpus.Case], formats: tuple[ProgressFormat, ...], alone: bool
) -> list[tuple[progress_corpus.Case, progress_corpus.Verdict]]:
    """Each case's verdict, the cases read as one job with ``formats``, or each alone."""
    if alone:
        rows = [progress_corpus.read_job([c], ProgressParser(builtin=formats))[0] for c in cases]
    else:
        rows = progress_corpus.read_job(cases, ProgressParser(builtin=formats))
    return [(c, progress_corpus.score(c, r)) for c, r in zip(cases, rows, strict=True)]


def macro(scores: Sequence[Score]) -> tuple[float | None, ...]:
    """Each rate averaged over the families that have cases for it."""
    columns = list(zip(*(s.rates() for s in scores), strict=True)) if scores else []
    averages = []
    for column in columns:
        present = [r for r in column if r is not None]
        averages.append(sum(present) / len(present) if present else None)
    return tuple(averages)


def table(scores: Sequence[Score], titles: tuple[str, str, str, str]) -> list[str]:
    """The scores as text: one row per family, then the macro average and the totals."""
    name, kind, culprit, left = titles
    header = [name, "cases", "recognised", kind, culprit, "look-alikes fired", left]
    rows = [header]
    for s in scores:
        rows.append(
            [
                s.name,
                str(s.cases),
                _share(s.recognised, s.cases),
                _share(s.kind, s.cases),
                _share(s.culprit, s.named),
                f"{s.fired}/{s.lookalikes}",
                str(len(s.left_out)),
            ]
        )
    rates = macro(scores)
    rows.append(
        ["macro", "", *("-" if r is None else f"{r:.0%}" for r in rates), "", f"{len(scores)}"]
    )
    total = sum(s.cases for s in scores)
    rows.append(
        [
            "all cases",
            str(total),
            _share(sum(s.recognised for s in scores), total),
            _share(sum(s.kind for s in scores), total),
            _share(sum(s.culprit for s in scores), sum(s.named for s in scores)),
            str(sum(s.fired for s in scores)),
            "",
        ]
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def _share(right: int, total: int) -> str:
    return f"{right}/{total} ({right / total:.0%})" if total else "-"


SECTIONS: dict[str, tuple[Callable[..., list[Score]], tuple[str, ...]]] = {
    "failures": (failure_families, ("family", "kind", "culprit", "entries out")),
    "progress": (progress_frameworks, ("framework", "step", "timing", "formats out")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "real")
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append")
    parser.add_argument("--only", action="append", default=[], help="a family or framework")
    parser.add_argument("--failed", action="store_true", help="list the cases not right")
    parser.add_argument(
        "--alone", action="store_true", help="progress: read each case as a job of its own"
    )
    args = parser.parse_args()
    for section in args.section or list(SECTIONS):
        run, titles = SECTIONS[section]
        alone = {"alone": True} if args.alone and section == "progress" else {}
        scores = run(args.corpus, args.only, **alone)
        each = ", each case alone" if alone else ""
        print(f"\n{section}: each family read without its own entries{each}")
        print("\n".join(table(scores, titles)))  # type: ignore[arg-type]
        if args.failed:
            for s in scores:
                print(f"  {s.name}: left out {', '.join(s.left_out)}")
                for problem in s.problems:
                    print(f"  {s.name}: {problem}")


if __name__ == "__main__":
    main()
