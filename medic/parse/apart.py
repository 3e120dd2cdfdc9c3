"""Reading a run of batches in one call, each batch apart (a parser's ``parse_apart``).

A parser whose rows come from several lines of one batch (a launcher's failure record, a GPU's
newest sample, the second layer of signatures) is not row-wise: it cannot read a run of batches
as one. It can still read them in one call if every row it makes stays within its batch: the
run is joined once (``joined``), each row carries the index of its batch (``PART``, from
``parts``), the parser keys its groupings by it too, and ``hand_out`` gives each batch its rows
back, as ``parse`` gives them for that batch alone (``medic.readahead``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch

PART = "_part"
"""The index of a row's batch, when many are read in one call."""


def parts(sizes: Sequence[int]) -> pl.Series:
    """The ``PART`` column of a run of batches of ``sizes`` rows, in turn."""
    return pl.Series(PART, np.repeat(np.arange(len(sizes), dtype=np.uint32), sizes))


def joined(batches: Sequence[Batch], frame: pl.DataFrame | None = None) -> pl.DataFrame | None:
    """The frames of ``batches`` in one (``frame`` when it holds their rows already: what the
    pipeline placed in one call); None when their schemas differ."""
    if frame is not None and frame.height == sum(b.num_rows for b in batches):
        return frame
    try:
        return pl.concat([b.frame for b in batches], rechunk=False)
    except (pl.exceptions.SchemaError, pl.exceptions.ShapeError):
        return None


def hand_out(rows: pl.DataFrame, count: int, stream: str, schema: pa.Schema) -> list[Batch | None]:
    """Each of ``count`` batches' share of ``rows`` (keyed by ``PART``, in order), as a batch of
    ``stream`` without that column; None for a batch with no row."""
    out: list[Batch | None] = [None] * count
    if rows.is_empty():
        return out
    part = rows.get_column(PART).to_numpy()
    if (part[1:] >= part[:-1]).all():
        # Rows in batch order (as a reader keeps them): each share is a slice of one run,
        # where a partition by PART hashes every row and copies every column.
        cuts = (np.flatnonzero(part[1:] != part[:-1]) + 1).tolist()
        starts, ends = [0, *cuts], [*cuts, len(part)]
        body = pl.DataFrame([c for c in rows.get_columns() if c.name != PART])
        indices = part[starts].tolist()
        shares = [body.slice(start, end - start) for start, end in zip(starts, ends, strict=True)]
    else:
        by_part = rows.partition_by(PART, as_dict=True, maintain_order=True, include_key=False)
        indices, shares = [key for (key,) in by_part], list(by_part.values())
    made = Batch.from_frames(stream, shares, schema)
    for index, batch in zip(indices, made, strict=True):
        out[int(index)] = batch
    return out


def read_apart(
    batches: Sequence[Batch],
    frame: pl.DataFrame | None,
    parse: Callable[[Batch], Batch | None],
    read: Callable[[pl.DataFrame, list[int]], pl.DataFrame | None],
    stream: str,
    schema: pa.Schema,
) -> list[Batch | None]:
    """``parse_apart`` from its parts: ``read`` makes the rows of the run ``joined`` (with their
    ``PART``, from the batches' ``sizes``; None: no batch gives any), handed out by batch; each
    batch is ``parse``d alone when their schemas differ."""
    whole = joined(batches, frame)
    if whole is None:
        return [parse(batch) for batch in batches]
    rows = read(whole, [b.num_rows for b in batches])
    if rows is None:
        return [None] * len(batches)
    return hand_out(rows, len(batches), stream, schema)
