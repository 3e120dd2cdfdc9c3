"""Event times of raw log lines, read from the timestamps real logs carry.

Formats, tried in this order on each line (vectorised, one regex each per batch of lines):

* ISO 8601 within the first characters of the line, ``T`` or a space between date and time,
  ``.`` or ``,`` before the fraction: Python logging, torchrun, Horovod, slurmd/slurmctld,
  ``journalctl -o short-iso``, most shippers;
* ``dmesg -T``: ``[Mon Nov 30 04:12:55 2026]``;
* syslog and ``journalctl`` short: ``Nov 30 04:12:55 host ...`` (no year);
* glog, as PyTorch's C++ and torch.distributed.elastic write it: ``E1130 04:12:55.220419``,
  possibly behind a prefix such as ``[rank6]:[`` (no year; c10's own logging writes the date
  as month * 100 + day: ``E602`` in June);
* plain ``dmesg``: ``[ 8812.345678]``, seconds since the node booted (a relative time).

Lines without a timestamp take the one of the line before them in their file (a traceback
belongs to the moment its first line was stamped); a file without absolute timestamps is
placed from the earliest absolute time of all inputs on, keeping its own order and spacing.
All times are read as UTC.

The year of the formats that omit it is, in this order: the one the caller gives; the year of
the first full date among the lines; else the year of a reference time that no line can be
later than (the newest file's modification time, or now), with a line that would fall more
than a day after the reference moved to the year before (a log written across New Year and
read in January). The day of slack covers a clock or time zone apart between writer and reader.
"""

from __future__ import annotations

import datetime as dt
import re

import polars as pl

from medic.timeutil import US

MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
ISO = (
    r"^.{0,48}?(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[T ](?P<hour>\d{2}):"
    r"(?P<minute>\d{2}):(?P<second>\d{2})(?:[.,](?P<fraction>\d{1,9}))?"
)
DMESG_T = (
    r"^\[\w{3} (?P<mon>\w{3}) +(?P<day>\d{1,2}) (?P<hour>\d{2}):(?P<minute>\d{2}):"
    r"(?P<second>\d{2}) (?P<year>\d{4})\]"
)
SYSLOG = (
    r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hour>\d{2}):(?P<minute>\d{2}):"
    r"(?P<second>\d{2})(?:\.(?P<fraction>\d{1,9}))? "
)
GLOG = (
    r"^.{0,32}?(?:^|[\[\s])[IWEF](?P<month>\d{1,2})(?P<day>\d{2}) (?P<hour>\d{2}):"
    r"(?P<minute>\d{2}):(?P<second>\d{2})(?:\.(?P<fraction>\d{1,9}))?\s"
)
BOOT = r"^\[ *(?P<seconds>\d+)\.(?P<fraction>\d{1,9})\]"
STEP_US = 1_000
DAY_US = 86_400 * US
"""Spacing of the lines of a file without any timestamp."""


def _stamp(pattern: str, year: int | None) -> pl.Expr:
    """Microseconds since the epoch from one format's captures (null where it does not match,
    and where its numbers make no date: "F1234 12:00:00" in a line's text is no glog stamp)."""
    groups = pl.col("message").str.extract_groups(pattern)
    field = groups.struct.field
    names = set(_group_names(pattern))
    month = (
        field("month").cast(pl.Int32, strict=False)
        if "month" in names
        else field("mon").replace_strict(MONTHS, default=None, return_dtype=pl.Int32)
    )
    year_expr = field("year").cast(pl.Int32, strict=False) if "year" in names else pl.lit(year)
    fraction = (
        field("fraction").str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False)
        if "fraction" in names
        else pl.lit(0, pl.Int64)
    )
    parts = [year_expr, month, *(field(f).cast(pl.Int32, strict=False) for f in _CLOCK)]
    text = pl.format("{}-{}-{} {}:{}:{}", *parts)  # null when a part is
    stamp = text.str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
    return stamp.dt.epoch("us").cast(pl.Int64) + fraction.fill_null(0)


_CLOCK = ("day", "hour", "minute", "second")


def _group_names(pattern: str) -> list[str]:
    return list(re.compile(pattern).groupindex)


def absolute_times(year: int, latest: int | None = None) -> pl.Expr:
    """A line's own absolute timestamp in microseconds since the epoch, or null; ``latest``
    (µs), when given, moves a year-less stamp later than a day after it to the year before."""

    def yearless(pattern: str) -> pl.Expr:
        stamp = _stamp(pattern, year)
        if latest is None:
            return stamp
        return pl.when(stamp > latest + DAY_US).then(_stamp(pattern, year - 1)).otherwise(stamp)

    return pl.coalesce(_stamp(ISO, None), _stamp(DMESG_T, None), yearless(SYSLOG), yearless(GLOG))


def boot_times() -> pl.Expr:
    """A kernel line's seconds since boot, in microseconds, or null."""
    groups = pl.col("message").str.extract_groups(BOOT)
    seconds = groups.struct.field("seconds").cast(pl.Int64, strict=False)
    fraction = groups.struct.field("fraction").str.pad_end(6, "0").str.slice(0, 6)
    return seconds * US + fraction.cast(pl.Int64, strict=False)


def first_year(messages: pl.Series) -> int | None:
    """The year of the first full date in some lines (to date the formats that omit it)."""
    message = pl.col("message")
    years = (
        messages.to_frame("message")
        .select(
            pl.coalesce(
                message.str.extract_groups(ISO).struct.field("year"),
                message.str.extract_groups(DMESG_T).struct.field("year"),
            )
        )
        .to_series()
        .drop_nulls()
    )
    return int(years[0]) if len(years) else None


def year_before(latest_us: int) -> int:
    """The year of ``latest_us`` (µs): that of the reference time for year-less stamps."""
    return dt.datetime.fromtimestamp(latest_us / US, dt.UTC).year


def event_times(lines: pl.DataFrame, year: int, latest: int | None = None) -> pl.Series:
    """Event time (microseconds) of each row of ``lines`` (columns ``file``, ``message``, in
    file order): its own timestamp, else its predecessor's; files without absolute times are
    placed after the earliest absolute time seen (their own boot times or order kept). Rows
    sharing a timestamp keep their order a microsecond apart. ``latest``: see
    ``absolute_times``."""
    stamped = lines.with_columns(
        absolute_times(year, latest).alias("_abs"),
        boot_times().alias("_boot"),
        pl.int_range(pl.len()).over("file").alias("_index"),
    )
    earliest = stamped.get_column("_abs").min()
    base = int(earliest) if earliest is not None else _new_year_us(year)  # type: ignore[arg-type]
    has_abs = pl.col("_abs").is_not_null().any().over("file")
    has_boot = pl.col("_boot").is_not_null().any().over("file")
    boot = pl.col("_boot").forward_fill().backward_fill().over("file")
    stamp = (
        pl.when(has_abs)
        .then(pl.col("_abs").forward_fill().backward_fill().over("file"))
        .when(has_boot)
        .then(base + boot - boot.min().over("file"))
        .otherwise(base + pl.col("_index") * STEP_US)
    )
    timed = (
        stamped.with_columns(stamp.alias("_stamp"))
        .with_columns(_within_its_second(pl.col("_stamp")).over("file"))
        .with_columns(pl.col("_stamp") + pl.int_range(pl.len()).over("file", "_stamp"))
    )
    return timed.get_column("_stamp").alias("time")


def _within_its_second(stamp: pl.Expr) -> pl.Expr:
    """``stamp`` (a file's, in file order) raised, where it names a whole second, to the
    newest stamp the file's earlier lines gave within that second: lines stamped to the
    microsecond and one stamped to the second (an application's own log format beside PyTorch's
    C++ logging) were written in the file's order, and the coarse stamp only lost the fraction
    of its second."""
    before = stamp.cum_max().shift(1)
    coarse = (stamp % US == 0) & (before > stamp) & (before < stamp + US)
    return pl.when(coarse.fill_null(False)).then(before).otherwise(stamp)


def _new_year_us(year: int) -> int:
    return int(dt.datetime(year, 1, 1, tzinfo=dt.UTC).timestamp()) * US
