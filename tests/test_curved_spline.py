"""Certified spline pieces past a ReLU-attention op (walls of degree >= 3; DESIGN §2, §3 ``curved``):
networks built on purpose whose wall is a chosen cubic (a folium of Descartes, a nodal cubic) or quartic (a
lemniscate of Bernoulli, a cardioid) with their cell counts and areas in closed form, curves through a
corner and tangent to the box, the degree cap, and the pieces against the line engine along random
segments."""

import numpy as np
import pytest

pytest.importorskip("flint", reason="the certified curved engine needs python-flint (extra 'exact')")

from _nets import slot_transformer  # noqa: E402

from regioncount import Box, count_regions  # noqa: E402
from regioncount._errors import CurvedBoundaryError  # noqa: E402
from regioncount.engines._curved_certify import area_slack, certify_cells  # noqa: E402
from regioncount.engines._curved_exact import DEGREE_CAP, partition_curved_exact, wall_degree_bound  # noqa: E402
from regioncount.engines._line import walk_line  # noqa: E402
from regioncount.networks import Block, Transformer, random_transformer  # noqa: E402

C = 2.0  # keeps every score positive on the boxes below: the attention adds no wall of its own
_D = 6  # state columns: x, y, 1, and the three heads' outputs


def cubic_wall_net(heads, unit, readout_col=3):
    """One token, one ReLU-attention block, and an FFN unit whose ReLU wall is a chosen cubic.

    ``heads``: per head ``(q, k, v)``: the two score features of the query and of the key as
    ``((column, weight), (column, weight))`` and the value column; head ``h`` writes state column ``3 + h``,
    so with scores ``S_h > 0`` the state holds ``S_h * v_h``. ``unit``: the FFN row over the 6 columns. The
    FFN adds ``relu(unit)`` to the readout column: the output polynomial changes across the wall."""
    H = len(heads)
    Wq, Wk = np.zeros((H, _D, 2)), np.zeros((H, _D, 2))
    Wv, Wo = np.zeros((H, _D, 1)), np.zeros((H, 1, _D))
    for h, (q, k, v) in enumerate(heads):
        for f, (col, w) in enumerate(q):
            Wq[h, col, f] = w
        for f, (col, w) in enumerate(k):
            Wk[h, col, f] = w
        Wv[h, v, 0] = 1.0
        Wo[h, 0, 3 + h] = 1.0
    W2 = np.zeros((_D, 1))
    W2[readout_col, 0] = 1.0
    blk = Block(Wq, Wk, Wv, Wo, np.array([unit], float), np.zeros(1), W2, np.zeros(_D))
    return _one_token(_D, (blk,), readout_col)


def _one_token(d, blocks, out):
    """A one-token ReLU-attention Transformer of width ``d`` whose stream starts as ``(x, y, 1, 0, ...)`` and
    whose readout is stream entry ``out``."""
    E = np.zeros((d, 2))
    E[0, 0] = E[1, 1] = 1.0
    P = np.zeros((1, d))
    P[0, 2] = 1.0
    ro = np.zeros((1, d))
    ro[0, out] = 1.0
    return Transformer(E=E, P=P, blocks=blocks, readout_W=ro, readout_b=np.zeros(1), attention="relu")


def folium(a):
    """Wall x^3 + y^3 - 3 a x y = 0: heads (x^2 + C) x, (y^2 + C) y, (C - 3 a x y) 1; unit o1 + o2 + o3 - C(x + y + 1)."""
    sq = ((0, 1.0), (2, 1.0))
    heads = [
        (sq, ((0, 1.0), (2, C)), 0),
        (((1, 1.0), (2, 1.0)), ((1, 1.0), (2, C)), 1),
        (sq, ((1, -3.0 * a), (2, C)), 2),
    ]
    return cubic_wall_net(heads, [-C, -C, -C, 1.0, 1.0, 1.0])


def nodal():
    """Wall y^2 - x^3 - x^2 = 0: heads (x^2 + C) x, (y^2 + C) 1, (x^2 + C) 1; unit C x - o1 + o2 - o3."""
    sq = ((0, 1.0), (2, 1.0))
    heads = [
        (sq, ((0, 1.0), (2, C)), 0),
        (((1, 1.0), (2, 1.0)), ((1, 1.0), (2, C)), 2),
        (sq, ((0, 1.0), (2, C)), 2),
    ]
    return cubic_wall_net(heads, [C, 0.0, 0.0, -1.0, 1.0, -1.0])


def quartic_wall_net(values, query, C=2.0):
    """One token, two ReLU-attention blocks (no FFN units), the second op's score wall a chosen quartic.

    Block 1: one head per entry of ``values``, each with the score ``x^2 + y^2 + C`` (``C > 0``: positive on
    the whole plane, so the op adds no wall of its own) and value column ``values[h]``; head ``h`` writes
    ``(x^2 + y^2 + C) v_h`` to state column ``3 + h`` (columns 0, 1, 2 hold ``x, y, 1``). Block 2: one head
    whose key is ``(x, y)`` and whose query features are the cubics ``query[f]`` (``{column: weight}`` over
    the state), so its score ``x q_0 + y q_1`` is the quartic; its value is 1, so it writes ``relu(score)``
    to the last column, which the readout reads."""
    H = len(values)
    d = 3 + H + 1
    out = d - 1
    Wq, Wk = np.zeros((H, d, 3)), np.zeros((H, d, 3))
    Wv, Wo = np.zeros((H, d, 1)), np.zeros((H, 1, d))
    for h, v in enumerate(values):
        Wq[h, 0, 0] = Wq[h, 1, 1] = Wq[h, 2, 2] = 1.0
        Wk[h, 0, 0] = Wk[h, 1, 1] = 1.0
        Wk[h, 2, 2] = C
        Wv[h, v, 0] = 1.0
        Wo[h, 0, 3 + h] = 1.0
    Wq2, Wk2 = np.zeros((1, d, 2)), np.zeros((1, d, 2))
    Wv2, Wo2 = np.zeros((1, d, 1)), np.zeros((1, 1, d))
    for f, q in enumerate(query):
        for col, w in q.items():
            Wq2[0, col, f] = w
        Wk2[0, f, f] = 1.0
    Wv2[0, 2, 0] = 1.0
    Wo2[0, 0, out] = 1.0
    no_ffn = (np.zeros((0, d)), np.zeros(0), np.zeros((d, 0)), np.zeros(d))
    return _one_token(d, (Block(Wq, Wk, Wv, Wo, *no_ffn), Block(Wq2, Wk2, Wv2, Wo2, *no_ffn)), out)


def lemniscate(c):
    """Wall (x^2 + y^2)^2 - c^2 (x^2 - y^2) = 0 (Bernoulli's lemniscate, half-width c, area c^2): the cubics
    q_0 = x (x^2 + y^2 - c^2), q_1 = y (x^2 + y^2 + c^2) from the heads (r^2 + C) x and (r^2 + C) y."""
    C = 2.0
    return quartic_wall_net([0, 1], [{3: 1.0, 0: -(C + c * c)}, {4: 1.0, 1: -(C - c * c)}], C)


def cardioid(a):
    """Wall (x^2 + y^2)^2 - 4 a x (x^2 + y^2) - 4 a^2 y^2 = 0, the cardioid r = 2 a (1 + cos theta) (cusp at
    the origin, area 6 pi a^2, x in [-a/2, 4a]): q_0 = x r^2 - 4 a r^2 and q_1 = y r^2 - 4 a^2 y from the
    heads (r^2 + C) x, (r^2 + C) y and (r^2 + C) 1."""
    C = 2.0
    q0 = {3: 1.0, 0: -C, 5: -4 * a, 2: 4 * a * C}
    return quartic_wall_net([0, 1, 2], [q0, {4: 1.0, 1: -(C + 4 * a * a)}], C)


def _certified(net, box):
    cells = partition_curved_exact(net, box)
    cert = certify_cells(cells, net)
    assert cert["passed"], cert
    assert cells.exact and cells.kind == "spline" and cells.summary()["exact"] is True
    return cells


def _wall_sign(cells):
    """The FFN unit's bit (the last code entry) of each cell: 1 where the cubic is positive."""
    return cells.cell_codes[:, -1].tolist()


def test_folium_of_descartes():
    # the loop (area 3 a^2 / 2) is one cell; the node at the origin separates it from the other cell where
    # the cubic is negative (they touch at one point only): 3 cells, 2 codes
    a = 0.5
    cells = _certified(folium(a), Box([-1.0, -1.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes, cells.degree) == (3, 2, 3)
    loop = cells.locate(np.array([[0.3, 0.3]]))[0]
    assert abs(cells.cell_area[loop] - 3 * a * a / 2) < 1e-12
    assert abs(cells.cell_area.sum() - 4.0) < 1e-12
    assert sorted(_wall_sign(cells)) == [0, 0, 1]
    assert set(cells.locate(np.array([[0.3, 0.3], [-0.9, -0.9], [0.9, 0.9]])).tolist()) == {0, 1, 2}
    # the output polynomial is x^3 + C x beside the loop's negative side and adds the cubic on its positive
    # side: the three cells are three maximal pieces of one polynomial
    assert cells.polynomial_pieces() == 3


def test_folium_through_the_corner():
    # on [0, 1]^2 the folium's node is the box's corner: its loop and the rest
    a = 0.5
    cells = _certified(folium(a), Box([0.0, 0.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes) == (2, 2)
    loop = cells.locate(np.array([[0.3, 0.3]]))[0]
    assert abs(cells.cell_area[loop] - 3 * a * a / 2) < 1e-12
    assert abs(cells.cell_area[1 - loop] - (1 - 3 * a * a / 2)) < 1e-12


def _wedge(x0, half):
    """Area of {x > 0, |y| < x sqrt(x + 1)} in [0, 1] x [-half, half] for the arms leaving at x0."""
    G = lambda u: 2 * (0.4 * u**2.5 - 2 / 3 * u**1.5)  # noqa: E731  antiderivative of 2 x sqrt(x+1), u = x+1
    return G(x0 + 1) - G(1.0)


def test_nodal_cubic():
    # y^2 = x^2 (x + 1): the loop over [-1, 0] (area 8/15), the wedge between the arms for x > 0, the rest
    cells = _certified(nodal(), Box([-2.0, -2.0], [2.0, 2.0]))
    assert (cells.n_cells, cells.n_codes) == (3, 2)
    loop, wedge = cells.locate(np.array([[-0.5, 0.0], [1.0, 0.0]]))
    assert abs(cells.cell_area[loop] - 8 / 15) < 1e-12
    x0 = max(r.real for r in np.roots([1, 1, 0, -4]) if abs(r.imag) < 1e-12)  # the arms reach |y| = 2
    assert abs(cells.cell_area[wedge] - (_wedge(x0, 2) + 4 * (2 - x0))) < 1e-10
    assert cells.polynomial_pieces() == 3


def test_nodal_cubic_tangent_to_the_box():
    # on [-1, 1]^2 the loop touches the left side at (-1, 0) (a vertical tangent): the positive side splits
    # into an upper and a lower cell that meet at that point only
    cells = _certified(nodal(), Box([-1.0, -1.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes) == (4, 2)
    loop, wedge, up, down = cells.locate(np.array([[-0.5, 0.0], [0.5, 0.0], [-0.5, 0.9], [-0.5, -0.9]]))
    assert len({loop, wedge, up, down}) == 4
    x0 = max(r.real for r in np.roots([1, 1, 0, -1]) if abs(r.imag) < 1e-12)
    w = _wedge(x0, 1) + 2 * (1 - x0)
    assert abs(cells.cell_area[loop] - 8 / 15) < 1e-12 and abs(cells.cell_area[wedge] - w) < 1e-10
    assert abs(cells.cell_area[up] - cells.cell_area[down]) < 1e-12
    assert abs(cells.cell_area[up] - (4 - 8 / 15 - w) / 2) < 1e-10


def _areas_are(cells, where, expect):
    """The cells at the points ``where`` are distinct and have the areas ``expect``, each within the bound
    the certificate allows the areas (:func:`area_slack`: the quadrature's reported error plus rounding)."""
    idx = cells.locate(np.asarray(where, float))
    assert len(set(idx.tolist())) == len(idx)
    bound = area_slack(cells)
    assert bound < 1e-11
    got = cells.cell_area[idx]
    assert np.all(np.abs(got - np.asarray(expect)) <= bound), (got, expect, bound)


def test_lemniscate_of_bernoulli():
    # the two lobes (area c^2 / 2 each) meet at the node only: two cells of one code, and the outside
    net = lemniscate(1.0)
    assert wall_degree_bound(net.lower()) == 4
    cells = _certified(net, Box([-2.0, -2.0], [2.0, 2.0]))
    assert (cells.n_cells, cells.n_codes, cells.degree) == (3, 2, 4)
    _areas_are(cells, [[0.5, 0.0], [-0.5, 0.0], [1.5, 1.5]], [0.5, 0.5, 15.0])
    assert _wall_sign(cells).count(0) == 2  # both lobes are where the score is negative
    assert cells.polynomial_pieces() == 3


def test_lemniscate_tangent_to_the_box():
    # on [-1, 1]^2 the lobes touch the left and right sides at (+-1, 0) (vertical tangents) and each other
    # at the node: the outside splits into an upper and a lower cell, 3/2 each
    cells = _certified(lemniscate(1.0), Box([-1.0, -1.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes, cells.degree) == (4, 2, 4)
    _areas_are(cells, [[0.5, 0.0], [-0.5, 0.0], [0.0, 0.9], [0.0, -0.9]], [0.5, 0.5, 1.5, 1.5])


def test_lemniscate_through_two_corners():
    # on [0, 1]^2 the curve leaves the corner (0, 0) (its node) and ends at the corner (1, 0) (its vertical
    # tangent): the upper half of a lobe, area 1/4, and the rest
    cells = _certified(lemniscate(1.0), Box([0.0, 0.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes, cells.degree) == (2, 2, 4)
    _areas_are(cells, [[0.5, 0.1], [0.5, 0.9]], [0.25, 0.75])


def test_cardioid():
    # a = 1/4: the cardioid spans x in [-1/8, 1] and touches the side x = 1 at (1, 0); its cusp is at the
    # origin; the outside stays connected around the left end: 2 cells
    cells = _certified(cardioid(0.25), Box([-1.0, -1.0], [1.0, 1.0]))
    assert (cells.n_cells, cells.n_codes, cells.degree) == (2, 2, 4)
    _areas_are(cells, [[0.5, 0.0], [-0.9, 0.9]], [3 * np.pi / 8, 4 - 3 * np.pi / 8])
    # on [0, 1]^2 the cusp is the corner (0, 0), the tangency the corner (1, 0): the quarter of the
    # cardioid over theta in [0, pi/2], (1/2) int r^2 = 3 pi / 32 + 1/4
    corner = _certified(cardioid(0.25), Box([0.0, 0.0], [1.0, 1.0]))
    assert (corner.n_cells, corner.n_codes) == (2, 2)
    q = 3 * np.pi / 32 + 0.25
    _areas_are(corner, [[0.5, 0.1], [0.9, 0.9]], [q, 1 - q])


def test_count_reports_degree_four():
    out = count_regions(lemniscate(1.0), Box([-2.0, -2.0], [2.0, 2.0]), certify=True)
    assert out["regions"] == 3 and out["exact"] is True and out["largest_degree"] == 4
    assert out["certificate"]["passed"] and out["certificate"]["largest_degree"] == 4


def test_count_reports_spline_pieces_and_degree():
    out = count_regions(folium(0.5), Box([-1.0, -1.0], [1.0, 1.0]), certify=True)
    assert out["regions"] == 3 and out["exact"] is True and out["largest_degree"] == 3
    assert out["polynomial_pieces"] == 3 and out["linear_regions"] is None
    assert out["certificate"]["passed"] and "spline" in out["cells"]


def test_degree_cap_refuses_with_one_line():
    net = random_transformer(tokens=2, d_model=4, depth=3, attention="relu", seed=0)
    assert wall_degree_bound(net.lower()) > DEGREE_CAP
    with pytest.raises(CurvedBoundaryError, match=f"past the {DEGREE_CAP}"):
        partition_curved_exact(net, Box([-1.0, -1.0], [1.0, 1.0]))


@pytest.mark.parametrize(
    "depth, seed",
    [
        (1, 1),
        pytest.param(2, 2, marks=pytest.mark.slow),
        pytest.param(3, 3, marks=pytest.mark.slow),
        pytest.param(4, 7, marks=pytest.mark.slow),
    ],
)
def test_segments_cross_the_spline_pieces(depth, seed):
    """Along 200 random segments the line engine's pieces are the spline pieces the segment crosses, with
    the same codes: a generic random network at depth 1, degree-capped random networks deeper (their
    polynomials stay of degree 5 at every depth; the line engine's degree plan reads that from the weights'
    exact zeros, so depth 4 is walked although 3^4 = 81 is past its max_degree=27). Depth 4 with seed 7: a
    partition of 42 cells the certified engine builds in seconds."""
    from test_curved_certified import _segments_match

    box = Box([-1.0, -1.0], [1.0, 1.0])
    if depth == 1:
        net = random_transformer(tokens=2, d_model=2, depth=1, d_ff=1, attention="relu", seed=seed)
    else:
        net = slot_transformer(depth, seed=seed)
    cells = _certified(net, box)
    assert cells.degree >= 3
    if depth > 1:
        assert walk_line(net, ([-1.0, -1.0], [1.0, 1.0])).degree == 5
    _segments_match(net, cells, 200, depth)


@pytest.mark.slow  # 3 s; the quartic's cells and areas are checked in the default run
def test_segments_cross_the_quartic_wall():
    from test_curved_certified import _segments_match

    net = lemniscate(1.0)
    cells = _certified(net, Box([-1.0, -1.0], [1.0, 1.0]))
    assert walk_line(net, ([-1.0, -1.0], [1.0, 1.0])).degree == 4
    _segments_match(net, cells, 200, 4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 2])
def test_segments_cross_random_relu_transformers_of_depth_2(seed):
    """Generic random ReLU-attention Transformers of depth 2 (tokens 2, d_model 2, d_ff 1; walls of degree 6
    and 9): along 200 random segments the line pieces are the certified cells crossed, with their codes.
    Measured under load (2 cores shared, load ~2): seed 0 17 cells in 19 s + 5 s, seed 2 9 cells in
    33 s + 2 s (seed 1, 39 cells, takes 84 s + 12 s and passes too)."""
    from test_curved_certified import _segments_match

    net = random_transformer(tokens=2, d_model=2, depth=2, d_ff=1, attention="relu", seed=seed)
    cells = _certified(net, Box([-1.0, -1.0], [1.0, 1.0]))
    assert cells.degree >= 6
    _segments_match(net, cells, 200, seed)
