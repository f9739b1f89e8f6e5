import numpy as np
import pytest

import regioncount as rc
from regioncount._errors import ModelFileError
from regioncount._io import load_model, save_model
from regioncount.engines._forward import forward_codes


def _same(a, b):
    X = np.random.default_rng(0).uniform(-2, 2, (200, a.input_dim))
    ya, ca, _ = forward_codes(a.lower(), X)
    yb, cb, _ = forward_codes(b.lower(), X)
    np.testing.assert_array_equal(np.asarray(ca), np.asarray(cb))
    np.testing.assert_array_equal(np.asarray(ya), np.asarray(yb))


@pytest.mark.parametrize(
    "net",
    [
        rc.random_mlp(3, [5, 4], 2, seed=0),
        rc.random_maxout(2, [3, 3], k=4, seed=1),
        rc.random_transformer(2, tokens=3, d_model=4, depth=2, heads=2, causal=True, seed=2),
        rc.random_transformer(2, tokens=3, d_model=4, depth=1, attention="relu", scale_by_T=True, seed=3),
        rc.random_transformer(2, tokens=2, d_model=4, depth=1, attention="softmax", inv_temperature=3.5, seed=4),
    ],
    ids=["mlp", "maxout", "hardmax", "relu", "softmax"],
)
def test_round_trip_is_identical(net, tmp_path):
    path = tmp_path / "m.npz"
    save_model(net, path)
    back = load_model(path)
    assert type(back) is type(net)
    for name in ("attention", "causal", "scale_by_T", "inv_temperature", "valid_box", "readout_token"):
        assert getattr(back, name, None) == getattr(net, name, None)
    import jax

    for la, lb in zip(jax.tree_util.tree_leaves(net), jax.tree_util.tree_leaves(back)):
        np.testing.assert_array_equal(la, lb)
    _same(net, back)


def test_valid_box_survives_round_trip(tmp_path):
    net = rc.random_transformer(2, tokens=2, d_model=4, depth=1, seed=0)
    import dataclasses

    net = dataclasses.replace(net, valid_box=((-1, -1), (2, 2)))
    save_model(net, tmp_path / "c.npz")
    assert load_model(tmp_path / "c.npz").valid_box == ((-1.0, -1.0), (2.0, 2.0))


def test_torch_sequential_layout_gives_same_codes(tmp_path):
    net = rc.random_mlp(2, [6, 5], 3, seed=9)
    # what np.savez(path, **{k: v.numpy() for k, v in model.state_dict().items()}) writes for
    # nn.Sequential(Linear, ReLU, Linear, ReLU, Linear): float32 arrays keyed by module index
    keys = {}
    for i, (w, b) in enumerate(zip(net.weights, net.biases)):
        keys[f"{2 * i}.weight"] = w.astype(np.float32)
        keys[f"{2 * i}.bias"] = b.astype(np.float32)
    np.savez(tmp_path / "torch.npz", **keys)
    loaded = load_model(tmp_path / "torch.npz")
    assert isinstance(loaded, rc.MLP) and loaded.widths == (6, 5) and loaded.output_dim == 3
    in_code = rc.MLP(tuple(w.astype(np.float32) for w in net.weights), tuple(b.astype(np.float32) for b in net.biases))
    _same(loaded, in_code)


def test_torch_layout_orders_layers_numerically(tmp_path):
    rng = np.random.default_rng(0)
    shapes = [(4, 2)] + [(4, 4)] * 5 + [(1, 4)]
    keys = {}
    for i, s in enumerate(shapes):
        keys[f"{2 * i}.weight"] = rng.normal(size=s)
        keys[f"{2 * i}.bias"] = rng.normal(size=s[0])
    np.savez(tmp_path / "deep.npz", **keys)  # keys 10.weight, 12.weight sort after 2.weight as strings
    net = load_model(tmp_path / "deep.npz")
    np.testing.assert_array_equal(net.weights[6], keys["12.weight"])


@pytest.mark.parametrize(
    "arrays, message",
    [
        (
            {"0.weight": np.ones((3, 2)), "0.bias": np.ones(3), "2.weight": np.ones((1, 4)), "2.bias": np.ones(1)},
            "expects",
        ),
        ({"0.weight": np.array([[np.nan, 1.0]]), "0.bias": np.ones(1)}, "not finite"),
        ({"0.weight": np.array([[np.inf, 1.0]]), "0.bias": np.ones(1)}, "not finite"),
        ({"0.bias": np.ones(3)}, "no weight"),
        ({"foo": np.ones(3)}, "neither"),
        ({}, "no layers"),
    ],
)
def test_malformed_files_raise_clear_errors(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelFileError, match=message):
        load_model(tmp_path / "bad.npz")


def test_missing_key_in_own_layout(tmp_path):
    net = rc.random_maxout(2, [3], k=2, seed=0)
    save_model(net, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as f:
        data = {k: f[k] for k in f.files if k != "readout_b"}
    np.savez(tmp_path / "m2.npz", **data)
    with pytest.raises(ModelFileError, match="readout_b"):
        load_model(tmp_path / "m2.npz")


def test_not_a_file_and_not_an_npz(tmp_path):
    with pytest.raises(ModelFileError, match="no such"):
        load_model(tmp_path / "nothing.npz")
    (tmp_path / "junk.npz").write_text("hello")
    with pytest.raises(ModelFileError, match="not an .npz file"):
        load_model(tmp_path / "junk.npz")
    with pytest.raises(ModelFileError, match="is a directory"):
        load_model(tmp_path)


def test_atomic_write_has_ordinary_permissions_and_leaves_no_temp(tmp_path):
    import os

    from regioncount._io import write_atomic

    write_atomic(tmp_path / "a.json", "{}")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def _with_config(tmp_path, **changes):
    """A saved MLP whose stored config is rewritten with ``changes``."""
    import json

    path = tmp_path / "m.npz"
    save_model(rc.random_mlp(2, [3], seed=0), path)
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    config = json.loads(str(data["__regioncount__"]))
    config.update(changes)
    data["__regioncount__"] = np.array(json.dumps(config))
    np.savez(path, **data)
    return path


def test_future_format_version_is_refused(tmp_path):
    """A config that says format 99 (a future format) is refused with a line naming the version; a config
    without the field (older files) reads as format 1."""
    with pytest.raises(ModelFileError, match=r"format 99; this regioncount reads format 1 .*newer regioncount"):
        load_model(_with_config(tmp_path, format=99))
    with pytest.raises(ModelFileError, match=r"format version '1', not an integer"):
        load_model(_with_config(tmp_path, format="1"))
    assert load_model(_with_config(tmp_path, format=1)).widths == (3,)


def test_compressed_bomb_refused_before_inflating(tmp_path, monkeypatch):
    """An .npz whose members declare more than MAX_MODEL_BYTES once inflated is refused from the zip
    directory alone: np.load is never reached (the real limit, 2 GiB, is the same check: a file at it takes
    minutes to deflate, too slow for the suite)."""
    import regioncount._io as io_mod

    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, **{"0.weight": np.zeros((4, 2**18)), "0.bias": np.zeros(4)})
    assert path.stat().st_size < 2**16  # 8 MiB of zeros in a few KiB
    monkeypatch.setattr(io_mod, "MAX_MODEL_BYTES", 2**20)

    def no_load(*a, **k):
        raise AssertionError("np.load was called on a refused file")

    monkeypatch.setattr(io_mod.np, "load", no_load)
    with pytest.raises(ModelFileError, match=r"declare 8,3\d\d,\d\d\d bytes once inflated .* refused before inflating"):
        load_model(path)


def test_bool_weights_are_refused(tmp_path):
    path = tmp_path / "b.npz"
    np.savez(path, **{"0.weight": np.ones((3, 2), bool), "0.bias": np.zeros(3), "2.weight": np.ones((1, 3))})
    with pytest.raises(ModelFileError, match=r"'0.weight' holds booleans, not weights"):
        load_model(path)
