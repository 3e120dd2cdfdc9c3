"""How sure a straggler detection is, apart from the alarm policy that decides it
(``medic.detectors.straggler_policy``): the doubt ``2^(-strength)``, strength being the
culprit's robust z over ``z_threshold`` (or its link drops over ``flap_count``, or a rank's
printed share over its bar), cut by 60% for each corroboration: the job slowed against its own
baseline; a cause of slowness on the culprit."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from medic.detectors.straggler import StragglerConfig
    from medic.detectors.straggler_policy import Suspect

SCALED_ALREADY = frozenset({"network", "ib_link_downed_delta", "rank_share"})
"""Suspect features whose ``z`` is already over its bar (drops over ``flap_count``, a rank's
share over its threshold)."""


def strength_of(top: Suspect, config: StragglerConfig) -> float:
    """The culprit's evidence over the bar it had to pass (1.0 at the bar)."""
    return top.z if top.feature in SCALED_ALREADY else top.z / config.z_threshold


def score_of(strength: float, slowed: bool, caused: bool) -> float:
    """How sure a straggler detection is, in [0, 1]: the doubt ``2^(-strength)`` (0.5 at the
    alarm's z threshold or flap count), cut by 60% for each corroboration: the job slowed
    against its own baseline; a cause of slowness on the culprit."""
    doubt = 0.5 ** max(strength, 0.0) * (0.4 if slowed else 1.0) * (0.4 if caused else 1.0)
    return float(1.0 - doubt)
