"""``medic diagnose``: raw log files (job output, kernel and journal exports, Slurm logs)
through the one pipeline, without a recording: what went wrong, where, and what medic would do.
"""
