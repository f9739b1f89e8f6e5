"""The exact 2D ``plane`` engine: closed forms, degeneracies, and cross-checks against the JAX forward pass."""

import math
from fractions import Fraction

import numpy as np
import pytest

from regioncount import MLP, Transformer, lower, random_maxout, random_mlp, random_transformer
from regioncount._domain import Box, Slice
from regioncount._errors import CurvedBoundaryError, DomainError, MemoryCapError, NotPiecewiseError
from regioncount.engines._forward import forward_codes
from regioncount.engines._plane import partition_plane
from regioncount.networks._ops import code_length


def tangent_lines_mlp(n: int, seed: int = 0) -> MLP:
    """One ReLU layer whose ``n`` lines are tangent to the circle of radius 1/2 at angles spread over
    [0, 2 pi / 3]: no two parallel, no three concurrent (a point outside a circle has two tangents), and
    every crossing lies within distance 1 of the origin, so inside [-1.5, 1.5]^2."""
    rng = np.random.default_rng(seed)
    theta = (np.arange(n) + rng.uniform(0.2, 0.8, n)) * (2 * np.pi / 3) / n
    normals = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    flip = rng.choice([-1.0, 1.0], n)
    readout = rng.uniform(0.5, 1.5, (1, n)) * rng.choice([-1.0, 1.0], (1, n))
    return MLP((normals * flip[:, None], readout), (-0.5 * flip, np.zeros(1)))


def line_mlp(lines, readout=None) -> MLP:
    """One ReLU layer with unit ``i`` equal to ``a_i u1 + b_i u2 + c_i`` for ``lines[i] = (a_i, b_i, c_i)``."""
    L = np.asarray(lines, dtype=np.float64)
    ro = np.ones((1, len(L))) if readout is None else np.asarray(readout, dtype=np.float64).reshape(1, -1)
    return MLP((L[:, :2], ro), (L[:, 2], np.zeros(1)))


def forward(net, U, domain):
    """``forward_codes`` at parameter points ``U (N, 2)``; batches are padded to a multiple of 2^16 rows so
    that jit compiles once per network, not once per batch size."""
    n = U.shape[0]
    pad = np.zeros((-n % 65536, 2)) + U[:1]
    Y, codes, _ = forward_codes(lower(net), domain.to_input(np.concatenate([U, pad])))
    return np.asarray(Y)[:n], np.asarray(codes)[:n]


def forward_check(part, net, domain):
    """Every region's code equals the forward pass's at its centroid, and so does the output."""
    c = part.centroids()
    Y, codes = forward(net, c, domain)
    np.testing.assert_array_equal(part.codes, codes)
    pred = np.einsum("roc,rc->ro", part.maps, np.c_[c, np.ones(len(c))])
    np.testing.assert_allclose(pred, Y, atol=1e-9, rtol=0)
    box_area = float(np.prod(domain.param_hi - domain.param_lo))
    assert abs(part.areas.sum() - box_area) <= 1e-9 * box_area
    assert np.all(part.areas > 0)
    # one region per code
    assert np.unique(part.codes, axis=0).shape[0] == part.n_regions


def grid_codes(net, domain, n: int) -> np.ndarray:
    lo, hi = domain.param_lo, domain.param_hi
    g = np.stack(np.meshgrid(np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n)), -1).reshape(-1, 2)
    return g, forward(net, g, domain)[1]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_lines_in_general_position(n):
    net = tangent_lines_mlp(n, seed=n)
    dom = Box(-1.5, 1.5, 2)
    part = partition_plane(net, dom)
    assert part.n_regions == 1 + n + n * (n - 1) // 2  # Zaslavsky, all crossings inside
    assert part.codes.shape == (part.n_regions, n)
    forward_check(part, net, dom)


@pytest.mark.parametrize(
    "net, hardmax_entries",
    [
        (random_mlp(2, [6, 6], seed=3), 0),
        (random_maxout(2, [4, 3], k=3, seed=0), 0),
        (random_transformer(input_dim=2, tokens=3, d_model=4, depth=1, d_ff=2, seed=3), 3),
        (random_transformer(input_dim=2, tokens=3, d_model=4, depth=1, d_ff=2, heads=2, causal=True, seed=8), 6),
    ],
    ids=["mlp-6x2", "maxout-k3", "hardmax-1-block", "hardmax-causal-2-heads"],
)
def test_matches_forward_pass_and_grid(net, hardmax_entries):
    dom = Box(-2, 2, 2)
    part = partition_plane(net, dom)
    forward_check(part, net, dom)
    pts, gcodes = grid_codes(net, dom, 201)
    # the grid (spacing 0.02) is fine enough for these networks: their smallest regions span a few cells
    assert part.areas.min() > 0.02**2, "network has regions a 201^2 grid may miss: pick another seed"
    assert np.unique(gcodes, axis=0).shape[0] == part.n_regions
    # and every grid point's code is the code of the region that contains it
    where = part.locate(pts)
    assert np.all(where >= 0)
    np.testing.assert_array_equal(part.codes[where], gcodes)
    if hardmax_entries:
        # the attention argmax (the first entries of the code) really switches on this domain
        assert np.unique(part.codes[:, :hardmax_entries], axis=0).shape[0] > 1


def test_three_concurrent_lines_and_a_fourth():
    dom = Box(-1, 1, 2)
    star = [(0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (1.0, -1.0, 0.0)]  # y = 0, x = 0, y = x: one triple point
    part = partition_plane(line_mlp(star), dom)
    assert part.n_regions == 6  # 2 m regions around a point of multiplicity m
    forward_check(part, line_mlp(star), dom)
    # x + y = 1/2 meets the three at (1/2, 0), (0, 1/2), (1/4, 1/4): 1 + n + sum over points of (m - 1)
    net = line_mlp(star + [(1.0, 1.0, -0.5)])
    part = partition_plane(net, dom)
    assert part.n_regions == 1 + 4 + (3 - 1) + 3
    forward_check(part, net, dom)


def test_lines_through_corners_and_along_edges():
    dom = Box(-1, 1, 2)
    # touches the box only at the corner (1, 1): no region
    assert partition_plane(line_mlp([(1.0, 1.0, -2.0)]), dom).n_regions == 1
    # the diagonal through two corners, a line through a corner and a side, y = 0.3: 1 + 3 + crossings
    lines = [(1.0, -1.0, 0.0), (2.0, -1.0, -1.0), (0.0, 1.0, -0.3)]
    # crossings: diagonal & 2x - y = 1 at (1, 1) (a corner, not inside); diagonal & y=0.3 at (0.3, 0.3);
    # 2x - y = 1 & y = 0.3 at (0.65, 0.3)
    net = line_mlp(lines)
    part = partition_plane(net, dom)
    assert part.n_regions == 1 + 3 + 2
    forward_check(part, net, dom)
    # lines along the four sides of the box, both orientations, add nothing
    edges = [(1.0, 0.0, -1.0), (-1.0, 0.0, 1.0), (0.0, 1.0, 1.0), (0.0, -1.0, -1.0), (1.0, 0.0, 1.0)]
    net = line_mlp(lines + edges)
    part = partition_plane(net, dom)
    assert part.n_regions == 1 + 3 + 2
    forward_check(part, net, dom)


def test_duplicate_dead_and_zero_units():
    dom = Box(-1.5, 1.5, 2)
    base = tangent_lines_mlp(4, seed=3)
    W, b = base.weights[0], base.biases[0]
    # exact duplicates, a negated copy (same line, other side on), a scaled copy (by 4: exact in float64),
    # dead and always-on units
    W2 = np.concatenate([W, W[:2], -W[2:3], 4.0 * W[3:4], np.zeros((2, 2))])
    b2 = np.concatenate([b, b[:2], -b[2:3], 4.0 * b[3:4], [-1.0, 1.0]])
    net = MLP((W2, np.ones((1, len(b2)))), (b2, np.zeros(1)))
    part = partition_plane(net, dom)
    assert part.n_regions == 1 + 4 + 6
    forward_check(part, net, dom)
    # a copy scaled by 2.5 is rounded in float64: a different line, nearly the same, which meets the first one
    # outside the box, so the thin strip between them crosses every region the line crosses (4 of them)
    W25, b25 = W2.copy(), b2.copy()
    W25[7], b25[7] = 2.5 * W[3], 2.5 * b[3]
    l1, l2 = [Fraction(v) for v in (*W[3], b[3])], [Fraction(v) for v in (*W25[7], b25[7])]
    assert l1[0] * l2[1] != l1[1] * l2[0] or l1[0] * l2[2] != l1[2] * l2[0]  # not proportional, exactly
    net25 = MLP((W25, np.ones((1, len(b25)))), (b25, np.zeros(1)))
    part25 = partition_plane(net25, dom)
    assert part25.n_regions == 11 + 4
    assert part25.areas.min() < 1e-12 * part.areas.min()
    # a zero-weight second layer (constant units of every sign) and an identity layer h -> relu(h) = h
    n = len(b2)
    W_zero, b_zero = np.zeros((3, n)), np.array([0.5, -0.5, 0.0])
    net = MLP((W2, W_zero, np.ones((1, 3))), (b2, b_zero, np.zeros(1)))
    part = partition_plane(net, dom)
    assert part.n_regions == 11
    forward_check(part, net, dom)
    net = MLP((W2, np.eye(n), np.ones((1, n))), (b2, np.zeros(n), np.zeros(1)))
    part = partition_plane(net, dom)
    assert part.n_regions == 11  # relu(h) = h >= 0: the second layer switches nowhere in the interior
    forward_check(part, net, dom)
    # a zero-weight first layer: one region
    part = partition_plane(MLP((np.zeros((3, 2)), np.ones((1, 3))), (np.array([1.0, -1.0, 0.0]), np.zeros(1))), dom)
    assert part.n_regions == 1


def test_slice_of_three_input_network_equals_two_input_network():
    net3 = random_mlp(3, [7, 5], seed=4)
    x0, v1, v2 = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.5, 0.0]), np.array([0.0, 1.0, -0.5])
    sl = Slice(x0, v1, v2, lo=(-1.0, -1.5), hi=(1.5, 2.0))
    V = np.stack([v1, v2], axis=1)
    W1, b1 = net3.weights[0], net3.biases[0]
    net2 = MLP((W1 @ V,) + net3.weights[1:], (b1 + W1 @ x0,) + net3.biases[1:])
    box = Box([-1.0, -1.5], [1.5, 2.0])
    p3 = partition_plane(net3, sl)
    p2 = partition_plane(net2, box)
    assert p3.n_regions == p2.n_regions > 10
    forward_check(p3, net3, sl)
    o3, o2 = np.lexsort(p3.codes.T), np.lexsort(p2.codes.T)
    np.testing.assert_array_equal(p3.codes[o3], p2.codes[o2])
    np.testing.assert_allclose(p3.areas[o3], p2.areas[o2], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p3.maps[o3], p2.maps[o2], rtol=1e-9, atol=1e-12)


def test_hardmax_second_block_is_curved():
    net = random_transformer(input_dim=2, tokens=3, d_model=4, depth=2, seed=0)
    with pytest.raises(CurvedBoundaryError, match=r"quadric.*--method line.*--method sample"):
        partition_plane(net, Box(-2, 2, 2))


def test_hardmax_with_constant_queries_is_straight_beyond_the_first_block():
    # Queries read only slot 2, a position slot no block writes, so every score difference is affine in
    # the input even after an FFN; the FFN (which reads the positions) makes the second block switch.
    from regioncount import Block

    T, d = 3, 4
    rng = np.random.default_rng(7)
    E = np.zeros((d, 2))
    E[:2] = rng.normal(size=(2, 2))
    P = rng.normal(size=(T, d))
    P[:, 2] = np.arange(T) + 1.0
    Wq = np.zeros((1, d, 2))
    Wq[0, 2] = rng.normal(size=2)
    Wk = np.zeros((1, d, 2))
    Wk[0, :2] = rng.normal(size=(2, 2))
    Wv, Wo = np.zeros((1, d, 1)), np.zeros((1, 1, d))
    Wv[0, 0, 0], Wo[0, 0, 1] = 1.0, 0.7
    W1 = np.zeros((3, d))
    W1[:, :3] = rng.normal(size=(3, 3))
    W2 = np.zeros((d, 3))
    W2[:2] = rng.normal(size=(2, 3))
    blk = Block(Wq, Wk, Wv, Wo, W1, rng.normal(size=3), W2, np.zeros(d))
    net = Transformer(E, P, (blk, blk), rng.normal(size=(1, d)), np.zeros(1))
    dom = Box(-1, 1, 2)
    part = partition_plane(net, dom)
    forward_check(part, net, dom)
    _, gcodes = grid_codes(net, dom, 201)
    assert np.unique(gcodes, axis=0).shape[0] == part.n_regions  # smallest region: 0.035 of 4
    # the second block's argmax (code entries 12..14, after 3 argmax + 3 T FFN bits) switches
    assert np.unique(part.codes[:, 12:15], axis=0).shape[0] > 1


def test_relu_and_softmax_attention_refuse():
    dom = Box(-1, 1, 2)
    with pytest.raises(CurvedBoundaryError, match="spline pieces"):
        partition_plane(random_transformer(depth=1, attention="relu"), dom)
    with pytest.raises(NotPiecewiseError, match="smooth"):
        partition_plane(random_transformer(depth=1, attention="softmax"), dom)


def test_domain_checks():
    net3 = random_mlp(3, [4], seed=0)
    with pytest.raises(DomainError, match="Slice"):
        partition_plane(net3, Box(-1, 1, 3))
    with pytest.raises(DomainError):
        partition_plane(random_mlp(2, [4]), Slice([0, 0, 0], [1, 0, 0], [0, 1, 0]))
    with pytest.raises(DomainError, match="--method line"):
        partition_plane(random_mlp(1, [4]), Box(-1, 1, 1))
    t = random_transformer(depth=1)
    compiled = Transformer(t.E, t.P, t.blocks, t.readout_W, t.readout_b, valid_box=((-1, -1), (1, 1)))
    with pytest.raises(DomainError, match="compiled"):
        partition_plane(compiled, Box(-2, 2, 2))
    # inside its box the valid box changes nothing: the same partition as the model without one
    inside, plain = partition_plane(compiled, Box(-1, 1, 2)), partition_plane(t, Box(-1, 1, 2))
    assert inside.n_regions == plain.n_regions
    np.testing.assert_array_equal(inside.codes, plain.codes)


def test_max_regions_and_progress():
    net = tangent_lines_mlp(8)
    with pytest.raises(MemoryCapError, match="max_regions=10"):
        partition_plane(net, Box(-1.5, 1.5, 2), max_regions=10)
    seen = []
    part = partition_plane(random_mlp(2, [5, 5], seed=0), Box(-1, 1, 2), progress=lambda d, t: seen.append((d, t)))
    total = len(lower(random_mlp(2, [5, 5])).ops)
    assert seen == [(i + 1, total) for i in range(total)]
    assert part.codes.shape[1] == code_length(lower(random_mlp(2, [5, 5])))


def test_slivers_are_regions():
    # x + y = 2 - 1e-7 cuts a corner triangle of area 5e-15 of the unit box: a region like any other
    dom = Box(0, 1, 2)
    net = line_mlp([(1.0, 1.0, -(2 - 1e-7))])
    part = partition_plane(net, dom)
    assert part.n_regions == 2
    delta = 2 - (2 - 1e-7)  # the cut as represented in float64
    assert math.isclose(part.areas.min(), delta**2 / 2, rel_tol=1e-6)
    forward_check(part, net, dom)


def test_denser_mlp_grid_is_a_lower_bound_and_agrees_pointwise():
    net = random_mlp(2, [10, 10], seed=3)
    dom = Box(-2, 2, 2)
    part = partition_plane(net, dom)
    forward_check(part, net, dom)
    pts, gcodes = grid_codes(net, dom, 201)
    # every grid point's code is that of the region holding it (so the grid's distinct codes are a lower bound)
    np.testing.assert_array_equal(part.codes[part.locate(pts)], gcodes)


@pytest.mark.parametrize(
    "net",
    [random_mlp(2, [10, 10, 10], seed=6), random_maxout(2, [6, 6, 6], k=3, seed=2)],
    ids=["mlp", "maxout"],
)
def test_row_batches_give_the_same_partition(net, monkeypatch):
    import regioncount.engines._plane as plane

    dom = Box(-2, 2, 2)
    whole = partition_plane(net, dom)
    monkeypatch.setattr(plane._driver, "BATCH", 16)  # the constant lives in the driver
    seen = []
    parts = partition_plane(net, dom, progress=lambda d, t: seen.append((d, t)))
    assert parts.n_regions == whole.n_regions > 100
    o1, o2 = np.lexsort(whole.codes.T), np.lexsort(parts.codes.T)
    np.testing.assert_array_equal(whole.codes[o1], parts.codes[o2])
    np.testing.assert_allclose(whole.areas[o1], parts.areas[o2], rtol=1e-12)
    np.testing.assert_allclose(whole.maps[o1], parts.maps[o2], rtol=1e-12, atol=1e-14)
    assert parts.adjacency().shape == whole.adjacency().shape
    assert parts.linear_regions() == whole.linear_regions()
    forward_check(parts, net, dom)
    # progress stays monotone and ends at the number of ops
    total = seen[-1][1]
    assert seen[-1][0] == total and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    with pytest.raises(MemoryCapError):
        partition_plane(net, dom, max_regions=whole.n_regions - 1)


@pytest.mark.parametrize(
    "net",
    [random_maxout(2, [6, 6], k=4, seed=3), random_transformer(input_dim=2, tokens=4, d_model=4, depth=1, seed=3)],
    ids=["maxout", "hardmax"],
)
def test_argmax_rounds_per_row_or_per_copy_give_the_same_floats(net, monkeypatch):
    """The argmax splitter forms each clip round's differences once per piece of a parent or once per copy of a
    region, whichever is less work; both must give the same partition, bit for bit."""
    import regioncount.engines._plane._argmax as AR

    dom = Box(-1, 1, 2)
    parts = []
    for at in (0.0, np.inf):  # never per row, always per row
        monkeypatch.setattr(AR, "PER_ROW_AT", at)
        parts.append(partition_plane(net, dom))
    a, b = parts
    assert a.n_regions == b.n_regions > 20
    for x, y in ((a.vertices, b.vertices), (a.maps, b.maps), (a.codes, b.codes), (a.edge_tags, b.edge_tags)):
        assert x.tobytes() == y.tobytes()
    assert a.stats["predicates"] == b.stats["predicates"]


def test_relu_outputs_mapped_per_child_or_by_corrections_give_the_same_partition(monkeypatch):
    """A ReLU's lazy output is mapped either by one product per parent plus a rank-1 correction per crossing unit
    on in a child, or by one product per child, whichever the cost model says is cheaper. The sums differ in their
    order only, so the regions and codes must be the same and the maps within rounding of each other."""
    import regioncount.engines._plane._maps as maps

    net = random_mlp(2, [16, 16, 16], seed=4)
    dom = Box(-2, 2, 2)
    parts, used = [], []
    real = maps._corrections_pay
    for choice in (True, False):
        monkeypatch.setattr(maps, "_corrections_pay", lambda *a, c=choice: used.append(real(*a)) or c)
        parts.append(partition_plane(net, dom))
    a, b = parts
    assert a.n_regions == b.n_regions > 100
    assert len(used) >= 4  # both runs went through the choice, for hidden and output layers
    assert a.codes.tobytes() == b.codes.tobytes()
    np.testing.assert_allclose(a.maps, b.maps, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(a.vertices, b.vertices, rtol=0, atol=1e-12)
    assert a.linear_regions() == b.linear_regions()
    forward_check(b, net, dom)
    # the model: a hidden 100 -> 100 layer whose children carry two corrections each is mapped child by child,
    # an output layer by corrections
    assert not real(2402, 794, 3695, 1, 100, 100) and real(9475, 8436, 1146, 1, 100, 1)


@pytest.mark.parametrize("layout", ["paper", "compact"])
def test_identical_query_rows_share_their_decision(layout):
    """A compiled Transformer's heads have one query on every token: the engine decides each head once and
    copies the decision; codes and outputs still match the forward pass, the partition the Maxout's."""
    from regioncount.networks import Attention, walk_widths
    from regioncount.networks._ops import op_code_length
    from regioncount.theory._compile import compile_maxout

    mo = random_maxout(2, (4, 3), 3, seed=1)
    tf = compile_maxout(mo, -1.0, 2.0, layout)
    dom = Box(-1, 2, 2)
    part = partition_plane(tf, dom)
    forward_check(part, tf, dom)
    ref = partition_plane(mo, dom)
    assert part.n_regions == ref.n_regions > 10
    np.testing.assert_allclose(np.sort(part.areas), np.sort(ref.areas), rtol=1e-9, atol=0)
    program, pos, n_att = tf.lower(), 0, 0
    for op, w_in, _ in walk_widths(program):
        w = op_code_length(op, w_in, program.tokens)
        if isinstance(op, Attention):
            heads = part.codes[:, pos : pos + w].reshape(part.n_regions, op.heads, program.tokens)
            assert np.all(heads == heads[:, :, :1])
            n_att += 1
        pos += w
    assert n_att == 2 and pos == part.code_length


@pytest.mark.parametrize("layout", ["paper", "compact"])
def test_entries_nothing_reads_are_left_out_with_the_same_partition(layout, monkeypatch):
    """After a compiled Transformer's last decision only the output token's few read columns are computed
    (``live_entries``, kept apart as ``_Live``): the regions, codes and vertices are those of the run that
    computes every entry, and the output maps the same up to the order of their sums."""
    import regioncount.engines._plane._affine_op as affine_op
    import regioncount.engines._plane._driver as driver
    import regioncount.engines._plane._relu as relu
    from regioncount.theory._compile import compile_maxout

    tf = compile_maxout(random_maxout(2, (4, 3), 3, seed=1), -1.0, 2.0, layout)
    dom = Box(-1, 2, 2)
    calls: list = []
    real = affine_op.affine_live
    monkeypatch.setattr(affine_op, "affine_live", lambda *a: calls.append(a[1].W.shape) or real(*a))
    settled: list = []
    real_whole = relu._all_whole
    monkeypatch.setattr(relu, "_all_whole", lambda *a: settled.append(1) or real_whole(*a))
    part = partition_plane(tf, dom)
    assert calls and (1, tf.lower().ops[-1].W.shape[1]) in calls  # the output affine at least took the cut
    # the paper layout ends in a feed-forward block of clipping units, settled before their maps are formed
    assert len(settled) == (layout == "paper")
    monkeypatch.setattr(driver, "live_entries", lambda program: {})
    full = partition_plane(tf, dom)
    assert part.n_regions == full.n_regions > 10
    assert part.codes.tobytes() == full.codes.tobytes()
    np.testing.assert_array_equal(part.vertices, full.vertices)
    np.testing.assert_allclose(part.maps, full.maps, rtol=1e-12, atol=1e-13)
    assert part.linear_regions() == full.linear_regions()
    forward_check(part, tf, dom)


def test_units_settled_from_the_input_extremes_agree_with_the_formed_maps():
    """A ReLU after an unformed affine output may settle every unit from the extremes of the affine's input over
    the regions (``_whole_by_intervals``): where it does, each unit's sign is the one the formed maps prove
    (``_whole_units``), and where a unit crosses the square, or the error bounds are too wide, it settles none."""
    from regioncount.engines._plane._maps import _Bounds, _Deferred
    from regioncount.engines._plane._relu import _whole_by_intervals, _whole_units
    from regioncount.networks import Affine

    rng = np.random.default_rng(3)
    T, d, D = 2, 4, 5
    X = rng.uniform(-1, 1, (60, 3, T, d)) * np.array([0.1, 0.1, 1.0])[None, :, None, None]
    W = rng.normal(size=(D, d))
    b = np.array([9.0, 12.0, -10.0, 8.0, -15.0])  # far from every kink on the square

    def bounds(e):
        return _Bounds(np.full((T, d), 2.0), np.full((T, d), e), np.full((T, d), -1074))

    def formed(op, e):
        Y = X @ op.W.T
        Y[:, 2] += op.b
        err = np.abs(op.W).sum(axis=1) * e * 2 + 1e-12  # a bound on each formed coefficient's error
        return _whole_units(Y.reshape(60, 3, T * D), np.tile(err, T))

    op = Affine(W, b)
    got = _whole_by_intervals(_Deferred(X, op, bounds(1e-12)))
    assert got is not None
    pos, neg = got
    np.testing.assert_array_equal(pos, np.tile(b > 0, T))
    np.testing.assert_array_equal(neg, np.tile(b < 0, T))
    ref_pos, ref_neg = formed(op, 1e-12)
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_array_equal(neg, ref_neg)
    assert _whole_by_intervals(_Deferred(X, Affine(W, np.where(b > 9.5, 0.0, b)), bounds(1e-12))) is None  # crosses
    assert _whole_by_intervals(_Deferred(X, op, bounds(10.0))) is None  # bounds too wide to prove a sign
    assert _whole_by_intervals(_Deferred(X[:0], op, bounds(1e-12))) is None  # no region: nothing to settle


def test_queries_differing_on_one_parent_are_not_merged():
    from regioncount.engines._plane import _same_units

    rng = np.random.default_rng(0)
    F, quad = rng.normal(size=(5, 4, 3, 3)), np.zeros((5, 4, 3, 3))
    F[:, 1], F[:, 3] = F[:, 0], F[:, 2]
    F[4, 3, 2, 1] += 1e-15  # query 3 differs from query 2 on one parent only
    tol, ctol, act = np.ones((1, 4, 3)), np.ones((1, 4, 3)), np.ones((5, 4, 3), bool)
    np.testing.assert_array_equal(_same_units(F, quad, tol, ctol, act), [0, 0, 2, 3])
    act[0, 1, 2] = False  # a different allowed set
    np.testing.assert_array_equal(_same_units(F, quad, tol, ctol, act), [0, 1, 2, 3])


def test_shared_token_outputs_outside_a_residual():
    """Attention whose query tokens share outputs, feeding a residual, an Affine, a ReLU or the output
    directly (not added to a residual stream): codes and outputs still match the forward pass."""
    from regioncount.networks import Attention, Program, ReLU, Residual
    from regioncount.theory._compile import compile_maxout

    prog = compile_maxout(random_maxout(2, (3, 3), 3, seed=4), -1.0, 2.0, "compact").lower()
    ops = prog.ops
    att = [k for k, op in enumerate(ops) if isinstance(op, Residual) and isinstance(op.body[0], Attention)]
    a0, a1 = att[0], att[-1]
    leaf0, leaf1 = ops[a0].body[0], ops[a1].body[0]
    dom = Box(-1, 2, 2)
    variants = [
        ops[:a0] + (leaf0,) + ops[a0 + 1 :],  # into the next residual block
        ops[:a1] + (leaf1,) + ops[a1 + 1 :],  # into the readout Affine
        ops[:a1] + (leaf1, ReLU()) + ops[a1 + 1 :],  # into a ReLU
        ops[:a1] + (leaf1,),  # to the output
    ]
    for v in variants:
        net = Program(prog.tokens, prog.input_dim, tuple(v), prog.out_token)
        part = partition_plane(net, dom)
        assert part.n_regions > 1
        forward_check(part, net, dom)


@pytest.mark.parametrize("k", [3, 5, 7])
def test_argmax_line_classes_of_all_parents_at_once_equal_the_per_parent_search(k):
    """The plane engine's argmax splitter names coincident boundary lines by one tag; with few pieces it
    compares every parent's pairs at once. That must pick the same classes as the per-parent search."""
    import regioncount.engines._plane._argmax as AR

    rng = np.random.default_rng(k)
    F = rng.normal(size=(600, 3, k))
    F[::3, :, 1] = F[::3, :, 0]  # coincident pieces: every line against them coincides
    F[::5, :, 2] = 2 * F[::5, :, 0] - F[::5, :, 1]  # three pieces through one line
    F[::7] = 0.0  # degenerate: no line at all
    F[::11, :2] = 0.0  # constant pieces: no line either
    parents = np.unique(rng.integers(0, 600, 400))
    together = AR._line_classes(F, parents, k)
    per_parent = np.tile(np.arange(k * (k - 1) // 2), (600, 1))
    for p in parents:
        g = F[p][:, [a for b in range(k) for a in range(b)]] - F[p][:, [b for b in range(k) for _ in range(b)]]
        norm = np.hypot(g[0], g[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            per_parent[p] = AR._same_line_min(np.where(norm > 0, g / norm, np.nan), k * (k - 1) // 2)
    assert np.array_equal(together, per_parent)
    assert np.any(together != np.arange(k * (k - 1) // 2))  # some lines do coincide


@pytest.mark.parametrize("ordered", [True, False])
def test_set_bits_is_an_unbuffered_or_of_every_pair(ordered):
    """The ReLU's packed code bits set per (region, unit) pair: pairs sorted by region and unit (as the rounds' lists
    give them) OR-ed per byte first, any other order by bitwise_or.at; repeated pairs and bytes shared by pairs."""
    from regioncount.engines._plane._relu import set_bits

    rng = np.random.default_rng(5)
    for n in (0, 1, 60, 3000):
        rows, units = rng.integers(0, 40, n), rng.integers(0, 90, n)
        if ordered:
            o = np.lexsort((units, rows))
            rows, units = rows[o], units[o]
        got = np.zeros((40, 12), np.uint8)
        set_bits(got, rows, units)
        want = np.zeros((40, 12), np.uint8)
        for r, u in zip(rows.tolist(), units.tolist()):
            want[r, u >> 3] |= 1 << (7 - (u & 7))
        assert np.array_equal(got, want)
