"""Event-time helpers: medic keeps time as integer microseconds since the Unix epoch (UTC)."""

from __future__ import annotations

import datetime as dt

US = 1_000_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_us(value: dt.datetime | str | int | float) -> int:
    """Microseconds since the epoch from a datetime, an ISO-8601 string or seconds."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"timestamp {value.isoformat()} has no time zone")
        delta = value - EPOCH
        return (delta.days * 86_400 + delta.seconds) * US + delta.microseconds
    if isinstance(value, str):
        return to_us(parse_iso(value))
    return round(value * US)


def parse_iso(text: str) -> dt.datetime:
    """Parse an ISO-8601 timestamp that carries a zone (``Z`` or an offset)."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone (add Z or +00:00)")
    return parsed.astimezone(dt.UTC)


def from_us(us: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=us)


def iso(us: int) -> str:
    """``2026-03-01T10:00:00.5Z``-style text for an event time."""
    text = from_us(us).isoformat().replace("+00:00", "Z")
    return text
