"""1 Hz NVML-like telemetry for every GPU of the cluster, generated in time chunks.

Each chunk is a (seconds x GPUs) grid: which run holds each GPU (``holder``) selects the run's
mode for that second, the mode selects the levels of util / power / clock / memory, per-GPU
offsets and noise make GPUs differ, per-GPU effects (a vanished or throttled GPU) and counter
events (ECC, PCIe replays, NVLink errors, Xids) are laid over it. Columns are ordered by each
node's sampling phase, so flattening the grid row by row yields rows sorted by time.
Values are rounded as NVML reports them (integer util, temperature, clock and MiB; power in
mW), which also keeps the parquet files small. A plan may keep only every ``cadence``-th
second of each node (an exporter collecting every 5, 15 or 30 s); an Xid then shows on the
next kept sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from scipy.signal import lfilter

from medic import schema
from medic.simulate.cluster import GPUS_PER_NODE, MEMORY_MIB, Cluster
from medic.simulate.plan import CounterEvent, GpuEffect, Mode, PortCount
from medic.simulate.ports import port_counters
from medic.timeutil import US

CHUNK_S = 120
COUNTERS = ("ecc_dbe", "ecc_sbe", "pcie_replay", "nvlink_errors")
IDLE_CLOCK = 345
BOOST_CLOCK = 1980
# NVML clocks-event reasons.
GPU_IDLE, SW_POWER_CAP, SW_THERMAL, HW_THERMAL = 0x1, 0x4, 0x20, 0x40
TEMP_TAU_S = 45.0
POWER_LIMIT_W = 700.0


@dataclass
class Holding:
    """A run's allocation as the telemetry sees it: its nodes, span and per-second modes."""

    job_id: str
    nodes: list[int]
    start: float
    end: float
    modes: np.ndarray
    mem_mib: float
    power_w: float
    startup_s: float


@dataclass
class GpuPlan:
    """Everything the telemetry of one recording is generated from."""

    cluster: Cluster
    t0_us: int
    seconds: int
    holdings: list[Holding]
    effects: list[GpuEffect]
    counters: list[CounterEvent]
    drop: list[tuple[int, float, float]]
    """(node, start, end): no samples of that node (silent node, scrape gap)."""
    protect: set[tuple[int, int]]
    """(node, second) samples that random scrape misses must not remove (label onsets)."""
    miss_rate: float
    cadence: int = 1
    """Seconds between two samples of a node (dcgm-exporter's collection interval)."""
    cadence_offset: np.ndarray | None = None
    """Per node, which second of each ``cadence`` it is sampled at (0 when None)."""
    ports: list[PortCount] = field(default_factory=list)
    """InfiniBand port counts of the nodes (``medic.simulate.ports``)."""

    def sampled(self, ks: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Whether second ``ks`` of each of ``nodes`` is a sample (broadcasting)."""
        if self.cadence == 1:
            return np.ones(np.broadcast_shapes(ks.shape, nodes.shape), dtype=bool)
        offset = (
            np.zeros(self.cluster.size, np.int64)
            if self.cadence_offset is None
            else (self.cadence_offset)
        )
        result: np.ndarray = (ks - offset[nodes]) % self.cadence == 0
        return result

    def next_sample(self, node: int, k: int) -> int:
        """The first sampled second of ``node`` at or after second ``k``."""
        if self.cadence == 1:
            return k
        offset = 0 if self.cadence_offset is None else int(self.cadence_offset[node])
        return k + (offset - k) % self.cadence


def render_gpu(plan: GpuPlan, rng: np.random.Generator) -> pa.Table:
    """The recording's ``gpu`` table, sorted by time."""
    layout = _Layout.build(plan, rng)
    jobs = _Jobs.build(plan)
    miss = _random_misses(plan, rng, plan.cluster.size)
    events = _counter_events(plan, layout.col_of)
    carry = {name: layout.base[name].copy() for name in COUNTERS}
    phase_s = plan.cluster.phase_us[: plan.cluster.size] / US
    ports = port_counters(plan.ports, plan.seconds, phase_s, rng.spawn(1)[0])
    temp_state: np.ndarray | None = None
    batches = []
    for k0 in range(0, plan.seconds, CHUNK_S):
        chunk = _levels(plan, layout, jobs, k0, min(plan.seconds, k0 + CHUNK_S), rng)
        chunk.keep &= ~miss[k0 : k0 + chunk.n][:, layout.col_node]
        chunk.keep &= plan.sampled(np.arange(k0, k0 + chunk.n)[:, None], layout.col_node[None, :])
        for effect in plan.effects:
            cols, lo, hi = _effect_span(effect, layout.col_of, plan.cluster, k0, k0 + chunk.n)
            if hi > lo:
                EFFECTS[effect.kind](chunk, slice(lo, hi), cols, effect, layout)
        temp, temp_state = _temperature(chunk, layout, temp_state)
        counts = {name: _cumulative(events.get(name, []), carry, name, chunk) for name in COUNTERS}
        for name, values in ports.items():
            counts[name] = values[k0 : k0 + chunk.n][:, layout.col_node]
        batches.append(_batch(plan, layout, jobs, chunk, temp, counts, events.get("xid", [])))
    if not batches:
        return schema.empty(schema.GPU)
    return pa.Table.from_batches(batches, schema=schema.GPU)


@dataclass
class _Layout:
    """Column order (GPUs sorted by their node's sampling phase, so flattened chunks come out
    sorted by time) and each GPU's own character."""

    col_node: np.ndarray
    col_gpu: np.ndarray
    col_of: np.ndarray
    phase: np.ndarray
    node_names: pa.Array
    power_eff: np.ndarray
    idle_w: np.ndarray
    temp_off: np.ndarray
    mem_off: np.ndarray
    base: dict[str, np.ndarray]

    @property
    def width(self) -> int:
        return int(self.col_node.size)

    @classmethod
    def build(cls, plan: GpuPlan, rng: np.random.Generator) -> _Layout:
        cluster = plan.cluster
        n_nodes = cluster.size
        n_gpus = n_nodes * GPUS_PER_NODE
        order = np.argsort(cluster.phase_us, kind="stable")
        col_node = np.repeat(order, GPUS_PER_NODE)
        col_gpu = np.tile(np.arange(GPUS_PER_NODE), n_nodes)
        col_of = np.empty((n_nodes, GPUS_PER_NODE), dtype=np.int64)
        col_of[col_node, col_gpu] = np.arange(n_gpus)
        hot_side = (col_gpu >= 4) * rng.uniform(0, 4)
        return cls(
            col_node=col_node,
            col_gpu=col_gpu,
            col_of=col_of,
            phase=cluster.phase_us[col_node],
            node_names=pa.array(cluster.names, pa.string()),
            power_eff=rng.normal(1.0, 0.035, n_gpus),
            idle_w=rng.uniform(68.0, 98.0, n_gpus),
            temp_off=np.clip(rng.normal(0.0, 2.5, n_gpus), -5, 5) + hot_side,
            # The caching allocator holds a steady amount per GPU; ranks differ (pipeline stages).
            mem_off=np.round(rng.normal(0.0, 700.0, n_gpus)),
            base={
                "ecc_sbe": np.where(rng.random(n_gpus) < 0.12, rng.integers(1, 40, n_gpus), 0),
                "ecc_dbe": np.zeros(n_gpus, dtype=np.int64),
                "pcie_replay": np.where(rng.random(n_gpus) < 0.08, rng.integers(1, 6, n_gpus), 0),
                "nvlink_errors": np.where(rng.random(n_gpus) < 0.03, rng.integers(1, 3, n_gpus), 0),
            },
        )


@dataclass
class _Jobs:
    """Per-holding arrays (plus a last row for "no job") indexed by the holder grid."""

    modes: np.ndarray
    names: pa.Array
    mem: np.ndarray
    power: np.ndarray
    start: np.ndarray
    startup: np.ndarray

    @property
    def none(self) -> int:
        return len(self.names)

    @classmethod
    def build(cls, plan: GpuPlan) -> _Jobs:
        h = plan.holdings
        return cls(
            modes=np.vstack([x.modes for x in h] + [np.zeros(plan.seconds, np.int8)]),
            names=pa.array([x.job_id for x in h], pa.string()),
            mem=np.array([x.mem_mib for x in h] + [0.0]),
            power=np.array([x.power_w for x in h] + [0.0]),
            start=np.array([x.start for x in h] + [0.0]),
            startup=np.array([x.startup_s for x in h] + [1.0]),
        )


@dataclass
class _Chunk:
    """The metrics of a (seconds x GPUs) block of samples, before rounding."""

    k0: int
    holder: np.ndarray
    mode: np.ndarray
    noise: np.ndarray
    coin: np.ndarray
    util: np.ndarray
    power: np.ndarray
    clock: np.ndarray
    throttle: np.ndarray
    mem: np.ndarray
    temp_add: np.ndarray
    blank: np.ndarray
    keep: np.ndarray

    @property
    def n(self) -> int:
        return int(self.holder.shape[0])


def _levels(
    plan: GpuPlan, layout: _Layout, jobs: _Jobs, k0: int, k1: int, rng: np.random.Generator
) -> _Chunk:
    """What each GPU's mode makes of util, power, clocks and memory, with per-GPU offsets."""
    n, width = k1 - k0, layout.width
    ks = np.arange(k0, k1)
    holder = np.full((n, width), jobs.none, dtype=np.int64)
    for r, h in enumerate(plan.holdings):
        lo, hi = max(k0, int(np.ceil(h.start))), min(k1, int(np.ceil(h.end)))
        if hi > lo:
            holder[lo - k0 : hi - k0, layout.col_of[h.nodes].ravel()] = r
    mode = jobs.modes[holder, ks[:, None]]
    noise = rng.standard_normal((3, n, width))
    coin = rng.random((n, width))
    idle_w = layout.idle_w

    util = np.zeros((n, width))
    train = mode == Mode.TRAIN
    util[train] = 100.0 - np.abs(noise[0][train]) * 2.2
    dips = train & (coin < 0.012)
    util[dips] = 55.0 + 35.0 * coin[dips] / 0.012
    startup = mode == Mode.STARTUP
    # Start-up: mostly idle (NCCL init, data loading), bursts while compiling and warming up.
    util[startup] = np.where(coin[startup] < 0.75, 0.0, 4.0 * (coin[startup] - 0.75) * 100.0)
    ckpt = (mode == Mode.CKPT) | (mode == Mode.STALL)
    util[ckpt] = np.where(coin[ckpt] < 0.8, 0.0, coin[ckpt] * 20.0)
    evals = mode == Mode.EVAL
    util[evals] = 84.0 + noise[0][evals] * 5.0
    wait = mode == Mode.WAIT
    # NCCL kernels spin while waiting for peers: counted as busy, drawing far less power.
    util[wait] = np.where(coin[wait] < 0.97, 100.0, 99.0)

    busy = jobs.power[holder] * layout.power_eff
    power = np.broadcast_to(idle_w, (n, width)) + noise[1] * 1.5
    power = np.where(train, busy + noise[1] * 18.0, power)
    power = np.where(dips, busy * 0.7 + noise[1] * 10, power)
    power = np.where(startup, idle_w + util * 1.6 + noise[1] * 6.0, power)
    power = np.where(ckpt, idle_w + 35.0 + util * 2.0 + noise[1] * 5.0, power)
    power = np.where(evals, busy * 0.66 + noise[1] * 14.0, power)
    power = np.where(wait, busy * 0.36 + noise[1] * 8.0, power)
    # The board's power limit (700 W on H100 SXM) holds spikes down.
    power = np.minimum(power, POWER_LIMIT_W - np.abs(noise[0]) * 3.0)

    clock = np.full((n, width), float(BOOST_CLOCK))
    idle = (mode == Mode.OFF) | (mode == Mode.EXITED) | (util == 0)
    clock[idle] = IDLE_CLOCK
    capped = train & (busy > 640) & (coin > 0.82)
    clock[capped] = BOOST_CLOCK - 15 * np.floor(1 + coin[capped] * 10)
    throttle = np.where(idle, GPU_IDLE, 0) | np.where(capped, SW_POWER_CAP, 0)

    mem = np.round(jobs.mem[holder]) + layout.mem_off
    mem = np.where(evals, mem + 512.0, mem)
    mem = np.where((mode == Mode.OFF) | (mode == Mode.EXITED), 0.0, mem)
    # Start-up: the CUDA context first, then the model and optimizer state arrive.
    loaded = np.clip((ks[:, None] - jobs.start[holder]) / jobs.startup[holder], 0.0, 1.0)
    mem = np.where(startup, 512.0 + np.floor((mem - 512.0) * loaded**2 / 1024) * 1024, mem)
    return _Chunk(
        k0=k0,
        holder=holder,
        mode=mode,
        noise=noise,
        coin=coin,
        util=util,
        power=power,
        clock=clock,
        throttle=throttle,
        mem=mem,
        temp_add=np.zeros((n, width)),
        blank=np.zeros((n, width), dtype=bool),
        keep=np.ones((n, width), dtype=bool),
    )


Effect = Callable[[_Chunk, slice, np.ndarray, GpuEffect, _Layout], None]


def _vanish(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    c.keep[rows, cols] = False


def _null(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    c.blank[rows, cols] = True


def _exited(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    c.util[rows, cols], c.mem[rows, cols] = 0.0, 0.0
    c.power[rows, cols] = lay.idle_w[cols] + c.noise[1][rows, cols]
    c.clock[rows, cols], c.throttle[rows, cols] = IDLE_CLOCK, GPU_IDLE


def _hung(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    c.util[rows, cols] = 0.0 if e.level < 2 else 100.0
    c.power[rows, cols] = lay.idle_w[cols] + 22.0 + c.noise[1][rows, cols] * 2
    c.throttle[rows, cols] = 0


def _host_bound(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    """A rank whose host is busy while its peers spin in a collective: no kernels (``level``
    1: blocked in host code, a data loader, a file system), or bursts of copies (``level`` 2:
    writing its checkpoint shard). Only where the job is waiting in a collective."""
    waiting = c.mode[rows, cols] == Mode.WAIT
    coin = c.coin[rows, cols]
    util = np.where(coin < 0.8, 0.0, coin * 20.0) if e.level >= 2 else np.zeros_like(coin)
    power = lay.idle_w[cols] + (35.0 + util * 2.0) * (e.level >= 2) + c.noise[1][rows, cols] * 2
    c.util[rows, cols] = np.where(waiting, util, c.util[rows, cols])
    c.power[rows, cols] = np.where(waiting, power, c.power[rows, cols])
    c.clock[rows, cols] = np.where(waiting & (util == 0), IDLE_CLOCK, c.clock[rows, cols])
    c.throttle[rows, cols] = np.where(
        waiting, np.where(util == 0, GPU_IDLE, 0), c.throttle[rows, cols]
    )


def _evaluating(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    """Rank 0 running an evaluation alone while its peers wait in a collective: an
    evaluation's utilisation and power (``level``: the job's training power)."""
    waiting = c.mode[rows, cols] == Mode.WAIT
    noise = c.noise[0][rows, cols]
    busy = e.level * lay.power_eff[cols]
    c.util[rows, cols] = np.where(waiting, 84.0 + noise * 5.0, c.util[rows, cols])
    c.power[rows, cols] = np.where(
        waiting, busy * 0.66 + c.noise[1][rows, cols] * 14.0, c.power[rows, cols]
    )


def _heating(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    seconds = np.arange(rows.start, rows.stop) + c.k0 - (e.start - 1)
    ramp = np.clip(seconds / max(1.0, e.end - e.start), 0.0, 1.0)
    c.temp_add[rows, cols] += ((14.0 + 6.0 * e.level) * ramp)[:, None]


def _thermal(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    c.temp_add[rows, cols] += 14.0 + 6.0 * e.level
    c.clock[rows, cols] = BOOST_CLOCK - 15 * np.round((280 + 380 * e.level) / 15)
    c.clock[rows, cols] -= 15 * np.floor(c.coin[rows, cols] * 4)
    c.power[rows, cols] *= 0.86
    c.throttle[rows, cols] = HW_THERMAL | SW_THERMAL if e.level > 0.7 else SW_THERMAL


def _capped(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    active = c.mode[rows, cols] == Mode.TRAIN
    c.power[rows, cols] = np.where(
        active, e.level + c.noise[1][rows, cols] * 4.0, c.power[rows, cols]
    )
    c.clock[rows, cols] = np.where(
        active, 1590 - 15 * np.floor(c.coin[rows, cols] * 8), c.clock[rows, cols]
    )
    c.throttle[rows, cols] = np.where(active, SW_POWER_CAP, c.throttle[rows, cols])


def _waiting(c: _Chunk, rows: slice, cols: np.ndarray, e: GpuEffect, lay: _Layout) -> None:
    active = c.mode[rows, cols] == Mode.TRAIN
    c.power[rows, cols] = np.where(
        active, c.power[rows, cols] * (1 - 0.6 * e.level), c.power[rows, cols]
    )


EFFECTS: dict[str, Effect] = {
    "vanish": _vanish,
    "null": _null,
    "exited": _exited,
    "idle": _hung,
    "heating": _heating,
    "thermal": _thermal,
    "capped": _capped,
    "waiting": _waiting,
    "host_bound": _host_bound,
    "evaluating": _evaluating,
}


def _temperature(
    chunk: _Chunk, layout: _Layout, state: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Temperatures follow power through the heat sink's first-order lag."""
    target = 33.0 + layout.temp_off + 0.066 * (chunk.power - 70.0) + chunk.temp_add
    previous = target[0].copy() if state is None else state
    alpha = 1.0 / TEMP_TAU_S
    temp, _ = lfilter(
        [alpha], [1.0, alpha - 1.0], target, axis=0, zi=previous[None, :] * (1 - alpha)
    )
    return temp + chunk.noise[2] * 0.4, temp[-1]


def _cumulative(
    events: list[tuple[int, int, int]], carry: dict[str, np.ndarray], name: str, chunk: _Chunk
) -> np.ndarray:
    """A cumulative counter over the chunk, continuing from the previous chunk's last value."""
    grid = np.zeros(chunk.holder.shape, dtype=np.int64)
    for k, col, amount in events:
        if chunk.k0 <= k < chunk.k0 + chunk.n:
            grid[k - chunk.k0, col] += amount
    counts: np.ndarray = np.cumsum(grid, axis=0) + carry[name]
    carry[name] = counts[-1]
    return counts


def _batch(
    plan: GpuPlan,
    layout: _Layout,
    jobs: _Jobs,
    chunk: _Chunk,
    temp: np.ndarray,
    counts: dict[str, np.ndarray],
    xids: list[tuple[int, int, int]],
) -> pa.RecordBatch:
    """The chunk as rows, values rounded as NVML reports them."""
    xid = np.zeros(chunk.holder.shape, dtype=np.int64)
    for k, col, code in xids:
        if chunk.k0 <= k < chunk.k0 + chunk.n:
            xid[k - chunk.k0, col] = code
    shape = chunk.holder.shape
    ks = np.arange(chunk.k0, chunk.k0 + chunk.n)
    times = plan.t0_us + ks[:, None] * US + layout.phase[None, :]
    flat = chunk.keep.ravel()
    null = chunk.blank.ravel()[flat]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(times.ravel()[flat], pa.int64()).cast(schema.TIME),
            layout.node_names.take(pa.array(np.broadcast_to(layout.col_node, shape).ravel()[flat])),
            pa.array(np.broadcast_to(layout.col_gpu, shape).ravel()[flat].astype(np.int16)),
            _jobs(jobs.names, chunk.holder.ravel()[flat], jobs.none),
            _metric(np.clip(np.round(chunk.util), 0, 100), flat, null, pa.float32()),
            _metric(np.clip(np.round(chunk.mem), 0, MEMORY_MIB), flat, null, pa.float32()),
            _metric(np.round(np.maximum(chunk.power, 20.0), 3), flat, null, pa.float32()),
            _metric(np.round(temp), flat, null, pa.float32()),
            _metric(chunk.clock, flat, null, pa.float32()),
            _metric(chunk.throttle, flat, null, pa.int64()),
            _metric(counts["ecc_dbe"], flat, null, pa.int64()),
            _metric(counts["ecc_sbe"], flat, null, pa.int64()),
            _xids(xid.ravel()[flat]),
            _metric(counts["pcie_replay"], flat, null, pa.int64()),
            _metric(counts["nvlink_errors"], flat, null, pa.int64()),
            _metric(counts["ib_errors"], flat, null, pa.int64()),
            _metric(counts["ib_link_downed"], flat, null, pa.int64()),
        ],
        schema=schema.GPU,
    )


def _metric(values: np.ndarray, keep: np.ndarray, null: np.ndarray, type_: pa.DataType) -> pa.Array:
    dtype = np.float32 if type_ == pa.float32() else np.int64
    return pa.array(values.ravel()[keep].astype(dtype), type_, mask=null if null.any() else None)


def _xids(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype(np.int32), pa.int32(), mask=values == 0)


def _jobs(names: pa.Array, holder: np.ndarray, off_row: int) -> pa.Array:
    if len(names) == 0:
        return pa.nulls(holder.size, pa.string())
    idle = holder == off_row
    return names.take(pa.array(np.where(idle, 0, holder), mask=idle))


def _effect_span(
    effect: GpuEffect, col_of: np.ndarray, cluster: Cluster, k0: int, k1: int
) -> tuple[np.ndarray, int, int]:
    """Columns and chunk rows whose sample time lies in the effect's ``[start, end)``."""
    phase_s = cluster.phase_us[effect.node] / US
    first = int(np.ceil(effect.start - phase_s))
    last = int(np.ceil(min(effect.end, 1e12) - phase_s))
    cols = (
        col_of[effect.node] if effect.gpu < 0 else col_of[effect.node, effect.gpu : effect.gpu + 1]
    )
    return cols, max(first, k0) - k0, min(last, k1) - k0


def _counter_events(plan: GpuPlan, col_of: np.ndarray) -> dict[str, list[tuple[int, int, int]]]:
    """Events keyed by counter as (sample index that first shows them, column, amount)."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for event in plan.counters:
        phase_s = plan.cluster.phase_us[event.node] / US
        k = plan.next_sample(event.node, max(int(np.ceil(event.time - phase_s)), 0))
        out.setdefault(event.counter, []).append(
            (k, int(col_of[event.node, event.gpu]), event.amount)
        )
    return out


def _random_misses(plan: GpuPlan, rng: np.random.Generator, n_nodes: int) -> np.ndarray:
    """(second, node) samples the collector missed: rare single scrapes plus the given drops."""
    miss = rng.random((plan.seconds, n_nodes)) < plan.miss_rate
    for node, k in plan.protect:
        if 0 <= k < plan.seconds:
            miss[k, node] = False
    for node, start, end in plan.drop:
        phase_s = plan.cluster.phase_us[node] / US
        lo = max(0, int(np.ceil(start - phase_s)))
        hi = min(plan.seconds, int(np.ceil(min(end, 1e12) - phase_s)))
        if hi > lo:
            miss[lo:hi, node] = True
    return miss
