"""A small CNN trained on scikit-learn's bundled digits (8x8), exported to ONNX, counted exactly on the slice
through three digits of different classes, and drawn: activation, linear and decision regions. Offline.

    python scripts/digits_cnn.py [--out docs/digits] [--epochs 60] [--seed 0]

Writes into ``--out``: ``digits_cnn.onnx`` (the graph, written with ``onnx.helper``), ``digit_a.npy``,
``digit_b.npy``, ``digit_c.npy`` (the three images, shape (1, 8, 8)), ``digits_cnn.png`` (three panels) and
``digits_cnn.json`` (accuracy, counts, seconds). Then, for instance:

    regioncount count docs/digits/digits_cnn.onnx --through docs/digits/digit_{a,b,c}.npy --decision

Network: Conv(1->4, 3x3, pad 1) - ReLU - MaxPool(2x2) - Flatten - Gemm(64->16) - ReLU - Gemm(16->10),
trained with optax's Adam on 1,437 of the 1,797 images (pixels scaled to [0, 1]); the other 360 test it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

CHANNELS, HIDDEN, CLASSES = 4, 16, 10


def init_params(key) -> dict:
    k = jax.random.split(key, 3)

    def u(key, shape, fan_in):  # PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        s = 1.0 / np.sqrt(fan_in)
        return jax.random.uniform(key, shape, jnp.float32, -s, s)

    return {
        "K": u(k[0], (CHANNELS, 1, 3, 3), 9),
        "kb": jnp.zeros(CHANNELS, jnp.float32),
        "W1": u(k[1], (HIDDEN, CHANNELS * 16), CHANNELS * 16),
        "b1": jnp.zeros(HIDDEN, jnp.float32),
        "W2": u(k[2], (CLASSES, HIDDEN), HIDDEN),
        "b2": jnp.zeros(CLASSES, jnp.float32),
    }


def logits(params, X):
    """``X (N, 1, 8, 8)`` float32 -> ``(N, 10)``, NCHW like the ONNX graph."""
    h = jax.lax.conv_general_dilated(
        X, params["K"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")
    )
    h = jax.nn.relu(h + params["kb"][None, :, None, None])
    N = h.shape[0]
    h = h.reshape(N, CHANNELS, 4, 2, 4, 2).max(axis=(3, 5))  # 2x2 max pool, stride 2
    h = jax.nn.relu(h.reshape(N, -1) @ params["W1"].T + params["b1"])
    return h @ params["W2"].T + params["b2"]


def train(X, y, epochs: int, seed: int) -> dict:
    import optax

    params = init_params(jax.random.PRNGKey(seed))
    opt = optax.adam(1e-2)
    state = opt.init(params)

    def loss(p, xb, yb):
        return optax.softmax_cross_entropy_with_integer_labels(logits(p, xb), yb).mean()

    @jax.jit
    def step(p, s, xb, yb):
        g = jax.grad(loss)(p, xb, yb)
        upd, s = opt.update(g, s, p)
        return optax.apply_updates(p, upd), s

    rng = np.random.default_rng(seed)
    batch = 128
    for _ in range(epochs):
        order = rng.permutation(len(X))
        for i in range(0, len(X) - batch + 1, batch):
            idx = order[i : i + batch]
            params, state = step(params, state, X[idx], y[idx])
    return {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}


def to_onnx(params: dict):
    """The trained network as an ONNX graph (opset 17), float32, input ``x`` of shape ``[N, 1, 8, 8]``."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Conv", ["x", "K", "kb"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["c_relu"], name="relu1"),
        helper.make_node("MaxPool", ["c_relu"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "W1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu2"),
        helper.make_node("Gemm", ["h_relu", "W2", "b2"], ["logits"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])],
        initializer=[numpy_helper.from_array(v, k) for k, v in params.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="regioncount")
    model.ir_version = 8
    return model


def pick_three(X, y, pred, classes=(0, 1, 7)) -> list[int]:
    """The first correctly classified test image of each of ``classes``."""
    return [int(np.flatnonzero((y == c) & (pred == c))[0]) for c in classes]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("docs/digits"))
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dpi", type=int, default=75)
    ap.add_argument(
        "--redraw",
        action="store_true",
        help="Do not train: count and draw again the model and digits already in --out (needs neither "
        "scikit-learn nor training; the accuracy fields of digits_cnn.json are kept).",
    )
    args = ap.parse_args(argv)
    if args.redraw:
        return redraw(args)

    try:
        import onnx
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise SystemExit(
            f"scripts/digits_cnn.py needs {e.name}: pip install '.[digits]' (scikit-learn for its bundled 8x8 "
            "digits, onnx to write the model)"
        ) from None

    import regioncount as rc
    from regioncount import count_decisions, slice_through, write_atomic
    from regioncount.plotting import figure_bytes, figure_decision

    digits = load_digits()
    X = (digits.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8)
    y = digits.target
    perm = np.random.default_rng(args.seed).permutation(len(X))
    tr, te = perm[:1437], perm[1437:]
    t0 = time.perf_counter()
    params = train(X[tr], y[tr], args.epochs, args.seed)
    t_train = time.perf_counter() - t0
    acc = float((np.argmax(np.asarray(logits(params, X[te])), 1) == y[te]).mean())

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "digits_cnn.onnx"
    write_atomic(path, to_onnx(params).SerializeToString())
    onnx.checker.check_model(str(path))
    net = rc.load_onnx(path)
    # the lowered float64 network predicts what the float32 one does on every test image
    Y, _, _ = rc.forward_codes(net.lower(), X[te].reshape(len(te), -1).astype(np.float64))
    pred = np.argmax(np.asarray(Y), 1)
    agree = float((pred == np.argmax(np.asarray(logits(params, X[te])), 1)).mean())

    idx = pick_three(X[te], y[te], pred)
    pts = X[te][idx].astype(np.float64)
    for name, p in zip("abc", pts):
        buf = args.out / f"digit_{name}.npy"
        import io

        b = io.BytesIO()
        np.save(b, p)
        write_atomic(buf, b.getvalue())
    dom, uv = slice_through(pts.reshape(3, -1))
    res = count_decisions(net, dom)
    samp = rc.count_sampled(net, dom, grid=1000)
    fig, info = figure_decision(net, dom, points=uv, point_names=[f"digit {y[te][i]}" for i in idx], classes=CLASSES)
    fig.suptitle("digits CNN on the plane through three test digits", fontsize=11)
    write_atomic(args.out / "digits_cnn.png", figure_bytes(fig, "png", args.dpi, compact=True))
    summary = {
        "test_accuracy": acc,
        "float64_lowering_agrees_with_float32_jax": agree,
        "train_seconds": t_train,
        "digits": [int(y[te][i]) for i in idx],
        "test_indices": [int(te[i]) for i in idx],
        "points_u": uv.tolist(),
        **{
            k: res[k] for k in ("regions", "linear_regions", "decision_regions", "decision_cells", "classes", "seconds")
        },
        "sampled_regions_grid_1000": int(samp.regions),
        "figure": str(args.out / "digits_cnn.png"),
    }
    write_atomic(args.out / "digits_cnn.json", json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "classes"}, indent=2))
    return summary


def redraw(args) -> dict:
    """The counts and the figure of the model in ``args.out`` again, with the current engines."""
    import regioncount as rc
    from regioncount import count_decisions, slice_through, write_atomic
    from regioncount.plotting import figure_bytes, figure_decision

    old = json.loads((args.out / "digits_cnn.json").read_text())
    net = rc.load_onnx(args.out / "digits_cnn.onnx")
    pts = np.stack([np.load(args.out / f"digit_{name}.npy") for name in "abc"])
    dom, uv = slice_through(pts.reshape(3, -1))
    res = count_decisions(net, dom)
    samp = rc.count_sampled(net, dom, grid=1000)
    names = [f"digit {d}" for d in old["digits"]]
    fig, _ = figure_decision(net, dom, points=uv, point_names=names, classes=CLASSES)
    fig.suptitle("digits CNN on the plane through three test digits", fontsize=11)
    write_atomic(args.out / "digits_cnn.png", figure_bytes(fig, "png", args.dpi, compact=True))
    keys = ("regions", "linear_regions", "decision_regions", "decision_cells", "classes", "seconds")
    summary = {**old, **{k: res[k] for k in keys}, "points_u": uv.tolist()}
    summary.update(sampled_regions_grid_1000=int(samp.regions), exact=bool(res.get("exact", True)))
    write_atomic(args.out / "digits_cnn.json", json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "classes"}, indent=2))
    return summary


if __name__ == "__main__":
    main()
