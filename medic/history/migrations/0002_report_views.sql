-- medic history, schema version 2: the report views (what `medic report` prints; query them with
-- the duckdb CLI: `duckdb -readonly medic-history.duckdb "FROM v_time_to_detect"`).
-- Seconds are DOUBLE; days are UTC dates.

-- An action was taken when no guard stopped it and it succeeded: 'done' (executed and verified in
-- Slurm) or 'recorded' (a backtest's recorder took it down in place of executing it). Monitor
-- mode stops Slurm actions with the guard 'monitor'; 'failed' actions were not taken.
CREATE MACRO taken(status, guard) AS guard IS NULL AND status IN ('done', 'recorded');

-- Remedies: the actions that act on Slurm (a notification alone changes nothing there).
CREATE MACRO remedy(action, status, guard) AS action <> 'notify' AND taken(status, guard);

-- One row per incident: the detection that opened it, the actions decided on it, the symptoms
-- that joined it (once it closed) and its outcome: the first Slurm state of the job at or after
-- the onset ('restarted' for RUNNING), else 'quiet' (closed without a job state change) or 'open'.
CREATE VIEW v_incidents AS
WITH decisions AS (
    SELECT
        detection_id,
        count(*) AS decisions,
        count(*) FILTER (WHERE guard IS NOT NULL) AS suppressed,
        min(time) FILTER (WHERE remedy(action, status, guard)) AS acted_at,
        arg_min(action, time) FILTER (WHERE remedy(action, status, guard)) AS first_action
    FROM actions
    GROUP BY detection_id
)
SELECT
    d.id AS incident_id,
    d.job_id,
    d.kind,
    d.culprits,
    d.score,
    d.detector,
    d.summary,
    d.onset,
    d.detected_at,
    a.acted_at,
    a.first_action,
    coalesce(a.decisions, 0) AS decisions,
    coalesce(a.suppressed, 0) AS suppressed,
    coalesce(i.symptom_count, 0) AS symptoms,
    i.last_seen,
    i.id IS NOT NULL AS closed,
    CASE
        WHEN e.state = 'RUNNING' THEN 'restarted'
        WHEN e.state IS NOT NULL THEN lower(e.state)
        WHEN i.id IS NOT NULL THEN 'quiet'
        ELSE 'open'
    END AS outcome
FROM detections d
ASOF LEFT JOIN job_events e
    ON e.job_id = d.job_id AND e.time >= coalesce(d.onset, d.detected_at)
LEFT JOIN decisions a ON a.detection_id = d.id
LEFT JOIN incidents i ON i.id = d.id;
COMMENT ON VIEW v_incidents IS
    'Incidents: opening detection, actions decided, symptoms, outcome (restarted, a Slurm end state, quiet, open).';

-- Time to detect: detected_at - onset, for detections whose detector estimated the onset.
CREATE VIEW v_time_to_detect AS
SELECT
    incident_id, job_id, kind, detector, onset, detected_at,
    greatest(epoch_us(detected_at) - epoch_us(onset), 0) / 1e6 AS seconds
FROM v_incidents
WHERE onset IS NOT NULL;
COMMENT ON VIEW v_time_to_detect IS 'Seconds from the estimated onset to the detection.';

-- Time to act: the first remedy taken on an incident (see remedy), measured from the onset (null
-- when the onset is unknown) and from the detection.
CREATE VIEW v_time_to_act AS
SELECT
    incident_id, job_id, kind, first_action, onset, detected_at, acted_at,
    greatest(epoch_us(acted_at) - epoch_us(onset), 0) / 1e6 AS seconds_from_onset,
    greatest(epoch_us(acted_at) - epoch_us(detected_at), 0) / 1e6 AS seconds_from_detection
FROM v_incidents
WHERE acted_at IS NOT NULL;
COMMENT ON VIEW v_time_to_act IS
    'Seconds from onset and from detection to the first Slurm action taken (done or recorded, not suppressed).';

CREATE VIEW v_detections_daily AS
SELECT (detected_at AT TIME ZONE 'UTC')::DATE AS day, kind, count(*) AS detections
FROM detections
GROUP BY ALL
ORDER BY day, kind;
COMMENT ON VIEW v_detections_daily IS 'Detections (incidents opened) per UTC day and kind.';

CREATE VIEW v_actions_daily AS
SELECT
    (time AT TIME ZONE 'UTC')::DATE AS day,
    action,
    mode,
    status,
    guard,
    count(*) AS actions,
    count(*) FILTER (WHERE taken(status, guard)) AS taken
FROM actions
GROUP BY ALL
ORDER BY day, action, mode, status, guard;
COMMENT ON VIEW v_actions_daily IS 'Action decisions per UTC day, action, mode, status and guard.';

-- Nodes that fail most: incidents that blamed the node (it is among the culprits) and drains
-- taken on it.
CREATE VIEW v_node_failures AS
WITH blamed AS (
    SELECT unnest(culprits) AS node, job_id, kind, detected_at FROM detections
),
drains AS (
    SELECT node, count(*) AS drains
    FROM actions
    WHERE action = 'drain' AND node IS NOT NULL AND taken(status, guard)
    GROUP BY node
)
SELECT
    b.node,
    count(*) AS incidents,
    count(DISTINCT b.job_id) AS jobs,
    list_sort(list_distinct(list(b.kind))) AS kinds,
    coalesce(any_value(r.drains), 0) AS drains,
    min(b.detected_at) AS first_at,
    max(b.detected_at) AS last_at
FROM blamed b
LEFT JOIN drains r USING (node)
GROUP BY b.node
ORDER BY incidents DESC, b.node;
COMMENT ON VIEW v_node_failures IS 'Per node: incidents that blamed it, jobs hit, kinds, drains taken.';

-- GPUs that fail most, from the per-minute telemetry: a fault minute has an Xid event or a new
-- uncorrectable ECC error; the error columns add up counter increases (a counter reset adds 0).
CREATE VIEW v_gpu_failures AS
WITH steps AS (
    SELECT
        node, gpu, minute, xids,
        greatest(ecc_dbe_max - lag(ecc_dbe_max) OVER w, 0) AS new_dbe,
        greatest(ecc_sbe_max - lag(ecc_sbe_max) OVER w, 0) AS new_sbe,
        greatest(nvlink_errors_max - lag(nvlink_errors_max) OVER w, 0) AS new_nvlink,
        greatest(pcie_replay_max - lag(pcie_replay_max) OVER w, 0) AS new_pcie
    FROM gpu_minutes
    WINDOW w AS (PARTITION BY node, gpu ORDER BY minute)
),
marked AS (
    SELECT *, len(xids) > 0 OR coalesce(new_dbe, 0) > 0 AS fault FROM steps
)
SELECT
    node,
    gpu,
    count(*) FILTER (WHERE fault) AS fault_minutes,
    list_sort(list_distinct(flatten(list(xids)))) AS xids,
    coalesce(sum(new_dbe), 0) AS ecc_dbe,
    coalesce(sum(new_sbe), 0) AS ecc_sbe,
    coalesce(sum(new_nvlink), 0) AS nvlink_errors,
    coalesce(sum(new_pcie), 0) AS pcie_replays,
    min(minute) FILTER (WHERE fault) AS first_fault,
    max(minute) FILTER (WHERE fault) AS last_fault
FROM marked
GROUP BY node, gpu
HAVING fault_minutes > 0 OR nvlink_errors > 0
ORDER BY fault_minutes DESC, ecc_dbe DESC, nvlink_errors DESC, node, gpu;
COMMENT ON VIEW v_gpu_failures IS
    'Per GPU: minutes with an Xid or a new uncorrectable ECC error, and error counter increases.';

-- Restarts per job: a RUNNING state after an earlier state other than PENDING (the job ran, or
-- was requeued, failed or preempted, before); requeues medic took; incidents opened.
CREATE VIEW v_job_restarts AS
WITH ordered AS (
    SELECT
        job_id,
        state,
        count(*) FILTER (WHERE state <> 'PENDING') OVER (
            PARTITION BY job_id ORDER BY time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS earlier
    FROM job_events
),
restarts AS (
    SELECT job_id, count(*) FILTER (WHERE state = 'RUNNING' AND earlier > 0) AS restarts
    FROM ordered
    GROUP BY job_id
),
requeues AS (
    SELECT job_id, count(*) AS medic_requeues
    FROM actions
    WHERE action = 'requeue' AND job_id IS NOT NULL AND taken(status, guard)
    GROUP BY job_id
),
opened AS (
    SELECT job_id, count(*) AS incidents FROM detections WHERE job_id IS NOT NULL GROUP BY job_id
)
SELECT
    job_id,
    coalesce(restarts, 0) AS restarts,
    coalesce(medic_requeues, 0) AS medic_requeues,
    coalesce(incidents, 0) AS incidents
FROM restarts
FULL JOIN requeues USING (job_id)
FULL JOIN opened USING (job_id)
ORDER BY restarts DESC, incidents DESC, job_id;
COMMENT ON VIEW v_job_restarts IS 'Per job: restarts seen in Slurm, requeues medic took, incidents.';

-- Progress per job per minute; steps = advance of the last step since the previous minute
-- (from the first step of the minute when the step counter went back, e.g. after a restart
-- from a checkpoint).
CREATE VIEW v_job_progress AS
SELECT
    minute, job_id, first_step, last_step,
    CASE
        WHEN previous_step IS NULL OR first_step < previous_step THEN last_step - first_step
        ELSE last_step - previous_step
    END AS steps,
    coalesce(first_step < previous_step, false) AS step_reset,
    step_events, median_step_time_s, median_throughput, ranks, nodes, framework, phases
FROM (
    SELECT *, lag(last_step IGNORE NULLS) OVER (PARTITION BY job_id ORDER BY minute) AS previous_step
    FROM job_progress
);
COMMENT ON VIEW v_job_progress IS 'Per job per minute: steps advanced, step time, throughput, phases.';

-- GPU-hours saved against waiting for the NCCL watchdog, per incident other than stragglers
-- (the watchdog never fires on a job that is slow but progressing):
--   gpu_hours_saved = max(watchdog_s - response_s, 0) * gpus / 3600
--   response_s      = (acted_at, or detected_at when no action was taken) - onset
--                     (onset = detected_at when the detector gave none: onset_known = false)
--   gpus            = distinct GPUs reporting telemetry for the job in the 15 minutes up to the
--                     detection, else the job's allocated nodes (last Slurm event) * gpus_per_node
CREATE MACRO gpu_hours_saved(watchdog_s, gpus_per_node) AS TABLE
WITH held AS (
    SELECT i.incident_id, count(DISTINCT (g.node, g.gpu)) AS telemetry_gpus
    FROM v_incidents i
    JOIN gpu_minutes g
        ON g.job_id = i.job_id
        AND g.minute BETWEEN i.detected_at - INTERVAL 15 MINUTE AND i.detected_at
    GROUP BY i.incident_id
),
allocated AS (
    SELECT i.incident_id, len(e.nodes) * gpus_per_node AS allocated_gpus
    FROM v_incidents i
    ASOF JOIN (SELECT job_id, time, nodes FROM job_events WHERE len(nodes) > 0) e
        ON e.job_id = i.job_id AND e.time <= i.detected_at
)
SELECT
    i.incident_id,
    i.job_id,
    i.kind,
    i.onset,
    i.detected_at,
    i.acted_at,
    i.onset IS NOT NULL AS onset_known,
    greatest(
        epoch_us(coalesce(i.acted_at, i.detected_at)) - epoch_us(coalesce(i.onset, i.detected_at)),
        0
    ) / 1e6 AS response_s,
    coalesce(h.telemetry_gpus, a.allocated_gpus) AS gpus,
    CASE
        WHEN h.telemetry_gpus IS NOT NULL THEN 'telemetry'
        WHEN a.allocated_gpus IS NOT NULL THEN 'allocation'
    END AS gpus_from,
    greatest(watchdog_s - response_s, 0) * gpus / 3600.0 AS gpu_hours_saved
FROM v_incidents i
LEFT JOIN held h USING (incident_id)
LEFT JOIN allocated a USING (incident_id)
WHERE i.kind <> 'straggler';

CREATE VIEW v_gpu_hours_saved AS SELECT * FROM gpu_hours_saved(600, 8);
COMMENT ON VIEW v_gpu_hours_saved IS
    'max(600 s NCCL watchdog - (action or detection - onset), 0) * GPUs / 3600 per incident (not stragglers); gpu_hours_saved(watchdog_s, gpus_per_node) for other settings.';
