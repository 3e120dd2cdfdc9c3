"""A small hand-built history whose report figures are known (used by the view and report
tests)."""

from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter, detection_rows
from medic.incident import Incident
from medic.testing.builders import at, batch
from tests.history.rows import action, actions, detection, gpu, job

# Job 100 runs on n1 and n2 (4 GPUs reporting telemetry); n1's GPU 1 logs Xid 79 at 100 s and
# two uncorrectable ECC errors at 110 s. A: gpu_fault with onset 100 s, detected at 130 s,
# notified at 130.5 s, n1 drained at 131 s, the job requeued at 132 s and running again at
# 200 s. B: a hang of job 200 (nodes n3, n4, no telemetry, no onset) detected at 400 s whose
# actions guards suppressed. C: a straggler of job 300, onset 500 s, detected 800 s.
A = detection(130, "gpu_fault", "100", ["n1"], onset=100, detector="telemetry")
B = detection(400, "hang", "200", ["n3"], detector="hang")
C = detection(800, "straggler", "300", ["n1"], onset=500, detector="straggler")


def telemetry(t: float, node: str, index: int) -> dict[str, object]:
    bad = node == "n1" and index == 1
    return gpu(
        t,
        node,
        index,
        util=90.0,
        xid=79 if bad and t == 100 else None,
        ecc_dbe=2 if bad and t >= 110 else 0,
        nvlink_errors=0,
    )


def fill(store: DuckDBStore) -> DuckDBStore:
    writer = HistoryWriter(store)
    writer.update(
        batch(
            "scheduler",
            [
                job(0, "100", "PENDING"),
                job(5, "100", "RUNNING", ["n1", "n2"]),
                job(10, "200", "RUNNING", ["n3", "n4"]),
                job(133, "100", "REQUEUED"),
                job(134, "100", "PENDING"),
                job(200, "100", "RUNNING", ["n2", "n5"]),
            ],
        )
    )
    samples = [telemetry(t, n, i) for t in range(0, 300, 10) for n in ("n1", "n2") for i in (0, 1)]
    writer.update(batch("gpu", samples))
    writer.flush()
    store.append("detections", detection_rows([A, B, C]))
    store.append(
        "actions",
        actions(
            action(130.5, A.id, "notify", job_id="100"),
            action(131, A.id, "drain", node="n1"),
            action(132, A.id, "requeue", job_id="100"),
            action(
                400, B.id, "drain", node="n3", job_id="200", status="suppressed", guard="cooldown"
            ),
            action(400, B.id, "requeue", job_id="200", status="suppressed", guard="monitor"),
        ),
    )
    writer.record_incidents([Incident(first=A, last_seen=at(160), symptoms=[C], symptom_count=2)])
    return store
