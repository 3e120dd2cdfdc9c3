-- medic history: each detection's tier.
-- tier is 'confirmed' (positive evidence of the fault, or a silence past the bound the job's
-- own history sets) or 'suspect' (silence or slowness alone: logged and notified, not acted on
-- by the default rules). Rows written before this version were all acted on as detections:
-- they read as confirmed.
ALTER TABLE detections ADD COLUMN tier VARCHAR;
UPDATE detections SET tier = 'confirmed' WHERE tier IS NULL;
