"""Every command, given bad arguments and bad files, answers in one line: never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.testing.builders import label, log, recording, write

BAD_INPUTS = [
    ["validate", "{junk}"],
    ["validate", "{broken}"],
    ["validate", "{missing}"],
    ["backtest", "{broken}"],
    ["backtest", "{junk}"],
    ["backtest", "{good}", "--config", "{junk}"],
    ["backtest", "{good}", "--config", "{bad_range}"],
    ["backtest", "{good}", "--history", "{junk}"],
    ["backtest", "{good}", "--jobs", "0"],
    ["calibrate", "{good}", "--detections", "{dir}", "--out", "{dir}/c.toml"],
    ["calibrate", "{good}", "--out", "{dir}/c.toml"],
    ["calibrate", "{broken}", "--out", "{dir}/c.toml"],
    ["calibrate", "{junk}", "--out", "{dir}/c.toml"],
    ["calibrate", "{good}", "--out", "{dir}/c.toml", "--config", "{bad_range}"],
    ["calibrate", "{good}", "--out", "{dir}/c.toml", "--method", "magic"],
    ["calibrate", "{good}"],
    ["config", "check", "{junk}"],
    ["config", "check", "{bad_range}"],
    ["config", "check", "{missing}"],
    ["config", "check"],
    ["config", "reference", "extra"],
    ["doctor", "--config", "{junk}"],
    ["doctor", "--config", "{missing}"],
    ["doctor"],
    ["rules", "test", "--config", "{junk}", "--kind", "crash"],
    ["rules", "test", "--json", "{{"],
    ["rules", "test", "--json", "[]"],
    ["rules", "test", "--json", '{{"kind": "nope"}}'],
    ["rules", "test", "--kind", "nope"],
    ["rules", "test"],
    ["report", "--db", "{junk}"],
    ["report", "--db", "{missing}"],
    ["report", "--config", "{junk}"],
    ["report", "--url", "http://127.0.0.1:1"],
    ["report", "--url", "not-a-url"],
    ["report", "--top", "0"],
    ["history", "import", "{good}", "--db", "{junk}"],
    ["history", "import", "--recordings", "{broken}"],
    ["history", "import"],
    ["simulate", "run", "nope", "--out", "{dir}"],
    ["simulate", "run", "oom", "--out", "{dir}", "--set", "nope=1"],
    ["simulate", "run", "oom", "--out", "{dir}", "--set", "job_nodes=abc"],
    ["sweep", "{junk}", "{good}"],
    ["sweep", "{missing}", "{good}"],
    ["sweep", "{bad_range}", "{good}"],
    ["simulate", "run", "oom", "--out", "{junk}"],
    ["simulate", "suite", "nope", "--out", "{dir}"],
    ["simulate", "list", "extra"],
    ["agent", "--port", "99999"],
    ["agent", "--interval", "-1"],
    ["record", "--start", "x", "--end", "y", "--out", "{dir}"],
    ["record", "--start", "now", "--end", "now-1m", "--out", "{dir}"],
    ["record", "--start", "now-1m", "--end", "now", "--out", "{dir}", "--config", "{junk}"],
    ["label", "{broken}", "--list"],
    ["label", "{good}", "--job", "1", "--kind", "crash", "--onset", "yesterday"],
    ["label", "{good}", "--job", "1", "--kind", "crash", "--onset", "2020-01-01T00:00:00Z"],
    ["label", "{good}", "--job", "1", "--kind", "crash"],
    ["label", "{good}", "--remove", "nope"],
    ["label", "{dir}", "--list"],
    ["serve", "--config", "{junk}"],
    ["serve", "--config", "{missing}"],
    ["serve", "--config", "{bad_range}"],
    ["serve"],
    ["actions", "--journal", "{missing}"],
    ["actions", "--journal", "{dir}"],
    ["actions", "--config", "{junk}"],
    ["nodes", "--db", "{junk}", "--no-slurm"],
    ["nodes", "--db", "{missing}", "--no-slurm"],
    ["nodes", "--config", "{bad_range}", "--no-slurm"],
    ["diagnose", "{missing}"],
    ["diagnose", "{good}", "--config", "{bad_range}"],
    ["diagnose", "{dir}", "--year", "x"],
    ["nope"],
]


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= leaf_commands(command, (*prefix, name))
        else:
            found.add((*prefix, name))
    return found


def test_every_command_is_tried_with_bad_input() -> None:
    tried = {
        tuple(args[:2])
        if args[0] in main.commands and isinstance(main.commands[args[0]], click.Group)
        else (args[0],)
        for args in BAD_INPUTS
    }
    assert leaf_commands(main) - tried == set()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad")
    junk = root / "junk.bin"
    junk.write_bytes(b"garbage \x00\x01\xff" * 100)
    bad_range = root / "bad_range.toml"
    bad_range.write_text("[detectors.hang]\nmin_silence_s = -5\n")
    good = write(root / "good", recording(logs=[log(1, "x")], labels=[label("i", "crash", 1)]))
    broken = root / "broken"
    shutil.copytree(good, broken)
    (broken / "meta.json").write_text("{")
    (root / "dir").mkdir()
    return {
        "junk": str(junk),
        "bad_range": str(bad_range),
        "good": str(good),
        "broken": str(broken),
        "missing": str(root / "missing"),
        "dir": str(root / "dir"),
    }


@pytest.mark.parametrize("args", BAD_INPUTS, ids=" ".join)
def test_bad_input_is_a_short_error_without_traceback(
    args: list[str], files: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # default paths (medic-history.duckdb, .medic/) land here
    argv = [arg.format(**files) for arg in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert 0 < len(result.stderr.strip().splitlines()) <= 4, result.stderr


def test_python_m_medic_without_a_dependency_answers_in_one_line() -> None:
    # The system Python in a clone whose .venv holds the dependencies: one of them is missing.
    run_without_rich = (
        "import runpy, sys; sys.modules['rich'] = None; sys.argv = ['medic', '--help'];"
        " runpy.run_module('medic', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", run_without_rich],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("medic: error: ") and "lacks rich" in line


def test_python_m_medic_without_its_dependencies_runs_under_the_clones_venv() -> None:
    # The interpreter the .venv was made from (the system Python): it lacks medic's
    # dependencies, and python -m medic in the clone runs under the .venv instead.
    clone = Path(__file__).parent.parent
    if not (clone / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout (made by scripts/demo and scripts/test)")
    system = Path(sys.base_prefix) / "bin" / "python3"
    probe = [str(system), "-c", "import rich"]
    if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        pytest.skip("the system Python has medic's dependencies")
    done = subprocess.run(
        [str(system), "-m", "medic", "--version"],
        capture_output=True,
        text=True,
        cwd=clone,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "version" in done.stdout
