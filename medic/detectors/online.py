"""Online scoring pieces shared by the hang and straggler detectors.

Scorers and alarm policies are kept apart: a scorer says how unusual a value is against what
it has learned, *before* learning it, and learns only what its owner passes back as healthy, so
an incident never becomes the baseline; an alarm policy (threshold, k-of-n persistence) turns
scores into decisions and can be retuned without retraining.

* ``QuantileScorer``: one entity's baseline (river's rolling quantile), score = value ÷ baseline.
* ``KOfN``: persistence for one entity's stream of flags.
* ``peer_z`` / ``push_flags``: the vectorised forms for many entities at once (the GPUs of a
  job compared with their peers; per-entity k-of-n held as a bit history in an integer column).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import polars as pl
from river import stats

from medic.frames import collect

MAD_TO_SIGMA = 1.4826
"""Scales a median absolute deviation to a normal standard deviation."""


class QuantileScorer:
    """How a value compares with the ``q`` quantile of the last ``window`` healthy values.

    ``score`` returns value ÷ quantile, or None during the grace period (less than ``grace``
    observations learned): a cold model has no opinion.
    """

    def __init__(self, q: float, window: int, grace: int, floor: float = 0.0) -> None:
        self._quantile = stats.RollingQuantile(q=q, window_size=window)
        self.grace = grace
        self.floor = floor
        self.learned = 0
        self.longest: float | None = None
        """The largest value learned: all a cold model knows of how far the values reach."""

    @property
    def ready(self) -> bool:
        return self.learned >= self.grace

    @property
    def reference(self) -> float | None:
        """The learned quantile (at least ``floor``), None before anything was learned."""
        value = self._quantile.get()
        return None if value is None else max(float(value), self.floor)

    def score(self, value: float) -> float | None:
        if self.learned < self.grace:  # not ready (read once per training step: inlined)
            return None
        learned = self._quantile.get()
        if learned is None:
            return None
        reference = max(float(learned), self.floor)
        return value / reference if reference > 0 else None

    def learn(self, value: float, weight: int = 1) -> None:
        """Learn ``value``; ``weight`` is how many observations it stands for (an average
        printed over many steps counts as many) toward the grace period."""
        self._quantile.update(value)
        self.learned += weight
        longest = self.longest
        if longest is None or value > longest:
            self.longest = value


class KOfN:
    """True once at least ``k`` of the last ``n`` flags were raised."""

    def __init__(self, k: int, n: int) -> None:
        if not 1 <= k <= n:
            raise ValueError(f"persistence needs 1 <= k <= n, got k={k}, n={n}")
        self.k = k
        self._flags: deque[bool] = deque(maxlen=n)
        self._raised = 0
        """How many of the kept flags are raised (read once per training step)."""

    def push(self, flag: bool) -> bool:
        if len(self._flags) == self._flags.maxlen:
            self._raised -= self._flags[0]
        self._flags.append(flag)
        self._raised += flag
        return self.active

    @property
    def active(self) -> bool:
        return self._raised >= self.k

    def clear(self) -> None:
        self._flags.clear()
        self._raised = 0


def peer_z(frame: pl.DataFrame, by: str | list[str], columns: Mapping[str, float]) -> pl.DataFrame:
    """Robust z-score of each row against its peers (rows with the same ``by``).

    For every ``column -> floor`` adds ``z_<column>`` = (x - median) / max(1.4826 * MAD, floor),
    in one query of window expressions; the floor keeps identical peers (MAD 0) from making
    a tiny difference look huge.
    """
    query = frame.lazy()
    for stage in peer_z_columns(by, columns):
        query = query.with_columns(stage)
    return collect(query.drop(_median(c) for c in columns))


def peer_z_columns(by: str | list[str], columns: Mapping[str, float]) -> list[list[pl.Expr]]:
    """The stages (one ``with_columns`` each) of ``peer_z``, to build once and run in a query.
    The first takes each peer median once, as a ``_median_<column>`` column the second reads
    twice (in the deviation and in the MAD): a window median is the costly part."""
    medians = [pl.col(column).median().over(by).alias(_median(column)) for column in columns]
    exprs = []
    for column, floor in columns.items():
        deviation = pl.col(column) - pl.col(_median(column))
        mad = deviation.abs().median().over(by)
        scale = pl.max_horizontal(mad * MAD_TO_SIGMA, pl.lit(floor))
        exprs.append((deviation / scale).fill_null(0.0).alias(f"z_{column}"))
    return [medians, exprs]


def _median(column: str) -> str:
    return f"_median_{column}"


def push_flags(history: pl.Expr, flag: pl.Expr, n: int) -> pl.Expr:
    """The k-of-n bit history after one more window: newest flag in bit 0, ``n`` bits kept."""
    return ((history.fill_null(0) * 2 + flag.cast(pl.Int64)) % (1 << n)).cast(pl.Int64)


def flag_count(history: pl.Expr) -> pl.Expr:
    """How many of the kept windows were flagged."""
    return history.fill_null(0).bitwise_count_ones().cast(pl.Int64)
