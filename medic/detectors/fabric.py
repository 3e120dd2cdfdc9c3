"""Fabric errors (InfiniBand/RoCE) as evidence against a node, once they are sure.

Some fabric texts are sure at once (an HCA's catastrophic error, an mlx5 health failure: fatal
``node_failure`` signatures). Others may pass or may be someone else's doing (``node_failure``
signatures of severity below fatal), so they wait ``hold_us`` before they count:

* a port error followed by the port coming back (a ``recovered_by`` signature from the same
  host) is a link flap: the job goes on, slower, and is a straggler's business;
* a peer's retries exhausted (status 12, which names the peer's address) happen when the
  peer's port failed, but also when the peer's process died and its queue pairs with it: an
  error of the job's own (out of memory, a CUDA error) since, or up to ``RETRY_SPAN_US``
  before it (how long the retries of a dead peer take), explains it.

The peer of a completion error is a fabric address; the hosts' NCCL start-up lines
(``NET/IB : Using ... ; OOB <if>:<address>``) say which host holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl

from medic.detectors.attribution import Evidence, evidence_rows
from medic.frames import holds
from medic.timeutil import US

Located = tuple[str | None, Evidence]
RETRIES = frozenset({"ib_retry_exceeded"})
"""Signatures of a peer's retries exhausted."""
RETRY_SPAN_US = 35 * US
"""How long before a retries-exhausted error its peer may have died: NCCL's defaults retry an
unanswered InfiniBand send 7 times (``NCCL_IB_RETRY_CNT``) after a timeout of
4.096 us x 2^20 = 4.3 s each (``NCCL_IB_TIMEOUT``), 30-35 s in all (NCCL user guide,
Environment Variables)."""


class Addresses:
    """Fabric address -> the host that announced it: a ``kind = "none"`` sign naming a host's
    own address (``peer``) beside its host, such as NCCL's ``NET/IB : Using ... ; OOB
    <if>:<address>``. Every detector that reads a line about a peer's address resolves it here."""

    def __init__(self) -> None:
        self.hosts: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.hosts)

    def learn(self, signs: pl.DataFrame) -> None:
        if signs.get_column("peer").null_count() == signs.height:
            return  # no address named: nothing to ask the rows
        announced = signs.filter(
            (pl.col("kind") == "none")
            & (pl.col("implicates") == "node")
            & pl.col("peer").is_not_null()
            & pl.col("host").is_not_null()
        )
        self.hosts.update(announced.select("peer", "host").iter_rows())

    def host_of(self, address: pl.Expr) -> pl.Expr:
        """The host holding each ``address``; null where none announced it."""
        return address.replace_strict(self.hosts, default=None, return_dtype=pl.String)


class FabricEvidence:
    """Fabric addresses, port recoveries and the fabric errors held until they are sure."""

    def __init__(self, hold_us: int, slack_us: int, recovered_by: tuple[str, ...]) -> None:
        self.hold_us = hold_us
        self.slack_us = slack_us
        self.recovered_by = recovered_by
        self.addresses = Addresses()
        self.recovered: dict[str, int] = {}
        """Host -> newest time its port came back."""
        self.held: list[Located] = []

    def __len__(self) -> int:
        return len(self.addresses) + len(self.recovered) + len(self.held)

    def observe(self, signs: pl.DataFrame) -> list[Located]:
        """Learn from a ``signatures`` frame; return the evidence that is sure at once (fatal
        fabric and node signs), holding the rest."""
        self._learn(signs)
        if not holds(signs.get_column("kind"), "node_failure"):
            return []
        peer = pl.col("implicates") == "peer"
        rows = signs.filter(pl.col("kind") == "node_failure").with_columns(
            pl.col("time").dt.epoch("us").alias("time_us"),
            pl.when(peer)
            .then(self.addresses.host_of(pl.col("peer")))
            .otherwise(pl.col("host"))
            .alias("host"),
            pl.when(peer).then(pl.lit(None, pl.String)).otherwise(pl.col("node")).alias("node"),
        )
        if rows.is_empty():
            return []
        sure = (rows.get_column("severity") == "fatal").to_list()
        items = list(zip(rows["job_id"].to_list(), evidence_rows(rows, True), strict=True))
        self.held.extend(item for item, fatal in zip(items, sure, strict=True) if not fatal)
        return [item for item, fatal in zip(items, sure, strict=True) if fatal]

    def release(
        self, watermark: int, own_errors: Mapping[str, int], lag_us: Callable[[str | None], int]
    ) -> list[Located]:
        """The held evidence whose wait is over and that nothing explained: no recovery of its
        host since, no error of the job's own since or within ``slack_us`` before it
        (``RETRY_SPAN_US`` for a peer's retries exhausted). The wait
        is ``hold_us`` plus the job's log delivery lag (``lag_us``): the line that explains it
        may have been written in time and still be on its way."""
        due: list[Located] = []
        held: list[Located] = []
        for pair in self.held:
            over = pair[1].time + self.hold_us + lag_us(pair[0]) <= watermark
            (due if over else held).append(pair)
        self.held = held
        sure = []
        for job_id, item in due:
            back = item.node is not None and self.recovered.get(item.node, -1) >= item.time
            before = RETRY_SPAN_US if item.signature in RETRIES else self.slack_us
            own = job_id is not None and own_errors.get(job_id, -1) >= item.time - before
            if not back and not own:
                sure.append((job_id, item))
        return sure

    def forget_before(self, cutoff: int) -> None:
        for host in [h for h, t in self.recovered.items() if t < cutoff]:
            del self.recovered[host]

    def _learn(self, signs: pl.DataFrame) -> None:
        if not holds(signs.get_column("kind"), "none"):
            return
        informational = signs.filter(pl.col("kind") == "none")
        self.addresses.learn(informational)
        if not holds(informational.get_column("signature"), self.recovered_by):
            return
        back = informational.filter(pl.col("signature").is_in(self.recovered_by)).select(
            pl.coalesce("host", "node"), pl.col("time").dt.epoch("us")
        )
        for host, time in back.iter_rows():
            self.recovered[host] = max(time, self.recovered.get(host, time))
