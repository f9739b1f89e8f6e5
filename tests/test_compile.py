"""Maxout -> hardmax transformer compiler (DESIGN §5): same outputs, same partition, no FFN ReLU ever
switches on the box, refusal outside it; the bound-attaining transformer meets Thm 4.4."""

import itertools
import math

import numpy as np
import pytest

from regioncount import random_maxout
from regioncount._domain import Box, Segment
from regioncount._errors import DomainError
from regioncount.engines._forward import forward_codes
from regioncount.networks import Attention, GroupMax, ReLU, check_domain, walk_widths
from regioncount.networks._ops import op_code_length
from regioncount.theory._bounds import transformer_maxout_lower
from regioncount.theory._compile import (
    LAYOUTS,
    bound_attaining_transformer,
    compile_constant,
    compile_maxout,
    preactivation_bound,
)
from regioncount.theory._constructions import product_maxout_regions

# (input dim q, widths, rank k, seed): single and multiple layers, q = 1, 2, 3
NETS = [(1, (3,), 2, 0), (1, (2, 2), 3, 4), (2, (4, 3), 3, 1), (2, (2,), 4, 3), (3, (3, 2, 2), 2, 2)]


def box_for(q):
    return np.linspace(-1.5, -0.5, q), np.linspace(0.5, 1.3, q)


def code_segments(program, kind):
    """(start, stop) of the code entries written by every leaf op of type ``kind``, in order."""
    out, pos = [], 0
    for op, w_in, _ in walk_widths(program):
        n = op_code_length(op, w_in, program.tokens)
        if isinstance(op, kind):
            out.append((pos, pos + n))
        pos += n
    return out


def run(net, X):
    Y, C, ties = forward_codes(net.lower(), np.asarray(X, dtype=np.float64))
    return np.asarray(Y), np.asarray(C), np.asarray(ties)


def grid_with_corners(lo, hi, n_per_axis):
    q = len(lo)
    axes = [
        a + (b - a) * (np.arange(n_per_axis) + 0.5 + 1e-6 * np.pi) / n_per_axis for a, b in zip(lo, hi, strict=True)
    ]
    G = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, q)
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    return G, corners


def maxout_numpy(net, X):
    """Reference maxout forward in plain NumPy: ``X (N, q) -> (N, out)``."""
    h = np.asarray(X, np.float64)
    for W, b in zip(net.weights, net.biases, strict=True):
        h = (np.einsum("rni,pi->prn", W, h) + b).max(axis=1)
    return h @ net.readout_W.T + net.readout_b


@pytest.mark.parametrize("q,widths,k,seed", NETS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_model_equals_maxout_with_the_same_partition(q, widths, k, seed, layout):
    net = random_maxout(q, widths, k, output_dim=2, seed=seed)
    lo, hi = box_for(q)
    tf = compile_maxout(net, lo, hi, layout)
    G, corners = grid_with_corners(lo, hi, {1: 5000, 2: 100, 3: 20}[q])
    X = np.concatenate([G, np.random.default_rng(seed).uniform(lo, hi, (400, q)), corners])
    Y0, Cm, _ = run(net, X)
    Y1, Ct, ties = run(tf, X)
    np.testing.assert_allclose(Y0, maxout_numpy(net, X), rtol=1e-13, atol=1e-15)  # the reference itself
    # outputs: 1e-12 relative to the output scale (outputs near 0 carry absolute rounding ~ eps * C)
    np.testing.assert_allclose(Y1, Y0, rtol=1e-12, atol=1e-12 * np.abs(Y0).max())
    assert ties.sum() == 0
    # hardmax argmax of head i over key tokens == argmax of maxout unit i over pieces, for every query
    att = code_segments(tf.lower(), Attention)
    gm = code_segments(net.lower(), GroupMax)
    assert len(att) == len(gm) == len(widths)
    for (a0, a1), (g0, g1), n in zip(att, gm, widths, strict=True):
        heads = Ct[:, a0:a1].reshape(len(X), n, k)  # (point, head, query token)
        for t in range(k):
            np.testing.assert_array_equal(heads[:, :, t], Cm[:, g0:g1])
    # hence one-to-one: as many distinct transformer codes as maxout codes on the grid
    assert len({r.tobytes() for r in Ct[: len(G)]}) == len({r.tobytes() for r in Cm[: len(G)]}) > 1
    # no FFN ReLU ever switches over the box (grid, random points and corners)
    relu = code_segments(tf.lower(), ReLU)
    assert relu
    bits = np.concatenate([Ct[:, r0:r1] for r0, r1 in relu], axis=1)
    assert np.all(bits == bits[0])
    assert 0 < bits[0].sum() < bits[0].size  # piece neurons of other tokens stay off, the rest stay on


@pytest.mark.parametrize("layout,blocks", [("paper", 9), ("compact", 4)])
def test_compiled_structure(layout, blocks):
    net = random_maxout(3, (3, 2, 2), 2, seed=2)
    lo, hi = box_for(3)
    tf = compile_maxout(net, lo, hi, layout)
    assert tf.depth == blocks
    assert tf.attention == "hardmax" and not tf.causal and tf.tokens == net.k and tf.input_dim == 3
    heads = [b.Wq.shape[0] for b in tf.blocks if b.Wq.shape[0]]
    assert heads == list(net.widths)  # one head per maxout unit
    np.testing.assert_array_equal(tf.valid_box[0], lo)
    np.testing.assert_array_equal(tf.valid_box[1], hi)
    # queries read only the constant slot: scores are affine in x (lines, not quadrics)
    for b in tf.blocks:
        for h in range(b.Wq.shape[0]):
            assert np.count_nonzero(b.Wq[h]) == 1 and np.all(tf.E.T @ b.Wq[h] == 0)


def test_refuses_domains_outside_the_box():
    net = random_maxout(2, (3,), 3, seed=5)
    tf = compile_maxout(net, [-1.0, -2.0], [1.0, 0.5])
    check_domain(tf, [-1.0, -2.0], [1.0, 0.5])  # the box itself
    check_domain(tf, [-0.5, -1.0], [0.5, 0.0])  # inside
    with pytest.raises(DomainError):
        check_domain(tf, [-1.5, -2.0], [1.0, 0.5])
    with pytest.raises(DomainError):
        check_domain(tf, [-2.0, -3.0], [2.0, 1.5])


def test_constant_bounds_every_preactivation():
    for q, widths, k, seed in NETS:
        net = random_maxout(q, widths, k, seed=seed)
        lo, hi = box_for(q)
        B = preactivation_bound(net, lo, hi)
        C = compile_constant(net, lo, hi)
        # the smallest power of two at least 2 B + 1
        assert 2 * B + 1 <= C < 2 * (2 * B + 1) and math.frexp(C)[0] == 0.5
        h = np.random.default_rng(0).uniform(lo, hi, (2000, q))
        assert np.abs(h).max() <= B
        for W, b in zip(net.weights, net.biases, strict=True):
            a = np.einsum("rni,pi->prn", W, h) + b
            assert np.abs(a).max() <= B
            h = a.max(axis=1)


def test_compile_rejects_bad_input():
    net = random_maxout(2, (3,), 2, seed=0)
    with pytest.raises(ValueError, match="layout"):
        compile_maxout(net, -1, 1, "dense")
    with pytest.raises(TypeError):
        compile_maxout(object(), -1, 1)
    with pytest.raises(DomainError):
        compile_maxout(net, 1, -1)
    with pytest.raises(ValueError):
        bound_attaining_transformer(1, 2, 1, 2)  # D < 3: Thm 4.4 does not apply


@pytest.mark.parametrize("D,paper,compact", [(3, 3, 2), (6, 6, 3), (7, 7, 3), (8, 8, 3)])
def test_bound_attaining_depth(D, paper, compact):
    assert bound_attaining_transformer(1, 2, 1, D)[0].depth == paper  # padded with identity blocks
    assert bound_attaining_transformer(1, 2, 1, D, layout="compact")[0].depth == compact


@pytest.mark.parametrize("args", [(1, 2, 1, 6), (2, 2, 1, 6), (1, 3, 1, 6), (2, 3, 1, 7), (1, 2, 1, 9)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bound_attaining_transformer_on_the_line(args, layout):
    line = pytest.importorskip("regioncount.engines._line")
    tf, info = bound_attaining_transformer(*args, layout=layout)
    m, T, q, D = args
    assert info["bound"] == transformer_maxout_lower(*args)
    assert info["construction_regions"] == product_maxout_regions((m * T,) * (D // 3), q, T)
    p = m * T // q
    assert info["attainable"] == (p % 2 == 0 or T == 2)
    pieces = line.walk_line(tf, Segment([-1.0], [2.0]))
    assert pieces.ties == 0
    assert pieces.activation_pieces == info["construction_regions"]
    if info["attainable"]:
        assert pieces.activation_pieces == info["bound"]
    else:  # DESIGN §4 caveat, measured: (1,3,1,6) reaches 42 of the formula's 49
        assert pieces.activation_pieces < info["bound"]
    # the compiled output is the maxout network's, piece by piece
    t = np.random.default_rng(1).uniform(0.0, 1.0, 300)
    Y0 = maxout_numpy(info["maxout"], pieces.points(t))
    np.testing.assert_allclose(pieces.evaluate(t), Y0, rtol=1e-12, atol=1e-14 * info["C"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bound_attaining_transformer_in_the_plane_on_a_grid(layout):
    tf, info = bound_attaining_transformer(1, 2, 2, 6, layout=layout)
    G, _ = grid_with_corners([-1.0, -1.0], [2.0, 2.0], 120)
    _, C, ties = run(tf, G)
    assert ties.sum() == 0
    assert len({r.tobytes() for r in C}) == info["bound"] == 16


@pytest.mark.parametrize(
    "args,expected", [((1, 2, 2, 6), 16), ((1, 2, 2, 9), 64), ((2, 2, 2, 9), 891), ((1, 3, 2, 6), 76)]
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bound_attaining_transformer_exact_plane_counts(args, expected, layout):
    plane = pytest.importorskip("regioncount.engines._plane")
    tf, info = bound_attaining_transformer(*args, layout=layout)
    part = plane.partition_plane(tf, Box([-1.0, -1.0], [2.0, 2.0]))
    assert part.n_regions == info["construction_regions"] == expected
    assert part.linear_regions() == expected
    if info["attainable"]:
        assert part.n_regions == info["bound"]
    else:  # (1,3,2,6): floor(mT/q) = 1 odd with T = 3; Thm 4.4's formula says 171
        assert info["bound"] == 171


def test_d9_default_construction_meets_thm44_exactly():
    # m=1, T=4, q=2, D=9: the maxout network the transformer compiles has Thm 4.4's 160 867 regions
    # (the compiled transformers give the same count but take ~30 s on the plane engine; see the report)
    plane = pytest.importorskip("regioncount.engines._plane")
    _, info = bound_attaining_transformer(1, 4, 2, 9)
    assert info["bound"] == 160_867 and info["attainable"]
    assert plane.partition_plane(info["maxout"], Box([-1.0, -1.0], [2.0, 2.0])).n_regions == 160_867


def test_lowering_keeps_the_valid_box_and_every_engine_refuses_outside_it():
    from regioncount import count_sampled, partition_plane, walk_line

    tf = compile_maxout(random_maxout(2, (2,), 2, seed=5), [-1.0, -1.0], [1.0, 1.0], "compact")
    program = tf.lower()
    assert program.valid_box == tf.valid_box == ((-1.0, -1.0), (1.0, 1.0))
    outside, inside = Box(-1, 1.5, 2), Box(-1, 1, 2)
    for run in (
        lambda d: partition_plane(program, d),
        lambda d: count_sampled(program, d, grid=20),
        lambda d: walk_line(program, Segment(d.lo, d.hi)),
    ):
        with pytest.raises(DomainError, match="compiled"):
            run(outside)
        run(inside)
    # the lowered program and the model count the same regions inside the box
    assert partition_plane(program, inside).n_regions == partition_plane(tf, inside).n_regions


def test_constant_of_the_fold_network_is_tight_and_an_upper_bound():
    # the (12, 12, 12) fold network of the (4, 3, 2, 9) construction: interval arithmetic on the whole box gives
    # 133,887; on refined cells the bound stays above every value met on a fine grid and within 4x of it
    from regioncount.theory._constructions import product_maxout

    net = product_maxout((12, 12, 12), 2, 3)
    B = preactivation_bound(net, -1.0, 2.0)
    g = np.linspace(-1.0, 2.0, 301)
    h = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    met = 0.0
    for W, b in zip(net.weights, net.biases, strict=True):
        a = np.einsum("rni,pi->prn", W, h) + b
        met = max(met, float(np.abs(a).max()))
        h = a.max(axis=1)
    assert met <= B < 4 * met
    assert compile_constant(net, -1.0, 2.0) == 8192.0
