"""The import graph of ``medic``: no circles, and imports only point down the layers.

The graph is read statically from the source (``ast``), function-level imports included, so
a lazy import cannot hide a circle. Imports under ``if TYPE_CHECKING:`` are left out: they
never run, they only name types for annotations.

``LAYERS`` lists the layers bottom first; a module may import its own layer and those below
it. A new module must be placed in a layer (``test_every_module_has_a_layer``).
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "medic",
        "medic.timeutil",
        "medic.errors",
        "medic.schema",
        "medic.config",
        "medic.frames",
        "medic.slurm",
        "medic.probe",
    ),
    (
        "medic.recording",
        "medic.scoring",
        "medic.settings",
        "medic.pipeline_config",
        "medic.service_config",
    ),
    ("medic.ingest", "medic.ingest.*"),
    ("medic.parse", "medic.parse.*"),
    ("medic.detectors", "medic.detectors.*"),
    ("medic.incident", "medic.readahead"),
    # A calibration reads the detections' evidence.
    ("medic.evidence_features", "medic.calibration", "medic.render"),
    (
        "medic.actions.config",
        "medic.actions.recovery_config",
        "medic.actions.notifiers.config",
        "medic.actions.notifiers.registry",
        "medic.actions.notifiers.formats",
        "medic.actions.model",
        "medic.actions.executor",
    ),
    ("medic.history", "medic.history.*"),
    ("medic.settings_tree",),
    ("medic.pipeline",),
    ("medic.actions", "medic.actions.*", "medic.nvrx"),
    (
        "medic.diagnose",
        "medic.diagnose.*",
        "medic.simulate",
        "medic.simulate.*",
        "medic.record",
        "medic.service_log",
        "medic.service_http",
    ),
    ("medic.backtest", "medic.service", "medic.history_import"),
    (
        "medic.tuning",
        "medic.calibrate",
        "medic.config_tables",
        "medic.config_reference",
        "medic.doctor",
        "medic.remote_report",
        "medic.ray_cluster",
        "medic.sweep",
    ),
    ("medic.cli", "medic.__main__"),
    ("medic.testing", "medic.testing.*"),
)
"""Bottom first. A pattern without ``*`` names one module and wins over a wildcard, so a
package's configs can sit below the rest of it (``medic.actions.config`` below history).
The history sits below the pipeline and the service: it stores what they hand it."""


def modules(root: Path, package: str) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, read from the source."""
    known = modules(root, package)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = _type_checking_only(tree)
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str | None] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names if _inside(a.name, package))
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                source = ".".join([*base, node.module] if node.module else base)
                if not _inside(source, package):
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in known else resolve(source))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The layer whose most specific pattern matches ``module`` (an exact name beats ``*``)."""
    best: tuple[int, int] | None = None
    for number, patterns in enumerate(layers):
        for pattern in patterns:
            if fnmatchcase(module, pattern):
                rank = 1 if "*" in pattern else 2
                if best is None or rank > best[1]:
                    best = (number, rank)
    return None if best is None else best[0]


def upward(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """Every import of a module from a higher layer, as ``a (layer) -> b (layer)``."""
    found = []
    for source in sorted(graph):
        mine = layer_of(source, layers)
        for target in sorted(graph[source]):
            theirs = layer_of(target, layers)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{source} ({mine}) -> {target} ({theirs})")
    return found


@pytest.fixture(scope="module")
def medic_graph() -> dict[str, set[str]]:
    return import_graph(ROOT, "medic")


def test_medic_has_no_import_circles(medic_graph: dict[str, set[str]]) -> None:
    assert circles(medic_graph) == []


def test_medic_imports_only_point_down(medic_graph: dict[str, set[str]]) -> None:
    assert upward(medic_graph) == []


def test_every_module_has_a_layer(medic_graph: dict[str, set[str]]) -> None:
    assert [m for m in sorted(medic_graph) if layer_of(m) is None] == []


def test_the_graph_holds_function_level_and_relative_imports(medic_graph: dict) -> None:
    assert "medic.incident" in medic_graph["medic.pipeline"]
    assert "medic.cli" in medic_graph["medic.__main__"]
    assert "medic.backtest" in medic_graph["medic.cli"]  # imported inside a command


def test_a_lazy_circle_and_an_upward_import_are_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def f():\n    from pkg.top import g\n")
    (package / "low" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import g\n"
    )
    (package / "top.py").write_text("from .low import a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.low.b"] == set()
    assert circles(graph) == [["pkg.low.a", "pkg.top"]]
    layers = (("pkg", "pkg.low", "pkg.low.*"), ("pkg.top",))
    assert upward(graph, layers) == ["pkg.low.a (0) -> pkg.top (1)"]
