"""Named collections of recordings: ``datasets`` (committed in the repository's datasets/),
``broad`` (for evaluation: every fault kind in many variants over many seeds, plus healthy
recordings with every trap; never committed) and ``perturbed`` (the same faults and traps, and
the quiet ones, under realistic variation: ``medic.simulate.variation``; never committed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medic.config import ConfigError
from medic.recording import write_recording
from medic.simulate.catalog import simulate
from medic.simulate.readme import ReadmeRow, write_readme
from medic.simulate.recipe import TRAPS
from medic.simulate.scenarios import FAULTS, HEALTHY, QUIET_FAULTS

REGENERATE = "medic simulate suite datasets --out datasets"
RHYTHM_TRAPS = ("healthy_silent_pauses", "healthy_sparse_printing", "healthy_loader_stalls")
"""Healthy scenarios whose traps are in a job's own rhythm (``medic.simulate.rhythm_traps``)."""


@dataclass(frozen=True)
class Entry:
    scenario: str
    seed: int
    params: dict[str, Any] = field(default_factory=dict)
    perturbed: bool = False

    @property
    def name(self) -> str:
        return f"{self.scenario}-{'p' if self.perturbed else 's'}{self.seed}"


def datasets_entries(seeds: int | None = None) -> list[Entry]:
    """The committed suite: every scenario, small clusters (2-8-node jobs, 20-40 minutes),
    plus one 24-node job over a short span, and one recording of each quiet fault; under 25 MB
    in all."""
    if seeds is not None:
        raise ConfigError("suite 'datasets' is fixed; --seeds applies to the other suites")
    entries = []
    for name in FAULTS:
        for seed in (1, 2):
            params = {
                "jobs": 1,
                "job_nodes": 2 + (seed * len(name)) % 5,
                "duration_min": 15.0 + 5 * seed,
            }
            entries.append(Entry(name, seed, params))
    entries += [
        Entry(name, 1, {"duration_min": 20.0, "job_nodes": 3})
        for name in HEALTHY
        if name not in RHYTHM_TRAPS
    ]
    # A job alone, for long enough to pause several times.
    entries += [
        Entry(name, 1, {"jobs": 0, "job_nodes": 2, "duration_min": 30.0}) for name in RHYTHM_TRAPS
    ]
    entries += [
        Entry("healthy", 2, {"job_nodes": 2, "duration_min": 20.0, "traps": list(TRAPS)}),
        Entry("mixed", 1, {"jobs": 1, "duration_min": 25.0}),
        Entry(
            "xid79_cascade",
            100,
            {"job_nodes": 24, "jobs": 0, "duration_min": 15.0, "pg_timeout_s": 300},
        ),
    ]
    quiet = {"jobs": 1, "job_nodes": 2, "duration_min": 20.0}
    entries += [
        Entry(name, seed, dict(params))
        for name, scenario in QUIET_FAULTS.items()
        for seed, params in scenario.datasets or ((1, quiet),)
    ]
    return entries


def broad_entries(seeds: int | None = None) -> list[Entry]:
    """For evaluation: each fault scenario on every seed (variants drawn from the seed), a mixed
    recording every other seed, healthy recordings rotating through every trap set, and some
    large jobs (32-128 nodes) over short spans."""
    count = 20 if seeds is None else seeds
    if count < 1:
        raise ConfigError("--seeds must be at least 1")
    healthy = sorted(HEALTHY)
    entries: list[Entry] = []
    for seed in range(1, count + 1):
        for name in FAULTS:
            params: dict[str, Any] = {}
            if (seed + len(name)) % 10 == 0:
                params = {"job_nodes": 32 * (1 + seed % 4), "jobs": 1, "duration_min": 25.0}
            entries.append(Entry(name, seed, params))
        if seed % 2 == 0:
            entries.append(Entry("mixed", seed))
        entries.append(Entry(healthy[seed % len(healthy)], seed))
        if seed % 4 == 0:
            entries.append(Entry("healthy", 1000 + seed, {"traps": list(TRAPS)}))
    return entries


def perturbed_entries(seeds: int | None = None) -> list[Entry]:
    """Every fault scenario, quiet or not, and every healthy scenario on each seed under the
    realistic variation, plus a mixed recording every other seed. Jobs of 2-16 nodes as the
    seed draws them, beside one or two others, over 30-50 minutes: long enough for checkpoints,
    evaluations and stalls, short enough that 20 seeds replay in well under an hour of CPU."""
    count = 20 if seeds is None else seeds
    if count < 1:
        raise ConfigError("--seeds must be at least 1")
    names = [*FAULTS, *QUIET_FAULTS, *HEALTHY]
    entries = [
        Entry(name, seed, {**_span(name, seed), "jobs": 1 + seed % 2}, perturbed=True)
        for seed in range(1, count + 1)
        for name in names
    ]
    entries += [
        Entry("mixed", seed, _span("mixed", seed), perturbed=True)
        for seed in range(2, count + 1, 2)
    ]
    return entries


def _span(name: str, seed: int) -> dict[str, Any]:
    return {"duration_min": float(30 + (7 * seed + len(name)) % 21)}


SUITES: dict[str, Callable[[int | None], list[Entry]]] = {
    "datasets": datasets_entries,
    "broad": broad_entries,
    "perturbed": perturbed_entries,
}


def suite_entries(name: str, seeds: int | None = None) -> list[Entry]:
    build = SUITES.get(name)
    if build is None:
        raise ConfigError(f"unknown suite {name!r} (known: {', '.join(SUITES)})")
    return build(seeds)


def write_suite(name: str, out_dir: Path, seeds: int | None = None) -> list[Path]:
    """Write suite ``name`` under ``out_dir`` (one ``<scenario>-s<seed>`` directory per
    recording, generated and written one at a time); the datasets suite also gets its
    README.md. Returns the recording paths."""
    entries = suite_entries(name, seeds)
    out_dir = Path(out_dir)
    paths: list[Path] = []
    rows: list[ReadmeRow] = []
    for entry in entries:
        recording = simulate(entry.scenario, entry.seed, entry.perturbed, **entry.params)
        path = write_recording(out_dir / entry.name, recording)
        paths.append(path)
        rows.append(ReadmeRow.of(entry.scenario, entry.seed, recording, path))
    if name == "datasets":
        write_readme(out_dir / "README.md", rows, REGENERATE)
    return paths
