"""The exact ``space`` engine (boxes and slices of dimension >= 3): closed forms, agreement with the plane,
line and sample engines, degenerate input, and the CLI on a 3-input model."""

import itertools
import json
from math import comb

import numpy as np
import pytest
from _nets import assert_linear_regions_match
from typer.testing import CliRunner

from regioncount import MLP, Box, Maxout, Segment, Slice, random_maxout, random_mlp, random_transformer
from regioncount._count import count_regions
from regioncount._domain import AffineSlice
from regioncount._errors import CurvedBoundaryError, DomainError, MemoryCapError
from regioncount._io import save_model
from regioncount.engines._forward import forward_codes
from regioncount.engines._line import walk_line
from regioncount.engines._plane import partition_plane
from regioncount.engines._sample import count_sampled
from regioncount.engines._space import partition_space
from regioncount.networks import lower
from regioncount.theory import (
    bound_attaining_transformer,
    maxout_lower,
    product_maxout,
    product_maxout_regions,
    product_relu,
    product_relu_regions,
    relu_lower_serra,
    transformer_maxout_lower,
)
from regioncount.theory._bounds import zaslavsky
from regioncount_cli.main import app


def planes_mlp(n: int, q: int, seed: int = 0) -> MLP:
    """One ReLU layer of ``n`` hyperplanes in general position in R^q, every q-wise crossing inside
    [-0.9, 0.9]^q (asserted), so the box [-1, 1]^q holds sum_{j<=q} C(n, j) regions (Zaslavsky)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, q))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    b = rng.uniform(-0.005, 0.005, n)
    for S in itertools.combinations(range(n), q):
        S = list(S)
        assert np.all(np.abs(np.linalg.solve(W[S], -b[S])) < 0.9), "crossing outside the box: choose another seed"
    return MLP((W, rng.normal(size=(1, n))), (b, np.zeros(1)))


def mlp(W, b) -> MLP:
    W = np.asarray(W, float)
    return MLP((W, np.ones((1, W.shape[0]))), (np.asarray(b, float), np.zeros(1)))


def codes_of(P) -> set:
    return set(map(bytes, np.ascontiguousarray(P.codes.astype(np.int8))))


def check_witnesses(net, P, extra=None):
    """Each region's witness point (an interior point) has the region's code under the reference forward pass,
    and the region's affine map gives the network's output there. Returns the codes of the ``extra`` inputs
    (one forward pass for both, so one compilation)."""
    v = P.witness_points()
    X = P.domain.to_input(v)
    n = X.shape[0]
    if extra is not None:
        X = np.concatenate([X, extra])
    y, ref, _ = forward_codes(lower(net), X)
    y, ref, more = np.asarray(y)[:n], np.asarray(ref)[:n], np.asarray(ref)[n:]
    np.testing.assert_array_equal(ref, P.codes)
    mapped = np.einsum("rok,rk->ro", P.maps, np.concatenate([v, np.ones((len(v), 1))], axis=1))
    np.testing.assert_allclose(mapped, y, rtol=1e-9, atol=1e-9)
    return more


# ---- closed forms ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "q", "seed"), [(10, 3, 0), (7, 4, 1)])
def test_hyperplanes_in_general_position(n, q, seed):
    P = partition_space(planes_mlp(n, q, seed), Box(-1, 1, q))
    assert P.n_regions == sum(comb(n, j) for j in range(q + 1)) == zaslavsky(n, q)
    assert len(codes_of(P)) == P.n_regions


@pytest.mark.parametrize("widths", [(9, 3), (9, 4)])
def test_relu_product_in_three_dimensions(widths):
    P = partition_space(product_relu(widths, 3), Box(-1, 2, 3))
    assert P.n_regions == product_relu_regions(widths, 3) == relu_lower_serra(widths, 3)


@pytest.mark.parametrize(("widths", "k"), [((6, 3), 3), ((3, 3), 2)])
def test_maxout_product_in_three_dimensions(widths, k):
    P = partition_space(product_maxout(widths, 3, k), Box(-1, 2, 3))
    assert P.n_regions == product_maxout_regions(widths, 3, k) == maxout_lower(widths, 3, k)
    assert P.linear_regions() == P.n_regions  # the construction's regions are linear regions


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["paper", "compact"])
def test_thm44_transformer_q3_is_exact(layout):
    # p = floor(mT/q) = 2 is even, so the fold attains Thm 4.4 (Gu, Yang, Zhou 2026)
    tf, info = bound_attaining_transformer(2, 3, 3, 6, layout=layout)
    P = partition_space(tf, Box(-1, 2, 3))
    assert P.n_regions == info["bound"] == transformer_maxout_lower(2, 3, 3, 6) == 29_125


# ---- engines agree -----------------------------------------------------------------------------------

BOX3 = Box(-1, 1, 3)


NETS = {
    "mlp": lambda: random_mlp(3, [8, 8], 1, seed=1, init="normal"),
    "maxout": lambda: random_maxout(3, [4, 4], k=3, seed=2),
    "transformer": lambda: random_transformer(3, tokens=3, d_model=6, depth=1, heads=2, seed=3),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "transformer" else n for n in NETS]
)  # the transformer case is 6-8 s
def test_engines_agree_on_random_networks(name):
    net = NETS[name]()
    box = Box(-1, 1, 3)
    P = partition_space(net, box)
    assert P.n_regions > 20
    # sampled <= exact: every code met by random points is a region's code
    sampled = check_witnesses(net, P, np.random.default_rng(5).uniform(-1, 1, (20_000, 3)))
    seen = {bytes(c) for c in sampled.astype(np.int8)}
    assert seen <= codes_of(P) and len(seen) <= P.n_regions
    np.testing.assert_allclose(P.volumes.sum(), 8.0, rtol=0, atol=1e-9)
    assert np.all(P.volumes > 0)
    if name == "mlp":
        assert count_sampled(net, box, grid=40).regions <= P.n_regions
    assert_linear_regions_match(P, P.linear_region_labels())  # components of equal-map neighbours (networkx)
    # every axis-aligned 2D section equals the plane engine's partition of that slice
    for z in (0.3, -0.77):
        section = partition_plane(net, Slice([0, 0, z], [1, 0, 0], [0, 1, 0], (-1, -1), (1, 1)))
        met = P.meets_hyperplane([0, 0, 1, -z])
        assert met.size == section.n_regions
        assert {bytes(c) for c in P.codes[met].astype(np.int8)} == codes_of(section)
    # every line through the box meets exactly the line engine's pieces, in order, with the same breaks
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        idx, iv = P.meet_segment(a, b)
        pieces = walk_line(net, Segment(a, b))
        np.testing.assert_array_equal(P.codes[idx], pieces.codes)
        np.testing.assert_allclose(iv[:, 0], pieces.breaks[:-1], atol=1e-9)


@pytest.mark.parametrize("name", list(NETS))
def test_rational_re_evaluation_matches_the_float_maps(name):
    # the exact path (used where float64 cannot decide a sign) rebuilds every map from a region's code
    from regioncount.engines._space import _Exact

    net = NETS[name]()
    P = partition_space(net, BOX3)
    program = lower(net)
    x0, V = BOX3.input_map()
    ex = _Exact(program, x0, V, BOX3.lo, BOX3.hi)
    for r in np.random.default_rng(0).choice(P.n_regions, 4, replace=False):
        rows = [(kind, w, a[r]) for kind, w, a in P._blocks]
        A = ex.output(rows)[:, program.out_token, :].T.astype(float)  # (out, k+1) in u = x (box [-1, 1]^3)
        np.testing.assert_allclose(A, P.maps[r], rtol=1e-12, atol=1e-12)


def test_adjacency_is_symmetric_and_matches_sections():
    net = NETS["mlp"]()
    P = partition_space(net, Box(-1, 1, 3))
    E = P.adjacency()
    assert E.shape[1] == 2 and np.all(E[:, 0] < E[:, 1])
    # neighbours across a facet differ in their codes; each region has at least 4 facets' worth of neighbours
    # or box sides, and the region graph is connected
    assert np.all(np.any(P.codes[E[:, 0]] != P.codes[E[:, 1]], axis=1))
    from regioncount.results._partition import _components

    assert np.unique(_components(P.n_regions, E)).size == 1
    # two regions met consecutively by a segment share a facet
    a, b = np.array([-1.0, -0.3, 0.2]), np.array([1.0, 0.4, -0.1])
    idx, _ = P.meet_segment(a, b)
    pairs = {tuple(p) for p in E.tolist()}
    assert all((min(i, j), max(i, j)) in pairs for i, j in zip(idx[:-1], idx[1:], strict=True))


def test_four_dimensional_box_and_three_dimensional_slice():
    net = random_mlp(4, [6, 6], 1, seed=4, init="normal")
    P4 = partition_space(net, Box(-1, 1, 4))
    check_witnesses(net, P4)
    np.testing.assert_allclose(P4.volumes.sum(), 16.0, rtol=0, atol=1e-9)
    a, b = np.array([-1.0, 0.5, -0.2, 0.9]), np.array([1.0, -0.7, 0.3, -1.0])
    idx, _ = P4.meet_segment(a, b)
    np.testing.assert_array_equal(P4.codes[idx], walk_line(net, Segment(a, b)).codes)
    # a 3D slice through R^4, and a 2D section of that slice against the plane engine
    U = np.array([[1.0, 0.2, 0.0], [0.0, 1.0, 0.3], [0.1, 0.0, 1.0], [0.3, -0.2, 0.1]])
    x0 = np.array([0.05, -0.1, 0.0, 0.2])
    sl = AffineSlice(x0, U, -0.8, 0.8)
    P3 = partition_space(net, sl)
    check_witnesses(net, P3)
    assert count_sampled(net, sl, grid=30).regions <= P3.n_regions
    section = partition_plane(net, Slice(x0 + 0.25 * U[:, 2], U[:, 0], U[:, 1], (-0.8, -0.8), (0.8, 0.8)))
    met = P3.meets_hyperplane([0, 0, 1, -0.25])
    assert {bytes(c) for c in P3.codes[met].astype(np.int8)} == codes_of(section)


# ---- degenerate input ----------------------------------------------------------------------------------


def test_no_size_threshold_a_region_of_volume_1e_33_counts():
    # x = 0, x = 1e-9 y and y = 1e-12: three vertical planes in general position, every crossing inside the
    # box, so 7 regions; one is a prism over a triangle of legs 1e-21 and 1e-12 (volume 1e-33)
    P = partition_space(mlp([[1, 0, 0], [1, -1e-9, 0], [0, 1, 0]], [0, 0, -1e-12]), BOX3)
    assert P.n_regions == 7
    assert P.exact_decisions > 0  # far below float resolution: decided in rational arithmetic
    np.testing.assert_allclose(np.sort(P.volumes)[0], 1e-33, rtol=1e-3)  # float vertices: volumes are approximate


def test_pencil_of_planes_through_a_line():
    th = np.pi * np.arange(5) / 5
    P = partition_space(mlp(np.stack([np.cos(th), np.sin(th), 0 * th], 1), np.zeros(5)), BOX3)
    assert P.n_regions == 10
    assert P.exact_decisions > 0  # the common line's vertices were decided in rational arithmetic


def test_central_arrangement():
    # n planes through one point, otherwise generic: 2 sum_{j<=2} C(n-1, j) = n^2 - n + 2 regions
    W = np.random.default_rng(3).normal(size=(5, 3))
    P = partition_space(mlp(W, np.zeros(5)), BOX3)
    assert P.n_regions == 22
    np.testing.assert_allclose(P.volumes.sum(), 8.0, atol=1e-9)


def test_planes_through_vertices_edges_and_faces():
    # x+y+z = 3 touches the corner (1,1,1); x = 1 is a face; x+y = 0 runs through two box edges; z = -1 a face
    net = mlp([[1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]], [-3, -1, 0, 1])
    P = partition_space(net, BOX3)
    assert P.n_regions == 2
    check_witnesses(net, P)


def test_duplicate_and_dead_units():
    # x = -0.3 three times (2x = -0.6 too), a zero unit, an always-off unit, and y = 0: 2 x 2 regions
    net = mlp([[1, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 0], [0, 0, 0], [0, 1, 0]], [0.3, 0.3, 0.6, 0, -1, 0])
    P = partition_space(net, BOX3)
    assert P.n_regions == 4
    check_witnesses(net, P)


def test_concurrent_planes_through_crossings():
    # x = 0, y = 0, x + y = 0, x - y = 0 share the z-axis (8 wedges); x + y + z = 0 halves each: 16
    net = mlp([[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 1], [1, -1, 0]], np.zeros(5))
    P = partition_space(net, BOX3)
    assert P.n_regions == 16
    check_witnesses(net, P)


def test_deep_unit_that_is_zero_on_half_the_box():
    # layer 2 re-reads relu(x) (identically 0 where x < 0: no cut there) and cuts x + y = 1/2: 4 + 3 regions
    net = MLP(
        (np.array([[1.0, 0, 0], [0, 1, 0]]), np.array([[1.0, 0], [1, 1], [0, 1]]), np.ones((1, 3))),
        (np.zeros(2), np.array([0, -0.5, 0]), np.zeros(1)),
    )
    P = partition_space(net, BOX3)
    assert P.n_regions == 7
    check_witnesses(net, P)


def test_maxout_tied_pieces_go_to_the_lower_index():
    W = np.array([[[1.0, 0, 0]], [[1, 0, 0]], [[0, 1, 0]]])  # pieces 0 and 1 identical
    net = Maxout((W,), (np.zeros((3, 1)),), np.ones((1, 1)), np.zeros(1))
    P = partition_space(net, BOX3)
    assert P.n_regions == 2
    assert set(np.unique(P.codes)) == {0, 2}
    check_witnesses(net, P)


# ---- errors, count_regions and the CLI -------------------------------------------------------------------


def test_domain_and_curvature_errors():
    net = NETS["mlp"]()
    with pytest.raises(DomainError):
        partition_space(net, Slice([0, 0, 0], [1, 0, 0], [0, 1, 0]))
    with pytest.raises(DomainError):
        partition_space(random_mlp(2, [4], 1, seed=0), Box(-1, 1, 2))
    with pytest.raises(MemoryCapError):
        partition_space(net, BOX3, max_regions=5)
    # after a token-wise FFN the scores are products of different affine maps: curved boundaries
    with pytest.raises(CurvedBoundaryError):
        partition_space(random_transformer(3, tokens=3, d_model=6, depth=2, seed=3), BOX3)


def test_count_regions_uses_the_space_engine():
    net = NETS["maxout"]()
    res = count_regions(net, BOX3)
    P = partition_space(net, BOX3)
    assert res["exact"] is True and res["regions"] == P.n_regions and res["dimension"] == 3
    assert res["linear_regions"] == P.linear_regions()
    with pytest.raises(MemoryCapError, match="max_regions"):
        count_regions(net, BOX3, max_regions=3)
    fast = count_regions(net, BOX3, linear=False)
    assert fast["linear_regions"] is None and fast["regions"] == P.n_regions
    assert fast["domain"] == {"box": {"lo": [-1.0] * 3, "hi": [1.0] * 3}}


def test_cli_count_and_plot_on_a_three_input_model(tmp_path):
    net = NETS["mlp"]()
    path = tmp_path / "m3.npz"
    save_model(net, path)
    runner = CliRunner()
    res = runner.invoke(app, ["count", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["regions"] == partition_space(net, BOX3).n_regions and out["exact"] is True
    res = runner.invoke(
        app, ["count", str(path), "--json", "--origin", "0,0,0", "--dir", "1,0,0", "--dir", "0,1,0", "--dir", "0,0,1"]
    )
    assert res.exit_code == 0 and json.loads(res.output)["regions"] == out["regions"]
    res = runner.invoke(app, ["count", str(path), "--max-regions", "3"])
    assert res.exit_code == 5 and "max_regions" in res.output  # a limit (exit code 5)
    png = tmp_path / "s.png"
    res = runner.invoke(app, ["plot", str(path), "--out", str(png), "--sections", "2"])
    assert res.exit_code == 0, res.output
    info = json.loads(png.with_suffix(".json").read_text())
    assert info["solid_regions"] == out["regions"] and len(info["sections"]) == 2
    for sec in info["sections"]:
        assert sec["exact"] and sec["regions"] == sec["solid_regions_met"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def _exact_det(A):
    from fractions import Fraction

    M = [[Fraction(float(v)) for v in row] for row in A]
    n, det = len(M), Fraction(1)
    for c in range(n):
        p = next((r for r in range(c, n) if M[r][c] != 0), None)
        if p is None:
            return Fraction(0)
        if p != c:
            M[c], M[p] = M[p], M[c]
            det = -det
        det *= M[c][c]
        for r in range(c + 1, n):
            f = M[r][c] / M[c][c]
            M[r] = [a - f * b for a, b in zip(M[r], M[c], strict=True)]
    return det


@pytest.mark.parametrize("k", [3, 4])
def test_the_determinant_and_its_rounding_bound_hold_against_rational_arithmetic(k):
    # the float vertex error bound of 3D and 4D vertices rests on det A and gamma_5 / gamma_10 times the product
    # of |A|'s row sums: checked on well-scaled, badly scaled and nearly singular matrices
    from fractions import Fraction

    from regioncount._predicates import gamma
    from regioncount.engines._space._polytope import _det

    rng = np.random.default_rng(k)
    A = rng.standard_normal((300, k, k)) * np.exp(rng.uniform(-20, 20, (300, k, 1)))
    A[100:200, -1] = A[100:200, 0] + 1e-13 * rng.standard_normal((100, k))  # nearly dependent rows
    det = _det(A)
    err = gamma(5 if k == 3 else 10) * np.prod(np.abs(A).sum(axis=2), axis=1)
    worst = 0.0
    for i in range(A.shape[0]):
        off = abs(Fraction(float(det[i])) - _exact_det(A[i]))
        assert off <= Fraction(float(err[i])), i
        worst = max(worst, float(off / Fraction(float(err[i]))) if err[i] > 0 else 0.0)
    assert worst > 1e-6  # the bound is not vacuous: some rounding errors come near it


def test_four_dimensional_vertex_error_bounds_hold_against_exact_vertices():
    # every 4D vertex after the first layer lies within its recorded bound of the exact vertex where the
    # exact planes of its slots meet (the network's planes in rational arithmetic from the float64 weights)
    from fractions import Fraction

    from regioncount.engines._space import _solve_exact
    from regioncount.engines._space._driver import _cube, _Engine, _Exact
    from regioncount.engines._space._store import _unpack

    net = random_mlp(4, [6, 5], 1, seed=3, init="torch")
    program = lower(net)
    box = Box(-1, 1, 4)
    x0, V = box.input_map()
    st = _cube(4)
    eng = _Engine(program, st, _Exact(program, np.asarray(x0, float), np.asarray(V, float), box.lo, box.hi), None, None)
    A = np.zeros((1, 5, 1, 4))
    A[0, :4, 0] = np.eye(4)
    eng.E, eng.hb = np.zeros((1, 4)), np.ones((1, 4))  # the input map u -> x is exact on [-1, 1]^4
    eng.run(program.ops[:2], A)  # the first layer
    st = eng.st
    bits = _unpack(st.inc[: st.n], st.F)
    checked = 0
    for r in range(st.n):
        for m in range(st.nv[r]):
            tight = np.flatnonzero(bits[r, m] & (st.fid[r] >= 0))
            # one split so far: the exact planes do not depend on a region's code (parent 0 serves all)
            rows = [eng._exact_function(0, int(st.fid[r, f])) for f in tight]
            u = _solve_exact(rows, 4)
            assert u is not None
            dist2 = sum((Fraction(float(st.V[r, m, i])) - u[i]) ** 2 for i in range(4))
            assert float(dist2) <= st.V[r, m, 4] ** 2 * (1 + 1e-9) + 1e-300
            checked += 1
    assert checked > 500 and float(np.min(st.V[: st.n, :, 4])) == 0.0  # the cube's corners are exact
