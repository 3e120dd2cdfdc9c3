"""A local VictoriaLogs for tests: the server as v1.26.0 behaves, over real sockets.

VictoriaLogs cannot be installed from our package registries, so this server stands in for it.
Its behaviour was observed against a running v1.26.0 server and read in its source
(VictoriaMetrics/VictoriaLogs ``app/vlselect/logsql/logsql.go``, ``lib/logstorage/``, and
``lib/httpserver`` wrapping every handler in klauspost ``gzhttp`` at level 1); see
``docs/victorialogs.md``. What it keeps faithful:

* ``POST /insert/jsonline``: ``_stream_fields``, ``_msg_field``, ``_time_field`` (args or
  ``VL-*`` headers); nested JSON flattened with ``.``; values become strings; empty values are
  absent; invalid lines skipped, ``400 cannot process jsonline request`` only when every line
  failed; a form-urlencoded body is eaten: ``200`` and nothing stored; non-POST ``405``;
  replies are ``application/json``.
* Tenants (``AccountID``/``ProjectID`` headers) are isolated; ``_stream_id`` is 8 hex account +
  8 hex project + 32 hex hash of ``_stream``.
* **Visibility**: a row is searchable ``searchable_delay_s`` (1 s) after it was acknowledged;
  ``/internal/force_flush`` makes every row searchable at once.
* **Durability**: ``crash()`` is a kill -9: the rows acknowledged in the last ``crash_loss_s``
  (5 s) are lost, connections are cut and nothing listens until ``up()``.
* ``/select/logsql/query``: GET args or POST form; ``start``/``end`` (RFC3339 to the ns, or
  Unix time chosen by magnitude; ``end`` widened to the end of its unit); rows come **grouped
  by stream**, not sorted by time across streams; ``limit=N`` answers the N newest rows sorted
  ascending; no match is ``200`` with an empty body; ``application/stream+json``; keys
  ``_time, _stream_id, _stream, _msg`` then the rest; ``_time`` is RFC3339 with trailing zeros
  trimmed; bad queries ``400 text/plain``.
* ``/select/logsql/tail``: ``start_offset`` (5s), ``offset`` (1s), ``refresh_interval`` (1s),
  each at least 1 ms; first window ``[now-offset-start_offset, now-offset]``, then every
  refresh ``[prev_end-5s, now-offset]``; per ``_stream_id`` rows with ``_time <=`` the last
  sent are dropped, so a row that becomes searchable more than ~5 s + offset after its
  ``_time`` is **never tailed**; each batch sorted by ``_time``; ``application/x-ndjson``; no
  heartbeat; ``sort``/``stats``/``uniq``/``top``/``limit``/``offset`` pipes are ``400 ...
  cannot be used in live tailing``; a ``fields`` pipe without ``_time`` answers 200 and then
  aborts the chunked body.
* ``/select/logsql/hits``: pipes dropped, rows counted per ``_time`` bucket of ``step``
  (epoch-aligned) and per value of each ``field`` arg,
  ``{"hits":[{"fields":{},"timestamps":[...],"values":[...],"total":N}]}``.
* ``extra_filters`` (a LogsQL filter ANDed to ``query``) on every select endpoint.
* **Transfer**: a client that sends ``Accept-Encoding: gzip`` gets answers of 1 KiB or more
  gzipped; a compressed tail sends **no response headers** until its first row exists. An
  answer that ends within 2 KiB (after compression) carries ``Content-Length``; longer ones
  are chunked in **small pieces**: about 2 KiB uncompressed, and a compressor flush about
  every 10 KiB of rows when gzipped, cut anywhere in a line.

LogsQL is the subset medic sends and tests use: ``*``, words and ``"phrases"`` in ``_msg``,
``field:word``, ``field:="exact"``, ``field:in("a","b")``, ``{k="v",k2=~"re"}``,
``_stream_id:<hex>``, ``_stream_id:in(<hex>, <hex>)``, AND by juxtaposition, and the pipes
``fields``, ``sort by (_time)``, ``limit``. Anything else is answered like a parse error.

Time: every time the server reads (receive time, tail windows, visibility, the crash window) is
``clock.now_ns()``; ``clock.advance(300)`` jumps five minutes ahead at once, so an outage, a
backlog or late shippers take seconds in a test. Hand the same clock to the client.

Faults: ``disconnect_tails()`` cuts every open tail mid-stream; ``down()``/``up()`` make the
server unreachable and back; ``crash()`` as above; ``answer_next(...)`` answers the next requests
of a path with a given status, body and Content-Type (an HTML page, JSON of the wrong shape);
``break_next_query()`` appends an error text after the first bytes of a query answer and
aborts it.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import hashlib
import json
import random
import re
import socket
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NS = 1_000_000_000
TAIL_OFFSET_NS = 5 * NS
TAIL_FORBIDDEN_PIPES = ("sort", "stats", "uniq", "top", "limit", "offset")
GZIP_MIN_BYTES = 1024
"""gzhttp's DefaultMinSize: shorter answers go out uncompressed."""
UNCHUNKED_BYTES = 2048
"""Go's net/http buffer: an answer that ends within it gets a Content-Length."""
PIECE_BYTES = 2048
"""Median uncompressed piece of a streamed answer (57,561 pieces for a 400k-row read)."""
GZIP_PIECE_BYTES = 10240
"""Median decoded piece of a gzipped streamed answer (10,619 pieces for the same read)."""
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


class QueryError(ValueError):
    pass


class Clock:
    """The server's wall clock, which a test may jump forward (time compression)."""

    def __init__(self) -> None:
        self.offset_ns = 0

    def now_ns(self) -> int:
        return time.time_ns() + self.offset_ns

    def advance(self, seconds: float) -> None:
        self.offset_ns += round(seconds * NS)


def format_time(ns: int) -> str:
    """RFC3339 UTC with trailing zeros of the fraction trimmed, as VictoriaLogs writes it."""
    seconds, frac = divmod(ns, NS)
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        stamp += "." + f"{frac:09d}".rstrip("0")
    return stamp + "Z"


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?)?"
    r"(Z|[+-]\d{2}:\d{2})$"
)


def parse_time(text: str, now_ns: int | None = None) -> tuple[int, int]:
    """(ns, precision in ns) of a VictoriaLogs time argument."""
    text = text.strip()
    if text == "now":
        return time.time_ns() if now_ns is None else now_ns, 1
    if re.fullmatch(r"\d+(\.\d+)?", text):
        value = float(text) if "." in text else int(text)
        magnitude = int(value)
        if magnitude < 10**10:
            scale = NS
        elif magnitude < 10**13:
            scale = 10**6
        elif magnitude < 10**16:
            scale = 10**3
        else:
            scale = 1
        return round(value * scale), scale
    match = _RFC3339.match(text)
    if not match:
        raise ValueError(f"cannot parse {text!r} as RFC3339 or Unix time")
    year, month, day, hour, minute, second, frac, zone = match.groups()
    base = dt.datetime(
        int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0)
    )
    offset = dt.timedelta(0)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        offset = sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    seconds = int((base - offset).replace(tzinfo=dt.UTC).timestamp())
    ns = seconds * NS
    if frac:
        ns += int(frac.ljust(9, "0"))
        precision = 10 ** (9 - len(frac))
    elif second is not None:
        precision = NS
    elif minute is not None:
        precision = 60 * NS
    elif hour is not None:
        precision = 3600 * NS
    else:
        precision = 86400 * NS
    return ns, precision


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration_ms(text: str) -> float:
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text) * 1000
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"cannot parse duration {text!r}")
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return sum(float(n) * scale[u] for n, u in parts)


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            out.update(flatten(item, f"{name}."))
        elif item is None:
            continue
        elif isinstance(item, str):
            if item:
                out[name] = item
        else:
            text = json.dumps(item) if isinstance(item, list | bool) else str(item)
            out[name] = text
    return out


@dataclass
class Row:
    time_ns: int
    seq: int
    tenant: tuple[int, int]
    stream_id: str
    stream: str
    fields: dict[str, str]
    received_ns: int
    """When the server acknowledged the row (its clock)."""
    searchable_ns: int = 0
    _lines: dict[tuple[str, ...] | None, bytes] = field(default_factory=dict, repr=False)

    def value(self, name: str) -> str:
        if name == "_time":
            return format_time(self.time_ns)
        if name == "_stream_id":
            return self.stream_id
        if name == "_stream":
            return self.stream
        return self.fields.get(name, "")

    def line(self, selected: tuple[str, ...] | None) -> bytes:
        cached = self._lines.get(selected)
        if cached is None:
            if selected is None:
                names = ["_time", "_stream_id", "_stream", "_msg"] + [
                    n for n in self.fields if n != "_msg"
                ]
            else:
                names = list(selected)
            obj = {name: self.value(name) for name in names}
            cached = self._lines[selected] = (
                json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
            ).encode()
        return cached


@dataclass
class Query:
    filters: list[Callable[[Row], bool]]
    pipes: list[tuple[str, Any]]
    text: str

    @property
    def selected(self) -> tuple[str, ...] | None:
        chosen = None
        for name, arg in self.pipes:
            if name == "fields":
                chosen = tuple(arg)
        return chosen

    def matches(self, row: Row) -> bool:
        return all(f(row) for f in self.filters)


_TOKEN = re.compile(
    r"""\s*(?:
    (?P<stream>\{[^}]*\})
  | (?P<infield>[\w.]+):in\((?P<inlist>[^)]*)\)
  | (?P<field>[\w.]+):(?P<exact>=)?(?P<value>"(?:[^"\\]|\\.)*"|[^\s()"|]+)
  | (?P<phrase>"(?:[^"\\]|\\.)*")
  | (?P<star>\*)
  | (?P<word>[^\s|"{}()]+)
)""",
    re.VERBOSE,
)


def _word_in(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def _stream_filter(text: str) -> Callable[[Row], bool]:
    inner = text[1:-1].strip()
    tests: list[Callable[[dict[str, str]], bool]] = []
    for part in filter(None, (p.strip() for p in inner.split(","))):
        match = re.fullmatch(r'([\w.]+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', part)
        if not match:
            raise QueryError(f"cannot parse stream filter {text}")
        name, op, raw = match.groups()
        value = json.loads(f'"{raw}"')

        def test(
            labels: dict[str, str], name: str = name, op: str = op, value: str = value
        ) -> bool:
            got = labels.get(name, "")
            if op == "=":
                return got == value
            if op == "!=":
                return got != value
            found = re.fullmatch(value, got) is not None
            return found if op == "=~" else not found

        tests.append(test)

    def check(row: Row) -> bool:
        labels = dict(re.findall(r'([\w.]+)="((?:[^"\\]|\\.)*)"', row.stream))
        return all(t(labels) for t in tests)

    return check


def parse_query(text: str) -> Query:
    parts = _split_pipes(text)
    filters: list[Callable[[Row], bool]] = []
    source = parts[0]
    pos = 0
    while pos < len(source):
        if not source[pos:].strip():
            break
        match = _TOKEN.match(source, pos)
        if not match or match.end() == pos:
            raise QueryError(f"cannot parse query [{text}]: unexpected token at {source[pos:]!r}")
        pos = match.end()
        if match["stream"]:
            filters.append(_stream_filter(match["stream"]))
        elif match["infield"]:
            filters.append(_in_filter(match["infield"], match["inlist"], text))
        elif match["field"]:
            filters.append(_field_filter(match["field"], bool(match["exact"]), match["value"]))
        elif match["phrase"]:
            filters.append(_phrase_filter(json.loads(match["phrase"])))
        elif match["word"]:
            if match["word"] in ("AND", "OR", "NOT"):
                raise QueryError(f"cannot parse query [{text}]: {match['word']} is not supported")
            filters.append(_word_filter(match["word"]))
    pipes = [_parse_pipe(p.strip(), text) for p in parts[1:]]
    return Query(filters, pipes, text)


def _phrase_filter(phrase: str) -> Callable[[Row], bool]:
    return lambda row: phrase in row.fields.get("_msg", "")


def _word_filter(word: str) -> Callable[[Row], bool]:
    return lambda row: _word_in(word, row.fields.get("_msg", ""))


def _split_pipes(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "|" and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _in_filter(name: str, raw: str, text: str) -> Callable[[Row], bool]:
    try:
        items = [p.strip() for p in raw.split(",") if p.strip()]
        values = {json.loads(p) if p.startswith('"') else p for p in items}
    except ValueError:
        raise QueryError(f"cannot parse query [{text}]: bad in(...) list") from None
    return lambda row: row.value(name) in values


def _field_filter(name: str, exact: bool, raw: str) -> Callable[[Row], bool]:
    value = json.loads(raw) if raw.startswith('"') else raw
    if exact:
        return lambda row: row.value(name) == value
    if name == "_stream_id":
        return lambda row: row.stream_id == value
    if value == "*":
        return lambda row: row.value(name) != ""
    return lambda row: _word_in(value, row.value(name))


def _parse_pipe(text: str, query: str) -> tuple[str, Any]:
    name = text.split(" ", 1)[0] if text else ""
    if name == "fields":
        names = [n.strip().strip('"`') for n in text[len("fields") :].split(",")]
        if not all(names):
            raise QueryError(f"cannot parse query [{query}]: empty field name in fields pipe")
        return "fields", names
    if re.fullmatch(r"sort by \(\s*_time\s*(desc)?\s*\)", text):
        return "sort", text.endswith("desc)")
    if match := re.fullmatch(r"limit (\d+)", text):
        return "limit", int(match[1])
    if name in ("stats", "uniq", "top", "offset"):
        return name, text
    raise QueryError(f"cannot parse query [{query}]: unknown pipe {text!r}")


class Store:
    """Rows of every tenant, kept sorted by (_time, arrival)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: list[tuple[int, int]] = []
        self.rows: list[Row] = []
        self.seq = 0

    def add(self, rows: list[Row], searchable_ns: int) -> None:
        with self.lock:
            for row in rows:
                row.seq = self.seq
                row.searchable_ns = searchable_ns
                self.seq += 1
                key = (row.time_ns, row.seq)
                if not self.keys or key > self.keys[-1]:
                    self.keys.append(key)
                    self.rows.append(row)
                else:
                    index = bisect.bisect(self.keys, key)
                    self.keys.insert(index, key)
                    self.rows.insert(index, row)

    def select(
        self, tenant: tuple[int, int], query: Query, start: int, end: int, now_ns: int
    ) -> list[Row]:
        """Matching searchable rows with ``start <= _time <= end``, in time order."""
        with self.lock:
            lo = bisect.bisect_left(self.keys, (start, -1))
            hi = bisect.bisect_right(self.keys, (end, self.seq))
            candidates = self.rows[lo:hi]
        return [
            r
            for r in candidates
            if r.tenant == tenant and r.searchable_ns <= now_ns and query.matches(r)
        ]

    def flush(self) -> None:
        with self.lock:
            for row in self.rows:
                row.searchable_ns = 0

    def lose_since(self, received_ns: int) -> int:
        """Forget the rows received at or after ``received_ns``; how many were lost."""
        with self.lock:
            before = len(self.rows)
            self.rows = [r for r in self.rows if r.received_ns < received_ns]
            self.keys = [(r.time_ns, r.seq) for r in self.rows]
        return before - len(self.rows)


def stream_id(tenant: tuple[int, int], stream: str) -> str:
    digest = hashlib.md5(stream.encode(), usedforsecurity=False).hexdigest()
    return f"{tenant[0]:08x}{tenant[1]:08x}{digest}"


def make_row(
    record: Mapping[str, Any],
    tenant: tuple[int, int],
    stream_fields: Iterable[str],
    msg_fields: Iterable[str] = ("_msg",),
    time_fields: Iterable[str] = ("_time",),
    now_ns: int | None = None,
) -> Row:
    """One stored row from an ingested JSON object, as /insert/jsonline builds it at ``now_ns``
    (the server's receive time, also the row's time when it has none)."""
    values = flatten(record)
    received = time.time_ns() if now_ns is None else now_ns
    time_ns = received
    for name in time_fields:
        raw = values.pop(name, None)
        if raw not in (None, "", "0", "-"):
            time_ns = parse_time(str(raw))[0]
            break
    for name in msg_fields:
        if values.get(name):
            values["_msg"] = values.pop(name)
            break
    else:
        values.setdefault("_msg", "missing _msg field; see https://docs.victoriametrics.com/")
    labels = {n: values[n] for n in sorted(stream_fields) if n in values}
    stream = "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"
    return Row(time_ns, 0, tenant, stream_id(tenant, stream), stream, values, received)


@dataclass
class Fault:
    prefix: str
    status: int
    body: bytes
    content_type: str
    remaining: int


class Encoder:
    """One answer's body on the wire: gzip when asked for, cut into the pieces (HTTP chunks)
    the real server sends."""

    def __init__(self, gzip: bool, rng: random.Random) -> None:
        self.gzip = gzip
        self.rng = rng
        self._zip = zlib.compressobj(1, zlib.DEFLATED, 31) if gzip else None

    def _size(self, median: int) -> int:
        return self.rng.randint(median // 2, median * 3 // 2)

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """``data`` as the pieces to send, each flushed on its own."""
        if self._zip is None:
            pos = 0
            while pos < len(data):
                size = self._size(PIECE_BYTES)
                yield data[pos : pos + size]
                pos += size
            return
        pos = 0
        while pos < len(data):
            size = self._size(GZIP_PIECE_BYTES)
            piece = self._zip.compress(data[pos : pos + size]) + self._zip.flush(zlib.Z_SYNC_FLUSH)
            pos += size
            if piece:
                yield piece

    def end(self) -> bytes:
        return self._zip.flush() if self._zip is not None else b""


class VictoriaLogsServer:
    """The server: ``with VictoriaLogsServer() as vl: ... vl.url ...``."""

    def __init__(
        self,
        searchable_delay_s: float = 1.0,
        crash_loss_s: float = 5.0,
        clock: Clock | None = None,
        port: int = 0,
        seed: int = 0,
    ) -> None:
        self.store = Store()
        self.clock = clock or Clock()
        self.searchable_delay_s = searchable_delay_s
        self.crash_loss_s = crash_loss_s
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.faults: list[Fault] = []
        self.broken_queries = 0
        self.tails: set[socket.socket] = set()
        self.connections: set[socket.socket] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.lock = threading.Lock()
        self._port = port
        self._listening: tuple[ThreadingHTTPServer, threading.Thread] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> VictoriaLogsServer:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def listening(self) -> bool:
        return self._listening is not None

    def up(self) -> None:
        """Listen (again, on the same port after ``down()`` or ``crash()``)."""
        handler = type("Handler", (_Handler,), {"vl": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        httpd.daemon_threads = True
        self._port = int(httpd.server_address[1])
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        self._listening = (httpd, thread)

    def down(self) -> None:
        """Stop listening and cut every open connection: the server is unreachable."""
        if self._listening is None:
            return
        httpd, thread = self._listening
        self._listening = None
        httpd.shutdown()
        httpd.server_close()
        with self.lock:
            open_now = list(self.connections)
        self._cut(open_now)
        thread.join()

    def crash(self) -> int:
        """kill -9: lose the rows acknowledged in the last ``crash_loss_s``, go down; how many
        rows were lost."""
        lost = self.store.lose_since(self.clock.now_ns() - round(self.crash_loss_s * NS))
        self.down()
        return lost

    def stop(self) -> None:
        self.stopping.set()
        self.down()

    def searchable_from(self, now_ns: int) -> int:
        return now_ns + round(self.searchable_delay_s * NS)

    def ingest(
        self,
        records: Iterable[Mapping[str, Any]],
        stream_fields: Iterable[str] = (),
        tenant: tuple[int, int] = (0, 0),
    ) -> int:
        """Store records as /insert/jsonline would (``_time`` and ``_msg`` fields)."""
        fields = tuple(stream_fields)
        now = self.clock.now_ns()
        rows = [make_row(r, tenant, fields, now_ns=now) for r in records]
        self.store.add(rows, self.searchable_from(now))
        return len(rows)

    def flush(self) -> None:
        """What ``/internal/force_flush`` does: every row searchable now."""
        self.store.flush()

    def disconnect_tails(self) -> int:
        """Cut every open tail connection without ending its chunked body."""
        with self.lock:
            tails = list(self.tails)
        return self._cut(tails)

    def _cut(self, connections: list[socket.socket]) -> int:
        """Shut ``connections`` down mid-answer (a tail among them is no longer open)."""
        with self.lock:
            self.tails.difference_update(connections)
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(connections)

    def open_tails(self) -> int:
        with self.lock:
            return len(self.tails)

    def answer_next(
        self,
        prefix: str,
        status: int,
        body: str | bytes,
        content_type: str = TEXT,
        count: int = 1,
    ) -> None:
        """Answer the next ``count`` requests whose path starts with ``prefix`` so."""
        data = body.encode() if isinstance(body, str) else body
        with self.lock:
            self.faults.append(Fault(prefix, status, data, content_type, count))

    def break_next_query(self, count: int = 1) -> None:
        with self.lock:
            self.broken_queries += count

    def take_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if path.startswith(fault.prefix) and fault.remaining > 0:
                    fault.remaining -= 1
                    return fault
        return None

    def take_broken_query(self) -> bool:
        with self.lock:
            if self.broken_queries:
                self.broken_queries -= 1
                return True
        return False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    vl: VictoriaLogsServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        with self.vl.lock:
            self.vl.connections.add(self.connection)

    def finish(self) -> None:
        with self.vl.lock:
            self.vl.connections.discard(self.connection)
            self.vl.tails.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    @property
    def gzip(self) -> bool:
        accepted = self.headers.get("Accept-Encoding") or ""
        return "gzip" in [p.split(";")[0].strip() for p in accepted.split(",")]

    def _dispatch(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        repeated = urllib.parse.parse_qs(parsed.query)
        args = {k: v[-1] for k, v in repeated.items()}
        body = b""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            body = self.rfile.read(length)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        path = parsed.path
        if path.startswith("/select/") and content_type == "application/x-www-form-urlencoded":
            form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
            args.update({k: v[-1] for k, v in form.items()})
            for name, values in form.items():
                repeated.setdefault(name, []).extend(values)
        with self.vl.lock:
            self.vl.requests.append((path, dict(args)))
        fault = self.vl.take_fault(path)
        if fault is not None:
            self._answer(fault.status, fault.body, fault.content_type)
            return
        try:
            tenant = (
                int(self.headers.get("AccountID") or 0),
                int(self.headers.get("ProjectID") or 0),
            )
        except ValueError:
            self._error("cannot obtain tenantID: cannot parse AccountID/ProjectID")
            return
        if path == "/health":
            self._answer(200, b"OK", "text/plain")
        elif path == "/internal/force_flush":
            self.vl.flush()
            self._answer(200, b"", "text/plain")
        elif path == "/insert/jsonline":
            self._insert(args, body, content_type, tenant)
        elif path == "/select/logsql/query":
            self._query(args, tenant)
        elif path == "/select/logsql/tail":
            self._tail(args, tenant)
        elif path == "/select/logsql/hits":
            self._hits(args, tenant, repeated.get("field", []))
        else:
            self._error(f"unsupported path requested: {path!r}", 404)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        """A whole answer: gzipped when asked for and long enough, with Content-Length when
        it ends within Go's buffer, else chunked in pieces."""
        encoder = Encoder(self.gzip and len(body) >= GZIP_MIN_BYTES, self.vl.rng)
        wire = [*encoder.pieces(body), encoder.end()]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoder.gzip:
            self.send_header("Content-Encoding", "gzip")
        total = sum(len(p) for p in wire)
        if total <= UNCHUNKED_BYTES:
            self.send_header("Content-Length", str(total))
            self.end_headers()
            self.wfile.write(b"".join(wire))
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in wire:
            self._chunk(piece)
        self.wfile.write(b"0\r\n\r\n")

    def _error(self, message: str, status: int = 400) -> None:
        self._answer(status, (message + "\n").encode(), TEXT)

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _common(self, args: dict[str, str]) -> tuple[Query, int, int] | None:
        try:
            query = parse_query(args.get("query", ""))
            if args.get("extra_filters"):
                query.filters.extend(parse_query(args["extra_filters"]).filters)
        except QueryError as exc:
            self._error(str(exc))
            return None
        start, end = -(2**63), 2**63 - 1
        for name in ("start", "end"):
            if args.get(name):
                try:
                    value, precision = parse_time(args[name], self.vl.clock.now_ns())
                except ValueError as exc:
                    self._error(f"cannot parse {name}={args[name]}: {exc}")
                    return None
                if name == "start":
                    start = value
                else:
                    end = value + precision - 1
        return query, start, end

    def _insert(
        self, args: dict[str, str], body: bytes, content_type: str, tenant: tuple[int, int]
    ) -> None:
        if self.command != "POST":
            self._error("unsupported method; only POST is allowed", 405)
            return
        if content_type == "application/x-www-form-urlencoded":
            self._answer(200, b"", JSON)
            return

        def arg(name: str, header: str, default: str) -> list[str]:
            raw = args.get(name) or self.headers.get(header) or default
            return [p for p in raw.split(",") if p]

        stream_fields = arg("_stream_fields", "VL-Stream-Fields", "")
        msg_fields = arg("_msg_field", "VL-Msg-Field", "_msg")
        time_fields = arg("_time_field", "VL-Time-Field", "_time")
        rows, errors = [], []
        now = self.vl.clock.now_ns()
        for line in body.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
                rows.append(make_row(record, tenant, stream_fields, msg_fields, time_fields, now))
            except ValueError as exc:
                errors.append(str(exc))
        if errors and not rows:
            self._error(f"cannot process jsonline request; error: cannot parse JSON: {errors[0]}")
            return
        self.vl.store.add(rows, self.vl.searchable_from(now))
        self._answer(200, b"", JSON)

    def _query(self, args: dict[str, str], tenant: tuple[int, int]) -> None:
        common = self._common(args)
        if common is None:
            return
        query, start, end = common
        for name, _ in query.pipes:
            if name in ("stats", "uniq", "top", "offset"):
                self._error(f"cannot parse query [{query.text}]: {name} is not supported here")
                return
        limit = None
        if args.get("limit"):
            try:
                limit = int(args["limit"])
                if limit < 0:
                    raise ValueError
            except ValueError:
                self._error(f"cannot parse limit={args['limit']}: not a non-negative integer")
                return
        rows = self.vl.store.select(tenant, query, start, end, self.vl.clock.now_ns())
        rows.sort(key=lambda r: r.stream_id)  # stable: each stream's rows stay in time order
        for name, arg in query.pipes:
            if name == "sort":
                rows.sort(key=lambda r: r.time_ns, reverse=bool(arg))
            elif name == "limit":
                rows = rows[: int(arg)]
        if limit:
            rows = sorted(rows, key=lambda r: r.time_ns)[-limit:]
        data = b"".join(r.line(query.selected) for r in rows)
        if not self.vl.take_broken_query():
            self._answer(200, data, "application/stream+json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/stream+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(data[: max(1, len(data) // 2)] + b"\ncannot execute query: broken\n")
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _hits(self, args: dict[str, str], tenant: tuple[int, int], fields: list[str]) -> None:
        common = self._common(args)
        if common is None:
            return
        query, start, end = common
        query.pipes = []  # hits counts the stored rows: pipes are dropped
        try:
            step = round(parse_duration_ms(args.get("step") or "1d") * 1_000_000)
        except ValueError as exc:
            self._error(f"cannot parse 'step' arg: {exc}")
            return
        if step <= 0:
            self._error("'step' must be bigger than zero")
            return
        series: dict[str, dict[int, int]] = {}
        for row in self.vl.store.select(tenant, query, start, end, self.vl.clock.now_ns()):
            labels = json.dumps({f: row.value(f) for f in fields}, separators=(",", ":"))
            buckets = series.setdefault(labels, {})
            bucket = row.time_ns - row.time_ns % step
            buckets[bucket] = buckets.get(bucket, 0) + 1
        hits = [
            {
                "fields": json.loads(labels),
                "timestamps": [format_time(t) for t in sorted(counts)],
                "values": [counts[t] for t in sorted(counts)],
                "total": sum(counts.values()),
            }
            for labels, counts in sorted(series.items())
        ]
        self._answer(200, json.dumps({"hits": hits}, separators=(",", ":")).encode(), JSON)

    def _tail(self, args: dict[str, str], tenant: tuple[int, int]) -> None:
        common = self._common(args)
        if common is None:
            return
        query, _, _ = common
        for name, _ in query.pipes:
            if name in TAIL_FORBIDDEN_PIPES:
                self._error(
                    f"the query [{query.text}] cannot be used in live tailing; see "
                    "https://docs.victoriametrics.com/victorialogs/querying/#live-tailing"
                )
                return
        durations = {}
        for name, default in (("refresh_interval", 1000), ("start_offset", 5000), ("offset", 1000)):
            raw = args.get(name)
            try:
                value = parse_duration_ms(raw) if raw else float(default)
            except ValueError as exc:
                self._error(f"cannot parse {name}={raw}: {exc}")
                return
            if value < 1:
                self._error(f"{name}={raw} is out of allowed range [1ms, ...]")
                return
            durations[name] = round(value * 1_000_000)
        selected = query.selected
        encoder = Encoder(self.gzip, self.vl.rng)
        if not encoder.gzip or (selected is not None and "_time" not in selected):
            self._tail_headers(encoder)
        if selected is not None and "_time" not in selected:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        with self.vl.lock:
            self.vl.tails.add(self.connection)
        try:
            self._tail_loop(query, tenant, selected, durations, encoder)
        except OSError:
            pass
        finally:
            self.close_connection = True

    def _tail_headers(self, encoder: Encoder) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        if encoder.gzip:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _tail_loop(
        self,
        query: Query,
        tenant: tuple[int, int],
        selected: tuple[str, ...] | None,
        durations: dict[str, int],
        encoder: Encoder,
    ) -> None:
        clock = self.vl.clock
        refresh = durations["refresh_interval"] / NS
        end = clock.now_ns() - durations["offset"]
        start = end - durations["start_offset"]
        last: dict[str, int] = {}
        started = not encoder.gzip
        while not self.vl.stopping.is_set():
            rows = self.vl.store.select(tenant, query, start, end, clock.now_ns())
            batch = [r for r in rows if r.time_ns > last.get(r.stream_id, -(2**63))]
            for row in batch:
                last[row.stream_id] = max(row.time_ns, last.get(row.stream_id, -(2**63)))
            if batch:
                if not started:  # gzhttp holds the headers back until the first bytes
                    self._tail_headers(encoder)
                    started = True
                for piece in encoder.pieces(b"".join(r.line(selected) for r in batch)):
                    self._chunk(piece)
            if self.vl.stopping.wait(refresh):
                break
            if self.connection not in self.vl.tails:
                raise OSError("disconnected")
            start = end - TAIL_OFFSET_NS
            end = clock.now_ns() - durations["offset"]
