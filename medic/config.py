"""Typed, frozen configuration dataclasses built from plain dicts (TOML tables, notebook sweeps).

``from_dict`` validates names, types and ranges once and reports the first problem on one line,
so a wrong config never reaches a running detector. A numeric setting carries its bounds in its
annotation (``Annotated[float, Range(gt=0)]``, or an alias such as ``Positive``): the same
metadata is checked here and written into ``docs/configuration.md`` by
``medic config reference``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is unknown, of the wrong type or out of range; the message names it."""


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric setting (``ge``/``le`` inclusive, ``gt``/``lt`` exclusive)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def contains(self, value: float) -> bool:
        return not (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        )

    def __str__(self) -> str:
        low = f"[{_number(self.ge)}" if self.ge is not None else None
        low = f"({_number(self.gt)}" if self.gt is not None else low
        high = f"{_number(self.le)}]" if self.le is not None else None
        high = f"{_number(self.lt)})" if self.lt is not None else high
        if low and high:
            return f"{low}, {high}"
        if low:
            return (">= " if low[0] == "[" else "> ") + low[1:]
        if high:
            return ("<= " if high[-1] == "]" else "< ") + high[:-1]
        return "any"


Positive = Annotated[float, Range(gt=0)]
"""A number above zero (intervals, timeouts, ratios)."""
NonNegative = Annotated[float, Range(ge=0)]
"""A number of zero or more (graces, allowances that may be switched off with 0)."""
Fraction = Annotated[float, Range(ge=0, le=1)]
"""A share between 0 and 1."""
Percent = Annotated[float, Range(ge=0, le=100)]
"""A utilisation in percent."""
Count = Annotated[int, Range(ge=0)]
"""A whole number of zero or more."""
PositiveCount = Annotated[int, Range(ge=1)]
"""A whole number of at least one."""


def setting_range(hint: Any) -> Range | None:
    """The Range in an annotation (``Annotated[..., Range]``, possibly inside ``X | None``)."""
    if typing.get_origin(hint) is Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, Range)), None)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        found = [r for r in map(setting_range, typing.get_args(hint)) if r is not None]
        return found[0] if found else None
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def from_dict(cls: type[T], values: Mapping[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``values``, checking every key and type."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls} is not a dataclass")
    if not isinstance(values, Mapping):
        raise ConfigError(f"'{where or cls.__name__}' must be a table, got {values!r}")
    prefix = f"{where}." if where else ""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls, include_extras=True)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(f"unknown setting '{prefix}{unknown[0]}' (known: {known})")
    kwargs = {
        name: _coerce(hints[name], value, f"{prefix}{name}") for name, value in values.items()
    }
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where or cls.__name__}: {exc}") from None


def to_dict(config: Any) -> dict[str, Any]:
    """The plain-dict form of a config dataclass (tuples become lists, as TOML writes them)."""
    return {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _coerce(hint: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Annotated:
        checked = _coerce(args[0], value, name)
        bounds = setting_range(hint)
        if bounds is not None and not bounds.contains(checked):
            raise ConfigError(f"'{name}' must be {_in_words(bounds)}, got {value!r}")
        return checked
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, name)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"'{name}' must not be null")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"'{name}' must be a list, got {value!r}")
        inner = args[0] if args else Any
        return tuple(_coerce(inner, v, f"{name}[{i}]") for i, v in enumerate(value))
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(
                f"'{name}' must be one of {', '.join(map(repr, args))}, got {value!r}"
            )
        return value
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"'{name}' must be a table, got {value!r}")
        return from_dict(typing.cast(type, hint), value, name)
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"'{name}' must be true or false, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"'{name}' must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"'{name}' must be a finite number, got {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"'{name}' must be an integer, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"'{name}' must be a string, got {value!r}")
        return value
    raise ConfigError(f"'{name}': unsupported setting type {hint}")


def _in_words(bounds: Range) -> str:
    text = str(bounds)
    return f"in {text}" if text[0] in "[(" else text
