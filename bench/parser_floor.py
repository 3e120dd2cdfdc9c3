"""The log parsers' regex floor on one core: the regex work their design cannot skip, timed alone
on the datasets' lines, against the parsers themselves in the same process.

Both parsers (``medic.parse.first_match``) scan every line for their literals, route each line
that holds one to the patterns gated by what it holds, and capture the named groups of the
first pattern that matches. Here each step runs alone, on the same batches, in the cheapest form
polars offers:

* the scan: each parser's ``FirstMatch.candidates`` over every line;
* the routing: one Aho-Corasick pass (``str.extract_many``) over each parser's candidates;
* the captures: each line read once, by the pattern that reads it (by its shortcut, cheaper,
  wherever the pattern has one), its texts gathered beforehand and left untimed.

Output columns and second tries are left out: no parser built on these steps reads lines faster
than their sum. The detectors' own cost (the whole pipeline's, less the parsers') is then added
to that floor: the fastest the log pipeline can run while its detectors stay as they are. Lines
and batches as ``pipeline_throughput.py`` cuts them; pin it to one core:

    taskset -c 0 .venv/bin/python bench/parser_floor.py
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import polars as pl

from medic.parse.catalogue import GROUPS, builtin_catalogue
from medic.parse.first_match import PATTERN, ROW, FirstMatch
from medic.parse.progress import ANSI_ESCAPE, FIELDS, ProgressParser

sys.path.insert(0, str(Path(__file__).parent))
from pipeline_throughput import ROOT, cpu_seconds, log_seconds, print_table, read_logs, tiled

TARGET = 2_000_000
"""Log lines/s per core the issue asks of parsing and every detector together."""
STEPS = {
    "scan": "scan: each parser's literals, every line",
    "routing": "routing: Aho-Corasick over the candidates",
    "captures": "captures: each line once, by its pattern",
}


@dataclass(frozen=True)
class Reader:
    """One parser's reader, built from its public definitions: the literals it routes by and the
    pattern that captures what each of its patterns reads (the shortcut where there is one)."""

    first: FirstMatch
    literals: list[str]
    capture: list[str]
    strip_ansi: bool = False

    def candidates(self, lines: pl.Series) -> pl.Series:
        return lines.filter(
            lines.to_frame().select(self.first.candidates(pl.col(lines.name))).to_series()
        )

    def captured(self, candidates: pl.Series) -> list[tuple[str, pl.Series]]:
        """Each pattern that reads a candidate, with the texts it reads."""
        text = candidates.str.replace_all(ANSI_ESCAPE, "") if self.strip_ansi else candidates
        read = self.first.read(candidates, text)
        return [
            (self.capture[pattern], text.gather(rows))
            for pattern, rows in read.group_by(PATTERN).agg(ROW).iter_rows()
        ]


def readers() -> dict[str, Reader]:
    formats = ProgressParser().formats
    shortcuts = [f.shortcut() for f in formats]
    catalogue = builtin_catalogue().signatures
    patterns, literals = catalogue["pattern"].to_list(), catalogue["literals"].to_list()
    return {
        "progress": Reader(
            FirstMatch(
                [f.pattern for f in formats], [f.anchors for f in formats], FIELDS, shortcuts
            ),
            sorted({anchor for f in formats for anchor in f.anchors}),
            [
                f.pattern if cut is None else cut.pattern
                for f, cut in zip(formats, shortcuts, strict=True)
            ],
            strip_ansi=True,
        ),
        "signatures": Reader(
            FirstMatch(patterns, literals, GROUPS),
            sorted({lit for lits in literals for lit in lits}),
            patterns,
        ),
    }


def floor_seconds(
    batches: list[pl.Series], readers: dict[str, Reader], repeat: int
) -> dict[str, float]:
    """CPU seconds of the scan, the routing and the captures over ``batches``, each the best of
    ``repeat`` runs."""
    candidates = [
        (reader, reader.candidates(lines)) for lines in batches for reader in readers.values()
    ]
    captures = [
        (pattern, texts)
        for reader, lines in candidates
        for pattern, texts in reader.captured(lines)
    ]
    return {
        "scan": cpu_seconds(
            lambda _: [
                reader.candidates(lines) for lines in batches for reader in readers.values()
            ],
            repeat,
        ),
        "routing": cpu_seconds(
            lambda _: [
                lines.str.extract_many(reader.literals, overlapping=True)
                for reader, lines in candidates
            ],
            repeat,
        ),
        "captures": cpu_seconds(
            lambda _: [texts.str.extract_groups(pattern) for pattern, texts in captures], repeat
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    parser.add_argument("--lines", type=int, default=524_288)
    parser.add_argument("--batch-lines", type=int, default=65_536)
    parser.add_argument("--repeat", type=int, default=5, help="runs per step; the best is kept")
    args = parser.parse_args()
    table = tiled(read_logs(args.datasets), args.lines, args.batch_lines)
    batches = [
        pl.Series("message", table.column("message").slice(lo, args.batch_lines))
        for lo in range(0, table.num_rows, args.batch_lines)
    ]
    floor = floor_seconds(batches, readers(), args.repeat)
    parsers, pipeline = log_seconds(table, args.batch_lines, args.repeat)
    detectors = pipeline - parsers
    total = sum(floor.values())
    lines = table.num_rows

    print_table(
        f"The parsers' regex floor, {args.batch_lines:,} lines per batch (one core; "
        f"POLARS_MAX_THREADS={os.environ['POLARS_MAX_THREADS']})",
        "lines",
        [
            ("medic parsers: signatures + progress", lines, parsers, "1.0x"),
            *(
                (label, lines, floor[step], f"{floor[step] / parsers:.0%} of the parsers'")
                for step, label in STEPS.items()
            ),
            ("floor: the three together", lines, total, f"{parsers / total:.1f}x the parsers"),
            ("every detector: the pipeline less the parsers", lines, detectors, "-"),
            ("a pipeline parsing at the floor", lines, total + detectors, "-"),
        ],
    )
    print(
        f"\nparsers at their floor: {lines / total / 1e6:.2f} M lines/s; with every detector: "
        f"{lines / (total + detectors) / 1e6:.2f} M lines/s, "
        f"{lines / (total + detectors) / TARGET:.2f}x the {TARGET / 1e6:g} M lines/s asked for"
    )


if __name__ == "__main__":
    main()
