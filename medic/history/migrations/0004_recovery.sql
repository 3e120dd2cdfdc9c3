-- medic history, schema version 4: the recovery loop (medic.actions.lifecycle and friends).

-- What happened to each node, one row per event: medic's drains as the lifecycle found them
-- ('drained'), drains set by others ('drained_by_other': health-check programs, people),
-- health checks ('check_started', 'check_passed', 'check_failed'), the outcome ('resumed', or
-- 'kept' drained for a person to look at) and lemon flags ('lemon'). job_id is the check job,
-- or the job whose incident drained the node.
CREATE TABLE node_events (
    time TIMESTAMPTZ NOT NULL,
    node VARCHAR NOT NULL,
    event VARCHAR NOT NULL,
    job_id VARCHAR,
    detail VARCHAR NOT NULL
);

INSERT INTO history_tables VALUES
    ('node_events', 'time', ['time', 'node', 'event', 'detail']);

-- The goodput ledger: per incident (not stragglers, as in gpu_hours_saved), the GPU-hours lost
-- to each phase, from measured times only (a phase whose times are unknown is null, not
-- guessed):
--   detect_s       detected_at - onset (the detector's onset estimate)
--   act_s          first Slurm action taken - detected_at
--   requeue_wait_s the job's first RUNNING event after medic's requeue - the requeue
--   recompute_s    onset - the newest minute with a checkpoint save (job_progress, so at most
--                  60 s more than the truth) before it: the work redone from that checkpoint
--   lost_gpu_hours the phases' sum x the job's GPUs / 3600
--   watchdog_gpu_hours the same with detection and action replaced by the NCCL watchdog's
--                  timeout, the baseline without medic; saved_gpu_hours their difference
CREATE MACRO goodput(watchdog_s, gpus_per_node) AS TABLE
WITH requeued AS (
    SELECT detection_id AS incident_id, min(time) AS requeued_at
    FROM actions
    WHERE action = 'requeue' AND remedy(action, status, guard)
    GROUP BY detection_id
),
rerun AS (
    SELECT r.incident_id, min(e.time) AS running_at
    FROM requeued r
    JOIN v_incidents i USING (incident_id)
    JOIN job_events e ON e.job_id = i.job_id AND e.state = 'RUNNING' AND e.time > r.requeued_at
    GROUP BY r.incident_id
),
checkpoint AS (
    SELECT i.incident_id, max(p.minute) AS checkpoint_at
    FROM v_incidents i
    JOIN job_progress p
        ON p.job_id = i.job_id
        AND list_contains(p.phases, 'checkpoint_end')
        AND p.minute <= i.onset
    GROUP BY i.incident_id
),
phases AS (
    SELECT
        s.incident_id, s.job_id, s.kind, s.gpus, s.gpus_from, s.onset_known,
        (epoch_us(s.detected_at) - epoch_us(s.onset)) / 1e6 AS detect_s,
        (epoch_us(s.acted_at) - epoch_us(s.detected_at)) / 1e6 AS act_s,
        (epoch_us(w.running_at) - epoch_us(q.requeued_at)) / 1e6 AS requeue_wait_s,
        (epoch_us(s.onset) - epoch_us(c.checkpoint_at)) / 1e6 AS recompute_s
    FROM gpu_hours_saved(watchdog_s, gpus_per_node) s
    LEFT JOIN requeued q USING (incident_id)
    LEFT JOIN rerun w USING (incident_id)
    LEFT JOIN checkpoint c USING (incident_id)
)
SELECT
    *,
    (coalesce(detect_s, 0) + coalesce(act_s, 0) + coalesce(requeue_wait_s, 0)
        + coalesce(recompute_s, 0)) * gpus / 3600.0 AS lost_gpu_hours,
    (watchdog_s + coalesce(requeue_wait_s, 0) + coalesce(recompute_s, 0)) * gpus / 3600.0
        AS watchdog_gpu_hours,
    greatest(watchdog_s - coalesce(detect_s, 0) - coalesce(act_s, 0), 0) * gpus / 3600.0
        AS saved_gpu_hours
FROM phases;

-- GPU-hours each job held while RUNNING (from one job event to the job's next, or to the newest
-- event of the history), from its allocated nodes x gpus_per_node.
CREATE MACRO allocated_gpu_hours(gpus_per_node) AS TABLE
WITH spans AS (
    SELECT
        job_id, state, len(nodes) AS node_count,
        epoch_us(coalesce(
            lead(time) OVER (PARTITION BY job_id ORDER BY time),
            (SELECT max(time) FROM job_events)
        )) - epoch_us(time) AS us
    FROM job_events
)
SELECT job_id, sum(us * node_count) * gpus_per_node / 3.6e9 AS gpu_hours
FROM spans
WHERE state = 'RUNNING' AND node_count > 0
GROUP BY job_id;
