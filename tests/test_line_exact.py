"""The line engine decides every predicate for the float64 network as given (issue 16): no length
threshold, exact rational arithmetic where the float bound cannot decide, a clear error on overflow."""

import dataclasses
import json
from fractions import Fraction

import numpy as np
import pytest

import regioncount as rc
from regioncount.engines._forward import forward_codes
from regioncount.engines._line import FloatRangeError, walk_line
from regioncount.networks import Affine, Program, ReLU, Residual
from regioncount_cli.main import main

NETS = {
    "mlp_torch": lambda: rc.random_mlp(2, [16, 16, 16], seed=0),
    "mlp_normal": lambda: rc.random_mlp(2, [16, 16, 16], seed=1, init="normal"),
    "maxout3": lambda: rc.random_maxout(2, [8, 8], k=3, seed=2),
}


def forward(net, X):
    _, C, _ = forward_codes(rc.lower(net), np.asarray(X))
    return np.asarray(C)


def one_layer(w, b) -> rc.MLP:
    w, b = np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return rc.MLP((w[:, None], np.ones((1, w.size))), (b, np.zeros(1)))


@pytest.mark.parametrize("name", list(NETS))
def test_pieces_never_fall_as_the_segment_grows(name):
    """Nested segments c -/+ 2^e v on one exact line (dyadic c, v: every end point is exact): a piece of
    a shorter segment is met by every longer one, so the count never falls, and the shorter segment's
    codes are a contiguous run of the longer one's (a ReLU/Maxout region is convex: the line meets it
    once). Up to 2^40, where pieces near the centre are far below float resolution in t (the engine
    before issue 16 lost 1 to 10 pieces here)."""
    net = NETS[name]()
    c, v = np.array([0.25, -0.125]), np.array([1.0, 0.75])
    prev = None
    counts = []
    for e in range(0, 41, 5):
        r = walk_line(net, (c - 2.0**e * v, c + 2.0**e * v))
        assert r.exact
        assert np.all(np.diff(r.breaks) >= 0) and r.breaks[0] == 0.0 and r.breaks[-1] == 1.0
        counts.append(r.activation_pieces)
        if prev is not None:
            big = [tuple(x) for x in r.codes]
            small = [tuple(x) for x in prev.codes]
            starts = [i for i in range(len(big) - len(small) + 1) if big[i] == small[0]]
            assert any(big[i : i + len(small)] == small for i in starts)
        prev = r
    assert counts == sorted(counts) and counts[-1] > counts[0]


@pytest.mark.parametrize("name", list(NETS))
def test_a_function_preserving_rescale_gives_the_same_pieces(name):
    """Hidden layer 1's weights and bias x 2^-900, layer 2's weights x 2^900: the same function, and
    (powers of two are exact) the same pieces, codes and breaks. With x 1e-300 / x 1e300, which round,
    the same pieces and codes."""
    net = NETS[name]()
    seg = ([-3.0, -2.0], [3.0, 2.5])
    ref = walk_line(net, seg)
    for down, up in ((2.0**-900, 2.0**900), (1e-300, 1e300)):
        ws, bs = list(net.weights), list(net.biases)
        ws[0], bs[0], ws[1] = ws[0] * down, bs[0] * down, ws[1] * up
        scaled = dataclasses.replace(net, weights=tuple(ws), biases=tuple(bs))
        r = walk_line(scaled, seg)
        assert r.activation_pieces == ref.activation_pieces
        np.testing.assert_array_equal(r.codes, ref.codes)
        if down == 2.0**-900:
            np.testing.assert_array_equal(r.breaks, ref.breaks)
        else:
            np.testing.assert_allclose(r.breaks, ref.breaks, atol=1e-12)


def test_overflow_stops_with_a_clear_error(capsys, tmp_path):
    """All weights x 1e300: layer 2's pre-activations are ~1e600. No number comes out, but an error
    that says why; from the CLI, one line and exit status 1."""
    net = rc.random_mlp(2, [16, 16], seed=3)
    big = dataclasses.replace(net, weights=tuple(w * 1e300 for w in net.weights))
    with pytest.raises(FloatRangeError, match="overflow"):
        walk_line(big, ([-1.0, -1.0], [1.0, 1.0]))
    path = tmp_path / "big.npz"
    rc.save_model(big, path)
    code = main(["count", str(path), "--method", "line", "--box", "-1", "1"])
    out, err = capsys.readouterr()
    assert code == 1 and len(err.strip().splitlines()) == 1 and "overflow" in err and not out


def test_underflow_is_decided_exactly():
    """Subnormal weights and biases (the float64 network as given): products underflow, the float
    bound cannot decide, exact arithmetic does. Roots -b/w as exact rationals give the pieces."""
    tiny = 2.0**-1070
    w = np.array([3.0, -5.0, 7.0, 1.0, 2.0]) * tiny  # exact multiples of the smallest subnormals
    b = np.array([-1.0, 2.0, -6.0, -0.5, -1.0]) * tiny  # roots 1/3, 2/5, 6/7 and 1/2 twice
    net = one_layer(w, b)
    r = walk_line(net, ([0.0], [1.0]))
    roots = sorted({Fraction(-bb) / Fraction(ww) for ww, bb in zip(w, b)})
    assert r.activation_pieces == 1 + len([x for x in roots if 0 < x < 1]) == 5
    np.testing.assert_allclose(r.breaks[1:-1], [float(x) for x in roots], rtol=1e-15)
    assert r.exact_predicates > 0
    mids = (r.breaks[1:] + r.breaks[:-1]) / 2
    exact_bits = [[int(Fraction(ww) * Fraction(t) + Fraction(bb) > 0) for ww, bb in zip(w, b)] for t in mids]
    np.testing.assert_array_equal(r.codes, exact_bits)


def test_pieces_one_ulp_long_are_kept():
    """Roots at 0.3 and at the next float above it: the piece between them holds no float but is real."""
    t0 = 0.3
    t1 = np.nextafter(t0, 1.0)
    r = walk_line(one_layer([1.0, 1.0], [-t0, -t1]), ([0.0], [1.0]))
    assert r.activation_pieces == 3
    np.testing.assert_array_equal(r.codes, [[0, 0], [1, 0], [1, 1]])
    np.testing.assert_array_equal(r.breaks, [0.0, t0, t1, 1.0])


def test_concurrent_units_meet_in_one_break_and_the_fallback_is_counted():
    """Four units of layer 1 vanish at exactly t = 1/4 (dyadic: every float is exact), two deep units
    are built to vanish there too: one break, settled in exact arithmetic and reported."""
    W1 = np.array([[1.0], [2.0], [-4.0], [0.5]])
    b1 = np.array([-0.25, -0.5, 1.0, -0.125])
    W2 = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0]])  # on [1/4, 1]: 3 t - 3/4; on [0, 1/4]: 1/4 - t
    net = rc.MLP((W1, W2, np.ones((1, 2))), (b1, np.zeros(2), np.zeros(1)))
    r = walk_line(net, ([0.0], [1.0]))
    assert r.activation_pieces == 2
    np.testing.assert_array_equal(r.breaks, [0.0, 0.25, 1.0])
    assert r.exact_predicates > 0 and r.predicates > r.exact_predicates
    np.testing.assert_array_equal(forward(net, [[0.1], [0.6]]), r.codes)


def test_maxout_exact_ties_add_no_piece_and_go_to_the_first_index():
    """A rank-3 maxout unit whose pieces 0 and 2 are the same affine map (an exact tie everywhere) and
    piece 1 crosses them at t = 1/2: two pieces, the tie going to index 0 as in ``argmax``."""
    W = np.array([[[1.0]], [[-1.0]], [[1.0]]])  # (k, 1, 1)
    b = np.array([[-0.25], [0.75], [-0.25]])
    net = rc.Maxout((W,), (b,), np.ones((1, 1)), np.zeros(1))
    r = walk_line(net, ([0.0], [1.0]))
    assert r.activation_pieces == 2
    np.testing.assert_array_equal(r.breaks, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(r.codes, [[1], [0]])
    np.testing.assert_array_equal(forward(net, [[0.2], [0.8]]), r.codes)


@pytest.mark.parametrize("name", list(NETS))
def test_random_networks_agree_with_forward_and_report_their_predicates(name):
    """Codes inside every piece (at its midpoint, where the piece is wider than float resolution) equal
    the forward pass's; the result reports how many predicates it decided and how many exactly."""
    net = NETS[name]()
    r = walk_line(net, ([-4.0, -3.0], [5.0, 2.0]))
    wide = np.flatnonzero(np.diff(r.breaks) > 1e-9)
    mids = (r.breaks[wide] + r.breaks[wide + 1]) / 2
    np.testing.assert_array_equal(forward(net, r.points(mids)), r.codes[wide])
    assert r.exact and r.predicates > 0 and 0 <= r.exact_predicates <= r.predicates


def test_attention_results_say_they_are_not_exact():
    """The hardmax / ReLU-attention walk still decides with tolerances: it says so."""
    r = walk_line(rc.random_transformer(2, tokens=2, d_model=4, depth=1, seed=0), ([-1.0, -1.0], [1.0, 1.0]))
    assert not r.exact


def test_blocks_of_intervals_give_the_same_exact_pieces(monkeypatch):
    """Ops run on blocks of intervals to bound memory; the block size must not change the exact walk."""
    import regioncount.engines._line as line

    net = rc.random_maxout(2, [32, 32], k=3, seed=5)
    seg = ([-20.0, -15.0], [20.0, 18.0])
    whole = walk_line(net, seg)
    monkeypatch.setattr(line, "_CHUNK", 1)  # blocks of 64 intervals
    blocks = walk_line(net, seg)
    assert whole.activation_pieces > 64
    np.testing.assert_array_equal(whole.breaks, blocks.breaks)
    np.testing.assert_array_equal(whole.codes, blocks.codes)


def test_residual_programs_replay_exactly():
    """A residual block whose inner units vanish exactly where outer ones do (t = 1/4, 1/2 and 3/4 are
    dyadic): the coincidences need the exact replay through the residual, and the pieces match forward."""
    W1 = np.array([[4.0], [-4.0], [2.0]])
    b1 = np.array([-1.0, 3.0, -1.0])  # roots 1/4, 3/4, 1/2
    inner = (ReLU(), Affine(np.array([[1.0, 0.0, -2.0], [0.0, 1.0, 2.0], [1.0, 1.0, 0.0]]), np.zeros(3)))
    prog = Program(
        tokens=1,
        input_dim=1,
        ops=(Affine(W1, b1), ReLU(), Residual(inner), Affine(np.array([[1.0, -1.0, 0.5]]), np.array([0.0])), ReLU()),
    )
    r = walk_line(prog, ([0.0], [1.0]))
    assert r.exact and r.exact_predicates > 0
    mids = (r.breaks[1:] + r.breaks[:-1]) / 2
    np.testing.assert_array_equal(forward(prog, mids[:, None]), r.codes)
    t = np.linspace(0.0, 1.0, 4001)
    runs = 1 + np.count_nonzero(np.any(np.diff(forward(prog, t[:, None]), axis=0) != 0, axis=1))
    assert runs == r.activation_pieces


def test_cli_line_json_reports_the_predicates(capsys, tmp_path):
    path = tmp_path / "mlp.npz"
    rc.save_model(rc.random_mlp(2, [8, 8], seed=3), path)
    code = main(["count", str(path), "--method", "line", "--box", "-2", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert res["exact"] is True and res["predicates"] > 0 and 0 <= res["exact_predicates"] <= res["predicates"]
    r = walk_line(rc.random_mlp(2, [8, 8], seed=3), ([-2.0, -2.0], [2.0, 2.0]))
    assert res["regions"] == r.activation_pieces and res["predicates"] == r.predicates
