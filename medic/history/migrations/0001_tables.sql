-- medic history, schema version 1: the tables.
-- Times are TIMESTAMPTZ in UTC. Every table is append-only; a row whose key is already present
-- is ignored on insert (see history_tables), so a restarted service can write rows again
-- without duplicating them.

-- The tables medic appends to: the column rows are ordered and pruned by, and the columns that
-- identify a row (the time column is always one of them).
CREATE TABLE history_tables (
    name VARCHAR PRIMARY KEY,
    time_column VARCHAR NOT NULL,
    key_columns VARCHAR[] NOT NULL
);

-- One row per emitted detection (the detection that opened an incident); the spec's
-- detections.parquet columns plus the detector's onset estimate when it gave one.
CREATE TABLE detections (
    detected_at TIMESTAMPTZ NOT NULL,
    job_id VARCHAR,
    kind VARCHAR NOT NULL,
    culprits VARCHAR[] NOT NULL,
    ranks INTEGER[] NOT NULL,
    score DOUBLE NOT NULL,
    detector VARCHAR NOT NULL,
    summary VARCHAR NOT NULL,
    onset TIMESTAMPTZ,
    -- the same id as medic.detectors.base.detection_id, which actions.detection_id refers to
    id VARCHAR GENERATED ALWAYS AS (
        left(sha1(epoch_us(detected_at)::VARCHAR || '|' || coalesce(job_id, '') || '|'
                  || kind || '|' || detector), 16)
    ) VIRTUAL
);

-- Every decision of the actions stage, including those a guard suppressed (medic.schema.ACTIONS).
CREATE TABLE actions (
    time TIMESTAMPTZ NOT NULL,
    detection_id VARCHAR NOT NULL,
    job_id VARCHAR,
    node VARCHAR,
    action VARCHAR NOT NULL,
    mode VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    guard VARCHAR,
    reason VARCHAR NOT NULL
);

-- Closed incidents: the detection that opened one (id = detections.id) and the symptoms that
-- joined it until it closed.
CREATE TABLE incidents (
    id VARCHAR NOT NULL,
    job_id VARCHAR,
    kind VARCHAR NOT NULL,
    opened_at TIMESTAMPTZ NOT NULL,
    last_seen TIMESTAMPTZ NOT NULL,
    symptom_count INTEGER NOT NULL,
    symptom_kinds VARCHAR[] NOT NULL,
    symptom_culprits VARCHAR[] NOT NULL
);

-- Job state changes seen from Slurm; state is the base state without flags
-- ('CANCELLED by 0' is stored as CANCELLED).
CREATE TABLE job_events (
    time TIMESTAMPTZ NOT NULL,
    job_id VARCHAR NOT NULL,
    state VARCHAR NOT NULL,
    nodes VARCHAR[],
    exit_code INTEGER,
    reason VARCHAR
);

-- Training progress per job per minute, from the derived "progress" stream: the training steps
-- logged (first and last step number, how many step lines, median step time and throughput),
-- the ranks and nodes that logged, and the other events seen (eval_step, checkpoint_start, ...).
CREATE TABLE job_progress (
    minute TIMESTAMPTZ NOT NULL,
    job_id VARCHAR NOT NULL,
    framework VARCHAR,
    first_step BIGINT,
    last_step BIGINT,
    step_events INTEGER NOT NULL,
    median_step_time_s DOUBLE,
    median_throughput DOUBLE,
    ranks INTEGER NOT NULL,
    nodes INTEGER NOT NULL,
    phases VARCHAR[] NOT NULL
);

-- GPU telemetry per GPU per minute; counters are cumulative, so the minute keeps their maximum.
CREATE TABLE gpu_minutes (
    minute TIMESTAMPTZ NOT NULL,
    node VARCHAR NOT NULL,
    gpu SMALLINT NOT NULL,
    job_id VARCHAR,
    samples INTEGER NOT NULL,
    util_mean REAL,
    util_max REAL,
    mem_used_max_mib REAL,
    power_mean_w REAL,
    power_max_w REAL,
    temp_mean_c REAL,
    temp_max_c REAL,
    sm_clock_min_mhz REAL,
    throttle_reasons BIGINT,
    ecc_dbe_max BIGINT,
    ecc_sbe_max BIGINT,
    pcie_replay_max BIGINT,
    nvlink_errors_max BIGINT,
    xids INTEGER[] NOT NULL
);

INSERT INTO history_tables VALUES
    ('detections', 'detected_at', ['detected_at', 'job_id', 'kind', 'detector']),
    ('actions', 'time', ['time', 'detection_id', 'action', 'node', 'job_id', 'status']),
    ('incidents', 'opened_at', ['opened_at', 'id']),
    ('job_events', 'time', ['time', 'job_id', 'state']),
    ('job_progress', 'minute', ['minute', 'job_id']),
    ('gpu_minutes', 'minute', ['minute', 'node', 'gpu']);
