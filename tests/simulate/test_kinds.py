"""Scenarios of one kind each (``medic.simulate.kinds``): each module is found, joins the quiet
faults after the built-in ones and is reachable by name like any other scenario."""

import polars as pl
import pytest

from medic.simulate import SCENARIOS
from medic.simulate.kinds import KINDS
from medic.simulate.kinds.nan_divergence import PRINTS_LOSS
from medic.simulate.scenarios import QUIET_FAULTS
from medic.simulate.suites import suite_entries
from tests.simulate.conftest import SMALL, Simulated, frames


def test_every_module_of_kinds_is_a_quiet_fault_after_the_built_in_ones() -> None:
    assert "nan_divergence" in KINDS
    assert list(QUIET_FAULTS)[-len(KINDS) :] == list(KINDS)
    assert all(SCENARIOS[name] is scenario for name, scenario in KINDS.items())


def test_a_kind_names_the_recordings_the_datasets_suite_commits() -> None:
    committed = {e.name: e.params for e in suite_entries("datasets")}
    for name, scenario in KINDS.items():
        for seed, params in scenario.datasets:
            assert committed[f"{name}-s{seed}"] == dict(params)


@pytest.mark.parametrize("name", PRINTS_LOSS)
def test_a_divergence_is_labelled_when_its_first_non_finite_loss_is_printed(
    name: str, simulated: Simulated
) -> None:
    recording = simulated("nan_divergence", 4, framework=name, sudden=True, **SMALL)
    data = frames(recording)
    onset = data["labels"].get_column("onset").min()
    job = data["labels"].get_column("job_id")[0]
    first_bad = (
        data["logs"]
        .filter(
            (pl.col("job_id") == job)
            & pl.col("message").str.contains(r"(?i)loss'?\s*[:=]\s*[-+]?(nan|inf)")
        )
        .get_column("time")
        .min()
    )
    assert isinstance(onset, int) and isinstance(first_bad, int)
    assert abs(onset - first_bad) < 10_000, (onset, first_bad)
