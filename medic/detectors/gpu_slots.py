"""Dense addresses for GPUs named by node and index, so that per-GPU state lives in numpy arrays
and a batch of a whole cluster folds in with a few array operations instead of a Python step per
GPU.

A node gets an id the first time it is met (the row of its GPUs in the owner's arrays); the GPU
index is the column. A batch is located with one hash lookup of its node column in the names
known so far (Arrow's ``index_in``); only names met for the first time go through Python. Ids of
nodes the owner released are given to the next new nodes, which bounds the arrays by the nodes
alive at once.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

MAX_GPUS_PER_NODE = 256
"""GPU indices 0-255 have a column; a row with another index (a garbled label) has no cell,
and its owner leaves it out rather than grow every array to fit it."""


class GpuSlots:
    """Node name <-> id, and how many GPU columns the arrays need."""

    def __init__(self) -> None:
        self.names: list[str] = []
        """Node name by id."""
        self.gpus_per_node = 1
        self._ids: dict[str, int] = {}
        self._free: list[int] = []
        self._known: tuple[pa.Array, np.ndarray] | None = None
        """The names with an id, as Arrow (of the type last looked up), and their ids."""

    def locate(self, frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Node id and GPU index of each row of ``frame`` (its ``gpu`` values addressable:
        ``addressable`` holds; its nodes not null)."""
        nodes = frame.get_column("node").to_arrow()
        found = pc.index_in(nodes, value_set=self._names(nodes.type))
        if found.null_count:
            for name in pc.unique(nodes.filter(found.is_null())).to_pylist():
                self._id(name)
            found = pc.index_in(nodes, value_set=self._names(nodes.type))
        assert self._known is not None
        gpus = frame.get_column("gpu").to_numpy().astype(np.intp)
        self.gpus_per_node = max(self.gpus_per_node, int(gpus.max()) + 1)
        return self._known[1][found.to_numpy()], gpus

    def _names(self, kind: pa.DataType) -> pa.Array:
        """The names with an id, as an Arrow array of type ``kind`` (built again after a change)."""
        known = self._known
        if known is None or known[0].type != kind:
            names = pa.array(list(self._ids), type=kind)
            known = self._known = (names, np.fromiter(self._ids.values(), np.intp, len(names)))
        return known[0]

    def id_of(self, node: str) -> int | None:
        return self._ids.get(node)

    def release(self, ids: list[int]) -> None:
        """Forget these nodes: their ids go to the next new nodes."""
        for i in ids:
            del self._ids[self.names[i]]
        self._free += ids
        self._known = None

    def _id(self, node: str) -> int:
        i = self._ids.get(node)
        if i is not None:
            return i
        if self._free:
            i = self._free.pop()
            self.names[i] = node
        else:
            i = len(self.names)
            self.names.append(node)
        self._ids[node] = i
        self._known = None
        return i


def fitted(array: np.ndarray, shape: tuple[int, ...], fill: object) -> np.ndarray:
    """``array`` grown to at least ``shape`` (rows at least doubled, so that nodes met one by one
    cost few copies), new cells set to ``fill``; ``array`` itself when it is big enough."""
    if all(have >= want for have, want in zip(array.shape, shape, strict=True)):
        return array
    size = (
        max(shape[0], 2 * array.shape[0]),
        *(max(h, w) for h, w in zip(array.shape[1:], shape[1:], strict=True)),
    )
    grown = np.full(size, fill, array.dtype)
    grown[tuple(slice(0, n) for n in array.shape)] = array
    return grown


def addressable(gpus: pl.Series) -> bool:
    """Whether every GPU index is within 0 to ``MAX_GPUS_PER_NODE`` - 1."""
    return bool(gpus.min() >= 0 and gpus.max() < MAX_GPUS_PER_NODE)  # type: ignore[operator]
