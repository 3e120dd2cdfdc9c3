"""A two-node Ray cluster on this machine for the tests: a head and one worker node, one CPU
each, as ``ray start`` makes them on a real cluster (docs/scaling.md).

Each node is one ``ray start --block`` process in a session of its own; stopping the cluster
ends every process of those two sessions (the nodes' daemons and the task workers they spawned)
by process id, and removes the cluster's temporary directory. Ray advertises the machine's own
address rather than 127.0.0.1 for its nodes, but nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def start_cluster() -> LocalRayCluster:
    """Start the head and the worker node, wait until both have joined, and leave this process
    connected to the cluster (``ray.init``): every medic run in it then uses that connection,
    and the task workers Ray starts for it serve them all."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    # A short directory: Ray's unix sockets live under it, and their paths have a length limit.
    temp_dir = Path(tempfile.mkdtemp(prefix="medic-ray-", dir="/tmp"))
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    common = ["--num-cpus=1", "--num-gpus=0", "--block", "--disable-usage-stats"]
    head = [
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--temp-dir={temp_dir}",
    ]
    worker = [
        f"--address=127.0.0.1:{port}",
        "--node-ip-address=127.0.0.1",
        f"--dashboard-agent-listen-port={free_port()}",
    ]
    log = (temp_dir / "start.log").open("ab")
    nodes = [
        subprocess.Popen(
            [ray_bin, "start", *args, *common],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        for args in (head, worker)
    ]
    cluster = LocalRayCluster(f"127.0.0.1:{port}", temp_dir, nodes)
    try:
        _wait_for_nodes(cluster, 2)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_for_nodes(cluster: LocalRayCluster, count: int) -> None:
    import ray

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(node.poll() is not None for node in cluster.nodes):
            raise RuntimeError(f"ray start exited; see {cluster.temp_dir}/start.log")
        try:
            with socket.create_connection(("127.0.0.1", int(cluster.address.split(":")[1])), 1):
                break
        except OSError:
            time.sleep(0.5)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    while time.monotonic() < deadline:
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) >= count:
            return
        time.sleep(0.5)
    ray.shutdown()
    raise RuntimeError(f"the Ray cluster did not reach {count} nodes in {START_TIMEOUT_S:.0f} s")
