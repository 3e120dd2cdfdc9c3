"""The real-world corpus (``tests/data/real``) scored per family, one table per section.

Failures: every case of ``tests/data/real/failures`` through ``medic diagnose``'s path (the one
pipeline, detectors and rules). Per family: cases, how many were recognised (a failure found,
a look-alike left alone), kind right, culprit right (of the cases whose truth names one or
says none), onset right (of the cases whose truth gives one), all right; and the time per case.

Progress: every file of ``tests/data/real/progress`` read as one job's log through the progress
parser (prefix stripper, formats, learning reader). Per framework or launcher: progress cases,
look-alikes, how many were recognised (a step read, a look-alike left alone), step right and
timing right (step time and throughput as the truth says) among the progress cases, all right;
and the time per line.

Each section is a function returning its table; add one to ``SECTIONS`` for another part of
the corpus.

    .venv/bin/python bench/real_corpus.py [--corpus tests/data/real] [--failed]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from medic.diagnose.run import diagnose  # noqa: E402
from tests.corpus.failures import Case, Verdict, load_corpus, score  # noqa: E402
from tests.corpus.progress import load_corpus as load_progress  # noqa: E402
from tests.corpus.progress import read_job  # noqa: E402
from tests.corpus.progress import score as score_progress  # noqa: E402

Table = tuple[list[str], list[list[str]]]
"""A section's header and rows."""


def _share(right: int, total: int) -> str:
    return f"{right}/{total} ({right / total:.0%})" if total else "-"


def failures(corpus: Path, show_failed: bool) -> Table:
    """Recognition and kind/culprit/onset accuracy per failure family."""
    cases = load_corpus(corpus / "failures")
    by_family: dict[str, list[tuple[Case, Verdict, float]]] = {}
    for case in cases:
        start = time.perf_counter()
        verdict = score(case, diagnose(case.texts, year=case.year))
        elapsed = time.perf_counter() - start
        by_family.setdefault(case.family, []).append((case, verdict, elapsed))
        if show_failed and not verdict.right:
            print(f"  {case.family}/{case.id}: {'; '.join(verdict.problems)}")
    header = ["family", "cases", "look-alikes", "recognised", "kind", "culprit", "onset"]
    header += ["all right", "ms/case"]
    rows = []
    every = [item for items in by_family.values() for item in items]
    for family, items in [*sorted(by_family.items()), ("all", every)]:
        with_culprit = [(c, v) for c, v, _ in items if c.culprit is not None and not c.negative]
        with_onset = [(c, v) for c, v, _ in items if c.onset is not None]
        rows.append(
            [
                family,
                str(sum(not c.negative for c, _, _ in items)),
                str(sum(c.negative for c, _, _ in items)),
                _share(sum(v.recognised for _, v, _ in items), len(items)),
                _share(sum(v.kind for _, v, _ in items), len(items)),
                _share(sum(v.culprit for _, v in with_culprit), len(with_culprit)),
                _share(sum(v.onset for _, v in with_onset), len(with_onset)),
                _share(sum(v.right for _, v, _ in items), len(items)),
                f"{1000 * sum(e for _, _, e in items) / len(items):.0f}" if items else "-",
            ]
        )
    return header, rows


def progress(corpus: Path, show_failed: bool) -> Table:
    """Recognition and step/timing accuracy per framework or launcher."""
    header = ["framework", "progress", "look-alikes", "recognised", "step", "timing"]
    header += ["all right", "us/line"]
    rows = []
    totals = [0] * 7
    elapsed_all = 0.0
    for name, cases in load_progress(corpus / "progress").items():
        start = time.perf_counter()
        read = read_job(cases)
        elapsed = time.perf_counter() - start
        verdicts = [
            score_progress(case, rows_of) for case, rows_of in zip(cases, read, strict=True)
        ]
        for case, verdict in zip(cases, verdicts, strict=True):
            if show_failed and not verdict.right:
                print(f"  {name}/{case.index + 1}: {verdict.problem}")
        steps = [v for c, v in zip(cases, verdicts, strict=True) if not c.not_a_step]
        counts = [
            len(steps),
            len(cases) - len(steps),
            sum(v.recognised for v in verdicts),
            sum(v.step for v in steps),
            sum(v.timing for v in steps),
            sum(v.right for v in verdicts),
            sum(len(c.lines) for c in cases),
        ]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        elapsed_all += elapsed
        rows.append(_progress_row(name, counts, elapsed))
    rows.append(_progress_row("all", totals, elapsed_all))
    return header, rows


def _progress_row(name: str, counts: list[int], elapsed: float) -> list[str]:
    steps, lookalikes, recognised, step, timing, right, lines = counts
    cases = steps + lookalikes
    return [
        name,
        str(steps),
        str(lookalikes),
        _share(recognised, cases),
        _share(step, steps),
        _share(timing, steps),
        _share(right, cases),
        f"{1e6 * elapsed / lines:.0f}" if lines else "-",
    ]


SECTIONS: dict[str, Callable[[Path, bool], Table]] = {"failures": failures, "progress": progress}


def print_table(title: str, table: Table) -> None:
    header, rows = table
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "real")
    parser.add_argument("--failed", action="store_true", help="list the cases not right")
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append")
    args = parser.parse_args()
    for name in args.section or list(SECTIONS):
        print_table(name, SECTIONS[name](args.corpus, args.failed))


if __name__ == "__main__":
    main()
