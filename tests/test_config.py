from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest

from medic.config import (
    ConfigError,
    Count,
    Fraction,
    Positive,
    PositiveCount,
    Range,
    from_dict,
    to_dict,
)


@dataclass(frozen=True)
class Inner:
    limit: int = 3


@dataclass(frozen=True)
class Outer:
    rate: float = 1.0
    name: str = "x"
    mode: Literal["monitor", "enforce"] = "monitor"
    nodes: tuple[str, ...] = ()
    optional: int | None = None
    inner: Inner = field(default_factory=Inner)


def test_round_trip() -> None:
    config = from_dict(Outer, {"rate": 2, "nodes": ["a"], "inner": {"limit": 5}, "mode": "enforce"})
    assert config == Outer(rate=2.0, nodes=("a",), inner=Inner(5), mode="enforce")
    assert from_dict(Outer, to_dict(config)) == config


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rate": "fast"}, "'x.rate' must be a number"),
        ({"rate": True}, "'x.rate' must be a number"),
        ({"mode": "yolo"}, "'x.mode' must be one of 'monitor', 'enforce'"),
        ({"nodes": "a"}, "'x.nodes' must be a list"),
        ({"inner": {"limit": 1.5}}, "'x.inner.limit' must be an integer"),
        ({"colour": 1}, "unknown setting 'x.colour'"),
    ],
)
def test_errors_name_the_setting(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Outer, values, "x")


@dataclass(frozen=True)
class Bounded:
    interval_s: Positive = 1.0
    share: Fraction = 0.5
    retries: Count = 0
    window: Annotated[float, Range(gt=0, le=1)] = 1.0
    nodes: PositiveCount | None = None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"interval_s": -5}, r"'b.interval_s' must be > 0, got -5$"),
        ({"interval_s": 0}, r"'b.interval_s' must be > 0, got 0$"),
        ({"share": 1.5}, r"'b.share' must be in \[0, 1\], got 1.5$"),
        ({"retries": -1}, r"'b.retries' must be >= 0, got -1$"),
        ({"window": 2}, r"'b.window' must be in \(0, 1\], got 2$"),
        ({"nodes": 0}, r"'b.nodes' must be >= 1, got 0$"),
        ({"interval_s": float("nan")}, r"'b.interval_s' must be a finite number"),
        ({"interval_s": float("inf")}, r"'b.interval_s' must be a finite number"),
    ],
)
def test_values_out_of_range_are_refused_naming_the_bound(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Bounded, values, "b")


def test_values_on_the_bounds_are_accepted() -> None:
    config = from_dict(Bounded, {"share": 1, "retries": 0, "window": 1, "nodes": 1}, "b")
    assert (config.share, config.window, config.nodes) == (1.0, 1.0, 1)
    assert from_dict(Bounded, {"nodes": None}).nodes is None


def test_a_table_that_is_not_a_table_is_one_line() -> None:
    with pytest.raises(ConfigError, match="'b' must be a table, got 5"):
        from_dict(Bounded, 5, "b")  # type: ignore[arg-type]


def test_range_text() -> None:
    assert [str(r) for r in (Range(gt=0), Range(ge=0.001), Range(ge=0, le=1), Range(lt=3))] == [
        "> 0",
        ">= 0.001",
        "[0, 1]",
        "< 3",
    ]
