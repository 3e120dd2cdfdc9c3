-- medic history, schema version 8: the points of `medic sweep` runs (docs/sweeps.md).
-- One row per point of a run: when the run started (run_at) and its name (sweep: the spec
-- file's name without .toml), the point's index and detector settings as JSON
-- ({"<detector>": {"<key>": value}}), the label kind scored (null: all kinds), how many
-- recordings it replayed, and its scores by the spec's scoring rules (recall, precision,
-- false positives, latency and attribution accuracy of that kind; precision and false
-- positives over every kind). pareto: on its run's precision/recall/latency frontier.
CREATE TABLE sweep_points (
    run_at TIMESTAMPTZ NOT NULL,
    sweep VARCHAR NOT NULL,
    point INTEGER NOT NULL,
    settings VARCHAR NOT NULL,
    kind VARCHAR,
    recordings INTEGER NOT NULL,
    recall DOUBLE,
    precision DOUBLE,
    false_positives INTEGER NOT NULL,
    latency_p50_s DOUBLE,
    latency_p90_s DOUBLE,
    attribution_accuracy DOUBLE,
    overall_precision DOUBLE,
    overall_false_positives INTEGER NOT NULL,
    pareto BOOLEAN NOT NULL
);

INSERT INTO history_tables VALUES ('sweep_points', 'run_at', ['run_at', 'sweep', 'point']);
