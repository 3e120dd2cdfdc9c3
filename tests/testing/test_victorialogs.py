"""The local VictoriaLogs keeps the behaviours observed on a real v1.26.0 server."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from medic.testing.victorialogs import Clock, VictoriaLogsServer, format_time

NS = 10**9


@pytest.fixture
def vl() -> Iterator[VictoriaLogsServer]:
    """Rows searchable at once: these tests are about formats, not timing."""
    with VictoriaLogsServer(searchable_delay_s=0.0) as server:
        yield server


@pytest.fixture
def real() -> Iterator[VictoriaLogsServer]:
    """Timing as the real server's, on a clock the test moves."""
    with VictoriaLogsServer(clock=Clock()) as server:
        yield server


def insert(vl: VictoriaLogsServer, lines: list[dict[str, object]], **params: str) -> httpx.Response:
    body = "\n".join(json.dumps(x) for x in lines).encode()
    return httpx.post(
        f"{vl.url}/insert/jsonline",
        params=params,
        content=body,
        headers={"Content-Type": "application/stream+json"},
    )


def query(vl: VictoriaLogsServer, **args: str) -> httpx.Response:
    return httpx.post(f"{vl.url}/select/logsql/query", data=args)


def test_jsonline_insert_and_query_answer_as_documented(vl: VictoriaLogsServer) -> None:
    response = insert(
        vl,
        [
            {
                "ts": "2026-11-29T17:20:38.100Z",
                "message": "job started",
                "job": "123",
                "step": "build",
                "meta": {"host": "runner-1"},
            },
            {
                "ts": "2026-11-29T17:20:38.300Z",
                "message": "error: test failed",
                "job": "123",
                "step": "test",
                "level": "error",
            },
        ],
        _stream_fields="job,step",
        _msg_field="message",
        _time_field="ts",
    )
    assert (response.status_code, response.content) == (200, b"")
    answer = query(vl, query="*", start="2026-11-29T17:20:38Z", end="2026-11-29T17:20:38Z")
    assert answer.headers["content-type"] == "application/stream+json"
    rows = sorted((json.loads(x) for x in answer.text.splitlines()), key=lambda r: r["_time"])
    assert list(rows[0])[:4] == ["_time", "_stream_id", "_stream", "_msg"]
    assert rows[0]["_time"] == "2026-11-29T17:20:38.1Z"
    assert rows[0]["_stream"] == '{job="123",step="build"}'
    assert rows[0]["meta.host"] == "runner-1"
    assert rows[0]["_stream_id"].startswith("0000000000000000") and len(rows[0]["_stream_id"]) == 48
    assert query(vl, query="nothing").content == b""


def test_insert_pitfalls_and_errors(vl: VictoriaLogsServer) -> None:
    form = httpx.post(f"{vl.url}/insert/jsonline", data={"_msg": "eaten"})
    assert (form.status_code, form.content) == (200, b"")
    assert query(vl, query="*").content == b""
    broken = insert(vl, [])  # empty body is fine
    assert broken.status_code == 200
    bad = httpx.post(
        f"{vl.url}/insert/jsonline",
        content=b"{not json\n",
        headers={"Content-Type": "application/stream+json"},
    )
    assert bad.status_code == 400
    assert bad.text.startswith("cannot process jsonline request")
    assert httpx.get(f"{vl.url}/insert/jsonline").status_code == 405


def test_limit_returns_the_newest_rows_ascending_and_end_covers_its_unit(
    vl: VictoriaLogsServer,
) -> None:
    vl.ingest([{"_time": f"2026-11-29T17:20:38.{i}Z", "_msg": f"m{i}"} for i in range(1, 6)])
    rows = [json.loads(x)["_msg"] for x in query(vl, query="*", limit="2").text.splitlines()]
    assert rows == ["m4", "m5"]
    within = query(vl, query="*", end="2026-11-29T17:20:38Z").text.splitlines()
    assert len(within) == 5


def test_query_errors_are_400_text(vl: VictoriaLogsServer) -> None:
    bad = query(vl, query="foo | sort by (")
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("text/plain")
    assert bad.text.startswith("cannot parse query [foo | sort by (]")
    assert query(vl, query="*", start="yesterday").text.startswith("cannot parse start=yesterday")


def test_tenants_are_isolated(vl: VictoriaLogsServer) -> None:
    vl.ingest([{"_msg": "a"}], tenant=(1, 2))
    assert httpx.get(f"{vl.url}/select/logsql/query", params={"query": "*"}).content == b""
    other = httpx.get(
        f"{vl.url}/select/logsql/query",
        params={"query": "*"},
        headers={"AccountID": "1", "ProjectID": "2"},
    )
    assert json.loads(other.text)["_stream_id"].startswith("0000000100000002")


def test_tail_rejects_what_it_cannot_tail(vl: VictoriaLogsServer) -> None:
    sorted_tail = httpx.post(f"{vl.url}/select/logsql/tail", data={"query": "* | sort by (_time)"})
    assert sorted_tail.status_code == 400
    assert "cannot be used in live tailing" in sorted_tail.text
    zero = httpx.post(f"{vl.url}/select/logsql/tail", data={"query": "*", "offset": "0"})
    assert zero.status_code == 400
    assert zero.text.startswith("offset=0 is out of allowed range")
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", f"{vl.url}/select/logsql/tail", data={"query": "* | fields _msg"}
        ) as no_time,
    ):
        assert no_time.status_code == 200
        no_time.read()


def test_tail_streams_each_row_once_per_stream_and_never_rows_late_by_more_than_5s(
    vl: VictoriaLogsServer,
) -> None:
    now = time.time_ns()
    vl.ingest([{"_time": str(now - 2 * 10**9), "_msg": "recent", "s": "a"}], stream_fields=["s"])
    with httpx.stream(
        "POST",
        f"{vl.url}/select/logsql/tail",
        data={"query": "*", "offset": "50ms", "refresh_interval": "50ms", "start_offset": "5s"},
        timeout=httpx.Timeout(5.0, read=None),
    ) as tail:
        assert tail.headers["content-type"] == "application/x-ndjson"
        lines = tail.iter_lines()
        assert json.loads(next(lines))["_msg"] == "recent"
        vl.ingest(
            [
                {"_time": str(time.time_ns() - 20 * 10**9), "_msg": "too late", "s": "b"},
                {"_time": str(time.time_ns() - 10**9), "_msg": "late but tailed", "s": "b"},
                {"_time": str(now - 3 * 10**9), "_msg": "older than a's last", "s": "a"},
                {"_time": str(time.time_ns()), "_msg": "fresh", "s": "a"},
            ],
            stream_fields=["s"],
        )
        got = [json.loads(next(lines))["_msg"] for _ in range(2)]
        assert got == ["late but tailed", "fresh"]
        vl.disconnect_tails()
        with pytest.raises(httpx.RemoteProtocolError):
            next(lines)


def test_time_is_written_with_trailing_zeros_trimmed() -> None:
    assert format_time(1_795_972_838_100_000_000) == "2026-11-29T17:20:38.1Z"
    assert format_time(1_795_972_838_000_000_000) == "2026-11-29T17:20:38Z"
    assert format_time(1_795_972_838_305_860_307) == "2026-11-29T17:20:38.305860307Z"


def rows_of(n: int, t0: int, streams: int = 4) -> list[dict[str, str]]:
    return [
        {"_time": str(t0 + i * 1000), "_msg": f"line {i} " + "x" * 200, "host": f"h{i % streams}"}
        for i in range(n)
    ]


def test_answers_are_gzipped_on_request_and_small_ones_carry_a_length(
    vl: VictoriaLogsServer,
) -> None:
    vl.ingest(rows_of(2000, time.time_ns() - 60 * NS), stream_fields=["host"])
    big = httpx.post(f"{vl.url}/select/logsql/query", data={"query": "*"})
    assert big.headers["content-encoding"] == "gzip"
    assert big.headers["transfer-encoding"] == "chunked" and "content-length" not in big.headers
    assert len(big.text.splitlines()) == 2000
    plain = httpx.post(
        f"{vl.url}/select/logsql/query",
        data={"query": "*"},
        headers={"Accept-Encoding": "identity"},
    )
    assert "content-encoding" not in plain.headers and plain.text == big.text
    small = query(vl, query="*", limit="1")
    assert "content-encoding" not in small.headers  # under gzhttp's 1 KiB minimum
    assert int(small.headers["content-length"]) == len(small.content)


def test_streamed_answers_come_in_small_pieces_cut_anywhere(vl: VictoriaLogsServer) -> None:
    vl.ingest(rows_of(4000, time.time_ns() - 60 * NS), stream_fields=["host"])
    for encoding, median in (("identity", 2048), ("gzip", 10240)):
        with httpx.stream(
            "POST",
            f"{vl.url}/select/logsql/query",
            data={"query": "*"},
            headers={"Accept-Encoding": encoding},
        ) as answer:
            pieces = list(answer.iter_bytes())
        sizes = [len(p) for p in pieces]
        assert 0.7 * median < statistics.median(sizes) < 1.3 * median, encoding
        assert sum(not p.endswith(b"\n") for p in pieces) > len(pieces) / 2


def test_query_rows_come_grouped_by_stream_not_by_time(vl: VictoriaLogsServer) -> None:
    vl.ingest(rows_of(40, time.time_ns() - 60 * NS), stream_fields=["host"])
    got = [json.loads(x) for x in query(vl, query="*").text.splitlines()]
    hosts = [r["host"] for r in got]
    assert hosts == sorted(hosts, key=lambda h: got[hosts.index(h)]["_stream_id"])
    assert len({h for i, h in enumerate(hosts) if i and hosts[i - 1] != h}) == 3
    assert [r["_time"] for r in got] != sorted(r["_time"] for r in got)


def test_rows_are_searchable_a_second_after_ingest(real: VictoriaLogsServer) -> None:
    real.ingest([{"_time": str(real.clock.now_ns() - NS), "_msg": "soon"}])
    assert query(real, query="*").content == b""
    real.clock.advance(1.0)
    assert json.loads(query(real, query="*").text)["_msg"] == "soon"
    real.ingest([{"_msg": "flushed"}])
    httpx.get(f"{real.url}/internal/force_flush")
    assert len(query(real, query="*").text.splitlines()) == 2


def test_a_crash_loses_the_last_five_seconds_of_acknowledged_rows(
    real: VictoriaLogsServer,
) -> None:
    url = real.url
    real.ingest([{"_msg": "durable"}])
    real.clock.advance(6.0)
    ack = httpx.post(
        f"{url}/insert/jsonline",
        content=b'{"_msg":"acknowledged"}\n',
        headers={"Content-Type": "application/stream+json"},
    )
    assert ack.status_code == 200 and ack.headers["content-type"] == "application/json"
    assert real.crash() == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health")
    real.up()
    assert real.url == url
    real.clock.advance(1.0)
    assert [json.loads(x)["_msg"] for x in query(real, query="*").text.splitlines()] == ["durable"]


def test_a_quiet_compressed_tail_withholds_its_headers_until_a_row(
    real: VictoriaLogsServer,
) -> None:
    args = {"query": "*", "offset": "10ms", "refresh_interval": "20ms"}
    quick, patient = httpx.Timeout(5.0, read=0.5), httpx.Timeout(5.0, read=5.0)
    with httpx.stream(
        "POST",
        f"{real.url}/select/logsql/tail",
        data=args,
        headers={"Accept-Encoding": "identity"},
        timeout=patient,
    ) as identity:
        assert identity.status_code == 200
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{real.url}/select/logsql/tail", data=args, timeout=quick)
    real.disconnect_tails()
    real.searchable_delay_s = 0.0
    real.ingest([{"_time": str(real.clock.now_ns()), "_msg": "first"}])
    with httpx.stream(
        "POST", f"{real.url}/select/logsql/tail", data=args, timeout=patient
    ) as gzipped:
        assert gzipped.headers["content-encoding"] == "gzip"
        assert json.loads(next(gzipped.iter_lines()))["_msg"] == "first"


def test_hits_count_rows_per_epoch_aligned_step(vl: VictoriaLogsServer) -> None:
    base = 1_795_972_800 * NS  # a whole minute
    vl.ingest([{"_time": str(base + s * NS), "_msg": "m"} for s in (1, 2, 11, 25, 70)])
    answer = httpx.post(
        f"{vl.url}/select/logsql/hits",
        data={
            "query": "* | fields _time",
            "start": format_time(base + 2 * NS),
            "end": format_time(base + 80 * NS),
            "step": "10s",
        },
    )
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "hits": [
            {
                "fields": {},
                "timestamps": [format_time(base + s * NS) for s in (0, 10, 20, 70)],
                "values": [1, 1, 1, 1],
                "total": 4,
            }
        ]
    }
    assert httpx.post(f"{vl.url}/select/logsql/hits", data={"query": "nothing"}).json() == {
        "hits": []
    }
