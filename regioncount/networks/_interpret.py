"""The one interpreter of a :class:`~regioncount.networks._ops.Program`'s codes: a region's code (in the
forward pass's layout) gives every op's affine maps and the constraints that cut the region out.

Two interpretations, one per question:

- **exact** (:class:`ExactProgram`): rational arithmetic from the float64 weights as given (each an exact
  binary fraction). Maps are :class:`ExactMap` (Python ints times one positive Fraction). Its kernels (one per
  op key, registry ``"exact"`` of the op protocol) serve the plane engine's exact replay, the linear-region
  merge and the certificate; a kernel ``kernel(op, M, code, rows)`` maps the exact maps ``M (c, T, d)`` at
  the op's input through the op under its decisions ``code`` and, when ``rows`` is a list, appends the op's
  constraints ``(C, strict)``: ``C`` an :class:`ExactMap` ``(c, m)`` of affine functions that are ``>= 0``
  (``> 0`` where ``strict``) on the region.
- **float with rigorous bounds** (:func:`float_maps`, registry ``"float"``): the same maps for many regions
  at once in float64, each entry with an absolute bound on the distance of its coefficients from the exact
  ones (Higham 2002, Thm 3.1, through :mod:`regioncount._predicates`). Callers decide what the bound decides
  and ask the exact interpretation for the rest.

A new elementwise or groupwise op needs one kernel here per interpretation. Caches are keyed by content
(the bytes of the arrays), never by identity or data pointer: an in-place change of a weight array cannot
make them stale.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from fractions import Fraction

import numpy as np

from .._predicates import EPS, gamma, underflow_slack
from ._ops import Affine, Attention, GroupMax, Program, ReLU, Residual, op_code_length, relu_form, walk_widths
from ._protocol import Kernels

# ----------------------------------------------------------------------------------------------------
# exact maps


def _fgcd(a: Fraction, b: Fraction) -> Fraction:
    """Greatest common divisor of two positive Fractions (the largest ``g`` with ``a/g``, ``b/g`` integers)."""
    return Fraction(math.gcd(a.numerator, b.numerator), math.lcm(a.denominator, b.denominator))


class ExactMap:
    """An array of rationals stored as Python ints ``N`` (object array) times one positive Fraction ``s``."""

    __slots__ = ("N", "s")

    def __init__(self, N, s):
        self.N, self.s = N, s

    @staticmethod
    def of_floats(x) -> ExactMap:
        x = np.asarray(x, dtype=np.float64)
        fr = [float(v).as_integer_ratio() for v in x.ravel()]
        den = max((d for _, d in fr), default=1)
        N = np.array([n * (den // d) for n, d in fr], dtype=object).reshape(x.shape)
        return ExactMap(N, Fraction(1, den))

    @staticmethod
    def of_fractions(x) -> ExactMap:
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

    def __neg__(self) -> ExactMap:
        return ExactMap(-self.N, self.s)

    def __getitem__(self, idx) -> ExactMap:
        return ExactMap(self.N[idx], self.s)

    def fractions(self) -> np.ndarray:
        """The values as an object array of Fractions."""
        out = np.empty(self.N.shape, dtype=object)
        flat = out.reshape(-1)
        for i, n in enumerate(self.N.reshape(-1).tolist()):
            flat[i] = Fraction(n) * self.s
        return out


def _digest(a: np.ndarray) -> bytes:
    import hashlib  # here: its OpenSSL binding costs 6 ms of every command's start-up, and few need it

    a = np.ascontiguousarray(a)
    return hashlib.blake2b(a.tobytes(), digest_size=16).digest() + repr((a.shape, a.dtype.str)).encode()


class ContentCache:
    """``make(a)`` cached by the *content* of ``a`` (its bytes, shape and dtype) and ``extra``. A fast path
    remembers, per data pointer and layout, a private copy of the array and its digest, and uses the digest
    only while the array still equals that copy, so a caller's in-place change is a miss, never a stale hit."""

    def __init__(self, size: int = 256):
        self.size = size
        self.values: OrderedDict = OrderedDict()
        self.seen: OrderedDict = OrderedDict()

    def key(self, a: np.ndarray) -> bytes:
        lay = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
        hit = self.seen.get(lay)
        if hit is not None and np.array_equal(hit[0], a):
            return hit[1]
        d = _digest(a)
        self.seen[lay] = (np.array(a, copy=True), d)
        if len(self.seen) > self.size:
            self.seen.popitem(last=False)
        return d

    def get(self, a: np.ndarray, extra, make):
        k = (self.key(a), extra)
        hit = self.values.get(k)
        if hit is None:
            hit = self.values[k] = make()
            if len(self.values) > self.size:
                self.values.popitem(last=False)
        return hit


_WCACHE = ContentCache()
_BCACHE = ContentCache()


def exact_weights(W) -> ExactMap:
    """``W`` as an :class:`ExactMap`, cached by content."""
    W = np.asarray(W, dtype=np.float64)
    return _WCACHE.get(W, None, lambda: ExactMap.of_floats(W))


def _exact_bias(b, shape: tuple, rows) -> ExactMap | None:
    """The bias ``b`` (rows ``rows``) broadcast to ``shape``, exact (None where it is zero); cached by content."""
    b = np.asarray(b, dtype=np.float64)
    bb = b if b.ndim == 2 else b[None, :]
    if rows is not None:
        bb = bb[:, rows]
    if not np.any(bb):
        return None
    extra = (shape, None if rows is None else np.asarray(rows).tobytes())
    return _BCACHE.get(b, extra, lambda: ExactMap.of_floats(np.broadcast_to(bb, shape)))


def exact_affine(M: ExactMap, W, b, rows=None) -> ExactMap:
    """``M @ W.T + b`` on the last axis of ``M (c, T, d)``; ``b`` enters the constant (last) coefficient only.
    ``rows``: only these outputs (an index array), with ``W`` and ``b`` still the whole op's."""
    We = exact_weights(W)  # cached: slicing happens on the exact copy
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
    N[-1] = N[-1] + be.rescaled(g)
    return ExactMap(N, g)


def exact_scores(M: ExactMap, Wq, Wk):
    """Exact score coefficients of one head on a 2D domain (``M (3, T, d)``): ``F (3, T, T)`` (u1, u2, 1) and
    ``Q2 (3, T, T)`` (u1^2, u1 u2, u2^2) of ``S_ij``, as ints of one positive scale (returned third)."""
    Q = exact_affine(M, np.asarray(Wq).T, np.zeros(np.asarray(Wq).shape[1]))
    K = exact_affine(M, np.asarray(Wk).T, np.zeros(np.asarray(Wk).shape[1]))
    C = np.einsum("aie,bje->ijab", Q.N, K.N)  # object ints
    F = np.stack([C[..., 0, 2] + C[..., 2, 0], C[..., 1, 2] + C[..., 2, 1], C[..., 2, 2]])
    Q2 = np.stack([C[..., 0, 0], C[..., 0, 1] + C[..., 1, 0], C[..., 1, 1]])
    return F, Q2, Q.s * K.s


def _stacked(W: np.ndarray) -> np.ndarray:
    """Per-head weights ``W (heads, a, b)`` side by side: ``(a, heads b)``, head ``h`` in columns ``h b ..``."""
    H, a, b = W.shape
    return np.ascontiguousarray(np.transpose(W, (1, 0, 2)).reshape(a, H * b))


def _exact_attention(M: ExactMap, op: Attention, digits) -> ExactMap:
    """Hardmax attention under the winners ``digits`` (head-major): exact ties (equal score polynomials in every
    coefficient, in any dimension) are averaged, as the forward pass does. Every head's queries, keys and values
    come from one product each (the heads' weights side by side), and the output from one product of each
    query's selected value rows with the stacked ``Wo``: the same rationals as head by head, in four products."""
    c, T, d = M.N.shape
    H = op.heads
    if H == 0:
        return ExactMap(np.zeros(M.N.shape, dtype=object) * 0, M.s)
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    dk, dv = op.Wq.shape[2], op.Wv.shape[2]
    Q = exact_affine(M, _stacked(op.Wq).T, np.zeros(H * dk))  # (c, T, H dk)
    K = exact_affine(M, _stacked(op.Wk).T, np.zeros(H * dk))
    Vh = exact_affine(M, _stacked(op.Wv).T, np.zeros(H * dv))  # (c, T, H dv)
    QN = Q.N.reshape(c, T, H, dk)
    KN = K.N.reshape(c, T, H, dk)
    VN = Vh.N.reshape(c, T, H, dv)
    tied_sets = []
    L = 1
    for h in range(H):
        S = np.einsum("aie,bje->ijab", QN[:, :, h], KN[:, :, h])  # (T, T, c, c): S_ij = [u,1] S[i,j] [u,1]^T
        S = S + np.swapaxes(S, -1, -2)  # the symmetric form: equal polynomials <=> equal matrices
        for i in range(T):
            w = int(digits[h * T + i])
            tied = [j for j in range(T) if allowed[i, j] and np.array_equal(S[i, j], S[i, w])]
            tied_sets.append(tied)
            L = math.lcm(L, len(tied))
    # row i of head h: the sum of its tied value rows times L / (number tied), all in units of Vh.s / L
    R = np.empty((c, T, H, dv), dtype=object)
    for h in range(H):
        for i in range(T):
            tied = tied_sets[h * T + i]
            acc = VN[:, tied[0], h, :]
            for j in tied[1:]:
                acc = acc + VN[:, j, h, :]
            R[:, i, h, :] = acc * (L // len(tied)) if len(tied) > 1 or L > 1 else acc
    rows = ExactMap(R.reshape(c, T, H * dv), Vh.s * Fraction(1, L))
    return exact_affine(rows, _stacked(np.transpose(op.Wo, (0, 2, 1))), np.zeros(d))


#: The exact kernels: ``kernel(op, M, code, rows) -> ExactMap`` (see the module docstring).
EXACT = Kernels("exact", structural=("residual",))


@EXACT.register("affine")
def _exact_affine_op(op: Affine, M: ExactMap, code, rows) -> ExactMap:
    return exact_affine(M, op.W, op.b)


@EXACT.register("relu")
def _exact_relu(op: ReLU, M: ExactMap, code: np.ndarray, rows) -> ExactMap:
    c, T, d = M.N.shape
    bits = np.asarray(code, dtype=np.int64).reshape(T, d)
    if rows is not None:
        # bit 1: the input is > 0; bit 0: it is <= 0
        sign = np.where(bits.reshape(-1) > 0, 1, -1).astype(object)
        rows.append((ExactMap(M.N.reshape(c, T * d) * sign, M.s), bits.reshape(-1) > 0))
    return ExactMap(M.N * bits.reshape(1, T, d).astype(object), M.s)


@EXACT.register("groupmax")
def _exact_groupmax(op: GroupMax, M: ExactMap, code: np.ndarray, rows) -> ExactMap:
    c, T, d = M.N.shape
    n = d // op.k
    G = M.N.reshape(c, T, n, op.k)
    win = np.asarray(code, dtype=np.int64).reshape(T, n)
    W = np.take_along_axis(G, win[None, :, :, None], axis=3)
    if rows is not None:
        # the winner is the first largest piece: > every piece before it, >= every piece after it (the
        # winner's own row is zero and not strict: every unit has k rows, as in the float interpretation)
        diff = (W - G).reshape(c, T * n * op.k)
        piece = np.broadcast_to(np.arange(op.k), (T, n, op.k)).reshape(-1)
        w = np.repeat(win.reshape(-1), op.k)
        rows.append((ExactMap(diff, M.s), piece < w))
    return ExactMap(W[..., 0], M.s)


@EXACT.register("attention/hardmax")
def _exact_hardmax(op: Attention, M: ExactMap, code: np.ndarray, rows) -> ExactMap:
    if rows is not None:
        raise NotImplementedError("hardmax attention's constraints are quadratic: no affine constraint rows")
    return _exact_attention(M, op, code)


# ----------------------------------------------------------------------------------------------------
# the program, flattened once


class _Layout:
    """A program's leaf ops in order with their code slices: ``ins`` holds ``("push",)``, ``("pop",)`` and
    ``("leaf", op, index, code slice or None)``."""

    def __init__(self, program: Program, kernels: Kernels):
        self.ins: list[tuple] = []
        program = relu_form(program)  # the form every engine runs (codes are its codes)
        widths = {id(op): w for op, w, _ in walk_widths(program)}
        pos = [0, 0]

        def flat(ops):
            for op in ops:
                if isinstance(op, Residual):
                    self.ins.append(("push",))
                    flat(op.body)
                    self.ins.append(("pop",))
                    continue
                n = op_code_length(op, widths[id(op)], program.tokens)
                sl = slice(pos[1], pos[1] + n) if n else None
                self.ins.append(("leaf", op, pos[0], sl, kernels.lookup(op)))
                pos[0] += 1
                pos[1] += n

        flat(program.ops)
        self.n_leaves, self.code_length = pos


class ExactProgram:
    """Exact maps and constraints of regions of ``program`` from their flat codes, on the input map ``M0``
    (an :class:`ExactMap` ``(c, T, q)``: the input ``x`` as affine functions of the domain's ``c - 1``
    parameters and 1, the constant last). States are memoised by code prefix (``size`` of them, LRU)."""

    def __init__(self, program: Program, M0: ExactMap, size: int = 4096):
        self.program = program
        self.M0 = M0
        self.layout = _Layout(program, EXACT)
        self.size = size
        self.memo: OrderedDict = OrderedDict()

    @staticmethod
    def of_domain(program: Program, x0, V, size: int = 4096) -> ExactProgram:
        """The interpreter on the domain ``x = x0 + V u`` (floats taken exactly)."""
        x0 = np.asarray(x0, dtype=np.float64)
        V = np.asarray(V, dtype=np.float64)
        k = V.shape[1]
        A = np.concatenate([V.T, x0[None, :]], axis=0)  # (k + 1, q)
        A = np.broadcast_to(A[:, None, :], (k + 1, program.tokens, A.shape[1]))
        return ExactProgram(program, ExactMap.of_floats(A), size)

    def run(self, code, constraints: bool = False):
        """``(maps, rows)``: the exact output maps ``(c, T, d_out)`` of the region with flat code ``code`` and,
        when ``constraints``, its constraint rows (a list of ``(ExactMap (c, m), strict (m,))``)."""
        code = np.asarray(code, dtype=np.int64).reshape(-1)
        if code.size != self.layout.code_length:
            raise ValueError(f"a code of length {code.size}; this program writes {self.layout.code_length}")
        key = code.tobytes()
        if not constraints:
            hit = self.memo.get(key)
            if hit is not None:
                self.memo.move_to_end(key)
                return hit, None
        rows: list | None = [] if constraints else None
        M, stack = self.M0, []
        for ins in self.layout.ins:
            if ins[0] == "push":
                stack.append(M)
            elif ins[0] == "pop":
                M = stack.pop() + M
            else:
                _, op, _, sl, kernel = ins
                M = kernel(op, M, None if sl is None else code[sl], rows)
        self.memo[key] = M
        if len(self.memo) > self.size:
            self.memo.popitem(last=False)
        return M, rows

    def maps(self, code) -> ExactMap:
        """The exact output maps ``(c, T, d_out)`` of the region with flat code ``code``."""
        return self.run(code)[0]

    def output(self, code) -> ExactMap:
        """The exact map of the network's output (row ``out_token``): ``(c, d_out)``."""
        M = self.maps(code)
        return M[:, self.program.out_token, :]

    def constraints(self, code) -> tuple[ExactMap, np.ndarray]:
        """All constraint rows of the region with flat code ``code``: ``(C (c, m), strict (m,))``."""
        _, rows = self.run(code, constraints=True)
        c = self.M0.N.shape[0]
        if not rows:
            return ExactMap(np.zeros((c, 0), dtype=object), Fraction(1)), np.zeros(0, bool)
        return concat([C for C, _ in rows], axis=1), np.concatenate([st for _, st in rows])


def concat(maps: list, axis: int) -> ExactMap:
    """Exact maps joined along ``axis`` (in units of the gcd of their scales)."""
    g = maps[0].s
    for m in maps[1:]:
        g = _fgcd(g, m.s)
    return ExactMap(np.concatenate([m.rescaled(g) for m in maps], axis=axis), g)


def exact_equal(a: ExactMap, b: ExactMap) -> bool:
    """Whether two exact maps are the same array of rationals."""
    g = _fgcd(a.s, b.s)
    return bool(np.array_equal(a.rescaled(g), b.rescaled(g)))


# ----------------------------------------------------------------------------------------------------
# float maps with rigorous bounds, many regions at once

#: The float kernels: ``kernel(op, A, E, code, rows) -> (A, E)`` on ``A (R, c, T, d)`` float maps and ``E (R, T, d)``
#: bounds (every coefficient of entry ``(t, j)`` of region ``r`` is within ``E[r, t, j]`` of the exact one),
#: ``code (R, n)`` the op's decisions; appends ``(C (R, c, m), E (R, m), strict (m,) or (R, m))`` to ``rows``
#: when it is a list.
FLOAT = Kernels("float", structural=("residual",))


def _grow(x: np.ndarray, n: int) -> np.ndarray:
    """A float bound made an upper bound after ``n`` roundings of its own evaluation (plus the underflow slack
    of ``n`` products)."""
    return x * (1 + gamma(n + 2)) + underflow_slack(n + 2)


def _mm(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``X @ W`` on the last axis of ``X (..., d)`` as one 2D product (a stacked ``@`` over many tiny matrices runs
    one small BLAS call per matrix: several times slower). Any summation order: the bounds here hold for all."""
    return (X.reshape(-1, X.shape[-1]) @ W).reshape(X.shape[:-1] + (W.shape[1],))


def _absmax1(A: np.ndarray) -> np.ndarray:
    """``np.abs(A).max(axis=1)`` slice by slice (a maximum is exact in any order; a reduction over a short
    middle axis is several times slower)."""
    out = np.abs(A[:, 0])
    for i in range(1, A.shape[1]):
        np.maximum(out, np.abs(A[:, i]), out=out)
    return out


@FLOAT.register("affine")
def _float_affine(op: Affine, A, E, code, rows):
    W, b = op.W, op.b
    bb = b if b.ndim == 2 else b[None, :]
    aW = np.abs(W)
    out = _mm(A, W.T)
    out[:, -1] += bb
    n = W.shape[1] + 1
    # sum_i max_c |A_ci| |W_ji| bounds every coefficient's sum of products (one product instead of c)
    mag = _mm(_absmax1(A), aW.T) + np.abs(bb)[None]
    E2 = _grow(_mm(E, aW.T) + gamma(n) * mag + underflow_slack(n), 2 * n + 4)
    return out, E2


@FLOAT.register("relu")
def _float_relu(op: ReLU, A, E, code, rows):
    R, c, T, d = A.shape
    bits = np.asarray(code).reshape(R, 1, T, d) > 0
    if rows is not None:
        sign = np.where(bits, 1.0, -1.0)
        rows.append(((A * sign).reshape(R, c, T * d), E.reshape(R, T * d), bits.reshape(R, T * d)))
    return A * bits, E * bits[:, 0]


@FLOAT.register("groupmax")
def _float_groupmax(op: GroupMax, A, E, code, rows):
    R, c, T, d = A.shape
    n, k = d // op.k, op.k
    G = A.reshape(R, c, T, n, k)
    EG = E.reshape(R, T, n, k)
    win = np.asarray(code, dtype=np.int64).reshape(R, T, n)
    W = np.take_along_axis(G, win[:, None, :, :, None], axis=-1)
    EW = np.take_along_axis(EG, win[:, :, :, None], axis=-1)
    if rows is not None:
        diff = (W - G).reshape(R, c, T * n * k)
        ed = (EW + EG) * (1 + 2 * EPS) + EPS * np.abs(W - G).max(axis=1)
        piece = np.broadcast_to(np.arange(k), (R, T, n, k))
        rows.append((diff, _grow(ed.reshape(R, -1), 2), (piece < win[..., None]).reshape(R, -1)))
    return W[..., 0], EW[..., 0]


def _float_linear(A, E, W):
    """``A @ W`` on the last axis of float maps ``A (R, c, T, d)`` (``W (d, m)``, no bias) and a bound ``(R, T, m)``
    on every coefficient's error (inputs off by ``E (R, T, d)``; Higham 2002, Thm 3.1, over the nonzero terms)."""
    aW = np.abs(W)
    n = int(np.count_nonzero(W, axis=0).max(initial=0)) + 1
    out = _mm(A, W)
    aA = _absmax1(A)
    mag = _mm(aA, aW)
    err = _grow(_mm(E, aW) + gamma(n) * mag + underflow_slack(n), 2 * n + 4)
    # an output none of whose products can be nonzero (every input it reads is an exact zero) is exactly zero
    live = _mm(((aA > 0) | (E > 0)).astype(np.float64), (W != 0).astype(np.float64))
    err[live == 0] = 0.0
    return out, err


@FLOAT.register("attention/hardmax")
def _float_hardmax(op: Attention, A, E, code, rows):
    """Hardmax attention under the winners ``code (R, heads T)`` (head-major), as :func:`_exact_attention`: each
    query averages the keys whose score polynomial equals its winner's exactly. A key is out where some
    coefficient of the two scores' symmetric forms differs by more than their bounds, in where the forms are
    bitwise equal with zero bounds; a region where some key is neither (a tie the floats cannot settle) gets
    an infinite bound, so every question about it goes to the exact interpreter."""
    if rows is not None:
        raise NotImplementedError("hardmax attention's constraints are quadratic: no affine constraint rows")
    R, c, T, d = A.shape
    digits = np.asarray(code, dtype=np.int64).reshape(R, op.heads, T)
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    out = np.zeros((R, c, T, d))
    Eo = np.zeros((R, T, d))
    unsure = np.zeros(R, bool)
    rr = np.arange(R)
    for h in range(op.heads):
        Q, EQ = _float_linear(A, E, op.Wq[h])  # (R, c, T, dk)
        K, EK = _float_linear(A, E, op.Wk[h])
        Vv, EV = _float_linear(A, E, op.Wv[h])
        VO, EVO = _float_linear(Vv, EV, op.Wo[h])  # (R, c, T, d)
        dk = Q.shape[-1]
        # symmetric forms of S_ij = (Q_i . u)(K_j . u): P[a, b] + P[b, a], P[a, b] = sum_e Q[a, i, e] K[b, j, e]
        P = np.einsum("raie,rbje->rijab", Q, K)  # (R, T, T, c, c)
        S = P + np.swapaxes(P, -1, -2)
        aQ, aK = np.abs(Q).max(axis=1), np.abs(K).max(axis=1)  # (R, T, dk)
        # per entry of S: two sums of dk products, each off by the inputs' errors and by rounding
        eS = 2 * (np.einsum("rie,rje->rij", EQ, aK + EK) + np.einsum("rie,rje->rij", aQ, EK)) + gamma(
            2 * dk + 1
        ) * 2 * np.einsum("rie,rje->rij", aQ, aK)
        eS = _grow(eS + underflow_slack(2 * dk + 1), 4 * dk + 8)  # (R, T, T)
        # where no product has two factors that can be nonzero (a zero query or key), S is exactly zero
        nzQ = ((aQ > 0) | (EQ > 0)).astype(np.float64)
        nzK = ((aK > 0) | (EK > 0)).astype(np.float64)
        eS[np.einsum("rie,rje->rij", nzQ, nzK) == 0] = 0.0
        w = digits[:, h]  # (R, T)
        Sw = np.take_along_axis(S, w[:, :, None, None, None], axis=2)  # (R, T, 1, c, c)
        ew = np.take_along_axis(eS, w[:, :, None], axis=2)  # (R, T, 1)
        diff = np.abs(S - Sw)
        bound = (eS + ew) * (1 + 4 * EPS)
        differ = np.any(diff * (1 - 2 * EPS) > bound[..., None, None], axis=(-1, -2))
        equal = np.all(diff == 0, axis=(-1, -2)) & (eS == 0) & (ew == 0)
        tied = allowed[None] & (equal | (np.arange(T)[None, None, :] == w[:, :, None]))
        unsure |= np.any(allowed[None] & ~differ & ~tied, axis=(1, 2))
        n = tied.sum(axis=2)  # (R, T), at least 1 (the winner)
        if np.all(n == 1):
            head = VO[rr[:, None], :, w].transpose(0, 2, 1, 3)  # (R, c, T, d): the winner's value row
            eh = np.take_along_axis(EVO, w[:, :, None], axis=1)
        else:
            wts = tied / n[:, :, None]
            head = np.einsum("rij,rcjd->rcid", tied.astype(np.float64), VO) / n[:, None, :, None]
            k = int(n.max())
            mag = np.einsum("rij,rjd->rid", tied.astype(np.float64), np.abs(VO).max(axis=1)) / n[:, :, None]
            eh = _grow(np.einsum("rij,rjd->rid", wts, EVO) + gamma(k + 1) * mag, k + 4)
        if h == 0:
            out, Eo = head, eh
        else:
            S2 = out + head
            Eo = _grow(Eo + eh + EPS * np.abs(S2).max(axis=1), 3)
            out = S2
    if op.heads == 0:
        return np.zeros_like(A), np.zeros_like(E)
    Eo = np.where(unsure[:, None, None], np.inf, Eo)
    return out, Eo


def float_maps(program: Program, codes, x0, V, constraints: bool = False):
    """Float output maps of regions with flat codes ``codes (R, C)`` on the domain ``x = x0 + V u``:
    ``(A (R, c, T, d_out), E (R, T, d_out), rows)`` with ``E`` a rigorous bound on every coefficient's error and
    ``rows`` (when ``constraints``) the float constraint rows with their bounds (see :data:`FLOAT`)."""
    codes = np.asarray(codes)
    R = codes.shape[0]
    x0 = np.asarray(x0, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    A0 = np.concatenate([V.T, x0[None, :]], axis=0)  # exact: the domain's floats
    T = program.tokens
    A = np.broadcast_to(A0[None, :, None, :], (R, A0.shape[0], T, A0.shape[1])).copy()
    E = np.zeros((R, T, A0.shape[1]))
    rows: list | None = [] if constraints else None
    layout = _Layout(program, FLOAT)
    stack: list = []
    for ins in layout.ins:
        if ins[0] == "push":
            stack.append((A, E))
        elif ins[0] == "pop":
            A0_, E0_ = stack.pop()
            S = A0_ + A
            E = _grow(E0_ + E + EPS * np.abs(S).max(axis=1), 3)
            A = S
        else:
            _, op, _, sl, kernel = ins
            A, E = kernel(op, A, E, None if sl is None else codes[:, sl], rows)
    return A, E, rows


__all__ = ["ExactMap", "ExactProgram", "exact_affine", "exact_scores", "exact_weights", "exact_equal", "float_maps"]
