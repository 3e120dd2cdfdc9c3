"""The progress formats as data: ``progress_formats.toml`` loaded and checked once."""

from __future__ import annotations

from importlib import resources

import pytest

from medic.parse.progress_formats import (
    BUILTIN_FILE,
    FORMATS,
    LOOKALIKE,
    FormatError,
    ProgressFormat,
    parse_formats,
)

HEAD = "lookalike = '(?i)eval'\n[fragments]\nnum = '[0-9]+'\n"


def entry(**fields: object) -> str:
    values = {"framework": "x", "event": "step", "anchors": ["it "], "source": "s"} | fields
    values.setdefault("pattern", r"it (?P<step>{{num}})")
    lines = ["[[format]]"]
    for key, value in values.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(repr(v) for v in value)}]")
        else:
            lines.append(f"{key} = '{value}'")
    return "\n".join(lines) + "\n"


def test_the_builtin_file_holds_every_format_in_order_with_its_fragments_in_place() -> None:
    text = resources.files("medic.parse").joinpath(BUILTIN_FILE).read_text()
    formats, lookalike = parse_formats(text)
    assert formats == FORMATS and lookalike == LOOKALIKE and len(FORMATS) > 60
    assert not any("{{" in f.pattern or "{{" in (f.strict or "") for f in FORMATS)
    assert [f.framework for f in FORMATS[:2]] == ["megatron", "megatron"]  # order is priority
    assert sum(f.strict is not None for f in FORMATS) >= 2  # the strict fast forms are kept


def test_a_format_is_read_with_its_fragments_and_optional_keys() -> None:
    formats, lookalike = parse_formats(
        HEAD + entry(bar=True, once=["it "], pattern=r"^.*it (?P<step>{{num}})", unit="tok/s")
    )
    assert lookalike == "(?i)eval"
    assert formats == (
        ProgressFormat(
            "x", "step", ("it ",), r"^.*it (?P<step>[0-9]+)", "s", "tok/s", bar=True, once=("it ",)
        ),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + entry(patern="x"), r"format 1 \(x step\): unknown key 'patern'"),
        (HEAD + entry(event="stepped"), "event must be one of step, "),
        (HEAD + entry(pattern=r"it (?P<epoch>\d+)"), "group 'epoch' is not one of step, "),
        (HEAD + entry(pattern=r"it (?P<step>{{nmu}})"), "'pattern' names no fragment 'nmu'"),
        (HEAD + entry(anchors="it "), "'anchors' must be a list of strings"),
        (HEAD + entry(bar="yes"), "'bar' must be true or false"),
        (HEAD + entry(strict=r"^it (?P<step>\d+)"), "'strict' needs 'once'"),
        (HEAD + entry().replace("source = 's'\n", ""), "'source' is missing"),
        ("[fragments]\n" + entry(), "'lookalike' must be a regex string"),
        (HEAD, "no \\[\\[format\\]\\] entries"),
        (HEAD + "[formats]\n", "unknown table or key 'formats'"),
        (HEAD + "[[format]\n", "progress_formats.toml: "),
    ],
)
def test_a_wrong_file_is_a_one_line_error_naming_the_entry(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        parse_formats(text)
    assert "\n" not in str(caught.value)
