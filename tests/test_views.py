"""What a picture shows is computed by the library (regioncount._views) and only drawn by regioncount.plotting;
methods and kinds are StrEnums whose members are their strings."""

import ast
import json
from pathlib import Path

import pytest

import regioncount as rc

ROOT = Path(__file__).resolve().parents[1]


def _imported_modules(source: str, package: str) -> list[str]:
    """Absolute names of every module imported anywhere in ``source`` (a module of ``package``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.append(".".join(base + ([node.module] if node.module else [])))
            else:
                out.append(node.module or "")
    return out


def test_plotting_modules_import_no_engine():
    offenders = {}
    for path in sorted((ROOT / "regioncount" / "plotting").glob("*.py")):
        mods = _imported_modules(path.read_text(), "regioncount.plotting")
        bad = [m for m in mods if m == "regioncount.engines" or m.startswith("regioncount.engines.")]
        if bad:
            offenders[path.name] = bad
    assert offenders == {}
    # the checker resolves relative imports, at module level and inside functions
    src = "def f():\n    from ..engines._plane import partition_plane\n"
    assert _imported_modules(src, "regioncount.plotting") == ["regioncount.engines._plane"]


def test_methods_and_kinds_are_their_strings():
    assert rc.METHODS == ("exact", "line", "sample")
    assert rc.Method("sample") is rc.Method.SAMPLE
    assert json.dumps({"m": rc.Method.SAMPLE, "k": rc.Kind.ACTIVATION_REGIONS}) == (
        '{"m": "sample", "k": "activation regions"}'
    )
    assert f"{rc.Picture.SAMPLED}" == "sampled" and str(rc.Kind.SPLINE_PIECES) == "spline pieces"
    # a result printed whole (notebooks print dicts and use !r) reads as it did with plain strings
    assert (
        repr({"kind": rc.Kind.SPLINE_PIECES, "method": rc.Method.LINE}) == "{'kind': 'spline pieces', 'method': 'line'}"
    )


def test_a_count_reads_the_same_with_a_string_or_an_enum_method():
    net = rc.random_mlp(2, [5, 5], seed=3)
    box = rc.Box(-1, 1, 2)
    by_string = rc.count_regions(net, box, method="sample", grid=40)
    by_enum = rc.count_regions(net, box, method=rc.Method.SAMPLE, grid=40)
    by_string.pop("seconds"), by_enum.pop("seconds")
    assert json.dumps(by_string) == json.dumps(by_enum)
    assert json.loads(json.dumps(by_enum))["method"] == "sample"
    assert by_enum["kind"] == "activation regions" and type(by_enum["kind"]) is rc.Kind
    with pytest.raises(rc.RegionCountError, match="unknown method 'auto'"):
        rc.count_regions(net, box, method="auto")


def test_exact_partition_says_why_there_is_none():
    tf = rc.random_transformer(tokens=3, d_model=4, depth=2, seed=0, attention="hardmax")
    part, why = rc.exact_partition(tf, rc.Box(-1, 1, 2))
    assert part is None and "curved" in why
    net = rc.random_mlp(2, [6, 6], seed=1)
    part, why = rc.exact_partition(net, rc.Box(-1, 1, 2), max_regions=3)
    assert part is None and "max_regions=3" in why
    part, why = rc.exact_partition(net, rc.Box(-1, 1, 2))
    assert why is None and part.n_regions == rc.partition_plane(net, rc.Box(-1, 1, 2)).n_regions > 3


def test_region_source_summary_says_exact_or_sampled():
    net = rc.random_mlp(2, [6, 6], seed=1)
    box = rc.Box(-1, 1, 2)
    exact = rc.region_source(net, box).summary()
    sampled = rc.region_source(net, box, max_regions=3).summary(linear=False)
    assert (exact["method"], exact["lower_bound"], exact["drawn"]) == ("exact", False, "activation regions")
    assert exact["regions"] == exact["linear_regions"] == rc.partition_plane(net, box).n_regions
    assert (sampled["method"], sampled["lower_bound"], sampled["samples"]) == ("sampled", True, 400**2)
    assert "more than 3 regions" in sampled["why_sampled"] and sampled["regions"] <= exact["regions"]


def test_sections_count_the_solid_regions_they_meet():
    net = rc.random_mlp(3, [5, 5], seed=2)
    box = rc.Box(-1, 1, 3)
    solid = rc.exact_solid(net, box)
    secs = rc.box_sections(net, box, count=2, solid=solid)
    for sec in secs:
        # a plane through the box meets as many 3D regions as its own exact 2D partition has
        assert sec.solid_regions_met == sec.source.exact_partition().n_regions
    assert rc.exact_solid(net, box, max_regions=2) is None
