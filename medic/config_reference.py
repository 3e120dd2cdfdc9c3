"""``docs/configuration.md``, written from the config dataclasses themselves.

Each key's type and range come from its annotation (``medic.config.Range``), its default from
the effective config of an empty file (so ``[rules]`` shows the shipped default rules), and its
meaning from the attribute docstring under it in the source; a docstring under a group of keys
without their own describes the whole group. ``medic config reference`` prints it and a test
fails when the committed file differs.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Annotated, Any, Literal

from medic.config import setting_range
from medic.config_tables import config_tables, effective_settings

REGENERATE = "medic config reference > docs/configuration.md"

INTRO = """\
# Configuration reference

<!-- Generated from medic's config classes by `{command}`; do not edit by hand. -->

medic reads one TOML file (`medic serve --config medic.toml`, and `--config` of `backtest`,
`record`, `report`, `rules test`, `doctor`). Every key is optional unless marked required; a
key left out takes the default shown here. A misspelt key or table, a wrong type or a value
outside its range stops medic with one line naming the key, e.g.
`medic: error: 'detectors.hang.min_silence_s' must be > 0, got -5`.
`medic config check medic.toml` checks a file and prints the effective configuration, every
default filled in; `medic doctor --config medic.toml` then tries each dependency it names.
Ready-made files are under [`examples/`](../examples/).

Ranges: `> 0` and `>= 0` are bounds; `[0, 1]` includes both ends, `(0, 1]` excludes the first.
Durations are seconds (`_s`), utilisations percent.
"""


@dataclasses.dataclass(frozen=True)
class Key:
    """One row of a table's reference."""

    name: str
    type: str
    default: str
    range: str
    meaning: str


def reference_markdown() -> str:
    """The whole reference, as committed in docs/configuration.md."""
    defaults = effective_settings({})
    lines = [INTRO.format(command=REGENERATE)]
    tables = list(_sections(config_tables(), defaults))
    lines.append("Tables: " + ", ".join(f"[`{t}`](#{_anchor(t)})" for t, _, _ in tables) + ".\n")
    for title, about, keys in tables:
        lines.append(f"## `{title}`\n")
        if about:
            lines.append(f"{about}\n")
        lines.append("| key | type | default | range | meaning |")
        lines.append("|---|---|---|---|---|")
        lines.extend(
            f"| `{k.name}` | {k.type} | {k.default} | {k.range} | {_cell(k.meaning)} |"
            for k in keys
        )
        lines.append("")
    return "\n".join(lines)


def documented_keys() -> Iterator[tuple[str, Key]]:
    """Every key of every table: ``(table title, key)``."""
    for title, _, keys in _sections(config_tables(), effective_settings({})):
        for key in keys:
            yield title, key


def _sections(
    tables: dict[str, type], defaults: dict[str, Any]
) -> Iterator[tuple[str, str, list[Key]]]:
    for name, cls in tables.items():
        yield from _section(f"[{name}]", name, cls, _lookup(defaults, name))


def _section(
    title: str, path: str, cls: type, defaults: dict[str, Any] | None
) -> Iterator[tuple[str, str, list[Key]]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    meanings = field_docs(cls)
    keys: list[Key] = []
    nested: list[tuple[str, str, type, dict[str, Any] | None]] = []
    if path.startswith("detectors."):
        keys.append(Key("enabled", "boolean", "`true`", "", "`false` switches the detector off."))
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        default = _default(field, defaults)
        table = _table_class(hint)
        if table is not None:
            many = typing.get_origin(_bare(hint)) is tuple
            sub = f"[[{path}.{field.name}]]" if many else f"[{path}.{field.name}]"
            nested.append((sub, f"{path}.{field.name}", table, None if many else default))
            shown = _many_default(default) if many else "" if default is None else "the table"
            kind = "array of tables" if many else "table"
            meaning = meanings.get(field.name, "") + f" See [`{sub}`](#{_anchor(sub[1:-1])})."
            keys.append(Key(field.name, kind, shown or "none", "", meaning.strip()))
            continue
        bounds = setting_range(hint)
        keys.append(
            Key(
                field.name,
                _type_name(hint),
                _literal(default),
                "" if bounds is None else f"`{bounds}`",
                meanings.get(field.name, ""),
            )
        )
    yield title, _about(cls), keys
    for sub, sub_path, table, sub_defaults in nested:
        yield from _section(sub, sub_path, table, sub_defaults)


def _default(field: dataclasses.Field[Any], defaults: dict[str, Any] | None) -> Any:
    if defaults is not None:
        return defaults.get(field.name)
    if field.default is not dataclasses.MISSING:
        return _plain(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return _plain(field.default_factory())
    return dataclasses.MISSING


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return list(value) if isinstance(value, tuple) else value


def _many_default(default: Any) -> str:
    if not default:
        return "none"
    names = [item.get("name") for item in default if isinstance(item, dict)]
    return "the built-in ones: " + ", ".join(f"`{n}`" for n in names if n)


def _literal(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{json.dumps(value)}`"


def _bare(hint: Any) -> Any:
    """The annotation without ``Annotated`` and without ``| None``."""
    if typing.get_origin(hint) is Annotated:
        return _bare(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _bare(args[0]) if len(args) == 1 else hint
    return hint


def _table_class(hint: Any) -> type | None:
    bare = _bare(hint)
    if typing.get_origin(bare) is tuple:
        bare = _bare(typing.get_args(bare)[0])
    return bare if dataclasses.is_dataclass(bare) and isinstance(bare, type) else None


def _type_name(hint: Any) -> str:
    optional = type(None) in typing.get_args(hint)
    bare = _bare(hint)
    origin = typing.get_origin(bare)
    if origin is tuple:
        name = "list of " + _type_name(typing.get_args(bare)[0]).replace("one of", "").strip()
        name = name if name.endswith("s") or "`" in name else name + "s"
    elif origin is Literal:
        name = "one of " + ", ".join(f"`{json.dumps(a)}`" for a in typing.get_args(bare))
    else:
        names = {float: "number", int: "integer", str: "string", bool: "boolean"}
        name = names.get(bare, str(bare))
    return f"{name}, optional" if optional else name


def _about(cls: type) -> str:
    """The class docstring, unless it only names the table (or is dataclass's signature)."""
    doc = _markdown(inspect.getdoc(cls) or "")
    named_only = doc.startswith("`[") and doc.rstrip(".").endswith("]`")
    return "" if named_only or doc.startswith(f"{cls.__name__}(") else doc


def _markdown(docstring: str) -> str:
    """One line, with reStructuredText's double backticks as Markdown's single ones."""
    return " ".join(docstring.split()).replace("``", "`")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a dataclass's fields, from its source. A docstring under several
    undocumented fields in a row describes them all."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = typing.cast(ast.ClassDef, tree.body[0]).body
    docs: dict[str, str] = {}
    waiting: list[str] = []
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            waiting.append(node.target.id)
        elif (
            waiting
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for name in waiting:
                docs[name] = _markdown(node.value.value)
            waiting = []
    return docs


def _lookup(tree: dict[str, Any], name: str) -> dict[str, Any] | None:
    node: Any = tree
    for part in name.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
