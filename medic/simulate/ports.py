"""A node's InfiniBand port counters over the recording, as the gpu table's ``ib_errors`` and
``ib_link_downed`` carry them (``medic.ingest.infiniband``: sums over the node's ports).

Every node starts with what its ports counted before the recording: bringing a link up trains
it, and training leaves symbol errors and a link-down or two behind (why fabric bring-up
procedures, NVIDIA's ``ibdiagnet --pc`` among them, clear the counters once the links are up
before judging a link by them). What the faults and traps add (``PortCount``) is counted on
its own port, and each port's counter stops at its width (the PortCounters attribute
saturates: a 16-bit symbol error counter of a bad link reads 65535 until cleared).
"""

from __future__ import annotations

import numpy as np

from medic.ingest.infiniband import COUNTER_BITS, ERROR_COUNTERS, LINK_DOWNED
from medic.simulate.plan import PortCount

PORTS = 8
"""Adapters of a node, one per GPU (rail-optimised HGX), one port each."""


def _boot_counts(rng: np.random.Generator, nodes: int) -> dict[str, np.ndarray]:
    """Per counter, each (node, port)'s count left by link training before the recording."""
    shape = (nodes, PORTS)
    some = rng.random((4, *shape))
    return {
        LINK_DOWNED: rng.integers(0, 3, shape),
        "symbol_error": np.where(some[0] < 0.5, rng.integers(1, 3000, shape), 0),
        "link_error_recovery": np.where(some[1] < 0.3, rng.integers(1, 3, shape), 0),
        "port_rcv_errors": np.where(some[2] < 0.2, rng.integers(1, 50, shape), 0),
    }


def port_counters(
    counts: list[PortCount], seconds: int, phase_s: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """``ib_errors`` and ``ib_link_downed`` of every node at every second (seconds x nodes);
    a node's second ``k`` is sampled at ``k + phase_s[node]``."""
    nodes = phase_s.size
    none = np.zeros((nodes, PORTS), np.int64)
    boot = _boot_counts(rng, nodes)
    errors = sum(boot.get(c, none).sum(axis=1) for c in ERROR_COUNTERS)
    totals = {
        name: np.broadcast_to(start, (seconds, nodes)).astype(np.int64)
        for name, start in (
            ("ib_errors", errors),
            ("ib_link_downed", boot[LINK_DOWNED].sum(axis=1)),
        )
    }
    grids: dict[tuple[str, int], np.ndarray] = {}
    for count in counts:
        grid = grids.setdefault((count.counter, count.port), np.zeros((seconds, nodes), np.int64))
        first = int(np.ceil(count.time - phase_s[count.node]))
        if count.end is None:
            if 0 <= first < seconds:
                grid[first, count.node] += int(count.amount)
            continue
        lo = max(first, 0)
        hi = min(int(np.ceil(count.end - phase_s[count.node])), seconds)
        if hi > lo:
            grid[lo:hi, count.node] += rng.poisson(count.amount, hi - lo)
    for (counter, port), grid in grids.items():
        start = boot.get(counter, none)[:, port]
        ceiling = (1 << COUNTER_BITS[counter]) - 1
        counted = np.minimum(start + np.cumsum(grid, axis=0), ceiling) - start
        column = "ib_link_downed" if counter == LINK_DOWNED else "ib_errors"
        totals[column] = totals[column] + counted
    return totals
