"""The comparison baseline ``benchmarks/edge_subdivision.py`` (our float32 edge subdivision, Berzins 2023)
counts what the exact engines count on small torch-init nets in 2, 3 and 4 dimensions, and in 2D its cell
count equals the Euler-characteristic count of the complex it built."""

import sys
from pathlib import Path

import pytest

import regioncount as rc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from edge_subdivision import edge_subdivision  # noqa: E402


@pytest.mark.parametrize(
    ("q", "widths", "seed"),
    [(2, (8,), 0), (2, (16, 16, 16), 0), (2, (24, 24), 3), (3, (10, 10), 0), (3, (8, 8, 8), 2), (4, (6, 6), 0)],
)
def test_edge_subdivision_equals_the_exact_count(q, widths, seed):
    net = rc.random_mlp(q, widths, seed=seed, init="torch")
    es = edge_subdivision(net.weights[:-1], net.biases[:-1], [-2.0] * q, [2.0] * q)
    exact = (rc.partition_plane if q == 2 else rc.partition_space)(net, rc.Box([-2.0] * q, [2.0] * q)).n_regions
    assert es["regions"] == exact
    assert (es["face_anomalies"], es["vertex_anomalies"], es["ties"]) == (0, 0, 0)
    if q == 2:
        assert es["regions_euler"] == exact


def test_one_layer_in_the_plane_is_its_line_arrangement():
    """n lines through the box in general position: the box's regions are 1 + n + (crossings inside)."""
    import numpy as np

    rng = np.random.default_rng(5)
    W = rng.normal(size=(7, 2))
    b = rng.uniform(-0.5, 0.5, 7)
    es = edge_subdivision([W], [b], [-1.0, -1.0], [1.0, 1.0])
    crossings = 0
    for i in range(7):
        for j in range(i + 1, 7):
            x = np.linalg.solve(W[[i, j]], -b[[i, j]])
            crossings += bool(np.all(np.abs(x) < 1))
    lines_in = sum(
        bool(np.ptp(np.sign(np.array([[sx, sy] for sx in (-1, 1) for sy in (-1, 1)]) @ W[i] + b[i])) > 0)
        for i in range(7)
    )
    assert es["regions"] == 1 + lines_in + crossings
