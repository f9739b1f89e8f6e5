"""The certificate decides its checks exactly: a real region merged into a neighbour, of any area, fails it and
the failure names the region (2D here; 3D polytopes at the end)."""

from __future__ import annotations

import numpy as np
import pytest

from regioncount import MLP, Box, Partition, certify, random_maxout, random_mlp
from regioncount.engines._plane import partition_plane


def _merged(part: Partition, r: int, n: int) -> tuple[Partition, int]:
    """A copy of ``part`` with region ``r`` merged into its neighbour ``n``: ``n``'s polygon becomes the union
    (its code stays), ``r`` is removed. Returns the copy and ``n``'s index in it."""
    import shapely

    u = shapely.union(shapely.Polygon(part.polygon(r)), shapely.Polygon(part.polygon(n)))
    hull = shapely.convex_hull(u)
    if u.geom_type != "Polygon" or abs(hull.area - part.areas[r] - part.areas[n]) <= 1e-9 * hull.area:
        u = hull  # siblings of one cut: the union is the parent polygon, as an engine that skipped the cut makes
    ring = np.asarray(shapely.geometry.polygon.orient(u).exterior.coords)[:-1]
    keep = np.array([i for i in range(part.n_regions) if i != r])
    polys = [ring if i == n else part.polygon(int(i)) for i in keep]
    verts = np.concatenate(polys)
    offsets = np.r_[0, np.cumsum([len(p) for p in polys])]
    areas = np.array([0.5 * np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1]) for p in polys])
    out = Partition(part.domain, verts, offsets, part.maps[keep], areas, part.codes[keep], program=part.program)
    return out, int(np.searchsorted(keep, n))


def _neighbour(part, r):
    """The neighbour of ``r`` whose union with it is closest to convex (a sibling of the same cut, if any)."""
    import shapely

    nb = [j if i == r else i for i, j in part.adjacency().tolist() if r in (i, j)]

    def gap(n):
        u = shapely.union(shapely.Polygon(part.polygon(r)), shapely.Polygon(part.polygon(n)))
        return shapely.convex_hull(u).area - part.areas[r] - part.areas[n]

    return int(min(nb, key=gap))


def _named(cert, region) -> bool:
    for name in ("halfplanes", "neighbour_lines", "witnesses"):
        c = cert["checks"][name]
        if c["passed"] is False and any(
            region == (k if isinstance(k, int) else k[0]) or (isinstance(k, list) and region in k) for k in c["regions"]
        ):
            return True
    return False


def test_a_sliver_of_area_1e_13_merged_into_its_neighbour_fails_the_certificate_by_name():
    # two lines 5e-14 apart (x = 0.3 and x = 0.3 + 5e-14) and two more: a sliver of area 2e-13 between them
    W = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b = np.array([-0.3, -(0.3 + 5e-14), -0.45, 0.2])
    net = MLP((W, np.array([[1.0, -2.0, 0.5, 1.5]])), (b, np.zeros(1)))
    part = partition_plane(net, Box(-1, 1, 2))
    assert certify(part, net)["passed"]
    r = int(np.argmin(part.areas))
    assert part.areas[r] < 1e-12
    bad, idx = _merged(part, r, _neighbour(part, r))
    cert = certify(bad, net)
    assert not cert["passed"]
    assert _named(cert, idx), cert["checks"]


@pytest.mark.parametrize(
    "net",
    [random_mlp(2, [10, 10], seed=3), random_maxout(2, [5, 5], k=3, seed=2)],
    ids=["mlp", "maxout"],
)
@pytest.mark.parametrize(
    "which", [0, -1]
)  # the smallest and the largest region  # the smallest, the second smallest and the largest region
def test_any_region_merged_into_a_neighbour_fails_the_certificate_by_name(net, which):
    part = partition_plane(net, Box(-2, 2, 2))
    assert certify(part, net)["passed"]
    r = int(np.argsort(part.areas)[which])
    bad, idx = _merged(part, r, _neighbour(part, r))
    cert = certify(bad, net)
    assert not cert["passed"]
    assert _named(cert, idx), cert["checks"]


def test_the_certificate_has_no_float_acceptance_left():
    # a region relabelled with its neighbour's code: the exact witness check names it
    net = random_mlp(2, [8, 8], seed=5)
    part = partition_plane(net, Box(-1, 1, 2))
    r = int(np.argsort(part.areas)[0])
    n = _neighbour(part, r)
    codes = part.codes.copy()
    codes[r] = codes[n]
    bad = Partition(part.domain, part.vertices, part.offsets, part.maps, part.areas, codes, program=part.program)
    cert = certify(bad, net)
    assert not cert["checks"]["witnesses"]["passed"] and r in cert["checks"]["witnesses"]["regions"]


def _merged_polytopes(poly, r: int, n: int):
    """A copy of ``poly`` with polytope ``r`` merged into its neighbour ``n`` (``n`` takes ``r``'s vertices too,
    its code stays; ``r`` is removed). Returns the copy and ``n``'s index in it."""
    from regioncount import Polytopes

    keep = [i for i in range(poly.n_regions) if i != r]
    verts, inc, offsets = [], [], [0]
    for i in keep:
        rows = list(range(poly.offsets[i], poly.offsets[i + 1]))
        if i == n:
            rows += list(range(poly.offsets[r], poly.offsets[r + 1]))
        verts.append(poly.vertices[rows])
        inc.append(poly.incidence[rows])
        offsets.append(offsets[-1] + len(rows))
    keep = np.array(keep)
    blocks = [("digits", poly.code_length, poly.codes[keep])]
    out = Polytopes(
        poly.domain,
        np.concatenate(verts),
        np.array(offsets),
        poly.maps[keep],
        blocks,
        incidence=np.concatenate(inc),
        facet_ids=poly.facet_ids[keep],
        facet_planes=poly.facet_planes[keep],
        program=poly.program,
    )
    return out, int(np.searchsorted(keep, n))


@pytest.mark.parametrize(
    "net",
    [random_mlp(3, [5, 4], seed=0), pytest.param(random_maxout(3, [3, 3], k=2, seed=1), marks=pytest.mark.slow)],
    ids=["mlp", "maxout"],
)
@pytest.mark.parametrize("which", [0, -1])
def test_a_polytope_merged_into_a_neighbour_fails_the_3d_certificate_by_name(net, which):
    from regioncount.engines._space import partition_space

    poly = partition_space(net, Box(-1, 1, 3))
    cert = certify(poly, net)
    assert cert["passed"], cert["checks"]
    assert {"volumes", "neighbours", "vertices", "witnesses"} <= set(cert["checks"])
    r = int(np.argsort(poly.volumes)[which])
    n = int(next(j if i == r else i for i, j in poly.adjacency().tolist() if r in (i, j)))
    bad, idx = _merged_polytopes(poly, r, n)
    cert = certify(bad, net)
    assert not cert["passed"]
    assert idx in cert["checks"]["vertices"]["regions"], cert["checks"]
