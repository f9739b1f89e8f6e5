"""ONNX graphs read by regioncount reproduce onnxruntime on random inputs, node type by node type; the CLI reads
ONNX, safetensors and slices through data points, counts decision regions, and turns bad input into one line."""

from pathlib import Path

import numpy as np
import pytest

from regioncount import ModelFileError, forward_codes, load_network, partition_plane
from regioncount._decide import count_decisions
from regioncount._domain import slice_through

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def make_model(nodes, inits, in_shape, out_name="y", dtype=np.float32, batch="N", opset=17):
    """An ONNX model with one input ``x`` of shape ``[batch, *in_shape]`` and one output ``out_name``."""
    et = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", et, [batch, *in_shape])
    y = helper.make_tensor_value_info(out_name, et, None)
    init = [
        numpy_helper.from_array(np.asarray(v, dtype=dtype if np.asarray(v).dtype.kind == "f" else None), k)
        for k, v in inits.items()
    ]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def save(model, tmp_path, name="m.onnx") -> Path:
    p = tmp_path / name
    onnx.save(model, str(p))
    return p


def ort_run(path, X):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": X})[0]


def ours(path, X):
    net = load_network(path)
    Y, _, _ = forward_codes(net.lower(), np.asarray(X, dtype=np.float64).reshape(len(X), -1))
    return np.asarray(Y), net


def rng_w(rng, *shape, scale=0.5):
    return (rng.normal(size=shape) * scale).astype(np.float64)


def cases(rng):
    """(name, nodes, initializers, input shape) covering every supported node type."""
    out = []
    out.append(
        (
            "gemm_relu",
            [
                helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1, alpha=0.7, beta=1.3, name="fc1"),
                helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Gemm", ["r", "W2"], ["y"], name="fc2"),
            ],
            {"W1": rng_w(rng, 6, 5), "b1": rng_w(rng, 6), "W2": rng_w(rng, 6, 3)},
            (5,),
        )
    )
    out.append(
        (
            "matmul_add",
            [
                helper.make_node("MatMul", ["x", "A"], ["h"]),
                helper.make_node("Add", ["h", "c"], ["h2"]),
                helper.make_node("Relu", ["h2"], ["r"]),
                helper.make_node("MatMul", ["r", "B"], ["y"]),
            ],
            {"A": rng_w(rng, 4, 7), "c": rng_w(rng, 7), "B": rng_w(rng, 7, 2)},
            (4,),
        )
    )
    out.append(
        (
            "maxout_max",
            [
                helper.make_node("Gemm", ["x", "Wa", "ba"], ["a"], transB=1),
                helper.make_node("Gemm", ["x", "Wb", "bb"], ["b"], transB=1),
                helper.make_node("Gemm", ["x", "Wc", "bc"], ["c"], transB=1),
                helper.make_node("Max", ["a", "b", "c"], ["m"]),
                helper.make_node("Gemm", ["m", "Wo"], ["y"], transB=1),
            ],
            {
                **{f"W{k}": rng_w(rng, 5, 3) for k in "abc"},
                **{f"b{k}": rng_w(rng, 5) for k in "abc"},
                "Wo": rng_w(rng, 2, 5),
            },
            (3,),
        )
    )
    out.append(
        (
            "residual_add",
            [
                helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
                helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Gemm", ["r", "W2", "b2"], ["f"], transB=1),
                helper.make_node("Add", ["x", "f"], ["s"]),
                helper.make_node("Relu", ["s"], ["y"]),
            ],
            {"W1": rng_w(rng, 8, 4), "b1": rng_w(rng, 8), "W2": rng_w(rng, 4, 8), "b2": rng_w(rng, 4)},
            (4,),
        )
    )
    out.append(
        (
            "reshape_flatten",
            [
                helper.make_node("Reshape", ["x", "shape"], ["h"]),
                helper.make_node("MatMul", ["h", "A"], ["m"]),
                helper.make_node("Flatten", ["m"], ["y"], axis=1),
            ],
            {"shape": np.array([-1, 3, 4], np.int64), "A": rng_w(rng, 4, 2)},
            (2, 6),
        )
    )
    out.append(
        (
            "constant_identity",  # data-carrying nodes: a Constant shape for Reshape, an Identity
            [
                helper.make_node(
                    "Constant", [], ["shape"], value=numpy_helper.from_array(np.array([-1, 12], np.int64))
                ),
                helper.make_node("Reshape", ["x", "shape"], ["h"]),
                helper.make_node("Identity", ["h"], ["i"]),
                helper.make_node("Gemm", ["i", "W"], ["y"], transB=1),
            ],
            {"W": rng_w(rng, 3, 12)},
            (3, 4),
        )
    )
    out.append(
        (
            "conv",
            [
                helper.make_node(
                    "Conv", ["x", "K", "kb"], ["c"], strides=[2, 1], pads=[1, 0, 1, 2], dilations=[1, 2], group=2
                ),
                helper.make_node("Relu", ["c"], ["r"]),
                helper.make_node("Flatten", ["r"], ["y"]),
            ],
            {"K": rng_w(rng, 4, 1, 3, 2), "kb": rng_w(rng, 4)},
            (2, 7, 6),
        )
    )
    out.append(
        (
            "maxpool",
            [
                helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]),
                helper.make_node("Flatten", ["p"], ["y"]),
            ],
            {},
            (2, 7, 5),
        )
    )
    out.append(
        (
            "pools_ceil_mode",
            [
                helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
                helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
                helper.make_node("Flatten", ["a"], ["y"]),
            ],
            {},
            (2, 7, 6),
        )
    )
    for include in (0, 1):
        out.append(
            (
                f"avgpool_pad{include}",
                [
                    helper.make_node(
                        "AveragePool",
                        ["x"],
                        ["p"],
                        kernel_shape=[2, 3],
                        strides=[2, 2],
                        pads=[1, 1, 0, 1],
                        count_include_pad=include,
                    ),
                    helper.make_node("Flatten", ["p"], ["y"]),
                ],
                {},
                (2, 6, 7),
            )
        )
    out.append(
        (
            "batchnorm",
            [
                helper.make_node("Conv", ["x", "K"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], epsilon=1e-3),
                helper.make_node("Relu", ["n"], ["r"]),
                helper.make_node("Flatten", ["r"], ["y"]),
            ],
            {
                "K": rng_w(rng, 3, 2, 3, 3),
                "g": rng_w(rng, 3),
                "be": rng_w(rng, 3),
                "mu": rng_w(rng, 3),
                "var": rng.uniform(0.5, 2.0, 3),
            },
            (2, 5, 5),
        )
    )
    return out


CASES = cases(np.random.default_rng(0))
#: Node types onnxruntime's CPU provider computes in float64 (it has no float64 Conv or AveragePool).
F64 = {"constant_identity", "gemm_relu", "matmul_add", "maxout_max", "residual_add", "reshape_flatten", "maxpool"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_onnxruntime_float32(case, tmp_path):
    name, nodes, inits, shape = case
    p = save(make_model(nodes, inits, shape), tmp_path)
    X = np.random.default_rng(1).normal(size=(16, *shape)).astype(np.float32)
    want = ort_run(p, X).reshape(16, -1)
    got, net = ours(p, X)
    assert net.input_shape == shape
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * scale)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in F64], ids=[c[0] for c in CASES if c[0] in F64])
def test_matches_onnxruntime_float64(case, tmp_path):
    name, nodes, inits, shape = case
    p = save(make_model(nodes, inits, shape, dtype=np.float64), tmp_path)
    X = np.random.default_rng(2).normal(size=(16, *shape))
    want = ort_run(p, X).reshape(16, -1)
    got, _ = ours(p, X)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in F64], ids=[c[0] for c in CASES if c[0] not in F64])
def test_onnxruntime_has_no_float64_for_the_rest(case, tmp_path):
    """The float32-only cases are float32-only because onnxruntime refuses them in float64 (if it learns them,
    they move into F64 and get the 1e-12 test)."""
    name, nodes, inits, shape = case
    p = save(make_model(nodes, inits, shape, dtype=np.float64), tmp_path)
    with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
        ort_run(p, np.zeros((1, *shape)))


def test_batchnorm_float64(tmp_path):
    """Batch norm after a Gemm in float64 (onnxruntime computes both in float64)."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Gemm", ["x", "W"], ["h"], transB=1),
        helper.make_node("BatchNormalization", ["h", "g", "be", "mu", "var"], ["y"], epsilon=1e-4),
    ]
    inits = {
        "W": rng_w(rng, 4, 3),
        "g": rng_w(rng, 4),
        "be": rng_w(rng, 4),
        "mu": rng_w(rng, 4),
        "var": rng.uniform(0.5, 2, 4),
    }
    p = save(make_model(nodes, inits, (3,), dtype=np.float64), tmp_path)
    X = rng.normal(size=(10, 3))
    got, net = ours(p, X)
    assert len(net.ops) == 1  # folded into the Gemm
    np.testing.assert_allclose(got, ort_run(p, X), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------
# a small ONNX CNN end to end


def small_cnn_model(rng, opset=17):
    nodes = [
        helper.make_node("Conv", ["x", "K", "kb"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "W1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "W2", "b2"], ["y"], transB=1),
    ]
    inits = {
        "K": rng_w(rng, 2, 1, 3, 3, scale=0.6),
        "kb": rng_w(rng, 2, scale=0.1),
        "W1": rng_w(rng, 6, 8),
        "b1": rng_w(rng, 6, scale=0.1),
        "W2": rng_w(rng, 3, 6, scale=1.0),
        "b2": rng_w(rng, 3, scale=0.1),
    }
    return make_model(nodes, inits, (1, 4, 4))


@pytest.fixture
def cnn_files(tmp_path):
    rng = np.random.default_rng(4)  # three classes meet on the slice
    p = save(small_cnn_model(rng), tmp_path, "cnn.onnx")
    pts = []
    for i in range(3):
        q = tmp_path / f"img{i}.npy"
        np.save(q, rng.normal(size=(1, 4, 4)))
        pts.append(q)
    return p, pts


@pytest.fixture
def cli(capsys):
    """Run the CLI in process (as the console script does) -> (exit code, stdout, stderr)."""
    from regioncount_cli.main import main

    def call(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.mark.slow  # 4 s
def test_cli_count_decision_through_points(cnn_files, tmp_path, cli):
    import json

    p, pts = cnn_files
    code, out, err = cli("count", p, "--through", *pts, "--decision", "--json")
    assert code == 0, err
    res = json.loads(out)
    net = load_network(p)
    dom = slice_through(np.stack([np.load(q).ravel() for q in pts]))[0]
    lib = count_decisions(net, dom)
    for key in ("regions", "linear_regions", "decision_regions", "decision_cells"):
        assert res[key] == lib[key]
    assert res["exact"] is True
    # decision regions a second way: connected components (networkx) of neighbouring decision cells that
    # predict one class; and the decision cells refine the activation regions (each code extends a region's)
    import networkx as nx

    from regioncount._decide import decision_partitions

    base, dec, cls = decision_partitions(net, dom)
    G = nx.Graph()
    G.add_nodes_from(range(dec.n_regions))
    G.add_edges_from((int(a), int(b)) for a, b in dec.adjacency() if cls[a] == cls[b])
    assert nx.number_connected_components(G) == res["decision_regions"] and dec.n_regions == res["decision_cells"]
    prefixes = {r.tobytes() for r in np.asarray(dec.codes[:, : base.code_length], np.int32)}
    assert prefixes == {r.tobytes() for r in np.asarray(base.codes, np.int32)}
    assert partition_plane(net, dom).n_regions == res["regions"]
    png = tmp_path / "d.png"
    code, _, err = cli("plot", p, "--through", *pts, "--decision", "--out", png)
    assert code == 0, err
    info = json.loads(png.with_suffix(".json").read_text())
    assert len(res["classes"]) == 3
    assert info["decision_regions"] == res["decision_regions"] and info["decision_boundary_segments"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def one_line_error(r, *needles):
    code, _, err = r
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("regioncount: error: ") and "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def test_cli_bad_input_is_one_line(cnn_files, tmp_path, cli):
    p, pts = cnn_files
    # an unsupported node, named
    bad = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="squash")], {}, (3,))
    one_line_error(cli("count", save(bad, tmp_path, "sig.onnx"), "--box", "-1", "1"), "squash", "Sigmoid")
    # corrupt files
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07this is not a protobuf \xff\xfe" * 5)
    one_line_error(cli("count", junk), "junk.onnx")
    st = tmp_path / "junk.safetensors"
    st.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    one_line_error(cli("count", st), "junk.safetensors")
    # a graph input whose shape is not known
    unk = make_model([helper.make_node("Relu", ["x"], ["y"])], {}, ("H",))
    one_line_error(cli("count", save(unk, tmp_path, "unk.onnx")), "not fully known")
    # a graph whose weights do not fit its input shape
    misfit = make_model(
        [helper.make_node("Gemm", ["x", "W"], ["y"], transB=1, name="fc")], {"W": np.ones((2, 7))}, (5,)
    )
    one_line_error(cli("count", save(misfit, tmp_path, "misfit.onnx")), "'fc' (Gemm)", "does not fit input shape (5,)")
    # a slice in the wrong dimension for the model
    one_line_error(cli("count", p, "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,0"), "R^3", "16 inputs")
    # points of the wrong shape
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((5, 5)))
    one_line_error(cli("count", p, "--through", pts[0], pts[1], wrong), "wrong.npy", "(1, 4, 4)")
    # a slice direction of the wrong length, and a through-slice through collinear points
    one_line_error(cli("count", p, "--origin", pts[0], "--dir1", "1,0", "--dir2", pts[2]), "same dimension")
    one_line_error(cli("count", p, "--through", pts[0], pts[0], pts[1]), "collinear")
    # the wrong input size for an otherwise fine graph: a 16-pixel model on a 2D box
    one_line_error(cli("count", p), "16")


def test_unsupported_node_error_names_it(tmp_path):
    m = make_model(
        [helper.make_node("Gemm", ["x", "W"], ["h"], transB=1), helper.make_node("Tanh", ["h"], ["y"], name="act")],
        {"W": np.eye(3)},
        (3,),
    )
    with pytest.raises(ModelFileError, match=r"'act' of type Tanh is not supported"):
        load_network(save(m, tmp_path))


def test_safetensors_state_dict(tmp_path):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(4)
    sd = {"0.weight": rng.normal(size=(5, 2)), "0.bias": rng.normal(size=5), "2.weight": rng.normal(size=(1, 5))}
    save_file({k: v.astype(np.float32) for k, v in sd.items()}, str(tmp_path / "m.safetensors"))
    net = load_network(tmp_path / "m.safetensors")
    X = rng.normal(size=(7, 2))
    Y, _, _ = forward_codes(net.lower(), X)
    want = (
        np.maximum(X @ sd["0.weight"].astype(np.float32).T + sd["0.bias"].astype(np.float32), 0)
        @ sd["2.weight"].astype(np.float32).T
    )
    np.testing.assert_allclose(np.asarray(Y), want, rtol=1e-12)


def test_torch_module_if_installed():
    torch = pytest.importorskip("torch")
    from regioncount import from_torch

    m = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1),
        torch.nn.BatchNorm2d(2),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 3),
    ).eval()
    net = from_torch(m, (1, 4, 4))
    X = np.random.default_rng(0).normal(size=(5, 1, 4, 4))
    with torch.no_grad():
        want = m(torch.tensor(X, dtype=torch.float32)).numpy()
    Y, _, _ = forward_codes(net.lower(), X.reshape(5, -1))
    np.testing.assert_allclose(np.asarray(Y), want, rtol=1e-4, atol=1e-5)


def test_committed_digits_cnn_matches_onnxruntime():
    """The worked example's ONNX file (scripts/digits_cnn.py) against onnxruntime on the digits it was sliced through
    and on random images: float32 precision, same predicted classes."""
    d = Path(__file__).resolve().parents[1] / "docs" / "digits"
    pts = np.stack([np.load(d / f"digit_{c}.npy") for c in "abc"])
    X = np.concatenate([pts, np.random.default_rng(0).uniform(0, 1, (30, 1, 8, 8))]).astype(np.float32)
    want = ort_run(d / "digits_cnn.onnx", X)
    got, net = ours(d / "digits_cnn.onnx", X)
    assert net.input_shape == (1, 8, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.array_equal(got.argmax(1), want.argmax(1))
    assert len(set(got[:3].argmax(1))) == 3  # three digits of different classes


def test_onnx_cnn_engines_agree_through_points(cnn_files):
    """On the slice through three data points: exact >= sampled, every cell's code is the forward pass's code
    at its centroid, and the line engine's pieces along a segment are the cells it crosses."""
    from regioncount import Segment, count_sampled, walk_line

    p, pts = cnn_files
    net = load_network(p)
    dom, uv = slice_through(np.stack([np.load(q).ravel() for q in pts]))
    part = partition_plane(net, dom)
    assert count_sampled(net, dom, grid=200).regions <= part.n_regions
    _, C, _ = forward_codes(net.lower(), dom.to_input(part.centroids()))
    np.testing.assert_array_equal(np.asarray(C), part.codes)
    ua, ub = uv[0], uv[2]  # from the first data point to the third
    res = walk_line(net, Segment(dom.to_input(ua), dom.to_input(ub)))
    t = np.linspace(0, 1, 200_001)
    hit = part.locate(ua + t[:, None] * (ub - ua))
    assert res.activation_pieces == 1 + int(np.count_nonzero(hit[1:] != hit[:-1]))


def test_cli_slice_from_npy_vectors(cnn_files, cli):
    """--origin/--dir1/--dir2 take .npy files of the input's shape; the count equals the library's on that slice."""
    import json

    from regioncount import Slice

    p, pts = cnn_files
    code, out, err = cli("count", p, "--origin", pts[0], "--dir1", pts[1], "--dir2", pts[2], "--json")
    assert code == 0, err
    a, b, c = (np.load(q).ravel() for q in pts)
    assert json.loads(out)["regions"] == partition_plane(load_network(p), Slice(a, b, c, (-1, -1), (1, 1))).n_regions
