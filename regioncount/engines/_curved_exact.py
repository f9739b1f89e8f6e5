"""The certified curved 2D engine (DESIGN §2 "exact", §3 ``curved``): the vertical decomposition of
:mod:`._curved` decided with exact predicates (:mod:`._algebraic`, python-flint) on the network as given.

Why the count is a claim about the float64 network as given. The network's weights and the domain's
bounds are float64 numbers, i.e. rationals. This engine never computes a map in floating point: each
trapezoid carries its affine maps ``(x, y, 1) -> token entries`` as exact rational matrices (``fmpq_mat``),
built from the weights by exact replay of the ops: an ``Affine`` is an exact product plus the exact bias, a
ReLU multiplies by the trapezoid's code bits, a hardmax head copies (or averages, for keys whose exact
score polynomials are identical) the exact value rows of the keys its code names, a residual adds exactly.
So every conic ``S_c - S_j`` (or line) that splits a trapezoid is the exact polynomial of the network on
that trapezoid, with rational coefficients, and nothing about it is rounded. (The alternative, float maps
with rigorous error bounds, would still need this replay wherever a bound cannot decide; the replay is
the whole computation here, which is why this engine serves small partitions and the float engine
:mod:`._curved` the large ones, with ``exact: false``.)

Splitting a trapezoid ``x in (a, b)``, ``y`` between arcs ``L`` and ``U`` by a curve ``Q``: ``Q`` is factored
over the rationals (``fmpq_mpoly.factor``); factors of even multiplicity do not change sign and make no
boundary; each factor ``P`` of odd multiplicity splits in turn. The cut ``x`` are the real roots in
``(a, b)`` of the discriminant of ``P`` in ``y`` (vertical tangents and singular points), of its leading
coefficient when ``P`` is linear in ``y`` (its pole), of ``P`` itself when ``P`` does not depend on ``y``
(vertical lines), and of the resultants in ``y`` of ``P`` with ``L`` and with ``U`` (where ``P`` may meet
them; a factor proportional to an arc lies on it and meets nothing). Cut points are algebraic reals with
canonical keys, so equal cuts are merged by equality, not by distance. In each open sub-slab the real
branches of ``P``, ``L`` and ``U`` are disjoint graphs (their discriminants and resultants do not vanish
there), so their order at one rational sample ``x`` is their order on the whole sub-slab; it is decided
exactly, and the sign of ``Q`` on each piece is the exact sign of ``Q`` at a rational point inside it.

Floats (Arb balls, rigorous enclosures) serve only as filters in front of the exact decisions: a curve whose
interval extension over a trapezoid's box excludes 0 does not enter it; a cut polynomial whose interval
extension over the slab excludes 0 has no root there; two branch values whose balls are disjoint are
ordered. Where a ball cannot decide, the exact computation does; no decision rests on a width.

Connected cells: two trapezoids are adjacent when they share an arc over an ``x`` range of positive
length (exact comparison of algebraic reals) or a vertical wall over a ``y`` range of positive length;
the wall's ends are branch values at an algebraic ``x``, compared by Arb balls of growing precision where
they differ, and recognised as equal exactly where two arcs meet there (the ``x``'s minimal polynomial
divides the resultant of the two curves, and the other pairs of roots separate). Linear regions merge
adjacent cells whose exact output maps are equal. Nothing here has a tolerance.

Scope: hardmax Transformers at every depth, ReLU and Maxout programs, ReLU attention at every depth whose
walls stay within ``DEGREE_CAP`` (past a ReLU-attention op the maps are polynomials, ``fmpq_mpoly``, and the
walls curves of degree >= 3, split by :meth:`_split_curve`); a static bound on the walls' degree from the
weights' exact zeros refuses the rest before any work. The cost is Python per trapezoid: use it for
partitions of up to a few thousand trapezoids.
"""

from __future__ import annotations

import functools

import numpy as np

from .._errors import CurvedBoundaryError, MemoryCapError
from ..networks import check_domain, lower, walk_widths
from ..networks._ops import Affine, Attention, GroupMax, ReLU, Residual, code_length, max_code_digit
from . import _algebraic as al
from ._protocol import refuse_unsupported


def _flint():
    al.require_flint()
    import flint

    return flint


# ----------------------------------------------------------------------------------------------------
# arcs and trapezoids


class Arc:
    """Branch ``k`` of the curve ``Q`` over the slab ``(x0, x1)`` it was made in, with id ``id`` (both sides of an
    arc carry it). ``Q`` is a canonical conic (6 fmpq; ``k`` 0 lower, 1 upper real root in ``y``, 0 for a curve
    linear in ``y``) or an :class:`~._algebraic.Curve` of degree >= 3 (``k`` the index of the real root in ``y``
    in ascending order, constant over the slab: its discriminant and leading coefficient in ``y`` have no
    root there)."""

    __slots__ = ("Q", "k", "id", "dq", "g", "x0", "x1")

    def __init__(self, Q, k: int, id_: int, x0=None, x1=None):
        self.Q, self.k, self.id = Q, k, id_
        self.g = isinstance(Q, al.Curve)
        self.dq = Q.dy if self.g else al.y_degree(Q)
        self.x0 = x0 if x0 is not None else al.rational(-1)
        self.x1 = x1 if x1 is not None else al.rational(1)

    def at(self, s) -> al.AlgReal:
        """The branch's ``y`` at a rational ``x = s`` inside its slab."""
        if self.g:
            return self.Q.y_roots_at(s)[self.k]
        r = al.y_roots_at(self.Q, s)
        if self.dq == 2:
            if len(r) != 2:
                raise AssertionError("an arc's conic has no two real roots inside its slab")
            return r[self.k]
        return r[0]


class Trap:
    """``x in (a, b)`` (algebraic reals), ``y`` between arcs ``L`` and ``U``; ``s`` a rational sample ``x``
    inside; ``M`` the exact maps ``(3 T, width)`` (row ``c T + t``: coefficient ``c`` of ``(x, y, 1)`` of
    token ``t``); ``code``; ``base`` the input maps of the residuals it is inside; ``tied`` whether a
    hardmax query of it averaged tied keys."""

    __slots__ = ("a", "b", "L", "U", "s", "M", "code", "base", "tied", "pm", "_w", "_box")

    def __init__(self, a, b, L, U, s, M, code, base=(), tied=False, pm=None):
        self.a, self.b, self.L, self.U, self.s, self.M, self.code = a, b, L, U, s, M, code
        self.base, self.tied = base, tied
        self.pm = pm if pm is not None else {}  # snapshot -> exact output map of the truncated program
        self._w = self._box = None

    def witness(self):
        """A rational interior point ``(s, y)``."""
        if self._w is None:
            self._w = (self.s, al.between(self.L.at(self.s), self.U.at(self.s)))
        return self._w

    def box(self):
        """Arb balls ``(X, Y)`` holding the trapezoid: ``X`` from the isolating intervals of its ends, ``Y``
        from Arb's enclosures of its arcs over ``X`` (rigorous interval extensions)."""
        if self._box is None:
            fl = _flint()
            X = fl.arb(self.a.bounds()[0]).union(fl.arb(self.b.bounds()[1]))
            ylo, yhi = fl.arb(-1), fl.arb(1)
            if not self.L.g:
                lo = _branch_ball(self.L, X)
                ylo = max(lo.lower(), ylo) if lo.is_finite() else ylo
            if not self.U.g:
                hi = _branch_ball(self.U, X)
                yhi = min(hi.upper(), yhi) if hi.is_finite() else yhi
            self._box = (X, ylo.union(yhi))
        return self._box


def _branch_ball(arc: Arc, X):
    """A ball holding the arc's ``y`` for every ``x`` of the ball ``X`` where the branch is defined."""
    fl = _flint()
    A, B, C, D, E, F = (fl.arb(c) for c in arc.Q)
    c1 = B * X + E
    c0 = (A * X + D) * X + F
    if arc.dq == 1:
        return -c0 / c1
    disc = c1 * c1 - 4 * C * c0
    disc = disc if disc > 0 else (fl.arb(0).union(disc.upper()) if disc.upper() > 0 else fl.arb(0))
    r = disc.sqrt()
    return ((-c1 - r) / (2 * C)).union((-c1 + r) / (2 * C))


def _poly_ball(f, X):
    """Horner's interval extension of the rational polynomial ``f`` over the ball ``X`` (Arb)."""
    fl = _flint()
    v = fl.arb(0)
    for c in reversed(f.coeffs()):
        v = v * X + fl.arb(c)
    return v


def _box_sign(Q, box) -> int:
    """+1 / -1 where ``Q`` (a conic or a bivariate polynomial) provably has that sign on the box (Arb interval
    extension), 0 if undecided."""
    fl = _flint()
    X, Y = box
    if not isinstance(Q, tuple):
        d = Q.to_dict()
        ny = max(m[1] for m in d)
        rows: list = [fl.arb(0)] * (ny + 1)
        by: dict = {}
        for (i, j), c in d.items():
            by.setdefault(j, {})[i] = c
        for j, cs in by.items():
            v = fl.arb(0)
            for i in range(max(cs), -1, -1):
                v = v * X + fl.arb(cs.get(i, 0))
            rows[j] = v
        v = fl.arb(0)
        for r in reversed(rows):
            v = v * Y + r
        return 1 if v > 0 else -1 if v < 0 else 0
    A, B, C, D, E, F = (fl.arb(c) for c in Q)
    v = (A * X + B * Y + D) * X + (C * Y + E) * Y + F
    return 1 if v > 0 else -1 if v < 0 else 0


# ----------------------------------------------------------------------------------------------------
# conic factorisation


@functools.lru_cache(maxsize=1)
def _ctx():
    fl = _flint()
    return fl.fmpq_mpoly_ctx.get(("x", "y"), "lex")


_MONO = ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0))


def _to_mpoly(Q):
    return _ctx().from_dict({m: c for m, c in zip(_MONO, Q) if c != 0})


def _from_mpoly(P) -> tuple:
    d = {tuple(int(e) for e in m): c for m, c in zip(P.monoms(), P.coeffs())}
    fl = _flint()
    return tuple(d.get(m, fl.fmpq(0)) for m in _MONO)


@functools.lru_cache(maxsize=65536)
def _factors(Q: tuple) -> tuple[int, tuple]:
    """``(sign of the content, odd-multiplicity irreducible factors as canonical conics, even ones)``."""
    c, facs = _to_mpoly(Q).factor()
    odd, sign = [], 1 if c > 0 else -1
    for f, m in facs:
        F = _from_mpoly(f)
        G = al.canonical(F)
        # canonical may flip the factor's sign: keep the product's sign right
        ratio = next(g / h for g, h in zip(G, F) if h != 0)
        if ratio < 0 and m % 2:
            sign = -sign
        if m % 2:
            odd.append(G)
    return sign, tuple(odd)


@functools.lru_cache(maxsize=65536)
def _poly_factors_cached(key: tuple) -> tuple[int, tuple]:
    P = al.mctx().from_dict(dict(key))
    c, facs = P.factor()
    sign = 1 if c > 0 else -1
    odd: list = []
    for f, m in facs:
        lam, G = al.primitive_mpoly(f)
        if m % 2:
            if G.total_degree() <= 2:
                F = _conic_of(G)
                Gc = al.canonical(F)
                if next(g / h for g, h in zip(Gc, F) if h != 0) < 0:
                    lam = -lam
                odd.append(Gc)
            else:
                odd.append(al.curve(G))
            if lam < 0:
                sign = -sign
    return sign, tuple(odd)


def _poly_factors(Q) -> tuple[int, tuple]:
    """``(sign of the content, odd-multiplicity irreducible factors)`` of a bivariate polynomial: factors of
    total degree <= 2 as canonical conics, the others as :class:`~._algebraic.Curve`. ``Q`` is the sign times
    the product of the factors (each scaled by a positive rational) times squares."""
    return _poly_factors_cached(tuple((m, c) for m, c in Q.to_dict().items()))


def _qkey(Q) -> tuple:
    if isinstance(Q, al.Curve):
        return Q.key
    return tuple((int(c.p), int(c.q)) for c in Q)


@functools.lru_cache(maxsize=65536)
def _conic_curve(Q: tuple) -> al.Curve:
    return al.curve(al.conic_mpoly(Q))


def _as_curve(Q) -> al.Curve:
    """A conic or curve as an :class:`~._algebraic.Curve` (interned)."""
    return Q if isinstance(Q, al.Curve) else _conic_curve(Q)


def _conic_of(P) -> tuple:
    """A bivariate polynomial of total degree <= 2 as its 6 conic coefficients."""
    d = P.to_dict()
    z = _flint().fmpq(0)
    return tuple(d.get(m, z) for m in _MONO)


def _sign_at(Q, x, y) -> int:
    v = al.value(Q, x, y)
    return (v > 0) - (v < 0)


# ----------------------------------------------------------------------------------------------------
# the split


class _Splitter:
    def __init__(self, cap: int | None = None):
        self.next_id = 2
        self.degree = 0
        self.cap = cap

    def split(self, t: Trap, Q) -> list[tuple[Trap, int]]:
        """Pieces of ``t`` with the exact sign of ``Q`` on each (0 where ``Q`` vanishes identically). ``Q`` is a
        conic (6 fmpq) or a bivariate polynomial (``fmpq_mpoly``) of any degree."""
        if not isinstance(Q, tuple):
            if Q.is_zero():
                return [(t, 0)]
            if Q.total_degree() <= 2:
                Q = _conic_of(Q)
            else:
                return self._split_poly(t, Q)
        if all(c == 0 for c in Q):
            return [(t, 0)]
        # the float filter: a curve that provably keeps one sign on the trapezoid's box does not enter it
        sb = _box_sign(Q, t.box())
        if sb:
            return [(t, sb)]
        Qc = al.canonical(Q)
        sign0 = 1 if next(c for c in Q if c != 0) > 0 else -1
        csign, odd = _factors(Qc)
        out = [(t, sign0 * csign)]
        for P in odd:
            nxt: list[tuple[Trap, int]] = []
            for piece, s in out:
                nxt.extend((pp, s * sp) for pp, sp in self._split_irreducible(piece, P))
            out = nxt
        return out

    def _split_poly(self, t: Trap, Q) -> list[tuple[Trap, int]]:
        sb = _box_sign(Q, t.box())
        if sb:
            return [(t, sb)]
        sign, odd = _poly_factors(Q)
        out = [(t, sign)]
        for G in odd:
            nxt: list[tuple[Trap, int]] = []
            for piece, s in out:
                parts = self._split_irreducible(piece, G) if isinstance(G, tuple) else self._split_curve(piece, G)
                nxt.extend((pp, s * sp) for pp, sp in parts)
            out = nxt
        return out

    def _split_curve(self, t: Trap, C: al.Curve) -> list[tuple[Trap, int]]:
        """Split ``t`` by an irreducible curve of degree >= 3 (the cylindrical decomposition of the module
        docstring: cuts at the real roots of its discriminant and leading coefficient in ``y`` and of its
        resultants with the trapezoid's arcs; branches ordered at a rational sample of each sub-slab)."""
        if self.cap is not None and C.deg > self.cap:
            raise CurvedBoundaryError(_cap_message(C.deg, self.cap))
        polys = []
        if C.dy == 0:
            polys.append(C.yc[0])
        else:
            if C.dy >= 2:
                polys.append(C.disc())
            if C.lc.degree() > 0:
                polys.append(C.lc)
            for arc in (t.L, t.U):
                G = _as_curve(arc.Q)
                if G is not C:
                    res = al.resultant_curves(C, G)
                    if not res.is_zero():
                        polys.append(res)

        def branches(s):
            return list(enumerate(C.y_roots_at(s))) if C.dy > 0 else []

        def sign(s, y):
            v = C.value(s, y)
            return (v > 0) - (v < 0)

        return self._split_by(t, C, polys, branches, sign, int(C.deg))

    def _split_irreducible(self, t: Trap, P) -> list[tuple[Trap, int]]:
        """Split ``t`` by an irreducible line or conic ``P`` (6 fmpq coefficients)."""
        fl = _flint()
        dq = al.y_degree(P)
        polys = []
        if dq == 0:
            polys.append(fl.fmpq_poly([P[5], P[3], P[0]]))
        elif dq == 2:
            polys.append(al.discriminant_x(P))
        elif P[1] != 0:
            polys.append(fl.fmpq_poly([P[4], P[1]]))
        if dq > 0:
            for arc in (t.L, t.U):
                if arc.Q != P:
                    if arc.g:
                        res = al.resultant_curves(_as_curve(P), arc.Q)
                    else:
                        res = al.resultant_y(P, arc.Q)
                    if not res.is_zero():
                        polys.append(res)

        def branches(s):  # a line's one branch is branch 0; a conic's are indexed by their order
            return [(k if dq == 2 else 0, r) for k, r in enumerate(al.y_roots_at(P, s))] if dq > 0 else []

        def sign(s, y):
            return _sign_at(P, s, y)

        return self._split_by(t, P, polys, branches, sign, 1 if (P[0] == P[1] == P[2] == 0) else 2)

    def _split_by(self, t: Trap, Q, polys, branches, sign, degree: int) -> list[tuple[Trap, int]]:
        """The pieces of ``t`` on each side of the curve ``Q``, with the sign of ``Q`` on each: cut the slab at
        the real roots in ``(t.a, t.b)`` of the cut polynomials ``polys``; in each open sub-slab take the
        branches ``branches(s) -> [(index, y)]`` of ``Q`` at a rational sample ``s`` that lie strictly between
        the arcs, and ``sign(s, y)``, the exact sign of ``Q`` at a rational point, between consecutive levels.
        ``t`` itself (with its one sign) where ``Q`` crosses no sub-slab; ``degree`` is recorded otherwise."""
        cuts: dict = {}
        X = t.box()[0]
        for f in polys:
            # the filter: a polynomial whose Arb interval extension over the slab excludes 0 has no root there
            if f.degree() > 0 and not _poly_ball(f, X) != 0:
                for x in al.roots_in(f, t.a, t.b):
                    cuts.setdefault(x.key, x)
        xs = sorted(cuts.values(), key=functools.cmp_to_key(al.cmp))
        ends = [t.a, *xs, t.b]
        slabs = []
        for j in range(len(ends) - 1):
            x0, x1 = ends[j], ends[j + 1]
            s = t.s if (len(ends) == 2) else al.between(x0, x1)
            yl, yu = t.L.at(s), t.U.at(s)
            inside = [(k, r) for k, r in branches(s) if al.cmp(r, yl) > 0 and al.cmp(r, yu) < 0]
            levels = [yl, *(r for _, r in inside), yu]
            signs = [sign(s, al.between(levels[i], levels[i + 1])) for i in range(len(levels) - 1)]
            slabs.append((x0, x1, s, inside, signs))
        if all(not sl[3] for sl in slabs) and len({sl[4][0] for sl in slabs}) == 1:
            return [(t, slabs[0][4][0])]
        self.degree = max(self.degree, degree)
        pieces = []
        for x0, x1, s, inside, signs in slabs:
            arcs = [t.L]
            for k, _ in inside:
                arcs.append(Arc(Q, k, self.next_id, x0, x1))
                self.next_id += 1
            arcs.append(t.U)
            for i in range(len(arcs) - 1):
                pieces.append(
                    (Trap(x0, x1, arcs[i], arcs[i + 1], s, t.M, list(t.code), t.base, t.tied, t.pm), signs[i])
                )
        return pieces


# ----------------------------------------------------------------------------------------------------
# degrees

#: The largest total degree of a wall (an irreducible curve that splits a trapezoid) the certified engine
#: takes on: measured in benchmarks/README.md ("certified curved cells: degrees"), where the exact
#: resultants and root isolation of walls of this degree still cost seconds, not hours, per trapezoid.
DEGREE_CAP = 9


def _cap_message(deg: int, cap: int) -> str:
    return (
        f"this network's cell walls reach degree {deg} (ReLU attention composes to degree 3^t), past the {cap} "
        "that the certified curved engine holds; use --method line (exact along segments) or --method sample"
    )


def wall_degree_bound(program) -> int:
    """An upper bound on the total degree of every wall the program can meet on a 2D slice, from the
    weights' exact zeros (per state column: :func:`~._degrees.program_degrees`, shared with the line engine)."""
    from ._degrees import program_degrees

    return program_degrees(program).wall


# ----------------------------------------------------------------------------------------------------
# exact maps


def _qmat(a: np.ndarray):
    fl = _flint()
    a = np.asarray(a, float)
    r, c = a.shape
    return fl.fmpq_mat(r, c, [al.q_of(v) for v in a.reshape(-1)])


class _ExactEngine:
    def __init__(self, program, max_traps):
        self.program = program
        self.T = program.tokens
        self.sp = _Splitter(DEGREE_CAP)
        self.max_traps = max_traps
        self.code_at = 0
        self.cubic = False
        self.ties = 0
        self._mats: dict = {}
        self._polys: dict = {}

    def mat(self, key, a):
        m = self._mats.get(key)
        if m is None:
            m = self._mats[key] = _qmat(a)
        return m

    def _cap(self, traps):
        if self.max_traps is not None and len(traps) > self.max_traps:
            raise MemoryCapError(f"the certified curved partition passed {self.max_traps:,} trapezoids")

    def _entry(self, M, c: int, tok: int, col: int):
        return M[c * self.T + tok, col]

    def _line(self, M, tok: int, col: int):
        z = [self._entry(M, c, tok, col) for c in range(3)]
        zero = _flint().fmpq(0)
        return (zero, zero, zero, z[0], z[1], z[2])

    def run(self, ops, traps, affine: bool):
        for op in ops:
            traps, affine = self.op(op, traps, affine)
        return traps, affine

    def _need(self, affine, what):
        if not affine:
            raise CurvedBoundaryError(
                f"{what} after a ReLU-attention op: its boundaries have degree above 2 (the attention output is "
                "a cubic spline, Lai, Lim, Liu 2024), which the exact 2D engine cannot split; use --method line "
                "(exact along segments) or --method sample"
            )

    def op(self, op, traps, affine):
        fl = _flint()
        T = self.T
        if not affine:
            return self._pop(op, traps), False
        if isinstance(op, Affine):
            Wt = self.mat((id(op), "Wt"), op.W.T)
            b = np.asarray(op.b, float)
            B = np.zeros((3 * T, op.W.shape[0]))
            B[2 * T : 3 * T] = b if b.ndim == 2 else b[None, :]
            Bm = self.mat((id(op), "B"), B)
            done: dict = {}
            for t in traps:
                k = id(t.M)
                if k not in done:
                    done[k] = (t.M, t.M * Wt + Bm)
                t.M = done[k][1]
            return traps, True
        if isinstance(op, Residual):
            for t in traps:
                t.base = (*t.base, t.M)
            traps, aff2 = self.run(op.body, traps, True)
            sums: dict = {}
            for t in traps:
                base = t.base[-1]
                t.base = t.base[:-1]
                pair = (id(base), id(t.M))
                if pair not in sums:
                    sums[pair] = (base, t.M, base + t.M if aff2 else _pm_add(self.to_poly(base), t.M))
                t.M = sums[pair][2]
            return traps, aff2
        if isinstance(op, ReLU):
            self._need(affine, "a ReLU")
            w = traps[0].M.ncols()
            off = self.code_at
            self.code_at += T * w
            for tok in range(T):
                for j in range(w):
                    out = []
                    for t in traps:
                        for p, s in self.sp.split(t, self._line(t.M, tok, j)):
                            p.code[off + tok * w + j] = int(s > 0)
                            out.append(p)
                    traps = out
                    self._cap(traps)
            cache: dict = {}
            for t in traps:
                key = (id(t.M), tuple(t.code[off : off + T * w]))
                if key not in cache:
                    M = fl.fmpq_mat(t.M)
                    for tok in range(T):
                        for j in range(w):
                            if not t.code[off + tok * w + j]:
                                for c in range(3):
                                    M[c * T + tok, j] = 0
                    cache[key] = M
                t.M = cache[key]
            return traps, True
        if isinstance(op, GroupMax):
            self._need(affine, "a maxout unit")
            return self._group_max(op, traps), True
        if isinstance(op, Attention):
            self._need(affine, "an attention op")
            if op.sigma == "hardmax":
                return self._hardmax(op, traps), True
            for t in traps:
                t.M = self.to_poly(t.M)
            self.cubic = True
            return self._pop(op, traps), False
        raise TypeError(type(op).__name__)

    def _tournament(self, traps, k: int, value, diff, slot: int):
        """Split ``traps`` by one maxout unit of ``k`` pieces and write its winner into code digit ``slot``.

        The champion of each trapezoid starts as the best piece at its witness (``value(t, r, x, y)``, ties to
        the lower index); each piece ``r`` in turn then splits every trapezoid by ``diff(t, c, r)``, champion
        minus challenger (None where the two are identical: the lower index wins), and the challenger takes
        the side where the difference is negative. Shared by the straight/conic maps and the polynomial maps."""
        champs = []
        for t in traps:
            x, y = t.witness()
            vals = [value(t, r, x, y) for r in range(k)]
            champs.append(max(range(k), key=lambda r: (vals[r], -r)))
        for r in range(k):
            nt, nc = [], []
            for t, c in zip(traps, champs):
                d = None if c == r else diff(t, c, r)
                if d is None:
                    nt.append(t)
                    nc.append(min(r, c))
                    continue
                for p, s in self.sp.split(t, d):
                    nt.append(p)
                    nc.append(r if s < 0 else c)
            traps, champs = nt, nc
            self._cap(traps)
        for t, c in zip(traps, champs):
            t.code[slot] = c
        return traps

    def _group_max(self, op: GroupMax, traps):
        fl = _flint()
        T, k = self.T, op.k
        w = traps[0].M.ncols()
        n = w // k
        off = self.code_at
        self.code_at += T * n
        for tok in range(T):
            for u in range(n):

                def value(t, r, x, y, tok=tok, u=u):
                    return al.value(self._line(t.M, tok, u * k + r), x, y)

                def diff(t, c, r, tok=tok, u=u):  # None where the two pieces' lines are identical
                    lc, lr = self._line(t.M, tok, u * k + c), self._line(t.M, tok, u * k + r)
                    d = tuple(p - q for p, q in zip(lc, lr))
                    return None if all(v == 0 for v in d) else d

                traps = self._tournament(traps, k, value, diff, off + tok * n + u)
        cache: dict = {}
        for t in traps:
            ch = tuple(t.code[off : off + T * n])
            key = (id(t.M), ch)
            if key not in cache:
                M = fl.fmpq_mat(3 * T, n)
                for tok in range(T):
                    for u in range(n):
                        for c in range(3):
                            M[c * T + tok, u] = t.M[c * T + tok, u * k + ch[tok * n + u]]
                cache[key] = M
            t.M = cache[key]
        return traps

    def _scores(self, op: Attention, M, h: int, cache: dict):
        key = (id(M), h)
        S = cache.get(key)
        if S is None:
            Qm = M * self.mat((id(op), "q", h), op.Wq[h])
            Km = M * self.mat((id(op), "k", h), op.Wk[h])
            T = self.T
            e = Qm.ncols()
            S = []
            for i in range(T):
                qi = [[Qm[c * T + i, z] for z in range(e)] for c in range(3)]
                row = []
                for j in range(T):
                    kj = [[Km[c * T + j, z] for z in range(e)] for c in range(3)]
                    G = [
                        [sum((qi[a][z] * kj[b][z] for z in range(e)), _flint().fmpq(0)) for b in range(3)]
                        for a in range(3)
                    ]
                    row.append((G[0][0], G[0][1] + G[1][0], G[1][1], G[0][2] + G[2][0], G[1][2] + G[2][1], G[2][2]))
                S.append(row)
            cache[key] = S
        return S

    def _hardmax(self, op: Attention, traps):
        fl = _flint()
        T, H = self.T, op.heads
        off = self.code_at
        self.code_at += H * T
        cache: dict = {}
        for h in range(H):
            for i in range(T):
                keys = list(range(i + 1)) if op.causal else list(range(T))
                state = []
                for t in traps:
                    S = self._scores(op, t.M, h, cache)[i]
                    x, y = t.witness()
                    vals = [al.value(S[j], x, y) for j in keys]
                    c = max(range(len(keys)), key=lambda r: (vals[r], -r))
                    state.append((c, frozenset([c])))
                for j in range(len(keys)):
                    nt, ns = [], []
                    for t, (c, tie) in zip(traps, state):
                        if c == j:
                            nt.append(t)
                            ns.append((c, tie))
                            continue
                        S = self._scores(op, t.M, h, cache)[i]
                        diff = tuple(p - q for p, q in zip(S[c], S[j]))
                        if all(v == 0 for v in diff):
                            nt.append(t)
                            ns.append((c, tie | {j}))
                            continue
                        for p, s in self.sp.split(t, diff):
                            nt.append(p)
                            ns.append((j, frozenset([j])) if s < 0 else (c, tie))
                    traps, state = nt, ns
                    self._cap(traps)
                for t, (_c, tie) in zip(traps, state):
                    t.code[off + h * T + i] = min(tie)
                    if len(tie) > 1:
                        t.tied = True
        # the value rows: the code holds each query's winner; its tied keys (exactly identical score
        # polynomials, as in the tournament) are averaged
        out_cache: dict = {}
        vo: dict = {}
        for t in traps:
            code = tuple(t.code[off : off + H * T])
            key = (id(t.M), code)
            if key not in out_cache:
                M = fl.fmpq_mat(3 * T, t.M.ncols())
                for h in range(H):
                    if (id(t.M), h) not in vo:
                        vo[id(t.M), h] = (
                            t.M * self.mat((id(op), "v", h), op.Wv[h]) * self.mat((id(op), "o", h), op.Wo[h])
                        )
                    VO = vo[id(t.M), h]
                    S = self._scores(op, t.M, h, cache)
                    for i in range(T):
                        keys = list(range(i + 1)) if op.causal else list(range(T))
                        c = code[h * T + i]
                        tied = [j for j in keys if S[i][j] == S[i][c]]
                        for cc in range(3):
                            for z in range(M.ncols()):
                                acc = sum((VO[cc * T + j, z] for j in tied), fl.fmpq(0)) / len(tied)
                                M[cc * T + i, z] += acc
                out_cache[key] = M
            t.M = out_cache[key]
        return traps

    # -- the polynomial phase: after a ReLU-attention op each trapezoid carries its state as exact
    # bivariate polynomials (a tuple of T rows of fmpq_mpoly in the normalised slice coordinates x, y)

    def qrows(self, key, a) -> list:
        """A float matrix as nested lists of exact rationals (cached per op)."""
        m = self._mats.get(key)
        if m is None:
            m = self._mats[key] = [[al.q_of(v) for v in row] for row in np.asarray(a, float)]
        return m

    def to_poly(self, M):
        """The affine maps ``M`` (fmpq_mat ``(3T, w)``) as polynomials; polynomial states pass through."""
        if isinstance(M, tuple):
            return M
        got = self._polys.get(id(M))
        if got is None or got[0] is not M:
            x, y = al.mctx().gens()
            T = self.T
            P = tuple(
                tuple(M[0 * T + t, j] * x + M[1 * T + t, j] * y + M[2 * T + t, j] for j in range(M.ncols()))
                for t in range(T)
            )
            got = self._polys[id(M)] = (M, P)
        return got[1]

    def _pop(self, op, traps):
        T = self.T
        ctx = al.mctx()
        if isinstance(op, Affine):
            W = self.qrows((id(op), "Wt"), op.W.T)
            b = np.asarray(op.b, float)
            bq = [[al.q_of(v) for v in (b if b.ndim == 1 else b[t])] for t in range(T)]
            done: dict = {}
            for t in traps:
                k = id(t.M)
                if k not in done:
                    H = _pm_mul(t.M, W)
                    done[k] = (t.M, tuple(tuple(h + c for h, c in zip(row, bq[i])) for i, row in enumerate(H)))
                t.M = done[k][1]
            return traps
        if isinstance(op, Residual):
            for t in traps:
                t.base = (*t.base, t.M)
            traps = self.run(op.body, traps, False)[0]
            sums: dict = {}
            for t in traps:
                base = t.base[-1]
                t.base = t.base[:-1]
                pair = (id(base), id(t.M))
                if pair not in sums:
                    sums[pair] = (base, t.M, _pm_add(self.to_poly(base), t.M))
                t.M = sums[pair][2]
            return traps
        if isinstance(op, ReLU):
            w = len(traps[0].M[0])
            off = self.code_at
            self.code_at += T * w
            for tok in range(T):
                for j in range(w):
                    out = []
                    for t in traps:
                        for p, s in self.sp.split(t, t.M[tok][j]):
                            p.code[off + tok * w + j] = int(s > 0)
                            out.append(p)
                    traps = out
                    self._cap(traps)
            cache: dict = {}
            zero = ctx.from_dict({})
            for t in traps:
                key = (id(t.M), tuple(t.code[off : off + T * w]))
                if key not in cache:
                    bits = t.code[off : off + T * w]
                    cache[key] = (
                        t.M,
                        tuple(
                            tuple(h if bits[i * w + j] else zero for j, h in enumerate(row))
                            for i, row in enumerate(t.M)
                        ),
                    )
                t.M = cache[key][1]
            return traps
        if isinstance(op, GroupMax):
            k = op.k
            w = len(traps[0].M[0])
            n = w // k
            off = self.code_at
            self.code_at += T * n
            for tok in range(T):
                for u in range(n):

                    def value(t, r, x, y, tok=tok, u=u):
                        return t.M[tok][u * k + r](x, y)

                    def diff(t, c, r, tok=tok, u=u):  # None where the two pieces' polynomials are identical
                        d = t.M[tok][u * k + c] - t.M[tok][u * k + r]
                        return None if d.is_zero() else d

                    traps = self._tournament(traps, k, value, diff, off + tok * n + u)
            gm: dict = {}
            for t in traps:
                ch = tuple(t.code[off : off + T * n])
                key = (id(t.M), ch)
                if key not in gm:
                    gm[key] = (t.M, tuple(tuple(t.M[i][u * k + ch[i * n + u]] for u in range(n)) for i in range(T)))
                t.M = gm[key][1]
            return traps
        if isinstance(op, Attention):
            return self._poly_attention(op, traps)
        raise TypeError(type(op).__name__)

    def _pscores(self, op: Attention, H, h: int, cache: dict):
        """Score polynomials ``S[i][j]`` and value rows ``(H Wv Wo)[j]`` of head ``h`` on the state ``H``."""
        key = (id(H), h)
        got = cache.get(key)
        if got is None:
            Q = _pm_mul(H, self.qrows((id(op), "q", h), op.Wq[h]))
            K = _pm_mul(H, self.qrows((id(op), "k", h), op.Wk[h]))
            VO = _pm_mul(_pm_mul(H, self.qrows((id(op), "v", h), op.Wv[h])), self.qrows((id(op), "o", h), op.Wo[h]))
            zero = al.mctx().from_dict({})
            S = [[sum((a * b for a, b in zip(Q[i], K[j])), zero) for j in range(self.T)] for i in range(self.T)]
            got = cache[key] = (H, S, VO)
        return got[1], got[2]

    def _poly_attention(self, op: Attention, traps):
        T, H = self.T, op.heads
        off = self.code_at
        cache: dict = {}
        zero = al.mctx().from_dict({})
        if op.sigma == "relu":
            self.code_at += H * T * T
            for h in range(H):
                for i in range(T):
                    for j in range(i + 1 if op.causal else T):
                        out = []
                        for t in traps:
                            S = self._pscores(op, t.M, h, cache)[0][i][j]
                            for p, s in self.sp.split(t, S):
                                p.code[off + (h * T + i) * T + j] = int(s > 0)
                                out.append(p)
                        traps = out
                        self._cap(traps)
            scale = _flint().fmpq(1, T) if op.scale_by_T else _flint().fmpq(1)
            res: dict = {}
            for t in traps:
                code = tuple(t.code[off : off + H * T * T])
                key = (id(t.M), code)
                if key not in res:
                    d = len(t.M[0])
                    rows = [[zero] * d for _ in range(T)]
                    for h in range(H):
                        S, VO = self._pscores(op, t.M, h, cache)
                        for i in range(T):
                            for j in range(i + 1 if op.causal else T):
                                if code[(h * T + i) * T + j]:
                                    wgt = S[i][j] * scale
                                    rows[i] = [r + wgt * v for r, v in zip(rows[i], VO[j])]
                    res[key] = (t.M, tuple(tuple(r) for r in rows))
                t.M = res[key][1]
            return traps
        # hardmax on polynomial states: the tournament of the affine phase, on score polynomials
        self.code_at += H * T
        for h in range(H):
            for i in range(T):
                keys = list(range(i + 1)) if op.causal else list(range(T))
                state = []
                for t in traps:
                    S = self._pscores(op, t.M, h, cache)[0][i]
                    x, y = t.witness()
                    vals = [S[j](x, y) for j in keys]
                    c = max(range(len(keys)), key=lambda r: (vals[r], -r))
                    state.append((c, frozenset([c])))
                for j in range(len(keys)):
                    nt, ns = [], []
                    for t, (c, tie) in zip(traps, state):
                        if c == j:
                            nt.append(t)
                            ns.append((c, tie))
                            continue
                        S = self._pscores(op, t.M, h, cache)[0][i]
                        diff = S[c] - S[j]
                        if diff.is_zero():
                            nt.append(t)
                            ns.append((c, tie | {j}))
                            continue
                        for p, s in self.sp.split(t, diff):
                            nt.append(p)
                            ns.append((j, frozenset([j])) if s < 0 else (c, tie))
                    traps, state = nt, ns
                    self._cap(traps)
                for t, (_c, tie) in zip(traps, state):
                    t.code[off + h * T + i] = min(tie)
                    if len(tie) > 1:
                        t.tied = True
        res = {}
        for t in traps:
            code = tuple(t.code[off : off + H * T])
            key = (id(t.M), code)
            if key not in res:
                d = len(t.M[0])
                rows = [[zero] * d for _ in range(T)]
                for h in range(H):
                    S, VO = self._pscores(op, t.M, h, cache)
                    for i in range(T):
                        keys = list(range(i + 1)) if op.causal else list(range(T))
                        c = code[h * T + i]
                        tied = [j for j in keys if S[i][j] == S[i][c]]
                        for j in tied:
                            rows[i] = [r + v * _flint().fmpq(1, len(tied)) for r, v in zip(rows[i], VO[j])]
                res[key] = (t.M, tuple(tuple(r) for r in rows))
            t.M = res[key][1]
        return traps


def _pm_mul(H, W: list) -> tuple:
    """A polynomial state ``H`` (T rows of w polynomials) times a rational matrix ``W`` (w rows)."""
    zero = al.mctx().from_dict({})
    cols = len(W[0]) if W else 0
    out = []
    for row in H:
        r = []
        for o in range(cols):
            acc = zero
            for h, wr in zip(row, W):
                c = wr[o]
                if c != 0 and not h.is_zero():
                    acc = acc + h * c
            r.append(acc)
        out.append(tuple(r))
    return tuple(out)


def _pm_add(A, B) -> tuple:
    return tuple(tuple(a + b for a, b in zip(ra, rb)) for ra, rb in zip(A, B))


# ----------------------------------------------------------------------------------------------------
# branch values at an algebraic x (walls)


def _at_closed(arc: Arc, x) -> al.AlgReal:
    """The branch's ``y`` at a rational ``x`` in the closure of its slab (a double root serves both)."""
    r = al.y_roots_at(arc.Q, x)
    if arc.dq == 2 and len(r) == 2:
        return r[arc.k]
    return r[0]


def _ball_values(Q, xb, double: bool):
    """Arb balls of the real roots in ``y`` of ``Q(x, .)`` for ``x`` in the ball ``xb``, ascending: one
    value where ``double`` (a double root at the exact ``x``) or ``Q`` is linear in ``y``."""
    fl = _flint()
    A, B, C, D, E, F = (fl.arb(c) for c in Q)
    c1 = B * xb + E
    c0 = (A * xb + D) * xb + F
    if Q[2] == 0:
        return [-c0 / c1]
    if double:
        return [-c1 / (2 * C)]
    disc = c1 * c1 - 4 * C * c0
    if not disc > 0:
        disc = fl.arb(0).union(disc.upper()) if disc.upper() > 0 else fl.arb(0)
    r = disc.sqrt()
    lo, hi = (-c1 - r) / (2 * C), (-c1 + r) / (2 * C)
    return [lo, hi] if Q[2] > 0 else [hi, lo]


def _xball(x: al.AlgReal, prec: int):
    fl = _flint()
    while True:
        lo, hi = x.bounds()
        if hi - lo < fl.fmpq(1, 2**prec):
            return fl.arb(lo).union(fl.arb(hi))
        x.refine()


def _ycmp(A1: Arc, A2: Arc, x: al.AlgReal) -> int:
    """The exact order of branch values ``A1(x)`` and ``A2(x)`` at an end ``x`` of both arcs' slabs."""
    if A1.Q == A2.Q and A1.k == A2.k and (not A1.g or _side(A1, x) == _side(A2, x)):
        return 0
    if A1.g or A2.g:
        return _gcmp(A1, A2, x)
    # the filter: Arb balls of the two branch values (each holds its branch's value, a double root too)
    xb = _xball(x, 60)
    b1 = _ball_values(A1.Q, xb, False)[A1.k if A1.dq == 2 else 0]
    b2 = _ball_values(A2.Q, xb, False)[A2.k if A2.dq == 2 else 0]
    if b1 < b2:
        return -1
    if b1 > b2:
        return 1
    if x.is_rational:
        return al.cmp(_at_closed(A1, x.q), _at_closed(A2, x.q))
    fl = _flint()
    dbl1 = A1.dq == 2 and al.sign_at(al.discriminant_x(A1.Q), x) == 0
    dbl2 = A2.dq == 2 and al.sign_at(al.discriminant_x(A2.Q), x) == 0
    i1 = 0 if (dbl1 or A1.dq == 1) else A1.k
    i2 = 0 if (dbl2 or A2.dq == 1) else A2.k
    if A1.Q == A2.Q:
        return 0 if dbl1 else (-1 if A1.k < A2.k else 1)
    shared = al.sign_at(al.resultant_y(A1.Q, A2.Q), x) == 0
    prop = False
    if shared and A1.dq == 2 and A2.dq == 2:
        c2, c1, c0 = al.y_coeffs(A1.Q)
        d2, d1, d0 = al.y_coeffs(A2.Q)
        prop = all(al.sign_at(m, x) == 0 for m in (c2 * d1 - d2 * c1, c2 * d0 - d2 * c0, c1 * d0 - d1 * c0))
    if prop:  # the same roots at x
        return (i1 > i2) - (i1 < i2)
    old = fl.ctx.prec
    try:
        prec = 64
        while prec <= 1 << 15:
            fl.ctx.prec = prec + 16
            xb = _xball(x, prec)
            V1 = _ball_values(A1.Q, xb, dbl1)
            V2 = _ball_values(A2.Q, xb, dbl2)
            over = [(a, b) for a in range(len(V1)) for b in range(len(V2)) if V1[a].overlaps(V2[b])]
            if (not shared and (i1, i2) not in over) or (shared and len(over) == 1):
                if shared and over[0] == (i1, i2):
                    return 0
                return -1 if V1[i1] < V2[i2] else 1
            prec *= 2
    finally:
        fl.ctx.prec = old
    raise AssertionError("branch values did not separate")  # pragma: no cover


def _side(arc: Arc, x: al.AlgReal) -> int:
    """-1 where the arc's limit at ``x`` is taken from the left (``x`` is not the left end of its slab)."""
    return 1 if al.cmp(x, arc.x0) == 0 else -1


_LIMITS: dict = {}


def _limit(arc: Arc, x: al.AlgReal):
    """``(fibre over x, root index)`` of the arc's limit at ``x`` (an end of, or a point in, its slab's closure):
    the limit depends only on the branch next to ``x`` on that side, so it is cached by curve, branch, ``x`` and
    side."""
    C = _as_curve(arc.Q)
    k = arc.k if arc.g or arc.dq == 2 else 0
    side = _side(arc, x)
    key = (C.key, k, x.key, side)
    got = _LIMITS.get(key)
    if got is None:
        if len(_LIMITS) > 65536:
            _LIMITS.clear()
        inner = arc.x1 if side > 0 else arc.x0
        got = _LIMITS[key] = al.branch_limit(C, k, x, side, inner)
    return got


_GCMP: dict = {}


def _gcmp(A1: Arc, A2: Arc, x: al.AlgReal) -> int:
    """The exact order of the limits at ``x`` of two arcs, one of them of degree >= 3 (fibres over ``x``)."""
    key = (_akey(A1, x), _akey(A2, x), x.key)
    got = _GCMP.get(key)
    if got is None:
        if len(_GCMP) > 1 << 18:
            _GCMP.clear()
        got = _GCMP[key] = _gcmp_exact(A1, A2, x)
    return got


_BOXES: dict = {}


def _lbox(arc: Arc, x: al.AlgReal) -> al.LimitBox:
    C = _as_curve(arc.Q)
    k = arc.k if arc.g or arc.dq == 2 else 0
    side = _side(arc, x)
    key = (C.key, k, x.key, side)
    b = _BOXES.get(key)
    if b is None:
        if len(_BOXES) > 65536:
            _BOXES.clear()
        b = _BOXES[key] = al.LimitBox(C, k, x, side, arc.x1 if side > 0 else arc.x0)
    return b


def _kidx(arc: Arc) -> int:
    """The arc's index among the real roots in ``y`` of its curve over its slab."""
    return arc.k if arc.g or arc.dq == 2 else 0


def _gcmp_exact(A1: Arc, A2: Arc, x: al.AlgReal) -> int:
    C1, C2 = _as_curve(A1.Q), _as_curve(A2.Q)
    if C1 is C2 and al.regular_at(C1, x):
        # one curve, x no critical point of it: the limits are its k-th real roots over x, distinct for
        # distinct k and in their order (al.regular_at); no boxes needed
        k1, k2 = _kidx(A1), _kidx(A2)
        return (k1 > k2) - (k1 < k2)
    # the filter: rational boxes of the two limits (no arithmetic over Q(x)); disjoint boxes decide
    B1, B2 = _lbox(A1, x), _lbox(A2, x)
    for _ in range(8):
        if B1.lo is not None and B2.lo is not None:
            if B1.hi < B2.lo:
                return -1
            if B2.hi < B1.lo:
                return 1
        wider = B1 if (B1.lo is None or (B2.lo is not None and B1.hi - B1.lo >= B2.hi - B2.lo)) else B2
        if not wider.shrink(6):
            break
    for r in range(6):
        if B1.lo is None or B2.lo is None:
            break
        if B1.hi < B2.lo:
            return -1
        if B2.hi < B1.lo:
            return 1
        # the monotonicity filter first; the norms (exact, costly) in the last rounds only
        eq = al.limits_equal(C1, B1, C2, B2, norms=r >= 4)
        if eq:
            return 0
        if eq is False:
            # distinct limits: their boxes separate as they shrink
            while not (B1.hi < B2.lo or B2.hi < B1.lo):
                (B1 if B1.hi - B1.lo >= B2.hi - B2.lo else B2).shrink()
            return -1 if B1.hi < B2.lo else 1
        B1.shrink(6)
        B2.shrink(6)
    # the fallback: fibres over x (Sturm sequences and gcds over Q(x))
    F1, i = _limit(A1, x)
    F2, j = _limit(A2, x)
    if F1 is F2:
        return (i > j) - (i < j)
    return al.fibre_cmp(F1, i, F2, j)


def _akey(arc: Arc, x: al.AlgReal) -> tuple:
    """The arcs at ``x`` that are one branch with one value there: a conic branch is one formula across ``x``; a
    branch of a curve of degree >= 3 is named by its side too (its index may change across ``x``)."""
    if arc.g:
        return (arc.Q.key, arc.k, _side(arc, x))
    return (_qkey(arc.Q), arc.k)


# ----------------------------------------------------------------------------------------------------
# cells


def _adjacency(traps: list[Trap]) -> tuple[np.ndarray, int]:
    """Pairs of trapezoids sharing a wall of positive length, then pairs sharing an arc over an ``x``
    range of positive length; and the number of wall pairs."""
    left: dict = {}
    right: dict = {}
    for n, t in enumerate(traps):
        left.setdefault(t.a.key, []).append(n)
        right.setdefault(t.b.key, []).append(n)
    walls = []
    for key, js in left.items():
        for i in right.get(key, ()):
            x = traps[i].b
            ti = traps[i]
            for j in js:
                tj = traps[j]
                if (
                    _ycmp(ti.L, tj.U, x) < 0
                    and _ycmp(tj.L, ti.U, x) < 0
                    and _ycmp(ti.L, ti.U, x) < 0
                    and _ycmp(tj.L, tj.U, x) < 0
                ):
                    walls.append((i, j))
    below: dict = {}
    for n, t in enumerate(traps):
        below.setdefault(t.U.id, []).append(n)
    arcs = []
    for j, t in enumerate(traps):
        for i in below.get(t.L.id, ()):
            u = traps[i]
            lo = u.a if al.cmp(u.a, t.a) >= 0 else t.a
            hi = u.b if al.cmp(u.b, t.b) <= 0 else t.b
            if al.cmp(lo, hi) < 0:
                arcs.append((i, j))
    E = np.array(walls + arcs, np.int64).reshape(-1, 2)
    return E, len(walls)


def _float_conic(Q) -> np.ndarray:
    m = max(abs(c) for c in Q)
    q = np.array([al.q_float(c / m) for c in Q])
    if q[2] < 0:
        q = -q
    q[2] = q[2] + 0.0
    return q


def _float_arc(arc: Arc, t: Trap) -> np.ndarray:
    """The conic columns of the float trapezoids: the conic itself, or for a branch of higher degree the
    horizontal line through its value at the trapezoid's sample (drawing only; areas use the branch)."""
    if not arc.g:
        return _float_conic(arc.Q)
    return np.array([0.0, 0.0, 0.0, 0.0, 1.0, -float(arc.at(t.s))])


def _float_generic(arcs: list[Arc], traps: list[Trap]) -> np.ndarray:
    out = np.full(len(arcs), None, object)
    seen: dict = {}
    for n, (arc, t) in enumerate(zip(arcs, traps)):
        if not arc.g:
            continue
        if arc.id not in seen:
            C = arc.Q
            d = C.P.to_dict()
            m = max(abs(c) for c in d.values())
            coef = np.zeros((max(i for i, _ in d) + 1, C.dy + 1))
            for (i, j), c in d.items():
                coef[i, j] = al.q_float(c / m)
            seen[arc.id] = (coef, arc.k, len(C.y_roots_at(t.s)))
        out[n] = seen[arc.id]
    return out


def _float_branch(arc: Arc, s) -> int:
    if arc.g:
        return 1
    if arc.dq == 2:
        return arc.k
    # a curve linear in y: its finite root is the upper one where dQ/dy > 0 (see _conic.normalise)
    c1 = arc.Q[1] * s + arc.Q[4]
    return 1 if c1 > 0 else 0


def partition_curved_exact(net, domain, *, max_traps: int | None = None, snapshots: tuple[int, ...] = ()):
    """The certified partition (see the module docstring) as :class:`~regioncount.results._cells.Cells`
    with ``exact`` True. ``snapshots`` as in :func:`._curved.partition_curved` (the truncations' output maps,
    exact: their linear regions merge equal maps). Raises ImportError without python-flint, :class:`CurvedBoundaryError` past a
    ReLU-attention op, :class:`MemoryCapError` past ``max_traps`` trapezoids."""
    from ..results._cells import Cells
    from ._plane import _frame
    from ._traps import Traps, _code_dtype

    fl = _flint()
    program = lower(net)
    refuse_unsupported("curved", (op for op, _, _ in walk_widths(program)))
    _, _, c, h, xlo, xhi = _frame(program, domain)
    check_domain(net, xlo, xhi)
    x0, V = domain.input_map()
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    # exact frame: x = x0 + V (c + h u'), c and h exact rationals of the float bounds
    cq = [(al.q_of(lo[i]) + al.q_of(hi[i])) / 2 for i in range(2)]
    hq = [(al.q_of(hi[i]) - al.q_of(lo[i])) / 2 for i in range(2)]
    q = program.input_dim
    T = program.tokens
    Vq = [[al.q_of(V[r, k]) for k in range(2)] for r in range(q)]
    x0q = [al.q_of(x0[r]) + sum((Vq[r][k] * cq[k] for k in range(2)), fl.fmpq(0)) for r in range(q)]
    M = fl.fmpq_mat(3 * T, q)
    for tok in range(T):
        for r in range(q):
            M[0 * T + tok, r] = Vq[r][0] * hq[0]
            M[1 * T + tok, r] = Vq[r][1] * hq[1]
            M[2 * T + tok, r] = x0q[r]
    z, one = fl.fmpq(0), fl.fmpq(1)
    bottom = Arc((z, z, z, z, one, one), 0, 0)
    top = Arc((z, z, z, z, one, -one), 0, 1)
    t0 = Trap(al.rational(-1), al.rational(1), bottom, top, z, M, [0] * code_length(program))
    bound = wall_degree_bound(program)
    if bound > DEGREE_CAP:
        raise CurvedBoundaryError(_cap_message(bound, DEGREE_CAP))
    eng = _ExactEngine(program, max_traps)
    readout = program.ops[-1]
    ot = program.out_token
    traps, affine = [t0], True
    snap_ok: dict = {}
    for k, op in enumerate(program.ops):
        traps, affine = eng.run((op,), traps, affine)
        if k + 1 in snapshots and k + 1 < len(program.ops):
            snap_ok[k + 1] = affine and readout.is_affine
            if snap_ok[k + 1]:
                W = eng.mat((id(readout), "Wt"), readout.W.T)
                b = np.asarray(readout.b, float)
                bq = [al.q_of(v) for v in (b if b.ndim == 1 else b[ot])]
                done: dict = {}
                for t in traps:
                    if id(t.M) not in done:
                        rows = fl.fmpq_mat(
                            3, t.M.ncols(), [t.M[cc * T + ot, j] for cc in range(3) for j in range(t.M.ncols())]
                        )
                        Y = rows * W
                        done[id(t.M)] = tuple(
                            tuple(Y[cc, o] + (bq[o] if cc == 2 else 0) for cc in range(3)) for o in range(Y.ncols())
                        )
                    t.pm = {**t.pm, k + 1: done[id(t.M)]}
    E, n_walls = _adjacency(traps)
    N = len(traps)
    codes = np.array([t.code for t in traps], dtype=np.int64).reshape(N, -1)
    codes = codes.astype(_code_dtype(max_code_digit(program)))
    # exact output maps (the output token's row of the final maps); linear regions by exact equality
    maps = None
    out_keys = None
    if affine:
        ot = program.out_token
        cache: dict = {}
        width = traps[0].M.ncols()
        maps = np.zeros((N, width, 3))
        out_keys = []
        for n, t in enumerate(traps):
            k = id(t.M)
            if k not in cache:
                vals = [[t.M[cc * T + ot, o] for cc in range(3)] for o in range(width)]
                cache[k] = (tuple(tuple((int(v.p), int(v.q)) for v in row) for row in vals), vals)
            key, vals = cache[k]
            out_keys.append(key)
            maps[n] = [[al.q_float(v) for v in row] for row in vals]
    gen = any(t.L.g or t.U.g for t in traps)
    ft = Traps(
        np.array([float(t.a) for t in traps]),
        np.array([float(t.b) for t in traps]),
        np.array([_float_arc(t.L, t) for t in traps]).reshape(N, 6),
        np.array([_float_branch(t.L, t.s) for t in traps], np.int8),
        np.array([t.L.id for t in traps], np.int64),
        np.array([_float_arc(t.U, t) for t in traps]).reshape(N, 6),
        np.array([_float_branch(t.U, t.s) for t in traps], np.int8),
        np.array([t.U.id for t in traps], np.int64),
        np.full(N, -1.0),
        np.full(N, 1.0),
        _float_generic([t.L for t in traps], traps) if gen else None,
        _float_generic([t.U for t in traps], traps) if gen else None,
    )
    poly_keys = None
    if not affine:
        # the spline pieces' output polynomials (the readout of the output token), exact and hashable
        ot = program.out_token
        pk: dict = {}
        poly_keys = []
        for t in traps:
            if id(t.M) not in pk:
                pk[id(t.M)] = tuple(al.mpoly_key(P) for P in t.M[ot])
            poly_keys.append(pk[id(t.M)])
    prefix_maps: dict = {}
    prefix_keys: dict = {}
    for k, ok in snap_ok.items():
        if not ok:
            prefix_maps[k] = None
            continue
        vals = [t.pm[k] for t in traps]
        prefix_keys[k] = [tuple(tuple((int(v.p), int(v.q)) for v in row) for row in m) for m in vals]
        prefix_maps[k] = np.array([[[al.q_float(v) for v in row] for row in m] for m in vals]).reshape(N, -1, 3)
    from fractions import Fraction

    def frac(v) -> Fraction:
        return Fraction(int(v.p), int(v.q))

    wit = []
    for t in traps:
        wx, wy = t.witness()
        wit.append((frac(cq[0] + hq[0] * wx), frac(cq[1] + hq[1] * wy)))
    return Cells(
        domain=domain,
        traps=ft,
        codes=codes,
        maps=maps,
        centre=c,
        half=h,
        ties=sum(t.tied for t in traps),
        kind="spline" if eng.cubic else "linear",
        poly_keys=poly_keys,
        adjacency=(E, n_walls),
        certified=True,
        map_keys=out_keys,
        degree=eng.sp.degree,
        rational_witness=wit,
        exact_traps=traps,
        prefix_maps=prefix_maps,
        prefix_keys=prefix_keys,
        code_map=program.code_map,
    )


def _arc_cmp(arcs: dict, x, p, q) -> int:
    return _ycmp(arcs[p], arcs[q], x)


def _key_cmp(xs: dict, p, q) -> int:
    return al.cmp(xs[p], xs[q])


def euler_counts(traps: list[Trap]) -> tuple[int, int, int]:
    """``(V, E, F)`` of the trapezoidal complex, decided exactly: ``F`` trapezoids (open disks); ``V`` the
    distinct corner points (at each cut ``x`` the branch values of the arcs ending there, sorted and merged
    by exact comparison); ``E`` the elementary pieces of walls (between consecutive vertices at one ``x``,
    covered by a wall of positive length) and of arcs (between consecutive corner ``x`` along one arc, covered
    by a trapezoid bordering it). A subdivision of the rectangle has ``V - E + F = 1``."""
    byx: dict = {}
    for n, t in enumerate(traps):
        for x in (t.a, t.b):
            byx.setdefault(x.key, (x, []))[1].append(n)
    V = E = 0
    for x, members in byx.values():
        arcs: dict = {}
        for n in members:
            for arc in (traps[n].L, traps[n].U):
                arcs.setdefault(_akey(arc, x), arc)
        order = sorted(arcs, key=functools.cmp_to_key(functools.partial(_arc_cmp, arcs, x)))
        level: dict = {}
        lev = -1
        for i, k in enumerate(order):
            if i == 0 or _ycmp(arcs[order[i - 1]], arcs[k], x) != 0:
                lev += 1
            level[k] = lev
        V += lev + 1
        covered: set = set()
        for n in members:
            t = traps[n]
            lo, hi = level[_akey(t.L, x)], level[_akey(t.U, x)]
            covered.update(range(lo, hi))
        E += len(covered)
    along: dict = {}
    for t in traps:
        along.setdefault(t.L.id, []).append(t)
        along.setdefault(t.U.id, []).append(t)
    for ts in along.values():
        xs: dict = {}
        for t in ts:
            xs.setdefault(t.a.key, t.a)
            xs.setdefault(t.b.key, t.b)
        keys = sorted(xs, key=functools.cmp_to_key(functools.partial(_key_cmp, xs)))
        pos = {k: i for i, k in enumerate(keys)}
        covered = set()
        for t in ts:
            covered.update(range(pos[t.a.key], pos[t.b.key]))
        E += len(covered)
    return V, E, len(traps)
