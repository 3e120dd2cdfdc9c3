"""The built-in executors, in the one explicit list the registry reads
(``medic.actions.registry``); no executor module imports the registry."""

from __future__ import annotations

from medic.actions.slurm_cli import SlurmCli
from medic.actions.slurmrest import SlurmRest

EXECUTORS = (SlurmCli, SlurmRest)
