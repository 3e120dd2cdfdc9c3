"""Typed, frozen configuration dataclasses built from plain dicts (TOML tables, notebook sweeps).

``from_dict`` validates names and types once and reports the first problem on one line, so a
wrong config never reaches a running detector.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is unknown or of the wrong type; the message names it."""


def from_dict(cls: type[T], values: Mapping[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``values``, checking every key and type."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls} is not a dataclass")
    prefix = f"{where}." if where else ""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
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
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _coerce(hint: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
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
