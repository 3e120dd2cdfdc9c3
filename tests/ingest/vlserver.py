"""A local VictoriaLogs for tests, from v1.26.0's documented API (docs/victorialogs.md).

VictoriaLogs cannot be installed from our package registries, so this server stands in for it
over real sockets: HTTP/1.1, chunked NDJSON, the documented tail algorithm and the documented
errors. What it keeps faithful, with the note's wording:

* ``POST /insert/jsonline``: ``_stream_fields``, ``_msg_field``, ``_time_field`` (args or
  ``VL-*`` headers); nested JSON flattened with ``.``; values become strings; empty values are
  absent; invalid lines skipped, ``400 cannot process jsonline request`` only when every line
  failed; a form-urlencoded body is eaten: ``200`` and nothing stored; non-POST ``405``.
* Tenants (``AccountID``/``ProjectID`` headers) are isolated; ``_stream_id`` is 8 hex account +
  8 hex project + 32 hex hash of ``_stream``.
* ``/select/logsql/query``: GET args or POST form; ``start``/``end`` (RFC3339 to the ns, or
  Unix time chosen by magnitude; ``end`` widened to the end of its unit); ``limit=N`` answers
  the N newest rows sorted ascending; no match is ``200`` with an empty body;
  ``application/stream+json``; keys ``_time, _stream_id, _stream, _msg`` then the rest;
  ``_time`` is RFC3339 with trailing zeros trimmed; bad queries ``400 text/plain``.
* ``/select/logsql/tail``: ``start_offset`` (5s), ``offset`` (1s), ``refresh_interval`` (1s),
  each at least 1 ms; first window ``[now-offset-start_offset, now-offset]``, then every
  refresh ``[prev_end-5s, now-offset]``; per ``_stream_id`` rows with ``_time <=`` the last
  sent are dropped; each batch sorted by ``_time`` and flushed as one chunk;
  ``application/x-ndjson``; no heartbeat; ``sort``/``stats``/``uniq``/``top``/``limit``/
  ``offset`` pipes are ``400 ... cannot be used in live tailing``; a ``fields`` pipe without
  ``_time`` answers 200 and then aborts the chunked body.
* Rows become searchable ``flush_delay_s`` after they arrive (``/internal/force_flush``
  makes them searchable at once).

LogsQL is the subset medic sends and tests use: ``*``, words and ``"phrases"`` in ``_msg``,
``field:word``, ``field:="exact"``, ``field:in("a","b")``, ``{k="v",k2=~"re"}``,
``_stream_id:<hex>``, AND by juxtaposition, and the pipes ``fields``, ``sort by (_time)``,
``limit``. Anything else is answered like a parse error.

Faults for tests: ``disconnect_tails()`` cuts every open tail mid-stream, ``fail_next(...)``
answers the next requests of a path with a given status, ``break_next_query()`` appends an
error text after the first bytes of a query answer and aborts it.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import hashlib
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NS = 1_000_000_000
TAIL_OFFSET_NS = 5 * NS
TAIL_FORBIDDEN_PIPES = ("sort", "stats", "uniq", "top", "limit", "offset")


class QueryError(ValueError):
    pass


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


def parse_time(text: str) -> tuple[int, int]:
    """(ns, precision in ns) of a VictoriaLogs time argument."""
    text = text.strip()
    if text == "now":
        return time.time_ns(), 1
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
    searchable_at: float
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
            phrase = json.loads(match["phrase"])
            filters.append(lambda row, p=phrase: p in row.fields.get("_msg", ""))
        elif match["word"]:
            if match["word"] in ("AND", "OR", "NOT"):
                raise QueryError(f"cannot parse query [{text}]: {match['word']} is not supported")
            filters.append(lambda row, w=match["word"]: _word_in(w, row.fields.get("_msg", "")))
    pipes = [_parse_pipe(p.strip(), text) for p in parts[1:]]
    return Query(filters, pipes, text)


def _split_pipes(text: str) -> list[str]:
    parts, current, quoted = [], [], False
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
        values = set(json.loads(f"[{raw}]"))
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

    def add(self, rows: list[Row]) -> None:
        with self.lock:
            for row in rows:
                row.seq = self.seq
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
        self, tenant: tuple[int, int], query: Query, start: int, end: int, now: float
    ) -> list[Row]:
        with self.lock:
            lo = bisect.bisect_left(self.keys, (start, -1))
            hi = bisect.bisect_right(self.keys, (end, self.seq))
            candidates = self.rows[lo:hi]
        return [
            r
            for r in candidates
            if r.tenant == tenant and r.searchable_at <= now and query.matches(r)
        ]

    def flush(self) -> None:
        with self.lock:
            for row in self.rows:
                row.searchable_at = 0.0


def stream_id(tenant: tuple[int, int], stream: str) -> str:
    digest = hashlib.md5(stream.encode(), usedforsecurity=False).hexdigest()
    return f"{tenant[0]:08x}{tenant[1]:08x}{digest}"


def make_row(
    record: Mapping[str, Any],
    tenant: tuple[int, int],
    stream_fields: Iterable[str],
    msg_fields: Iterable[str] = ("_msg",),
    time_fields: Iterable[str] = ("_time",),
    searchable_at: float = 0.0,
) -> Row:
    """One stored row from an ingested JSON object, as /insert/jsonline builds it."""
    values = flatten(record)
    time_ns = time.time_ns()
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
    return Row(time_ns, 0, tenant, stream_id(tenant, stream), stream, values, searchable_at)


@dataclass
class Fault:
    prefix: str
    status: int
    body: str
    remaining: int


class VictoriaLogsServer:
    """The server: ``with VictoriaLogsServer() as vl: ... vl.url ...``."""

    def __init__(self, flush_delay_s: float = 0.0, port: int = 0) -> None:
        self.store = Store()
        self.flush_delay_s = flush_delay_s
        self.stopping = threading.Event()
        self.faults: list[Fault] = []
        self.broken_queries = 0
        self.tails: set[socket.socket] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"vl": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> VictoriaLogsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.disconnect_tails()
        self.httpd.shutdown()
        self.httpd.server_close()

    def ingest(
        self,
        records: Iterable[Mapping[str, Any]],
        stream_fields: Iterable[str] = (),
        tenant: tuple[int, int] = (0, 0),
    ) -> int:
        """Store records as /insert/jsonline would (``_time`` and ``_msg`` fields)."""
        fields = tuple(stream_fields)
        at = time.monotonic() + self.flush_delay_s
        rows = [make_row(r, tenant, fields, searchable_at=at) for r in records]
        self.store.add(rows)
        return len(rows)

    def disconnect_tails(self) -> int:
        """Cut every open tail connection without ending its chunked body."""
        with self.lock:
            tails = list(self.tails)
            self.tails.clear()
        for sock in tails:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(tails)

    def open_tails(self) -> int:
        with self.lock:
            return len(self.tails)

    def fail_next(self, prefix: str, status: int, body: str, count: int = 1) -> None:
        with self.lock:
            self.faults.append(Fault(prefix, status, body, count))

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

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        args = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query).items()}
        body = b""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            body = self.rfile.read(length)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        path = parsed.path
        if path.startswith("/select/") and content_type == "application/x-www-form-urlencoded":
            form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
            args.update({k: v[-1] for k, v in form.items()})
        with self.vl.lock:
            self.vl.requests.append((path, dict(args)))
        fault = self.vl.take_fault(path)
        if fault is not None:
            self._send(fault.status, fault.body.encode(), "text/plain; charset=utf-8")
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
            self._send(200, b"OK", "text/plain")
        elif path == "/internal/force_flush":
            self.vl.store.flush()
            self._send(200, b"", "text/plain")
        elif path == "/insert/jsonline":
            self._insert(args, body, content_type, tenant)
        elif path == "/select/logsql/query":
            self._query(args, tenant)
        elif path == "/select/logsql/tail":
            self._tail(args, tenant)
        else:
            self._send(404, f"unsupported path requested: {path!r}\n".encode(), "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, message: str, status: int = 400) -> None:
        self._send(status, (message + "\n").encode(), "text/plain; charset=utf-8")

    def _common(self, args: dict[str, str]) -> tuple[Query, int, int] | None:
        try:
            query = parse_query(args.get("query", ""))
        except QueryError as exc:
            self._error(str(exc))
            return None
        start, end = -(2**63), 2**63 - 1
        for name in ("start", "end"):
            if args.get(name):
                try:
                    value, precision = parse_time(args[name])
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
            self._send(200, b"", "text/plain")
            return

        def arg(name: str, header: str, default: str) -> list[str]:
            raw = args.get(name) or self.headers.get(header) or default
            return [p for p in raw.split(",") if p]

        stream_fields = arg("_stream_fields", "VL-Stream-Fields", "")
        msg_fields = arg("_msg_field", "VL-Msg-Field", "_msg")
        time_fields = arg("_time_field", "VL-Time-Field", "_time")
        rows, errors = [], []
        at = time.monotonic() + self.vl.flush_delay_s
        for line in body.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
                rows.append(make_row(record, tenant, stream_fields, msg_fields, time_fields, at))
            except ValueError as exc:
                errors.append(str(exc))
        if errors and not rows:
            self._error(f"cannot process jsonline request; error: cannot parse JSON: {errors[0]}")
            return
        self.vl.store.add(rows)
        self._send(200, b"", "text/plain")

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
        rows = self.vl.store.select(tenant, query, start, end, time.monotonic())
        for name, arg in query.pipes:
            if name == "sort":
                rows.sort(key=lambda r: r.time_ns, reverse=bool(arg))
            elif name == "limit":
                rows = rows[: int(arg)]
        if limit:
            rows = sorted(rows, key=lambda r: r.time_ns)[-limit:]
        selected = query.selected
        self.send_response(200)
        self.send_header("Content-Type", "application/stream+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        broken = self.vl.take_broken_query()
        data = b"".join(r.line(selected) for r in rows)
        if broken:
            self._chunk(data[: max(1, len(data) // 2)] + b"\ncannot execute query: broken\n")
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if data:
            self._chunk(data)
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

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
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        selected = query.selected
        if selected is not None and "_time" not in selected:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        with self.vl.lock:
            self.vl.tails.add(self.connection)
        try:
            self._tail_loop(query, tenant, selected, durations)
        except OSError:
            pass
        finally:
            with self.vl.lock:
                self.vl.tails.discard(self.connection)
            self.close_connection = True

    def _tail_loop(
        self,
        query: Query,
        tenant: tuple[int, int],
        selected: tuple[str, ...] | None,
        durations: dict[str, int],
    ) -> None:
        refresh = durations["refresh_interval"] / NS
        end = time.time_ns() - durations["offset"]
        start = end - durations["start_offset"]
        last: dict[str, int] = {}
        while not self.vl.stopping.is_set():
            rows = self.vl.store.select(tenant, query, start, end, time.monotonic())
            per_stream: dict[str, list[Row]] = {}
            for row in rows:
                per_stream.setdefault(row.stream_id, []).append(row)
            batch: list[Row] = []
            for sid, stream_rows in per_stream.items():
                stream_rows.sort(key=lambda r: r.time_ns)
                newer = [r for r in stream_rows if r.time_ns > last.get(sid, -(2**63))]
                if newer:
                    batch.extend(newer)
                    last[sid] = newer[-1].time_ns
            if batch:
                batch.sort(key=lambda r: r.time_ns)
                self._chunk(b"".join(r.line(selected) for r in batch))
            if self.vl.stopping.wait(refresh):
                break
            if self.connection not in self.vl.tails:
                raise OSError("disconnected")
            start = end - TAIL_OFFSET_NS
            end = time.time_ns() - durations["offset"]
