"""InfiniBand/RoCE link drops per node, told apart from the fabric's.

A node's port going down is seen twice: in its logs (the kernel's mlx5 ``Link down``, NCCL's
``port error`` async event), at the line's time, and as a rise of its ``ib_link_downed``
counter, at the end of the window whose samples show it. The two sources see the same drops, so
a node's drops are the larger of its two counts, not their sum.

A drop that another node also had within ``shared_us`` is the fabric's: a leaf switch that
reboots or retrains takes down the port of every node on it at once, and a healthy node then
counts a drop it did nothing for. The counters show such a drop late by up to a sampling
interval, differently on every node (each exporter scrapes at its own phase), so nodes that
went down together show it in adjacent windows: ``shared_us`` spans them. Two nodes whose own
links flap independently rarely drop within the same minute, and a node that flaps drops
again.
"""

from __future__ import annotations

from collections import deque

from medic.timeutil import US

ONE_DROP_US = 30 * US
"""Lines of one drop (the kernel's, and the NCCL async event every rank on the node prints)
come within seconds of each other: within this span they count once."""


class LinkDrops:
    """Each node's recent link drops, from its logs and from its port counters."""

    def __init__(self, shared_us: int) -> None:
        self.shared_us = shared_us
        self.logged: dict[str, deque[int]] = {}
        """node -> times of its link drops in its logs, oldest first."""
        self.counted: dict[str, deque[int]] = {}
        """node -> times of its link drops by its ``ib_link_downed`` counter."""

    def __len__(self) -> int:
        return len(self.logged) + len(self.counted)

    def __bool__(self) -> bool:
        return bool(self.logged or self.counted)

    def log(self, node: str, time: int) -> None:
        """A line saying ``node``'s port went down at ``time``."""
        times = self.logged.setdefault(node, deque())
        if not times or abs(time - times[-1]) >= ONE_DROP_US:
            times.append(time)

    def count(self, node: str, time: int, drops: int) -> None:
        """``node``'s counter rose by ``drops`` in the window ending at ``time``."""
        self.counted.setdefault(node, deque()).extend([time] * drops)

    def forget(self, horizon: int) -> None:
        """Drop the drops before ``horizon``."""
        for by_node in (self.logged, self.counted):
            for node in list(by_node):
                times = by_node[node]
                while times and times[0] < horizon:
                    times.popleft()
                if not times:
                    del by_node[node]

    def own(self, since: int, at_least: int) -> dict[str, tuple[int, bool]]:
        """Nodes with ``at_least`` drops of their own since ``since``: node -> (drops, whether
        its logs saw as many as its counters). A drop another node had within ``shared_us``
        is not the node's own."""
        found = {}
        for node in {*self.logged, *self.counted}:
            if max(len(self.logged.get(node, ())), len(self.counted.get(node, ()))) < at_least:
                continue  # too few drops at all (a switch's retraining: one on every node)
            logged = self._own(node, self.logged.get(node, ()), since)
            counted = self._own(node, self.counted.get(node, ()), since)
            if max(logged, counted) >= at_least:
                found[node] = (max(logged, counted), logged >= counted)
        return found

    def _own(self, node: str, times: deque[int] | tuple[()], since: int) -> int:
        return sum(1 for t in times if t >= since and not self._shared(node, t))

    def _shared(self, node: str, time: int) -> bool:
        return any(
            abs(t - time) <= self.shared_us
            for by_node in (self.logged, self.counted)
            for other, times in by_node.items()
            if other != node
            for t in times
        )
