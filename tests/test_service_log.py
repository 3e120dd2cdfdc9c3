"""The service log's lines: their fields, both formats, and the rotated log file."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from medic.detectors.base import Detection
from medic.service_log import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    decision_of,
    log_decisions,
    log_detections,
)
from medic.testing.builders import at
from tests.history.rows import action, actions


@pytest.fixture
def captured() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    events = logging.getLogger("medic.events")
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    yield records
    events.removeHandler(handler)


def test_decisions_in_an_operators_words() -> None:
    assert decision_of("done", None) == "executed"
    assert decision_of("recorded", None) == "recorded"
    assert decision_of("failed", None) == "failed"
    assert decision_of("suppressed", "monitor") == "would_run"
    assert decision_of("suppressed", "node_cooldown") == "suppressed"


def test_one_line_per_detection_and_decision_in_text_and_json(
    captured: list[logging.LogRecord],
) -> None:
    found = Detection(
        job_id="42",
        kind="gpu_fault",
        culprits=("n3",),
        score=0.9,
        raw_score=0.8,
        detector="gpu_fault",
        summary='Xid 79 on n3 GPU 2 "fallen off the bus"',
        detected_at=at(130),
        onset=at(100),
    )
    log_detections([found])
    log_decisions(
        actions(
            action(131, found.id, "drain", node="n3", job_id="42", status="done"),
            action(131, found.id, "requeue", job_id="42", status="failed"),
            action(131, found.id, "hold", job_id="42", status="suppressed", guard="incident"),
        )
    )
    text = [TextFormatter().format(r).split(": ", 1)[1] for r in captured]
    assert text == [
        "detection kind=gpu_fault tier=confirmed job=42 culprits=n3 score=0.9 raw_score=0.8 "
        "detector=gpu_fault detected_at=2026-03-01T10:02:10Z onset=2026-03-01T10:01:40Z "
        f'id={found.id} summary="Xid 79 on n3 GPU 2 \\"fallen off the bus\\""',
        "action decision=executed action=drain node=n3 job=42 mode=enforce "
        f'detection={found.id} at=2026-03-01T10:02:11Z reason="drain for {found.id}"',
        "action decision=failed action=requeue job=42 mode=enforce "
        f'detection={found.id} at=2026-03-01T10:02:11Z reason="requeue for {found.id}"',
        "action decision=suppressed action=hold job=42 mode=enforce guard=incident "
        f'detection={found.id} at=2026-03-01T10:02:11Z reason="hold for {found.id}"',
    ]
    assert [r.levelname for r in captured] == ["INFO", "INFO", "WARNING", "INFO"]
    record = json.loads(JsonFormatter().format(captured[0]))
    assert record["message"] == "detection" and record["culprits"] == "n3"
    assert record["summary"] == 'Xid 79 on n3 GPU 2 "fallen off the bus"'


def test_the_log_file_is_rotated_by_size(tmp_path: Path) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("info", "json", str(tmp_path / "serve.log"), max_mb=0.01, backups=2)
        for i in range(400):
            logging.getLogger("medic.test").info("line %d of the rotation test", i)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["serve.log", "serve.log.1", "serve.log.2"]
    last = (tmp_path / "serve.log").read_text().splitlines()[-1]
    assert json.loads(last)["message"] == "line 399 of the rotation test"


def test_control_characters_of_a_message_are_escaped_in_the_text_log() -> None:
    record = logging.LogRecord(
        "medic.ingest", logging.WARNING, __file__, 1, "answered: %s", ("\x1b[2Jjunk\x00\r\n",), None
    )
    line = TextFormatter().format(record)
    assert line.isprintable()
    assert line.endswith("answered: \\x1b[2Jjunk\\x00\\r\\n")
