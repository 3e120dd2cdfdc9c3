-- medic history, schema version 6: an action whose effect Slurm shows only in part ('partial':
-- a requeue that happened without its exclusion) was taken: the job did restart, so it counts
-- as a remedy, towards the restart budget and in the time to act.
CREATE OR REPLACE MACRO taken(status, guard) AS
    guard IS NULL AND status IN ('done', 'partial', 'recorded');
