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

from .._predicates import (  # noqa: F401  (re-exported: the engines import them from here)
    EPS,
    ETA,
    INEXACT_G,
    TINY,
    ZERO_G,
    affine_bounds,
    column_granularity,
    exact_frame_error,
    finite_or_raise,
    gamma,
    granularity,
    int_intersection,
    int_line,
    int_vertex_sign,
    intersection,
    point_sign,
    sum_bounds,
    underflow_slack,
    vertex_sign,
)
from ..networks._ops import Affine, Attention, GroupMax, ReLU, Residual
from ._protocol import Kernels

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
