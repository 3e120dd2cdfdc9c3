"""Scenarios of one kind each (``medic.simulate.kinds``): each module is found, joins the quiet
faults after the built-in ones and is reachable by name like any other scenario."""

from medic.simulate import SCENARIOS
from medic.simulate.kinds import KINDS
from medic.simulate.scenarios import QUIET_FAULTS
from medic.simulate.suites import suite_entries


def test_every_module_of_kinds_is_a_quiet_fault_after_the_built_in_ones() -> None:
    assert "nan_divergence" in KINDS
    assert list(QUIET_FAULTS)[-len(KINDS) :] == list(KINDS)
    assert all(SCENARIOS[name] is scenario for name, scenario in KINDS.items())


def test_a_kind_names_the_recordings_the_datasets_suite_commits() -> None:
    committed = {e.name: e.params for e in suite_entries("datasets")}
    for name, scenario in KINDS.items():
        for seed, params in scenario.datasets:
            assert committed[f"{name}-s{seed}"] == dict(params)
