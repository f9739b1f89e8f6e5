"""The CLI reaches into typer's private modules (option coercion without pydantic, click's vendored
exceptions and parameter sources): pyproject pins the typer range this was tested on, and this test fails
when the installed typer is outside it or lacks a private name the CLI uses."""

import ast
import importlib
import re
from importlib.metadata import version

from _shared import ROOT

CLI = ROOT / "cli" / "regioncount_cli"


def _pin() -> tuple[tuple[int, ...], tuple[int, ...]]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"typer>=([\d.]+),<([\d.]+)"', text)
    assert m, "pyproject must pin typer to a tested range (typer>=A,<B)"
    return tuple(map(int, m[1].split("."))), tuple(map(int, m[2].split(".")))


def _private_uses() -> set[tuple[str, str]]:
    """(module, name) for every ``from typer._x import name`` and ``typer.core.name`` in the CLI."""
    uses = set()
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("typer._"):
                uses |= {(node.module, a.name) for a in node.names}
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "typer"
                and node.value.attr == "core"
            ):
                uses.add(("typer.core", node.attr))
    return uses


def test_installed_typer_is_in_the_pinned_range():
    lo, hi = _pin()
    have = tuple(int(x) for x in re.findall(r"\d+", version("typer"))[:3])
    assert lo <= have < hi, f"typer {version('typer')} is outside the tested range {lo}..{hi}"


def test_every_private_typer_name_the_cli_uses_exists():
    uses = _private_uses()
    assert len(uses) >= 5  # the scan finds them (a scan that found none would pass vacuously)
    missing = [f"{m}.{n}" for m, n in sorted(uses) if not hasattr(importlib.import_module(m), n)]
    assert not missing, f"typer no longer has {missing}: update the CLI and the pin in pyproject.toml"
