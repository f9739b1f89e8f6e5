"""The Partition result: storage, neighbours, linear regions and exports."""

import networkx as nx
import numpy as np
import pytest

from regioncount import MLP, lower, random_maxout, random_mlp
from regioncount._domain import Box
from regioncount.engines._plane import partition_plane
from regioncount.networks._ops import code_length
from regioncount.results._partition import Partition


def tangent_lines_mlp(n: int, seed: int = 0, readout=None) -> MLP:
    """``n`` lines tangent to the circle of radius 1/2 at angles in [0, 2 pi / 3]: general position, every
    crossing within distance 1 of the origin (so inside [-1.5, 1.5]^2)."""
    rng = np.random.default_rng(seed)
    theta = (np.arange(n) + rng.uniform(0.2, 0.8, n)) * (2 * np.pi / 3) / n
    normals = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    ro = rng.uniform(0.5, 1.5, (1, n)) if readout is None else np.asarray(readout, dtype=np.float64).reshape(1, n)
    return MLP((normals, ro), (-0.5 * np.ones(n), np.zeros(1)))


def squares(layout, maps=None, codes=None) -> Partition:
    """A hand-made partition from a list of CCW polygons on the box [0, 2]^2 (no edge tags)."""
    polys = [np.asarray(p, dtype=np.float64) for p in layout]
    offsets = np.cumsum([0] + [len(p) for p in polys])
    areas = [0.5 * np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1]) for p in polys]
    R = len(polys)
    maps = np.arange(R, dtype=float).reshape(R, 1, 1) * np.ones((R, 1, 3)) if maps is None else np.asarray(maps)
    codes = np.arange(R).reshape(R, 1) if codes is None else codes
    return Partition(Box(0, 2, 2), np.concatenate(polys), offsets, maps, np.array(areas), codes)


def test_grid_of_squares_neighbours_share_edges_not_corners():
    sq = lambda x, y: [(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1)]
    # left column maps coincide: one linear region; right column differs
    maps = np.array([[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]], [[0.0, 1.0, 0.0]], [[0.0, 2.0, 0.0]]])
    p = squares([sq(0, 0), sq(0, 1), sq(1, 0), sq(1, 1)], maps=maps)
    np.testing.assert_array_equal(p.adjacency(), [[0, 1], [0, 2], [1, 3], [2, 3]])
    assert p.linear_regions() == 3
    assert p.n_regions == 4


def test_neighbours_found_when_the_two_sides_subdivide_an_edge_differently():
    # left: one region whose right side has a vertex at y = 0.5; right: two squares split at y = 1
    left = [(0, 0), (1, 0), (1, 0.5), (1, 2), (0, 2)]
    right_lo = [(1, 0), (2, 0), (2, 1), (1, 1)]
    right_hi = [(1, 1), (2, 1), (2, 2), (1, 2)]
    p = squares([left, right_lo, right_hi])
    np.testing.assert_array_equal(p.adjacency(), [[0, 1], [0, 2], [1, 2]])


def test_tagged_and_geometric_adjacency_agree_on_an_engine_partition():
    part = partition_plane(random_mlp(2, [8, 8, 8], seed=2), Box(-2, 2, 2))
    untagged = Partition(part.domain, part.vertices, part.offsets, part.maps, part.areas, part.codes)
    A = part.adjacency()
    np.testing.assert_array_equal(A, untagged.adjacency())
    assert A.shape[0] > part.n_regions
    assert np.all(A[:, 0] < A[:, 1])
    assert np.unique(A, axis=0).shape[0] == A.shape[0]
    G = part.to_networkx()
    assert nx.is_connected(G)
    # neighbours touch
    shapes = part.to_shapely()
    import shapely

    d = shapely.distance(shapes[A[:, 0]], shapes[A[:, 1]])
    assert np.all(d < 1e-9)


@pytest.mark.parametrize("n", [2, 5, 9])
def test_adjacency_of_lines_in_general_position(n):
    # each line is cut by the n - 1 others into n segments, each separating a distinct pair of cells
    part = partition_plane(tangent_lines_mlp(n, seed=n), Box(-1.5, 1.5, 2))
    assert part.n_regions == 1 + n + n * (n - 1) // 2
    assert part.adjacency().shape == (n * n, 2)
    assert part.linear_regions() == part.n_regions


def test_linear_regions_merge_across_a_unit_the_readout_ignores():
    n = 6
    ro = np.random.default_rng(1).uniform(0.5, 1.5, n)
    ro[2] = 0.0
    part = partition_plane(tangent_lines_mlp(n, seed=4, readout=ro), Box(-1.5, 1.5, 2))
    assert part.n_regions == 1 + n + n * (n - 1) // 2
    m = n - 1  # the cells of the other lines' arrangement
    assert part.linear_regions() == 1 + m + m * (m - 1) // 2
    labels = part.linear_region_labels()
    # merged regions have equal maps
    for lab in np.unique(labels):
        M = part.maps[labels == lab]
        np.testing.assert_allclose(M, M[:1].repeat(len(M), 0), atol=1e-12)


@pytest.mark.parametrize("net", [random_mlp(2, [6, 6, 6], seed=0), random_maxout(2, [4, 4], k=3, seed=1)])
def test_linear_regions_of_a_constant_readout_and_of_a_rescaled_one(net):
    import dataclasses

    part = partition_plane(net, Box(-2, 2, 2))
    # a zero readout makes the function constant: one linear region over all activation regions
    if isinstance(net, MLP):
        zero = MLP(net.weights[:-1] + (0 * net.weights[-1],), net.biases)
        scaled = MLP(net.weights[:-1] + (-3 * net.weights[-1],), net.biases)
    else:
        zero = dataclasses.replace(net, readout_W=0 * net.readout_W)
        scaled = dataclasses.replace(net, readout_W=-3 * net.readout_W)
    flat = partition_plane(zero, Box(-2, 2, 2))
    assert flat.n_regions == part.n_regions and flat.linear_regions() == 1
    # scaling the readout changes no equality between affine maps: the same linear regions
    again = partition_plane(scaled, Box(-2, 2, 2))
    np.testing.assert_array_equal(again.linear_region_labels(), part.linear_region_labels())


def test_storage_is_flat_and_codes_compact():
    net = random_mlp(2, [16, 16], seed=0)
    part = partition_plane(net, Box(-2, 2, 2))
    R = part.n_regions
    assert part.vertices.shape == (part.offsets[-1], 2)
    assert part.offsets.shape == (R + 1,)
    assert part.maps.shape == (R, 1, 3)
    assert part.codes.dtype == np.int32
    assert part.codes.shape == (R, code_length(lower(net)))
    assert part.code_bytes().shape == (R, 2 + 2)  # 16 ReLU bits per layer, packed
    np.testing.assert_array_equal(part.code_rows(np.array([3, 1])), part.codes[[3, 1]])
    # every polygon is counter-clockwise with its stored area
    for i in range(0, R, max(1, R // 20)):
        P = part.polygon(i)
        a = 0.5 * np.sum(P[:, 0] * np.roll(P[:, 1], -1) - np.roll(P[:, 0], -1) * P[:, 1])
        assert a > 0 and np.isclose(a, part.areas[i], rtol=1e-9)
    # bytes per region stay small (no padding to the widest polygon)
    assert part.nbytes / R < 400


def test_locate_and_shapely():
    part = partition_plane(random_mlp(2, [5, 5], seed=1), Box(-1, 1, 2))
    np.testing.assert_array_equal(part.locate(part.centroids()), np.arange(part.n_regions))
    assert np.all(part.locate([[5.0, 5.0], [-1.5, 0.0]]) == -1)
    shapes = part.to_shapely()
    import shapely

    np.testing.assert_allclose(shapely.area(shapes), part.areas, rtol=1e-12)
    assert np.all(shapely.is_valid(shapes))
    assert np.isclose(shapely.union_all(shapes).area, 4.0, rtol=1e-12)


def test_networkx_graph_and_graphml_roundtrip(tmp_path):
    part = partition_plane(random_maxout(2, [3, 3], k=3, seed=2), Box(-2, 2, 2))
    G = part.to_networkx()
    assert G.number_of_nodes() == part.n_regions
    assert G.number_of_edges() == part.adjacency().shape[0]
    assert G.nodes[0]["code"] == "".join(map(str, part.codes[0]))
    path = tmp_path / "regions.graphml"
    part.write_graphml(path)
    H = nx.read_graphml(path, node_type=int)
    assert sorted(H.nodes) == list(range(part.n_regions))
    assert {tuple(sorted(e)) for e in H.edges} == set(map(tuple, part.adjacency().tolist()))
    np.testing.assert_allclose([H.nodes[i]["area"] for i in range(part.n_regions)], part.areas)
    assert [H.nodes[i]["code"] for i in range(part.n_regions)] == part.code_strings()
    assert [p.name for p in tmp_path.iterdir()] == ["regions.graphml"]  # no temporary left behind
    with pytest.raises(ValueError, match=r"adjacency\(\)"):
        part.to_networkx(max_nodes=part.n_regions - 1)


def test_adjacency_across_coincident_argmax_boundaries():
    # one-dimensional heads: every score difference of a query vanishes on the same line q(u) = 0, where
    # the argmax jumps between keys that are not each other's rivals anywhere else
    from regioncount import random_transformer

    net = random_transformer(input_dim=2, tokens=4, d_model=2, heads=2, depth=1, d_ff=2, seed=11)
    part = partition_plane(net, Box(-2, 2, 2))
    untagged = Partition(part.domain, part.vertices, part.offsets, part.maps, part.areas, part.codes)
    np.testing.assert_array_equal(part.adjacency(), untagged.adjacency())
    assert nx.is_connected(part.to_networkx())


def test_partition_arrays_are_read_only_copies_and_caches_cannot_go_stale():
    part = partition_plane(random_mlp(2, [6, 6], seed=4), Box(-1, 1, 2))
    adjacency, codes, linear = part.adjacency().copy(), part.codes.copy(), part.linear_regions()
    for arr in (part.vertices, part.offsets, part.maps, part.areas, part.edge_tags, part.codes, part.adjacency()):
        with pytest.raises(ValueError, match="read-only"):
            arr.flat[0] = arr.flat[0] + 1
    with pytest.raises(ValueError, match="read-only"):
        part.polygon(0)[0, 0] = 9.0
    with pytest.raises(AttributeError, match="cannot be reassigned"):
        part.vertices = part.vertices[::-1]
    with pytest.raises(AttributeError, match="cannot be reassigned"):
        part.codes = codes[::-1]
    # a partition built from caller's arrays copies them: later writes by the caller change nothing
    verts, maps = part.vertices.copy(), part.maps.copy()
    other = Partition(part.domain, verts, part.offsets, maps, part.areas, part.codes, edge_tags=part.edge_tags)
    verts[:] = 0.0
    maps[:] = 0.0
    np.testing.assert_array_equal(other.vertices, part.vertices)
    np.testing.assert_array_equal(other.adjacency(), adjacency)
    assert other.linear_regions() == linear
    np.testing.assert_array_equal(other.codes, codes)


def test_shared_marks_the_labels_another_entry_also_takes():
    from regioncount.results._graph import shared

    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 7, 1000):
        for hi in (2, 40, 10**12):
            labels = rng.integers(-hi, hi, n)
            _, inv, count = np.unique(labels, return_inverse=True, return_counts=True)
            assert np.array_equal(shared(labels), count[inv.ravel()] > 1)


def test_dense_ranks_is_numpys_unique_with_its_inverse():
    from regioncount.results._graph import dense_ranks

    rng = np.random.default_rng(1)
    for n in (0, 1, 6, 500):
        for hi in (3, 10**15):
            values = rng.integers(-hi, hi, n)
            want_u, want_inv = np.unique(values, return_inverse=True)
            got_u, got_inv = dense_ranks(values)
            assert np.array_equal(got_u, want_u) and np.array_equal(got_inv, want_inv.ravel())
