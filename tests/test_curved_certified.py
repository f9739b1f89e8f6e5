"""The certified curved engine (exact algebraic predicates, python-flint): closed forms that need exact
decisions (a lens of width 1e-13, tangencies, curves through a corner or tangent to the box), each
expected count checked independently in exact rational arithmetic on the float64 weights; agreement with
the float engine and the line engine on random hardmax Transformers."""

from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("flint", reason="the certified curved engine needs python-flint (extra 'exact')")

from test_curved import BOX, circle, conic_transformer  # noqa: E402

from regioncount import Box  # noqa: E402
from regioncount._domain import Segment  # noqa: E402
from regioncount.engines._curved import partition_curved  # noqa: E402
from regioncount.engines._curved_exact import partition_curved_exact  # noqa: E402
from regioncount.engines._line import walk_line  # noqa: E402
from regioncount.networks import random_transformer  # noqa: E402


def _certified(net, domain=BOX):
    cells = partition_curved_exact(net, domain)
    assert cells.exact and cells.summary()["exact"] is True
    area = float(np.prod(np.asarray(domain.param_hi) - np.asarray(domain.param_lo)))
    assert abs(cells.cell_area.sum() - area) < 1e-12
    assert np.all(cells.cell_area >= 0)
    # neighbouring cells differ in code, and every cell's code is its own
    cc = cells.cell_codes
    E = cells.adjacency
    assert not np.any(np.all(cc[E[:, 0]] == cc[E[:, 1]], axis=1))
    return cells


def _lens_count(c1, c2, r) -> int:
    """Cells of two circles of radius ``r`` centred on the x axis, in exact rationals of the floats: the
    network's conics are ``|u - c|^2 = fl(r * r)`` with ``c`` the float centres."""
    level = Fraction(r * r)
    half = (Fraction(c2) - Fraction(c1)) / 2
    return 4 if half * half < level else 3


@pytest.mark.parametrize("eps", [1e-3, 1e-9, 1e-11, 1e-12, 1e-13])
def test_lens_of_width_eps_is_a_cell(eps):
    c1, c2 = -0.3 + eps / 2, 0.3 - eps / 2
    net = conic_transformer([circle((c1, 0.0), 0.3), circle((c2, 0.0), 0.3)])
    assert _lens_count(c1, c2, 0.3) == 4  # the float network's circles overlap
    cells = _certified(net)
    assert cells.n_cells == 4 and cells.n_codes == 4
    # the lens (inside both circles) borders both crescents and not the outside
    lens, outside = cells.locate(np.array([[0.0, 0.0], [0.9, 0.9]]))
    nb = {e for pair in cells.adjacency.tolist() if lens in pair for e in pair if e != lens}
    assert nb == set(range(4)) - {lens, outside}
    # the default entry point certifies a partition this small
    assert partition_curved(net, BOX).n_cells == 4


def test_float_engine_is_not_exact_on_the_thin_lens():
    net = conic_transformer([circle((-0.3 + 5e-13, 0.0), 0.3), circle((0.3 - 5e-13, 0.0), 0.3)])
    f = partition_curved(net, BOX, certified=False)
    assert f.exact is False and f.summary()["predicates"].startswith("float64")


def test_tangency_of_the_0_3_circles_is_a_lens_in_floats():
    # fl(0.3 * 0.3) exceeds 0.3^2 (as rationals of the floats): the "tangent" circles overlap by ~1e-17
    assert _lens_count(-0.3, 0.3, 0.3) == 4
    assert _certified(conic_transformer([circle((-0.3, 0.1), 0.3), circle((0.3, 0.1), 0.3)])).n_cells == 4


@pytest.mark.parametrize(
    "conics, lines, expect",
    [
        ([circle((-0.25, 0.0), 0.25), circle((0.25, 0.0), 0.25)], [], 3),  # externally tangent (dyadic)
        ([circle((-0.25, 0.0), 0.25), circle((0.25 - 2**-40, 0.0), 0.25)], [], 4),  # overlap 2^-40
        ([circle((-0.25, 0.0), 0.25), circle((0.25 + 2**-40, 0.0), 0.25)], [], 3),  # gap 2^-40
        ([circle((0.0, 0.0), 0.5), circle((0.25, 0.0), 0.25)], [], 3),  # internally tangent
        ([circle((0.125, 0.25), 0.25)], [((0.0, 1.0), 0.0)], 3),  # a circle on a line, touching it
        ([circle((0.125, -0.25), 0.25)], [((0.0, 1.0), 0.0)], 3),
    ],
)
def test_tangent_and_nearly_tangent(conics, lines, expect):
    cells = _certified(conic_transformer(conics, lines))
    assert cells.n_cells == expect


def test_disjoint_circles():
    k = 4
    cells = _certified(conic_transformer([circle((-0.6 + 0.4 * i, 0.1 * i), 0.15) for i in range(k)]))
    assert cells.n_cells == k + 1 == cells.n_codes


def test_crossing_circles_closed_form():
    k = 3
    th = 2 * np.pi * np.arange(k) / k + 0.1
    cells = _certified(conic_transformer([circle(0.3 * np.array([np.cos(t), np.sin(t)]), 0.5) for t in th]))
    assert cells.n_cells == k * (k - 1) + 2


def test_circle_through_a_corner_of_two_lines():
    # lines x = 0 and y = 0 cross at the origin; the circle |u - (1/4, 1/4)|^2 = 1/8 passes through it (all
    # dyadic): the quadrant x, y < 0 only touches the disc there, so it is one cell, adjacent to two others
    disc = (np.eye(2), (0.25, 0.25), 0.125)
    cells = _certified(conic_transformer([disc], [((1.0, 0.0), 0.0), ((0.0, 1.0), 0.0)]))
    assert cells.n_cells == 7 == cells.n_codes
    q3 = cells.locate(np.array([[-0.5, -0.5]]))[0]
    nb = {e for pair in cells.adjacency.tolist() if q3 in pair for e in pair if e != q3}
    assert nb == set(cells.locate(np.array([[-0.5, 0.9], [0.9, -0.5]])).tolist())


def test_circle_tangent_to_the_box():
    # the unit circle touches all four sides of [-1, 1]^2: the outside is four corner cells of one code
    cells = _certified(conic_transformer([circle((0.0, 0.0), 1.0)]))
    assert cells.n_cells == 5 and cells.n_codes == 2
    shrunk = _certified(conic_transformer([(np.eye(2), (0.0, 0.0), 1.0 - 2**-40)]))
    assert shrunk.n_cells == 2


@pytest.mark.parametrize("depth, seed", [(1, 0), (2, 0), pytest.param(2, 3, marks=pytest.mark.slow)])
def test_random_hardmax_certified_equals_float(depth, seed):
    net = random_transformer(tokens=3, d_model=4, depth=depth, seed=seed)
    c = _certified(net)
    f = partition_curved(net, BOX, certified=False)
    assert (c.n_cells, c.n_codes, c.linear_regions()) == (f.n_cells, f.n_codes, f.linear_regions())
    key = lambda a: {bytes(r) for r in np.asarray(a, np.int64)}  # noqa: E731
    assert key(c.cell_codes) == key(f.cell_codes)
    assert c.degree == (1 if depth == 1 else 2)


def _segments_match(net, cells, n_segments, seed):
    rng = np.random.default_rng(seed)
    cc = cells.cell_codes
    for _ in range(n_segments):
        a, b = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        lp = walk_line(net, Segment(a, b))
        br = lp.breaks
        lo, hi = br[:-1], br[1:]
        keep = hi - lo > 1e-9  # pieces too short to sample at float resolution are checked by their ends
        s = np.linspace(0.05, 0.95, 7)
        t = lo[keep, None] + s[None, :] * (hi - lo)[keep, None]
        where = cells.locate(lp.points(t).reshape(-1, 2)).reshape(t.shape)
        assert np.all(where == where[:, :1]), "a cell boundary inside a line piece"
        assert np.array_equal(cc[where[:, 0]], lp.codes[keep])
        w = where[:, 0]
        assert np.all(w[1:] != w[:-1]) or not np.all(keep)


@pytest.mark.parametrize("depth", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_segments_cross_the_certified_cells(depth):
    net = random_transformer(tokens=2, d_model=4, depth=depth, seed=10 + depth)
    _segments_match(net, _certified(net), 200, depth)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [3, 4])
def test_segments_cross_the_certified_cells_deep(depth):
    net = random_transformer(tokens=2, d_model=4, depth=depth, seed=10 + depth)
    _segments_match(net, _certified(net), 200, depth)


def test_box_domain_with_float_bounds():
    net = conic_transformer([circle((0.1, 0.0), 0.3)])
    dom = Box([-0.7, -0.3], [0.9, 0.6])
    cells = _certified(net, dom)
    assert cells.n_cells == 2


def test_certify_curved_cells():
    from regioncount import count_regions

    net = conic_transformer([circle((-0.3 + 5e-14, 0.0), 0.3), circle((0.3 - 5e-14, 0.0), 0.3)])
    out = count_regions(net, BOX, certify=True)
    cert = out["certificate"]
    assert out["regions"] == 4 and out["exact"] is True and out["largest_degree"] == 2
    assert cert["passed"] and cert["largest_degree"] == 2
    assert cert["checks"]["witness_codes"]["passed"] and cert["checks"]["areas"]["passed"]
    assert cert["checks"]["euler"]["passed"], cert["checks"]["euler"]["detail"]


@pytest.mark.slow
def test_certify_a_deeper_random_transformer():
    from regioncount import count_regions

    deep = random_transformer(tokens=2, d_model=4, depth=2, seed=1)
    assert count_regions(deep, BOX, certify=True)["certificate"]["passed"]


def test_exact_forward_code_matches_the_float_forward_pass():
    import jax.numpy as jnp

    from regioncount.engines._curved_certify import exact_forward_code
    from regioncount.engines._forward import forward_codes

    for attention in ("hardmax", "relu"):
        net = random_transformer(tokens=3, d_model=4, depth=2, attention=attention, seed=7)
        P = np.random.default_rng(0).uniform(-1, 1, (8, 2))
        _, fc, _ = forward_codes(net.lower(), jnp.asarray(P))
        ex = [exact_forward_code(net.lower(), [Fraction(float(v)) for v in p]) for p in P]
        assert np.array_equal(np.asarray(fc), np.array(ex))


def test_certified_equals_the_plane_engine_on_straight_networks():
    from regioncount.engines._plane import partition_plane
    from regioncount.networks import random_maxout, random_mlp

    for net in (random_mlp(2, (8, 6), seed=3), random_maxout(2, (4, 3), k=3, seed=4)):
        c = _certified(net)
        p = partition_plane(net, BOX)
        assert c.n_cells == c.n_codes == p.n_regions
        assert c.linear_regions() == p.linear_regions()
        assert c.degree == 1


@pytest.mark.slow
def test_certified_relu_attention_first_op_causal_heads_and_a_slice():
    from regioncount import Slice

    key = lambda a: {bytes(r) for r in np.asarray(a, np.int64)}  # noqa: E731
    relu = random_transformer(tokens=2, d_model=4, depth=1, d_ff=0, attention="relu", seed=1)
    causal = random_transformer(tokens=2, d_model=4, depth=2, heads=2, causal=True, seed=2)
    for net in (relu, causal):
        c, f = _certified(net), partition_curved(net, BOX, certified=False)
        assert (c.n_cells, c.n_codes, key(c.cell_codes)) == (f.n_cells, f.n_codes, key(f.cell_codes))
    assert partition_curved_exact(relu, BOX).kind == "spline"
    net = random_transformer(input_dim=3, tokens=2, d_model=4, depth=2, seed=6)
    dom = Slice([0.1, -0.2, 0.3], [1.0, 0.5, 0.0], [0.0, 1.0, -0.5], lo=(-1.0, -1.0), hi=(1.0, 1.0))
    c, f = _certified(net, dom), partition_curved(net, dom, certified=False)
    assert (c.n_cells, key(c.cell_codes)) == (f.n_cells, key(f.cell_codes))


@pytest.mark.parametrize(
    "conics, cells_, codes_",
    [
        ([circle((0.1, 0.0), 0.5), circle((0.1, 0.0), 0.5)], 2, 2),  # one circle twice: coincident arcs
        ([(np.diag([1.0, -1.0]), (0.0, 0.0), 0.0)], 4, 2),  # x^2 - y^2: a line pair over Q
        ([(np.diag([1.0, -2.0]), (0.0, 0.0), 0.0)], 4, 2),  # x^2 - 2 y^2: a line pair over R only
        ([(np.diag([1.0, 0.0]), (0.25, 0.0), 0.0)], 1, 1),  # (x - 1/4)^2: a double line, no boundary
        ([(np.diag([1.0, 1.0]), (0.25, 0.0), 0.0)], 1, 1),  # a point: no boundary
    ],
)
def test_degenerate_and_coincident_conics(conics, cells_, codes_):
    cells = _certified(conic_transformer(conics))
    assert (cells.n_cells, cells.n_codes) == (cells_, codes_)


def test_circles_through_the_corners_of_the_box():
    # |u|^2 = 2 passes through all four corners of [-1, 1]^2: the box is inside, one cell
    assert _certified(conic_transformer([(np.eye(2), (0.0, 0.0), 2.0)])).n_cells == 1
    # |u - (1, 1)|^2 = 4 passes through the corners (-1, 1) and (1, -1): two cells
    cells = _certified(conic_transformer([(np.eye(2), (1.0, 1.0), 4.0)]))
    assert cells.n_cells == 2 == cells.n_codes
    # the area outside is the corner square minus a quarter disc of radius 2: 4 - pi
    out = cells.locate(np.array([[-0.99, -0.99]]))[0]
    assert abs(cells.cell_area[out] - (4 - np.pi)) < 1e-12
