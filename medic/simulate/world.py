"""One simulated recording under construction: the cluster, its jobs and runs, the ground
truth, and the helpers faults and traps use to write lines, effects and scheduler rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from medic.simulate import texts
from medic.simulate.clock import Clock
from medic.simulate.cluster import GPUS_PER_NODE, PCI_BUS_IDS, Cluster, NodePool
from medic.simulate.plan import CounterEvent, GpuEffect, Job, PortCount, Run
from medic.simulate.scheduler import SlurmLog
from medic.simulate.sink import LogSink, fill_templates, render
from medic.simulate.workload import (
    PG_TIMEOUTS_S,
    draw_spec,
    pick_framework,
    step_durations,
)
from medic.timeutil import US, to_us

if TYPE_CHECKING:
    from medic.simulate.variation import Variation

EPOCH_US = to_us("2026-03-01T00:00:00Z")
NCCL_VERSIONS = {"new": ("2.21.5", "2.23.4", "2.20.5"), "old": ("2.18.3", "2.19.3")}


class World:
    """A cluster over ``seconds`` of event time, with everything that happens on it."""

    def __init__(self, rng: np.random.Generator, seconds: int, nodes: int) -> None:
        self.rng = rng
        self.seconds = int(seconds)
        start = EPOCH_US + int(rng.integers(0, 90 * 86_400)) * US
        self.clock = Clock(start)
        self.cluster = Cluster.build(rng, nodes)
        self.pool = NodePool(nodes)
        self.jobs: list[Job] = []
        self.labels: list[dict[str, Any]] = []
        self.sink = LogSink()
        self.slurm = SlurmLog()
        self.effects: list[GpuEffect] = []
        self.counters: list[CounterEvent] = []
        self.ports: list[PortCount] = []
        """InfiniBand port counts (flaps, a bad cable's errors, link retraining)."""
        self.fabric_rng = rng.spawn(1)[0]
        """Draws of the InfiniBand counters: a generator of their own, so adding them left
        every other draw of a seed as it was."""
        self.drops: list[tuple[int, float, float]] = []
        self.protect: set[tuple[int, int]] = set()
        self.silent: dict[int, float] = {}
        self.down: set[int] = set()
        self.traps: list[str] = []
        self.miss_rate = float(rng.uniform(0.0005, 0.003))
        self.driver = str(rng.choice(["r535", "r535", "r550", "r470"]))
        self.controller = str(rng.choice(["slurmctl01", "head-01", "sched1"]))
        self.ctld_pid = int(rng.integers(1000, 9000))
        self._next_id = int(rng.integers(40_000, 9_000_000))
        self.variation: Variation | None = None
        """The perturbed suite's realistic variation (None: the plain simulator)."""
        self.cadence = 1
        """Seconds between two telemetry samples of a node."""
        self.cadence_offset = np.zeros(nodes, dtype=np.int64)

    # --- names -------------------------------------------------------------------------------

    def host(self, node: int) -> str:
        return self.cluster.names[node]

    def hosts(self, nodes: Sequence[int]) -> list[str]:
        return [self.cluster.names[n] for n in nodes]

    def new_job_id(self) -> tuple[str, str]:
        """(id as squeue shows it, id slurmstepd prints); some jobs are array tasks."""
        self._next_id += int(self.rng.integers(1, 40))
        raw = str(self._next_id)
        if self.rng.random() < 0.15:
            return (
                f"{self._next_id - int(self.rng.integers(1, 30))}_{self.rng.integers(0, 64)}",
                raw,
            )
        return raw, raw

    # --- jobs --------------------------------------------------------------------------------

    def new_job(
        self,
        n_nodes: int,
        start: float,
        framework: str | None = None,
        step_s: float | None = None,
        slow: float = 1.0,
        nodes: list[int] | None = None,
    ) -> Run | None:
        """A job whose first run starts at ``start`` on ``n_nodes`` free nodes (None if the
        cluster has too few); it runs past the recording until something ends it."""
        chosen = nodes if nodes is not None else self.pool.allocate(n_nodes, start)
        if chosen is None:
            return None
        rng = self.rng
        name = framework or pick_framework(rng)
        gen = "new" if rng.random() < 0.75 else "old"
        job_id, raw = self.new_job_id()
        spec = draw_spec(rng, name, step_s)
        if self.variation is not None:
            spec = self.variation.vary_spec(spec)
        job = Job(
            job_id=job_id,
            raw_id=raw,
            framework=name,
            spec=spec,
            rank_mode=str(rng.choice(["column", "column", "prefix", "prefix", "none"])),
            torch_gen=gen,
            nccl=str(rng.choice(NCCL_VERSIONS[gen])),
            pg_timeout_s=int(rng.choice(PG_TIMEOUTS_S)),
            time_limit_s=float(rng.choice([4, 8, 12, 24, 48])) * 3600,
            uid=int(rng.integers(1000, 60000)),
            user_slow=slow,
            nccl_debug=bool(rng.random() < 0.7),
            colour=bool(rng.random() < 0.5),
        )
        self.jobs.append(job)
        return self.add_run(job, chosen, start, first_step=0)

    def _durations(self, job: Job, start: float) -> tuple[np.ndarray, np.ndarray]:
        spec = job.spec
        horizon = self.seconds + 120 - (start + spec.startup_s)
        # Enough steps for the whole recording even if a straggler slows the job 2.5x.
        count = max(1, int(np.ceil(horizon / (spec.step_s * job.user_slow * 0.35))) + 4)
        return step_durations(self.rng, spec, count, job.user_slow)

    def _vary_steps(self, run: Run) -> None:
        if self.variation is not None:
            run.holdups = self.variation.vary_steps(run)

    def move_start(self, run: Run, start: float) -> None:
        """Start ``run`` at another time (its steps are drawn again to cover the recording)."""
        run.start = start
        run.durations, run.stalled = self._durations(run.job, start)
        self._vary_steps(run)
        run.invalidate()

    def add_run(self, job: Job, nodes: list[int], start: float, first_step: int) -> Run:
        """A (new) attempt of ``job`` on ``nodes`` starting at ``start``."""
        rng = self.rng
        spec = job.spec
        world = len(nodes) * GPUS_PER_NODE
        beyond = self.seconds + 3600.0
        durations, stalled = self._durations(job, start)
        run = Run(
            job=job,
            attempt=len(job.runs),
            nodes=list(nodes),
            start=start,
            first_step=first_step,
            end=beyond,
            exit_at=beyond,
            durations=durations,
            stalled=stalled,
            ckpt_pauses=rng.uniform(*spec.ckpt_s, 32),
            eval_pauses=rng.uniform(*spec.eval_s, 32),
            pids=rng.integers(4_000, 3_900_000, world),
            agent_pids=rng.integers(4_000, 3_900_000, len(nodes)),
        )
        if self.variation is not None:
            self.variation.vary_run(run)
            self._vary_steps(run)
        job.runs.append(run)
        return run

    def finish(
        self,
        run: Run,
        end: float,
        state: str,
        exit_code: int | None,
        closing: str,
        exit_at: float | None = None,
    ) -> None:
        """End ``run``: processes exit at ``exit_at`` (default ``end``), Slurm records ``state``
        at ``end``; the nodes return to the pool then."""
        run.end = end
        run.exit_at = end if exit_at is None else exit_at
        run.end_state = state
        run.exit_code = exit_code
        run.closing = closing
        run.invalidate()
        self.pool.release([n for n in run.nodes if n not in self.down], end)

    # --- ground truth --------------------------------------------------------------------------

    def label(
        self,
        job: Job,
        kind: str,
        onset: float,
        culprit_nodes: Sequence[int] = (),
        culprit_ranks: Sequence[int] = (),
        note: str | None = None,
    ) -> None:
        self.labels.append(
            {
                "incident_id": f"{job.job_id}-{kind}-{len(self.labels) + 1}",
                "job_id": job.job_id,
                "kind": kind,
                "onset": self.clock.at(onset),
                "culprit_nodes": sorted(self.hosts(culprit_nodes)),
                "culprit_ranks": sorted(int(r) for r in culprit_ranks),
                "note": note,
            }
        )

    def sample_time(self, node: int, t: float) -> float:
        """When ``node``'s first telemetry sample at or after ``t`` is taken."""
        phase = self.cluster.phase_us[node] / US
        k = int(np.ceil(t - phase))
        if self.cadence > 1:
            k += int(self.cadence_offset[node] - k) % self.cadence
        return float(k + phase)

    def first_sample(self, nodes: Sequence[int], t: float) -> float:
        """The first telemetry sample of any of ``nodes`` at or after ``t``; that sample is
        protected from random scrape misses so the label's onset row exists."""
        times = [self.sample_time(n, t) for n in nodes]
        for node, when in zip(nodes, times, strict=True):
            self.protect.add((node, round(when - self.cluster.phase_us[node] / US)))
        return min(times)

    # --- lines -------------------------------------------------------------------------------

    def rank_frame(self, run: Run, ranks: Sequence[int] | np.ndarray) -> pl.DataFrame:
        """One row per rank with the placeholders per-rank templates use."""
        ranks = np.asarray(ranks, dtype=np.int64)
        local = ranks % GPUS_PER_NODE
        node_idx = np.asarray(run.nodes)[ranks // GPUS_PER_NODE]
        pids = run.pids[ranks]
        prefix = run.job.rank_mode == "prefix"
        return pl.DataFrame(
            {
                "rank": ranks,
                "local_rank": local,
                "node_idx": node_idx,
                "host": [self.cluster.names[n] for n in node_idx],
                "ip": [self.cluster.ips[n] for n in node_idx],
                "pid": pids,
                "tid": pids + 37 + local * 3,
                "busid": [PCI_BUS_IDS[g][5:7] + "000" for g in local],
                "p": [f"[rank{r}]:" if prefix else "" for r in ranks],
            }
        )

    def emit_ranks(
        self,
        run: Run,
        ranks: Sequence[int] | np.ndarray,
        times: Sequence[float] | np.ndarray,
        templates: Sequence[str],
        gap_s: float = 0.0005,
        per_rank: dict[str, Sequence[Any] | np.ndarray] | None = None,
        **values: Any,
    ) -> None:
        """Every template, in order, from each rank starting at that rank's time; ``values``
        fill placeholders common to all ranks, ``per_rank`` columns fill per-rank ones."""
        if len(ranks) == 0 or not templates:
            return
        frame = self.rank_frame(run, ranks).with_columns(
            pl.Series("time", self.clock.us(np.asarray(times, dtype=np.float64))),
            pl.lit(round(gap_s * US)).alias("gap_us"),
            *[pl.Series(name, list(column)) for name, column in (per_rank or {}).items()],
        )
        filled = texts.fill_all(list(templates), **values)
        lines = fill_templates(frame, filled).with_columns(
            pl.lit(run.job.job_id).alias("job_id"),
            pl.col("host").alias("node"),
            pl.lit("app").alias("source"),
            (pl.col("rank") if run.job.rank_mode == "column" else pl.lit(None))
            .cast(pl.Int32)
            .alias("rank"),
            pl.col("rank").cast(pl.Int32).alias("origin"),
        )
        self.sink.add_frame(lines)

    def emit_rank(self, run: Run, rank: int, lines: Sequence[tuple[float, str]]) -> None:
        """Lines printed by one rank (messages already formatted, rank prefix added here)."""
        if not lines:
            return
        node = self.host(run.rank_node(rank))
        prefix = f"[rank{rank}]:" if run.job.rank_mode == "prefix" else ""
        self.sink.add(
            self.clock.us(np.array([t for t, _ in lines])),
            [m if m.startswith("[rank") else prefix + m for _, m in lines],
            node=node,
            job_id=run.job.job_id,
            rank=rank if run.job.rank_mode == "column" else None,
            origin=rank,
        )

    def emit_node(
        self,
        node: int,
        lines: Sequence[tuple[float, str]],
        source: str = "app",
        job_id: str | None = None,
    ) -> None:
        """Lines from a node that belong to no rank (torchrun's agent, slurmstepd, kernel);
        ``{glog}``/``{pylog}`` placeholders get each line's own timestamp."""
        if not lines:
            return
        frame = pl.DataFrame(
            {
                "time": self.clock.us(np.array([t for t, _ in lines])),
                "template": [m for _, m in lines],
            }
        )
        self.sink.add_frame(
            render(frame).with_columns(
                pl.lit(job_id, pl.String).alias("job_id"),
                pl.lit(self.host(node)).alias("node"),
                pl.lit(None, pl.Int32).alias("rank"),
                pl.lit(source).alias("source"),
            )
        )

    def emit_controller(self, lines: Sequence[tuple[float, str]]) -> None:
        if lines:
            self.sink.add(
                self.clock.us(np.array([t for t, _ in lines])),
                [m for _, m in lines],
                node=self.controller,
                source="slurm",
            )

    def jitter(self, count: int, scale: float = 0.05) -> np.ndarray:
        """Per-rank clock skew and scheduling noise (seconds)."""
        result: np.ndarray = np.abs(self.rng.normal(0.0, scale, count))
        return result
