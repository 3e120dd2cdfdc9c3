"""The ``signatures`` stream: log lines that match the catalogue, one row per matched line.

Matching is vectorised in two stages so that the common line costs one regex scan:

1. one combined prefilter (the alternation of every entry's literals, and of the second
   layer's failure-like words when it is on) over the whole batch;
2. on the few candidate rows only, the pattern of each entry whose literals they hold, in
   catalogue order (``medic.parse.first_match``); the first match names the line, and that
   entry's named groups (Xid code, PCI address, rank, host, exit code) are extracted. Lines
   whose Xid code is in the catalogue's Xid table take the kind, severity and action NVIDIA
   recommends for that code;
3. lines that carry what NVIDIA's catalogues decide by are decided by them (``decide``): an
   NVSwitch SXid by its code and the severity word the driver printed, an NVLink5 Xid
   (144-150) by its unit and error status, an Xid 154 by the recovery action it states.

Below the catalogue, a second layer (``medic.parse.failure_lines``) reads the lines that no
entry matched and that its fast path marks failure-like (on the prefilter's rows only), of the
jobs for which no entry named a
root cause in the batch. One that reads as a failure is a row too: its signature is
``unmatched:<family>`` (no signature matched it) and ``reading`` the kind its vocabulary reads
as. Such a row is a ``crash`` sign of role ``context`` (never a job's own error that explains
away a node's fault), blaming nothing, of severity ``fatal`` when the line reports an end (an
abort, a signal, a non-zero exit, a fatal word) and ``error`` otherwise: the crash detector
waits for the job's death (its Slurm state, a fatal line) to confirm it, so a lone unmatched
error of a job that keeps training never makes a detection. A line holding a deliberate end's
words is a ``benign`` row (``unmatched:end``): the failures around it are its consequence.

Every detector that cares about log texts consumes this stream instead of raw lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch
from medic.parse.apart import PART, parts, read_apart
from medic.parse.catalogue import (
    GROUPS,
    Catalogue,
    CatalogueError,
    builtin_catalogue,
    site_catalogue,
)
from medic.parse.failure_lines import (
    ADDRESS_GATE,
    END,
    FAMILY,
    FATAL,
    FRAME,
    GENERAL,
    MENTION,
    NAMED_PEER,
    READING,
    FailureLines,
    bound_addresses,
    field_hosts,
    listed_ranks,
    logged_rank,
    named_host,
    named_ranks,
)
from medic.parse.first_match import PATTERN, ROW, FirstMatch
from medic.parse.placement import line_host
from medic.parse.prefixes import RAW, PrefixStripper

SIGNATURES = pa.schema(
    [
        pa.field("time", schema.TIME, nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("node", pa.string()),
        pa.field("rank", pa.int32()),
        pa.field("source", pa.string()),
        pa.field("signature", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("implicates", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("xid", pa.int32()),
        pa.field("xid_name", pa.string()),
        pa.field("pci", pa.string()),
        pa.field("host", pa.string()),
        pa.field("exit_code", pa.int32()),
        pa.field("pid", pa.int32()),
        pa.field("peer", pa.string()),
        pa.field("waited_us", pa.int64()),
        pa.field("cause_xid", pa.int32()),
        pa.field("message", pa.string(), nullable=False),
        pa.field("reading", pa.string()),
    ]
)
"""Schema of the derived ``signatures`` stream."""

_EMPTY = pl.DataFrame(SIGNATURES.empty_table())


def _row(**given: pl.Expr) -> list[pl.Expr]:
    """The ``SIGNATURES`` columns, in order: ``given``'s expressions by name, nulls for the
    rest."""
    return [
        given[name].alias(name) if name in given else pl.lit(None, dtype).alias(name)
        for name, dtype in _EMPTY.schema.items()
    ]


_OPTIONAL_LOG_COLUMNS = {"job_id": pl.String, "rank": pl.Int32, "source": pl.String}
_INT_GROUPS = ("xid", "rank", "exit_code", "pid", "waited_ms", "waited_s", "cause_xid", "sxid")
_FATAL_WORD = pl.col("_word").str.to_lowercase() == "fatal"
"""The driver's own word on an SXid or NVLink5 Xid line: "Fatal", else "Non-fatal"/"Nonfatal"."""
UNMATCHED = "unmatched:"
"""The prefix of the signature of a line that no catalogue entry matched (the second layer)."""
ENDED = "end"
"""The family of an unmatched line that reads as the job's deliberate end."""
ANNOUNCED = UNMATCHED + "address"
"""The signature of a line no entry matched binding a host's interface to its address
(``failure_lines.BOUND_ADDRESS``): a ``kind = "none"`` row naming the address as ``peer``."""
_LINE = "_line"
_PEER = "_peer"
_LISTED = "_listed"
_SAID = "_said"
_FIELD_HOST = "_field_host"
_HOST_READINGS = ("gpu_fault", "node_failure")
"""The readings whose culprit is a host."""


class SignatureMatcher:
    """Compiled view of a catalogue: the prefilter, the first-match reader over its entries and
    the tables that a matched line is joined with."""

    def __init__(
        self,
        catalogue: Catalogue,
        prefixes: PrefixStripper | None = None,
        unmatched: FailureLines | None = None,
    ) -> None:
        self.catalogue = catalogue
        self.prefixes = prefixes or PrefixStripper()
        self.unmatched = unmatched
        """The second layer, for the failure-like lines no entry matched (None: off)."""
        self._first = FirstMatch(
            catalogue.signatures["pattern"].to_list(),
            catalogue.signatures["literals"].to_list(),
            GROUPS,
        )
        self._prefilter = self._first.candidates(pl.col("message"))
        self._suspect = self._prefilter
        """The lines either layer may read, in one scan: those holding a catalogue entry's
        literal or a failure-like word, looked for in the lines as they came (a message is
        the end of its line), and those an entry without literals matches."""
        if unmatched is not None:
            scan = "|".join(p for p in (self._first.literal_scan, unmatched.literal_scan) if p)
            self._suspect = pl.col(RAW).str.contains(scan)
            if self._first.ungated:
                self._suspect = self._suspect | pl.col("message").str.contains(self._first.ungated)
        self._entries = catalogue.signatures.select(
            "entry",
            pl.col("id").alias("signature"),
            "kind",
            "implicates",
            "severity",
            "role",
            "action",
            "xid_table",
            "generic",
            "implied_wait_s",
        )
        self._xids = catalogue.xids.select(
            pl.col("code").alias("xid"),
            pl.col("mnemonic").alias("xid_name"),
            pl.col("kind").alias("xid_kind"),
            pl.col("severity").alias("xid_severity"),
            pl.col("action").alias("xid_action"),
        )
        self._sxids = catalogue.sxids.select(
            pl.col("code").cast(pl.Int32).alias("_sxid"),
            pl.col("severity").alias("sx_severity"),
            pl.col("action").alias("sx_action"),
        )
        self._nvlink5 = catalogue.nvlink5.select(
            pl.col("xid").cast(pl.Int32),
            pl.col("unit").alias("_unit"),
            pl.col("status").alias("_status"),
            pl.col("severity").alias("nv_severity"),
            pl.col("action").alias("nv_action"),
        ).unique(["xid", "_unit", "_status"], keep="first", maintain_order=True)
        self._recovery = catalogue.recovery.select(
            pl.col("recovery").alias("_recovery"),
            pl.col("kind").alias("rc_kind"),
            pl.col("severity").alias("rc_severity"),
            pl.col("action").alias("rc_action"),
        )
        self._unmatched_columns = _row(
            time=pl.col("time"),
            job_id=pl.col("job_id"),
            node=pl.col("node"),
            rank=pl.coalesce("_ranks", "rank", "prefix_rank", logged_rank(pl.col("message"))).cast(
                pl.Int32
            ),
            source=pl.col("source"),
            signature=pl.lit(UNMATCHED) + pl.coalesce(FAMILY, pl.lit(ENDED)),
            kind=pl.lit("crash"),
            implicates=pl.when(pl.col(_PEER).is_not_null())
            .then(pl.lit("peer"))
            .otherwise(pl.lit("none")),
            severity=pl.when(pl.col(END))
            .then(pl.lit("info"))
            .when(pl.col(FATAL))
            .then(pl.lit("fatal"))
            .when(pl.col(MENTION))
            .then(pl.lit("warning"))
            .otherwise(pl.lit("error")),
            role=pl.when(pl.col(END))
            .then(pl.lit("benign"))
            .when(pl.col("_ranks").is_not_null())  # the ranks at fault (``NAMED_RANKS``)
            .then(pl.lit("root"))
            .otherwise(pl.lit("context")),
            action=pl.lit("none"),
            host=pl.coalesce(named_host(pl.col("message")), _FIELD_HOST, pl.col("prefix_host")),
            peer=pl.col(_PEER),
            message=pl.col(RAW),
            reading=pl.col(READING),
        )
        """The ``SIGNATURES`` columns of a row of the second layer (after ``_line`` and
        ``_part``), built once: building them costs more than running them on a batch's few
        unmatched failure lines."""
        self._announced_columns = _row(
            time=pl.col("time"),
            job_id=pl.col("job_id"),
            node=pl.col("node"),
            rank=pl.coalesce("rank", "prefix_rank").cast(pl.Int32),
            source=pl.col("source"),
            signature=pl.lit(ANNOUNCED),
            kind=pl.lit("none"),
            implicates=pl.lit("node"),
            severity=pl.lit("info"),
            role=pl.lit("context"),
            action=pl.lit("none"),
            host=pl.when(pl.col("node").ne_missing("")).then(pl.coalesce(_SAID, "node")),
            peer=pl.col("peer"),
            message=pl.col(RAW),
        )
        """The ``SIGNATURES`` columns of an address a line binds (``_announced``): the host
        that wrote the line (the one it names, else its node) holds it. A line of a node
        Slurm refused (``""``) teaches none."""
        self._groups = [
            pl.col(PATTERN).cast(self._entries.schema["entry"]).alias("entry"),
            *(
                (pl.col(g).cast(pl.Int32, strict=False) if g in _INT_GROUPS else pl.col(g)).alias(
                    f"_{g}"
                )
                for g in GROUPS
            ),
        ]

    def match(self, logs: pl.DataFrame, sizes: Sequence[int] | None = None) -> pl.DataFrame:
        """The matched rows of a logs frame, in the ``SIGNATURES`` columns (maybe empty). Lines
        are matched without their prefixes (``PrefixStripper``); ``message`` is the line as it
        came. ``sizes``: the frame holds that many batches' rows in turn, each read apart (what
        the second layer reads depends on the batch's other lines), and every row carries its
        batch's index as ``_part``."""
        logs = self.prefixes.strip(logs)
        if sizes is not None:
            logs = logs.with_columns(parts(sizes))
        missing = [
            pl.lit(None, dtype).alias(name)
            for name, dtype in _OPTIONAL_LOG_COLUMNS.items()
            if name not in logs.columns
        ]
        if missing:
            logs = logs.with_columns(missing)
        if self.unmatched is None:
            return self._matched(logs)
        listed = listed_ranks(logs, RAW, "message", ["job_id", "node"])
        lines = logs.with_row_index(_LINE).with_columns(listed.alias(_LISTED))
        suspect = lines.filter(self._suspect | pl.col(_LISTED).is_not_null())
        matched = self._matched(suspect)
        return self._unmatched(suspect, matched, self._announced(lines, matched), lines)

    def _announced(self, logs: pl.DataFrame, matched: pl.DataFrame) -> pl.DataFrame:
        """A row per address the lines of ``logs`` bind to an interface (``BOUND_ADDRESS``)
        where no entry matched the line, the first of each node's in the batch (every rank of
        a node announces it): what lets a peer's address that another line names resolve to
        its host (``medic.detectors.fabric.Addresses``) when no entry reads the runtime's
        announcement."""
        lines = logs.filter(pl.col(RAW).str.contains(ADDRESS_GATE))
        if not lines.is_empty() and not matched.is_empty():
            lines = lines.filter(~pl.col(_LINE).is_in(matched.get_column(_LINE).implode()))
        part = [PART] if PART in lines.columns else []
        if not lines.is_empty():
            lines = (
                lines.with_columns(bound_addresses(pl.col(RAW)).alias("peer"))
                .explode("peer")
                .drop_nulls("peer")
                .unique([*part, "job_id", "node", "peer"], keep="first", maintain_order=True)
            )
        if lines.is_empty():
            return lines
        return lines.with_columns(line_host(lines).alias(_SAID)).select(
            _LINE, *part, *self._announced_columns
        )

    def _unmatched(
        self,
        logs: pl.DataFrame,
        matched: pl.DataFrame,
        announced: pl.DataFrame,
        every: pl.DataFrame,
    ) -> pl.DataFrame:
        """The ``matched`` rows (with their ``_line``) and, in line order with them, the rows
        of the failure-like lines of ``logs`` that no entry matched and that read as
        failures. Only the lines of jobs for which no entry named a root cause in the batch
        are read: the other failure lines of a job whose failure the catalogue named are that
        report's context (its traceback, stack frames, a launcher's summary), and reading them
        would cost without telling more. Lines of no job (a kernel's) make no crash sign. A
        line holding a deliberate end's words (a cancel, the time limit) is that end: a
        ``benign`` row (``unmatched:end``), as the catalogue's own ends are. A line reading
        as a host's or a GPU's failure that names no host takes the one a field of its report
        names (``field_hosts``, among ``every`` line)."""
        assert self.unmatched is not None
        keys = ["job_id", PART] if PART in matched.columns else ["job_id"]
        rooted = (
            matched.filter((pl.col("role") == "root") & (pl.col("severity") == "fatal"))
            .select(keys)
            .drop_nulls()
            .unique()
        )
        marked = logs.filter(
            pl.col("job_id").is_not_null() & self.unmatched.failure_like(pl.col(RAW))
        ).join(rooted, on=keys, how="anti", maintain_order="left")
        if not matched.is_empty() and not marked.is_empty():
            marked = marked.filter(~pl.col(_LINE).is_in(matched.get_column(_LINE).implode()))
        if not marked.is_empty():
            marked = marked.filter(~_under_frame(every, marked))
        read = self.unmatched.read(marked, RAW, "message") if not marked.is_empty() else marked
        listed = self._listed(logs, rooted, (matched, read))
        if not listed.is_empty():
            read = pl.concat([read, listed], how="diagonal_relaxed")
        pieces = [frame for frame in (matched, announced) if not frame.is_empty()]
        if not read.is_empty():
            part = [PART] if PART in read.columns else []
            named = (
                pl.coalesce(_LISTED, named_ranks(pl.col("message"))).alias("_ranks"),
                pl.col("message").str.extract(NAMED_PEER, 1).alias(_PEER),
                _field_host(every, read),
            )
            pieces.append(
                _per_named_rank(read.with_columns(*named)).select(
                    _LINE, *part, *self._unmatched_columns
                )
            )
        if not pieces:
            return matched.drop(_LINE, strict=False)
        if len(pieces) == 1:
            return pieces[0].drop(_LINE)
        return pl.concat(pieces).sort(_LINE, maintain_order=True).drop(_LINE)

    @staticmethod
    def _listed(
        logs: pl.DataFrame, rooted: pl.DataFrame, taken: tuple[pl.DataFrame, ...]
    ) -> pl.DataFrame:
        """The lines of ``logs`` listing ranks at fault (``_listed``), of jobs for which no
        entry named a root cause (``rooted``), that no entry matched and the layer did not
        read as failures themselves (``taken``): rows of no family's reading, at error
        severity, naming those ranks (a report before them says what failed)."""
        lines = logs.filter(pl.col(_LISTED).is_not_null() & pl.col("job_id").is_not_null())
        if lines.is_empty():
            return lines
        lines = lines.join(rooted, on=rooted.columns, how="anti", maintain_order="left")
        for rows in taken:
            if not lines.is_empty() and not rows.is_empty():
                lines = lines.filter(~pl.col(_LINE).is_in(rows.get_column(_LINE).implode()))
        return lines.with_columns(
            pl.lit(False).alias(END),
            pl.lit(GENERAL).alias(FAMILY),
            pl.lit(None, pl.String).alias(READING),
            pl.lit(False).alias(FATAL),
            pl.lit(False).alias(MENTION),
        )

    def _matched(self, logs: pl.DataFrame) -> pl.DataFrame:
        """The rows of the lines a catalogue entry matches (``_line`` kept when ``logs`` has
        it)."""
        candidates = logs.filter(self._prefilter)
        if candidates.is_empty():
            return _EMPTY
        read = self._first.read(candidates.get_column("message"))
        if read.is_empty():
            return _EMPTY
        hits = _per_named_rank(
            _listed_in_list(
                _named_in_generic(
                    candidates[read.get_column(ROW)]
                    .hstack(read.select(self._groups))
                    .join(self._entries, on="entry", how="left", maintain_order="left")
                )
            )
        )
        from_table = pl.col("xid_table") & pl.col("xid_kind").is_not_null()
        line = [c for c in (_LINE, PART) if c in hits.columns]
        hits = (
            hits.rename({"_xid": "xid"})
            .join(self._xids, on="xid", how="left", maintain_order="left")
            .with_columns(
                pl.when(from_table)
                .then(pl.col("xid_kind"))
                .otherwise(pl.col("kind"))
                .alias("kind"),
                pl.when(from_table)
                .then(pl.col("xid_severity"))
                .otherwise(pl.col("severity"))
                .alias("severity"),
                pl.when(from_table)
                .then(pl.col("xid_action"))
                .otherwise(pl.col("action"))
                .alias("action"),
            )
        )
        rows = self.decide(hits).select(
            *line,
            "time",
            "job_id",
            "node",
            pl.coalesce(
                "_ranks", "rank", "_rank", "prefix_rank", logged_rank(pl.col("message"))
            ).alias("rank"),
            "source",
            "signature",
            "kind",
            "implicates",
            "severity",
            "role",
            "action",
            "xid",
            "xid_name",
            pl.col("_pci").str.to_lowercase().alias("pci"),
            pl.coalesce("_host", "prefix_host").alias("host"),
            pl.col("_exit_code").alias("exit_code"),
            pl.col("_pid").alias("pid"),
            pl.col("_peer").alias("peer"),
            pl.coalesce(
                pl.col("_waited_ms").cast(pl.Int64) * 1_000,
                pl.col("_waited_s").cast(pl.Int64) * 1_000_000,
                pl.col("implied_wait_s") * 1_000_000,
            ).alias("waited_us"),
            pl.col("_cause_xid").alias("cause_xid"),
            pl.col(RAW).alias("message"),
            pl.lit(None, pl.String).alias("reading"),
            "generic",
        )
        return self._read_generic(_first_frames(rows))

    def _read_generic(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` with the ``reading`` of the lines a ``generic`` entry matched (the second
        layer's, from a strong term of a family's vocabulary; null without the layer)."""
        generic = rows.get_column("generic")
        rows = rows.drop("generic")
        if self.unmatched is None or not generic.any():
            return rows
        at = generic.arg_true()
        read = self.unmatched.strong_reading(rows.get_column("message").gather(at))
        return rows.with_columns(rows.get_column("reading").scatter(at, read))

    def decide(self, hits: pl.DataFrame) -> pl.DataFrame:
        """Kind, severity and action of the lines NVIDIA's catalogues decide by what they carry.

        * SXid: the severity word the driver printed, else the SXid table by code, else a
          warning; fatal SXids take the table's action (restart the node), others none.
        * NVLink5 Xid: fatal when the decode table by (Xid, unit, error status) or the line's
          own word says so (the driver's "Fatal" is never overruled, nor the table's fatal
          status); a line both call non-fatal is a warning with no action, whatever its
          code's row says. A fatal line takes the table's action, else its code's row's.
        * Xid 154: the recovery table by the action the line states.
        * Any other line whose own severity word says non-fatal (an NVLink5 Xid that no entry
          decodes by unit): a warning with no action, whatever its code's row says.
        Lines without these fields keep what the entry and the Xid table gave them."""
        unit = pl.col("_unit").str.to_uppercase()
        status = pl.col("_status").str.strip_prefix("0x").str.to_integer(base=16, strict=False)
        hits = (
            hits.with_columns(unit.alias("_unit"), status.alias("_status"))
            .join(self._sxids, on="_sxid", how="left", maintain_order="left")
            .join(self._nvlink5, on=["xid", "_unit", "_status"], how="left", maintain_order="left")
            .with_columns(pl.col("_recovery").str.strip_chars().str.to_lowercase())
            .join(self._recovery, on="_recovery", how="left", maintain_order="left")
        )
        sxid = pl.col("_sxid").is_not_null()
        sx_severity = (
            pl.when(pl.col("_word").is_not_null())
            .then(pl.when(_FATAL_WORD).then(pl.lit("fatal")).otherwise(pl.lit("warning")))
            .otherwise(pl.col("sx_severity").fill_null("warning"))
        )
        nvlink5 = pl.col("_unit").is_not_null() & pl.col("_word").is_not_null()
        nv_severity = (
            pl.when(_FATAL_WORD | (pl.col("nv_severity") == "fatal"))
            .then(pl.lit("fatal"))
            .otherwise(pl.lit("warning"))
        )
        recovery = pl.col("rc_kind").is_not_null()
        survivable = pl.col("_word").is_not_null() & ~_FATAL_WORD
        return hits.with_columns(
            pl.when(sxid)
            .then(sx_severity)
            .when(nvlink5)
            .then(nv_severity)
            .when(recovery)
            .then(pl.col("rc_severity"))
            .when(survivable)
            .then(pl.lit("warning"))
            .otherwise(pl.col("severity"))
            .alias("severity"),
            pl.when(recovery).then(pl.col("rc_kind")).otherwise(pl.col("kind")).alias("kind"),
        ).with_columns(
            pl.when(sxid)
            .then(
                pl.when(pl.col("severity") != "fatal")
                .then(pl.lit("none"))
                .otherwise(pl.coalesce(pl.col("sx_action").replace("none", None), pl.lit("reboot")))
            )
            .when(nvlink5)
            .then(
                pl.when(pl.col("severity") != "fatal")
                .then(pl.lit("none"))
                .otherwise(pl.coalesce(pl.col("nv_action").replace("none", None), pl.col("action")))
            )
            .when(recovery)
            .then(pl.col("rc_action"))
            .when(survivable)
            .then(pl.lit("none"))
            .otherwise(pl.col("action"))
            .alias("action")
        )


def unmatched_only(evidence: Mapping[str, Any]) -> bool:
    """Whether a detection's evidence names signatures and all of them are the second layer's
    (text no catalogue entry matched), or its kind is what such text reads as
    (``no_signature``)."""
    if evidence.get("no_signature") is True:
        return True
    signatures = evidence.get("signatures") or ()
    return bool(signatures) and all(str(s).startswith(UNMATCHED) for s in signatures)


def _named_in_generic(hits: pl.DataFrame) -> pl.DataFrame:
    """The hosts and ranks that the lines of ``generic`` entries (a Python exception's last
    line) name as failing in their text, where the entry's pattern named none; and the ranks
    a reporter's line (a ``collateral`` entry: a stall or timeout report) names at fault,
    which make it the root: the line is about those ranks, not the one that printed it."""
    generic = pl.col("generic")
    message = pl.col("message")
    reporter = pl.col("role") == "collateral"
    # Read once for both kinds of line (a generic entry's and a reporter's).
    hits = hits.with_columns(
        pl.when(pl.col("_ranks").is_null() & (generic | reporter))
        .then(named_ranks(message))
        .alias("_named")
    )
    named = pl.col("_named")
    return hits.with_columns(
        pl.when(reporter & named.is_not_null())
        .then(pl.lit("root"))
        .otherwise("role")
        .alias("role"),
        pl.coalesce("_ranks", named).alias("_ranks"),
        pl.when(generic & pl.col("_host").is_null())
        .then(named_host(message))
        .otherwise(pl.col("_host"))
        .alias("_host"),
        pl.when(generic & pl.col("_peer").is_null())
        .then(message.str.extract(NAMED_PEER, 1))
        .otherwise(pl.col("_peer"))
        .alias("_peer"),
    ).drop("_named")


def _listed_in_list(hits: pl.DataFrame) -> pl.DataFrame:
    """The ranks a line lists under a header announcing ranks at fault (``_listed``), where
    the entry's pattern named none: a launcher's prefix before the list's number (mpirun's
    ``[1,0]<stderr>:6: [...]``) leaves the stripped line without it."""
    if _LISTED not in hits.columns:
        return hits
    return hits.with_columns(pl.coalesce("_ranks", _LISTED).alias("_ranks"))


def _field_host(every: pl.DataFrame, read: pl.DataFrame) -> pl.Series:
    """Per row of ``read``: the host a field of its report names (``field_hosts``) where the
    row reads as a host's or a GPU's failure and its line names none; else null."""
    message = pl.col("message")
    asked = (
        read.with_row_index("_at")
        .filter(
            pl.col(READING).is_in(_HOST_READINGS)
            & named_host(message).is_null()
            & pl.col("prefix_host").is_null()
        )
        .select("_at", _LINE, "message")
    )
    hosts = pl.Series(_FIELD_HOST, [None] * read.height, dtype=pl.String)
    if asked.is_empty():
        return hosts
    found = field_hosts(every, asked, _LINE, "message")
    return hosts.scatter(asked.get_column("_at"), found)


TRACEBACK_FRAME = "traceback_frame"
"""A frame of a traceback (``_first_frames``)."""
TRACEBACK = ("python_traceback", "stack_listing", TRACEBACK_FRAME)
"""The entries of a stack's lines: a traceback's header, the header of a listing that is no
exception's, the frames (those after a header are its own)."""
_TRACEBACK = pl.col("signature").is_in(TRACEBACK)


def _first_frames(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` without the frames of a traceback but the first of a process (job, node,
    rank) that no header or frame came before in the batch (each batch of several read at
    once, ``PART``, apart): one report, its header when the text lost it, rather than one sign
    per frame."""
    signature = rows.get_column("signature")
    if not (signature == TRACEBACK_FRAME).any():
        return rows
    process = [*([PART] if PART in rows.columns else []), "job_id", "node", "rank"]
    earlier = _TRACEBACK.cum_sum().over(process) - _TRACEBACK.cast(pl.UInt32)
    return rows.filter((pl.col("signature") != TRACEBACK_FRAME) | (earlier == 0))


def _under_frame(every: pl.DataFrame, marked: pl.DataFrame) -> pl.Series:
    """Whether each of ``marked`` (lines of ``every``, the batch's lines by ``_LINE``) is the
    code a traceback prints under a frame: indented, right after a frame line (``FRAME``) of its
    process. A logger relaying a traceback at its error level (torchrun's agent, "E0312 ...
    api.py:869]" before each line of a rank's error file) marks its code lines too; they say
    where the error was raised, not what failed."""
    process = [c for c in (PART, "job_id", "node", "rank") if c in marked.columns]
    at = marked.get_column(_LINE).cast(pl.Int64) - 1
    before = every.select(*process, "message").gather(at.clip(0))
    under = (
        (at >= 0)
        & marked.get_column("message").str.contains(r"^\s")
        & before.get_column("message").str.contains(FRAME)
    )
    for column in process:
        under = under & marked.get_column(column).eq_missing(before.get_column(column))
    return under.fill_null(False)


def _per_named_rank(hits: pl.DataFrame) -> pl.DataFrame:
    """One row per rank of the lines naming a list of them (``ranks``: "3, 5"), that rank in
    ``_ranks``; a line names the ranks at fault, not the rank that printed it."""
    if not hits.select(pl.col("_ranks").is_not_null().any()).item():
        return hits.with_columns(pl.lit(None, pl.Int32).alias("_ranks"))
    listed = (
        pl.col("_ranks")
        .str.split(",")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int32, strict=False))
    )
    return hits.with_columns(listed).explode("_ranks")


@dataclass(frozen=True)
class SignaturesConfig:
    """``[parsers.signatures]``."""

    extra: tuple[str, ...] = ()
    """A site's catalogue files (the format of the built-in ``signatures.toml``), added to the
    built-in catalogue: their signatures are tried first, their Xid, exit-code, SXid, NVLink5
    and recovery rows replace the built-in ones. The parser and every detector read the same
    catalogue."""
    unmatched: bool = True
    """Read the failure-like lines that no signature matches with the second layer
    (``medic/parse/failure_lexicon.toml``): a line that reads as a failure becomes an
    ``unmatched:<family>`` sign of the job's crash, acted on only once the job's fate confirms
    it; a host's interface bound to its address (``ib0:10.0.0.4``) teaches whose address a
    failure line about a peer names. false: only the catalogue's lines are signs."""


def catalogue_from_settings(parsers: Mapping[str, Any]) -> Catalogue:
    """The catalogue a config's ``[parsers.signatures]`` table asks for (one-line errors)."""
    config = from_dict(SignaturesConfig, parsers.get("signatures", {}), "parsers.signatures")
    return catalogue_of(config)


def catalogue_of(config: SignaturesConfig) -> Catalogue:
    """The catalogue a checked ``[parsers.signatures]`` asks for (one-line errors)."""
    if not config.extra:
        return builtin_catalogue()
    try:
        return site_catalogue(config.extra)
    except CatalogueError as exc:
        raise ConfigError(f"parsers.signatures.extra: {exc}") from None


class SignatureParser:
    """Derives the ``signatures`` stream from ``logs`` batches (shared by every detector)."""

    name = "signatures"
    input_stream = "logs"
    output_stream = "signatures"
    Config = SignaturesConfig
    uses_catalogue = True
    strips_prefixes = True
    """Reads lines without their launchers' and shippers' prefixes (``build_parsers``)."""

    def __init__(
        self,
        config: SignaturesConfig | None = None,
        catalogue: Catalogue | None = None,
        prefixes: PrefixStripper | None = None,
    ) -> None:
        self.config = config or SignaturesConfig()
        if catalogue is None:
            extra = self.config.extra
            catalogue = site_catalogue(extra) if extra else builtin_catalogue()
        self.catalogue = catalogue
        unmatched = FailureLines() if self.config.unmatched else None
        self.matcher = SignatureMatcher(catalogue, prefixes, unmatched)

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty() or "message" not in frame.columns:
            return None
        hits = self.matcher.match(frame)
        if hits.is_empty():
            return None
        return Batch.from_frame(self.output_stream, hits, SIGNATURES)

    def parse_apart(
        self, batches: Sequence[Batch], joined: pl.DataFrame | None = None
    ) -> list[Batch | None]:
        """What ``parse`` gives for each of ``batches`` (non-empty), read in one call: the
        second layer reads a job's unmatched lines unless a fatal entry named its failure in
        the same batch, so each batch is read apart. ``joined``: their frames already
        concatenated."""
        return read_apart(batches, joined, self.parse, self._read, self.output_stream, SIGNATURES)

    def _read(self, frame: pl.DataFrame, sizes: list[int]) -> pl.DataFrame | None:
        return self.matcher.match(frame, sizes) if "message" in frame.columns else None
