"""Networks that attain the lower bounds (DESIGN §5): folds on R, their deep compositions, and the
product constructions in R^{n0}.

A *fold* is a piecewise linear map of R whose pieces on [0, 1] each map onto [0, 1]; composing folds
multiplies their piece counts, and a last layer arrangement inside (0, 1)^{n0} multiplies again.
Parameters are NumPy float64; networks are :class:`~regioncount.networks.MLP` /
:class:`~regioncount.networks.Maxout`. ``*_regions`` functions give, as exact ints, the number of
activation regions a construction has on any box that holds [0, 1]^{n0} (e.g. [-1, 2]^{n0}).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from math import comb, prod

import numpy as np

from ..networks import MLP, Maxout
from ._bounds import _int, _widths


@dataclasses.dataclass(frozen=True, eq=False)
class ReluFold:
    """The ReLU fold of Serra, Tjandraatmadja, Ramalingam 2018 (Thm 6 proof), DESIGN §5:
    ``h_j = relu(o_j (s - b_j))``, ``g(s) = sum_j c_j h_j + d``; arrays ``o, b, c`` are ``(n,)``.
    On [0, 1] it has ``n + 1`` pieces, each mapped onto [0, 1]."""

    o: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: float

    @property
    def n(self) -> int:
        return int(self.o.shape[0])

    @property
    def pieces(self) -> int:
        return self.n + 1

    @property
    def breakpoints(self) -> np.ndarray:
        return np.sort(self.b)

    def __call__(self, s) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)[..., None]
        return np.maximum(self.o * (s - self.b), 0.0) @ self.c + self.d


def relu_fold(n: int) -> ReluFold:
    """The ReLU fold with ``n >= 3`` units (DESIGN §5; Serra et al. 2018, Thm 6): ``n + 1`` pieces on [0, 1].

    n odd: b_j = (2j-1)/(2n+1), o_j = +1 (j < n), o_n = -1, sigma_0 = 2n+1, sigma_j = (-1)^j (2n+1)/2.
    n even: b_j = (j+1)/(n+3), o_j = +1 (j <= n-2), o_{n-1} = o_n = -1, sigma_0 = sigma_n = (n+3)/2,
    sigma_j = (-1)^j (n+3). Then c_j = sigma_j - sigma_{j-1} and d makes g(0) = 0.
    """
    n = _int("n", n, 1)
    if n < 3:
        raise ValueError(f"a ReLU fold with n + 1 pieces needs n >= 3 units (Serra et al. 2018), got n = {n}")
    j = np.arange(1, n + 1)
    if n % 2:
        b = (2 * j - 1) / (2 * n + 1)
        o = np.where(j < n, 1.0, -1.0)
        sigma = np.concatenate([[2 * n + 1], (-1.0) ** j * (2 * n + 1) / 2])
    else:
        b = (j + 1) / (n + 3)
        o = np.where(j <= n - 2, 1.0, -1.0)
        sigma = np.concatenate([[(n + 3) / 2], (-1.0) ** j[:-1] * (n + 3), [(n + 3) / 2]])
    c = np.diff(sigma)
    # g(0) = 0: at s = 0 exactly the units with o_j = -1 are on, contributing c_j b_j
    d = -float(np.sum(c[o < 0] * b[o < 0]))
    return ReluFold(o=o, b=b, c=c, d=d)


@dataclasses.dataclass(frozen=True, eq=False)
class MaxoutFold:
    """A maxout fold of ``n`` rank-``k`` units: ``g(s) = sum_i sign_i max_r (W[r, i] s + B[r, i])``.

    ``W, B`` are ``(k, n)``, ``sign`` is ``(n,)``; ``breakpoints`` ``(M,)`` are where ``g`` turns, so it
    has ``M + 1`` pieces on [0, 1], each mapped onto [0, 1]."""

    W: np.ndarray
    B: np.ndarray
    sign: np.ndarray
    breakpoints: np.ndarray

    @property
    def n(self) -> int:
        return int(self.sign.shape[0])

    @property
    def k(self) -> int:
        return int(self.W.shape[0])

    @property
    def pieces(self) -> int:
        return int(self.breakpoints.shape[0]) + 1

    def __call__(self, s) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)[..., None, None]
        return np.max(self.W * s + self.B, axis=-2) @ self.sign


def maxout_fold_pieces(n: int, k: int) -> int:
    """Pieces of :func:`maxout_fold` on [0, 1]: n(k-1) + 1 when n is even or k = 2 (Montúfar, Ren, Zhang
    2022), else (n-1)(k-1) + 2 (the fallback for odd n with k >= 3, DESIGN §4 caveat)."""
    n, k = _int("n", n, 1), _int("k", k, 2)
    return n * (k - 1) + 1 if n % 2 == 0 or k == 2 else (n - 1) * (k - 1) + 2


def maxout_fold(n: int, k: int) -> MaxoutFold:
    """The maxout fold on R (DESIGN §5): ``M`` breakpoints b_j = j/(M+1), slopes sigma_j = (-1)^j (M+1),
    jumps Delta = 2(M+1).

    Odd-indexed breakpoints (concave turns) go to units of sign -1, even-indexed ones to units of sign
    +1, k-1 consecutive ones per unit; a unit with breakpoints beta_1 < ... < beta_m has pieces
    l_r(s) = r Delta s - Delta sum_{j<=r} beta_j (r <= m); unit 0 also adds sign_0 (M+1) s to every
    piece. When n is even or k = 2, M = n(k-1) and g has n(k-1)+1 pieces. For odd n with k >= 3 the
    signs cannot be split evenly: this builds the fallback M = (n-1)(k-1)+1 with (n+1)/2 units of sign
    -1; a unit with fewer than k-1 breakpoints gets dead pieces l_0 - c (c >= 1) that never win.
    """
    n, k = _int("n", n, 1), _int("k", k, 2)
    M = maxout_fold_pieces(n, k) - 1
    bps = np.arange(1, M + 1) / (M + 1)
    delta = 2.0 * (M + 1)
    per = k - 1
    neg = [bps[i : i + 2 * per : 2] for i in range(0, M, 2 * per)]  # b_1, b_3, ... (1-based odd)
    pos = [bps[i : i + 2 * per : 2] for i in range(1, M, 2 * per)]  # b_2, b_4, ...
    units = sorted([(-1.0, g) for g in neg] + [(1.0, g) for g in pos], key=lambda u: u[1][0])
    if len(units) != n:  # pragma: no cover - guarded by maxout_fold_pieces
        raise AssertionError(f"maxout fold built {len(units)} units for n = {n}")
    W = np.zeros((k, n))
    B = np.zeros((k, n))
    sign = np.array([u[0] for u in units])
    for i, (_, beta) in enumerate(units):
        m = len(beta)
        r = np.arange(m + 1)
        W[: m + 1, i] = r * delta
        B[: m + 1, i] = -delta * np.concatenate([[0.0], np.cumsum(beta)])
        W[m + 1 :, i] = 0.0
        B[m + 1 :, i] = -np.arange(1, k - m)  # dead pieces: strictly below l_0 everywhere
    W[:, 0] += sign[0] * (M + 1)
    return MaxoutFold(W=W, B=B, sign=sign, breakpoints=bps)


def fold_relu_network(widths: Sequence[int]) -> MLP:
    """A deep ReLU MLP on R composing :func:`relu_fold` (n_l) per layer: prod (n_l + 1) pieces on [0, 1].

    Wiring (DESIGN §5): layer 1 weight o_j, bias -o_j b_j; layer l > 1 weight row o_j c_{l-1}^T, bias
    o_j (d_{l-1} - b_j); the readout is c_L^T h + d_L, i.e. the output is g_L o ... o g_1.
    """
    folds = [relu_fold(n) for n in _widths(widths)]
    ws, bs = [folds[0].o[:, None]], [-folds[0].o * folds[0].b]
    for prev, f in zip(folds[:-1], folds[1:], strict=True):
        ws.append(f.o[:, None] * prev.c[None, :])
        bs.append(f.o * (prev.d - f.b))
    ws.append(folds[-1].c[None, :])
    bs.append(np.array([folds[-1].d]))
    return MLP(tuple(ws), tuple(bs))


def fold_maxout_network(widths: Sequence[int], k: int) -> Maxout:
    """A deep Maxout network on R composing :func:`maxout_fold` (n_l, k) per layer: prod (n_l(k-1) + 1)
    pieces on [0, 1] when every n_l is even or k = 2 (else :func:`maxout_fold_pieces` per layer)."""
    folds = [maxout_fold(n, k) for n in _widths(widths)]
    ws, bs = [folds[0].W[:, :, None]], [folds[0].B]
    for prev, f in zip(folds[:-1], folds[1:], strict=True):
        ws.append(f.W[:, :, None] * prev.sign[None, None, :])
        bs.append(f.B)
    return Maxout(tuple(ws), tuple(bs), folds[-1].sign[None, :], np.zeros(1))


# ---- product constructions in R^{n0} -------------------------------------------------------------


def _simplex_normals(n0: int) -> np.ndarray:
    """n0 + 1 unit vectors in R^{n0} summing to zero (they positively span R^{n0})."""
    E = np.eye(n0 + 1) - 1.0 / (n0 + 1)
    U, _, _ = np.linalg.svd(E)
    V = E @ U[:, :n0]
    return V / np.linalg.norm(V, axis=1, keepdims=True)


def _candidate_normals(n_forms: int, n0: int, rng: np.random.Generator) -> np.ndarray:
    if n0 == 2 and n_forms >= 3:
        # directions pi j / n (no two parallel), every other one flipped: gaps below pi, so they
        # positively span; a random rotation and jitter keep them off the axes
        theta = np.pi * (np.arange(n_forms) + rng.uniform(-0.2, 0.2, n_forms)) / n_forms + rng.uniform(0, np.pi)
        flip = np.where(np.arange(n_forms) % 2, -1.0, 1.0)
        return flip[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    W = rng.normal(size=(n_forms, n0))
    if n_forms >= n0 + 1:
        Q, _ = np.linalg.qr(rng.normal(size=(n0, n0)))
        W[: n0 + 1] = _simplex_normals(n0) @ Q.T
    return W / np.linalg.norm(W, axis=1, keepdims=True)


def general_forms(n_forms: int, n0: int, n_offsets: int, seed: int = 0, tries: int = 24):
    """Affine forms for a last layer: unit normals ``W (n_forms, n0)`` and sorted offsets
    ``tau (n_forms, n_offsets)``; hyperplane (j, r) is ``W[j] . (y - 1/2) = tau[j, r]``.

    Guarantees: any min(n0, n_forms) normals are independent; every intersection of hyperplanes from
    min(n0, n_forms) distinct classes lies in [0.1, 0.9]^{n0}; no n0 + 1 hyperplanes from distinct
    classes meet (general position); when n_forms >= n0 + 1 the normals positively span R^{n0}. The
    arrangement then has sum_{j<=n0} C(n_forms, j) n_offsets^j regions, all of which meet
    (0, 1)^{n0}. Of ``tries`` seeded candidates the one whose smallest gap (between parallel
    hyperplanes, and between a vertex and any further hyperplane) is largest is kept, so the smallest
    regions stay far above float64 resolution.
    """
    rng = np.random.default_rng(seed)
    r = min(n0, n_forms)
    subsets = np.array(list(itertools.combinations(range(n_forms), r)))
    best, best_gap = None, 0.0
    for _ in range(tries):
        W = _candidate_normals(n_forms, n0, rng)
        WS = W[subsets]  # (nS, r, n0)
        if np.min(np.linalg.svd(WS, compute_uv=False)[:, -1]) < 1e-6:
            continue
        # ||W_S^+||_inf * eps <= 0.4 keeps every vertex within 0.4 of the centre 1/2
        eps = 0.4 / np.max(np.abs(np.linalg.pinv(WS)).sum(axis=2))
        strata = (np.arange(n_offsets) + 0.5 + rng.uniform(-0.3, 0.3, (n_forms, n_offsets))) / n_offsets
        tau = eps * (2.0 * strata - 1.0)
        gap = _separation(W, tau, n0)
        if gap > best_gap:
            best, best_gap = (W, tau), gap
    if best is None:  # pragma: no cover - random normals are generic
        raise RuntimeError(f"no general-position forms found for n_forms={n_forms}, n0={n0}")
    return best


def _separation(W: np.ndarray, tau: np.ndarray, n0: int, limit: int = 1_000_000) -> float:
    """Smallest distance between two parallel hyperplanes and between the vertex of n0 hyperplanes
    (distinct classes) and a hyperplane of a further class; 0 means not in general position. Vertex
    gaps are enumerated up to ``limit`` cases (beyond, only parallel gaps are scored)."""
    n_forms, n_off = tau.shape
    gap = float(np.min(np.diff(tau, axis=1))) if n_off > 1 else np.inf
    if n_forms <= n0 or comb(n_forms, n0) * (n_forms - n0) * n_off ** (n0 + 1) > limit:
        return gap
    base = np.array(list(itertools.combinations(range(n_forms), n0)))  # (nB, n0)
    inv = np.linalg.inv(W[base])  # (nB, n0, n0)
    pick = np.array(list(itertools.product(range(n_off), repeat=n0)))  # (nC, n0)
    t = tau[base[:, None, :], pick[None, :, :]]  # (nB, nC, n0)
    v = np.einsum("bij,bcj->bci", inv, t)  # vertices relative to the centre
    others = np.array([[j for j in range(n_forms) if j not in row] for row in base])  # (nB, n_forms-n0)
    resid = np.einsum("boi,bci->bco", W[others], v)[..., None] - tau[others][:, None]  # (nB, nC, no, n_off)
    return min(gap, float(np.min(np.abs(resid))))


def _readout(n: int, seed: int) -> np.ndarray:
    # generic positive weights: no accidental cancellation merges linear regions
    return np.random.default_rng(seed + 7919).uniform(0.5, 1.5, (1, n))


def product_relu(widths: Sequence[int], n0: int, seed: int = 0) -> MLP:
    """ReLU MLP on R^{n0} attaining Serra et al. 2018 Thm 6 (:func:`relu_lower_serra`) on any box that
    holds [0, 1]^{n0} (DESIGN §5).

    Each hidden layer splits into n0 groups of p = floor(n_l/n0) >= 3 units; group i folds coordinate
    i with :func:`relu_fold` (p), reading group i of the previous layer; spare units have zero weights
    and bias -1 (always off). The last layer is n_L ReLUs ``relu(w_j . (y - 1/2) - tau_j)`` of the
    folded coordinates y, from :func:`general_forms`: every crossing inside (0, 1)^{n0}, normals
    positively spanning when n_L > n0 (so the all-off region is bounded and no linear regions merge).
    """
    ws, n0 = _widths(widths), _int("n0", n0, 1)
    folds = []
    for l, n in enumerate(ws[:-1], start=1):
        if n // n0 < 3:
            raise ValueError(f"product_relu needs n_l >= 3 n0 = {3 * n0} for every hidden layer; n_{l} = {n}")
        folds.append(relu_fold(n // n0))
    weights, biases = [], []
    n_in = n0
    Y, y0 = np.eye(n0), np.zeros(n0)  # folded coordinates y = Y h + y0 of the current layer input h
    for f, n in zip(folds, ws[:-1], strict=True):
        p = f.n
        Wl = np.zeros((n, n_in))
        bl = np.full(n, -1.0)
        Y_next = np.zeros((n0, n))
        for i in range(n0):
            rows = slice(i * p, (i + 1) * p)
            Wl[rows] = f.o[:, None] * Y[i][None, :]
            bl[rows] = f.o * (y0[i] - f.b)
            Y_next[i, rows] = f.c
        weights.append(Wl)
        biases.append(bl)
        Y, y0, n_in = Y_next, np.full(n0, f.d), n
    Wf, tau = general_forms(ws[-1], n0, 1, seed)
    weights.append(Wf @ Y)
    biases.append(Wf @ (y0 - 0.5) - tau[:, 0])
    weights.append(_readout(ws[-1], seed))
    biases.append(np.zeros(1))
    return MLP(tuple(weights), tuple(biases))


def product_maxout(widths: Sequence[int], n0: int, k: int, seed: int = 0) -> Maxout:
    """Maxout network on R^{n0} attaining :func:`maxout_lower` when every floor(n_l/n0) (l < L) is even or
    k = 2 (DESIGN §5); otherwise it has :func:`product_maxout_regions` regions, fewer than the formula.

    Hidden layers: n0 groups of p = floor(n_l/n0) >= 1 units, group i folds coordinate i with
    :func:`maxout_fold` (p, k); spare units have zero weights and pieces -1, -2, ..., -k (constant,
    argmax 0, never tied). Last layer: unit j is convex piecewise linear in its form
    phi_j(y) = w_j . (y - 1/2), pieces (r + 1/3) phi_j - sum_{i<=r} tau_{j,i}: k-1 parallel breakpoints
    phi_j = tau_{j,i}, from :func:`general_forms`, every crossing inside (0, 1)^{n0}.
    """
    ws, n0, k = _widths(widths), _int("n0", n0, 1), _int("k", k, 2)
    folds = []
    for l, n in enumerate(ws[:-1], start=1):
        if n < n0:
            raise ValueError(f"product_maxout needs n_l >= n0 = {n0} for every hidden layer; n_{l} = {n}")
        folds.append(maxout_fold(n // n0, k))
    weights, biases = [], []
    n_in = n0
    Y = np.eye(n0)  # folded coordinates y = Y h (maxout folds have g(0) = 0 and no offset)
    spare = -np.arange(1.0, k + 1)
    for f, n in zip(folds, ws[:-1], strict=True):
        p = f.n
        Wl = np.zeros((k, n, n_in))
        bl = np.tile(spare[:, None], (1, n))
        Y_next = np.zeros((n0, n))
        for i in range(n0):
            rows = slice(i * p, (i + 1) * p)
            Wl[:, rows, :] = f.W[:, :, None] * Y[i][None, None, :]
            bl[:, rows] = f.B
            Y_next[i, rows] = f.sign
        weights.append(Wl)
        biases.append(bl)
        Y, n_in = Y_next, n
    Wf, tau = general_forms(ws[-1], n0, k - 1, seed)
    slopes = np.arange(k) + 1.0 / 3.0  # (k,)
    weights.append(slopes[:, None, None] * (Wf @ Y)[None])
    cum = np.concatenate([np.zeros((ws[-1], 1)), np.cumsum(tau, axis=1)], axis=1).T  # (k, n_L)
    biases.append(slopes[:, None] * (-0.5 * Wf.sum(axis=1))[None, :] - cum)
    return Maxout(tuple(weights), tuple(biases), _readout(ws[-1], seed), np.zeros(1))


def product_relu_regions(widths: Sequence[int], n0: int) -> int:
    """Activation regions of :func:`product_relu` on a box holding [0, 1]^{n0}: prod (p_l + 1)^{n0} *
    sum_{j<=n0} C(n_L, j), which is Serra et al. 2018 Thm 6's bound."""
    ws, n0 = _widths(widths), _int("n0", n0, 1)
    return prod((n // n0 + 1) ** n0 for n in ws[:-1]) * sum(comb(ws[-1], j) for j in range(n0 + 1))


def product_maxout_regions(widths: Sequence[int], n0: int, k: int) -> int:
    """Activation regions of :func:`product_maxout` on a box holding [0, 1]^{n0}: prod (pieces of the
    fold of p_l units)^{n0} * sum_{j<=n0} C(n_L, j)(k-1)^j. Equals :func:`maxout_lower` when every p_l is
    even or k = 2; smaller otherwise (DESIGN §4 caveat)."""
    ws, n0, k = _widths(widths), _int("n0", n0, 1), _int("k", k, 2)
    return prod(maxout_fold_pieces(n // n0, k) ** n0 for n in ws[:-1]) * sum(
        comb(ws[-1], j) * (k - 1) ** j for j in range(n0 + 1)
    )
