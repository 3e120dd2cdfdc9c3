-- medic history, schema version 5: each detection's raw (evidence) score beside its calibrated
-- one.
-- score is what the rules read: the detector's evidence score mapped through the calibration
-- (an estimate of the chance the detection is real). raw_score is the evidence score itself,
-- so a report or notebook can re-threshold or re-calibrate past detections without replaying
-- (null for rows written before this version).
ALTER TABLE detections ADD COLUMN raw_score DOUBLE;
