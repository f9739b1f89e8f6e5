"""Betti numbers of decision regions against closed forms (shapes built on purpose) and against shapely."""

import numpy as np
import pytest
import shapely
from _shapes import annulus, disc_with_holes, disjoint_discs, solid_ring, touching_diamonds

from regioncount import Box, DecisionNet, class_of_cells, decision_topology, partition_plane, random_mlp
from regioncount._decide import decision_partitions
from regioncount.results import topology


def _topo(net, lo, hi):
    return decision_topology(net, Box(lo, hi, 2))


def test_annulus_one_component_one_hole_and_two_boundary_circles():
    t = _topo(annulus(), -1.5, 1.5)
    pc = t.per_class()
    assert pc["1"] == {"b0": 1, "b1": 1, "b2": None}
    # class 0: the inner diamond (simply connected) and the outside, whose one hole holds annulus and disc
    assert pc["0"]["b0"] == 2 and sorted(t.b1[t.region_class == 0].tolist()) == [0, 1]
    assert (t.boundary_b0, t.boundary_b1) == (2, 2)  # two closed curves
    # the annulus 1/2 < |x|_1 < 1 has area 2 (1 - 1/4) = 3/2
    assert t.area[t.region_class == 1].item() == pytest.approx(1.5, rel=1e-12)
    # the hole of the annulus is marked inside the inner diamond
    (p,) = t.hole_points[t.region_class[t.hole_region] == 1]
    assert np.abs(p).sum() < 0.5


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_k_disjoint_discs(k):
    t = _topo(disjoint_discs(k), -2.0, 2.0)
    pc = t.per_class()
    assert pc["1"] == {"b0": k, "b1": 0, "b2": None}
    assert pc["0"] == {"b0": 1, "b1": k, "b2": None}  # the outside has a hole per disc
    assert (t.boundary_b0, t.boundary_b1) == (k, k)
    assert t.hole_points.shape == (k, 2)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_disc_with_k_holes(k):
    t = _topo(disc_with_holes(k), -2.5, 2.5)
    pc = t.per_class()
    assert pc["1"] == {"b0": 1, "b1": k, "b2": None}
    # class 0: the k holes and the outside of the big diamond, which has one hole (the disc)
    assert pc["0"] == {"b0": k + 1, "b1": 1, "b2": None}
    assert (t.boundary_b0, t.boundary_b1) == (k + 1, k + 1)


def test_pinched_holes_are_one_hole():
    """Two negative diamonds touching at the origin: the positive set has ONE hole (the two closed diamonds
    are connected through the point), the two diamonds are two regions, and the boundary is one curve with two
    independent cycles. shapely stores the touching rings as two interiors, so it counts 2."""
    t = _topo(touching_diamonds(), -1.5, 1.5)
    pc = t.per_class()
    assert pc["1"] == {"b0": 1, "b1": 1, "b2": None}
    assert pc["0"] == {"b0": 2, "b1": 0, "b2": None}
    assert (t.boundary_b0, t.boundary_b1) == (1, 2)
    base, dec, cls = decision_partitions(touching_diamonds(), Box(-1.5, 1.5, 2))
    polys = dec.to_shapely()
    (lab,) = t.region_ids[t.region_class == 1]
    union = shapely.unary_union([shapely.set_precision(p, 1e-9) for p in polys[t.labels == lab]])
    assert len(union.interiors) == 2


@pytest.mark.parametrize("seed", [0, 4, 5])
def test_random_networks_agree_with_shapely(seed):
    """Without pinches, the holes of each decision region are the interiors of the shapely union of its cells,
    and the union is one polygon (b0 = 1)."""
    net = random_mlp(2, (12, 12), 3, seed=seed)
    dnet = DecisionNet(net)
    dec = partition_plane(dnet, Box(-3, 3, 2))
    cls = class_of_cells(dec, dnet)
    t = topology(dec, cls)
    polys = dec.to_shapely()
    for i, lab in enumerate(t.region_ids):
        g = shapely.unary_union([shapely.set_precision(p, 1e-9) for p in polys[t.labels == lab]])
        assert g.geom_type == "Polygon"
        assert len(g.interiors) == t.b1[i]
    # at least one seed has a hole, so the check is not vacuous
    if seed == 4:
        assert t.b1.sum() >= 1


def test_spherical_shell_has_one_cavity():
    t = decision_topology(annulus(3), Box(-1.5, 1.5, 3))
    pc = t.per_class()
    assert pc["1"] == {"b0": 1, "b1": 0, "b2": 1}
    assert sorted(t.b2[t.region_class == 0].tolist()) == [0, 1]  # inner octahedron, and the outside
    assert t.b1.tolist() == [0, 0, 0]
    # shell 1/2 < |x|_1 < 1: volume (4/3)(1 - 1/8) = 7/6
    assert t.area[t.region_class == 1].item() == pytest.approx(7 / 6, rel=1e-9)


def test_slice_through_the_shell_is_an_annulus():
    from regioncount import Slice

    t = decision_topology(annulus(3), Slice((0, 0, 0), (1, 0, 0), (0, 0, 1), (-1.5, -1.5), (1.5, 1.5)))
    assert t.dimension == 2 and t.per_class()["1"] == {"b0": 1, "b1": 1, "b2": None}
    assert (t.boundary_b0, t.boundary_b1) == (2, 2)


def test_solid_torus_has_one_tunnel():
    """A square annulus times a slab: b0 = 1, b1 = 1 (chi of its boundary torus is 0), b2 = 0. Its complement in
    the box also has b1 = 1 (Alexander duality), and one cavity: the torus it encloses."""
    t = decision_topology(solid_ring(), Box(-1.5, 1.5, 3))
    pc = t.per_class()
    assert pc["1"] == {"b0": 1, "b1": 1, "b2": 0}
    assert pc["0"] == {"b0": 1, "b1": 1, "b2": 1}
    assert t.area[t.region_class == 1].item() == pytest.approx(1.5 * 0.5, rel=1e-9)


def test_as_dict_is_json_ready():
    import json

    d = _topo(annulus(), -1.5, 1.5).as_dict()
    json.dumps(d)
    assert d["holes"] == 2 and d["boundary"] == {"b0": 2, "b1": 2} and len(d["regions"]) == 3


def test_plot_decision_marks_holes_and_writes_betti_numbers(tmp_path, capsys):
    import json

    from regioncount import save_model
    from regioncount_cli.main import main

    model = tmp_path / "holes.npz"
    save_model(disc_with_holes(3), model)
    png = tmp_path / "holes.png"
    assert main(["plot", str(model), "--decision", "--box", "-2.5", "2.5", "--out", str(png)]) == 0
    capsys.readouterr()
    info = json.loads(png.with_suffix(".json").read_text())
    topo = info["topology"]
    assert topo["per_class"]["1"] == {"b0": 1, "b1": 3, "b2": None}
    assert topo["boundary"] == {"b0": 4, "b1": 4} and len(topo["hole_points"]) == 4
    assert png.read_bytes()[:4] == b"\x89PNG"
    # count --decision carries the same numbers
    assert main(["count", str(model), "--decision", "--box", "-2.5", "2.5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["topology"]["holes"] == topo["holes"] == 4
