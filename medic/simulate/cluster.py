"""The simulated cluster: HGX nodes with 8 GPUs each, their names, addresses and PCI bus ids,
and which nodes are free when (the scheduler's allocation of whole nodes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GPUS_PER_NODE = 8
# PCI bus ids of the eight GPUs of an HGX H100 board, in device-index order.
PCI_BUS_IDS = (
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
)
NAME_PATTERNS = ("gpu-a{:03d}", "gpu-b{:03d}", "gpu-c{:03d}", "hgx-{:04d}", "dgx-h100-{:03d}")
MEMORY_MIB = 81559  # framebuffer of an H100 80GB HBM3 as NVML reports it


def nvrm_bus(gpu: int) -> str:
    """How NVRM names a GPU in Xid lines: ``0000:18:00`` (domain:bus:device, no function)."""
    return PCI_BUS_IDS[gpu].rsplit(".", 1)[0]


@dataclass(frozen=True)
class Cluster:
    """Node names, InfiniBand addresses and telemetry sampling phases of one cluster."""

    names: tuple[str, ...]
    ips: tuple[str, ...]
    phase_us: np.ndarray
    """Offset within each second at which the collector samples each node (fixed per node)."""

    @property
    def size(self) -> int:
        return len(self.names)

    @classmethod
    def build(cls, rng: np.random.Generator, nodes: int) -> Cluster:
        pattern = NAME_PATTERNS[int(rng.integers(len(NAME_PATTERNS)))]
        first = int(rng.integers(1, 200))
        # Real inventories have holes (nodes in repair, other partitions).
        numbers = first + np.cumsum(1 + (rng.random(nodes) < 0.08) * rng.integers(1, 4, nodes))
        names = tuple(pattern.format(int(n)) for n in numbers)
        subnet = int(rng.integers(1, 250))
        ips = tuple(f"10.{subnet}.{int(n) // 250}.{int(n) % 250 + 1}" for n in numbers)
        phase = rng.integers(0, 1_000_000, nodes).astype(np.int64)
        return cls(names=names, ips=ips, phase_us=phase)


class NodePool:
    """Whole-node allocation over time, lowest free index first (as Slurm's select does)."""

    def __init__(self, size: int) -> None:
        self.free_at = np.full(size, -np.inf)
        self.held = np.zeros(size, dtype=bool)

    def free_nodes(self, at: float) -> np.ndarray:
        return np.flatnonzero((self.free_at <= at) & ~self.held)

    def allocate(self, count: int, at: float, exclude: tuple[int, ...] = ()) -> list[int] | None:
        """``count`` nodes free at ``at`` (held until released), or None if too few are free."""
        free = [int(n) for n in self.free_nodes(at) if int(n) not in exclude]
        if len(free) < count:
            return None
        chosen = free[:count]
        self.held[chosen] = True
        return chosen

    def release(self, nodes: list[int], at: float) -> None:
        self.held[nodes] = False
        self.free_at[nodes] = at

    def reserve(self, nodes: list[int]) -> None:
        """Keep ``nodes`` out of every later allocation (a node that went down)."""
        self.held[nodes] = True
