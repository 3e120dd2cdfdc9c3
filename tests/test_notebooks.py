"""The notebooks run top to bottom on small recordings, as a user would run them."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from medic.calibration import read_calibration
from medic.recording import write_recording
from medic.simulate import simulate

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(scope="module")
def small_recordings(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("recordings")
    cases = [("gpu_hang", 3), ("healthy_checkpoints", 3)]
    return [
        write_recording(
            root / f"{name}-s{seed}",
            simulate(name, seed, duration_min=14.0, cluster_nodes=4, job_nodes=2, jobs=1),
        )
        for name, seed in cases
    ]


def execute(name: str, cwd: Path, env: dict[str, str]) -> nbformat.NotebookNode:
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        NotebookClient(book, timeout=600, resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return book


def outputs(book: nbformat.NotebookNode) -> str:
    return "\n".join(
        str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
        for cell in book.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


def test_tune_detectors_sweeps_and_writes_a_config(
    small_recordings: list[Path], tmp_path: Path
) -> None:
    env = {"MEDIC_RECORDINGS": ",".join(map(str, small_recordings)), "MEDIC_OUT": str(tmp_path)}
    book = execute("tune_detectors.ipynb", NOTEBOOKS, env)
    config = (tmp_path / "medic-hang-tuned.toml").read_text()
    assert config.startswith("[detectors.hang]")
    assert "min_silence_s" in config and "gap_factor" in config
    text = outputs(book)
    assert "2 recordings; tuning the 'hang' detector" in text
    assert "min_score = " in text and "of the true hang detections at precision" in text
    assert "hang" in read_calibration(tmp_path / "calibration.toml").maps
    assert "brier" in text and "auc_raw" in text  # the held-out figures, raw beside them


def test_reports_queries_a_history_built_from_a_replay(small_recordings: list[Path]) -> None:
    env = {"MEDIC_RECORDINGS": ",".join(map(str, small_recordings))}
    book = execute("reports.ipynb", NOTEBOOKS, env)
    text = outputs(book)
    for view in ("v_time_to_detect", "v_gpu_hours_saved", "v_node_failures"):
        assert view in text
    assert "hang" in text
