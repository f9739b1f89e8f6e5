"""Piecewise-linear activations (LeakyReLU, Abs, HardTanh, user breakpoints) as one op, through every engine.

Expected counts are computed independently of the engines: the regions of a line (plane) arrangement in a box
from its crossings inside the box, counted in exact rational arithmetic (Euler: regions = 1 + lines meeting the
open box + crossings strictly inside, for lines in general position with no crossing on the border)."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from regioncount import Box, Segment, count_regions
from regioncount.engines._forward import forward_codes
from regioncount.networks import (
    Affine,
    PiecewiseLinear,
    Program,
    ReLU,
    abs_op,
    hardtanh,
    leaky_relu,
    lower,
)


def _net(W, b, act, out=None):
    n = W.shape[0]
    out = np.ones((1, n)) if out is None else out
    return Program(1, W.shape[1], (Affine(W, b), act, Affine(out, np.zeros(out.shape[0]))))


def _lines(W, b, act):
    """The lines (w, c) with w.x + c = 0 that the activation's breakpoints give per unit."""
    return [(W[j], float(b[j]) - t) for j in range(W.shape[0]) for t in act.breakpoints]


def _crossings_inside(lines, lo, hi):
    """Crossings of pairs of lines strictly inside the box [lo, hi]^2, exactly (None where one is on the border
    or two lines are parallel and meet, which the closed form excludes)."""
    n = 0
    for (w1, c1), (w2, c2) in combinations(lines, 2):
        a = [[Fraction(float(v)) for v in w1], [Fraction(float(v)) for v in w2]]
        det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
        if det == 0:
            continue  # parallel: no crossing
        r1, r2 = -Fraction(c1), -Fraction(c2)
        x = (r1 * a[1][1] - a[0][1] * r2) / det
        y = (a[0][0] * r2 - r1 * a[1][0]) / det
        assert x not in (lo, hi) and y not in (lo, hi)
        n += lo < x < hi and lo < y < hi
    return n


def _lines_meeting(lines, lo, hi):
    m = 0
    for w, c in lines:
        vals = [float(w[0]) * x + float(w[1]) * y + c for x in (lo, hi) for y in (lo, hi)]
        m += min(vals) < 0 < max(vals)
    return m


def _expected(W, b, act, lo=-1.0, hi=1.0):
    ls = _lines(W, b, act)
    return 1 + _lines_meeting(ls, lo, hi) + _crossings_inside(ls, lo, hi)


def _random_layer(n, seed, d=2):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.uniform(-0.4, 0.4, n)


ACTS = {"leaky": leaky_relu(0.1), "abs": abs_op(), "hardtanh": hardtanh(-0.3, 0.3)}


def test_the_op_is_the_function_and_its_relu_form_computes_it():
    x = np.linspace(-2, 2, 41)
    assert np.array_equal(leaky_relu(0.25)(x), np.where(x > 0, x, 0.25 * x))
    assert np.array_equal(abs_op()(x), np.abs(x))
    assert np.allclose(hardtanh(-0.5, 1.0)(x), np.clip(x, -0.5, 1.0), rtol=0, atol=1e-15)
    gelu_ish = PiecewiseLinear((-1.5, -0.5, 0.5), (0.0, -0.1, 0.5, 1.0), 0.0)
    for act in (*ACTS.values(), gelu_ish, PiecewiseLinear((-1.0, 2.0), (0.5, -1.0, 3.0), 0.25)):
        W, b = _random_layer(3, 0)
        net = _net(W, b, act)
        X = np.random.default_rng(1).uniform(-1, 1, (50, 2))
        y, _, _ = forward_codes(lower(net), X)
        H = X @ W.T + b
        assert np.allclose(np.asarray(y)[:, 0], act(H).sum(axis=1), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="increase"):
        PiecewiseLinear((1.0, 0.0), (0.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="k \\+ 1 slopes"):
        PiecewiseLinear((0.0,), (1.0,))


@pytest.mark.parametrize("name", sorted(ACTS))
@pytest.mark.parametrize("n", [3, 6])
def test_one_hidden_layer_gives_its_line_arrangement_in_the_plane(name, n):
    act = ACTS[name]
    W, b = _random_layer(n, n)
    net = _net(W, b, act)
    expected = _expected(W, b, act)
    exact = count_regions(net, Box(-1, 1, 2), certify=True)
    assert exact["regions"] == expected and exact["exact"]
    assert exact["certificate"]["passed"]
    sample = count_regions(net, Box(-1, 1, 2), method="sample", grid=96)
    assert sample["regions"] <= expected


def test_all_crossings_inside_gives_the_closed_form():
    # n lines through points near the centre with distinct directions: all C(n, 2) crossings lie in the box
    n = 5
    ang = np.pi * (np.arange(n) + 0.3) / n
    W = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    b = np.linspace(-0.1, 0.1, n)
    for act in (leaky_relu(0.2), abs_op()):
        assert _crossings_inside(_lines(W, b, act), -1, 1) == n * (n - 1) // 2
        assert count_regions(_net(W, b, act), Box(-1, 1, 2))["regions"] == 1 + n + n * (n - 1) // 2


def test_hardtanh_units_give_parallel_pairs():
    n = 4
    ang = np.pi * (np.arange(n) + 0.3) / n
    W = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    b = np.linspace(-0.05, 0.05, n)
    act = hardtanh(-0.2, 0.25)
    m = 2 * n
    # 2n lines, n parallel pairs: C(2n, 2) - n crossings, all inside here (checked exactly)
    assert _crossings_inside(_lines(W, b, act), -1, 1) == m * (m - 1) // 2 - n
    assert count_regions(_net(W, b, act), Box(-1, 1, 2))["regions"] == 1 + m + m * (m - 1) // 2 - n


def test_space_planes_in_general_position():
    # m planes through points near the centre: 1 + m + C(m,2) + C(m,3) regions when every vertex is inside
    rng = np.random.default_rng(5)
    m = 5
    W = rng.normal(size=(m, 3))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    b = rng.uniform(-0.05, 0.05, m)
    # every triple's vertex inside the box (exactly: Cramer's rule in Fractions)
    for tri in combinations(range(m), 3):
        A = [[Fraction(float(v)) for v in W[i]] for i in tri]
        r = [-Fraction(float(b[i])) for i in tri]
        det = np.linalg.det(np.array(A, dtype=float))
        assert abs(det) > 1e-3
        x = np.linalg.solve(np.array(A, float), np.array(r, float))
        assert np.all(np.abs(x) < 0.9)
    closed = 1 + m + m * (m - 1) // 2 + m * (m - 1) * (m - 2) // 6
    for act in (leaky_relu(0.1), abs_op()):
        got = count_regions(_net(W, b, act), Box(-1, 1, 3))
        assert got["regions"] == closed and got["exact"]


@pytest.mark.parametrize("name", sorted(ACTS))
def test_along_a_segment_pieces_are_crossings_plus_one(name):
    act = ACTS[name]
    W, b = _random_layer(5, 11)
    p, q = np.array([-1.0, -0.7]), np.array([1.0, 0.8])
    # crossings of the segment with each line, exactly in Fractions: t = -(w.p + c) / (w.(q - p))
    hits = set()
    for w, c in _lines(W, b, act):
        wp = sum(Fraction(float(w[i])) * Fraction(float(p[i])) for i in range(2)) + Fraction(c)
        wd = sum(Fraction(float(w[i])) * (Fraction(float(q[i])) - Fraction(float(p[i]))) for i in range(2))
        if wd != 0 and 0 < -wp / wd < 1:
            hits.add(-wp / wd)
    got = count_regions(_net(W, b, act), Segment(p, q), method="line")
    assert got["regions"] == len(hits) + 1


def test_linear_regions_of_abs_and_leaky_nets_equal_regions():
    # output weights all nonzero and every unit on its own line: neighbours' maps differ in the gradient
    for act in (abs_op(), leaky_relu(0.3)):
        W, b = _random_layer(4, 2)
        got = count_regions(_net(W, b, act, out=np.array([[1.0, 2.0, -1.5, 0.75]])), Box(-1, 1, 2))
        assert got["linear_regions"] == got["regions"]
    # an affine piece of a HardTanh net whose flat pieces meet: the two saturated sides of one unit differ
    # only in the constant, so they stay separate linear regions; a ReLU with slopes (1, 1) merges everything
    W, b = _random_layer(3, 4)
    flat = PiecewiseLinear((0.0,), (1.0, 1.0))
    got = count_regions(_net(W, b, flat), Box(-1, 1, 2))
    assert got["linear_regions"] == 1 < got["regions"]


def test_whole_plane_counts_the_arrangement():
    from regioncount.engines._whole_plane import whole_plane_box

    n = 4
    ang = np.pi * (np.arange(n) + 0.3) / n
    W = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    b = np.linspace(-0.1, 0.1, n)
    res = whole_plane_box(_net(W, b, abs_op()))
    # n lines in general position: 1 + n + C(n, 2) regions of the whole plane
    assert res.partition.regions == 1 + n + n * (n - 1) // 2


def test_relu_keeps_its_own_op_and_relu_form_leaves_it():
    W, b = _random_layer(3, 0)
    net = Program(1, 2, (Affine(W, b), ReLU(), Affine(np.ones((1, 3)), np.zeros(1))))
    assert lower(net) is net


def test_onnx_leakyrelu_clip_abs_prelu_equal_the_python_network(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from regioncount import load_network

    rng = np.random.default_rng(3)
    W1, b1 = rng.normal(size=(4, 2)), rng.uniform(-0.3, 0.3, 4)
    W2, b2 = rng.normal(size=(4, 4)), rng.uniform(-0.3, 0.3, 4)
    W3, b3 = rng.normal(size=(3, 4)), rng.uniform(-0.3, 0.3, 3)
    W4 = rng.normal(size=(1, 3))
    f64 = TensorProto.DOUBLE
    inits = {
        "W1": W1, "b1": b1, "W2": W2, "b2": b2, "W3": W3, "b3": b3, "W4": W4, "b4": np.zeros(1),
        "lo": np.array(-0.4), "hi": np.array(0.5), "slope": np.array([0.2]),
    }  # fmt: skip
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h1"], transB=1),
        helper.make_node("LeakyRelu", ["h1"], ["a1"], alpha=0.125),
        helper.make_node("Gemm", ["a1", "W2", "b2"], ["h2"], transB=1),
        helper.make_node("Clip", ["h2", "lo", "hi"], ["a2"]),
        helper.make_node("Gemm", ["a2", "W3", "b3"], ["h3"], transB=1),
        helper.make_node("Abs", ["h3"], ["a3"]),
        helper.make_node("PRelu", ["a3", "slope"], ["a4"]),
        helper.make_node("Gemm", ["a4", "W4", "b4"], ["y"], transB=1),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f64, ["N", 2])],
        [helper.make_tensor_value_info("y", f64, None)],
        initializer=[numpy_helper.from_array(np.asarray(v, np.float64), k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "pwl.onnx"
    onnx.save(m, str(path))
    net = load_network(path)
    py = Program(
        1,
        2,
        (
            Affine(W1, b1), leaky_relu(0.125), Affine(W2, b2), hardtanh(-0.4, 0.5),
            Affine(W3, b3), abs_op(), leaky_relu(0.2), Affine(W4, np.zeros(1)),
        ),
    )  # fmt: skip
    X = rng.uniform(-1, 1, (64, 2))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    y_ort = sess.run(None, {"x": X})[0]
    y_file, _, _ = forward_codes(lower(net), X)
    y_py, _, _ = forward_codes(lower(py), X)
    assert np.allclose(np.asarray(y_file), y_ort, rtol=1e-12, atol=1e-12)
    assert np.allclose(np.asarray(y_py), y_ort, rtol=1e-12, atol=1e-12)
    a = count_regions(net, Box(-1, 1, 2), certify=True)
    b = count_regions(py, Box(-1, 1, 2))
    assert a["regions"] == b["regions"] and a["linear_regions"] == b["linear_regions"]
    assert a["certificate"]["passed"] and a["exact"]
    sample = count_regions(py, Box(-1, 1, 2), method="sample", grid=64)
    assert sample["regions"] <= b["regions"]


def _cli(capsys, *argv):
    from regioncount_cli.main import main

    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["leaky_relu:0.1", "abs", "hardtanh:-0.3,0.3"])
def test_count_activation_on_a_state_dict(capsys, tmp_path, name):
    import json

    from regioncount.networks import parse_activation

    W, b = _random_layer(4, 7)
    path = tmp_path / "sd.npz"
    np.savez(path, **{"0.weight": W, "0.bias": b, "2.weight": np.ones((1, 4)), "2.bias": np.zeros(1)})
    act = parse_activation(name)
    code, out, err = _cli(capsys, "count", str(path), "--activation", name, "--json", "--certify")
    assert code == 0, err
    res = json.loads(out)
    assert res["activation"] == name
    assert res["regions"] == _expected(W, b, act) and res["certificate"]["passed"]
    code, out, err = _cli(capsys, "count", str(path), "--activation", name, "--json", "--whole-plane")
    assert code == 0, err
    assert json.loads(out)["regions"] >= res["regions"]
    code, _, err = _cli(capsys, "count", str(path), "--activation", "tanh")
    assert code == 2 and "unknown activation" in err
