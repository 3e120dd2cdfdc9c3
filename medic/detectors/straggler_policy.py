"""The straggler detector's alarm policy, apart from its evidence (the peer comparison, link
drops, port errors, printed rank shares in ``medic.detectors.straggler`` and the modules it
reads) and its score (``medic.detectors.straggler_score``).

Evidence comes as ``Suspect`` s, whatever found them. A job is a straggler when its suspects
are a minority of it and either the job slowed against its own baseline and a suspect's own
slowness can account for it (``Suspect.explains``), or a suspect is sure enough to fire alone
(``early``: a cause of slowness there from the job's first step, a flapping link, a rank's own
printed share; or a GPU's clock held low by a cause of slowness in a job whose every printed
pace came while that GPU stood out, so that none could be learned). Slowness alone, with no
GPU, port or rank standing out, is never a straggler, so every straggler detection is
``confirmed``: the suspect that stands out is the positive evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from medic.detectors.rank_share import RankSuspect

if TYPE_CHECKING:
    from medic.detectors.pace import PaceModel
    from medic.detectors.straggler import StragglerConfig

CLOCK_FEATURES = frozenset({"sm_clock_mhz", "cause"})
"""Suspect features that slow a GPU through its SM clock (the rest: link retries)."""


@dataclass(frozen=True)
class Suspect:
    """A node (its GPU, port or rank) that has looked unlike its peers persistently."""

    node: str
    gpu: int
    z: float
    feature: str
    job_gpus: int
    job_nodes: int
    flagged_gpus: int
    caused: bool = False
    """A cause of slowness shows on the GPU (clocks held low by a slowdown reason, or a cap)."""
    early: bool = False
    """... sure enough to fire without the pace vote: it showed within the GPU's first windows
    (there from the job's first step), or a flapping link, or a rank's printed share."""
    clock_ratio: float | None = None
    """The job's median SM clock over the suspect GPU's, the median over the windows judged."""
    rank: RankSuspect | None = None
    """For a rank-share suspect: the rank and what it printed."""

    def explains(self, slowdown: float | None, config: StragglerConfig) -> bool:
        """Whether this suspect's own slowness can account for the job's ``slowdown``: always
        for link retries and flaps (their cost is not in the clock), else see
        ``explained_share``; never for a clock within ``cause_clock_ratio`` of its peers' (the
        spread among healthy parts at their power limit)."""
        if self.feature not in CLOCK_FEATURES or slowdown is None or self.clock_ratio is None:
            return True
        needed = max(
            config.slowdown_ratio - 1.0,
            1.0 / config.cause_clock_ratio - 1.0,
            config.explained_share * (slowdown - 1.0),
        )
        return self.clock_ratio - 1.0 >= needed


def firing(pace: PaceModel, suspects: list[Suspect], config: StragglerConfig) -> list[Suspect]:
    """The suspects that make the job a straggler now (empty: it is not one): while the job is
    slowed, those whose slowness explains it; any of them, when one is sure enough to fire
    without the pace vote or the job is slowed. A GPU's clock held low by a cause of slowness
    (a power cap, a slowdown reason) in a job that printed paces but never one that could be
    learned (``PaceModel.unlearned``: the GPU stood out at each) is as sure as one there from
    the job's first step: no baseline can show it. Link errors are not: a port counting errors
    within spec stands out from its peers without slowing anyone."""
    if pace.slowed:
        suspects = [s for s in suspects if s.explains(pace.ratio, config)]
    alone = any(
        s.early or (s.caused and s.feature in CLOCK_FEATURES and pace.unlearned) for s in suspects
    )
    return suspects if suspects and (pace.slowed or alone) else []
