"""InfiniBand port error counters of a job's nodes compared with each other, window by window.

``ib_errors`` (``medic.ingest.infiniband``) counts a node's link errors: symbol errors,
link error recoveries (the link retrained and came back), packets received bad. A healthy link
counts none or next to none while it runs: the InfiniBand specification's bit error rate
target is 10^-12 and below, about one symbol error in minutes at 200 Gb/s; counts left over
from link training at boot do not rise. A degraded cable or transceiver counts steadily, and
each error costs the packets it corrupted a retransmission, each recovery a stall of the link:
NCCL's transfers over it slow down and every rank waits in its collectives.

The counters are the node's, so nodes are compared, not GPUs: every window, each node's rise
(the largest over its GPU rows, which all carry the node's counters) against the median of
its job's *other* nodes, scaled by their spread (median absolute deviation, at least
``counter_floor``): a job of two nodes still has a peer. Errors rising on every node alike (a
fabric-wide event, a switch retraining all its links) stand out on none. A node that stands
out by ``z_threshold`` in ``peer_k`` of its last ``peer_n`` windows is persistent; the run
of windows that made it so began ``seen`` windows after the node was first watched, which
tells a link bad from the job's start (early) from one that degraded later.
"""

from __future__ import annotations

import polars as pl

from medic.detectors.online import MAD_TO_SIGMA, flag_count, push_flags
from medic.frames import collect, replaced

FEATURE = "ib_errors_delta"
EARLY_ERRORS_PER_S = 4.0
"""Errors a second a node's ports must count for its errors alone to make it a straggler from
the job's first step, before the job's pace has a baseline to slow from: ten times what the
specification's bit error rate target (10^-12) allows at 400 Gb/s (NDR). A link counting near
that target is within spec and slows no one; named later only if the job slows."""
KEYS = ["job_id", "node"]
_STATE = pl.Schema(
    [
        ("job_id", pl.String()),
        ("node", pl.String()),
        ("seen", pl.Int64()),
        ("history", pl.Int64()),
        ("run_seen", pl.Int64()),
    ]
)
"""Per job and node: windows watched, the bit history of its flags (newest in bit 0), and how
many windows it had been watched when its current run of flags began (null: no flag kept)."""


class PortErrorPeers:
    """Per-node flags of InfiniBand error counters rising against the job's other nodes."""

    def __init__(self, z_threshold: float, floor: float, peer_k: int, peer_n: int) -> None:
        self.z_threshold = z_threshold
        self.floor = floor
        self.peer_k = peer_k
        self.peer_n = peer_n
        self._state = pl.DataFrame(schema=_STATE)
        peer_median = pl.col("errors_peer").median()
        self._peers = [
            pl.col("errors").first(),
            peer_median.alias("peer_median"),
            (pl.col("errors_peer") - peer_median).abs().median().alias("peer_mad"),
        ]
        """Each node's errors against its peers' (a row per peer), built once: building
        expressions costs more than running them on one window's nodes."""
        scale = pl.max_horizontal(pl.col("peer_mad") * MAD_TO_SIGMA, pl.lit(floor))
        window = (1 << peer_n) - 1
        self._scored = [
            [((pl.col("errors") - pl.col("peer_median")) / scale).alias("z")],
            [(pl.col("z") >= z_threshold).alias("flagged")],
        ]
        self._merged = [
            [
                (pl.col("seen").fill_null(0) + 1).alias("seen"),
                push_flags(pl.col("history"), pl.col("flagged"), peer_n).alias("history"),
            ],
            [flag_count(pl.col("history") & window).alias("flags")],
            [
                pl.when(pl.col("flags") == 0)
                .then(None)
                .otherwise(pl.col("run_seen").fill_null(pl.col("seen") - 1))
                .alias("run_seen"),
                (pl.col("flagged") & (pl.col("flags") >= peer_k)).alias("persistent"),
            ],
        ]

    def __len__(self) -> int:
        return self._state.height

    def compare(self, gpus: pl.DataFrame) -> pl.DataFrame:
        """One window's GPU rows (with ``ib_errors_delta``) of the jobs compared: every node with
        a peer, its ``z``, whether it is ``flagged`` now, ``flags`` among its last ``peer_n``
        windows, ``persistent`` and ``run_seen``; in no set order (sorting is a query, and most
        windows read no row of it)."""
        nodes = (
            gpus.lazy().group_by(KEYS).agg(pl.col(FEATURE).max().cast(pl.Float64).alias("errors"))
        )
        query = (
            nodes.join(nodes, on="job_id", suffix="_peer")
            .filter(pl.col("node") != pl.col("node_peer"))
            .group_by(KEYS)
            .agg(self._peers)
        )
        for stage in self._scored:
            query = query.with_columns(stage)
        query = query.join(self._state.lazy(), on=KEYS, how="left")
        for stage in self._merged:
            query = query.with_columns(stage)
        merged = collect(query)
        self._state = replaced(self._state, merged.lazy().select(list(_STATE)), KEYS)
        return merged

    def forget(self, job_ids: list[str]) -> None:
        self._state = self._state.filter(~pl.col("job_id").is_in(job_ids))
