"""How medic words an exception on one line (a log line, a skip, a one-line error)."""

from __future__ import annotations


def exception_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message; its type's name when the message is empty (a
    bare ``TimeoutError()`` still says what happened)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
