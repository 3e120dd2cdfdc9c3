"""A two-node Ray cluster on this machine, for tests and benches of ``--ray``: a head and one
worker node, one CPU each, as ``ray start`` makes them on a real cluster (docs/scaling.md).
Needs ``medic[ray]``; ray is imported only when a cluster is started.

Each node is one ``ray start --block`` process in a session of its own; stopping the cluster
ends every process of those two sessions (the nodes' daemons and the task workers they spawned)
by process id, and removes the cluster's temporary directory. Ray advertises the machine's own
address rather than 127.0.0.1 for its nodes, but nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import medic

MEDIC_ROOT = Path(medic.__file__).resolve().parents[1]
"""Where this medic is imported from: the nodes' task workers import the same one."""
START_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LocalRayCluster:
    address: str
    temp_dir: Path
    nodes: list[subprocess.Popen[bytes]]

    def stop(self) -> None:
        import ray

        ray.shutdown()
        sessions = {node.pid for node in self.nodes}
        for node in self.nodes:
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)  # ray start --block stops its node's daemons
        for node in self.nodes:
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
        for pid in _in_sessions(sessions):  # task workers left behind, if any
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _in_sessions(sessions: set[int]) -> list[int]:
    """Processes whose session id is one of ``sessions`` (field 6 of /proc/PID/stat)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sessions:
            found.append(int(stat.parent.name))
    return found


ATTEMPTS = 3
"""Ray gives a node 30 s to register with the head, which a loaded machine can miss: a start
that fails so is stopped and made again."""


def start_cluster(num_cpus: int = 1) -> LocalRayCluster:
    """Start the head and the worker node (``num_cpus`` each), wait until both have joined,
    and leave this process connected to the cluster (``ray.init``): every medic run in it then
    uses that connection, and the task workers Ray starts for it serve them all."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _start(num_cpus)
        except RuntimeError:
            if attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _start(num_cpus: int) -> LocalRayCluster:
    ray_bin = str(Path(sys.executable).parent / "ray")
    # A short directory: Ray's unix sockets live under it, and their paths have a length limit.
    temp_dir = Path(tempfile.mkdtemp(prefix="medic-ray-", dir="/tmp"))
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(MEDIC_ROOT), os.getenv("PYTHONPATH")])),
        "RAY_USAGE_STATS_ENABLED": "0",
        # Patient health checks: on a busy machine (a test suite in parallel workers) a node
        # that answers late must not be declared dead and end its raylet.
        "RAY_health_check_timeout_ms": "60000",
        "RAY_health_check_failure_threshold": "10",
        "RAY_gcs_rpc_server_reconnect_timeout_s": "300",
        "RAY_NUM_REDIS_GET_RETRIES": "150",
        "RAY_enable_metrics_collection": "0",  # no metrics exporter for a node to wait on
    }
    common = [f"--num-cpus={num_cpus}", "--num-gpus=0", "--block", "--disable-usage-stats"]
    head = [
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        *_client_server_port(),
        f"--temp-dir={temp_dir}",
        *_agent_ports(),
    ]
    worker = [
        f"--address=127.0.0.1:{port}",
        "--node-ip-address=127.0.0.1",
        *_agent_ports(),
    ]
    cluster = LocalRayCluster(f"127.0.0.1:{port}", temp_dir, [])
    log = temp_dir / "start.log"
    try:
        with log.open("ab") as out:
            for args in (head, worker):  # one at a time: two starting at once load a small box
                cluster.nodes.append(
                    subprocess.Popen(
                        [ray_bin, "start", *args, *common],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
                _wait_for(cluster, lambda: log.read_text(errors="replace").count(STARTED))
        _connect(cluster, 2)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _client_server_port() -> list[str]:
    """A free port for the Ray Client server where its package (grpcio, ``ray[client]``) is
    installed: Ray then starts one on 10001 unless told otherwise, which two clusters on one
    machine would share. A plain ``ray`` install has no client server, and naming a port for
    it makes ``ray start`` fail."""
    return [f"--ray-client-server-port={free_port()}"] if importlib.util.find_spec("grpc") else []


def _agent_ports() -> list[str]:
    """Fixed ports for a node's agents: two nodes on one machine must not share the defaults,
    and a raylet given no port waits a bounded time for the agent to report the one it took,
    which a slow agent start (a loaded machine) misses, and the raylet then ends."""
    return [
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
    ]


STARTED = "Ray runtime started"
"""What ``ray start`` prints once its node has registered with the head."""


def _wait_for(cluster: LocalRayCluster, started: Callable[[], int]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while started() < len(cluster.nodes):
        _check_running(cluster)
        if time.monotonic() > deadline:
            raise RuntimeError(f"ray start did not start in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.5)


def _connect(cluster: LocalRayCluster, count: int) -> None:
    import ray

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # the driver attaches to this machine's node, which may not be listed yet
        try:
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
            break
        except (ConnectionError, RuntimeError):
            _check_running(cluster)
            if time.monotonic() > deadline:
                raise
    while time.monotonic() < deadline:
        _check_running(cluster)
        alive = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
        if len(alive) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Ray cluster did not reach {count} nodes in {START_TIMEOUT_S:.0f} s")


def _check_running(cluster: LocalRayCluster) -> None:
    if any(node.poll() is not None for node in cluster.nodes):
        log = (cluster.temp_dir / "start.log").read_text(errors="replace").strip()
        last = log.splitlines()[-1] if log else "no output"
        raise RuntimeError(f"ray start exited ({last})")
