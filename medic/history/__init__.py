"""DuckDB history: detections, actions, incidents, job progress; migrations and report queries."""
