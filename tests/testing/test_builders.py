"""The excerpt of a recording: the minutes around its incidents, starting in the state Slurm
reported before them."""

from __future__ import annotations

import polars as pl

from medic.testing.builders import T0, at, excerpt, label, log, recording


def scheduler_row(t: float, state: str, **fields: object) -> dict[str, object]:
    return {"time": at(t), "kind": "job", "job_id": "7", "state": state, **fields}


def test_an_excerpt_keeps_the_incident_and_the_state_it_starts_in() -> None:
    rec = recording(
        3600,
        logs=[log(t, f"line {t}", node="n1", job_id="7") for t in (10, 1500, 1900, 2500, 3500)],
        scheduler=[
            scheduler_row(0, "PENDING"),
            scheduler_row(5, "RUNNING", nodes=["n1", "n2"]),
            scheduler_row(2000, "FAILED", exit_code=1),
        ],
        labels=[label("i1", "crash", 1800, job_id="7")],
    )
    cut = excerpt(rec, lead_s=600, tail_s=600)
    assert (cut.start_us, cut.end_us) == (at(1200), at(2400))
    assert pl.from_arrow(cut.logs)["message"].to_list() == ["line 1500", "line 1900"]
    scheduler = pl.from_arrow(cut.scheduler)
    # The newest state before the cut, moved to the cut, then the changes within it.
    assert scheduler["state"].to_list() == ["RUNNING", "FAILED"]
    assert scheduler["time"].dt.epoch("us").to_list() == [at(1200), at(2000)]
    assert scheduler["nodes"][0].to_list() == ["n1", "n2"]
    assert cut.labels is not None and cut.labels.num_rows == 1


def test_an_excerpt_stays_inside_the_recording_and_leaves_an_unlabelled_one_whole() -> None:
    rec = recording(600, logs=[log(1, "x")], labels=[label("i1", "hang", 30, job_id="7")])
    cut = excerpt(rec, lead_s=300, tail_s=300)
    assert (cut.start_us, cut.end_us) == (T0, at(330))
    unlabelled = recording(600, logs=[log(1, "x")])
    assert excerpt(unlabelled) is unlabelled
