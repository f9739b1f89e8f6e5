import jax
import numpy as np
import pytest

import regioncount as rc
from regioncount.engines._forward import forward_codes, forward_one
from regioncount.networks import code_length


def _eager(program, X):
    ys, cs = [], []
    from regioncount._config import x64

    with jax.disable_jit(), x64():  # forward_one is the unjitted kernel: run it as the entry points do
        for x in X:
            y, c, _ = forward_one(program, jax.numpy.asarray(x))
            ys.append(np.asarray(y))
            cs.append(np.asarray(c))
    return np.array(ys), np.array(cs)


NETS = {
    "mlp": lambda: rc.random_mlp(3, [7, 5], 2, seed=1),
    "maxout": lambda: rc.random_maxout(3, [4, 3], k=3, seed=2),
    "hardmax": lambda: rc.random_transformer(3, tokens=4, d_model=6, depth=2, heads=2, seed=3),
    "hardmax-causal": lambda: rc.random_transformer(3, tokens=3, d_model=6, depth=2, causal=True, seed=4),
    "relu-att": lambda: rc.random_transformer(
        3, tokens=3, d_model=5, depth=2, attention="relu", scale_by_T=True, seed=5
    ),
    "softmax": lambda: rc.random_transformer(3, tokens=3, d_model=5, depth=1, attention="softmax", seed=6),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "hardmax-causal" else n for n in NETS]
)
def test_jit_equals_eager(name):  # the causal hardmax net (2.3 s) differs from the hardmax one only by its mask
    program = NETS[name]().lower()
    X = np.random.default_rng(0).uniform(-2, 2, (16, 3))
    y, c, _ = forward_codes(program, X)
    y_e, c_e = _eager(program, X)
    np.testing.assert_array_equal(np.asarray(c), c_e)
    np.testing.assert_allclose(np.asarray(y), y_e, rtol=1e-12, atol=1e-12)
    assert c.shape[1] == code_length(program)


def test_mlp_forward_matches_numpy():
    net = rc.random_mlp(2, [6, 4], 3, seed=0)
    X = np.random.default_rng(1).normal(size=(20, 2))
    h = X
    bits = []
    for W, b in zip(net.weights[:-1], net.biases[:-1]):
        z = h @ W.T + b
        bits.append(z > 0)
        h = np.maximum(z, 0)
    want = h @ net.weights[-1].T + net.biases[-1]
    y, c, _ = forward_codes(net.lower(), X)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(c), np.concatenate(bits, 1).astype(np.int32))


def test_maxout_forward_matches_numpy():
    net = rc.random_maxout(2, [3, 2], k=4, seed=0)
    X = np.random.default_rng(1).normal(size=(20, 2))
    h = X
    idx = []
    for W, b in zip(net.weights, net.biases):
        z = np.einsum("kon,bn->bok", W, h) + b.T
        idx.append(z.argmax(-1))
        h = z.max(-1)
    want = h @ net.readout_W.T + net.readout_b
    y, c, _ = forward_codes(net.lower(), X)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(c), np.concatenate(idx, 1))


def test_hardmax_transformer_matches_numpy_and_averages_ties():
    net = rc.random_transformer(2, tokens=3, d_model=4, depth=1, heads=1, seed=0)
    blk = net.blocks[0]
    x = np.array([0.3, -0.7])
    H = x @ net.E.T + net.P
    S = (H @ blk.Wq[0]) @ (H @ blk.Wk[0]).T
    A = np.eye(3)[S.argmax(1)]
    H = H + A @ (H @ blk.Wv[0]) @ blk.Wo[0]
    H = H + np.maximum(H @ blk.W1.T + blk.b1, 0) @ blk.W2.T + blk.b2
    want = net.readout_W @ H[0] + net.readout_b
    y, c, ties = forward_codes(net.lower(), x[None])
    np.testing.assert_allclose(np.asarray(y)[0], want, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(c)[0, :3], S.argmax(1))
    assert int(ties[0]) == 0
    # identical keys for all tokens: every row ties, attention averages the values
    tied = rc.Transformer(
        E=np.ones((2, 1)),
        P=np.zeros((3, 2)),
        blocks=(
            rc.Block(
                np.ones((1, 2, 1)),
                np.ones((1, 2, 1)),
                np.eye(2)[None],
                np.eye(2)[None],
                np.zeros((0, 2)),
                np.zeros(0),
                np.zeros((2, 0)),
                np.zeros(2),
            ),
        ),
        readout_W=np.eye(2),
        readout_b=np.zeros(2),
    )
    _, _, ties = forward_codes(tied.lower(), np.array([[1.0]]))
    assert int(ties[0]) == 3


def test_networks_are_immutable_and_validate_shapes():
    net = rc.random_mlp(2, [3], seed=0)
    with pytest.raises(ValueError):
        net.weights[0][0, 0] = 1.0
    with pytest.raises(ValueError, match="do not fit"):
        rc.MLP((np.ones((3, 2)),), (np.ones(2),))
    with pytest.raises(ValueError, match="expects"):
        rc.MLP((np.ones((3, 2)), np.ones((1, 4))), (np.ones(3), np.ones(1)))


def test_random_transformers_of_one_seed_are_nested_across_depths():
    import jax

    from regioncount.networks import truncate

    deep = rc.random_transformer(2, tokens=3, d_model=4, depth=5, seed=7)
    short = rc.random_transformer(2, tokens=3, d_model=4, depth=2, seed=7)
    for a, b in zip(jax.tree_util.tree_leaves(truncate(deep, 2)), jax.tree_util.tree_leaves(short)):
        np.testing.assert_array_equal(a, b)


# -- JAX transforms through the network pytrees ---------------------------------------------------------

TRANSFORM_NETS = {
    "mlp": lambda: rc.random_mlp(2, [5, 4], seed=11),
    "maxout": lambda: rc.random_maxout(2, [4, 3], k=3, seed=12),
    "transformer": lambda: rc.random_transformer(2, tokens=3, d_model=4, depth=2, heads=2, seed=13),
    "program": lambda: rc.random_transformer(2, tokens=3, d_model=4, depth=1, seed=14).lower(),
}
_X = np.array([0.3, -0.7])


def _output(net):
    return forward_one(rc.lower(net), jax.numpy.asarray(_X))[0].sum()


@pytest.fixture
def in_x64():
    """A caller who wants JAX's own transforms of a network in float64 asks for it (regioncount does not
    switch the process to x64)."""
    from regioncount._config import x64

    with x64():
        yield


@pytest.mark.parametrize("name", TRANSFORM_NETS)
def test_networks_pass_through_jit(name, in_x64):
    net = TRANSFORM_NETS[name]()
    first = jax.tree_util.tree_leaves(net)[0]
    # the example: a network as a jitted argument (unflatten must not re-validate tracers)
    np.testing.assert_allclose(jax.jit(lambda n: jax.tree_util.tree_leaves(n)[0].sum())(net), first.sum())
    np.testing.assert_allclose(jax.jit(_output)(net), _output(net), rtol=1e-13)
    rebuilt = jax.tree_util.tree_unflatten(*reversed(jax.tree_util.tree_flatten(net)))
    assert type(rebuilt) is type(net)
    np.testing.assert_array_equal(_output(rebuilt), _output(net))


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in ("transformer", "program") else n for n in TRANSFORM_NETS]
)  # the transformer's and the lowered program's take 4 s each
def test_grad_through_networks_matches_central_difference(name, in_x64):
    net = TRANSFORM_NETS[name]()
    grads = jax.grad(_output)(net)
    assert type(grads) is type(net)
    rng = np.random.default_rng(0)
    direction = jax.tree_util.tree_map(lambda a: rng.normal(size=np.shape(a)), net)
    directional = sum(
        float(np.sum(np.asarray(g) * d)) for g, d in zip(*map(jax.tree_util.tree_leaves, (grads, direction)))
    )
    eps = 1e-6
    plus = jax.tree_util.tree_map(lambda a, d: np.asarray(a) + eps * d, net, direction)
    minus = jax.tree_util.tree_map(lambda a, d: np.asarray(a) - eps * d, net, direction)
    central = (float(_output(plus)) - float(_output(minus))) / (2 * eps)
    assert abs(directional) > 1e-3  # a direction the output depends on
    np.testing.assert_allclose(directional, central, rtol=1e-6)


def test_pytree_unflatten_skips_validation_but_construction_validates():
    with pytest.raises(ValueError):
        rc.MLP((np.ones((3, 2)),), (np.ones(4),))
    net = rc.random_mlp(2, [3])
    leaves, tree = jax.tree_util.tree_flatten(net)
    # leaves replaced by objects the constructor would reject: unflatten keeps them as given
    odd = jax.tree_util.tree_unflatten(tree, [None] * len(leaves))
    assert odd.weights == (None, None)
