"""Root-cause attribution: of everything a job's incident shows, which node (if any) is at fault.

Rules (the same for every detector):

* hardware evidence (a fatal Xid, an uncorrectable ECC error, a vanished GPU, a silent or
  failed node) blames the node it was seen on; when several nodes show some, the earliest
  is the root and the others are consequences;
* NCCL timeouts and aborts are collateral: every peer of a failed rank reports them, so by
  themselves they blame no node;
* software errors (out of memory, user exceptions, configuration errors) blame no node.

A ``JobEvidence`` collects the evidence of one job's incident in arrival order, bounded, and
answers culprits, ranks, onset, a one-line summary and a score from it.

The score (``JobEvidence.confidence``) is how much the evidence says, apart from the alarm (the
detectors report every incident; the rules' ``min_score`` decides what is acted on): each sign
leaves a doubt by what it is (``DOUBT``), and independent signs multiply their doubts (a
noisy-OR). One hardware sign against a node gives 0.8, a second 0.96; a rank's own error line
0.7; a job's failed exit alone 0.3; peers' complaints add little each, as every peer of a
failed rank prints them. Monotone in the evidence, so a notebook can raise the bar on cached
scores (``medic.tuning.rethreshold``) without replaying.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from medic.detectors.jobs import RANK_PREFIX
from medic.frames import holds

MAX_EVIDENCE = 32
"""Evidence items kept per incident (the count keeps growing past it)."""
MAX_RANKS = 16
"""Ranks named in a detection, earliest first."""
HARDWARE_DOUBT = 0.2
"""What a hardware sign against a node leaves in doubt (a silent node, an Xid, Slurm's
NOT_RESPONDING); by role otherwise:"""
DOUBT = {"root": 0.3, "context": 0.7, "collateral": 0.9, "benign": 1.0}


@dataclass(frozen=True)
class Evidence:
    """One observation supporting an incident."""

    time: int
    what: str
    node: str | None = None
    gpu: int | None = None
    rank: int | None = None
    role: str = "root"
    hardware: bool = False
    signature: str | None = None
    doubt: float | None = None
    """What this sign leaves in doubt, when its detector can tell (a silence: the longer, the
    less); else its kind's (``HARDWARE_DOUBT``, ``DOUBT``)."""

    def where(self) -> str:
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.node:
            parts.append(self.node if self.gpu is None else f"{self.node} GPU {self.gpu}")
        return " on ".join(parts) if parts else "an unknown place"


def root_cause(evidence: Iterable[Evidence]) -> Evidence | None:
    """The earliest hardware evidence; else the earliest root or context item; else the earliest.

    Within a role, a line that only opens a report (``opens_report``) gives way to the first
    line of that role that does not: a Python traceback is headed by the exception line that
    ends it, not by ``Traceback (most recent call last):``."""
    items = sorted(evidence, key=lambda e: e.time)
    hardware = [e for e in items if e.hardware and e.node is not None]
    if hardware:
        return hardware[0]
    for role in ("root", "context"):
        found = [e for e in items if e.role == role]
        if found:
            return next((e for e in found if not opens_report(e.what)), found[0])
    return items[0] if items else None


def opens_report(what: str) -> bool:
    """Whether an evidence line (as ``excerpt`` quotes it) ends in a colon: it introduces the
    lines after it (``Traceback (most recent call last):``, ``The above exception was the direct
    cause of the following exception:``, torchrun's ``Root Cause (first observed failure):``)
    and names no failure of its own."""
    return what.rstrip("'\"").rstrip().endswith(":")


@dataclass
class JobEvidence:
    """The evidence gathered so far for one job's incident."""

    job_id: str
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0
    reported: list[Evidence] = field(default_factory=list)
    """Ranks a launcher or runtime reports dead (``medic.parse.failed_ranks``), the first or
    root failure it names first: who failed, by the launcher's own account. They name the
    incident's ranks and where they ran, and add nothing to its score or culprits."""

    def add(self, items: Iterable[Evidence], total: int | None = None) -> None:
        """Keep ``items`` (bounded); ``total`` counts signs summarised by them, when more."""
        added = 0
        for item in items:
            added += 1
            if len(self.evidence) < MAX_EVIDENCE:
                self.evidence.append(item)
            elif item.hardware and not any(e.hardware for e in self.evidence):
                self.evidence[-1] = item
        self.count += max(added, total or 0)

    @property
    def onset(self) -> int:
        return min(e.time for e in self.evidence)

    @property
    def root(self) -> Evidence | None:
        return root_cause(self.evidence)

    def culprits(self) -> tuple[str, ...]:
        """The node of the earliest hardware evidence; none when the fault is not hardware."""
        root = self.root
        if root is None or not root.hardware or root.node is None:
            return ()
        return (root.node,)

    def ranks(self) -> tuple[int, ...]:
        """Ranks of the root items (or of the root's node, for hardware), earliest first; for
        a root no entry matched (``context``: a failure line read by its words), the rank
        that printed it, the first to report the failure."""
        reported = tuple(dict.fromkeys(e.rank for e in self.reported if e.rank is not None))
        if reported and (self.root is None or not self.root.hardware):
            return reported[:MAX_RANKS]
        root = self.root
        if root is not None and root.role == "context" and not root.hardware:
            return () if root.rank is None else (root.rank,)
        if root is None or not (root.hardware or root.role == "root"):
            return ()
        if root.hardware:
            chosen = [e for e in self.evidence if e.node == root.node and e.role == "root"]
        else:
            chosen = [e for e in self.evidence if e.role == root.role]
        ranks: list[int] = []
        for item in sorted(chosen, key=lambda e: e.time):
            if item.rank is not None and item.rank not in ranks:
                ranks.append(item.rank)
        return tuple(ranks[:MAX_RANKS])

    def confidence(self) -> float:
        """The incident's score in [0, 1]: one minus the product of its signs' doubts (the
        signs summarised past ``MAX_EVIDENCE`` count as collateral)."""
        doubt = 1.0
        for item in self.evidence:
            if item.doubt is not None:
                doubt *= item.doubt
            elif item.hardware and item.node is not None:
                doubt *= HARDWARE_DOUBT
            else:
                doubt *= DOUBT.get(item.role, 1.0)
        doubt *= DOUBT["collateral"] ** max(0, self.count - len(self.evidence))
        return 1.0 - doubt

    def summary(self, headline: str) -> str:
        root = self.root
        if root is None:
            return headline
        others = self.count - 1
        tail = f"; {others} more sign{'s' if others != 1 else ''} followed" if others > 0 else ""
        if self.reported and not root.hardware:
            first = self.reported[0]
            where = first.where() if first.rank is not None or first.node else ""
            said = f"{where} ({first.what})" if where else first.what
            tail += f"; reported failed: {said}"
        return f"{headline}: {root.what} at {root.where()}{tail}"

    def details(self) -> dict[str, Any]:
        """Structured evidence for the history and the rules (not part of the spec's row)."""
        details: dict[str, Any] = {
            "signatures": sorted({e.signature for e in self.evidence if e.signature}),
            "nodes": sorted({e.node for e in self.evidence if e.node}),
            "evidence": self.count,
        }
        if self.reported:
            details["failed_ranks"] = [
                {"rank": e.rank, "node": e.node, "end": e.what} for e in self.reported
            ]
        return details


def evidence_rows(frame: pl.DataFrame, hardware: bool) -> list[Evidence]:
    """Evidence from rows of the ``signatures`` stream (a few rows: only matched lines)."""
    out = []
    for row in frame.iter_rows(named=True):
        if row.get("xid") is not None:
            what = f"Xid {row['xid']}" + (f" ({row['xid_name']})" if row.get("xid_name") else "")
        else:
            what = excerpt(row["message"])
        out.append(
            Evidence(
                time=int(row["time_us"]),
                what=what,
                node=row.get("host") or row.get("node") or None,
                gpu=row.get("gpu"),
                rank=row.get("rank"),
                role=row["role"],
                hardware=hardware,
                signature=row["signature"],
            )
        )
    return out


def excerpt(message: str, width: int = 160) -> str:
    """The line without its torchrun rank tag, quoted and cut to ``width`` characters."""
    text = re.sub(RANK_PREFIX, "", message).strip()
    return repr(text if len(text) <= width else text[: width - 3] + "...")


CONSEQUENCE_US = 35 * 1_000_000
"""A root error with no rank tag from a node this soon after a rank on it complained about a
peer is the complaint's consequence: a rank whose NCCL communicator aborted dies (``terminate
called``, SIGABRT), and torchrun's elastic agent, which is no rank, then stops the other
workers (SIGTERM with a 30 s grace, ``PContext.close`` in
torch/distributed/elastic/multiprocessing/api.py) and prints its own traceback ending in
``ChildFailedError``: an error line, but no error of the job's own."""


class Complaints:
    """Each job's newest complaint about a peer (a collateral sign) per node, to tell a job's
    own errors from their consequences."""

    def __init__(self) -> None:
        self.newest: dict[tuple[str, str], int] = {}
        """(job, node) -> newest complaint of a rank on the node about a peer."""

    def __len__(self) -> int:
        return len(self.newest)

    def consequences(self, signs: pl.DataFrame) -> pl.Series:
        """For each row of ``signs`` (``job_id``, ``node``, ``rank``, ``role``, ``time_us``, in
        any order): whether it is a root error of no rank following a complaint from its node
        within ``CONSEQUENCE_US`` (in these rows or earlier ones); a rank's own error line is
        never one. Learns the rows' complaints."""
        role = signs.get_column("role")
        complaints = None
        if holds(role, "collateral"):
            complaints = signs.filter(
                (pl.col("role") == "collateral")
                & pl.col("job_id").is_not_null()
                & pl.col("node").is_not_null()
            ).select("job_id", "node", pl.col("time_us").alias("complained"))
        agent = (role == "root") & signs.get_column("rank").is_null()
        if agent.any():  # most batches have no such row: no complaint to look up
            agent &= self._followed(signs, complaints)
        if complaints is not None and not complaints.is_empty():
            newest = complaints.group_by("job_id", "node").agg(pl.col("complained").max())
            for job_id, node, time in newest.iter_rows():
                self.newest[job_id, node] = max(time, self.newest.get((job_id, node), time))
        return agent.alias("consequence")

    def _followed(self, signs: pl.DataFrame, complaints: pl.DataFrame | None) -> pl.Series:
        """Whether each row of ``signs`` comes within ``CONSEQUENCE_US`` of a complaint from its
        job and node, among ``complaints`` (None: none) and those learned before."""
        earlier = pl.DataFrame(
            [(job, node, time) for (job, node), time in self.newest.items()],
            schema={"job_id": pl.String, "node": pl.String, "complained": pl.Int64},
            orient="row",
        )
        known = (earlier if complaints is None else pl.concat([earlier, complaints])).sort(
            "complained"
        )
        marked = (
            signs.select("job_id", "node", "rank", "role", "time_us")
            .with_row_index("_row")
            .sort("time_us")
            .join_asof(
                known,
                left_on="time_us",
                right_on="complained",
                by=["job_id", "node"],
                strategy="backward",
                tolerance=CONSEQUENCE_US,
                check_sortedness=False,  # both sorted by time above; not checkable by group
            )
            .sort("_row")
        )
        return marked.get_column("complained").is_not_null()

    def forget_before(self, cutoff: int) -> None:
        self.newest = {key: t for key, t in self.newest.items() if t >= cutoff}
