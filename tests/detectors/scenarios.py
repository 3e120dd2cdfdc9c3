"""Small cluster scenarios for the evidence detectors: a job on a few nodes, 1 Hz telemetry,
scheduler rows, and a replay through the real pipeline (as ``medic backtest`` runs it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from medic.detectors.base import Detection
from medic.detectors.registry import build_detectors
from medic.ingest.replay import ReplayConfig, ReplaySource
from medic.pipeline import Pipeline
from medic.testing.builders import T0, at, log, recording
from medic.timeutil import US

EVIDENCE_DETECTORS = ("crash", "gpu_fault", "node_failure")


@dataclass
class Job:
    """A job on ``nodes`` with ``gpus`` GPUs (and ranks) per node."""

    nodes: Sequence[str] = ("n1", "n2", "n3", "n4")
    gpus: int = 8
    job_id: str = "100"
    stopped: dict[tuple[str, int | None], float] = field(default_factory=dict)
    """(node, GPU or None for all) -> time its telemetry stops."""
    gpu_fields: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    """(node, GPU, second) -> extra telemetry fields of that sample."""

    def node_of(self, rank: int) -> str:
        return self.nodes[rank // self.gpus]

    @property
    def ranks(self) -> range:
        return range(len(self.nodes) * self.gpus)

    def start(self, t: float = 0.0) -> dict[str, Any]:
        return {
            "time": at(t),
            "kind": "job",
            "job_id": self.job_id,
            "state": "RUNNING",
            "nodes": list(self.nodes),
        }

    def end(self, t: float, state: str, exit_code: int | None = None) -> dict[str, Any]:
        return {
            "time": at(t),
            "kind": "job",
            "job_id": self.job_id,
            "state": state,
            "nodes": list(self.nodes),
            "exit_code": exit_code,
        }

    def telemetry(self, start: int, end: int, extra_nodes: Iterable[str] = ()) -> list[dict]:
        """1 Hz samples of every GPU of the job's nodes (and of idle ``extra_nodes``)."""
        rows = []
        for second in range(start, end):
            for node in [*self.nodes, *extra_nodes]:
                if second >= self.stopped.get((node, None), float("inf")):
                    continue
                for gpu in range(self.gpus):
                    if second >= self.stopped.get((node, gpu), float("inf")):
                        continue
                    rows.append(
                        {
                            "time": at(second),
                            "node": node,
                            "gpu": gpu,
                            "job_id": self.job_id if node in self.nodes else None,
                            "util": 95.0,
                            "ecc_dbe": 0,
                            "ecc_sbe": 0,
                            "nvlink_errors": 0,
                            **self.gpu_fields.get((node, gpu, second), {}),
                        }
                    )
        return rows

    def rank_logs(self, t: float, message: str, ranks: Iterable[int] | None = None) -> list[dict]:
        """``message`` (``{rank}`` filled in) from each of ``ranks``, 10 ms apart."""
        chosen = list(self.ranks if ranks is None else ranks)
        return [
            log(t + i * 0.01, message.format(rank=r), node=self.node_of(r), job_id=self.job_id)
            for i, r in enumerate(chosen)
        ]

    def progress(self, start: int, end: int, every: int = 10) -> list[dict]:
        return [
            line
            for second in range(start, end, every)
            for line in self.rank_logs(second, f"[rank{{rank}}]: iteration {second} | lm loss: 2.3")
        ]


def kernel(t: float, node: str, message: str) -> dict[str, Any]:
    """A kernel log line (no job attached), as journald would ship it."""
    return log(t, message, node=node, job_id=None, source="system")


def detect(
    duration: float,
    logs: Sequence[dict] = (),
    gpu: Sequence[dict] = (),
    scheduler: Sequence[dict] = (),
    detectors: Sequence[str] = EVIDENCE_DETECTORS,
    replay: ReplayConfig | None = None,
) -> list[Detection]:
    """Replay the scenario through a fresh pipeline; the detections it emitted."""
    rec = recording(
        duration,
        logs=sorted(logs, key=lambda r: r["time"]),
        gpu=sorted(gpu, key=lambda r: r["time"]),
        scheduler=sorted(scheduler, key=lambda r: r["time"]),
    )
    pipeline = Pipeline(build_detectors(enabled=detectors))
    return pipeline.run(ReplaySource(rec, replay))


def seconds(us: int) -> float:
    """Event time ``us`` as seconds after the scenario start."""
    return (us - T0) / US
