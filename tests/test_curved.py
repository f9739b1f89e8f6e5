"""The curved exact 2D engine: closed forms with Transformers built for them, and invariants of random
hardmax Transformers against the forward pass, a grid and the line engine."""

import numpy as np
import pytest

from regioncount import Box, count_regions
from regioncount._domain import Segment
from regioncount._errors import CurvedBoundaryError
from regioncount.engines._curved import partition_curved
from regioncount.engines._forward import forward_codes
from regioncount.engines._line import walk_line
from regioncount.engines._plane import partition_plane
from regioncount.engines._sample import grid_codes
from regioncount.networks import Block, Transformer, random_transformer

BOX = Box([-1.0, -1.0], [1.0, 1.0])
_D = 7  # u1, u2, gate g (-1 / +1), constant 1, token-1 indicator, z1, z2


def conic_transformer(conics, lines=()):
    """A two-token hardmax Transformer whose boundaries on the plane are the given conics and lines.

    ``conics``: ``(P, a, level)`` with ``P (2, 2)``, centre ``a (2,)``: head ``m`` of block 2 compares
    ``S_01 = (P (u - a)) . (u - a) - level`` with ``S_00 = 0``, so its boundary is the conic
    ``(u - a)^T P (u - a) = level``. ``lines``: ``(n, o)``, a block-1 ReLU unit ``relu(n . u - o)`` each.

    Block 1 has no attention; its FFN writes ``z = u`` into token 1 and ``z = 0`` into token 0 with the
    units ``relu(u_k + 10 g) - relu(10 g)`` (``g = +-1`` the token's gate), whose signs are constant on
    ``[-1, 1]^2``: they add no boundary. Block 2's keys read ``z``, its queries ``u``; values are zero.
    """
    E = np.zeros((_D, 2))
    E[0, 0] = E[1, 1] = 1.0
    P = np.zeros((2, _D))
    P[0, 2], P[1, 2] = -1.0, 1.0
    P[:, 3] = 1.0
    P[1, 4] = 1.0
    M = 10.0
    W1, b1, W2 = [], [], []
    for k in range(2):
        for gate_only in (False, True):
            row = np.zeros(_D)
            row[2] = M
            if not gate_only:
                row[k] = 1.0
            W1.append(row)
            b1.append(0.0)
            col = np.zeros(_D)
            col[5 + k] = -1.0 if gate_only else 1.0
            W2.append(col)
    for n, o in lines:
        row = np.zeros(_D)
        row[:2] = n
        W1.append(row)
        b1.append(-o)
        W2.append(np.zeros(_D))
    z = np.zeros
    blk1 = Block(
        z((0, _D, 1)), z((0, _D, 1)), z((0, _D, 1)), z((0, 1, _D)), np.array(W1), np.array(b1), np.array(W2).T, z(_D)
    )
    H = len(conics)
    Wq, Wk = z((H, _D, 3)), z((H, _D, 3))
    for m, (Pm, a, level) in enumerate(conics):
        Pm, a = np.asarray(Pm, float), np.asarray(a, float)
        Pa = Pm @ a
        Wq[m, 0, :2], Wq[m, 1, :2] = Pm[:, 0], Pm[:, 1]
        Wq[m, 3, :2] = -Pa
        Wq[m, 3, 2] = 1.0
        Wk[m, 5, 0] = Wk[m, 6, 1] = 1.0
        Wk[m, 4, :2] = -a
        Wk[m, 4, 2] = -level
    blk2 = Block(Wq, Wk, z((H, _D, 1)), z((H, 1, _D)), z((0, _D)), z(0), z((_D, 0)), z(_D))
    return Transformer(E=E, P=P, blocks=(blk1, blk2), readout_W=np.eye(_D)[:1], readout_b=z(1))


def circle(a, r):
    return (np.eye(2), a, r * r)


def _counts(net, domain=BOX):
    cells = partition_curved(net, domain)
    assert cells.exact and cells.order_violations == 0
    assert abs(cells.cell_area.sum() - 4.0) < 1e-12
    return cells


@pytest.mark.parametrize("k", [2, 3, 4])
def test_circles_in_general_position(k):
    rng = np.random.default_rng(k)
    th = 2 * np.pi * (np.arange(k) + rng.uniform(-0.1, 0.1, k)) / k
    centres = 0.3 * np.stack([np.cos(th), np.sin(th)], 1)
    net = conic_transformer([circle(c, 0.5 + 0.02 * i) for i, c in enumerate(centres)])
    cells = _counts(net)
    assert cells.n_cells == k * (k - 1) + 2
    # the codes, a second way: every cell (area > 0.03 here) holds points of a 300 x 300 grid, and the grid's
    # codes are exactly the cells' codes
    _, g = grid_codes(net, BOX, 300)
    met = {np.asarray(r, np.int32).tobytes() for r in np.asarray(g)}
    assert met == {np.asarray(r, np.int32).tobytes() for r in cells.cell_codes}
    assert cells.n_codes == len(met) and cells.cell_area.min() > 0.03


def test_nested_circles():
    k = 4
    cells = _counts(conic_transformer([circle((0.05, -0.02), r) for r in (0.2, 0.4, 0.6, 0.8)]))
    assert cells.n_cells == k + 1 == cells.n_codes
    # ring areas: pi (r_{i+1}^2 - r_i^2), exactly
    ring = np.sort(cells.cell_area)
    assert np.allclose(
        np.sort([np.pi * 0.04, np.pi * 0.12, np.pi * 0.2, np.pi * 0.28, 4 - np.pi * 0.64]), ring, rtol=0, atol=1e-12
    )


def test_ellipse_hole_in_a_polygon():
    lines = [((1.0, 0.2), 0.3), ((-0.3, 1.0), 0.1), ((0.7, -0.7), -0.4)]
    Pm = np.array([[3.0, 1.0], [1.0, 2.0]])
    centre, level = np.array([-0.45, -0.5]), 0.02
    net = conic_transformer([(Pm, centre, level)], lines)
    with pytest.raises(CurvedBoundaryError):
        partition_plane(net, BOX)
    polys = partition_plane(conic_transformer([], lines), BOX)
    cells = _counts(net)
    assert cells.n_cells == polys.n_regions + 1
    ellipse = np.pi * level / np.sqrt(np.linalg.det(Pm))
    inner = cells.locate(centre[None])[0]
    assert abs(cells.cell_area[inner] - ellipse) < 1e-13
    # the polygon holding the ellipse lost exactly the ellipse's area
    outside = centre + np.array([0.0, 0.2])  # outside the ellipse, same polygon
    assert polys.locate(outside[None])[0] == polys.locate(centre[None])[0]
    outer = cells.locate(outside[None])[0]
    poly_area = polys.areas[polys.locate(centre[None])[0]]
    assert abs(cells.cell_area[outer] - (poly_area - ellipse)) < 1e-13
    # the hole is adjacent to its polygon only
    adj = cells.adjacency
    assert {tuple(e) for e in adj if inner in e} == {tuple(sorted((inner, outer)))}


@pytest.mark.parametrize(
    "conics, lines",
    [
        ([circle((0.1, 0.35), 0.35)], [((0.0, 1.0), 0.0)]),  # circle on a line, touching it
        ([circle((0.1, -0.35), 0.35)], [((0.0, 1.0), 0.0)]),  # below it
        ([circle((0.0, 0.0), 0.6), circle((0.3, 0.0), 0.3)], []),  # internally tangent circles
        # externally tangent circles: dyadic centres and radius, so the float network is tangent exactly
        # (with 0.3 it is not: fl(0.3 * 0.3) > 0.3^2, a lens of width 1e-17, 4 cells; test_curved_certified)
        ([circle((-0.25, 0.1), 0.25), circle((0.25, 0.1), 0.25)], []),
    ],
)
def test_tangency_makes_no_phantom_cell(conics, lines):
    cells = _counts(conic_transformer(conics, lines))
    assert cells.n_cells == 3


def test_hyperbola_through_a_cell():
    cells = _counts(conic_transformer([(np.diag([1.0, -1.0]), (0.05, 0.0), 0.1)]))
    assert cells.n_cells == 3 and cells.n_codes == 2


def test_two_conics_crossing_in_four_points():
    ellipse = (np.diag([1 / 0.8**2, 1 / 0.4**2]), (0.0, 0.0), 1.0)
    cells = _counts(conic_transformer([circle((0.0, 0.0), 0.6), ellipse]))
    assert cells.n_cells == 6 and cells.n_codes == 4


def test_count_regions_dispatches_curved_networks():
    net = conic_transformer([circle((0.0, 0.0), 0.5)])
    out = count_regions(net, BOX)
    assert out["engine"] == "curved" and out["regions"] == 2 and out["exact"] is True
    straight = random_transformer(tokens=2, d_model=4, depth=1, seed=3)
    ref = partition_plane(straight, BOX)
    out = count_regions(straight, BOX)
    assert "engine" not in out and out["regions"] == ref.n_regions


def _grid(n, lo=-1.0, hi=1.0):
    xs = lo + (hi - lo) * (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    return np.stack([X.ravel(), Y.ravel()], 1)


@pytest.mark.parametrize(
    "tokens, depth, seed",
    [
        (2, 3, 0),
        pytest.param(2, 4, 1, marks=pytest.mark.slow),
        (4, 2, 2),
        pytest.param(4, 3, 3, marks=pytest.mark.slow),
    ],
)
def test_random_hardmax_invariants(tokens, depth, seed):
    net = random_transformer(tokens=tokens, d_model=4, depth=depth, seed=seed)
    program = net.lower()
    # the float engine (its partitions decide with thresholds: exact is false; the certified engine is
    # checked against it in test_curved_certified)
    cells = partition_curved(net, BOX, certified=False)
    assert not cells.exact and cells.order_violations == 0
    assert abs(cells.cell_area.sum() - 4.0) < 1e-9
    assert np.all(cells.cell_area > 0)
    P = _grid(200)
    W = cells.witness
    # one forward pass (one compilation) for the witnesses and the grid
    _, codes, _ = forward_codes(program, np.concatenate([W, P]))
    codes = np.asarray(codes)
    wc, gc = codes[: W.shape[0]], codes[W.shape[0] :]
    cc = cells.cell_codes
    assert np.array_equal(wc, cc)
    E = cells.adjacency
    assert not np.any(np.all(cc[E[:, 0]] == cc[E[:, 1]], axis=1))
    where = cells.locate(P)
    assert np.all(where >= 0)
    assert np.array_equal(cc[where], gc)
    assert cells.n_codes >= np.unique(gc, axis=0).shape[0]
    # the line engine's pieces are the cells each segment crosses, in order
    rng = np.random.default_rng(seed)
    for _ in range(3):
        a, b = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        lp = walk_line(net, Segment(a, b))
        br = lp.breaks
        lo, hi = br[:-1], br[1:]
        s = np.linspace(0.02, 0.98, 25)
        t = lo[:, None] + s[None, :] * (hi - lo)[:, None]
        where = cells.locate(lp.points(t).reshape(-1, 2)).reshape(t.shape)
        assert np.all(where == where[:, :1]), "a cell boundary inside a line piece"
        assert np.all(where[1:, 0] != where[:-1, 0])
        assert np.array_equal(cc[where[:, 0]], lp.codes)
        # and the cell boundaries sit at the line engine's breaks
        eps = 1e-9
        before = cells.locate(lp.points(br[1:-1] - eps))
        after = cells.locate(lp.points(br[1:-1] + eps))
        assert np.array_equal(before, where[:-1, 0]) and np.array_equal(after, where[1:, 0])


def test_plane_and_curved_agree_on_the_first_block():
    net = random_transformer(tokens=4, d_model=4, depth=1, seed=5)
    ref = partition_plane(net, BOX)
    cells = partition_curved(net, BOX)
    assert cells.n_cells == cells.n_codes == ref.n_regions
    assert cells.linear_regions() == ref.linear_regions()


def test_relu_attention_first_op_and_beyond():
    net = random_transformer(tokens=2, d_model=4, depth=1, d_ff=0, attention="relu", seed=1)
    cells = partition_curved(net, BOX)
    assert cells.kind == "spline" and cells.linear_regions() is None
    P = _grid(100)
    _, gc, _ = forward_codes(net.lower(), np.asarray(P, dtype=np.float64))
    assert np.array_equal(cells.cell_codes[cells.locate(P)], np.asarray(gc))
    deeper = random_transformer(tokens=2, d_model=4, depth=1, attention="relu", seed=1)
    # past the first op the walls have degree 3: the float engine refuses; the certified one
    # (tests/test_curved_spline.py) splits them
    with pytest.raises(CurvedBoundaryError, match="--method line.*--method sample"):
        partition_curved(deeper, BOX, certified=False)


def test_cli_counts_curved_cells(tmp_path, capsys):
    import json

    from regioncount._io import save_model
    from regioncount_cli.main import main

    path = tmp_path / "circles.npz"
    save_model(conic_transformer([circle((0.0, 0.0), 0.6), circle((0.2, 0.1), 0.5)]), path)
    assert main(["count", str(path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["engine"] == "curved" and res["regions"] == 4 and res["codes"] == 4 and res["exact"] is True
    assert main(["count", str(path)]) == 0
    assert "connected cells (exact)" in capsys.readouterr().out
    assert main(["count", str(path), "--max-regions", "3"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("regioncount: error:")


def test_truncations_from_one_run():
    from regioncount.networks import depth_code_ends, truncate

    net = random_transformer(tokens=2, d_model=4, depth=3, seed=4)
    ends = depth_code_ends(net)
    snaps = tuple(len(truncate(net, D).lower().ops) - 1 for D in (1, 2, 3))
    cells = partition_curved(net, BOX, snapshots=snaps)
    for D in (1, 2, 3):
        got = cells.truncated_counts(ends[D - 1], cells.prefix_maps[snaps[D - 1]])
        ref = partition_curved(truncate(net, D), BOX)
        assert got == {"regions": ref.n_cells, "codes": ref.n_codes, "linear_regions": ref.linear_regions()}
    assert cells.truncated_counts(ends[-1])["regions"] == cells.n_cells


def test_scan_exact_random_column_beside_the_sampled_one():
    from regioncount._scan import random_rows

    rows = random_rows(2, tokens=2, d_model=4, seeds=1, grid=50, exact_depth=2)
    for r in rows:
        ex = r["random_exact"]
        # one run with snapshots of every truncation, small enough for the certified engine
        assert ex["exact"] is True and r["random_exact_mean"] == ex["cells"][0]
        assert ex["cells"][0] >= r["random_sample_mean"]  # a sampled count is a lower bound
        assert ex["linear_regions"][0] <= ex["cells"][0]


def test_slice_of_a_three_input_transformer():
    from regioncount import Slice

    net = random_transformer(input_dim=3, tokens=2, d_model=4, depth=2, seed=6)
    dom = Slice([0.1, -0.2, 0.3], [1.0, 0.5, 0.0], [0.0, 1.0, -0.5], lo=(-1.0, -1.0), hi=(1.0, 1.0))
    cells = partition_curved(net, dom)
    assert cells.exact and abs(cells.cell_area.sum() - 4.0) < 1e-9
    U = _grid(100)
    _, gc, _ = forward_codes(net.lower(), dom.to_input(U))
    assert np.array_equal(cells.cell_codes[cells.locate(U)], np.asarray(gc))
