"""The failure-signature catalogue (``signatures.toml``) as polars tables, validated once.

The catalogue is data, not code: each entry says what a log line, an NVIDIA Xid code or a
job exit code means, what it implicates and where that knowledge comes from. The matcher
(``medic.parse.signatures``) and the detectors only read these tables.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from medic.schema import DETECTION_KINDS

KINDS = (*DETECTION_KINDS, "none")
"""What a signature may be evidence of: a detection kind, or none (benign)."""
IMPLICATES = ("gpu", "node", "peer", "rank", "none")
SEVERITIES = ("fatal", "error", "warning", "info")
ROLES = ("root", "collateral", "context", "benign")
ACTIONS = ("drain", "reset_gpu", "reboot", "restart_job", "none")
GROUPS = (
    "xid",
    "pci",
    "rank",
    "host",
    "exit_code",
    "pid",
    "peer",
    "waited_ms",
    "waited_s",
    "cause_xid",
    "ranks",
    "sxid",
    "word",
    "unit",
    "status",
    "recovery",
)
"""Named groups a pattern may capture; each becomes a column of the ``signatures`` stream
(``waited_ms`` and ``waited_s`` together become ``waited_us``: how long the line says something
had been stuck, so its onset lies that far back; an entry's ``implied_wait_s`` stands for
them on lines that imply a wait without printing it, NCCL's RAS declaring a peer dead once it
has not answered for a minute; ``ranks``, a list such as "3, 5" that a line
names, becomes one row per rank, in ``rank``; ``sxid`` an NVSwitch SXid code, ``word`` the
severity word the driver printed on the line, ``unit`` and ``status`` the unit and error
status of an NVLink5 Xid (144-150), ``recovery`` the recovery action an Xid 154 states: these
five decide the line's verdict through the ``sxid``, ``nvlink5`` and ``recovery`` tables)."""

_SIGNATURE_KEYS = {
    "id": str,
    "literals": list,
    "pattern": str,
    "kind": str,
    "implicates": str,
    "severity": str,
    "role": str,
    "action": str,
    "xid_table": bool,
    "generic": bool,
    "implied_wait_s": int,
    "source": str,
    "example": str,
}
_XID_KEYS = {
    "code": int,
    "mnemonic": str,
    "nvidia_action": str,
    "kind": str,
    "severity": str,
    "action": str,
    "per_process": bool,
}
_EXIT_KEYS = {"code": int, "meaning": str, "source": str}
_SXID_KEYS: dict[str, type] = {
    "code": int,
    "name": str,
    "nvidia_class": str,
    "severity": str,
    "action": str,
}
_NVLINK5_KEYS: dict[str, type] = {
    "xid": int,
    "unit": str,
    "status": int,
    "severity": str,
    "action": str,
}
_RECOVERY_KEYS: dict[str, type] = {"recovery": str, "kind": str, "severity": str, "action": str}
SXID_CLASSES = ("non_fatal", "fatal", "always_fatal", "notable")
"""The sections of NVIDIA's SXid catalogue (Fabric Manager user guide): non-fatal, fatal (to
the partition), always fatal (to the whole fabric), other notable."""
_TABLES: dict[str, dict[str, type] | None] = {
    "signature": None,
    "xid": _XID_KEYS,
    "exit_code": _EXIT_KEYS,
    "sxid": _SXID_KEYS,
    "nvlink5": _NVLINK5_KEYS,
    "recovery": _RECOVERY_KEYS,
}
_OPTIONAL = {"xid_table", "generic", "implied_wait_s", "per_process"}
_VOCABULARY = {
    "kind": KINDS,
    "implicates": IMPLICATES,
    "severity": SEVERITIES,
    "role": ROLES,
    "action": ACTIONS,
    "nvidia_class": SXID_CLASSES,
}


def _schema(keys: dict[str, type]) -> dict[str, Any]:
    return {key: pl.Int64 if type_ is int else pl.String for key, type_ in keys.items()}


class CatalogueError(ValueError):
    """The catalogue file is malformed; the message names the entry and the problem."""


@dataclass(frozen=True)
class Catalogue:
    """The tables of the catalogue; ``signatures`` rows are in match order. ``sxids``,
    ``nvlink5`` and ``recovery`` decide a matched line's verdict from the fields it carries
    (``medic.parse.signatures``)."""

    signatures: pl.DataFrame
    xids: pl.DataFrame
    exit_codes: pl.DataFrame
    sxids: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_schema(_SXID_KEYS)))
    nvlink5: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=_schema(_NVLINK5_KEYS))
    )
    recovery: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=_schema(_RECOVERY_KEYS))
    )

    def fatal_xids(self, kind: str = "gpu_fault") -> list[int]:
        """Xid codes that are fatal evidence of ``kind``."""
        rows = self.xids.filter((pl.col("kind") == kind) & (pl.col("severity") == "fatal"))
        return [int(code) for code in rows["code"]]

    def per_process_xids(self) -> list[int]:
        """Xid codes an application's own kernel can raise: hardware only when they repeat
        across processes on one GPU."""
        return [int(code) for code in self.xids.filter(pl.col("per_process"))["code"]]

    def extended(self, site: Catalogue) -> Catalogue:
        """This catalogue with a site's entries: its signatures are tried first (a site's text
        wins over a built-in one), its Xid and exit-code rows replace the built-in rows of the
        same code. A signature id used by both is an error."""
        clash = set(site.signatures["id"]) & set(self.signatures["id"])
        if clash:
            raise CatalogueError(f"signature id '{sorted(clash)[0]}' is already built in")
        signatures = pl.concat([site.signatures, self.signatures]).drop("entry")
        xids = pl.concat([site.xids, self.xids.join(site.xids, on="code", how="anti")])
        exits = pl.concat(
            [site.exit_codes, self.exit_codes.join(site.exit_codes, on="code", how="anti")]
        )
        sxids = pl.concat([site.sxids, self.sxids.join(site.sxids, on="code", how="anti")])
        keys = ["xid", "unit", "status"]
        nvlink5 = pl.concat([site.nvlink5, self.nvlink5.join(site.nvlink5, on=keys, how="anti")])
        recovery = pl.concat(
            [site.recovery, self.recovery.join(site.recovery, on="recovery", how="anti")]
        )
        return Catalogue(signatures.with_row_index("entry"), xids, exits, sxids, nvlink5, recovery)

    def without(self, ids: Iterable[str]) -> Catalogue:
        """This catalogue less the signatures ``ids`` (to measure what the rest recognise of
        the failures those entries were written for). An id not in it is an error."""
        drop = set(ids)
        unknown = sorted(drop - set(self.signatures["id"]))
        if unknown:
            raise CatalogueError(f"no signature '{unknown[0]}' to leave out")
        kept = self.signatures.filter(~pl.col("id").is_in(sorted(drop))).drop("entry")
        return Catalogue(
            kept.with_row_index("entry"),
            self.xids,
            self.exit_codes,
            self.sxids,
            self.nvlink5,
            self.recovery,
        )

    def exit_meaning(self, code: int | None) -> str | None:
        if code is None:
            return None
        rows = self.exit_codes.filter(pl.col("code") == code)
        return None if rows.is_empty() else str(rows["meaning"][0])


def _check(entry: dict[str, Any], keys: dict[str, type], where: str) -> None:
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        raise CatalogueError(f"{where}: unknown key '{unknown[0]}'")
    for key, type_ in keys.items():
        if entry.get(key) is None:  # an optional key's null, as the tables hold its absence
            if key in _OPTIONAL:
                continue
            raise CatalogueError(f"{where}: missing key '{key}'")
        if not isinstance(entry[key], type_):
            raise CatalogueError(f"{where}: '{key}' must be {type_.__name__}")
    for key, allowed in _VOCABULARY.items():
        if key in entry and key in keys and entry[key] not in allowed:
            raise CatalogueError(f"{where}: {key} '{entry[key]}' not one of {', '.join(allowed)}")


def _check_signature(entry: dict[str, Any], where: str) -> None:
    _check(entry, _SIGNATURE_KEYS, where)
    if not entry["literals"] or not all(isinstance(lit, str) and lit for lit in entry["literals"]):
        raise CatalogueError(f"{where}: 'literals' must be a list of non-empty strings")
    try:
        compiled = re.compile(entry["pattern"])
    except re.error as exc:
        raise CatalogueError(f"{where}: bad pattern ({exc})") from None
    extra = sorted(set(compiled.groupindex) - set(GROUPS))
    if extra:
        raise CatalogueError(f"{where}: unknown group '{extra[0]}' (known: {', '.join(GROUPS)})")


def parse_catalogue(data: dict[str, Any]) -> Catalogue:
    """Validate the parsed TOML and build the tables."""
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise CatalogueError(f"unknown table [[{unknown[0]}]]")
    signatures = data.get("signature", [])
    seen: set[str] = set()
    for i, entry in enumerate(signatures):
        where = f"signature #{i + 1} ({entry.get('id', '?')})"
        _check_signature(entry, where)
        if entry["id"] in seen:
            raise CatalogueError(f"{where}: duplicate id")
        seen.add(entry["id"])
    xid_rows = data.get("xid", [])
    for i, entry in enumerate(xid_rows):
        _check(entry, _XID_KEYS, f"xid #{i + 1} ({entry.get('code', '?')})")
    for table, keys in _TABLES.items():
        if keys is None or table == "xid":
            continue
        for i, entry in enumerate(data.get(table, [])):
            first = next(iter(keys))
            _check(entry, keys, f"{table} #{i + 1} ({entry.get(first, '?')})")
    signature_rows = [
        {"xid_table": False, "generic": False, "implied_wait_s": None, **entry}
        for entry in signatures
    ]
    return Catalogue(
        signatures=pl.DataFrame(
            signature_rows,
            schema={
                "id": pl.String,
                "literals": pl.List(pl.String),
                "pattern": pl.String,
                "kind": pl.String,
                "implicates": pl.String,
                "severity": pl.String,
                "role": pl.String,
                "action": pl.String,
                "xid_table": pl.Boolean,
                "generic": pl.Boolean,
                "implied_wait_s": pl.Int64,
                "source": pl.String,
                "example": pl.String,
            },
        ).with_row_index("entry"),
        xids=pl.DataFrame(
            [{"per_process": False, **entry} for entry in xid_rows],
            schema={
                "code": pl.Int32,
                "mnemonic": pl.String,
                "nvidia_action": pl.String,
                "kind": pl.String,
                "severity": pl.String,
                "action": pl.String,
                "per_process": pl.Boolean,
            },
        ),
        exit_codes=pl.DataFrame(
            data.get("exit_code", []),
            schema={"code": pl.Int32, "meaning": pl.String, "source": pl.String},
        ),
        sxids=pl.DataFrame(data.get("sxid", []), schema=_schema(_SXID_KEYS)),
        nvlink5=pl.DataFrame(data.get("nvlink5", []), schema=_schema(_NVLINK5_KEYS)).with_columns(
            pl.col("unit").str.to_uppercase()
        ),
        recovery=pl.DataFrame(
            data.get("recovery", []), schema=_schema(_RECOVERY_KEYS)
        ).with_columns(pl.col("recovery").str.to_lowercase()),
    )


def read_catalogue(path: Path) -> Catalogue:
    """A catalogue from a TOML file, with one-line errors."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise CatalogueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path}: invalid TOML ({exc})") from None
    return parse_catalogue(data)


BUILTIN_FILES = ("signatures.toml", "sxids.toml", "nvlink5.toml")
"""The built-in catalogue's files: the signatures with the Xid and exit-code tables, NVIDIA's
SXid catalogue, NVIDIA's NVLink5 (Xid 144-150) decode table with Xid 154's recovery actions."""


@functools.cache
def builtin_catalogue() -> Catalogue:
    """The catalogue shipped in the package (loaded once per process)."""
    data: dict[str, list[Any]] = {}
    for name in BUILTIN_FILES:
        text = resources.files("medic.parse").joinpath(name).read_text()
        for table, rows in tomllib.loads(text).items():
            data.setdefault(table, []).extend(rows)
    return parse_catalogue(data)


def site_catalogue(extra: Sequence[str | Path]) -> Catalogue:
    """The built-in catalogue extended by a site's files (``[parsers.signatures] extra``), in
    order: a later file's entries are tried before an earlier one's. Errors name the file."""
    catalogue = builtin_catalogue()
    for path in extra:
        try:
            catalogue = catalogue.extended(read_catalogue(Path(path)))
        except CatalogueError as exc:
            message = str(exc)
            raise CatalogueError(
                message if message.startswith(f"{path}:") else f"{path}: {message}"
            ) from None
    return catalogue
