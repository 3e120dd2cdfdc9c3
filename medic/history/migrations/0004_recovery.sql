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
