"""DuckDB history: detections, actions, incidents, job progress; migrations and report queries."""


class HistoryError(ValueError):
    """The history database cannot be opened, migrated, written or queried; one line says why."""
