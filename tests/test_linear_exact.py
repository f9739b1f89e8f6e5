"""Linear regions decided in exact arithmetic (results/_linear.py): no tolerance merges two neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from regioncount import MLP, Box, random_mlp
from regioncount._errors import RegionCountError
from regioncount.engines._plane import partition_plane

BOX = Box(-1, 1, 2)


def _scaled(net: MLP, scales: list) -> MLP:
    """``net`` with layer l's weights times ``scales[l]`` and its bias times the product of scales up to l: every
    pre-activation is scaled by a positive number, so the partition is the same and every map is scaled."""
    W, b, acc = [], [], 1.0
    for w, bb, s in zip(net.weights, net.biases, scales, strict=True):
        acc *= s
        W.append(w * s)
        b.append(bb * acc)
    return MLP(tuple(W), tuple(b))


def test_units_scaled_to_1e_17_beside_ordinary_ones_keep_their_linear_regions():
    # one hidden layer: neighbours across unit j's line differ by c_j w_j != 0, so linear regions = regions
    net = random_mlp(2, [9], seed=4)
    c = net.weights[1].copy()
    c[0, :4] *= 1e-17
    net = MLP((net.weights[0], c), net.biases)
    part = partition_plane(net, BOX)
    assert part.linear_exact
    assert part.linear_regions() == part.n_regions
    # the float rule with its tolerance merged them (the bug this replaces)
    assert part.linear_regions(rtol=1e-9) < part.n_regions


def test_a_unit_scaled_by_2_to_the_minus_60_changes_no_linear_region_count():
    net = random_mlp(2, [7, 6], seed=2)
    base = partition_plane(net, BOX)
    c = net.weights[2].copy()
    c[0, :2] *= 2.0**-60  # last hidden layer: the partition is unchanged, the units' maps are tiny
    tiny = partition_plane(MLP((net.weights[0], net.weights[1], c), net.biases), BOX)
    assert tiny.n_regions == base.n_regions
    assert np.array_equal(np.unique(tiny.codes, axis=0), np.unique(base.codes, axis=0))
    assert tiny.linear_regions() == base.linear_regions()
    assert tiny.linear_regions(rtol=1e-9) < base.linear_regions()  # the float rule is fooled


@pytest.mark.parametrize("s", [500, -500])
def test_function_preserving_rescales_by_2_to_the_500_change_no_linear_region_count(s):
    net = random_mlp(2, [6, 5], seed=7)
    W = [w.copy() for w in net.weights]
    b = [x.copy() for x in net.biases]
    for layer in (0, 1):  # one hidden unit of each layer: in-weights and bias times 2^s, out-weights times 2^-s
        W[layer][1] *= 2.0**s
        b[layer][1] *= 2.0**s
        W[layer + 1][:, 1] *= 2.0**-s
    base = partition_plane(net, BOX)
    scaled = partition_plane(MLP(tuple(W), tuple(b)), BOX)
    assert scaled.n_regions == base.n_regions
    assert scaled.linear_regions() == base.linear_regions()


def test_weights_scaled_towards_underflow_give_the_exact_count_or_refuse():
    net = random_mlp(2, [8, 8], seed=1)
    base = partition_plane(net, BOX)
    small = _scaled(net, [1e-300, 1e-10, 1e-10])  # output maps ~1e-320: subnormal in float64
    try:
        part = partition_plane(small, BOX)
    except RegionCountError:
        return  # a clear refusal is an honest answer
    assert part.n_regions == base.n_regions
    assert part.linear_regions() == base.linear_regions()
    assert part.stats["linear_exact"] > 0  # the float maps could not decide: rational arithmetic did


def _fraction_maps(net: MLP, code) -> tuple:
    """The output map of the region with ``code`` on the box, with plain Fractions (a second implementation)."""
    from fractions import Fraction

    A = [[Fraction(1), Fraction(0), Fraction(0)], [Fraction(0), Fraction(1), Fraction(0)]]  # x_i = u_i
    pos = 0
    for layer, (W, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        out = []
        for j in range(W.shape[0]):
            row = [sum(Fraction(W[j, i]) * A[i][c] for i in range(len(A))) for c in range(3)]
            row[2] += Fraction(b[j])
            out.append(row)
        if layer < len(net.weights) - 1:
            bits = code[pos : pos + W.shape[0]]
            pos += W.shape[0]
            out = [r if bit else [Fraction(0)] * 3 for r, bit in zip(out, bits, strict=True)]
        A = out
    return tuple(tuple(r) for r in A)


def test_weights_all_scaled_by_1e_300_give_the_exact_linear_regions():
    import networkx as nx

    net = random_mlp(2, [8, 8], seed=1)
    tiny = MLP(tuple(w * 1e-300 for w in net.weights), tuple(b * 1e-300 for b in net.biases))
    try:
        part = partition_plane(tiny, BOX)
    except RegionCountError:
        return  # a clear refusal is an honest answer
    maps = [_fraction_maps(tiny, c) for c in part.codes]
    G = nx.Graph()
    G.add_nodes_from(range(part.n_regions))
    G.add_edges_from((int(i), int(j)) for i, j in part.adjacency() if maps[i] == maps[j])
    assert part.linear_regions() == nx.number_connected_components(G)
    assert part.linear_regions() > 1  # the float maps underflow to constants; the exact ones do not


def test_polytopes_decide_linear_regions_exactly_too():
    from regioncount.engines._space import partition_space

    net = random_mlp(3, [7], seed=2)
    c = net.weights[1].copy()
    c[0, :3] *= 1e-17  # one hidden layer: neighbours across any unit's plane differ, so linear = regions
    poly = partition_space(MLP((net.weights[0], c), net.biases), Box(-1, 1, 3))
    assert poly.linear_exact
    assert poly.linear_regions() == poly.n_regions
    assert poly.linear_regions(rtol=1e-9) < poly.n_regions


def _recomposed_labels(part):
    """The merge with every region's map re-composed from its code (results/_linear.output_maps)."""
    from regioncount.results._linear import linear_labels

    x0, V = part.domain.input_map()
    stats: dict = {}
    lab = linear_labels(part.n_regions, part.adjacency(), part.program, part.codes, x0, V, stats)
    return lab, stats


@pytest.mark.parametrize("seed", [0, 1, 4, 7])
def test_the_engine_maps_decide_linear_regions_as_the_recomposed_maps_do(seed):
    # dead and merged units: a hidden layer whose outgoing weights are partly zero makes neighbours share maps
    net = random_mlp(2, [12, 10, 8], seed=seed)
    W = [w.copy() for w in net.weights]
    W[3][:, :4] = 0.0  # four last-layer units feed nothing: crossing them keeps the map
    W[2][:3, :] = 0.0  # three units of the last hidden layer are constants
    net = MLP(tuple(W), net.biases)
    part = partition_plane(net, BOX)
    got = part.linear_region_labels()  # first: the candidate pairs, before the adjacency below is cached
    lab, rec = _recomposed_labels(part)
    assert np.array_equal(got, lab)
    assert part.linear_regions() < part.n_regions  # the case has merges to decide
    # the candidate grids keep only neighbours whose maps can be equal: a subset of every neighbour pair
    assert 0 < part.stats["linear_pairs"] <= rec["linear_pairs"]


def test_the_plane_merge_matches_no_edge_where_no_two_maps_can_be_equal():
    # one torch-init hidden layer: every region's map is its own, so the candidate grids leave no pair
    part = partition_plane(random_mlp(2, [40], seed=2, init="torch"), BOX)
    got = part.linear_region_labels()
    assert part._adjacency is None and "linear_pairs" not in part.stats  # no edge matched, no map recomputed
    lab, rec = _recomposed_labels(part)
    assert rec["linear_pairs"] > 100  # the general path decides every neighbour pair, and merges none
    assert np.array_equal(got, lab)
    assert part.linear_regions() == part.n_regions


def test_the_engine_maps_decide_linear_regions_on_a_slice():
    from regioncount import Slice

    net = random_mlp(3, [9, 7], seed=5)
    W = [w.copy() for w in net.weights]
    W[2][:, :3] = 0.0
    net = MLP(tuple(W), net.biases)
    dom = Slice([0.1, -0.2, 0.3], [1.0, 0.5, -0.25], [0.0, 1.0, 0.75], (-1.5, -1.0), (1.0, 2.0))
    part = partition_plane(net, dom)
    lab, _ = _recomposed_labels(part)
    assert np.array_equal(part.linear_region_labels(), lab)
    assert part.linear_regions() < part.n_regions


@pytest.mark.parametrize("seed", [0, 3])
def test_the_space_engine_maps_find_the_pairs_the_recomposed_maps_decide(seed):
    from regioncount.engines._space import partition_space

    net = random_mlp(3, [8, 7], seed=seed)
    W = [w.copy() for w in net.weights]
    W[2][:, :3] = 0.0  # three last-layer units feed nothing: crossing them keeps the map
    W[1][:2, :] = 0.0  # two units of the last hidden layer are constants
    net = MLP(tuple(W), net.biases)
    poly = partition_space(net, Box(-2, 2, 3))
    assert poly._float_output is not None
    got = poly.linear_region_labels()  # first: before the adjacency below is cached (the general path then)
    assert poly.stats["linear_pairs"] > 0
    lab, _ = _recomposed_labels(poly)
    assert np.array_equal(got, lab)
    assert poly.linear_regions() < poly.n_regions  # the case has merges to decide


def test_the_space_engine_maps_skip_the_recomposition_where_no_maps_can_be_equal():
    from regioncount.engines._space import partition_space

    poly = partition_space(random_mlp(3, [8, 8], seed=1, init="torch"), Box(-2, 2, 3))
    got = poly.linear_region_labels()
    assert "linear_pairs" not in poly.stats  # no candidate pair: nothing recomputed from the codes
    lab, rec = _recomposed_labels(poly)
    assert np.array_equal(got, lab)
    assert rec["linear_pairs"] > 0  # the general path decides every neighbour pair
    assert poly.linear_regions() == poly.n_regions
