"""``medic simulate``: realistic recordings of Slurm GPU clusters with labelled faults and
healthy traps, for backtesting and tuning detectors.

``SCENARIOS`` names every recipe; ``simulate`` builds one recording, deterministic for a
(scenario, seed, parameters); ``write_suite`` writes a named collection of them.
"""

from medic.simulate.catalog import SCENARIOS, get_scenario, simulate
from medic.simulate.recipe import Scenario
from medic.simulate.suites import SUITES, write_suite

__all__ = ["SCENARIOS", "SUITES", "Scenario", "get_scenario", "simulate", "write_suite"]
