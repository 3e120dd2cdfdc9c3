"""GPU slots: node ids for per-GPU arrays."""

from __future__ import annotations

import numpy as np
import polars as pl

from medic.detectors.gpu_slots import GpuSlots, fitted


def gpus(*keys: tuple[str, int]) -> pl.DataFrame:
    return pl.DataFrame(
        {"node": [n for n, _ in keys], "gpu": pl.Series([g for _, g in keys], dtype=pl.Int16)}
    )


def test_nodes_keep_their_id_whatever_order_the_rows_come_in() -> None:
    slots = GpuSlots()
    nodes, columns = slots.locate(gpus(("a", 0), ("b", 3), ("a", 1)))
    assert nodes.tolist() == [0, 1, 0] and columns.tolist() == [0, 3, 1]
    nodes, _ = slots.locate(gpus(("c", 0), ("b", 0), ("a", 7)))
    assert nodes.tolist() == [2, 1, 0]
    assert slots.names == ["a", "b", "c"] and slots.gpus_per_node == 8


def test_new_nodes_get_ids_in_the_order_they_first_appear_among_known_ones() -> None:
    slots = GpuSlots()
    slots.locate(gpus(("a", 0), ("b", 0)))
    nodes, _ = slots.locate(gpus(("d", 0), ("a", 0), ("e", 1), ("d", 2), ("b", 1), ("f", 0)))
    assert nodes.tolist() == [2, 0, 3, 2, 1, 4]
    assert slots.names == ["a", "b", "d", "e", "f"] and slots.id_of("e") == 3


def test_released_ids_go_to_new_nodes() -> None:
    slots = GpuSlots()
    slots.locate(gpus(("a", 0), ("b", 0)))
    slots.release([0])
    assert slots.id_of("a") is None
    nodes, _ = slots.locate(gpus(("c", 0), ("b", 0)))
    assert nodes.tolist() == [0, 1] and slots.names == ["c", "b"]


def test_arrays_grow_and_keep_what_they_hold() -> None:
    array = np.full((2, 1), -1, np.int64)
    array[1, 0] = 5
    grown = fitted(array, (3, 4), -1)
    assert grown.shape == (4, 4) and grown[1, 0] == 5 and (grown[2:] == -1).all()
    assert fitted(grown, (1, 1), -1) is grown
