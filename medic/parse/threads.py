"""Each parser's queries on a thread of its own, where polars keeps their compiled regexes.

polars compiles the regexes of a query on the thread that runs it and keeps the 32 it used last
there. medic's parsers use well over a hundred between them (the catalogue's stages, the second
layer's lexicon, the progress formats, the line prefixes), so on one thread each call compiles
its patterns again: tens of milliseconds a call whatever its rows (the lexicon's marker pattern
alone takes 10 ms). A parser called on a thread of its own finds them compiled from its last
call. The calls stay one at a time and in order: the caller waits for each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class ParserThreads:
    """One worker thread per parser, started at the parser's first call."""

    def __init__(self) -> None:
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self._pid = os.getpid()

    def call(self, parser: object, method: Callable[..., T], *args: Any) -> T:
        """``method(*args)`` (a method of ``parser``) run on ``parser``'s thread."""
        if os.getpid() != self._pid:  # a forked child has none of its parent's threads
            self._pools, self._pid = {}, os.getpid()
        pool = self._pools.get(id(parser))
        if pool is None:
            name = f"medic-{type(parser).__name__}"
            pool = self._pools[id(parser)] = ThreadPoolExecutor(1, thread_name_prefix=name)
        return pool.submit(method, *args).result()
