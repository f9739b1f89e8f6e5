"""ReLU classifiers whose positive set is a known polyhedral shape (closed forms for topology tests).

Every shape is built from L1 balls: ``d_c(x) = sum_i |x_i - c_i|`` takes one hidden layer of ``2q`` units
(``|t| = relu(t) + relu(-t)``) and is exact, so a ball ``d_c < rho`` is a cross-polytope (a diamond in 2D, an
octahedron in 3D). Weights are dyadic, so every breakpoint is an exact float.
"""

from __future__ import annotations

import numpy as np

from regioncount import MLP


def _abs_units(centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Layer 1: for each centre ``c`` the ``2q`` units ``relu(+-(x_i - c_i))``, whose sum is ``d_c``."""
    k, q = centres.shape
    W, b = [], []
    for c in centres:
        for i in range(q):
            for s in (1.0, -1.0):
                w = np.zeros(q)
                w[i] = s
                W.append(w)
                b.append(-s * c[i])
    return np.array(W), np.array(b)


def _sum_rows(k: int, q: int) -> np.ndarray:
    """``(k, 2qk)``: row j sums the units of centre j (so it reads ``d_{c_j}``)."""
    S = np.zeros((k, 2 * q * k))
    for j in range(k):
        S[j, 2 * q * j : 2 * q * (j + 1)] = 1.0
    return S


def ball_with_holes(centre, rho: float, holes, radii, depth: float) -> MLP:
    """Logit ``z = (rho - d_0) - depth * sum_j relu(r_j - d_j)``: positive inside the ball ``d_0 < rho`` and
    outside each hole ``depth (r_j - d_j) > rho - d_0`` (a convex set inside ``d_j < r_j`` wherever ``d_0`` is
    affine there). A hole centred at ``centre`` shares its units. 2 -> (2q m) -> (2 + k) -> 1."""
    centre = np.asarray(centre, float)
    holes = np.asarray(holes, float).reshape(-1, centre.size)
    q = centre.size
    cs = [centre] + [h for h in holes if not np.array_equal(h, centre)]
    C = np.array(cs)
    W1, b1 = _abs_units(C)
    S = _sum_rows(len(cs), q)
    idx = [
        0 if np.array_equal(h, centre) else 1 + sum(1 for g in holes[:j] if not np.array_equal(g, centre))
        for j, h in enumerate(holes)
    ]
    W2 = np.vstack([-S[0], S[0]] + [-S[i] for i in idx])
    b2 = np.array([rho, -rho] + [float(r) for r in radii])
    W3 = np.array([[1.0, -1.0] + [-float(depth)] * len(idx)])
    return MLP((W1, W2, W3), (b1, b2, np.zeros(1)))


def union_of_balls(centres, radii, delta: float) -> MLP:
    """Logit ``z = sum_j relu(r_j - d_j) - delta``: positive on the union of the balls ``d_j < r_j - delta``."""
    C = np.asarray(centres, float)
    k, q = C.shape
    W1, b1 = _abs_units(C)
    W2 = -_sum_rows(k, q)
    b2 = np.asarray(radii, float)
    return MLP((W1, W2, np.ones((1, k))), (b1, b2, np.array([-float(delta)])))


def annulus(q: int = 2) -> MLP:
    """The L1 annulus (2D) or shell (3D) ``1/2 < |x|_1 < 1``: ``z = (1 - d) - 2 relu(3/4 - d)``."""
    return ball_with_holes(np.zeros(q), 1.0, np.zeros((1, q)), [0.75], 2.0)


def disc_with_holes(k: int) -> MLP:
    """The diamond ``|x|_1 < 2`` with ``k <= 4`` holes, one in each of the first ``k`` quadrants (centred at
    ``(+-1/2, +-1/2)``, inside ``d_j < 1/4`` and away from the axes, where ``d_0`` is affine)."""
    quadrants = np.array([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])[:k]
    return ball_with_holes(np.zeros(2), 2.0, quadrants, [0.25] * k, 8.0)


def disjoint_discs(k: int) -> MLP:
    """``k`` disjoint diamonds of radius 1/4 centred at ``(-2 + 1/2 + j, 0)``-ish spacing 1 on the line
    ``x_2 = 0`` (balls ``d_j < 3/8 - 1/8``), in the box [-2, 2]^2 for ``k <= 4``."""
    centres = np.array([[-1.5 + j, 0.25 * (j % 2)] for j in range(k)])
    return union_of_balls(centres, [0.375] * k, 0.125)


def touching_diamonds() -> MLP:
    """Logit ``z = min(d_1, d_2) - 1/2`` with ``d_{1,2}`` the L1 distances to ``(-+1/2, 0)``: negative on two
    open diamonds that touch at the origin only (``min(a, b) = (a + b - |a - b|) / 2``)."""
    W1 = np.array([[1.0, 0], [-1, 0], [1, 0], [-1, 0], [0, 1], [0, -1]])
    b1 = np.array([0.5, -0.5, -0.5, 0.5, 0, 0])
    d1 = np.array([1.0, 1, 0, 0, 1, 1])
    d2 = np.array([0.0, 0, 1, 1, 1, 1])
    W2 = np.stack([d1 - d2, d2 - d1, d1 + d2])
    W3 = np.array([[-0.5, -0.5, 0.5]])
    return MLP((W1, W2, W3), (b1, np.zeros(3), np.array([-0.5])))


def solid_ring(h: float = 0.25) -> MLP:
    """A solid torus in 3D: the square annulus ``1/2 < |x_1| + |x_2| < 1`` (in the first two inputs) times the
    slab ``|x_3| < h``, as ``z = min(a, b)`` with ``a`` the annulus logit and ``b = h - |x_3|``."""
    W1 = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    d = np.array([1.0, 1, 1, 1, 0, 0])
    ax3 = np.array([0.0, 0, 0, 0, 1, 1])
    W2 = np.stack([-d, d, -d, -ax3, ax3])
    b2 = np.array([1.0, -1.0, 0.75, h, -h])
    a = np.array([1.0, -1, -2, 0, 0])  # a = h1 - h2 - 2 h3
    b = np.array([0.0, 0, 0, 1, -1])  # b = h4 - h5
    W3 = np.stack([a - b, b - a, a, -a, b, -b])
    W4 = 0.5 * np.array([[-1.0, -1, 1, -1, 1, -1]])  # min(a, b) = (a + b - |a - b|) / 2
    return MLP((W1, W2, W3, W4), (np.zeros(6), b2, np.zeros(6), np.zeros(1)))
