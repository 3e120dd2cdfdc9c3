from pathlib import Path

import pyarrow as pa

from medic.recording import find_recordings, read_recording, validate_recording
from medic.simulate import SCENARIOS, write_suite
from medic.simulate.recipe import TRAPS
from medic.simulate.scenarios import FAULTS, HEALTHY
from medic.simulate.suites import REGENERATE, datasets_entries, suite_entries

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ROOT / "datasets"


def test_broad_suite_covers_every_fault_kind_over_many_seeds() -> None:
    entries = suite_entries("broad")
    assert len({e.name for e in entries}) == len(entries)
    assert len({e.seed for e in entries}) >= 20
    faulty = [e for e in entries if e.scenario in FAULTS]
    assert len(faulty) >= 200
    for name in FAULTS:
        assert sum(e.scenario == name for e in faulty) >= 20
    assert {e.scenario for e in entries} >= set(HEALTHY) | {"mixed"}
    every_trap = [e for e in entries if sorted(e.params.get("traps", [])) == sorted(TRAPS)]
    assert every_trap
    assert any(e.params.get("job_nodes", 0) >= 64 for e in entries)
    assert len({e.seed for e in suite_entries("broad", 25)}) >= 25


def test_datasets_suite_has_every_scenario() -> None:
    entries = datasets_entries()
    assert {e.scenario for e in entries} == set(SCENARIOS)
    assert len({e.name for e in entries}) == len(entries)
    assert any(e.params.get("job_nodes", 0) >= 16 for e in entries)


def test_committed_datasets_are_valid_small_and_described() -> None:
    paths = find_recordings([DATASETS])
    assert {p.name for p in paths} == {e.name for e in datasets_entries()}
    total = sum(f.stat().st_size for f in DATASETS.rglob("*") if f.is_file())
    assert total <= 25 * 1024 * 1024
    readme = (DATASETS / "README.md").read_text()
    assert REGENERATE in readme
    for path in paths:
        assert validate_recording(path) == []
        assert f"| {path.name} |" in readme


def test_committed_datasets_match_what_the_generator_writes(tmp_path: Path) -> None:
    """The one command in datasets/README.md regenerates exactly the committed recordings."""
    written = write_suite("datasets", tmp_path)
    assert (tmp_path / "README.md").read_text() == (DATASETS / "README.md").read_text()
    for path in written:
        fresh, committed = read_recording(path), read_recording(DATASETS / path.name)
        for name in ("logs", "gpu", "scheduler"):
            assert fresh.stream(name).equals(committed.stream(name)), (path.name, name)
        assert isinstance(fresh.labels, pa.Table) and fresh.labels.equals(committed.labels)
        assert fresh.meta == committed.meta
