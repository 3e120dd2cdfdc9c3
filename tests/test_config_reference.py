"""docs/configuration.md is the generator's output, and covers every key with its range."""

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from medic.cli import main
from medic.config import ConfigError
from medic.config_reference import REGENERATE, documented_keys, reference_markdown
from medic.config_tables import effective_settings
from medic.pipeline import Pipeline
from medic.settings import load_settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_committed_reference_is_the_generators_output() -> None:
    committed = DOC.read_text() if DOC.exists() else ""
    assert committed == reference_markdown(), (
        f"docs/configuration.md is out of date with the config classes: run `{REGENERATE}`"
    )


def test_every_key_has_a_meaning_and_every_number_a_range() -> None:
    keys = list(documented_keys())
    assert len(keys) > 150
    assert [f"{t} {k.name}" for t, k in keys if not k.meaning] == []
    numbers = [(t, k) for t, k in keys if k.type.startswith(("number", "integer"))]
    assert [f"{t} {k.name}" for t, k in numbers if not k.range] == []


def test_an_out_of_range_detector_setting_is_refused_at_load(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    config.write_text("[detectors.hang]\nmin_silence_s = -5\n")
    with pytest.raises(ConfigError, match=r"'detectors.hang.min_silence_s' must be > 0, got -5"):
        Pipeline.from_settings(load_settings(config))
    result = CliRunner().invoke(main, ["config", "check", str(config)])
    assert result.exit_code == 2
    assert result.stderr == ("medic: error: 'detectors.hang.min_silence_s' must be > 0, got -5\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("service = 5\n", "'service' must be a table"),
        ("[detectors.hang]\nenabled = 'no'\n", "'detectors.hang.enabled' must be true or false"),
        ("[rules.guards]\nmax_drained_fraction = 2\n", "must be in [0, 1], got 2"),
        ("[sources.files]\npoll_interval_s = nan\n", "must be a finite number"),
        ("[parsers.nope]\n", "unknown parser 'nope'"),
    ],
)
def test_config_check_refuses_bad_files_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "medic.toml"
    config.write_text(text)
    result = CliRunner().invoke(main, ["config", "check", str(config)])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_config_check_prints_the_effective_config_with_defaults(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    config.write_text('[detectors.hang]\nmin_silence_s = 90\n[rules]\nmode = "enforce"\n')
    result = CliRunner().invoke(main, ["config", "check", str(config)])
    assert result.exit_code == 0, result.output
    printed = tomllib.loads(result.stdout)
    assert printed["detectors"]["hang"]["min_silence_s"] == 90
    assert printed["detectors"]["hang"]["gap_factor"] == 3.0
    assert printed["detectors"]["crash"]["enabled"] is True
    assert printed["rules"]["mode"] == "enforce"
    assert printed["rules"]["routes"][0]["name"] == "hardware-fault"
    assert printed["service"]["listen"] == "127.0.0.1:9464"
    assert "victorialogs" not in printed["sources"]
    assert result.stderr == f"{config}: valid\n"
    reread = tmp_path / "effective.toml"
    reread.write_text(result.stdout)
    assert effective_settings(load_settings(reread)) == effective_settings(load_settings(config))


def test_config_check_quiet_says_only_the_verdict(tmp_path: Path) -> None:
    config = tmp_path / "medic.toml"
    config.write_text('[rules]\nmode = "enforce"\n')
    result = CliRunner().invoke(main, ["config", "check", "--quiet", str(config)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == f"{config}: valid\n"
    config.write_text("[detectors.hang]\nmin_silence_s = -5\n")
    refused = CliRunner().invoke(main, ["config", "check", "--quiet", str(config)])
    assert refused.exit_code == 2 and "must be > 0" in refused.stderr
