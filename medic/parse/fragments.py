"""Pieces of regex that a parsing file writes once, in its ``[fragments]`` table, and names
``{{name}}`` in the patterns that share them (the progress formats, the failure lexicon)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_FRAGMENT = re.compile(r"\{\{([a-z_]+)\}\}")


class FragmentError(ValueError):
    """A ``[fragments]`` table that is not names to regex strings, or a pattern naming a
    fragment the table lacks; the message says which."""


def fragments_of(data: Mapping[str, Any]) -> dict[str, str]:
    """The ``[fragments]`` table of a parsed TOML file (none: empty)."""
    fragments = data.get("fragments", {})
    if not isinstance(fragments, dict) or not all(isinstance(v, str) for v in fragments.values()):
        raise FragmentError("[fragments] must map names to regex strings")
    return fragments


def expanded(pattern: str, fragments: Mapping[str, str]) -> str:
    """``pattern`` with every ``{{name}}`` replaced by its fragment (fragments hold none)."""

    def fragment(match: re.Match[str]) -> str:
        if match.group(1) not in fragments:
            raise FragmentError(f"names no fragment '{match.group(1)}'")
        return fragments[match.group(1)]

    return _FRAGMENT.sub(fragment, pattern)
