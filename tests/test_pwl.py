"""Piecewise-linear activations (LeakyReLU, Abs, HardTanh, user breakpoints) as one op, through every engine.

Expected counts are computed independently of the engines: the regions of a line (plane) arrangement in a box
from its crossings inside the box, counted in exact rational arithmetic (Euler: regions = 1 + lines meeting the
open box + crossings strictly inside, for lines in general position with no crossing on the border)."""

import math
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


# -- the recorded code is the piece index per entry (issue 20) --------------------------------------------------


def _pieces_at(W, b, act, X):
    """The pieces of the one hidden layer at points X, from the op's own definition (no engine)."""
    return act.piece(np.asarray(X) @ W.T + b)


GELU = PiecewiseLinear.interpolating(
    lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))), (-1.5, -0.75, -0.25, 0.25, 0.75), 0.0, 1.0
)
SILU = PiecewiseLinear.interpolating(lambda x: x / (1 + math.exp(-x)), (-0.6, -0.2, 0.3, 0.7), 0.0, 1.0)
FNS = {GELU: lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))), SILU: lambda x: x / (1 + math.exp(-x))}


def test_the_op_states_its_code_facts():
    from regioncount.networks._ops import code_length, max_code_digit

    for act in (leaky_relu(0.1), hardtanh(-0.3, 0.3), GELU):
        W, b = _random_layer(3, 0)
        net = _net(W, b, act)
        assert act.records == "piece" and act.digit_max(1) == act.k == len(act.breakpoints)
        assert code_length(net) == 3 and max_code_digit(net) == max(1, act.k)
        form = lower(net)
        assert code_length(form) == 3 * act.units and form.code_map is not None
        assert form.code_map.op_length == 3 and form.code_map.form_length == code_length(form)
    relu = Program(1, 2, (Affine(np.eye(2), np.zeros(2)), ReLU()))
    assert lower(relu).code_map is None


@pytest.mark.parametrize("act", [leaky_relu(0.1), abs_op(), hardtanh(-0.3, 0.3), GELU], ids=str)
def test_every_engine_records_the_piece_per_unit(act):
    from regioncount import partition_plane, walk_line
    from regioncount.engines._space import partition_space
    from regioncount.networks import form_codes

    W, b = _random_layer(4, 3)
    net = _net(W, b, act)
    box = Box(-1, 1, 2)
    part = partition_plane(net, box)
    rc = part.region_codes
    assert rc.shape == (part.regions, 4) and rc.min() >= 0 and rc.max() <= act.k
    # the piece of every unit at each region's centroid, from the op itself
    assert np.array_equal(rc, _pieces_at(W, b, act, part.witnesses))
    assert np.unique(rc, axis=0).shape[0] == part.regions
    # the engine's own code (the ReLU form's bits) is the form code of the pieces, row by row
    assert np.array_equal(form_codes(lower(net), rc), part.codes)
    # the line engine: pieces at each piece's midpoint
    seg = Segment([-1.0, -0.6], [1.0, 0.9])
    lp = walk_line(net, seg)
    assert lp.codes.shape[1] == 4
    assert np.array_equal(lp.codes, _pieces_at(W, b, act, lp.points(lp.witnesses[:, 0])))
    # the sampled count counts distinct pieces: on a grid away from the lines it is the regions met
    grid = count_regions(net, box, method="sample", grid=64)
    X = np.stack(np.meshgrid(*(2 * [-1 + (np.arange(64) + 0.5) / 32]), indexing="xy"), -1).reshape(-1, 2)
    assert grid["regions"] == np.unique(_pieces_at(W, b, act, X), axis=0).shape[0]
    # the space engine, on the same layer in R^3
    W3, b3 = _random_layer(3, 4, d=3)
    poly = partition_space(_net(W3, b3, act), Box(-1, 1, 3))
    assert np.array_equal(poly.region_codes, _pieces_at(W3, b3, act, poly.witnesses))


def test_relu_codes_are_the_engines_codes():
    from regioncount import partition_plane, walk_line

    W, b = _random_layer(4, 3)
    net = Program(1, 2, (Affine(W, b), ReLU(), Affine(np.ones((1, 4)), np.zeros(1))))
    part = partition_plane(net, Box(-1, 1, 2))
    assert part.region_codes is part.codes
    lp = walk_line(net, Segment([-1.0, -1.0], [1.0, 1.0]))
    assert np.array_equal(lp.codes, (lp.points(lp.witnesses[:, 0]) @ W.T + b > 0).astype(np.int32))


def test_whole_plane_and_certificate_on_pieces():
    from regioncount.engines._whole_plane import whole_plane_box

    W, b = _random_layer(4, 8)
    res = whole_plane_box(_net(W, b, hardtanh(-0.3, 0.2)))
    rc = res.partition.region_codes
    assert rc.shape[1] == 4 and rc.max() <= 2
    assert np.unique(rc, axis=0).shape[0] == res.partition.regions


@pytest.mark.parametrize("act", [GELU, SILU], ids=["gelu", "silu"])
@pytest.mark.parametrize("n", [2, 4])
def test_a_users_approximation_gives_its_nk_line_arrangement(act, n):
    # n units with k breakpoints each: n*k lines (k parallel ones per unit), counted from exact crossings
    fn = FNS[act]
    # it interpolates the function at its breakpoints, continuously, with the outer slopes given
    bp = np.asarray(act.breakpoints)
    assert np.allclose(act(bp), [fn(v) for v in bp], rtol=0, atol=1e-15)
    assert np.allclose(act(bp - 1e-9), act(bp + 1e-9), rtol=0, atol=1e-8)
    assert act.slopes[0] == 0.0 and act.slopes[-1] == 1.0 and act.k == len(bp)
    W, b = _random_layer(n, 20 + n)
    W = W * 0.6
    net = _net(W, b, act)
    assert len(_lines(W, b, act)) == n * act.k
    expected = _expected(W, b, act)
    got = count_regions(net, Box(-1, 1, 2), certify=True)
    assert got["regions"] == expected and got["exact"] and got["certificate"]["passed"]
    seg = count_regions(net, Segment([-1.0, -0.3], [1.0, 0.4]))
    assert seg["regions"] >= 1


def _pwl_transformer(act, seed, depth=2):
    from regioncount import random_transformer
    from regioncount.networks import with_activation

    return with_activation(random_transformer(tokens=2, d_model=4, depth=depth, seed=seed), act)


@pytest.mark.parametrize("act", [leaky_relu(0.2), hardtanh(-0.5, 0.5)], ids=["leaky", "hardtanh"])
def test_curved_engine_on_a_hardmax_transformer_with_a_piecewise_block(act):
    from regioncount import walk_line
    from regioncount.engines._curved import partition_curved

    net = _pwl_transformer(act, seed=3)
    ops = [op for op, _, _ in __import__("regioncount").networks.walk_widths(net)]
    assert any(op is act for op in ops)
    cells = partition_curved(net, Box(-1, 1, 2), certified=False)
    cc = cells.region_codes
    T = net.tokens
    assert cc.max() <= act.k and cc.shape[1] == __import__("regioncount").networks.code_length(net)
    assert abs(cells.cell_area.sum() - 4.0) < 1e-9
    # along random segments the line engine's pieces are the cells crossed, with the same (piece) codes
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        lp = walk_line(net, Segment(a, b))
        lo, hi = lp.breaks[:-1], lp.breaks[1:]
        keep = hi - lo > 1e-9
        t = lo[keep, None] + np.linspace(0.05, 0.95, 7)[None, :] * (hi - lo)[keep, None]
        where = cells.locate(lp.points(t).reshape(-1, 2)).reshape(t.shape)
        assert np.all(where == where[:, :1]), "a cell boundary inside a line piece"
        assert np.array_equal(cc[where[:, 0]], lp.codes[keep])
    # a sampled count is a lower bound on the cells
    low = count_regions(net, Box(-1, 1, 2), method="sample", grid=200)
    assert low["regions"] <= cells.n_codes <= cells.regions
    assert T == 2


def test_torch_modules_with_piecewise_activations():
    torch = pytest.importorskip("torch", reason="torch is optional (pip install torch); the torch loader is untested")
    from regioncount import from_torch

    torch.manual_seed(0)
    prelu = torch.nn.PReLU(num_parameters=1, init=0.3)
    module = torch.nn.Sequential(
        torch.nn.Linear(2, 4), torch.nn.LeakyReLU(0.1), torch.nn.Linear(4, 3), torch.nn.Hardtanh(-0.5, 0.4),
        torch.nn.Linear(3, 3), prelu, torch.nn.Linear(3, 1),
    ).double()  # fmt: skip
    net = from_torch(module, (2,))
    X = np.random.default_rng(0).uniform(-1, 1, (64, 2))
    with torch.no_grad():
        y_t = module(torch.from_numpy(X)).numpy()
    y, _, _ = forward_codes(lower(net), X)
    assert np.allclose(np.asarray(y), y_t, rtol=1e-12, atol=1e-12)
    got = count_regions(net, Box(-1, 1, 2), certify=True)
    assert got["exact"] and got["certificate"]["passed"]
    assert count_regions(net, Box(-1, 1, 2), method="sample", grid=128)["regions"] <= got["regions"]
    # the same network from ops: same regions
    L = [m for m in module if isinstance(m, torch.nn.Linear)]
    Wb = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in L]
    py = Program(1, 2, (
        Affine(*Wb[0]), leaky_relu(0.1), Affine(*Wb[1]), hardtanh(-0.5, 0.4),
        Affine(*Wb[2]), leaky_relu(float(prelu.weight.item())), Affine(*Wb[3]),
    ))  # fmt: skip
    ref = count_regions(py, Box(-1, 1, 2))
    assert (ref["regions"], ref["linear_regions"]) == (got["regions"], got["linear_regions"])


@pytest.mark.parametrize("act", [leaky_relu(0.2), hardtanh(-0.5, 0.5)], ids=["leaky", "hardtanh"])
def test_certified_curved_engine_records_the_same_pieces(act):
    pytest.importorskip("flint", reason="the certified curved engine needs python-flint (the exact extra)")
    from regioncount.engines._curved import partition_curved

    net = _pwl_transformer(act, seed=3)
    c = partition_curved(net, Box(-1, 1, 2), certified=True)
    f = partition_curved(net, Box(-1, 1, 2), certified=False)
    assert c.exact and (c.regions, c.n_codes) == (f.regions, f.n_codes)
    key = lambda a: {bytes(r) for r in np.asarray(a, np.int64)}  # noqa: E731
    assert key(c.region_codes) == key(f.region_codes)
    assert c.region_codes.max() == act.k  # a piece index, not a ReLU bit
