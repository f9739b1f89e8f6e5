"""The float filters of regioncount/_predicates.py against exact rational arithmetic: a sign they decide is the
exact sign, a radius they give holds the exact point, and they decide most well-conditioned cases."""

from fractions import Fraction

import numpy as np
import pytest

from regioncount._predicates import int_line, int_vertex_sign, intersections_bounded, vertex_signs_bounded


def _perturbed(L: np.ndarray, scale: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Float lines near the exact lines ``L`` and, per line, an error that bounds every coefficient's distance
    from ``L`` (measured exactly, rounded up)."""
    l = L + rng.uniform(-1, 1, L.shape) * scale[:, None]
    e = np.empty(L.shape[0])
    for i in range(L.shape[0]):
        worst = max(abs(Fraction(float(a)) - Fraction(float(b))) for a, b in zip(l[i], L[i], strict=True))
        e[i] = np.nextafter(float(worst), np.inf) if worst else 0.0
    return l, e


def _exact_sign(L1, L2, L3) -> int:
    return int_vertex_sign(int_line(L1), int_line(L2), int_line(L3))


def _concurrent(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triples of lines through a common point, and copies of the third nudged off it by a few ulps of its
    constant, so the exact signs are 0, +1 and -1 at distances far below any float bound."""
    P = rng.integers(-8, 9, (n, 2)).astype(np.float64) / 4
    lines = []
    for _ in range(3):
        a, b = rng.integers(-9, 10, (2, n)).astype(np.float64)
        b[(a == 0) & (b == 0)] = 1.0
        lines.append(np.stack([a, b, -(a * P[:, 0] + b * P[:, 1])], axis=1))  # small integers: exact
    L1, L2, L3 = lines
    par = L1[:, 0] * L2[:, 1] - L1[:, 1] * L2[:, 0] == 0
    L2[par] = np.stack([-L1[par, 1], L1[par, 0], L1[par, 1] * P[par, 0] - L1[par, 0] * P[par, 1]], axis=1)
    nudged = L3.copy()
    nudged[:, 2] = np.nextafter(nudged[:, 2], np.where(rng.random(n) < 0.5, np.inf, -np.inf))
    return L1, L2, np.concatenate([L3, nudged])


@pytest.mark.parametrize("seed", range(3))
def test_vertex_signs_bounded_decide_only_the_exact_sign(seed):
    rng = np.random.default_rng(seed)
    n = 400
    L = [rng.normal(size=(n, 3)) for _ in range(3)]
    scales = [10.0 ** rng.uniform(-16, -9, n) for _ in range(3)]
    pert = [_perturbed(Li, s, rng) for Li, s in zip(L, scales, strict=True)]
    (l1, e1), (l2, e2), (l3, e3) = pert
    got = vertex_signs_bounded(l1, e1, l2, e2, l3, e3)
    exact = np.array([_exact_sign(L[0][i], L[1][i], L[2][i]) for i in range(n)])
    decided = got != 2
    assert np.array_equal(got[decided], exact[decided])
    assert decided.mean() > 0.95  # random lines meet far from the third: the filter decides nearly all

    # lines through one point, and the third nudged by an ulp: never a wrong sign, and a zero never decided
    L1, L2, L3 = _concurrent(rng, n)
    L1, L2 = np.concatenate([L1, L1]), np.concatenate([L2, L2])
    z = np.zeros(2 * n)
    got = vertex_signs_bounded(L1, z, L2, z, L3, z)
    exact = np.array([_exact_sign(L1[i], L2[i], L3[i]) for i in range(2 * n)])
    assert np.all(exact[:n] == 0) and np.all(exact[n:] != 0)
    assert np.all(got[:n] == 2)
    decided = got != 2
    assert np.array_equal(got[decided], exact[decided])
    # the same with inexact lines: the ulp is far inside the error, so nothing is decided wrongly
    got = vertex_signs_bounded(L1, z + 1e-14, L2, z, L3, z)
    assert np.all((got == 2) | (got == exact))
    # an infinite error decides nothing
    assert np.all(vertex_signs_bounded(L1, z + np.inf, L2, z, L3, z) == 2)


@pytest.mark.parametrize("seed", range(3))
def test_intersections_bounded_hold_the_exact_point(seed):
    rng = np.random.default_rng(10 + seed)
    n = 400
    L1, L2 = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    L2[:50] = L1[:50] + rng.normal(size=(50, 3)) * 1e-9  # nearly parallel: far-off points, wide radii
    (l1, e1), (l2, e2) = _perturbed(L1, 10.0 ** rng.uniform(-16, -10, n), rng), _perturbed(L2, np.full(n, 1e-13), rng)
    P, r = intersections_bounded(l1, e1, l2, e2)
    ok = np.isfinite(r)
    assert ok.mean() > 0.9
    for i in np.flatnonzero(ok).tolist():
        a1, b1, c1 = (Fraction(float(v)) for v in L1[i])
        a2, b2, c2 = (Fraction(float(v)) for v in L2[i])
        Z = a1 * b2 - b1 * a2
        x, y = (b1 * c2 - c1 * b2) / Z, (c1 * a2 - a1 * c2) / Z
        assert abs(Fraction(float(P[i, 0])) - x) + abs(Fraction(float(P[i, 1])) - y) <= Fraction(float(r[i]))
    # parallel lines have no point
    _, r = intersections_bounded(L1[:5], np.zeros(5), 2 * L1[:5] + [[0, 0, 1]], np.zeros(5))
    assert np.all(np.isinf(r))
