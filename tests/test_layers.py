"""docs/design.md §10, checked: every module of the library and the CLI sits in one layer, imports nothing
from a layer above its own, and no two modules import each other, directly or around a loop.

Imports are read with ``ast`` from the source, at every level (module top, functions, methods), so a deferred
``import`` inside a function counts as much as one at the top; imports under ``if TYPE_CHECKING:`` count for
the layers (they name a dependency) but not for cycles (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from _shared import ROOT

#: Bottom to top (docs/design.md §10). A module belongs to the first layer with a prefix it starts with.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "errors, config, domains",
        (
            "regioncount._errors",
            "regioncount._config",
            "regioncount._domain",
            "regioncount._enums",
            "regioncount._lazy",
            "regioncount._memory",
            "regioncount._blas",
            "regioncount._predicates",
            "regioncount._tolerances",
        ),
    ),
    (
        "networks and model files",
        ("regioncount.networks", "regioncount._io", "regioncount._loaders", "regioncount._magnitude"),
    ),
    ("results", ("regioncount.results",)),
    ("engines", ("regioncount.engines",)),
    ("theory and relations", ("regioncount.theory", "regioncount.relations")),
    (
        "entry points",
        (
            "regioncount._count",
            "regioncount._scan",
            "regioncount._decide",
            "regioncount._views",
            "regioncount._track",
            "regioncount._local",
            "regioncount._atlas_data",
            "regioncount._export",
        ),
    ),
    ("plotting", ("regioncount.plotting",)),
    ("public surface", ("regioncount",)),  # regioncount/__init__.py: re-exports every layer, lazily
    ("cli", ("regioncount_cli",)),
]

SOURCES = {"regioncount": ROOT / "regioncount", "regioncount_cli": ROOT / "cli" / "regioncount_cli"}


def _modules() -> dict[str, Path]:
    out = {}
    for top, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "regioncount"):
            return i
    if module == "regioncount":
        return next(i for i, (_, prefixes) in enumerate(LAYERS) if "regioncount" in prefixes)
    raise AssertionError(f"{module} is in no layer of docs/design.md §10: add it to LAYERS and to §10")


def _target(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The modules of ours that one import statement imports (a package for ``from pkg import name``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
            if node.level - 1 > len(pkg) - 1:
                raise AssertionError(f"{module}: a relative import climbs out of the package")
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    out = []
    for name in names:
        if name.split(".")[0] not in SOURCES:
            continue
        while name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        if name not in MODULES:
            raise AssertionError(f"{module} imports {name}, which does not exist")
        out.append(name)
    return out


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, only under TYPE_CHECKING)`` for every import statement in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in dict.fromkeys(_target(module, node)):
                if target != module:
                    out.append((target, node.lineno, id(node) in typing_only))
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def upward_imports() -> list[str]:
    found = []
    for module, edges in sorted(GRAPH.items()):
        for target, line, _ in edges:
            if layer_of(target) > layer_of(module):
                found.append(
                    f"{MODULES[module].relative_to(ROOT)}:{line}: {module} ({LAYERS[layer_of(module)][0]}) imports "
                    f"{target} ({LAYERS[layer_of(target)][0]})"
                )
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over the imports that run."""
    edges = {m: sorted({t for t, _, typing in GRAPH[m] if not typing}) for m in GRAPH}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_scan_sees_every_module_and_its_imports():
    # a scan that found nothing would pass the checks below vacuously
    assert len(MODULES) > 80 and "regioncount._count" in MODULES and "regioncount_cli.main" in MODULES
    count = {t for t, _, _ in GRAPH["regioncount._count"]}
    assert {"regioncount.engines._protocol", "regioncount.engines._plane", "regioncount.networks"} <= count
    # a function-level import is seen: the CLI's count imports regioncount.engines inside its command body
    assert "regioncount.engines" in {t for t, _, _ in GRAPH["regioncount_cli.count"]}
    for m in MODULES:
        layer_of(m)  # every module has a layer (raises otherwise)


def test_no_module_imports_from_a_layer_above_its_own():
    found = upward_imports()
    assert not found, "upward imports (docs/design.md §10):\n" + "\n".join(found)


def test_no_import_cycle():
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(
    "module, target, typing_only",
    [
        ("regioncount._io", "regioncount._loaders", False),
        ("regioncount.results._partition", "regioncount._count", False),
    ],
)
def test_the_checks_would_see_a_cycle_and_an_upward_import(monkeypatch, module, target, typing_only):
    # planted: _io -> _loaders closes the old cycle (_loaders imports _io); a result importing count_regions
    # is an upward import
    monkeypatch.setitem(GRAPH, module, [*GRAPH[module], (target, 1, typing_only)])
    if module == "regioncount._io":
        assert ["regioncount._io", "regioncount._loaders"] in import_cycles()
    else:
        assert any("regioncount.results._partition (results) imports regioncount._count" in s for s in upward_imports())
