"""Small networks with known region counts, shared by the tests."""

import itertools

import numpy as np

from regioncount import MLP


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
