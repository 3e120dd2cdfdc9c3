-- medic history, schema version 3: when each detection was made by the wall clock, and the
-- incident it belongs to.
-- detected_at is event time (the newest row or watermark the pipeline had consumed: for a log
-- line, the time it carries); detected_wall is the wall clock when medic serve recorded the
-- detection (null in backtests and for rows written before this version). Their difference is
-- what ingest and the detectors' waits cost live.
-- incident_id is the id of the incident's first detection: a later detection of the same
-- incident (a kernel Xid after the crash it caused, a fault on another node) names it.
ALTER TABLE detections ADD COLUMN detected_wall TIMESTAMPTZ;
ALTER TABLE detections ADD COLUMN incident_id VARCHAR;

-- Time to detect, in event time (seconds) and by the wall clock (wall_seconds: from the onset,
-- the time the fault's line carries, to the wall clock of the detection; null when unknown).
CREATE OR REPLACE VIEW v_time_to_detect AS
SELECT
    v.incident_id, v.job_id, v.kind, v.detector, v.onset, v.detected_at, d.detected_wall,
    greatest(epoch_us(v.detected_at) - epoch_us(v.onset), 0) / 1e6 AS seconds,
    greatest(epoch_us(d.detected_wall) - epoch_us(v.onset), 0) / 1e6 AS wall_seconds
FROM v_incidents v
JOIN detections d ON d.id = v.incident_id
WHERE v.onset IS NOT NULL;
COMMENT ON VIEW v_time_to_detect IS
    'Seconds from the estimated onset to the detection, in event time and by the wall clock.';
