"""A small hand-made training job for the hang and straggler tests: Megatron-LM step lines
printed by the last rank, 1 Hz GPU telemetry whose values a test shapes per second, node and
GPU, and the job's Slurm rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from medic.detectors.base import Detection
from medic.ingest.replay import Delay, ReplayConfig, ReplaySource
from medic.pipeline import Pipeline, PipelineConfig
from medic.testing.builders import at, log, recording

NODES = ("n1", "n2", "n3", "n4")
GPUS_PER_NODE = 4
JOB = "100"

COMPUTE = {"util": 97.0, "power_w": 620.0, "temp_c": 66.0, "sm_clock_mhz": 1980.0}
EVAL = {"util": 84.0, "power_w": 410.0, "temp_c": 60.0, "sm_clock_mhz": 1980.0}
SPIN = {"util": 100.0, "power_w": 180.0, "temp_c": 55.0, "sm_clock_mhz": 1980.0}
IDLE = {"util": 0.0, "power_w": 70.0, "temp_c": 40.0, "sm_clock_mhz": 345.0, "throttle_reasons": 1}
"""Nothing to run: NVML's GPU-idle clocks-event reason (0x1) set, clocks down."""

GpuState = Callable[[float, str, int], dict[str, Any]]


def megatron_line(step: int, step_ms: float) -> str:
    """megatron/training/training.py training_log()."""
    return (
        f" [2026-03-01 10:00:00] iteration {step:8d}/  500000 | consumed samples: {step * 512:12d}"
        f" | elapsed time per iteration (ms): {step_ms:.1f} | throughput per GPU (TFLOP/s/GPU):"
        f" {180.0 * 1000 / step_ms:.1f} | learning rate: 1.5E-04 | global batch size:   512 |"
        " lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.876 |"
    )


@dataclass
class Job:
    """One job's rows; tests append to them and then ``run`` a detector over them."""

    nodes: Sequence[str] = NODES
    job_id: str = JOB
    logs: list[dict[str, Any]] = field(default_factory=list)
    gpu: list[dict[str, Any]] = field(default_factory=list)
    scheduler: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0

    def start(self, t: float = 0.0) -> Job:
        self.scheduler.append(
            {
                "time": at(t),
                "kind": "job",
                "job_id": self.job_id,
                "state": "RUNNING",
                "nodes": list(self.nodes),
            }
        )
        return self

    def end(self, t: float, state: str = "COMPLETED", exit_code: int = 0) -> Job:
        self.scheduler.append(
            {
                "time": at(t),
                "kind": "job",
                "job_id": self.job_id,
                "state": state,
                "exit_code": exit_code,
            }
        )
        return self

    def steps(self, t0: float, t1: float, every: float = 2.0, slowdown: float = 1.0) -> Job:
        """Step lines from ``t0`` to ``t1`` (a little jitter, deterministic)."""
        t = t0
        while t < t1:
            self.step += 1
            gap = every * slowdown * (1.0 + 0.05 * math.sin(self.step))
            self.say(t, megatron_line(self.step, gap * 1000))
            t += gap
        return self

    def say(self, t: float, message: str, node: str | None = None, source: str = "app") -> Job:
        node = node or self.nodes[-1]
        rank = len(self.nodes) * GPUS_PER_NODE - 1 if source == "app" else None
        self.logs.append(log(t, message, node=node, job_id=self.job_id, rank=rank, source=source))
        return self

    def telemetry(self, t0: float, t1: float, state: GpuState, every: int = 1) -> Job:
        """One sample per GPU every ``every`` seconds (1 Hz: the NVML agent; 15 or 30 s:
        dcgm-exporter scraped by Prometheus) from ``t0`` to ``t1``, shaped by ``state``."""
        for second in range(int(t0), int(t1), every):
            for node in self.nodes:
                for gpu in range(GPUS_PER_NODE):
                    values = {
                        "throttle_reasons": 0,
                        "pcie_replay": 0,
                        "nvlink_errors": 0,
                        "ecc_dbe": 0,
                        **state(float(second), node, gpu),
                    }
                    wobble = 1.0 + 0.01 * math.sin(second * 0.7 + gpu + 3 * len(node))
                    values["power_w"] = values["power_w"] * wobble
                    self.gpu.append(
                        {"time": at(second), "node": node, "gpu": gpu, "job_id": self.job_id}
                        | values
                    )
        return self


def constant(values: dict[str, Any]) -> GpuState:
    return lambda t, node, gpu: values


def run(
    detector: Any, jobs: Iterable[Job], duration_s: float, delays: tuple[Delay, ...] = ()
) -> list[Detection]:
    """Replay the jobs through a pipeline holding only ``detector``; every detection it emits
    (the correlator's window is tiny so that repeated firing would show). ``delays``: streams
    delivered late, as a log shipper does."""
    jobs = list(jobs)
    rec = recording(
        duration_s,
        logs=sorted((r for j in jobs for r in j.logs), key=lambda r: r["time"]),
        gpu=sorted((r for j in jobs for r in j.gpu), key=lambda r: r["time"]),
        scheduler=sorted((r for j in jobs for r in j.scheduler), key=lambda r: r["time"]),
    )
    pipeline = Pipeline([detector], PipelineConfig(incident_window_s=0.5))
    return pipeline.run(ReplaySource(rec, ReplayConfig(delays=delays)))
