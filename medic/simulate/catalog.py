"""Every scenario by name, and ``simulate``: one recording of one scenario and seed."""

from __future__ import annotations

from typing import Any

from medic.config import ConfigError, from_dict
from medic.recording import Recording
from medic.simulate.compose import compose
from medic.simulate.recipe import Scenario
from medic.simulate.scenarios import FAULTS, HEALTHY, MIXED, QUIET_FAULTS

SCENARIOS: dict[str, Scenario] = {**FAULTS, **QUIET_FAULTS, MIXED.name: MIXED, **HEALTHY}


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; ConfigError naming the known ones otherwise."""
    found = SCENARIOS.get(name)
    if found is None:
        raise ConfigError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
    return found


def simulate(scenario: str, seed: int, perturbed: bool = False, **params: Any) -> Recording:
    """One recording of ``scenario``; the same (scenario, seed, params) give the same tables.
    ``perturbed``: under the perturbation suite's realistic variation
    (``medic.simulate.variation``). Unknown scenarios, bad seeds and unknown or ill-typed
    parameters raise ConfigError."""
    recipe = get_scenario(scenario)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return compose(recipe, seed, from_dict(recipe.params, params, scenario), perturbed)
