"""Scenarios of one kind each, one module per scenario: a new kind's scenario is a module here
and nothing else.

Each module defines ``SCENARIO`` (a ``medic.simulate.recipe.Scenario``: its parameters, what
it injects into the featured job and the recordings of it the ``datasets`` suite commits) and
sets whatever its runs need through the plan's hooks (a job's ``TrainSpec.loss_curve``, the
schedule, the world's labels). The modules are found here, in name order, and join the quiet
faults of ``medic.simulate.scenarios`` after the built-in ones, so adding one leaves what every
other scenario draws as it was. A module imports ``medic.simulate.recipe``, never the catalogue.
"""

from __future__ import annotations

import importlib
import pkgutil

from medic.simulate.recipe import Scenario


def _discovered() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        scenario = importlib.import_module(f"{__name__}.{module}").SCENARIO
        if not isinstance(scenario, Scenario) or scenario.name in found:
            raise TypeError(f"{__name__}.{module}: SCENARIO must be one Scenario of its own name")
        found[scenario.name] = scenario
    return found


KINDS: dict[str, Scenario] = _discovered()
"""Every scenario of this package, by name."""
