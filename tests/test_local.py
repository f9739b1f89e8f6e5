"""Local complexity: regions meeting the L-infinity ball around each point, against closed forms."""

import itertools

import numpy as np
import pytest
from _nets import lines_mlp

from regioncount import MLP, DomainError, local_complexity, read_points


def _lines(net: MLP):
    """``(normals (n, 2), offsets (n,))`` of a one-layer net: unit i switches on ``normals_i . x = offsets_i``."""
    return np.asarray(net.weights[0]), -np.asarray(net.biases[0])


def _arrangement_in_box(N, o, lo, hi) -> int:
    """Regions of lines ``N x = o`` (general position) inside the open box ``(lo, hi)``: 1 + (lines crossing
    it) + (crossings inside it), each line a chord of the convex box (Euler's formula)."""
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    s = corners @ N.T - o  # (4, n)
    cross = (s.min(axis=0) < 0) & (s.max(axis=0) > 0)
    inside = 0
    for i, j in itertools.combinations(np.flatnonzero(cross), 2):
        p = np.linalg.solve(N[[i, j]], o[[i, j]])
        inside += bool(np.all(p > lo) and np.all(p < hi))
    return 1 + int(cross.sum()) + inside


@pytest.mark.parametrize("n,radius", [(5, 0.2), (8, 0.35), (8, 0.05)])
def test_one_layer_ball_counts_the_lines_meeting_it(n, radius):
    net = lines_mlp(n, seed=n)
    N, o = _lines(net)
    X = np.random.default_rng(n).uniform(-0.8, 0.8, (40, 2))
    res = local_complexity(net, X, radius)
    want = [_arrangement_in_box(N, o, x - radius, x + radius) for x in X]
    assert res["per_point"] == want
    assert res["exact"] and res["ball"] == "box"
    assert res["mean"] == pytest.approx(np.mean(want)) and res["max"] == max(want)
    assert len(set(want)) > 1  # the points see different numbers of lines: not a constant by construction


def test_small_radius_gives_one_away_from_boundaries():
    net = lines_mlp(6, seed=1)
    N, o = _lines(net)
    X = np.random.default_rng(2).uniform(-1, 1, (60, 2))
    dist = np.min(np.abs(X @ N.T - o) / np.linalg.norm(N, axis=1), axis=1)
    for r in (1e-3, 1e-6):
        away = dist > 2 * r  # the box of half-width r lies within distance r sqrt 2 of x
        res = local_complexity(net, X[away], r)
        assert res["per_point"] == [1] * int(away.sum()) and away.sum() > 40
    # a point on a line sees its two sides at any radius
    p = o[0] * N[0] / np.dot(N[0], N[0])
    assert local_complexity(net, p[None], 1e-6)["per_point"] == [2]


def test_sampled_estimate_is_a_lower_bound():
    net = lines_mlp(8, seed=3)
    X = np.random.default_rng(4).uniform(-0.8, 0.8, (12, 2))
    ex = local_complexity(net, X, 0.3)
    sm = local_complexity(net, X, 0.3, method="sample", samples=2000)
    assert not sm["exact"] and sm["sampled_points"] == 12
    assert all(s <= e for s, e in zip(sm["per_point"], ex["per_point"], strict=True))
    assert sum(sm["per_point"]) >= 0.8 * sum(ex["per_point"])


def test_slice_with_coordinate_directions_is_the_ball():
    net = lines_mlp(7, seed=5)
    X = np.random.default_rng(6).uniform(-0.8, 0.8, (10, 2))
    box = local_complexity(net, X, 0.25)
    sl = local_complexity(net, X, 0.25, directions=np.eye(2))
    assert sl["ball"] == "slice" and sl["per_point"] == box["per_point"]


def test_slice_in_four_dimensions_counts_the_traced_lines():
    """Hyperplanes of a 4-input one-layer net cut the slice x + u1 v1 + u2 v2 in lines (n . V) u = o - n . x."""
    rng = np.random.default_rng(7)
    W = rng.normal(size=(6, 4))
    b = rng.normal(scale=0.3, size=6)
    net = MLP((W, rng.normal(size=(1, 6))), (b, np.zeros(1)))
    X = rng.uniform(-0.5, 0.5, (15, 4))
    r = 0.6
    res = local_complexity(net, X, r, seed=11)
    assert res["ball"] == "slice"  # dimension 4: a slice by default, seeded random orthonormal directions
    V = np.array(res["directions"])
    assert np.allclose(np.einsum("nqi,nqj->nij", V, V), np.eye(2))
    want = [_arrangement_in_box(W @ V[i], -b - W @ x, -np.full(2, r), np.full(2, r)) for i, x in enumerate(X)]
    assert res["per_point"] == want
    again = local_complexity(net, X, r, seed=11)
    assert again["per_point"] == res["per_point"]  # same seed, same directions


def test_three_dimensional_ball_of_axis_planes():
    """Planes x_i = c (a grid) split a box into the product of the pieces of each axis."""
    cuts = [(-0.5, 0.0, 0.5), (-0.25, 0.25), (0.1,)]
    rows, bias = [], []
    for ax, cs in enumerate(cuts):
        for c in cs:
            w = np.zeros(3)
            w[ax] = 1.0
            rows.append(w)
            bias.append(-c)
    net = MLP((np.array(rows), np.ones((1, len(rows)))), (np.array(bias), np.zeros(1)))
    X = np.random.default_rng(8).uniform(-0.7, 0.7, (10, 3))
    r = 0.3
    res = local_complexity(net, X, r)
    want = [int(np.prod([1 + sum(x[ax] - r < c < x[ax] + r for c in cs) for ax, cs in enumerate(cuts)])) for x in X]
    assert res["per_point"] == want and res["ball"] == "box"


def test_points_files_and_bad_input(tmp_path):
    X = np.array([[0.1, 0.2], [0.3, -0.4]])
    np.save(tmp_path / "p.npy", X)
    (tmp_path / "p.csv").write_text("x,y\n0.1,0.2\n0.3,-0.4\n")
    assert np.array_equal(read_points(tmp_path / "p.npy"), X)
    assert np.array_equal(read_points(tmp_path / "p.csv"), X)
    (tmp_path / "bad.csv").write_text("1,nan\n")
    with pytest.raises(DomainError, match="non-finite"):
        read_points(tmp_path / "bad.csv")
    with pytest.raises(DomainError, match="radius"):
        local_complexity(lines_mlp(3), X, 0.0)
    with pytest.raises(DomainError, match="points must be"):
        local_complexity(lines_mlp(3), np.zeros((2, 3)), 0.1)
