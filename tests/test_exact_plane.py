"""Exact means exact: the plane engine decides every sign for the float64 network as given, with no sliver
threshold, and its certificate checks the result independently (docs/design.md §3)."""

import math

import numpy as np
import pytest
from _shared import shared_file

from regioncount import MLP, Box, InexactError, Partition, certify, load_model, random_maxout, random_mlp
from regioncount.engines._plane import partition_plane


def _data(name):
    return load_model(shared_file(name))


def _count(net, L):
    return partition_plane(net, Box([-L, -L], [L, L])).n_regions


def test_torch_w100_d5_has_every_sliver():
    part = partition_plane(_data("torch_mlp_w100_d5_s0.npz"), Box([-2, -2], [2, 2]))
    assert part.n_regions == 46_122
    assert part.stats["min_area"] < 1e-12  # the regions a 1e-12 sliver threshold used to drop
    # the signs its vertex-radius test leaves open are settled by the three-line determinant filter here: no
    # exact arithmetic is needed on this net (it was 16 predicates before that filter)
    assert part.stats["exact_predicates"] < part.stats["predicates"]


def test_torch_w16_d3_grows_to_the_whole_plane():
    net = _data("torch_mlp_w16_d3_s0.npz")
    assert [_count(net, L) for L in (2, 10, 1e2, 1e3, 1e4, 1e5)] == [472, 1202, 1368, 1389, 1389, 1389]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_count_never_falls_as_the_box_grows(seed):
    net = random_mlp(2, [12, 12], seed=seed)
    counts = [_count(net, L) for L in (0.5, 2, 8, 64, 1024, 2.0**20)]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]
    m = random_maxout(2, [6, 6], k=3, seed=seed)
    counts = [_count(m, L) for L in (0.5, 4, 256, 2.0**16)]
    assert counts == sorted(counts)


def test_triangle_far_below_any_old_threshold_is_a_region():
    # y = 0, y = a (x - x0) with slope a = 2^-40 crossing inside the box, and x = x0 + d closing a triangle
    # of area a d^2 / 2 ~ 5e-21 of the box's 4: three lines in general position, 7 regions
    a, x0, d = 2.0**-40, 0.25, 2.0**-13
    W = np.array([[0.0, 1.0], [-a, 1.0], [1.0, 0.0]])
    b = np.array([0.0, a * x0, -(x0 + d)])
    net = MLP((W, np.ones((1, 3))), (b, np.zeros(1)))
    part = partition_plane(net, Box([-1, -1], [1, 1]))
    assert part.n_regions == 7
    small = part.areas.min()
    assert small / 4.0 < 1e-20
    assert math.isclose(small, a * d * d / 2, rel_tol=1e-9)
    assert certify(part, net)["passed"]


def test_concurrent_and_duplicate_lines_add_nothing():
    # four lines through (3/8, -5/8), one of them twice and once negated: 8 sectors, exactly
    p = np.array([0.375, -0.625])
    W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -2.0], [1.0, -2.0], [-1.0, 0.0]])
    b = -(W @ p)
    net = MLP((W, np.ones((1, len(b)))), (b, np.zeros(1)))
    part = partition_plane(net, Box([-1.5, -1.5], [1.5, 1.5]))
    assert part.n_regions == 8
    assert certify(part, net)["passed"]


@pytest.mark.parametrize("power", [900, -900])
def test_function_preserving_rescale_keeps_the_count(power):
    net = random_mlp(2, [16, 16], seed=4)
    W, B = list(net.weights), list(net.biases)
    W[0], B[0] = W[0] * 2.0**-power, B[0] * 2.0**-power
    W[1] = W[1] * 2.0**power
    scaled = MLP(tuple(W), tuple(B))
    box = Box([-2, -2], [2, 2])
    assert partition_plane(scaled, box).n_regions == partition_plane(net, box).n_regions


def test_overflow_stops_instead_of_counting():
    net = random_mlp(2, [16, 16], seed=4)
    W = list(net.weights)
    W[0] = W[0] * 1e300
    W[1] = W[1] * 1e300
    with pytest.raises(InexactError, match="overflow"):
        partition_plane(MLP(tuple(W), net.biases), Box([-2, -2], [2, 2]))


def test_no_area_tolerance_left():
    with pytest.raises(TypeError):
        partition_plane(random_mlp(2, [4]), Box([-1, -1], [1, 1]), area_tol=1e-12)


@pytest.mark.parametrize(
    "net",
    [random_mlp(2, [16, 16, 16], seed=1), random_maxout(2, [6, 6], k=3, seed=2)],
    ids=["mlp", "maxout"],
)
def test_certificate_passes_and_catches_corruption(net):
    box = Box([-2, -2], [2, 2])
    part = partition_plane(net, box)
    cert = certify(part, net)
    assert cert["passed"], cert
    assert set(cert["checks"]) == {"areas", "witnesses", "neighbours", "euler", "halfplanes", "neighbour_lines"}
    # a dropped region: the areas no longer cover the box
    dropped = _without(part, [part.n_regions // 2])
    c = certify(dropped, net)
    assert not c["passed"] and not c["checks"]["areas"]["passed"]
    # a merged pair: one region's polygon replaced by the union of two neighbours (the other removed)
    i, j = part.adjacency()[0]
    merged = _merged(part, int(i), int(j))
    c = certify(merged, net)
    assert not c["passed"] and not c["checks"]["halfplanes"]["passed"]


def _rebuild(part, polys, keep):
    verts = np.concatenate(polys)
    nv = np.array([len(p) for p in polys])
    offsets = np.r_[0, np.cumsum(nv)]
    areas = np.array([0.5 * np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1]) for p in polys])
    return Partition(part.domain, verts, offsets, part.maps[keep], areas, part.codes[keep])


def _without(part, drop):
    keep = np.setdiff1d(np.arange(part.n_regions), drop)
    return _rebuild(part, [part.polygon(int(r)) for r in keep], keep)


def _merged(part, i, j):
    import shapely

    union = shapely.union(shapely.Polygon(part.polygon(i)), shapely.Polygon(part.polygon(j)))
    ring = np.asarray(shapely.geometry.polygon.orient(union).exterior.coords)[:-1]
    keep = np.array([r for r in range(part.n_regions) if r != j])
    polys = [ring if r == i else part.polygon(int(r)) for r in keep]
    return _rebuild(part, polys, keep)


@pytest.mark.parametrize("seed", range(4))
def test_the_line_table_merged_batch_by_batch_is_the_table_of_all_lines(seed):
    """The engine's line table (tag -> the line first recorded, the largest error, inf where two recorded lines
    differ) built by merging each new batch into the table so far equals the table of every line sorted at once:
    tags repeat within and across batches, some with a different line."""
    from regioncount.engines._plane._predicates import _merge_lines, _unique_lines

    rng = np.random.default_rng(seed)
    lines = rng.standard_normal((30, 3))
    batches = []
    for _ in range(6):
        n = int(rng.integers(0, 12))
        t = rng.integers(0, 30, n)
        w = lines[t].copy()
        other = rng.random(n) < 0.15  # a differing line recorded under the tag
        w[other] += 1.0
        batches.append((t, w, rng.random(n) * (rng.random(n) < 0.7)))
    table = _unique_lines(batches[:1])
    for b in batches[1:]:
        table = _merge_lines(table, _unique_lines([b]))
    whole = _unique_lines(batches)
    for got, want in zip(table, whole, strict=True):
        assert np.array_equal(got, want)
    assert np.isinf(whole[2]).any()  # the case where lines differ is met
