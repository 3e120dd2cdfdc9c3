"""The ``gpu_latest`` stream: each telemetry batch reduced once to one row per GPU (its newest
sample, the job it reported, the first Xid it reported, its error counters, its mean power and
utilisation), shared by every detector that watches GPUs (``medic.detectors.liveness`` folds
it into who is still reporting).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema
from medic.ingest.base import Batch, polars_schema
from medic.parse.apart import PART, parts, read_apart

DENSE_GPUS = 256
"""A batch whose GPU indices all lie in 0 to ``DENSE_GPUS`` - 1 is checked for repeated GPUs
on a dense grid of its nodes by those indices; another (a garbled label) by a hash of pairs."""

GPU_LATEST = pa.schema(
    [
        pa.field("time", schema.TIME, nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("gpu", pa.int16(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("xid", pa.int32()),
        pa.field("xid_time", schema.TIME),
        pa.field("ecc_dbe", pa.int64()),
        pa.field("nvlink_errors", pa.int64()),
        pa.field("power_w", pa.float32()),
        pa.field("util", pa.float32()),
    ]
)
"""Schema of the derived ``gpu_latest`` stream: one row per GPU per telemetry batch."""
_LATEST_FRAME = polars_schema(GPU_LATEST)
"""The same as polars reads it."""

_OPTIONAL = {
    "job_id": pl.String,
    "xid": pl.Int32,
    "ecc_dbe": pl.Int64,
    "nvlink_errors": pl.Int64,
    "power_w": pl.Float32,
    "util": pl.Float32,
}


_HAS_XID = pl.col("xid").is_not_null()
_COUNTERS = ("ecc_dbe", "nvlink_errors")


def _samples(frame: pl.DataFrame) -> list[pl.Expr]:
    """A GPU's newest state from its samples in a batch: newest time and job, first Xid, newest
    counts, mean power and utilisation. Cheaper where ``frame`` allows it: without an Xid in the
    batch the Xid columns are left to be filled with nulls, and a counter column without nulls
    takes its last value without dropping any (the caller adds the missing columns)."""
    aggregations = [pl.col("time").max(), pl.col("job_id").last()]
    if frame.get_column("xid").null_count() < frame.height:
        aggregations += [
            pl.col("xid").filter(_HAS_XID).first(),
            pl.col("time").filter(_HAS_XID).first().alias("xid_time"),
        ]
    aggregations += [
        pl.col(c).last() if frame.get_column(c).null_count() == 0 else pl.col(c).drop_nulls().last()
        for c in _COUNTERS
    ]
    return [*aggregations, pl.col("power_w").mean(), pl.col("util").mean()]


_ONE_SAMPLE = [
    *(pl.col(name) for name in ("time", "node", "gpu", "job_id", "xid")),
    pl.when(_HAS_XID).then(pl.col("time")).alias("xid_time"),
    *(pl.col(name) for name in ("ecc_dbe", "nvlink_errors", "power_w", "util")),
]
"""The same from a GPU's only sample."""


class GpuLatestParser:
    """Derives ``gpu_latest`` from ``gpu`` batches: each GPU's newest state in the batch."""

    name = "gpu_latest"
    input_stream = "gpu"
    output_stream = "gpu_latest"

    def __init__(self) -> None:
        self._unique_keys: tuple[pl.Series, pl.Series] | None = None
        """Node and GPU columns of the last batch found to hold one sample per GPU."""
        self._most_gpus = 0
        """The most GPUs a batch held so far."""

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty():
            return None
        missing = [pl.lit(None, t).alias(c) for c, t in _OPTIONAL.items() if c not in frame.columns]
        if missing:
            frame = frame.with_columns(missing)
        if frame.height > self._most_gpus or not self._one_sample_per_gpu(frame):
            # More rows than GPUs so far: several samples of some GPU, most likely, so no check.
            # Grouped in order of first sample, a batch of one sample per GPU comes out as is.
            grouped = frame.group_by("node", "gpu", maintain_order=True).agg(_samples(frame))
            self._most_gpus = max(self._most_gpus, grouped.height)
            latest = grouped.select_seq(
                pl.col(c) if c in grouped.columns else pl.lit(None, t).alias(c)
                for c, t in _LATEST_FRAME.items()
            )
        else:
            latest = frame.select_seq(_ONE_SAMPLE)  # the usual second
        return Batch.from_frame(self.output_stream, latest, GPU_LATEST)

    def parse_apart(
        self, batches: Sequence[Batch], joined: pl.DataFrame | None = None
    ) -> list[Batch | None]:
        """What ``parse`` gives for each of ``batches`` (non-empty), in one grouping of them
        all, by batch and GPU: a replay's second of telemetry costs a slice, not a query."""
        del joined  # a logs frame, when there is one; telemetry is not stripped of anything
        return read_apart(batches, None, self.parse, _read, self.output_stream, GPU_LATEST)

    def _one_sample_per_gpu(self, frame: pl.DataFrame) -> bool:
        """Whether no GPU has two samples in ``frame``. A feed sends the same GPUs in the same
        order second after second: a batch keyed exactly like the last unique one is unique
        too, which costs two column comparisons instead of a count of every pair."""
        nodes, gpus = frame.get_column("node"), frame.get_column("gpu")
        known = self._unique_keys
        if known is not None and nodes.equals(known[0]) and gpus.equals(known[1]):
            return True
        if not _unique_gpus(nodes, gpus):
            return False
        self._unique_keys = (nodes, gpus)
        return True


def _read(frame: pl.DataFrame, sizes: list[int]) -> pl.DataFrame:
    """Each GPU's newest state in each of the batches ``frame`` joins (``sizes``), by
    ``PART``."""
    missing = [pl.lit(None, t).alias(c) for c, t in _OPTIONAL.items() if c not in frame.columns]
    part = parts(sizes)
    frame = frame.with_columns(*missing, part)
    if not _unique_gpus(frame.get_column("node"), frame.get_column("gpu"), part):
        # A GPU's newest non-null counter, its first Xid, ... within its batch: the same
        # values whichever of ``_samples``' forms the whole run calls for.
        grouped = frame.group_by(PART, "node", "gpu", maintain_order=True).agg(_samples(frame))
        return grouped.select_seq(
            PART,
            *(
                pl.col(c) if c in grouped.columns else pl.lit(None, t).alias(c)
                for c, t in _LATEST_FRAME.items()
            ),
        )
    return frame.select_seq(PART, *_ONE_SAMPLE)  # one sample per GPU and second


def _unique_gpus(nodes: pl.Series, gpus: pl.Series, part: pl.Series | None = None) -> bool:
    """Whether no (node, GPU) pair repeats (within a ``part``, when given): each pair counted at
    its index in a dense grid of the batch's nodes by its GPU indices (by parts), as a hash of
    every pair costs several times more; a grid much larger than the rows is sorted instead."""
    if not bool(gpus.min() >= 0 and gpus.max() < DENSE_GPUS):  # type: ignore[operator]
        keys = pl.DataFrame([nodes, gpus] if part is None else [part, nodes, gpus])
        return keys.n_unique() == len(nodes)
    encoded = nodes.to_arrow().dictionary_encode()
    width = int(gpus.max()) + 1  # type: ignore[arg-type]
    cells = encoded.indices.to_numpy().astype(np.int64) * width + gpus.to_numpy()
    if part is not None:
        cells += part.to_numpy().astype(np.int64) * (len(encoded.dictionary) * width)
    if int(cells.max()) > 4 * len(cells):
        cells.sort()
        return not bool((cells[1:] == cells[:-1]).any())
    return int(np.bincount(cells).max()) <= 1
