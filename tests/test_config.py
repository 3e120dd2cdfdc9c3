from dataclasses import dataclass, field
from typing import Literal

import pytest

from medic.config import ConfigError, from_dict, to_dict


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
