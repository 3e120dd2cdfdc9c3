"""Rules (detections to decisions, with guards) and executors (Slurm CLI, slurmrestd, recorder)."""
