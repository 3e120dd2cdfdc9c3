from typing import Any

import pytest

from medic.actions.config import default_table, load_rules
from medic.config import ConfigError


def test_the_shipped_defaults_load_in_monitor_mode() -> None:
    config = load_rules()
    assert config.mode == "monitor"
    assert [r.name for r in config.routes] == [r["name"] for r in default_table()["routes"]]
    hardware = config.routes[0]
    assert set(hardware.kinds) == {"gpu_fault", "node_failure"}
    assert hardware.actions == ("drain", "requeue")


def test_user_settings_override_defaults_key_by_key_and_replace_lists() -> None:
    config = load_rules(
        {
            "mode": "enforce",
            "guards": {"node_cooldown_s": 60},
            "routes": [{"name": "only", "kinds": ["crash"], "actions": ["cancel"]}],
        }
    )
    assert config.mode == "enforce"
    assert config.guards.node_cooldown_s == 60
    assert config.guards.max_restarts_per_job == 3  # default kept
    assert [r.name for r in config.routes] == ["only"]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"mode": "act"}, "'rules.mode' must be one of 'monitor', 'enforce', got 'act'"),
        ({"bogus": 1}, "unknown setting 'rules.bogus'"),
        (
            {"routes": [{"name": "r", "kinds": ["oops"], "actions": ["drain"]}]},
            "rules.routes[0]: route 'r': unknown kind 'oops'",
        ),
        (
            {"routes": [{"name": "r", "actions": ["reboot"]}]},
            "'rules.routes[0].actions[0]' must be one of",
        ),
        ({"routes": [{"name": "r"}]}, "route 'r': no actions and nothing to notify"),
        (
            {"routes": [{"name": "r", "actions": ["cancel", "requeue"]}]},
            "cancel conflicts with requeue",
        ),
        (
            {"routes": [{"name": "r", "culprits": False, "actions": ["drain"]}]},
            "drain needs culprits",
        ),
        (
            {"routes": [{"name": "r", "actions": ["drain"]}, {"name": "r", "actions": ["drain"]}]},
            "route name 'r' is used twice",
        ),
        ({"routes": [{"name": "r", "notify": ["pager"]}]}, "unknown receiver 'pager'"),
        (
            {"guards": {"max_drained_fraction": 1.5}},
            "'rules.guards.max_drained_fraction' must be in [0, 1], got 1.5",
        ),
        ({"guards": {"node_cooldown_s": "1h"}}, "'rules.guards.node_cooldown_s' must be a number"),
        ({"receivers": [{"name": "x", "url": "ftp://x"}]}, "url must start with http://"),
        ({"routes": {"name": "r"}}, "'rules.routes' must be a list"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_setting(rules: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_rules(rules)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_receivers_and_routes_that_notify_them() -> None:
    config = load_rules(
        {
            "receivers": [{"name": "oncall", "url": "https://hooks.example.org/x"}],
            "routes": [{"name": "tell", "notify": ["oncall"], "continue_matching": True}],
        }
    )
    assert config.receiver("oncall").url == "https://hooks.example.org/x"
    assert config.routes[0].notify == ("oncall",)
