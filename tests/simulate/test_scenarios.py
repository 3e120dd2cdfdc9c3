"""Every scenario yields a valid recording whose labels are what the scenario claims."""

from pathlib import Path

import polars as pl
import pytest

from medic import schema
from medic.recording import read_recording, validate_recording, write_recording
from medic.simulate import SCENARIOS
from tests.simulate.conftest import SMALL, Simulated, frames


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_recording_is_valid_and_labelled_as_claimed(
    name: str, simulated: Simulated, tmp_path: Path
) -> None:
    scenario = SCENARIOS[name]
    recording = simulated(name, 1, **SMALL)
    path = write_recording(tmp_path / recording.name, recording)
    assert validate_recording(path) == []
    back = read_recording(path)
    assert back.labels is not None
    assert back.gpu.equals(recording.gpu)
    labels = frames(recording)["labels"]
    if scenario.label_kind is None:
        assert labels.is_empty()
    elif scenario.label_kind == "mixed":
        assert labels.height >= 2
        assert labels.get_column("job_id").n_unique() == labels.height
    else:
        # One incident; a nan_divergence repeats in the job's requeued attempt (a label each).
        assert labels.height == 1 or scenario.label_kind == "nan_divergence"
        assert labels.get_column("job_id").n_unique() == 1
        assert labels.get_column("kind").unique().to_list() == [scenario.label_kind]
    assert set(labels.get_column("kind")) <= set(schema.DETECTION_KINDS)
    assert recording.meta["scenario"] == name
    assert recording.name == f"{name}-s1"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_labels_point_at_real_jobs_and_nodes_inside_the_recording(
    name: str, simulated: Simulated
) -> None:
    recording = simulated(name, 1, **SMALL)
    data = frames(recording)
    jobs = set(data["gpu"].get_column("job_id").drop_nulls())
    nodes = set(data["gpu"].get_column("node"))
    for label in data["labels"].iter_rows(named=True):
        assert label["job_id"] in jobs
        assert set(label["culprit_nodes"]) <= nodes
        assert recording.start_us <= label["onset"] < recording.end_us


def test_unknown_scenario_and_bad_parameters_are_one_line_config_errors() -> None:
    from medic.config import ConfigError
    from medic.simulate import simulate

    with pytest.raises(ConfigError, match="unknown scenario 'nope'"):
        simulate("nope", 1)
    with pytest.raises(ConfigError, match="unknown setting 'oom.bogus'"):
        simulate("oom", 1, bogus=1)
    with pytest.raises(ConfigError, match="'xid79_cascade.telemetry' must be one of"):
        simulate("xid79_cascade", 1, telemetry="gone")
    with pytest.raises(ConfigError, match="job_nodes cannot exceed cluster_nodes"):
        simulate("healthy", 1, job_nodes=8, cluster_nodes=4)
    with pytest.raises(ConfigError, match="seed"):
        simulate("healthy", -1)
    with pytest.raises(ConfigError, match="unknown trap"):
        simulate("healthy", 1, traps=["fireworks"])


def test_healthy_recording_has_a_zero_row_labels_table(simulated: Simulated) -> None:
    recording = simulated("healthy", 1, **SMALL)
    assert recording.labels is not None
    assert recording.labels.num_rows == 0
    assert pl.from_arrow(recording.gpu).height > 0
