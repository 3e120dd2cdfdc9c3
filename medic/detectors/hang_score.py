"""How improbable a job's silence is: the hang detector's scorer, apart from its alarm policy
(``medic.detectors.hang_policy``), as Merlion keeps a model's scores apart from the alarm that
reads them.

The silence is measured against a threshold that scales with the job's own step gaps (its
``gap_quantile`` gap, learned online, ``medic.detectors.online.QuantileScorer``), lower while
the job's GPUs corroborate a hang, and never below what the GPUs' quiet state allows by
itself (``working_silence_s`` while they work, ``idle_silence_s`` while they idle). The score
is ``1 - 2^(-silence / threshold)``, its doubt cut by 60% when the GPUs corroborate: 0.5 at
the threshold on silence alone, 0.8 with the GPUs, towards 1 as the silence goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from medic.timeutil import US

if TYPE_CHECKING:
    from medic.detectors.hang import HangConfig


def threshold_us(
    config: HangConfig,
    reference: float | None,
    longest: float | None,
    gpus: str,
    corroborated: bool,
) -> int:
    """The silence that fires, given the job's ``gap_quantile`` step gap (``reference``, None
    while the model is cold) and its longest gap learned so far: scaled by the step gaps once
    they are known, lower while the GPUs corroborate. Before the step gaps are known, only GPUs
    that have corroborated for ``corroborated_hold_s`` lower it: a single window of GPUs in a
    wait (a data-loader stall's few seconds, a barrier's edge) says nothing of a job whose
    printing interval is still unknown."""
    c = config
    if corroborated:
        scaled = c.corroborated_gap_factor * reference if reference is not None else 0.0
        seconds = max(c.corroborated_silence_s, scaled)
    elif reference is not None:
        seconds = max(c.min_silence_s, c.gap_factor * reference)
    else:
        seconds = cold_s(config, longest)
    return round(max(seconds, holding_s(config, gpus)) * US)


def holding_s(config: HangConfig, gpus: str) -> float:
    """Silence a quiet state of the GPUs is allowed by itself (0 for the others)."""
    if gpus == "working":
        return config.working_silence_s
    return config.idle_silence_s if gpus in ("idle", "writers") else 0.0


def cold_s(config: HangConfig, longest: float | None) -> float:
    """Before the step model is trusted: ``cold_silence_s``, or ``gap_factor`` times the
    longest gap the job has already shown (one that prints every ten minutes is not hung
    after ten)."""
    c = config
    return max(c.cold_silence_s, c.gap_factor * longest) if longest else c.cold_silence_s


def score_of(silence: int, threshold: int, corroborated: bool) -> float:
    """How sure the detection is, in [0, 1]: ``1 - 2^(-silence / threshold)`` (0.5 at the
    threshold, towards 1 as the silence goes on), its remaining doubt cut by 60% when the GPUs
    corroborate (0.8 at the threshold). Monotone in the silence, so a higher bar on cached
    scores is a longer silence, without replaying."""
    doubt = 0.5 ** (silence / max(threshold, 1))
    return float(1.0 - doubt * (0.4 if corroborated else 1.0))
