"""Sources of Arrow batches (replay, VictoriaLogs, files, telemetry, Slurm) and log parsing."""
