"""Where a log line was written: its node, read from the line and checked against the job's
nodes in Slurm.

Slurm's default output file (``slurm-%j.out``) holds the lines of every node of a job, so the
file says nothing of a line's node, and the host that reads the file (medic's own) is none of
the job's nodes. The line says it: a launcher's host prefix (pdsh's ``n1: ``, a journal's
``<time> <host> kernel: ``), NCCL's ``host:pid:tid [dev] NCCL`` prefix, torchrun's root-cause
``host : <name>`` field, or a rank (``srun --label``'s task number, Open MPI's ``[job,rank]``,
torchrun's ``[rankN]:``, PyTorch's logging header ``[E file.cpp:N] [Rank N]``) that the job's
own lines tie to a node (a line that carries both a rank and a host teaches the job's layout:
task ``t`` runs on node ``n``).

A node is named only when Slurm knows it as one of the job's nodes (the scheduler rows'
``nodes``, over every attempt of the job). A line naming a host that is not one of them keeps
its job but gets no node (the empty string): it is counted as ``unknown_node`` and logged once
per job and host, and no action can target it. A line naming no host keeps the node its record
carries (a ``%N`` in the file's path, a shipper's host field) when that is one of the job's
nodes, else the node its rank was seen on, else the job's node when the job has one only. A
line of no job, or of a job Slurm has not shown yet (``medic diagnose`` of files alone), is
taken as it says: there is nothing to check it against. A host that a matched line names in
its text (``srun: error: <host>: task 3: ...``) is checked the same way (``checked``).

One ``Placement`` serves ``medic serve``, ``medic backtest`` and ``medic diagnose``: the
pipeline places every ``logs`` batch before its parsers and detectors read it. Placing is
vectorised (column expressions and joins; Python only per distinct job, rank or unknown host).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from typing import Any

import polars as pl

from medic.parse.failure_lines import logged_rank
from medic.parse.prefixes import PrefixStripper

log = logging.getLogger(__name__)

NCCL_HOST = r"^([A-Za-z][0-9A-Za-z_.-]*):[0-9]+:[0-9]+ \[[0-9]+\] (?:[^ ]+:[0-9]+ )?NCCL "
"""NCCL's debug prefix ``host:pid:tid [cudaDev]`` (src/debug.cc; a WARN also names its source
``file:line`` before ``NCCL WARN``), at the start of a line without its launchers' prefixes
(ASCII classes: twice as fast)."""
ROOT_CAUSE_HOST = r"^\s*host\s*: ([A-Za-z0-9][\w.-]*)\s*$"
"""torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors): ``host : n``."""
UNKNOWN_NODE = "unknown_node"
MAX_REFUSED_SEEN = 4096
"""Refused (job, host, time) kept to count a line named in several streams once."""
"""The count of lines that named a node Slurm does not know as one of their job's nodes."""
MAX_JOBS = 65_536
"""Jobs whose layout (nodes, ranks) is kept; the oldest are forgotten past it."""
MAX_WARNED = 4_096
_HOSTS = ("_nccl_host", "_root_host", "prefix_host")
"""The hosts a line may name, by trust: NCCL's own prefix, torchrun's summary, a prefix's."""


def said_hosts(stripped: pl.DataFrame) -> pl.DataFrame:
    """The hosts each line of ``stripped`` (a frame ``PrefixStripper.strip`` gave: bare
    ``message``, ``prefix_host``) names, one column each of ``_HOSTS`` (null where it names
    none). Only the lines holding ``NCCL`` or ``host`` are read for those two (literal scans)."""
    message = stripped.get_column("message")
    return pl.DataFrame(
        [
            _extracted(message, "NCCL", NCCL_HOST).alias(_HOSTS[0]),
            _extracted(message, "host", ROOT_CAUSE_HOST).alias(_HOSTS[1]),
            stripped.get_column("prefix_host").alias(_HOSTS[2]),
        ]
    )


def line_host(stripped: pl.DataFrame) -> pl.Series:
    """The host each line names first (``said_hosts`` by trust), unchecked; null when none."""
    return said_hosts(stripped).select(pl.coalesce(_HOSTS).alias("host")).to_series()


def _extracted(message: pl.Series, literal: str, pattern: str) -> pl.Series:
    """Group 1 of ``pattern`` on the lines holding ``literal``, null elsewhere."""
    nulls = pl.Series(dtype=pl.String).extend_constant(None, len(message))
    at = message.str.contains(literal, literal=True).fill_null(False).arg_true()
    if at.is_empty():
        return nulls
    found = message.gather(at).str.extract(pattern, 1)
    return nulls if found.null_count() == len(found) else nulls.scatter(at, found)


def _column(frame: pl.DataFrame, name: str, dtype: pl.DataType | type[pl.DataType]) -> pl.Expr:
    """Column ``name`` of ``frame``, or nulls of ``dtype`` where the frame has none."""
    return pl.col(name) if name in frame.columns else pl.lit(None, dtype).alias(name)


class Placement:
    """Places ``logs`` frames (``place``), knowing the jobs' layouts from the scheduler rows it
    is shown (``observe``). ``stats`` counts ``unknown_node`` lines and the lines placed from
    their own text (``from_line``); ``prefixes`` is the stripper the log parsers share, so a
    batch is stripped once for placing and parsing."""

    def __init__(self, prefixes: PrefixStripper | None = None) -> None:
        self.prefixes = prefixes or PrefixStripper()
        self.jobs: dict[str, tuple[frozenset[str], datetime]] = {}
        """Each job's nodes over all its attempts, and when Slurm first showed them."""
        self.stats: Counter[str] = Counter({"from_line": 0, UNKNOWN_NODE: 0})
        self._refused_seen: set[tuple[Any, ...]] = set()
        """Lines placed from their own text, and names refused (its keys are fixed: /metrics
        reads it from another thread)."""
        self._reader = PrefixStripper(self.prefixes.config)
        """Reads the few lines ``checked`` sees (the shared stripper keeps the batch's lines)."""
        self._ranks = pl.DataFrame(schema={"job_id": pl.String, "rank": pl.Int32, "_at": pl.String})
        self._layouts: pl.DataFrame | None = None
        self._warned: set[tuple[str | None, str]] = set()

    def observe(self, scheduler: pl.DataFrame) -> None:
        """Fold in scheduler rows: each job's nodes (``nodes`` of its job rows), and the time
        Slurm first showed them (a line earlier than that is placed as if no row had come, as
        it was when it was read live)."""
        if scheduler.is_empty():
            return
        jobs = scheduler.filter(
            (pl.col("kind") == "job")
            & pl.col("job_id").is_not_null()
            & pl.col("nodes").is_not_null()
        )
        named = (
            jobs.group_by("job_id", maintain_order=True)
            .agg(pl.col("nodes").explode().drop_nulls().unique(), pl.col("time").min())
            .filter(pl.col("nodes").list.len() > 0)
        )
        changed = False
        for job_id, job_nodes, since in named.iter_rows():
            before, first = self.jobs.get(job_id, (frozenset(), since))
            after = before | frozenset(job_nodes)
            if after != before:
                self.jobs.pop(job_id, None)
                self.jobs[job_id] = (after, min(first, since))
                changed = True
        if changed:
            self._forget()
            self._layouts = None

    def place(self, logs: pl.DataFrame) -> pl.DataFrame:
        """``logs`` with each line's ``node`` as the line and its job's layout say (see the
        module docstring); ``logs`` itself when that changes nothing. Only the lines that name
        a host, or whose job Slurm has shown, are decided; the stripper remembers the placed
        frame as stripped."""
        if logs.is_empty() or "message" not in logs.columns:
            return logs
        stripped = self.prefixes.strip(logs)
        hosts = said_hosts(stripped)
        named = [
            hosts.get_column(h).is_not_null() for h in _HOSTS if hosts[h].null_count() < len(hosts)
        ]
        if not named and not self.jobs:
            return logs
        frame = pl.concat(
            [
                stripped.select(
                    "time",
                    _column(stripped, "job_id", pl.String),
                    _column(stripped, "node", pl.String).fill_null(""),
                    pl.coalesce(
                        _column(stripped, "rank", pl.Int32),
                        pl.col("prefix_rank"),
                        logged_rank(pl.col("message")),
                    )
                    .cast(pl.Int32)
                    .alias("rank"),
                ),
                hosts,
            ],
            how="horizontal",
        )
        wanted = pl.any_horizontal(named) if named else pl.lit(False)
        if self.jobs:
            wanted = wanted | pl.col("job_id").is_in(list(self.jobs))
        at = frame.select(wanted.fill_null(False).arg_true()).to_series()
        if at.is_empty():
            return logs
        before = frame.get_column("node").gather(at)
        decided = self._decided(frame[at])
        if before.eq_missing(decided).all():
            return logs
        node = frame.get_column("node").scatter(at, decided)
        out = logs.with_columns(node)
        self.prefixes.remember(out, stripped.with_columns(node))
        return out

    def _decided(self, frame: pl.DataFrame) -> pl.Series:
        """The node of each line of ``frame`` (``time``, ``job_id``, ``node``, ``rank`` and the
        ``said_hosts`` columns)."""
        layouts = self._layout_frame()
        if layouts is not None:
            frame = frame.join(layouts, on="job_id", how="left", maintain_order="left")
            shown = pl.col("time") >= pl.col("_since")
            frame = frame.with_columns(pl.when(shown).then(pl.col("_nodes")).alias("_nodes"))
        else:
            frame = frame.with_columns(pl.lit(None, pl.List(pl.String)).alias("_nodes"))
        decided = frame.select(
            pl.coalesce(*(self._valid(pl.col(h)) for h in _HOSTS)).alias("_host"),
            pl.any_horizontal(pl.col(h).is_not_null() for h in _HOSTS).alias("_named"),
            pl.coalesce(_HOSTS).alias("_said"),
            "job_id",
            "rank",
            "node",
            self._valid(pl.col("node").replace("", None)).alias("_record"),
            pl.when(pl.col("_nodes").list.len() == 1)
            .then(pl.col("_nodes").list.first())
            .alias("_only"),
        )
        self._learn(decided)
        if self._ranks.is_empty():
            decided = decided.with_columns(pl.lit(None, pl.String).alias("_at"))
        else:
            decided = decided.join(
                self._ranks, on=["job_id", "rank"], how="left", maintain_order="left"
            )
        node = (
            pl.when(pl.col("_named"))
            .then(pl.col("_host"))
            .otherwise(pl.coalesce("_record", "_at", "_only"))
            .fill_null("")
        )
        decided = decided.with_columns(node.alias("_placed"))
        self._count(decided)
        return decided.get_column("_placed").alias("node")

    def checked(self, frame: pl.DataFrame, column: str = "host") -> pl.DataFrame:
        """``frame`` (rows with ``time``, ``job_id`` and ``column``: a host a matched line names
        in its text, such as ``srun: error: <host>: task 3``) with the hosts that are not one of
        their job's nodes in Slurm nulled and counted as ``unknown_node``; ``frame`` itself when
        there are none."""
        layouts = self._layout_frame()
        if (
            layouts is None
            or column not in frame.columns
            or frame.get_column(column).is_null().all()
        ):
            return frame
        joined = frame.select("time", "job_id", column).join(
            layouts, on="job_id", how="left", maintain_order="left"
        )
        refused = joined.select(
            (
                pl.col(column).is_not_null()
                & (pl.col("time") >= pl.col("_since"))
                & ~pl.col("_nodes").list.contains(pl.col(column))
            ).fill_null(False)
        ).to_series()
        if not refused.any():
            return frame
        hosts = joined.filter(refused).select("job_id", pl.col(column).alias("_host"), "time")
        lines = frame.filter(refused)
        if "message" in lines.columns:  # a line whose own node was refused was counted then
            said = line_host(self._reader.strip(lines.select("message")))
            hosts = hosts.filter(said.ne_missing(hosts.get_column("_host")))
        self.stats[UNKNOWN_NODE] += self._first_seen(hosts)
        self._warn(hosts.select("job_id", "_host"))
        return frame.with_columns(
            pl.when(refused).then(None).otherwise(pl.col(column)).alias(column)
        )

    @staticmethod
    def _valid(host: pl.Expr) -> pl.Expr:
        """``host`` where it is one of the line's job's nodes in Slurm, or where Slurm has shown
        no nodes for the line's job (none then to check against); else null."""
        ok = pl.col("_nodes").is_null() | pl.col("_nodes").list.contains(host)
        return pl.when(ok.fill_null(False)).then(host)

    def _first_seen(self, hosts: pl.DataFrame) -> int:
        """How many of ``hosts`` (refused named hosts: job, host, time) were not counted yet: one
        line read by several parsers (a signature and a failed rank) names its host in each of
        their streams, and is one line. Only refused hosts come here, a handful per batch."""
        rows = set(hosts.iter_rows())
        fresh = rows - self._refused_seen
        if len(self._refused_seen) > MAX_REFUSED_SEEN:
            self._refused_seen.clear()
        self._refused_seen |= fresh
        return sum(1 for row in hosts.iter_rows() if row in fresh)

    def _count(self, decided: pl.DataFrame) -> None:
        """Count (and log once per job and host) the lines whose named node was refused."""
        refused = decided.filter(
            (pl.col("_placed") == "")
            & (pl.col("_named") | ((pl.col("node") != "") & pl.col("_record").is_null()))
        )
        from_line = decided.filter(pl.col("_named") & (pl.col("_placed") != "")).height
        self.stats["from_line"] += from_line
        if refused.is_empty():
            return
        self.stats[UNKNOWN_NODE] += refused.height
        named = pl.when(pl.col("_named")).then(pl.col("_said")).otherwise(pl.col("node"))
        self._warn(refused.select("job_id", named.alias("_host")))

    def _warn(self, refused: pl.DataFrame) -> None:
        """Log each (job, host) of ``refused`` once (at most ``MAX_WARNED`` of them)."""
        if len(self._warned) >= MAX_WARNED:
            return
        for job_id, host in refused.unique().iter_rows():
            if (job_id, host) in self._warned:
                continue
            self._warned.add((job_id, host))
            log.warning(
                "placement: a line of job %s names node %r, which Slurm does not know as one "
                "of the job's nodes; the line is kept without a node (%s)",
                job_id,
                host,
                UNKNOWN_NODE,
            )

    def _learn(self, decided: pl.DataFrame) -> None:
        """Remember the node of each (job, rank) that a line naming both showed (before the
        lines of the same batch that name only the rank are placed)."""
        seen = decided.filter(
            pl.col("_host").is_not_null()
            & pl.col("rank").is_not_null()
            & pl.col("job_id").is_not_null()
        )
        if seen.is_empty():
            return
        taught = seen.select("job_id", "rank", pl.col("_host").alias("_at")).unique(
            ["job_id", "rank"], keep="last", maintain_order=True
        )
        if not self._ranks.is_empty():
            taught = taught.join(self._ranks, on=["job_id", "rank", "_at"], how="anti")
            if taught.is_empty():
                return
        self._ranks = pl.concat([self._ranks, taught]).unique(
            ["job_id", "rank"], keep="last", maintain_order=True
        )

    def _layout_frame(self) -> pl.DataFrame | None:
        if not self.jobs:
            return None
        if self._layouts is None:
            self._layouts = pl.DataFrame(
                {
                    "job_id": list(self.jobs),
                    "_nodes": [sorted(nodes) for nodes, _ in self.jobs.values()],
                    "_since": [since for _, since in self.jobs.values()],
                },
                schema={
                    "job_id": pl.String,
                    "_nodes": pl.List(pl.String),
                    "_since": pl.Datetime("us", "UTC"),
                },
            )
        return self._layouts

    def _forget(self) -> None:
        """Keep the newest ``MAX_JOBS`` jobs' layouts (and their ranks)."""
        if len(self.jobs) <= MAX_JOBS:
            return
        for job_id in list(self.jobs)[: len(self.jobs) - MAX_JOBS]:
            del self.jobs[job_id]
        self._ranks = self._ranks.filter(pl.col("job_id").is_in(list(self.jobs)))
