"""Row-wise parsers read a replay's log batches ahead: the same rows per batch as one at a time."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from medic import readahead
from medic.ingest.base import Batch, Watermark
from medic.ingest.replay import Delay, ReplayConfig, ReplaySource
from medic.parse.progress import ProgressParser
from medic.parse.signatures import SignatureParser
from medic.pipeline import Pipeline
from medic.readahead import parse_ahead, stretches
from medic.recording import read_recording
from medic.testing.builders import at, batch, excerpt, log

DATASETS = Path(__file__).resolve().parent.parent / "datasets"
LINES = [
    "[rank0]: iteration 10/ 100 | elapsed time per iteration (ms): 1200.5 | lm loss: 2.3",
    "NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
    "just chatter",
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "Epoch 1:  13%|#3        | 1362/10382 [2:37:13<1:59:21,  1.26it/s, v_num=0]",
]


def log_batches(seconds: list[list[float]]) -> list[Batch]:
    """One logs batch per list of times; the lines cycle through LINES."""
    batches, i = [], 0
    for times in seconds:
        rows = []
        for t in times:
            rows.append(log(t, LINES[i % len(LINES)], node="n1", job_id="7"))
            i += 1
        batches.append(batch("logs", rows))
    return batches


def frame(parsed: Batch | None) -> pl.DataFrame | None:
    return None if parsed is None else parsed.frame


@pytest.mark.parametrize("parser", [ProgressParser(), SignatureParser()], ids=lambda p: p.name)
def test_each_batch_gets_the_rows_it_gives_alone(parser: object) -> None:
    batches = log_batches(
        [
            [0.1, 0.2, 0.9],
            [1.0, 1.5],
            [2.5],  # a chatter-only batch is possible too
            [3.0, 3.0, 3.9],
            [3.9, 4.2],  # a second cut at max_rows: shares its first time with the batch before
            [5.0, 5.1, 5.2, 5.3, 5.4],
        ]
    )
    ahead = parse_ahead([parser], batches)
    assert list(ahead) == batches
    for one in batches:
        alone = frame(parser.parse(one))  # type: ignore[attr-defined]
        read_ahead = frame(ahead[one][parser.output_stream])  # type: ignore[attr-defined]
        if alone is None:
            assert read_ahead is None
        else:
            assert read_ahead is not None and read_ahead.equals(alone)


@pytest.mark.parametrize("parser", [ProgressParser(), SignatureParser()], ids=lambda p: p.name)
def test_overlapping_batches_are_read_in_one_call_with_their_own_times(parser: object) -> None:
    """Late rows make a delayed replay's batches overlap in time: the run is still parsed in one
    call, and each batch gets the rows (and times) it gives alone."""
    batches = log_batches([[1.0, 2.0, 3.0], [0.5, 1.0, 2.5, 4.0], [0.2, 4.0], [6.0]] * 2)
    calls = []
    parse = parser.parse  # type: ignore[attr-defined]
    ahead = parse_ahead([_Counted(parser, calls)], batches)
    assert len(calls) == 1
    for one in batches:
        alone = frame(parse(one))
        read_ahead = frame(ahead[one][parser.output_stream])  # type: ignore[attr-defined]
        if alone is None:
            assert read_ahead is None
        else:
            assert read_ahead is not None and read_ahead.equals(alone)


class _Counted:
    """``parser`` counting its calls in ``calls``, with its ``parse_apart`` when it has one (a
    parser whose rows depend on their batch: the signature parser's second layer)."""

    def __init__(self, parser: object, calls: list[int]) -> None:
        self.parser, self.calls = parser, calls
        self.output_stream = parser.output_stream  # type: ignore[attr-defined]
        if hasattr(parser, "parse_apart"):
            self.parse_apart = self._parse_apart

    def parse(self, batch: Batch) -> Batch | None:
        self.calls.append(batch.num_rows)
        return self.parser.parse(batch)  # type: ignore[attr-defined, no-any-return]

    def _parse_apart(
        self, batches: list[Batch], joined: pl.DataFrame | None = None
    ) -> list[Batch | None]:
        self.calls.append(sum(batch.num_rows for batch in batches))
        return self.parser.parse_apart(batches, joined)  # type: ignore[attr-defined, no-any-return]


def test_stretches_end_at_the_row_or_event_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [*log_batches([[float(s)] * 3 for s in range(10)]), Watermark(at(11))]
    assert [len(s) for s in stretches(events)] == [11]
    monkeypatch.setattr(readahead, "AHEAD_ROWS", 7)
    assert [len(s) for s in stretches(events)] == [3, 3, 3, 2]
    monkeypatch.setattr(readahead, "AHEAD_EVENTS", 2)
    assert [len(s) for s in stretches(events)] == [2, 2, 2, 2, 2, 1]


@pytest.mark.parametrize(
    ("name", "delays"),
    [
        ("xid79_cascade-s1", ()),
        ("mixed-s1", (Delay("logs", 1.0, 30.0),)),  # batches overlapping by up to 29 s
        ("gpu_hang-s1", (Delay("logs", 0.0, 10.0), Delay("gpu", 0.0, 5.0))),
    ],
)
def test_a_replay_gives_the_same_detections_as_batch_by_batch(
    name: str, delays: tuple[Delay, ...]
) -> None:
    recording = excerpt(read_recording(DATASETS / name), lead_s=240, tail_s=420)
    replay = ReplaySource(recording, ReplayConfig(max_rows=500, delays=delays))
    one_by_one = Pipeline.from_settings()
    expected = [d for event in replay for d in one_by_one.process(event)]
    found = Pipeline.from_settings().run(replay)
    assert expected and found == expected
    assert Pipeline.from_settings().run(replay, replay.placing()) == expected


def test_a_fatal_root_keeps_the_second_layer_from_its_own_batch_only() -> None:
    """The second layer reads a job's unmatched failure lines unless a fatal entry named the
    job's failure in the same batch: read ahead, a root in the next batch changes nothing."""
    first = batch("logs", [log(1.0, "ERROR: fabric port flapped unexpectedly", job_id="7")])
    second = batch(
        "logs",
        [
            log(2.0, "ERROR: fabric port flapped unexpectedly", job_id="7"),
            log(
                2.5,
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                job_id="7",
            ),
        ],
    )
    parser = SignatureParser()
    ahead = parse_ahead([parser], [first, second])
    for one in (first, second):
        alone = frame(parser.parse(one))
        assert frame(ahead[one]["signatures"]) is not None
        assert frame(ahead[one]["signatures"]).equals(alone)  # type: ignore[union-attr]
    unmatched = frame(ahead[first]["signatures"])
    assert unmatched is not None and unmatched["signature"].str.starts_with("unmatched:").all()
