"""The local VictoriaLogs keeps the behaviours of v1.26.0 that docs/victorialogs.md lists."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.ingest.vlserver import VictoriaLogsServer, format_time


@pytest.fixture
def vl() -> Iterator[VictoriaLogsServer]:
    with VictoriaLogsServer() as server:
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
    rows = [json.loads(x) for x in answer.text.splitlines()]
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
