"""Rigorous float64 error bounds and exact rational predicates for the exact engines (docs/design.md §3).

"Exact" in this project is a claim about the float64 network as given: every weight is an exact binary
fraction, so every map, line and vertex of its partition is a rational number. The engines compute in
float64 and carry, beside every map, a bound on how far the float values can be from the exact ones:

- ``eb``: an absolute bound on the error of every coefficient of a map column (over all regions);
- ``ge``: a granularity exponent (every entry is an integer multiple of ``2**ge``) while the float values are
  still *equal* to the exact ones. Sums of products whose partial sums stay below ``2**(53 + ge)`` in
  magnitude are computed without rounding, whatever the order (Higham 2002, §2.2), so such columns keep
  ``eb == 0``. Constructions with dyadic weights stay exact through every op this way.

Where ``eb > 0`` a float op is bounded by the standard model: a sum of ``n`` products computed in any order
is off by at most ``gamma(n) * sum |x_i y_i|`` with ``gamma(n) = n u / (1 - n u)``, ``u = 2**-53`` (Higham 2002,
Thm 3.1 and §3.1).

A sign whose float value is within its bound of zero is decided here, exactly, in Python integers: a line
``w`` is three floats, a vertex is the intersection of two lines, and the sign of ``w`` at the vertex is the
sign of a 3x3 determinant of integers (each float is ``m 2**e`` with an integer ``m``).
"""

from __future__ import annotations

import math

import numpy as np

from ..networks._ops import Affine, Attention, GroupMax, ReLU, Residual
from ._protocol import Kernels

#: unit roundoff of float64
EPS = 2.0**-53
#: sentinel granularity exponent of an all-zero column (no constraint on products)
ZERO_G = 1 << 20
#: sentinel granularity exponent of a column whose float values are not known to be exact
INEXACT_G = -(1 << 20)
#: absolute slack added to every bound (covers rounding of the bound computations below the normal range)
TINY = 2.0**-1000


def gamma(n: int) -> float:
    """``n u / (1 - n u)``, rounded up."""
    return n * EPS / (1 - n * EPS) * (1 + 4 * EPS)


def granularity(x: np.ndarray) -> np.ndarray:
    """Per entry the exponent ``g`` of the lowest set bit (``x`` is an integer multiple of ``2**g``);
    :data:`ZERO_G` for zeros. Exact: works on the float's bits."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(np.abs(x))  # x = m 2^e, m in [0.5, 1)
    M = (m * 2.0**53).astype(np.int64)  # exact: m has 53 significant bits
    low = M & -M
    tz = np.zeros(M.shape, np.int64)
    nz = low > 0
    tz[nz] = np.log2(low[nz].astype(np.float64)).astype(np.int64)  # exact for powers of two
    g = e.astype(np.int64) - 53 + tz
    return np.where(nz, g, ZERO_G)


def column_granularity(x: np.ndarray, axes) -> np.ndarray:
    """Minimum :func:`granularity` over ``axes``."""
    return granularity(x).min(axis=axes, initial=ZERO_G)


def affine_bounds(hb, eb, ge, W, b):
    """Bounds after ``h -> W h + b`` on every token: magnitude ``hb (T, d_out)``, error ``eb`` and granularity.

    ``hb (T, d)`` bounds the 1-norm of each entry's three coefficients, ``eb (T, d)`` their error, ``ge (T, d)``
    their granularity (or :data:`INEXACT_G`). ``b`` may be ``(d_out,)`` or ``(T, d_out)``.
    """
    aW = np.abs(W)
    bb = b if b.ndim == 2 else b[None, :]
    S = hb @ aW.T + np.abs(bb)
    gw = granularity(W)  # (d_out, d)
    gb = granularity(bb)  # (1 or T, d_out)
    used = W != 0
    # min over inputs i of ge_i + gw_ji where W_ji != 0 and the input column is not identically zero
    gsum = ge[:, None, :] + np.where(used, gw, ZERO_G)[None, :, :]  # (T, d_out, d)
    gsum = np.where(used[None] & (ge[:, None, :] < ZERO_G), gsum, ZERO_G)
    g = np.minimum(gsum.min(axis=2, initial=ZERO_G), gb)
    exact_in = (eb == 0) & (ge > INEXACT_G)
    exact_in_used = np.all(exact_in[:, None, :] | ~used[None], axis=2)  # (T, d_out)
    exact = exact_in_used & (S < np.ldexp(1.0, np.clip(53 + g, -1074, 1023).astype(np.int64)))
    exact |= S == 0
    n = W.shape[1] + 1
    err = eb @ aW.T + gamma(n) * S * (1 + 4 * EPS) + TINY
    eb_out = np.where(exact, 0.0, err)
    ge_out = np.where(exact, g, INEXACT_G)
    return S, eb_out, ge_out


def sum_bounds(hb1, eb1, ge1, hb2, eb2, ge2):
    """Bounds of an entrywise sum of two maps."""
    S = hb1 + hb2
    g = np.minimum(ge1, ge2)
    exact = (eb1 == 0) & (eb2 == 0) & (g > INEXACT_G)
    exact &= S < np.ldexp(1.0, np.clip(53 + g, -1074, 1023).astype(np.int64))
    exact |= S == 0
    err = eb1 + eb2 + EPS * S * (1 + 4 * EPS) + TINY
    return S, np.where(exact, 0.0, err), np.where(exact, g, INEXACT_G)


# ----------------------------------------------------------------------------------------------------
# exact predicates in integers


def _int_line(w) -> tuple[int, int, int]:
    """A line ``(w0, w1, w2)`` of floats as integers times a common positive power of two (sign-preserving)."""
    fr = [float(v).as_integer_ratio() for v in w]
    den = max(d for _, d in fr)  # denominators are powers of two
    return tuple(n * (den // d) for n, d in fr)  # type: ignore[return-value]


def vertex_sign(l1, l2, l3) -> int:
    """Exact sign of line ``l3`` (``w . (u1, u2, 1)``) at the intersection of lines ``l1`` and ``l2`` (float
    triples taken as exact rationals). Raises ``ZeroDivisionError`` when ``l1`` and ``l2`` are parallel."""
    return int_vertex_sign(_int_line(l1), _int_line(l2), _int_line(l3))


def intersection(l1, l2) -> tuple[float, float]:
    """The float point nearest (coordinate by coordinate) the exact intersection of two float lines: Python's
    int division is correctly rounded."""
    return int_intersection(_int_line(l1), _int_line(l2))


def exact_frame_error(x0n, Vn, x0, V, c, h) -> float:
    """Bound on the distance of the float frame ``x = x0n + Vn u'`` from the exact ``x0 + V (c + h u')`` with
    ``c = (lo + hi) / 2``, ``h = (hi - lo) / 2`` taken exactly: 0 when the float frame is exact."""
    from fractions import Fraction

    worst = Fraction(0)
    for i in range(x0n.shape[0]):
        e0 = Fraction(x0n[i]) - (Fraction(x0[i]) + sum(Fraction(V[i, k]) * c[k] for k in range(V.shape[1])))
        worst = max(worst, abs(e0))
        for k in range(V.shape[1]):
            worst = max(worst, abs(Fraction(Vn[i, k]) - Fraction(V[i, k]) * h[k]))
    return 0.0 if worst == 0 else float(worst) * (1 + 4 * EPS) + TINY


def point_sign(w, p) -> int:
    """Exact sign of ``w0 p0 + w1 p1 + w2`` for float ``w`` and a float point ``p``."""
    from fractions import Fraction

    v = Fraction(w[0]) * Fraction(p[0]) + Fraction(w[1]) * Fraction(p[1]) + Fraction(w[2])
    return (v > 0) - (v < 0)


def finite_or_raise(*arrays, what: str = "the network's maps"):
    """Raise :class:`~regioncount._errors.RegionCountError` if any value is inf or NaN (float64 overflow)."""
    from .._errors import RegionCountError

    for a in arrays:
        if not np.all(np.isfinite(a)):
            raise RegionCountError(
                f"float64 overflow: {what} exceed the range of float64 on this domain, so no exact count can be "
                "made; rescale the network's weights or shrink the domain"
            )


__all__ = [
    "EPS",
    "gamma",
    "granularity",
    "affine_bounds",
    "sum_bounds",
    "vertex_sign",
    "point_sign",
    "intersection",
    "exact_frame_error",
    "finite_or_raise",
]


# ----------------------------------------------------------------------------------------------------
# exact maps: a region's affine maps recomputed in rational arithmetic from the weights and its code


def _fgcd(a, b):
    """Greatest common divisor of two positive Fractions (the largest ``g`` with ``a/g``, ``b/g`` integers)."""
    from fractions import Fraction

    return Fraction(math.gcd(a.numerator, b.numerator), math.lcm(a.denominator, b.denominator))


class ExactMap:
    """An array of rationals stored as Python ints ``N`` (object array) times one positive Fraction ``s``."""

    __slots__ = ("N", "s")

    def __init__(self, N, s):
        self.N, self.s = N, s

    @staticmethod
    def of_floats(x) -> ExactMap:
        from fractions import Fraction

        x = np.asarray(x, dtype=np.float64)
        fr = [float(v).as_integer_ratio() for v in x.ravel()]
        den = max((d for _, d in fr), default=1)
        N = np.array([n * (den // d) for n, d in fr], dtype=object).reshape(x.shape)
        return ExactMap(N, Fraction(1, den))

    @staticmethod
    def of_fractions(x) -> ExactMap:
        from fractions import Fraction

        flat = [Fraction(v) for v in np.asarray(x, dtype=object).ravel()]
        den = 1
        for v in flat:
            den = math.lcm(den, v.denominator)
        N = np.array([v.numerator * (den // v.denominator) for v in flat], dtype=object).reshape(np.shape(x))
        return ExactMap(N, Fraction(1, den))

    def rescaled(self, s) -> np.ndarray:
        """``N`` expressed in units of ``s`` (which must divide ``self.s``)."""
        r = self.s / s
        if r.denominator != 1:
            raise ArithmeticError("internal error: scale does not divide")
        return self.N * r.numerator if r.numerator != 1 else self.N

    def __add__(self, other: ExactMap) -> ExactMap:
        g = _fgcd(self.s, other.s)
        return ExactMap(self.rescaled(g) + other.rescaled(g), g)


_WCACHE: dict = {}


def _layout_key(a: np.ndarray) -> tuple:
    """Where an array's data is and how it is laid out: the same for every view object of the same data (a
    transpose made anew on each call), different for different data while the cached array is held."""
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)


def _cached(cache: dict, a: np.ndarray, extra, make):
    """``make()`` cached per array data, layout and ``extra``; the entry holds ``a`` so that its memory (and so
    its key) cannot be reused by another array while cached."""
    key = (_layout_key(a), extra)
    hit = cache.get(key)
    if hit is None:
        hit = (a, make())
        cache[key] = hit
        if len(cache) > 256:
            cache.pop(next(iter(cache)))
    return hit[1]


def _exact_weights(W) -> ExactMap:
    W = np.asarray(W)
    return _cached(_WCACHE, W, None, lambda: ExactMap.of_floats(W))


_BCACHE: dict = {}


def _exact_bias(b, shape: tuple, rows) -> ExactMap | None:
    """The bias ``b`` (rows ``rows``) broadcast to ``shape``, exact (None where it is zero); cached like the
    weights, since every replay of an op adds the same bias."""
    b = np.asarray(b, dtype=np.float64)
    bb = b if b.ndim == 2 else b[None, :]
    if rows is not None:
        bb = bb[:, rows]
    if not np.any(bb):
        return None
    extra = (shape, None if rows is None else np.asarray(rows).tobytes())
    return _cached(_BCACHE, b, extra, lambda: ExactMap.of_floats(np.broadcast_to(bb, shape)))


def exact_affine(M: ExactMap, W, b, rows=None) -> ExactMap:
    """``M @ W.T + b`` on the last axis of ``M (3, T, d)``; ``b`` enters the constant coefficient only.
    ``rows``: only these outputs (an index array), with ``W`` and ``b`` still the whole op's."""
    We = _exact_weights(W)  # cached per weight array: slicing happens on the exact copy
    WN = We.N if rows is None else We.N[rows]
    Wf = np.asarray(W) if rows is None else np.asarray(W)[rows]
    if WN.shape[0] * WN.shape[1] >= 256 and np.count_nonzero(Wf) * 4 < WN.size:
        # mostly zeros (a pooling selection, a sparse conv): sum only the nonzero terms of each output
        prod_N = np.zeros(M.N.shape[:-1] + (WN.shape[0],), dtype=object)
        for j in range(WN.shape[0]):
            nz = np.flatnonzero(Wf[j])
            if nz.size:
                prod_N[..., j] = np.dot(M.N[..., nz], WN[j, nz])
        prod = ExactMap(prod_N, M.s * We.s)
    else:
        prod = ExactMap(np.dot(M.N, WN.T), M.s * We.s)
    be = _exact_bias(b, M.N.shape[1:-1] + (WN.shape[0],), rows)
    if be is None:
        return prod
    g = _fgcd(prod.s, be.s)
    N = prod.rescaled(g).copy()
    N[2] = N[2] + be.rescaled(g)
    return ExactMap(N, g)


def exact_scores(M: ExactMap, Wq, Wk):
    """Exact score coefficients of one head: ``F (3, T, T)`` (u1, u2, 1) and ``Q2 (3, T, T)`` (u1^2, u1 u2,
    u2^2) of ``S_ij``, as ints of one positive scale (returned third)."""
    Q = exact_affine(M, np.asarray(Wq).T, np.zeros(np.asarray(Wq).shape[1]))
    K = exact_affine(M, np.asarray(Wk).T, np.zeros(np.asarray(Wk).shape[1]))
    C = np.einsum("aie,bje->ijab", Q.N, K.N)  # object ints
    F = np.stack([C[..., 0, 2] + C[..., 2, 0], C[..., 1, 2] + C[..., 2, 1], C[..., 2, 2]])
    Q2 = np.stack([C[..., 0, 0], C[..., 0, 1] + C[..., 1, 0], C[..., 1, 1]])
    return F, Q2, Q.s * K.s


def _exact_attention(M: ExactMap, op, digits) -> ExactMap:
    from fractions import Fraction

    _, T, d = M.N.shape
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    total = None
    for h in range(op.heads):
        F, Q2, _ = exact_scores(M, op.Wq[h], op.Wk[h])
        Vh = exact_affine(
            exact_affine(M, np.asarray(op.Wv[h]).T, np.zeros(op.Wv.shape[2])), np.asarray(op.Wo[h]).T, np.zeros(d)
        )
        rows = []
        dens = []
        for i in range(T):
            w = int(digits[h * T + i])
            tied = [
                j
                for j in range(T)
                if allowed[i, j] and all(F[c, i, j] == F[c, i, w] and Q2[c, i, j] == Q2[c, i, w] for c in range(3))
            ]
            rows.append(sum(Vh.N[:, j, :] for j in tied))
            dens.append(len(tied))
        L = 1
        for c in dens:
            L = math.lcm(L, c)
        N = np.stack([rows[i] * (L // dens[i]) for i in range(T)], axis=1)
        head = ExactMap(N, Vh.s * Fraction(1, L))
        total = head if total is None else total + head
    if total is None:
        return ExactMap(np.zeros(M.N.shape, dtype=object) * 0, M.s)
    return total


#: The exact replay's kernels: ``kernel(op, M, code) -> ExactMap`` maps one region's exact maps ``M (3, T, d)``
#: through ``op`` given its decisions ``code`` (None for ops that split nothing). The replay serves the plane
#: engine's exact fallback, so its row is the plane engine's (op protocol, :mod:`._protocol`).
KERNELS = Kernels("plane/replay", structural=("residual",))  # residual bodies: flattened to push/pop


@KERNELS.register("affine")
def _replay_affine(op: Affine, M: ExactMap, code) -> ExactMap:
    return exact_affine(M, op.W, op.b)


@KERNELS.register("relu")
def _replay_relu(op: ReLU, M: ExactMap, code: np.ndarray) -> ExactMap:
    _, T, d = M.N.shape
    return ExactMap(M.N * code.reshape(1, T, d).astype(object), M.s)


@KERNELS.register("groupmax")
def _replay_groupmax(op: GroupMax, M: ExactMap, code: np.ndarray) -> ExactMap:
    _, T, d = M.N.shape
    n = d // op.k
    N = M.N.reshape(3, T, n, op.k)
    return ExactMap(np.take_along_axis(N, code.reshape(T, n)[None, :, :, None], axis=3)[..., 0], M.s)


@KERNELS.register("attention/hardmax")
def _replay_attention(op: Attention, M: ExactMap, code: np.ndarray) -> ExactMap:
    return _exact_attention(M, op, code)


def int_vertex_sign(l1, l2, l3) -> int:
    """Exact sign of integer line ``l3`` at the intersection of integer lines ``l1`` and ``l2``."""
    a1, b1, c1 = l1
    a2, b2, c2 = l2
    a3, b3, c3 = l3
    X = b1 * c2 - c1 * b2
    Y = c1 * a2 - a1 * c2
    Z = a1 * b2 - b1 * a2
    if Z == 0:
        raise ZeroDivisionError("parallel lines have no vertex")
    v = a3 * X + b3 * Y + c3 * Z
    return (v > 0) - (v < 0) if Z > 0 else (v < 0) - (v > 0)


def int_intersection(l1, l2) -> tuple[float, float]:
    a1, b1, c1 = l1
    a2, b2, c2 = l2
    Z = a1 * b2 - b1 * a2
    if Z == 0:
        raise ZeroDivisionError("parallel lines have no vertex")
    return (b1 * c2 - c1 * b2) / Z, (c1 * a2 - a1 * c2) / Z


class ExactReplay:
    """Exact maps of regions at the start of a leaf op, from the weights and the regions' codes, with the
    states at earlier split ops memoised by code prefix (regions that share a prefix share the work; an LRU
    of ``size`` states bounds the memory)."""

    def __init__(self, program, M0: ExactMap, size: int = 8192):
        from collections import OrderedDict

        self.M0 = M0
        self.size = size
        self.memo: OrderedDict = OrderedDict()
        # flattened program: ("push",), ("pop",), ("leaf", op, leaf index, split?, kernel); each op's kernel is
        # looked up once here, not per region
        self.ins: list[tuple] = []
        self.leaf_pos: dict[int, int] = {}
        self.split_before: dict[int, int] = {}  # leaf index -> split leaves before it
        count = {"leaf": 0, "split": 0}

        def flat(ops):
            for op in ops:
                if isinstance(op, Residual):
                    self.ins.append(("push",))
                    flat(op.body)
                    self.ins.append(("pop",))
                else:
                    i = count["leaf"]
                    self.leaf_pos[i] = len(self.ins)
                    self.split_before[i] = count["split"]
                    split = not isinstance(op, Affine)
                    self.ins.append(("leaf", op, i, split, KERNELS.lookup(op)))
                    count["leaf"] += 1
                    count["split"] += split

        flat(program.ops)

    def affine_before(self, leaf: int):
        """The Affine op that leaf ``leaf`` reads directly (the instruction before it), or None."""
        pos = self.leaf_pos[leaf]
        if pos == 0:
            return None
        ins = self.ins[pos - 1]
        return ins[1] if ins[0] == "leaf" and isinstance(ins[1], Affine) else None

    def _step(self, ins, M, stack, code):
        if ins[0] == "push":
            return M, stack + (M,)
        if ins[0] == "pop":
            return stack[-1] + M, stack[:-1]
        _, op, _, split, kernel = ins
        return kernel(op, M, np.asarray(code).astype(np.int64) if split else None), stack

    def maps_at(self, code_rows: list, stop_leaf: int) -> ExactMap:
        """The exact maps at the start of leaf ``stop_leaf``; ``code_rows``: the region's decisions at every
        earlier split leaf (``np.uint8``-viewable int arrays)."""
        k_stop = self.split_before[stop_leaf]
        keys = [b""]
        acc = b""
        for row in code_rows[:k_stop]:
            acc += np.ascontiguousarray(row).tobytes() + b"|"
            keys.append(acc)
        # split-leaf starts are where states are memoised: (instruction position, prefix of k splits)
        start, M, stack, k0 = 0, self.M0, (), 0
        split_pos = [p for p, ins in enumerate(self.ins) if ins[0] == "leaf" and ins[3]]
        for k in range(min(k_stop, len(split_pos) - 1), 0, -1):
            pos = split_pos[k]
            if pos > self.leaf_pos[stop_leaf]:
                continue
            hit = self.memo.get((pos, keys[k]))
            if hit is not None:
                self.memo.move_to_end((pos, keys[k]))
                start, (M, stack), k0 = pos, hit, k
                break
        k = k0
        stop = self.leaf_pos[stop_leaf]
        for pos in range(start, stop):
            ins = self.ins[pos]
            if ins[0] == "leaf" and ins[3]:
                if pos != start:
                    self.memo[(pos, keys[k])] = (M, stack)
                    if len(self.memo) > self.size:
                        self.memo.popitem(last=False)
                M, stack = self._step(ins, M, stack, code_rows[k])
                k += 1
            else:
                M, stack = self._step(ins, M, stack, None)
        self.memo[(stop, keys[k])] = (M, stack)
        if len(self.memo) > self.size:
            self.memo.popitem(last=False)
        return M
