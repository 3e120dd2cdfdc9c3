import os
import threading

import pytest

from medic.ingest.base import Batch, Watermark
from medic.parse.threads import ParserThreads
from medic.pipeline import Pipeline
from medic.testing.builders import batch, log
from medic.timeutil import US


class _Where:
    """A parser that notes the thread each call ran on."""

    input_stream = "logs"
    output_stream = "where"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def parse(self, batch: Batch) -> Batch | None:
        self.threads.append(threading.get_ident())
        return None

    def fail(self) -> None:
        raise ValueError("bad batch")


def test_each_parser_runs_on_a_thread_of_its_own_one_call_at_a_time() -> None:
    threads, first, second = ParserThreads(), _Where(), _Where()
    rows = batch("logs", [log(0, "step 1")])
    for parser in (first, second, first):
        assert threads.call(parser, parser.parse, rows) is None
    assert first.threads[0] == first.threads[1] != second.threads[0]
    assert threading.get_ident() not in (*first.threads, *second.threads)
    with pytest.raises(ValueError, match="bad batch"):  # the caller gets the parser's error
        threads.call(first, first.fail)


def test_a_forked_child_starts_threads_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    threads, parser = ParserThreads(), _Where()
    rows = batch("logs", [log(0, "step 1")])
    threads.call(parser, parser.parse, rows)
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a child: the parent's pools are gone
    threads.call(parser, parser.parse, rows)
    assert parser.threads[0] != parser.threads[1]


def test_the_pipeline_finds_the_same_on_the_parsers_threads_as_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [log(float(i), f"[rank0]: iteration {i}/100 | loss 2.0 | 512 ms/it") for i in range(9)]
    lines.append(log(9.0, "[rank1]: RuntimeError: CUDA error: an illegal memory access"))

    def found() -> list[tuple[str, str, tuple[int, ...]]]:
        rows = batch("logs", lines)
        events = [rows, Watermark((rows.max_time or 0) + 120 * US)]
        detections = Pipeline.from_settings().run(events)
        return [(d.kind, d.summary, d.ranks) for d in detections]

    threaded = found()
    monkeypatch.setattr(ParserThreads, "call", lambda self, parser, method, *args: method(*args))
    assert threaded == found() != []
