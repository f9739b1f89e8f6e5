"""The exact 1D line engine against closed forms and against the JAX forward pass."""

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

import regioncount as rc
from regioncount._domain import Segment
from regioncount._errors import DegreeTooHighError, DomainError, NotPiecewiseError
from regioncount.engines._forward import forward_codes
from regioncount.engines._line import walk_line
from regioncount.networks import Affine, Attention, Program, ReLU

GRID = 200_001  # MLP / Maxout grids; transformers (slower forward) use half
SEG2 = ([-3.0, -2.0], [3.0, 2.5])


def tent_mlp(L: int) -> rc.MLP:
    """Telgarsky's tent t(x) = 2 relu(x) - 4 relu(x - 1/2) composed L times (Telgarsky 2016)."""
    W0, b = np.array([[1.0], [1.0]]), np.array([0.0, -0.5])
    Wl, out = np.array([[2.0, -4.0], [2.0, -4.0]]), np.array([[2.0, -4.0]])
    return rc.MLP((W0,) + (Wl,) * (L - 1) + (out,), (b,) * L + (np.zeros(1),))


def forward(net, X):
    Y, C, ties = forward_codes(rc.lower(net), np.asarray(X))
    return np.asarray(Y), np.asarray(C), np.asarray(ties)


def interior_t(r, per_piece: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random t strictly inside every piece (away from its ends by 1% of its width) and their piece index."""
    lo, hi = r.breaks[:-1], r.breaks[1:]
    u = rng.uniform(0.01, 0.99, (r.activation_pieces, per_piece))
    t = lo[:, None] + u * (hi - lo)[:, None]
    return t.ravel(), np.repeat(np.arange(r.activation_pieces), per_piece)


# --------------------------------------------------------------------------------------------------
# closed forms


@pytest.mark.parametrize("L", [1, 2, 3, 6, 11])
def test_tent_map_has_2_to_the_L_pieces(L):
    r = walk_line(tent_mlp(L), ([0.0], [1.0]))
    assert r.activation_pieces == 2**L
    assert r.linear_pieces == 2**L  # slopes alternate +-2^L: no two neighbours share an affine map
    np.testing.assert_allclose(r.breaks, np.arange(2**L + 1) / 2**L, atol=1e-12)
    np.testing.assert_allclose(np.abs(r.output[:, 0, 1]), 2.0**L, rtol=1e-9)
    assert r.kind == "linear" and r.degree == 1 and r.ties == 0


def test_one_layer_of_n_units_gives_n_plus_one_pieces():
    rng = np.random.default_rng(0)
    n = 9
    roots = np.sort(rng.uniform(0.05, 0.95, n))
    w = rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 2.0, n)
    c = rng.normal(size=n)
    c[[1, 4, 5]] = 0.0  # units the readout ignores: activation pieces, not linear pieces
    net = rc.MLP((w[:, None], c[None, :]), (-w * roots, np.zeros(1)))
    r = walk_line(net, ([0.0], [1.0]))
    assert r.activation_pieces == n + 1
    np.testing.assert_allclose(r.breaks[1:-1], roots, atol=1e-14)
    assert r.linear_pieces == 1 + np.count_nonzero(c)
    np.testing.assert_allclose(r.polynomial_breaks[1:-1], roots[c != 0], atol=1e-14)


def test_duplicate_dead_and_end_units_add_no_piece():
    """Three genuine breakpoints; everything else must not create a piece."""
    wb = [
        (1.0, -0.2),  # root 0.2
        (-2.0, 1.0),  # root 0.5
        (1.5, -1.05),  # root 0.7
        (1.0, -0.2),  # exact duplicate
        (4.0, -0.8),  # scaled duplicate (x4 is exact in binary: the same root)
        (-1.0, 0.5),  # same root, other orientation
        (0.0, 0.0),  # identically zero (dead, and exactly 0: bit 0 as in forward)
        (0.0, -1.0),  # dead
        (0.0, 2.0),  # always on, constant
        (1.0, 0.0),  # root exactly at the start of the segment
        (-1.0, 1.0),  # root exactly at the end
        (1.0, 3.0),  # root outside
    ]
    w, b = np.array(wb).T
    net = rc.MLP((w[:, None], np.ones((1, w.size))), (b, np.zeros(1)))
    r = walk_line(net, ([0.0], [1.0]))
    assert r.activation_pieces == 4
    np.testing.assert_allclose(r.breaks, [0.0, 0.2, 0.5, 0.7, 1.0], atol=1e-15)
    _, C, _ = forward(net, r.points((r.breaks[1:] + r.breaks[:-1]) / 2))
    np.testing.assert_array_equal(C, r.codes)
    assert r.exact and r.exact_predicates > 0  # the coincidences were settled in exact arithmetic


def test_a_near_duplicate_is_a_real_piece_of_length_2e_minus_17():
    """``3 x - 0.6`` is not ``x - 0.2`` in float64: its root is fl(0.6)/3 = 0.19999999999999999259...,
    below fl(0.2) = 0.20000000000000001110... The piece between them (no float lies inside) is real:
    exact arithmetic at its midpoint puts the first unit on and the second off."""
    net = rc.MLP((np.array([[1.0], [3.0]]), np.ones((1, 2))), (np.array([-0.2, -0.6]), np.zeros(1)))
    r = walk_line(net, ([0.0], [1.0]))
    assert r.activation_pieces == 3
    np.testing.assert_array_equal(r.codes, [[0, 0], [0, 1], [1, 1]])
    lo, hi = Fraction(-0.6) / -3, Fraction(-0.2) / -1
    mid = (lo + hi) / 2
    assert 0 < hi - lo < Fraction(1, 10**16)
    assert 1 * mid + Fraction(-0.2) < 0 < 3 * mid + Fraction(-0.6)


def test_reversed_segment_mirrors_the_pieces():
    net = rc.random_mlp(3, [12, 12], seed=4)
    a, b = np.array([-2.0, 1.0, 0.5]), np.array([2.5, -1.5, 1.0])
    fwd, bwd = walk_line(net, Segment(a, b)), walk_line(net, (b, a))
    assert fwd.activation_pieces == bwd.activation_pieces
    np.testing.assert_allclose(fwd.breaks, 1.0 - bwd.breaks[::-1], atol=1e-12)
    np.testing.assert_array_equal(fwd.codes, bwd.codes[::-1])


def test_relu_attention_tangency_and_crossing():
    """ReLU attention on one token: S = q k. With q = k = x - 0.3 the score touches 0 (a double root):
    one piece. With q = x - 0.3, k = x - 0.6 it changes sign twice: three pieces, at 0.3 and 0.6."""

    def prog(shift_k):
        return Program(
            tokens=1,
            input_dim=1,
            ops=(
                Affine(np.array([[1.0], [1.0]]), np.array([-0.3, -shift_k])),
                Attention(
                    np.array([[[1.0], [0.0]]]),
                    np.array([[[0.0], [1.0]]]),
                    np.ones((1, 2, 1)),
                    np.ones((1, 1, 2)),
                    "relu",
                ),
            ),
        )

    touch = walk_line(prog(0.3), ([0.0], [1.0]))
    assert touch.activation_pieces == 1 and touch.codes[0, 0] == 1
    assert touch.kind == "spline" and touch.degree == 3
    cross = walk_line(prog(0.6), ([0.0], [1.0]))
    assert cross.activation_pieces == 3
    np.testing.assert_allclose(cross.breaks, [0.0, 0.3, 0.6, 1.0], atol=1e-14)
    np.testing.assert_array_equal(cross.codes[:, 0], [1, 0, 1])
    t = np.linspace(0.0, 1.0, 101)
    Y, _, _ = forward(prog(0.6), cross.points(t))
    np.testing.assert_allclose(cross.evaluate(t), Y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("a", [3.0, 0.1, 1 / 3, 1.7, 13.0])
def test_rounded_double_roots_make_no_phantom_piece(a):
    """S = (a (x - c)) ((x - c) / a) >= 0 touches 0 once. Rounded through a and 1/a its two computed
    roots often straddle c by ~1e-8, leaving a sliver whose midpoint sign is rounding noise (it made
    a phantom piece in a quarter of these cases before slivers took their neighbour's decision)."""
    for c in (0.3, 0.7, 1 / 3, 0.123456789, 0.5, 2 / 7):
        P = Program(
            tokens=1,
            input_dim=1,
            ops=(
                Affine(np.array([[a], [1 / a]]), np.array([-a * c, -c / a])),
                Attention(
                    np.array([[[1.0], [0.0]]]),
                    np.array([[[0.0], [1.0]]]),
                    np.ones((1, 2, 1)),
                    np.ones((1, 1, 2)),
                    "relu",
                ),
            ),
        )
        for seg in (([0.0], [1.0]), ([-0.4], [1.3]), ([0.05], [0.91])):
            r = walk_line(P, seg)
            assert r.activation_pieces == 1 and r.codes[0, 0] == 1, (c, seg, r.breaks)


def _two_tokens(c: float) -> Program:
    """Two tokens through token-wise affine maps and ReLUs that never switch on [0, 1]:
    H_0 = (x - 0.3, 0), H_1 = (c, x). One hardmax head with q = k = first coordinate:
    S_00 - S_01 = (x - 0.3)(x - 0.3 - c), and query 1 has S_10 - S_11 = c (x - 0.3 - c)."""
    big = 100.0
    return Program(
        tokens=2,
        input_dim=1,
        ops=(
            Affine(np.array([[1.0], [1.0]]), np.array([[big - 0.3, -big], [-big, big]])),
            ReLU(),
            Affine(np.eye(2), np.array([[-big, 0.0], [c, -big]])),
            Attention(
                Wq=np.array([[[1.0], [0.0]]]),
                Wk=np.array([[[1.0], [0.0]]]),
                Wv=np.eye(2)[None],
                Wo=np.eye(2)[None],
                sigma="hardmax",
            ),
        ),
    )


def test_hardmax_tangency_makes_no_piece_and_identical_scores_tie():
    """c = 0: S_00 - S_01 = (x - 0.3)^2 touches 0 at one point (no piece), and query 1's scores are
    both identically 0: a tie on the whole segment, averaged and counted, first key in the code."""
    P = _two_tokens(0.0)
    r = walk_line(P, ([0.0], [1.0]))
    assert r.activation_pieces == 1
    np.testing.assert_array_equal(r.codes[0, -2:], [0, 0])
    assert r.ties == 1 and r.piece_ties.tolist() == [1]
    t = np.array([0.1, 0.3 + 1e-6, 0.5, 0.9])
    Y, C, ties = forward(P, r.points(t))
    np.testing.assert_array_equal(C, np.repeat(r.codes, t.size, axis=0))
    np.testing.assert_array_equal(ties, [1] * t.size)
    np.testing.assert_allclose(r.evaluate(t), Y, atol=1e-13)


@pytest.mark.parametrize("c", [0.01, 1e-6])
def test_hardmax_close_crossings_are_kept(c):
    """c > 0: query 0 switches to key 1 on (0.3, 0.3 + c), however thin, and back."""
    P = _two_tokens(c)
    r = walk_line(P, ([0.0], [1.0]))
    assert r.activation_pieces == 3
    np.testing.assert_allclose(r.breaks, [0.0, 0.3, 0.3 + c, 1.0], atol=1e-13)
    np.testing.assert_array_equal(r.codes[:, -2], [0, 1, 0])
    t, piece = interior_t(r, 10, np.random.default_rng(0))
    _, C, _ = forward(P, r.points(t))
    np.testing.assert_array_equal(C, r.codes[piece])


# --------------------------------------------------------------------------------------------------
# random networks against the forward pass

NETS = {
    "mlp": lambda: rc.random_mlp(2, [16, 16, 16], seed=1),
    "mlp_normal": lambda: rc.random_mlp(3, [10, 10], seed=2, init="normal"),
    "maxout2": lambda: rc.random_maxout(2, [8, 8], k=2, seed=3),
    "maxout3": lambda: rc.random_maxout(2, [6, 6], k=3, seed=4),
    "hardmax": lambda: rc.random_transformer(2, tokens=3, d_model=6, depth=2, seed=3),
    "hardmax_causal": lambda: rc.random_transformer(2, tokens=4, d_model=6, depth=2, heads=2, causal=True, seed=4),
    "relu_att1": lambda: rc.random_transformer(2, tokens=3, d_model=6, depth=1, attention="relu", seed=5),
    "relu_att2": lambda: rc.random_transformer(
        2, tokens=3, d_model=4, depth=2, attention="relu", causal=True, scale_by_T=True, seed=6
    ),
}
# nets whose smallest piece is wide enough for the 200k grid to see every piece
RESOLVED = {"mlp", "maxout2", "maxout3", "hardmax", "relu_att1"}


def _segment(name):
    if name == "mlp_normal":
        return ([-2.0, 1.0, 0.5], [2.5, -1.5, 1.0])
    return SEG2


@pytest.mark.parametrize("name", list(NETS))
def test_pieces_agree_with_forward(name):
    """Codes (and ties) inside every piece equal forward's; outputs equal the piece polynomials; a fine
    uniform grid sees at most the exact number of pieces, and exactly that many when it is fine enough."""
    net = NETS[name]()
    r = walk_line(net, _segment(name))
    assert r.activation_pieces > 5
    assert np.all(np.diff(r.breaks) > 0) and r.breaks[0] == 0.0 and r.breaks[-1] == 1.0
    if r.degree == 1:
        # linear pieces recounted from the pieces' affine outputs: adjacent pieces with equal maps merge
        A = r.output.reshape(r.activation_pieces, -1)
        same = np.all(np.abs(A[1:] - A[:-1]) <= 1e-9 * np.abs(A).max(), axis=1)
        assert r.linear_pieces == r.activation_pieces - int(same.sum())
    t_in, piece = interior_t(r, 8, np.random.default_rng(1))
    t_in = np.concatenate([t_in, (r.breaks[1:] + r.breaks[:-1]) / 2])
    piece = np.concatenate([piece, np.arange(r.activation_pieces)])
    grid = np.linspace(0.0, 1.0, GRID if name.startswith(("mlp", "maxout")) else GRID // 2 + 1)
    Y, C, ties = forward(net, r.points(np.concatenate([t_in, grid])))
    n_in = t_in.size

    np.testing.assert_array_equal(C[:n_in], r.codes[piece])
    np.testing.assert_array_equal(ties[:n_in], r.piece_ties[piece])
    scale = np.abs(Y).max()
    # the polynomial of each piece in global t (affine for kind "linear": y = c0 + c1 t)
    assert r.output.shape == (r.activation_pieces, Y.shape[1], r.degree + 1)
    y = np.polynomial.polynomial.polyval(t_in[:, None], r.output[piece].transpose(2, 0, 1), tensor=False)
    np.testing.assert_allclose(y, Y[:n_in], rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(r.evaluate(t_in), Y[:n_in], rtol=0, atol=1e-9 * scale)
    assert r.degree == (3 ** int(name[-1]) if name.startswith("relu_att") else 1)

    Cg = C[n_in:]
    runs = 1 + int(np.count_nonzero(np.any(Cg[1:] != Cg[:-1], axis=1)))
    i = r.piece_index(grid)
    away = np.minimum(grid - r.breaks[i], r.breaks[i + 1] - grid) > 1e-9
    np.testing.assert_array_equal(Cg[away], r.codes[i[away]])
    assert runs <= r.activation_pieces
    if name in RESOLVED:
        assert np.diff(r.breaks).min() > 3 / (grid.size - 1)  # precondition: every piece holds grid points
        assert runs == r.activation_pieces


def test_mlp_codes_never_repeat_along_a_line():
    """Activation regions of a ReLU MLP are convex: a line meets each at most once."""
    r = walk_line(rc.random_mlp(2, [20, 20], seed=7), ([-5.0, -4.0], [5.0, 4.5]))
    assert r.distinct_codes == r.activation_pieces


def test_hardmax_pieces_are_affine_with_constant_code_between_events():
    net = rc.random_transformer(2, tokens=3, d_model=6, depth=2, heads=2, seed=11)
    r = walk_line(net, SEG2)
    lo, hi = r.breaks[:-1], r.breaks[1:]
    u = np.linspace(0.02, 0.98, 25)
    t = (lo[:, None] + u * (hi - lo)[:, None]).ravel()
    Y, C, _ = forward(net, r.points(t))
    C = C.reshape(r.activation_pieces, u.size, -1)
    assert np.all(C == C[:, :1]), "code changes inside a piece"
    Y = Y.reshape(r.activation_pieces, u.size, -1)
    # affine in t on each piece: the second differences of equally spaced samples vanish
    d2 = Y[:, 2:] - 2 * Y[:, 1:-1] + Y[:, :-2]
    assert np.abs(d2).max() <= 1e-9 * np.abs(Y).max()
    # and it is not affine across pieces: the pieces are real (consecutive affine maps differ somewhere)
    assert r.linear_pieces > 1


@pytest.mark.parametrize("depth", [1, 2])
def test_relu_attention_is_a_polynomial_of_degree_3_to_the_t_on_each_piece(depth):
    """Lai, Lim, Liu 2024: t ReLU-attention blocks give degree <= 3^t. Fit forward values on the
    widest pieces with a polynomial of that degree: exact to rounding; one degree less is not."""
    net = rc.random_transformer(2, tokens=3, d_model=4, depth=depth, attention="relu", seed=20 + depth)
    r = walk_line(net, SEG2)
    deg = 3**depth
    assert r.kind == "spline" and r.degree == deg
    widest = np.argsort(np.diff(r.breaks))[-5:]
    s = np.cos(np.pi * (np.arange(4 * deg) + 0.5) / (4 * deg))  # Chebyshev nodes in (-1, 1)
    lower_fails = []
    for i in widest:
        lo, hi = r.breaks[i], r.breaks[i + 1]
        Y, C, _ = forward(net, r.points((lo + hi) / 2 + s * (hi - lo) / 2))
        assert np.all(C == r.codes[i])
        scale = np.abs(Y).max()
        for j in range(Y.shape[1]):
            full = np.polynomial.chebyshev.Chebyshev.fit(s, Y[:, j], deg, domain=[-1, 1])
            err = np.abs(full(s) - Y[:, j]).max()
            assert err <= 1e-12 * scale
            low = np.polynomial.chebyshev.Chebyshev.fit(s, Y[:, j], deg - 1, domain=[-1, 1])
            err_low = np.abs(low(s) - Y[:, j]).max()
            lower_fails.append(err_low > max(100 * err, 1e-13 * scale))
    assert any(lower_fails), "no piece needs the full degree: the bound is not exercised"


def test_ties_of_identical_tokens_are_averaged_and_counted():
    for causal in (False, True):
        net = rc.random_transformer(2, tokens=4, d_model=6, depth=2, causal=causal, seed=1)
        P = np.array(net.P)
        P[2] = P[1]  # tokens 1 and 2 see the same keys: their scores tie identically
        net = dataclasses.replace(net, P=P)
        r = walk_line(net, SEG2)
        assert r.ties > 0
        t, piece = interior_t(r, 6, np.random.default_rng(2))
        Y, C, ties = forward(net, r.points(t))
        np.testing.assert_array_equal(C, r.codes[piece])
        np.testing.assert_array_equal(ties, r.piece_ties[piece])
        assert r.ties == np.count_nonzero(r.piece_ties)
        np.testing.assert_allclose(r.evaluate(t), Y, rtol=0, atol=1e-9 * np.abs(Y).max())


# --------------------------------------------------------------------------------------------------
# refusals and inputs


def test_softmax_is_not_piecewise():
    net = rc.random_transformer(2, tokens=3, d_model=4, depth=1, attention="softmax")
    with pytest.raises(NotPiecewiseError, match="smooth, not piecewise"):
        walk_line(net, SEG2)


def test_degree_above_the_cap_is_refused():
    net = rc.random_transformer(2, tokens=2, d_model=4, depth=2, attention="relu")
    with pytest.raises(DegreeTooHighError, match="--method sample"):
        walk_line(net, SEG2, max_degree=8)
    assert walk_line(net, SEG2, max_degree=9).degree == 9
    deep = rc.random_transformer(2, tokens=2, d_model=4, depth=4, attention="relu")
    with pytest.raises(DegreeTooHighError):
        walk_line(deep, SEG2)


def test_degree_plan_from_the_weights_exact_zeros():
    """A ReLU-attention network whose attention reads only low-degree columns keeps degree 5 at depth 4
    (3^4 = 81 for generic weights): the plan reads it per state column from the weights' exact zeros, the
    walk truncates its coefficient arrays to it, and refuses above max_degree with one line."""
    from _nets import slot_transformer

    from regioncount.engines._degrees import program_degrees

    net = slot_transformer(4, seed=7)
    plan = program_degrees(net.lower())
    assert (plan.wall, plan.output) == (5, 5)
    r = walk_line(net, SEG2)
    assert r.kind == "spline" and r.degree == 5 and r.output.shape[-1] == 6
    t, piece = interior_t(r, 4, np.random.default_rng(3))
    Y, C, _ = forward(net, r.points(t))
    np.testing.assert_array_equal(C, r.codes[piece])
    np.testing.assert_allclose(r.evaluate(t), Y, rtol=0, atol=1e-9 * np.abs(Y).max())
    with pytest.raises(DegreeTooHighError) as info:
        walk_line(net, SEG2, max_degree=4)
    msg = str(info.value)
    assert "\n" not in msg and "degree 5" in msg and "max_degree=4" in msg and "--method sample" in msg
    generic = rc.random_transformer(2, tokens=2, d_model=2, depth=4, d_ff=1, attention="relu", seed=0)
    assert program_degrees(generic.lower()).output == 81
    with pytest.raises(DegreeTooHighError, match="degree 81 in t, above max_degree=27"):
        walk_line(generic, SEG2)


def test_truncation_to_the_degree_plan_drops_only_exact_zeros():
    """Walked without truncation (arrays of degree 27 at depth 3), the same net gives bit-identical breaks,
    codes and outputs; and a plan that claims a degree too low is caught by the check, not trusted."""
    from unittest import mock

    from _nets import slot_transformer

    from regioncount.engines._line import _float, _walk

    net = slot_transformer(3, seed=3)
    rng = np.random.default_rng(4)
    for _ in range(10):
        seg = Segment(rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2))
        r = walk_line(net, seg)
        with (
            mock.patch.object(_float, "_truncate", lambda H, K1: H),
            mock.patch.object(_walk, "_truncate", lambda H, K1: H[:, :K1]),
        ):
            full = walk_line(net, seg)
        assert np.array_equal(r.breaks, full.breaks) and np.array_equal(r.codes, full.codes)
        assert np.array_equal(r.output, full.output)
    real = _walk.program_degrees

    def too_low(program):
        plan = real(program)
        return dataclasses.replace(plan, after={k: min(v, 1) for k, v in plan.after.items()})

    with mock.patch.object(_walk, "program_degrees", too_low):
        with pytest.raises(AssertionError, match="above the degree bound"):
            walk_line(net, SEG2)


def test_program_pair_and_domain_checks():
    net = rc.random_mlp(2, [8], seed=0)
    a, b = np.array([-1.0, 0.0]), np.array([1.0, 0.5])
    r1 = walk_line(rc.lower(net), (a, b))
    r2 = walk_line(net, Segment(a, b))
    np.testing.assert_array_equal(r1.breaks, r2.breaks)
    np.testing.assert_allclose(r1.points([0.0, 1.0]), [a, b])
    with pytest.raises(DomainError):
        walk_line(net, ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]))
    boxed = dataclasses.replace(rc.random_transformer(2, tokens=2, d_model=4, depth=1), valid_box=((-1, -1), (1, 1)))
    walk_line(boxed, ([-1.0, -1.0], [1.0, 0.5]))
    with pytest.raises(DomainError):
        walk_line(boxed, ([-1.0, -1.0], [2.0, 0.5]))


def test_blocks_of_intervals_give_the_same_pieces(monkeypatch):
    """Ops run on blocks of intervals to bound memory; the block size must not change the answer."""
    import regioncount.engines._line._float as line  # the float walk holds the block size

    net = rc.random_transformer(2, tokens=3, d_model=6, depth=2, seed=8)
    whole = walk_line(net, SEG2)
    monkeypatch.setattr(line, "_CHUNK", 1)  # blocks of 64 intervals
    blocks = walk_line(net, SEG2)
    assert whole.activation_pieces > 64
    np.testing.assert_array_equal(whole.breaks, blocks.breaks)
    np.testing.assert_array_equal(whole.codes, blocks.codes)
    np.testing.assert_array_equal(whole.output, blocks.output)
