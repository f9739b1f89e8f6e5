"""Conv, pool and batch-norm lowering against a hand-written NumPy float64 forward pass, and the engines on
a small CNN restricted to a slice through three images (exact >= sampled, line pieces = cells crossed)."""

import itertools

import numpy as np
import pytest

from regioncount import Segment, count_sampled, forward_codes, partition_plane, walk_line
from regioncount.networks import ConvNet, DecisionNet, class_position, lower_layers
from regioncount.networks._conv import (
    AvgPool2d,
    BatchNorm,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    Reshape,
    Skip,
    fuse_affines,
)
from regioncount.networks._ops import Affine, GroupMax, ReLU
from regioncount.results import decision_labels

# --------------------------------------------------------------------------------------------
# reference forward passes: direct definitions, one output entry at a time


def ref_conv(x, W, b, stride, pad, dil, groups):
    C, H, Wd = x.shape
    Co, Cg, kh, kw = W.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dil, pad
    Ho = (H + pt + pb - dh * (kh - 1) - 1) // sh + 1
    Wo = (Wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((C, H + pt + pb, Wd + pl + pr))
    xp[:, pt : pt + H, pl : pl + Wd] = x
    y = np.zeros((Co, Ho, Wo))
    per = Co // groups
    for co, i, j in itertools.product(range(Co), range(Ho), range(Wo)):
        g = co // per
        acc = b[co]
        for ci, a, c in itertools.product(range(Cg), range(kh), range(kw)):
            acc += W[co, ci, a, c] * xp[g * Cg + ci, i * sh + a * dh, j * sw + c * dw]
        y[co, i, j] = acc
    return y


def ref_pool(x, k, stride, pad, op, dil=(1, 1), count_include_pad=True):
    C, H, W = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = k, stride, pad, dil
    Ho = (H + pt + pb - dh * (kh - 1) - 1) // sh + 1
    Wo = (W + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((C, Ho, Wo))
    for c, i, j in itertools.product(range(C), range(Ho), range(Wo)):
        vals = []
        for a, e in itertools.product(range(kh), range(kw)):
            r, s = i * sh - pt + a * dh, j * sw - pl + e * dw
            if 0 <= r < H and 0 <= s < W:
                vals.append(x[c, r, s])
        if op == "max":
            y[c, i, j] = max(vals)
        else:
            y[c, i, j] = sum(vals) / (kh * kw if count_include_pad else len(vals))
    return y


def run(net, X):
    Y, _, _ = forward_codes(net.lower(), np.asarray(X, dtype=np.float64).reshape(len(X), -1))
    return np.asarray(Y)


CONV_CASES = [
    # (in_shape, out_ch, kernel, stride, padding (t, l, b, r), dilation, groups)
    ((1, 6, 6), 3, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 7, 6), 4, (3, 2), (2, 1), (1, 0, 1, 2), (1, 1), 1),
    ((4, 7, 7), 4, (3, 3), (1, 2), (2, 2, 2, 2), (2, 1), 2),
    ((6, 5, 5), 6, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 6),  # depthwise
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_matches_reference(case):
    shape, co, k, s, p, d, g = case
    rng = np.random.default_rng(1)
    W = rng.normal(size=(co, shape[0] // g, *k))
    b = rng.normal(size=co)
    net = lower_layers([Conv2d(W, b, s, p, d, g), Flatten()], shape)
    X = rng.normal(size=(5, *shape))
    want = np.stack([ref_conv(x, W, b, s, p, d, g).ravel() for x in X])
    np.testing.assert_allclose(run(net, X), want, rtol=1e-13, atol=1e-13)


POOL_CASES = [
    ((2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
    ((1, 7, 5), (3, 2), (2, 1), (1, 0, 1, 1), (1, 1)),  # overlapping windows and padding
    ((2, 7, 7), (2, 2), (2, 2), (0, 0, 0, 0), (2, 2)),  # dilation
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool_matches_reference_and_is_a_group_max(case):
    shape, k, s, p, d = case
    rng = np.random.default_rng(2)
    net = lower_layers([MaxPool2d(k, s, p, d)], shape)
    kinds = [type(op) for op in net.ops]
    assert kinds == [Affine, GroupMax] and net.ops[1].k == k[0] * k[1]
    X = rng.normal(size=(6, *shape))
    want = np.stack([ref_pool(x, k, s, p, "max", d).ravel() for x in X])
    np.testing.assert_array_equal(run(net, X), want)  # a max selects an entry: exact


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("case", POOL_CASES[:2])
def test_avgpool_matches_reference(case, include):
    shape, k, s, p, _ = case
    rng = np.random.default_rng(3)
    net = lower_layers([AvgPool2d(k, s, p, count_include_pad=include)], shape)
    assert [type(op) for op in net.ops] == [Affine]
    X = rng.normal(size=(4, *shape))
    want = np.stack([ref_pool(x, k, s, p, "avg", count_include_pad=include).ravel() for x in X])
    np.testing.assert_allclose(run(net, X), want, rtol=1e-13, atol=1e-14)


def test_batchnorm_folds_into_the_conv_and_matches_reference():
    rng = np.random.default_rng(4)
    shape = (2, 5, 5)
    W, b = rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3)
    g, beta, m, v = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3), rng.uniform(0.5, 2, 3)
    layers = [Conv2d(W, b, 1, 1), BatchNorm(g, beta, m, v, 1e-3), ReLU(), Flatten(), Linear(rng.normal(size=(4, 75)))]
    net = lower_layers(layers, shape)
    assert [type(op) for op in net.ops] == [Affine, ReLU, Affine]  # batch norm folded into the conv
    X = rng.normal(size=(5, *shape))
    want = []
    for x in X:
        y = ref_conv(x, W, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
        y = g[:, None, None] * (y - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-3) + beta[:, None, None]
        want.append(layers[-1].weight @ np.maximum(y, 0).ravel())
    np.testing.assert_allclose(run(net, X), np.stack(want), rtol=1e-12, atol=1e-12)


def test_residual_and_reshape():
    rng = np.random.default_rng(5)
    W, W3 = rng.normal(size=(2, 2, 3, 3)), rng.normal(size=(3, 16))
    net = lower_layers([Skip((Conv2d(W, None, 1, 1), ReLU())), Reshape((2, 16)), Linear(W3)], (2, 4, 4))
    X = rng.normal(size=(3, 2, 4, 4))
    pad = (1, 1, 1, 1)
    want = [((x + np.maximum(ref_conv(x, W, np.zeros(2), (1, 1), pad, (1, 1), 1), 0)).reshape(2, 16) @ W3.T) for x in X]
    np.testing.assert_allclose(run(net, X).reshape(3, 2, 3), np.stack(want), rtol=1e-12, atol=1e-12)


def test_fuse_affines_composes_runs():
    rng = np.random.default_rng(6)
    a, b = Affine(rng.normal(size=(4, 3)), rng.normal(size=4)), Affine(rng.normal(size=(2, 4)), rng.normal(size=2))
    ops = fuse_affines((a, b, ReLU(), a))
    assert [type(o) for o in ops] == [Affine, ReLU, Affine]
    np.testing.assert_allclose(ops[0].W, b.W @ a.W)
    np.testing.assert_allclose(ops[0].b, b.W @ a.b + b.b)


def test_bad_layers_raise():
    with pytest.raises(ValueError, match="does not fit"):
        lower_layers([Conv2d(np.zeros((2, 3, 3, 3)))], (2, 5, 5))
    with pytest.raises(ValueError, match="cannot reshape"):
        lower_layers([Reshape((7,))], (2, 5, 5))
    with pytest.raises(ValueError, match="does not fit an input"):
        lower_layers([MaxPool2d(4)], (1, 3, 3))


# --------------------------------------------------------------------------------------------
# engines on a small CNN through three data points


def small_cnn(seed=0) -> ConvNet:
    rng = np.random.default_rng(seed)
    layers = [
        Conv2d(rng.normal(size=(2, 1, 3, 3)) * 0.6, rng.normal(size=2) * 0.1, 1, 1),
        ReLU(),
        MaxPool2d(2),
        Flatten(),
        Linear(rng.normal(size=(6, 8)) * 0.5, rng.normal(size=6) * 0.1),
        ReLU(),
        Linear(rng.normal(size=(3, 6)), rng.normal(size=3) * 0.1),
    ]
    return lower_layers(layers, (1, 4, 4))


def through(seed=1):
    from regioncount._domain import slice_through

    rng = np.random.default_rng(seed)
    return slice_through(rng.normal(size=(3, 16)))[0]


def test_cnn_slice_engines_agree():
    net, dom = small_cnn(), through()
    part = partition_plane(net, dom)
    n = part.n_regions
    assert n > 20
    samp = count_sampled(net, dom, grid=300)
    assert samp.regions <= n
    # every code the grid meets is a code of the exact partition
    X = dom.to_input(part.centroids())
    _, C, _ = forward_codes(net.lower(), X)
    assert len({c.tobytes() for c in np.asarray(C)}) == n
    np.testing.assert_array_equal(np.asarray(C), part.codes)
    # a segment across the slice: the line engine's pieces are the cells it crosses
    ua, ub = np.array([-0.9, -0.7]), np.array([0.8, 0.95])
    seg = Segment(dom.to_input(ua), dom.to_input(ub))
    res = walk_line(net, seg)
    t = np.linspace(0, 1, 200_001)
    hit = part.locate(ua + (t[:, None]) * (ub - ua))
    runs = 1 + int(np.count_nonzero(hit[1:] != hit[:-1]))
    assert res.activation_pieces == runs


def test_decision_regions_are_unions_of_linear_regions():
    net, dom = small_cnn(), through()
    dnet = DecisionNet(net)
    part = partition_plane(dnet, dom)
    pos = class_position(dnet)
    cls = part.codes[:, pos]
    # the class digit is the argmax of the logits at every cell
    X = dom.to_input(part.centroids())
    Y, _, _ = forward_codes(net.lower(), X)
    np.testing.assert_array_equal(cls, np.argmax(np.asarray(Y), axis=1))
    labels = decision_labels(part, cls)
    lin = part.linear_region_labels()
    for l in np.unique(lin):  # one class per linear region, so a decision region is a union of them
        assert np.unique(labels[lin == l]).size == 1
    assert np.unique(labels).size <= np.unique(lin).size
    assert np.unique(labels).size >= np.unique(cls).size
    # the decision partition refines the activation partition: dropping the class digit gives its codes
    base = partition_plane(net, dom)
    assert np.unique(np.delete(part.codes, pos, axis=1), axis=0).shape[0] == base.n_regions


# --------------------------------------------------------------------------------------------
# the torch-module reader, on stand-ins with torch's class names and attributes (torch is optional)


class _T:
    def __init__(self, a):
        self.a = np.asarray(a, dtype=np.float32)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a


def _module(name, **attrs):
    return type(name, (), {})() if not attrs else type(name, (), dict(attrs))()


def test_torch_layers_from_stand_ins():
    from regioncount import from_torch

    rng = np.random.default_rng(8)
    K, kb = rng.normal(size=(2, 1, 3, 3)), rng.normal(size=2)
    g, be, mu, var = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2), rng.uniform(0.5, 2, 2)
    W, b = rng.normal(size=(3, 8)), rng.normal(size=3)
    conv = _module(
        "Conv2d",
        weight=_T(K),
        bias=_T(kb),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        groups=1,
        padding_mode="zeros",
    )
    bn = _module(
        "BatchNorm2d", num_features=2, weight=_T(g), bias=_T(be), running_mean=_T(mu), running_var=_T(var), eps=1e-5
    )
    pool = _module("MaxPool2d", kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    flat = _module("Flatten", start_dim=1, end_dim=-1)
    lin = _module("Linear", weight=_T(W), bias=_T(b))
    seq = type("Sequential", (), {"children": lambda self: iter(self.mods)})()
    seq.mods = [conv, bn, _module("ReLU"), pool, _module("Dropout"), flat, lin]
    net = from_torch(seq, (1, 4, 4))
    f32 = lambda a: np.asarray(a, np.float32).astype(np.float64)
    X = rng.normal(size=(4, 1, 4, 4))
    want = []
    for x in X:
        y = ref_conv(x, f32(K), f32(kb), (1, 1), (1, 1, 1, 1), (1, 1), 1)
        y = f32(g)[:, None, None] * (y - f32(mu)[:, None, None]) / np.sqrt(f32(var)[:, None, None] + 1e-5)
        y = np.maximum(y + f32(be)[:, None, None], 0)
        want.append(f32(W) @ ref_pool(y, (2, 2), (2, 2), (0,) * 4, "max").ravel() + f32(b))
    np.testing.assert_allclose(run(net, X), np.stack(want), rtol=1e-12, atol=1e-12)
    with pytest.raises(Exception, match="Sigmoid is not supported"):
        from_torch([_module("Sigmoid")], (3,))


def test_convnet_file_round_trip_keeps_input_shape(tmp_path):
    from regioncount import load_model, save_model

    rng = np.random.default_rng(9)
    W = rng.normal(size=(2, 2, 3, 3))
    net = lower_layers(
        [Skip((Conv2d(W, None, 1, 1), ReLU())), MaxPool2d(2), Flatten(), Linear(rng.normal(size=(3, 8)))], (2, 4, 4)
    )
    save_model(net, tmp_path / "cnn.npz")
    back = load_model(tmp_path / "cnn.npz")
    assert isinstance(back, ConvNet) and back.input_shape == (2, 4, 4)
    assert [type(o) for o in back.ops] == [type(o) for o in net.ops]
    X = rng.normal(size=(5, 2, 4, 4))
    np.testing.assert_array_equal(run(back, X), run(net, X))


def test_core_imports_without_onnx_and_says_what_to_install(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None; sys.modules['safetensors'] = None\n"
        "import regioncount as rc\n"
        "rc.load_onnx  # the loaders import (lazily) without the optional extras\n"
        "assert 'regioncount._loaders' in sys.modules\n"
        f"p = {str(tmp_path / 'm.onnx')!r}; open(p, 'wb').write(b'x')\n"
        "try:\n    rc.load_onnx(p)\nexcept rc.ModelFileError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "pip install 'regioncount[onnx]'" in r.stdout
