from pathlib import Path

from click.testing import CliRunner

from medic.cli import main
from medic.recording import read_recording
from medic.simulate import SCENARIOS


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_every_scenario_its_labels_and_parameters() -> None:
    code, out, _ = invoke("simulate", "list")
    assert code == 0
    for name in SCENARIOS:
        assert name in out
    assert "gpu_fault" in out and "pg_timeout_s" in out and "none (healthy)" in out


def test_run_writes_one_recording_with_parameters(tmp_path: Path) -> None:
    code, out, _ = invoke(
        "simulate", "run", "oom", "--seed", "4", "--out", str(tmp_path),
        "--set", "job_nodes=2", "--set", "jobs=0", "--set", "duration_min=20",
        "--set", "framework=deepspeed",
    )  # fmt: skip
    assert code == 0, out
    recording = read_recording(tmp_path / "oom-s4")
    assert recording.meta["params"]["job_nodes"] == 2
    assert recording.meta["params"]["framework"] == "deepspeed"
    assert recording.labels is not None and recording.labels.num_rows == 1
    assert "1 label(s)" in out


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (
        ("simulate", "run", "nope", "--out", str(tmp_path)),
        ("simulate", "run", "oom", "--out", str(tmp_path), "--set", "ranks=many"),
        ("simulate", "run", "oom", "--out", str(tmp_path), "--set", "novalue"),
        ("simulate", "run", "oom", "--out", str(tmp_path), "--set", "colour=1"),
        ("simulate", "suite", "everything", "--out", str(tmp_path)),
        ("simulate", "suite", "datasets", "--out", str(tmp_path), "--seeds", "3"),
    ):
        code, _, err = invoke(*args)
        assert code == 2, args
        assert err.startswith("medic: error: ") and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir())
