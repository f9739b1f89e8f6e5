"""Constructions (DESIGN §5): folds hit their formulas, deep folds multiply, products meet the lower bounds.

1D counts are checked two ways: code changes of the JAX forward pass on a dense grid, located against
the breakpoints the formulas predict, and the exact ``line`` engine. 2D/3D counts use distinct codes of
a dense grid (a lower bound, which must reach the formula) and, when it is importable, the exact
``plane`` engine.
"""

from math import comb, prod

import numpy as np
import pytest

from regioncount._domain import Box, Segment
from regioncount.engines._forward import forward_codes
from regioncount.theory._bounds import maxout_lower, relu_lower_serra
from regioncount.theory._constructions import (
    fold_maxout_network,
    fold_relu_network,
    general_forms,
    maxout_fold,
    maxout_fold_pieces,
    product_maxout,
    product_maxout_regions,
    product_relu,
    product_relu_regions,
    relu_fold,
)

OFFSET = 1e-7 * np.pi  # keeps grid points off the rational breakpoints


def design_relu_breakpoints(n):
    j = np.arange(1, n + 1)
    return (2 * j - 1) / (2 * n + 1) if n % 2 else (j + 1) / (n + 3)


def design_maxout_breakpoints(n, k):
    N = n * (k - 1)
    return np.arange(1, N + 1) / (N + 1)


def check_fold(g, bps):
    """g maps [0, 1] onto [0, 1] piece by piece: 0 at 0, alternately 1 and 0 at the breakpoints and 1,
    affine in between (the midpoint value is the mean of the ends)."""
    ends = np.concatenate([[0.0], bps, [1.0]])
    vals = g(ends)
    want = np.arange(len(ends)) % 2
    want[-1] = want[-2] ^ 1
    np.testing.assert_allclose(vals, want, atol=1e-12)
    mids = (ends[1:] + ends[:-1]) / 2
    np.testing.assert_allclose(g(mids), 0.5, atol=1e-12)
    quarter = ends[:-1] + (ends[1:] - ends[:-1]) / 4
    np.testing.assert_allclose(g(quarter), (3 * vals[:-1] + vals[1:]) / 4, atol=1e-12)


@pytest.mark.parametrize("n", range(3, 10))
def test_relu_fold_matches_design(n):
    f = relu_fold(n)
    np.testing.assert_allclose(f.breakpoints, design_relu_breakpoints(n), rtol=1e-15)
    assert f.pieces == n + 1
    check_fold(f, f.breakpoints)


def test_relu_fold_needs_three_units():
    for n in (0, 1, 2):
        with pytest.raises(ValueError):
            relu_fold(n)


@pytest.mark.parametrize("n,k", [(1, 2), (2, 2), (3, 2), (5, 2), (2, 3), (4, 3), (2, 4), (6, 4), (2, 5)])
def test_maxout_fold_matches_design(n, k):
    f = maxout_fold(n, k)
    np.testing.assert_allclose(f.breakpoints, design_maxout_breakpoints(n, k), rtol=1e-15)
    assert f.pieces == maxout_fold_pieces(n, k) == n * (k - 1) + 1
    check_fold(f, f.breakpoints)
    # each unit turns exactly at its own k-1 breakpoints: its argmax changes there and nowhere else
    s = grid_points(0.0, 1.0, 200_000)
    arg = np.argmax(f.W[None] * s[:, None, None] + f.B[None], axis=1)  # (N, n)
    turns = s[1:][np.any(arg[1:] != arg[:-1], axis=1)]
    assert len(turns) == len(f.breakpoints)
    np.testing.assert_allclose(turns, f.breakpoints, atol=2e-5)
    # odd-indexed breakpoints are concave turns (sign -1 units), even-indexed convex (sign +1)
    assert np.sum(f.sign < 0) == ((n + 1) // 2 if k == 2 else n // 2)


@pytest.mark.parametrize("n,k", [(1, 3), (3, 3), (5, 3), (3, 4)])
def test_maxout_fold_odd_units_rank_three_or_more_is_the_documented_fallback(n, k):
    # DESIGN §4 caveat: the even split of signs fails for odd n with k >= 3; the fallback still folds
    # [0, 1] onto itself piece by piece, with (n-1)(k-1)+2 < n(k-1)+1 pieces
    f = maxout_fold(n, k)
    assert f.pieces == (n - 1) * (k - 1) + 2 < n * (k - 1) + 1
    check_fold(f, f.breakpoints)


def compose_breaks(layer_breakpoints):
    """Breakpoints of g_L o ... o g_1 on [0, 1] from each fold's own breakpoints: each piece of the
    inner map goes affinely onto [0, 1], alternately up and down, so the preimages are explicit."""
    pts = np.array([0.0, 1.0])
    for bps in layer_breakpoints:
        new = [pts]
        for i in range(len(pts) - 1):
            u, v = pts[i], pts[i + 1]
            new.append(u + (bps if i % 2 == 0 else 1 - bps[::-1]) * (v - u))
        pts = np.sort(np.concatenate(new))
    return pts[1:-1]


def grid_points(lo, hi, N):
    """N points inside (lo, hi), off every rational breakpoint."""
    return lo + (hi - lo) * (np.arange(N) + 0.5 + OFFSET) / N


def grid_changes(net, lo=0.0, hi=1.0, N=400_000):
    s = grid_points(lo, hi, N)
    Y, C, _ = forward_codes(net.lower(), np.asarray(s[:, None], dtype=np.float64))
    C = np.asarray(C)
    change = np.flatnonzero(np.any(C[1:] != C[:-1], axis=1))
    return s, change, np.asarray(Y)[:, 0], C


def assert_changes_at(s, change, expected):
    """Every code change of the grid brackets exactly one expected breakpoint, and vice versa."""
    assert len(change) == len(expected)
    idx = np.searchsorted(s, expected) - 1  # grid interval holding each expected breakpoint
    np.testing.assert_array_equal(np.sort(idx), change)


@pytest.mark.parametrize("widths", [(3,), (4,), (3, 4), (5, 3, 4)])
def test_fold_relu_network_has_the_product_of_pieces_where_predicted(widths):
    net = fold_relu_network(widths)
    expected = compose_breaks([design_relu_breakpoints(n) for n in widths])
    assert len(expected) + 1 == prod(n + 1 for n in widths)
    s, change, y, C = grid_changes(net)
    assert_changes_at(s, change, expected)
    assert len({c.tobytes() for c in C}) == len(expected) + 1  # every piece its own code
    assert y.min() > -1e-9 and y.max() < 1 + 1e-9 and y.min() < 1e-4 and y.max() > 1 - 1e-4


@pytest.mark.parametrize("widths,k", [((2,), 3), ((2, 4), 3), ((3, 1), 2), ((2, 2), 4)])
def test_fold_maxout_network_has_the_product_of_pieces_where_predicted(widths, k):
    net = fold_maxout_network(widths, k)
    expected = compose_breaks([design_maxout_breakpoints(n, k) for n in widths])
    assert len(expected) + 1 == prod(n * (k - 1) + 1 for n in widths)
    s, change, y, C = grid_changes(net)
    assert_changes_at(s, change, expected)
    assert len({c.tobytes() for c in C}) == len(expected) + 1


def test_fold_networks_on_the_exact_line_engine():
    line = pytest.importorskip("regioncount.engines._line")
    for net, layers in [
        (fold_relu_network((3, 4, 5)), [design_relu_breakpoints(n) for n in (3, 4, 5)]),
        (fold_maxout_network((2, 4, 2), 3), [design_maxout_breakpoints(n, 3) for n in (2, 4, 2)]),
    ]:
        pieces = line.walk_line(net, Segment([0.0], [1.0]))
        expected = compose_breaks(layers)
        assert pieces.activation_pieces == len(expected) + 1
        np.testing.assert_allclose(pieces.breaks[1:-1], expected, atol=1e-12)
        assert pieces.linear_pieces == pieces.activation_pieces  # every piece has its own slope


def test_odd_units_rank_three_caveat_measured_on_the_line():
    line = pytest.importorskip("regioncount.engines._line")
    # width-1 rank-3 maxout on R with L = 2: formula 9, DESIGN: at most 7; our construction has 2 * 3
    net = product_maxout((1, 1), 1, 3)
    assert maxout_lower((1, 1), 1, 3) == 9
    assert product_maxout_regions((1, 1), 1, 3) == 6
    assert line.walk_line(net, Segment([-1.0], [2.0])).activation_pieces == 6
    net = product_maxout((3, 3, 2), 1, 3)
    count = line.walk_line(net, Segment([-1.0], [2.0])).activation_pieces
    assert count == product_maxout_regions((3, 3, 2), 1, 3) == 6 * 6 * 5 < maxout_lower((3, 3, 2), 1, 3)


@pytest.mark.parametrize(
    "kind,widths,n0,k",
    [
        ("relu", (6, 4), 1, None),
        ("relu", (3, 5, 3), 1, None),
        ("maxout", (4, 3), 1, 3),
        ("maxout", (3, 2, 3), 1, 2),
        ("maxout", (2, 2, 2), 1, 4),
    ],
)
def test_products_on_the_line_meet_the_lower_bounds(kind, widths, n0, k):
    line = pytest.importorskip("regioncount.engines._line")
    if kind == "relu":
        net, bound = product_relu(widths, n0), relu_lower_serra(widths, n0)
    else:
        net, bound = product_maxout(widths, n0, k), maxout_lower(widths, n0, k)
    pieces = line.walk_line(net, Segment([-1.0], [2.0]))
    assert pieces.activation_pieces == bound
    assert pieces.linear_pieces == bound  # no two adjacent pieces share an affine map
    s, change, _, _ = grid_changes(net, -1.0, 2.0)
    assert len(change) + 1 == bound
    assert_changes_at(s, change, pieces.points(pieces.breaks[1:-1])[:, 0])  # breaks are in t, not x


def grid_distinct_codes(net, q, N, lo=-1.0, hi=2.0):
    t = grid_points(lo, hi, N)
    G = np.stack(np.meshgrid(*([t] * q), indexing="ij"), -1).reshape(-1, q)
    seen = set()
    for i in range(0, len(G), 1 << 18):
        _, C, _ = forward_codes(net.lower(), G[i : i + (1 << 18)])
        seen.update(row.tobytes() for row in np.unique(np.asarray(C).astype(np.int8), axis=0))
    return len(seen)


@pytest.mark.parametrize(
    "kind,widths,n0,k,N",
    [
        ("relu", (6, 3), 2, None, 500),
        ("maxout", (4, 2), 2, 3, 500),
        ("maxout", (2, 3), 2, 2, 500),
        ("maxout", (6, 3), 3, 2, 60),
    ],
)
def test_products_in_the_plane_reach_the_lower_bounds_on_a_grid(kind, widths, n0, k, N):
    if kind == "relu":
        net, bound = product_relu(widths, n0), relu_lower_serra(widths, n0)
        assert product_relu_regions(widths, n0) == bound
    else:
        net, bound = product_maxout(widths, n0, k), maxout_lower(widths, n0, k)
        assert product_maxout_regions(widths, n0, k) == bound
    assert grid_distinct_codes(net, n0, N) == bound  # a grid can only miss regions, and misses none


@pytest.mark.parametrize(
    "kind,widths,k,expected",
    [
        ("relu", (6, 3), None, 112),
        ("relu", (6, 6, 3), None, 1792),
        ("maxout", (4, 2), 3, 225),
        ("maxout", (4, 4, 2), 3, 5625),
    ],
)
def test_products_exact_counts_on_the_plane_engine(kind, widths, k, expected):
    plane = pytest.importorskip("regioncount.engines._plane")
    net = product_relu(widths, 2) if kind == "relu" else product_maxout(widths, 2, k)
    part = plane.partition_plane(net, Box([-1.0, -1.0], [2.0, 2.0]))
    assert part.n_regions == expected
    # positively spanning last-layer normals: no all-off constant region merges across folds
    assert part.linear_regions() == expected


@pytest.mark.parametrize("n_forms,n0,n_off", [(3, 2, 1), (6, 2, 1), (2, 2, 2), (4, 3, 3), (5, 1, 2), (1, 2, 1)])
def test_general_forms_vertices_inside_and_normals_positively_span(n_forms, n0, n_off):
    W, tau = general_forms(n_forms, n0, n_off, seed=3)
    assert W.shape == (n_forms, n0) and tau.shape == (n_forms, n_off)
    assert np.all(np.diff(tau, axis=1) > 0)
    r = min(n0, n_forms)
    rng = np.random.default_rng(0)
    for _ in range(30):
        S = rng.choice(n_forms, r, replace=False)
        choice = rng.integers(0, n_off, r)
        v = 0.5 + np.linalg.pinv(W[S]) @ tau[S, choice]
        assert np.all((v > 0.1 - 1e-12) & (v < 0.9 + 1e-12))
    if n_forms > n0:
        dirs = np.concatenate([rng.normal(size=(500, n0)), -W])
        assert np.all(np.max(dirs @ W.T, axis=1) > 0)  # every direction sees some normal: positive span


def test_last_layer_arrangement_count_in_one_cell():
    # inside one fold cell the last layer is an arrangement of n_L classes of k-1 parallel hyperplanes
    # in general position: sum_j C(n_L, j)(k-1)^j regions (checked on the cube, single layer)
    for n_L, k in [(3, 2), (2, 3), (3, 3)]:
        net = product_maxout((n_L,), 2, k)
        want = sum(comb(n_L, j) * (k - 1) ** j for j in range(3))
        assert grid_distinct_codes(net, 2, 200, 0.0, 1.0) == want


def test_product_validity_conditions():
    with pytest.raises(ValueError):
        product_relu((5, 3), 2)  # p = 2 < 3
    with pytest.raises(ValueError):
        product_maxout((1, 3), 2, 2)  # p = 0
