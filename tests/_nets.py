"""Small networks with known region counts, shared by the tests."""

import itertools

import numpy as np

from regioncount import MLP
from regioncount.networks import Block, Transformer


def lines_mlp(n: int, seed: int = 0) -> MLP:
    """One ReLU layer of ``n`` units whose lines are in general position with every pairwise crossing
    inside [-0.9, 0.9]^2 -> 1 + n + n(n-1)/2 regions on [-1, 1]^2 (Zaslavsky).

    Angles are spread evenly over [0, pi) (so no two lines are near parallel) and offsets are small.
    """
    rng = np.random.default_rng(seed)
    angles = (np.arange(n) + rng.uniform(0.4, 0.6, n)) * np.pi / n
    normals = np.stack([np.cos(angles), np.sin(angles)], 1)
    # adjacent normals differ by >= 0.8 pi/n, so crossings lie within 2 max|offset| / sin(0.8 pi/n)
    offsets = 0.4 * np.sin(0.8 * np.pi / max(n, 2)) * rng.uniform(0.3, 1.0, n) * rng.choice([-1, 1], n)
    for i, j in itertools.combinations(range(n), 2):
        p = np.linalg.solve(normals[[i, j]], offsets[[i, j]])
        assert np.all(np.abs(p) < 0.9), "crossing outside the box: choose another seed"
    return MLP((normals, rng.normal(size=(1, n))), (-offsets, np.zeros(1)))


def equal_map_components(n_regions: int, adjacency, maps, rtol: float = 1e-9) -> list[set[int]]:
    """Linear regions computed a second way, for tests: connected components (networkx) of the graph of
    neighbouring regions whose affine maps ``maps (R, out, k+1)`` agree to ``rtol`` of their size."""
    import networkx as nx

    G = nx.Graph()
    G.add_nodes_from(range(n_regions))
    M = np.asarray(maps)
    for a, b in np.asarray(adjacency).reshape(-1, 2):
        size = max(np.abs(M[a]).max(initial=0.0), np.abs(M[b]).max(initial=0.0))
        if np.abs(M[a] - M[b]).max(initial=0.0) <= rtol * size:
            G.add_edge(int(a), int(b))
    return [set(c) for c in nx.connected_components(G)]


def assert_linear_regions_match(result, labels=None) -> None:
    """``result.linear_regions()`` and its labels agree with :func:`equal_map_components` of its own maps
    and adjacency: the same number, and each component one label."""
    comps = equal_map_components(result.n_regions, result.adjacency(), result.maps)
    assert len(comps) == result.linear_regions(), (len(comps), result.linear_regions())
    if labels is not None:
        for comp in comps:
            assert len({int(labels[i]) for i in comp}) == 1


def slot_transformer(depth, seed=0, tokens=2, out=1, d_ff=1, v_out_blocks=(2,)):
    """A seeded random ReLU-attention Transformer whose degrees stay within the cap at any depth: queries,
    keys and values read the slot ``(x, y, 1)``, which nothing writes (so every score wall is a conic); heads
    and FFNs write the ``out`` slot, which the FFNs read (walls of degree 3) and the values of the blocks in
    ``v_out_blocks`` read too (their outputs, and the walls after them, reach degree 5)."""
    rng = np.random.default_rng(seed)
    d = 3 + out
    xs, os_ = [0, 1, 2], list(range(3, d))
    E = np.zeros((d, 2))
    E[0, 0] = E[1, 1] = 1.0
    P = np.zeros((tokens, d))
    P[:, 2] = 1.0
    P[:, 3:] = rng.normal(0, 0.5, (tokens, out))
    blocks = []
    for b in range(1, depth + 1):
        Wq = np.zeros((1, d, 2))
        Wk = np.zeros((1, d, 2))
        Wv = np.zeros((1, d, 1))
        Wo = np.zeros((1, 1, d))
        Wq[0, xs] = rng.normal(0, 1, (3, 2))
        Wk[0, xs] = rng.normal(0, 1, (3, 2))
        Wv[0, xs] = rng.normal(0, 1, (3, 1))
        if b in v_out_blocks:
            Wv[0, os_] = rng.normal(0, 0.5, (out, 1))
        Wo[0, 0, os_] = rng.normal(0, 0.5, out)
        W1 = rng.normal(0, 0.7, (d_ff, d))
        b1 = rng.normal(0, 0.3, d_ff)
        W2 = np.zeros((d, d_ff))
        W2[os_] = rng.normal(0, 0.5, (out, d_ff))
        blocks.append(Block(Wq, Wk, Wv, Wo, W1, b1, W2, np.zeros(d)))
    ro = np.zeros((1, d))
    ro[0, 3] = 1.0
    return Transformer(E=E, P=P, blocks=tuple(blocks), readout_W=ro, readout_b=np.zeros(1), attention="relu")
