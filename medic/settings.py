"""Loading medic's TOML configuration file, once, into one typed, frozen ``Settings`` tree.

One file configures everything: ``[pipeline]``, ``[parsers.<name>]``, ``[detectors.<name>]``,
``[rules]``, ``[sources.*]``, ``[history]``, ``[service]``, ``[replay]``. ``load_settings``
reads the file into plain tables (one-line errors); ``medic.settings_tree.Settings.load``
checks every table into the dataclass that documents it, and each part of medic is handed its
own. This module stays light: the CLI imports it before it knows what it will run.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from medic.config import ConfigError

KNOWN_TABLES = (
    "pipeline",
    "parsers",
    "detectors",
    "rules",
    "sources",
    "history",
    "service",
    "replay",
)


def load_settings(path: Path | str | None) -> dict[str, Any]:
    """The parsed config file, or an empty config when ``path`` is None."""
    if path is None:
        return {}
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read config ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not a TOML file (not UTF-8 text)") from None
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML ({exc})") from None
    unknown = sorted(set(settings) - set(KNOWN_TABLES))
    if unknown:
        raise ConfigError(
            f"{file}: unknown table [{unknown[0]}] (known: {', '.join(KNOWN_TABLES)})"
        )
    flat = [name for name, value in settings.items() if not isinstance(value, dict)]
    if flat:
        raise ConfigError(f"{file}: '{flat[0]}' must be a table ([{flat[0]}])")
    return settings
