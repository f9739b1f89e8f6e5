"""Certified spline pieces past a ReLU-attention op (walls of degree >= 3; DESIGN §2, §3 ``curved``):
networks built on purpose whose wall is a chosen cubic (a folium of Descartes, a nodal cubic) with their
cell counts and areas in closed form, curves through a corner and tangent to the box, the degree cap, and
the pieces against the line engine along random segments."""

import numpy as np
import pytest

pytest.importorskip("flint", reason="the certified curved engine needs python-flint (extra 'exact')")

from regioncount import Box, count_regions  # noqa: E402
from regioncount._errors import CurvedBoundaryError  # noqa: E402
from regioncount.engines._curved_certify import certify_cells  # noqa: E402
from regioncount.engines._curved_exact import DEGREE_CAP, partition_curved_exact, wall_degree_bound  # noqa: E402
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
    E = np.zeros((_D, 2))
    E[0, 0] = E[1, 1] = 1.0
    P = np.zeros((1, _D))
    P[0, 2] = 1.0
    ro = np.zeros((1, _D))
    ro[0, readout_col] = 1.0
    return Transformer(E=E, P=P, blocks=(blk,), readout_W=ro, readout_b=np.zeros(1), attention="relu")


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


def slot_transformer(depth, seed=0, tokens=2, out=1, d_ff=1, v_out_blocks=(2,)):
    """A seeded random ReLU-attention Transformer whose degrees stay within the cap at any depth: queries,
    keys and values read the slot ``(x, y, 1)``, which nothing writes (so every score wall is a conic); heads
    and FFNs write the ``out`` slot, which the FFNs read (walls of degree 3) and the values of the blocks in
    ``v_out_blocks`` read too (their outputs, and the walls after them, reach degree 5)."""
    rng = np.random.default_rng(seed)
    d = 3 + out
    xs, os_ = [0, 1, 2], list(range(3, d))
    E = np.zeros((d, 2))
    E[0, 0] = E[1, 1] = 1.0
    P = np.zeros((tokens, d))
    P[:, 2] = 1.0
    P[:, 3:] = rng.normal(0, 0.5, (tokens, out))
    blocks = []
    for b in range(1, depth + 1):
        Wq = np.zeros((1, d, 2))
        Wk = np.zeros((1, d, 2))
        Wv = np.zeros((1, d, 1))
        Wo = np.zeros((1, 1, d))
        Wq[0, xs] = rng.normal(0, 1, (3, 2))
        Wk[0, xs] = rng.normal(0, 1, (3, 2))
        Wv[0, xs] = rng.normal(0, 1, (3, 1))
        if b in v_out_blocks:
            Wv[0, os_] = rng.normal(0, 0.5, (out, 1))
        Wo[0, 0, os_] = rng.normal(0, 0.5, out)
        W1 = rng.normal(0, 0.7, (d_ff, d))
        b1 = rng.normal(0, 0.3, d_ff)
        W2 = np.zeros((d, d_ff))
        W2[os_] = rng.normal(0, 0.5, (out, d_ff))
        blocks.append(Block(Wq, Wk, Wv, Wo, W1, b1, W2, np.zeros(d)))
    ro = np.zeros((1, d))
    ro[0, 3] = 1.0
    return Transformer(E=E, P=P, blocks=tuple(blocks), readout_W=ro, readout_b=np.zeros(1), attention="relu")


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
    "depth",
    [1, 2, pytest.param(3, marks=pytest.mark.slow)],
)
def test_segments_cross_the_spline_pieces(depth):
    """Along 200 random segments the line engine's pieces are the spline pieces the segment crosses, with
    the same codes: a generic random network at depth 1, degree-capped random networks deeper (depth 4 is
    refused by the line engine's own degree limit in t, which counts 3^t whatever the weights)."""
    from test_curved_certified import _segments_match

    box = Box([-1.0, -1.0], [1.0, 1.0])
    if depth == 1:
        net = random_transformer(tokens=2, d_model=2, depth=1, d_ff=1, attention="relu", seed=1)
    else:
        net = slot_transformer(depth, seed=depth)
    cells = _certified(net, box)
    assert cells.degree >= 3
    _segments_match(net, cells, 200, depth)
