"""``whole_plane_box``: a box that meets every region of R^2, against closed forms and bigger boxes."""

import json

import numpy as np
import pytest
from _shared import shared_file

from regioncount import MLP, Maxout, random_maxout, random_mlp, random_transformer
from regioncount._domain import Box
from regioncount._errors import RegionCountError
from regioncount._io import load_model, save_model
from regioncount.engines._plane import partition_plane
from regioncount.engines._whole_plane import region_constraints, whole_plane_box
from regioncount.networks import lower
from regioncount_cli.main import main


def line_mlp(lines) -> MLP:
    """One ReLU layer with unit ``i`` equal to ``a_i x1 + b_i x2 + c_i`` for ``lines[i] = (a_i, b_i, c_i)``."""
    L = np.asarray(lines, dtype=np.float64)
    return MLP((L[:, :2], np.ones((1, len(L)))), (L[:, 2], np.zeros(1)))


def count(net, L) -> int:
    return partition_plane(net, Box([-L, -L], [L, L])).n_regions


def test_torch_16x3_file_has_1389_regions_in_the_plane():
    wp = whole_plane_box(load_model(shared_file("torch_mlp_w16_d3_s0.npz")))
    assert wp.partition.n_regions == 1389


def test_the_box_holds_every_crossing_of_the_first_layer():
    """Every crossing of two first-layer lines is a vertex of the partition (their bits are in every code),
    so the box must hold it strictly; and the search had to grow from [-2, 2]^2 (472 regions there)."""
    for net in (load_model(shared_file("torch_mlp_w16_d3_s0.npz")), random_mlp(2, [12, 6], seed=5, init="normal")):
        wp = whole_plane_box(net)
        W, b = net.weights[0], net.biases[0]
        i, j = np.triu_indices(W.shape[0], 1)
        det = W[i, 0] * W[j, 1] - W[i, 1] * W[j, 0]
        x = (-b[i] * W[j, 1] + b[j] * W[i, 1]) / det
        y = (-W[i, 0] * b[j] + W[j, 0] * b[i]) / det
        assert max(np.abs(x).max(), np.abs(y).max()) < wp.half_width
        assert len(wp.rounds) > 1 and wp.rounds[0] == 2.0


def test_lines_in_general_position_far_out_give_zaslavsky():
    """n lines, no two parallel, no three concurrent, crossing up to ~1e4 away: 1 + n + C(n, 2) regions
    (Zaslavsky), whatever box the crossings need."""
    rng = np.random.default_rng(0)
    n = 9
    theta = np.sort(rng.uniform(0, np.pi, n))
    normals = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    net = line_mlp(np.column_stack([normals, rng.uniform(-1, 1, n) * 10.0 ** rng.integers(0, 4, n)]))
    wp = whole_plane_box(net)
    assert count(net, 2.0) < 1 + n + n * (n - 1) // 2
    assert wp.partition.n_regions == 1 + n + n * (n - 1) // 2


def test_parallel_lines_without_vertices_are_all_reached():
    """Four parallel lines, the farthest at x = 3e4, and no vertex at all: the box must reach every line."""
    net = line_mlp([(1.0, 0.0, 0.0), (1.0, 0.0, -50.0), (-2.0, 0.0, -600.0), (1.0, 0.0, -3e4)])
    wp = whole_plane_box(net)
    assert wp.half_width > 3e4
    assert wp.partition.n_regions == 5
    grid = line_mlp([(1.0, 0.0, 0.0), (1.0, 0.0, -50.0), (0.0, 1.0, 700.0), (0.0, -1.0, 5.0)])
    assert whole_plane_box(grid).partition.n_regions == 9  # 3 x 3 parallel strips


def test_concurrent_and_duplicate_lines_far_out():
    """n distinct lines exactly through (300, -200) (small integer normals: every offset is exact) give 2n
    regions; duplicates add none."""
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0], [1.0, 2.0]])
    c = -(a @ np.array([300.0, -200.0]))
    lines = np.column_stack([a, c])
    net = line_mlp(np.concatenate([lines, 2.0 * lines[:2], -3.0 * lines[2:3]]))
    wp = whole_plane_box(net)
    assert wp.half_width > 300 and wp.partition.n_regions == 2 * len(a)


def test_nearly_concurrent_lines_are_settled_exactly():
    """Lines through (300, -200) with irrational directions: the rounded offsets miss the common point by
    ~1e-13, far below the float clip's resolution; the exact check still accepts a box that holds them."""
    n = 5
    theta = np.arange(n) * np.pi / n + 0.1
    a = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    net = line_mlp(np.column_stack([a, -(a @ np.array([300.0, -200.0]))]))
    wp = whole_plane_box(net)
    assert 300 < wp.half_width < 1e4 and wp.partition.n_regions >= 2 * n


def test_one_maxout_unit_with_a_far_apex():
    """One rank-4 maxout unit whose pieces are w_r . (x - p), w_r the four unit vectors, p = (-400, 250)
    (exact): 4 regions meeting at p."""
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])[:, None, :]  # (k, 1, 2)
    b = -(W[:, 0] @ np.array([-400.0, 250.0]))[:, None]  # (k, 1)
    net = Maxout((W,), (b,), np.ones((1, 1)), np.zeros(1))
    wp = whole_plane_box(net)
    assert wp.half_width > 400 and wp.partition.n_regions == 4


@pytest.mark.parametrize(
    "make",
    [
        lambda s: random_mlp(2, [8, 8], seed=s),
        lambda s: random_mlp(2, [10, 10, 10], seed=s, init="normal"),
        lambda s: random_maxout(2, [4, 4], k=3, seed=s),
    ],
)
def test_random_networks_a_bigger_box_finds_nothing_more(make):
    """Counts on [-L, L]^2 never fall with L, and a box 2^10 times the whole-plane box adds no region."""
    for seed in range(2):
        net = make(seed)
        wp = whole_plane_box(net)
        n = wp.partition.n_regions
        assert count(net, 2.0) <= n
        assert count(net, 2.0**10 * wp.half_width) == n


def test_region_constraints_cut_out_each_region():
    """Each region's polygon satisfies its own halfplanes (at its vertices, to rounding) and its
    centroid satisfies them strictly: the constraints are those of the region's code."""
    for net in (random_mlp(2, [6, 6], seed=1), random_maxout(2, [3, 3], k=3, seed=2)):
        part = partition_plane(net, Box([-3, -3], [3, 3]))
        F = region_constraints(lower(net), part.codes)
        scale = np.abs(F).sum(axis=2)
        for r in range(part.n_regions):
            P = part.polygon(r)
            vals = P @ F[r, :, :2].T + F[r, :, 2]
            assert np.all(vals >= -1e-9 * scale[r])
            c = P.mean(axis=0)
            live = scale[r] > 0
            assert np.all(((c @ F[r, :, :2].T + F[r, :, 2]) > 0)[live])


def test_refusals():
    with pytest.raises(RegionCountError, match="Transformer"):
        whole_plane_box(random_transformer(2, tokens=2, d_model=4, depth=1))
    with pytest.raises(RegionCountError, match="2 inputs"):
        whole_plane_box(random_mlp(3, [4], seed=0))
    # two lines crossing near x = 1e6: no box up to 1e3 holds the vertex
    far = line_mlp([(1.0, 0.0, -1e6), (0.0, 1.0, 0.0)])
    with pytest.raises(RegionCountError, match="no box up to"):
        whole_plane_box(far, max_half_width=1e3)
    assert whole_plane_box(far).partition.n_regions == 4


def test_cli_whole_plane(capsys, tmp_path):
    path = tmp_path / "lines.npz"
    save_model(line_mlp([(1.0, 0.0, -500.0), (0.0, 1.0, 0.0), (1.0, 1.0, 20.0)]), path)
    code = main(["count", str(path), "--whole-plane", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert res["regions"] == 7 and res["exact"] is True and res["whole_plane"]["box"][1] > 500
    code = main(["count", str(path), "--whole-plane", "--method", "sample"])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("regioncount: error:")
