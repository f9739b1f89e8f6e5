"""Certified real algebraic arithmetic for the exact curved engine (python-flint; DESIGN §2 "exact", §3).

Every predicate here is decided exactly; none has a tolerance. The interface the curved engine uses (and
that a shared predicates module can take over unchanged):

- :class:`AlgReal`, a real algebraic number: a rational (``fmpq``), or a root of an irreducible integer
  polynomial ``p`` of degree >= 2 with an isolating interval ``(lo, hi)`` of rationals holding exactly that
  root of ``p``. Its ``key`` is canonical (the primitive polynomial's coefficients and the root's index
  among its real roots), so two numbers are equal exactly when their keys are.
- :func:`cmp` (order of two algebraic reals), :func:`between` (a short dyadic rational strictly between
  two of them), :func:`roots_in` (the distinct real roots of a rational polynomial in an open interval
  whose ends are algebraic reals, sorted), :func:`sign_at` (the sign of a rational polynomial at an
  algebraic real).
- :class:`Fibre` and :func:`fibre_cmp`: the real roots in ``y`` of a bivariate polynomial of any degree over
  an algebraic ``x`` (Sturm sequences over Q(x)) and their exact order, equal roots recognised by the gcd
  of the two fibres; the building block for walls of degree >= 3 (not used by an engine yet).
- Conics ``Q = (A, B, C, D, E, F)`` (tuples of ``fmpq``: ``A x^2 + B x y + C y^2 + D x + E y + F``):
  :func:`y_roots_at` (the sorted distinct real roots in ``y`` of ``Q(s, .)`` at a rational ``s``),
  :func:`value` (``Q`` at a rational point), :func:`resultant_y` (the resultant in ``y`` of two conics, a
  polynomial in ``x``), :func:`canonical` (a conic scaled to primitive integers with a positive leading
  coefficient, so that proportional conics compare equal).

How the roots are certified: ``fmpz_poly.complex_roots`` (Arb's ``arb_fmpz_poly_complex_roots``, which
factors the polynomial and isolates every root of each squarefree factor in a ball that holds exactly one
root, real roots on the real line with zero imaginary part) gives the isolating intervals of an
irreducible factor's real roots. Intervals are refined by bisection with the exact sign of ``p`` at the
rational midpoint (never zero: an irreducible polynomial of degree >= 2 has no rational root), so the
order of two distinct numbers is found after finitely many steps and equal numbers are recognised by
their keys, never by a width.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

try:  # the optional extra ``exact``
    from flint import fmpq, fmpq_poly, fmpz_poly

    HAVE_FLINT = True
except ImportError:  # pragma: no cover - exercised where flint is absent
    HAVE_FLINT = False


def require_flint() -> None:
    """Raise ImportError with the install line where python-flint is missing."""
    if not HAVE_FLINT:
        raise ImportError("certified curved cells need python-flint: pip install 'regioncount[exact]'")


def q_of(v) -> fmpq:
    """A Python float, int or Fraction as the exact rational it is."""
    if isinstance(v, fmpq):
        return v
    if isinstance(v, Fraction):
        return fmpq(v.numerator, v.denominator)
    n, d = float(v).as_integer_ratio()
    return fmpq(n, d)


def q_float(q: fmpq) -> float:
    """The float nearest to ``q`` (correctly rounded through Fraction)."""
    return float(Fraction(int(q.p), int(q.q)))


class AlgReal:
    """A real algebraic number (see the module docstring). Build with :func:`rational` or :func:`roots_in`."""

    __slots__ = ("q", "p", "lo", "hi", "slo", "key")

    def __init__(self, q=None, p=None, lo=None, hi=None, key=None):
        self.q = q
        self.p = p
        self.lo = lo
        self.hi = hi
        self.slo = 0 if p is None else _sgn(p(lo))
        self.key = ("q", q.p, q.q) if q is not None else key

    @property
    def is_rational(self) -> bool:
        return self.q is not None

    def refine(self) -> None:
        """Halve the isolating interval (rationals are exact already)."""
        if self.q is not None:
            return
        m = (self.lo + self.hi) / 2
        s = _sgn(self.p(m))
        if s == self.slo:
            self.lo = m
        else:
            self.hi = m

    def bounds(self) -> tuple[fmpq, fmpq]:
        return (self.q, self.q) if self.q is not None else (self.lo, self.hi)

    def __float__(self) -> float:
        if self.q is not None:
            return q_float(self.q)
        while True:
            lo, hi = q_float(self.lo), q_float(self.hi)
            if lo == hi or abs(hi - lo) <= 2**-60 * max(abs(lo), abs(hi)):
                return (lo + hi) / 2
            self.refine()

    def __repr__(self) -> str:
        return f"AlgReal({float(self)!r})"


def _sgn(v) -> int:
    return (v > 0) - (v < 0)


def rational(v) -> AlgReal:
    return AlgReal(q=q_of(v))


def _ball_interval(b) -> tuple[fmpq, fmpq]:
    """The closed interval ``[mid - rad, mid + rad]`` of an arb ball, as rationals."""
    m, e = b.mid().man_exp()
    r, f = b.rad().man_exp()
    mid = fmpq(int(m)) * (fmpq(2) ** int(e)) if e >= 0 else fmpq(int(m), 2 ** int(-e))
    rad = fmpq(int(r)) * (fmpq(2) ** int(f)) if f >= 0 else fmpq(int(r), 2 ** int(-f))
    return mid - rad, mid + rad


@functools.lru_cache(maxsize=65536)
def _irreducible_real_roots(coeffs: tuple[int, ...]) -> tuple[AlgReal, ...]:
    """The real roots, ascending, of the irreducible primitive integer polynomial with these ascending
    coefficients (degree >= 2)."""
    p = fmpz_poly(list(coeffs))
    out = []
    reals = [z[0] for z in p.complex_roots() if z[0].imag == 0]  # type: ignore
    for i, r in enumerate(sorted(reals, key=lambda z: float(z.real.mid()))):
        lo, hi = _ball_interval(r.real)
        # the ball is closed; its ends are rational, hence never roots of p: the open interval isolates
        out.append(AlgReal(p=p, lo=lo, hi=hi, key=("p", coeffs, i)))
    return tuple(out)


def _primitive(f) -> fmpz_poly:
    """An fmpq_poly or fmpz_poly as a primitive integer polynomial with positive leading coefficient."""
    if isinstance(f, fmpq_poly):
        f = f.numer()
    c = f.coeffs()
    g = 0
    for a in c:
        g = _gcd(g, int(a))
    if g == 0:
        return f
    if int(c[-1]) < 0:
        g = -g
    return fmpz_poly([int(a) // g for a in c])


def _gcd(a: int, b: int) -> int:
    import math

    return math.gcd(a, b)


@functools.lru_cache(maxsize=65536)
def _factor_roots(coeffs: tuple) -> tuple[AlgReal, ...]:
    """Every distinct real root of the nonzero rational polynomial with these ascending coefficients
    ``(p, q)`` pairs, ascending."""
    f = fmpq_poly([fmpq(a, b) for a, b in coeffs])
    roots: list[AlgReal] = []
    if f.degree() <= 0:
        return ()
    _, facs = f.factor()
    for g0, _m in facs:
        g = _primitive(g0)
        if g.degree() == 1:
            c0, c1 = g.coeffs()
            roots.append(rational(fmpq(-int(c0), int(c1))))
        elif g.degree() >= 2:
            roots.extend(_irreducible_real_roots(tuple(int(a) for a in g.coeffs())))
    return tuple(sorted(roots, key=functools.cmp_to_key(cmp)))


def poly_key(f: fmpq_poly) -> tuple:
    return tuple((int(c.p), int(c.q)) for c in f.coeffs())


def roots_in(f: fmpq_poly, lo: AlgReal | None = None, hi: AlgReal | None = None) -> list[AlgReal]:
    """The distinct real roots of ``f`` (a nonzero rational polynomial) in the open interval ``(lo, hi)``
    (None: unbounded), ascending."""
    if f.is_zero():
        raise ValueError("the zero polynomial has no isolated roots")
    out = []
    for r in _factor_roots(poly_key(f)):
        if lo is not None and cmp(r, lo) <= 0:
            continue
        if hi is not None and cmp(r, hi) >= 0:
            continue
        out.append(r)
    return out


def cmp(a: AlgReal, b: AlgReal) -> int:
    """-1, 0, +1 as ``a < b``, ``a == b``, ``a > b`` (exact)."""
    if a.key == b.key:
        return 0
    if a.q is not None and b.q is not None:
        return _sgn(a.q - b.q)
    while True:
        alo, ahi = a.bounds()
        blo, bhi = b.bounds()
        if ahi <= blo:
            return -1
        if bhi <= alo:
            return 1
        # distinct numbers: refine the wider interval until they separate
        if a.q is None and (b.q is not None or ahi - alo >= bhi - blo):
            a.refine()
        else:
            b.refine()


def _dyadic_between(lo: fmpq, hi: fmpq) -> fmpq:
    """The dyadic rational with the fewest bits in the open interval ``(lo, hi)`` (``lo < hi``)."""
    if lo < 0 < hi:
        return fmpq(0)
    k = 0
    while True:
        den = 2**k
        c = fmpq(int((lo * den).floor()) + 1, den)
        if c < hi:
            return c
        k += 1


def between(a: AlgReal, b: AlgReal) -> fmpq:
    """A short dyadic rational strictly between ``a < b``."""
    while True:
        _, ahi = a.bounds()
        blo, _ = b.bounds()
        if ahi < blo:
            return _dyadic_between(ahi, blo)
        if a.q is None and (b.q is not None or a.hi - a.lo >= b.hi - b.lo):
            a.refine()
        elif b.q is None:
            b.refine()
        else:
            if a.q >= b.q:
                raise ValueError("between needs a < b")
            return _dyadic_between(a.q, b.q)


def rational_above(a: AlgReal) -> fmpq:
    """A rational greater than ``a``."""
    return a.bounds()[1] + 1


def rational_below(a: AlgReal) -> fmpq:
    return a.bounds()[0] - 1


def _ball_sign(f: fmpq_poly, a: AlgReal, prec: int = 64) -> int:
    """The sign of ``f`` on the isolating interval of ``a`` where Arb's enclosure (at ``prec`` bits) excludes
    0, else 0."""
    from flint import arb, arb_poly, ctx

    old = ctx.prec
    try:
        ctx.prec = prec
        v = arb_poly(f)(arb(a.lo).union(arb(a.hi)))
    finally:
        ctx.prec = old
    return 1 if v > 0 else -1 if v < 0 else 0


def sign_at(f: fmpq_poly, a: AlgReal) -> int:
    """The exact sign of the rational polynomial ``f`` at the algebraic real ``a``: an Arb enclosure of
    ``f`` over ``a``'s isolating interval that excludes 0 decides (a filter); otherwise ``f(a) = 0`` exactly
    when ``a``'s irreducible polynomial divides ``f``, and a nonzero value is read from enclosures over
    intervals refined, at growing precision, until one excludes 0 (which happens: ``f(a) != 0``)."""
    if a.q is not None:
        return _sgn(f(a.q))
    if f.is_zero():
        return 0
    if f.degree() <= 0:
        return _sgn(f.coeffs()[0])
    s = _ball_sign(f, a)
    if s:
        return s
    _, r = divmod(f, fmpq_poly(a.p))
    if r.is_zero():
        return 0
    prec = 64
    while True:
        prec *= 2
        for _ in range(prec // 4):
            a.refine()
        s = _ball_sign(f, a, prec)
        if s:
            return s


def _from_bounds(q: fmpq) -> AlgReal:
    return AlgReal(q=q)


# ----------------------------------------------------------------------------------------------------
# conics


def canonical(Q) -> tuple:
    """``Q`` (6 rationals, not all zero) scaled to primitive integers (as fmpq) whose first nonzero entry is
    positive: proportional conics give equal tuples."""
    Q = [q_of(c) for c in Q]
    den = 1
    for c in Q:
        den = den * int(c.q) // _gcd(den, int(c.q))
    ints = [int(c.p) * (den // int(c.q)) for c in Q]
    g = 0
    for v in ints:
        g = _gcd(g, v)
    if g == 0:
        raise ValueError("the zero conic")
    first = next(v for v in ints if v != 0)
    if first < 0:
        g = -g
    return tuple(fmpq(v // g) for v in ints)


def value(Q, x: fmpq, y: fmpq) -> fmpq:
    A, B, C, D, E, F = Q
    return (A * x + B * y + D) * x + (C * y + E) * y + F


def y_coeffs(Q) -> tuple[fmpq_poly, fmpq_poly, fmpq_poly]:
    """``c2, c1, c0`` of ``Q`` as a quadratic in ``y``, polynomials in ``x``."""
    A, B, C, D, E, F = Q
    return fmpq_poly([C]), fmpq_poly([E, B]), fmpq_poly([F, D, A])


def y_degree(Q) -> int:
    """Degree of ``Q`` in ``y``: 2, 1 or 0."""
    A, B, C, D, E, F = Q
    return 2 if C != 0 else 1 if (B != 0 or E != 0) else 0


def discriminant_x(Q) -> fmpq_poly:
    c2, c1, c0 = y_coeffs(Q)
    return c1 * c1 - 4 * c2 * c0


def resultant_y(Q, L) -> fmpq_poly:
    """The resultant in ``y`` of ``Q`` and ``L`` (each of degree 1 or 2 in ``y``): zero at every ``x`` where
    they share a root in ``y`` (and possibly where both leading coefficients vanish)."""
    c2, c1, c0 = y_coeffs(Q)
    d2, d1, d0 = y_coeffs(L)
    dq, dl = y_degree(Q), y_degree(L)
    if dq == 2 and dl == 2:
        u = c2 * d0 - d2 * c0
        return u * u - (c2 * d1 - d2 * c1) * (c1 * d0 - d1 * c0)
    if dq == 2 and dl == 1:
        return c2 * d0 * d0 - c1 * d0 * d1 + c0 * d1 * d1
    if dq == 1 and dl == 2:
        return d2 * c0 * c0 - d1 * c0 * c1 + d0 * c1 * c1
    if dq == 1 and dl == 1:
        return c1 * d0 - d1 * c0
    raise ValueError("resultant_y needs curves of degree 1 or 2 in y")


def y_roots_at(Q, s: fmpq) -> list[AlgReal]:
    """The distinct real roots in ``y`` of ``Q(s, .)``, ascending (``Q(s, .)`` not identically zero)."""
    A, B, C, D, E, F = Q
    c2, c1, c0 = C, B * s + E, (A * s + D) * s + F
    if c2 == 0 and c1 == 0:
        return []
    return roots_in(fmpq_poly([c0, c1, c2]))


# ----------------------------------------------------------------------------------------------------
# fibres of a curve of any degree over an algebraic x (a building block for walls of degree >= 3)
#
# Elements of Q(a) are rational polynomials reduced modulo the minimal polynomial m of a; their signs at a
# are exact (:func:`sign_at`). A polynomial in y over Q(a) is a list of such elements, ascending. The real
# roots of F(a, y) are isolated by Sturm sequences over Q(a): the number of distinct real roots in
# (r, s] is the drop in sign variations of the Sturm sequence of F's squarefree part between the
# rationals r and s, each sign exact.


class Fibre:
    """The distinct real roots in ``y`` of ``F(a, y)`` for a bivariate rational polynomial ``F`` and an
    algebraic real ``a``: ``intervals`` ascending, each either an open interval ``(lo, hi)`` of rationals that
    are not roots and hold exactly one root, or ``(r, r)``: the rational ``r`` is the root."""

    def __init__(self, coeffs_y: list, a: AlgReal):
        self.a = a
        self.m = _minpoly(a)
        F = _ytrim([_nf(c, self.m) for c in coeffs_y], self.m)
        if not F:
            raise ValueError("the fibre is the whole line (F(a, .) vanishes identically)")
        self.F = F
        self.sf = _ydiv(F, _ygcd(F, _yderiv(F), self.m), self.m)[0] if len(F) > 2 else F
        self.sturm = _sturm(self.sf, self.m)
        self.intervals = self._isolate()

    def count(self, lo: fmpq, hi: fmpq) -> int:
        """Distinct real roots in ``(lo, hi]`` (Sturm's theorem on the squarefree part)."""
        return self._var(lo) - self._var(hi)

    def refine(self, i: int) -> None:
        """Halve the isolating interval of root ``i`` (a rational root stays a point)."""
        lo, hi = self.intervals[i]
        if lo == hi:
            return
        mid = (lo + hi) / 2
        if self.is_root(mid):
            self.intervals[i] = (mid, mid)
        elif self.count(lo, mid) == 1:
            self.intervals[i] = (lo, mid)
        else:
            self.intervals[i] = (mid, hi)

    def is_root(self, y: fmpq) -> bool:
        return sign_at(_yeval(self.sf, y, self.m), self.a) == 0

    def neighbourhood(self, i: int) -> tuple[fmpq, fmpq]:
        """Rationals ``l < h``, neither a root, with root ``i`` the only root in ``[l, h]``."""
        lo, hi = self.intervals[i]
        if lo < hi:
            return lo, hi
        d = fmpq(1, 2)
        while True:
            l, h = lo - d, lo + d
            if not self.is_root(l) and not self.is_root(h) and self.count(l, h) == 1:
                return l, h
            d /= 2

    def _var(self, y: fmpq) -> int:
        signs = [s for s in (sign_at(_yeval(S, y, self.m), self.a) for S in self.sturm) if s]
        return sum(1 for u, v in zip(signs, signs[1:]) if u != v)

    def _isolate(self) -> list:
        if len(self.sf) <= 1:
            return []
        B = _root_bound(self.sf, self.a)  # +-B are not roots
        out: list = []
        stack = [(-B, B)]
        while stack:
            lo, hi = stack.pop()  # neither end is a root
            n = self.count(lo, hi)
            if n == 0:
                continue
            if n == 1:
                out.append((lo, hi))
                continue
            mid = (lo + hi) / 2
            if self.is_root(mid):
                out.append((mid, mid))
                d = (hi - lo) / 4
                while self.is_root(mid - d) or self.is_root(mid + d) or self.count(mid - d, mid + d) != 1:
                    d /= 2
                stack.extend([(lo, mid - d), (mid + d, hi)])
            else:
                stack.extend([(lo, mid), (mid, hi)])
        return sorted(out, key=lambda iv: (iv[0], iv[1]))


def _minpoly(a: AlgReal) -> fmpq_poly:
    return fmpq_poly([-a.q, 1]) if a.q is not None else fmpq_poly(a.p)


def _nf(c, m: fmpq_poly) -> fmpq_poly:
    c = c if isinstance(c, fmpq_poly) else fmpq_poly([c])
    return divmod(c, m)[1]


def _ytrim(F: list, m: fmpq_poly) -> list:
    F = list(F)
    while F and F[-1].is_zero():
        F.pop()
    return F


def _yderiv(F: list) -> list:
    return [F[k] * k for k in range(1, len(F))]


def _nf_inv(e: fmpq_poly, m: fmpq_poly) -> fmpq_poly:
    g, s, _ = e.xgcd(m)
    return _nf(s * (1 / g.coeffs()[0]) if g.degree() == 0 else s, m)


def _ydiv(A: list, B: list, m: fmpq_poly) -> tuple[list, list]:
    """Quotient and remainder of polynomials in y over Q(a)."""
    A = list(A)
    inv = _nf_inv(B[-1], m)
    Q = [fmpq_poly([0])] * max(1, len(A) - len(B) + 1)
    while len(A) >= len(B) and A:
        c = _nf(A[-1] * inv, m)
        k = len(A) - len(B)
        Q[k] = c
        for i, b in enumerate(B):
            A[k + i] = _nf(A[k + i] - c * b, m)
        A = _ytrim(A, m)
    return Q, A


def _ygcd(A: list, B: list, m: fmpq_poly) -> list:
    while B:
        A, B = B, _ydiv(A, B, m)[1]
    return A


def _sturm(F: list, m: fmpq_poly) -> list:
    seq = [F, _yderiv(F)]
    while len(seq[-1]) > 1:
        r = _ydiv(seq[-2], seq[-1], m)[1]
        if not r:
            break
        seq.append([_nf(-c, m) for c in r])
    return seq


def _yeval(F: list, y: fmpq, m: fmpq_poly) -> fmpq_poly:
    v = fmpq_poly([0])
    for c in reversed(F):
        v = _nf(v * y + c, m)
    return v


def _root_bound(F: list, a: AlgReal) -> fmpq:
    """A rational ``B`` with every real root of ``F(a, .)`` in ``(-B, B)`` (Cauchy's bound, from Arb
    enclosures of the coefficients at ``a``)."""
    from flint import arb

    while True:
        lo, hi = a.bounds()
        X = arb(lo).union(arb(hi))

        def ev(c, X=X):
            v = arb(0)
            for k in reversed(c.coeffs()):
                v = v * X + arb(k)
            return v

        lead = ev(F[-1])
        if lead != 0:
            big = max((abs(ev(c)).upper() for c in F[:-1]), default=arb(0))
            r = 1 + big / abs(lead).lower()
            m, e = r.upper().mid().man_exp()
            ub = fmpq(int(m)) * fmpq(2) ** int(e) if e >= 0 else fmpq(int(m), 2 ** int(-e))
            return ub + 1
        a.refine()


def fibre_cmp(F1: Fibre, i: int, F2: Fibre, j: int) -> int:
    """The exact order of root ``i`` of ``F1`` and root ``j`` of ``F2`` (fibres over the same ``a``).
    Equality is decided by the gcd of the two squarefree parts over Q(a): a common root is a root of it."""
    if F1.a.key != F2.a.key:
        raise ValueError("fibre_cmp compares fibres over the same x")
    G: Fibre | None = None
    common = True  # until the gcd says the fibres share no root
    while True:
        l1, h1 = F1.intervals[i]
        l2, h2 = F2.intervals[j]
        p1, p2 = l1 == h1, l2 == h2
        if p1 and p2:
            return (l1 > l2) - (l1 < l2)
        # an open interval's root lies strictly inside it
        if h1 <= l2:
            return -1
        if h2 <= l1:
            return 1
        if G is None and common:
            g = _ygcd(F1.sf, F2.sf, F1.m)
            if len(g) <= 1:  # no common root: the intervals separate under refinement
                common = False
            else:
                G = Fibre(g, F1.a)
        if G is not None:
            c1 = (1 if G.is_root(l1) else 0) if p1 else G.count(l1, h1)
            c2 = (1 if G.is_root(l2) else 0) if p2 else G.count(l2, h2)
            if c1 and c2:
                lo, hi = min(l1, l2), max(h1, h2)
                if G.count(lo, hi) + (1 if G.is_root(lo) else 0) == 1:
                    return 0  # both are the one root of G in the hull of their intervals
        F1.refine(i)
        F2.refine(j)


# ----------------------------------------------------------------------------------------------------
# curves of any degree
#
# A curve is an irreducible rational polynomial P(x, y) (fmpq_mpoly in the variables x, y), scaled to
# primitive integers with a positive leading coefficient (lexicographic order, x before y), so that
# proportional polynomials give one curve. Its branches over an interval of x on which neither its
# discriminant in y nor its leading coefficient in y vanishes are the k-th real roots in y, k fixed.


@functools.lru_cache(maxsize=1)
def mctx():
    """The context of bivariate rational polynomials in ``x, y`` (lexicographic)."""
    from flint import fmpq_mpoly_ctx

    return fmpq_mpoly_ctx.get(("x", "y"), "lex")


def _xpoly(P) -> fmpq_poly:
    """A bivariate polynomial that does not depend on ``y`` as a polynomial in ``x``."""
    d = P.to_dict()
    if not d:
        return fmpq_poly([0])
    n = max(m[0] for m in d)
    c = [fmpq(0)] * (n + 1)
    for (i, j), v in d.items():
        if j:
            raise ValueError("the polynomial depends on y")
        c[i] = v
    return fmpq_poly(c)


class Curve:
    """An irreducible curve of any degree (see above). ``yc[k]``: the coefficient of ``y^k``, a polynomial
    in ``x``; ``dy`` the degree in ``y``; ``deg`` the total degree. Build with :func:`curve` (interned)."""

    __slots__ = ("P", "key", "dy", "deg", "yc", "_disc", "__weakref__")

    def __init__(self, P, key):
        self.P, self.key = P, key
        d = P.to_dict()
        self.dy = max(m[1] for m in d)
        self.deg = P.total_degree()
        cols: list[dict] = [{} for _ in range(self.dy + 1)]
        for (i, j), v in d.items():
            cols[j][i] = v
        self.yc = [fmpq_poly([c.get(i, fmpq(0)) for i in range(max(c, default=0) + 1)]) for c in cols]
        self._disc = None

    def __repr__(self) -> str:
        return f"Curve({self.P})"

    @property
    def lc(self) -> fmpq_poly:
        return self.yc[self.dy]

    def disc(self) -> fmpq_poly:
        """The discriminant in ``y`` (``dy >= 2``), a polynomial in ``x``."""
        if self._disc is None:
            self._disc = _xpoly(self.P.discriminant("y"))
        return self._disc

    def at_x(self, s: fmpq) -> fmpq_poly:
        """``P(s, .)`` as a polynomial in ``y``."""
        return fmpq_poly([c(s) for c in self.yc])

    def y_roots_at(self, s: fmpq) -> list[AlgReal]:
        f = self.at_x(s)
        return [] if f.degree() <= 0 else roots_in(f)

    def value(self, x: fmpq, y: fmpq) -> fmpq:
        return self.P(x, y)

    def along_y(self, t: fmpq) -> fmpq_poly:
        """``P(., t)`` as a polynomial in ``x``."""
        return _xpoly(self.P.subs({"y": t}))


_CURVES: dict = {}


def mpoly_key(P) -> tuple:
    return tuple(sorted((m, (int(c.p), int(c.q))) for m, c in P.to_dict().items()))


def primitive_mpoly(P):
    """``(lam, G)`` with ``G = lam P`` primitive integer (as rationals), leading coefficient positive."""
    cs = P.coeffs()
    den = 1
    for c in cs:
        den = den * int(c.q) // _gcd(den, int(c.q))
    g = 0
    for c in cs:
        g = _gcd(g, int(c.p) * (den // int(c.q)))
    lam = fmpq(den, g)
    if P.leading_coefficient() < 0:
        lam = -lam
    return lam, P * lam


def curve(P) -> Curve:
    """The interned curve of the irreducible polynomial ``P`` (any nonzero rational multiple gives it)."""
    _, G = primitive_mpoly(P)
    key = mpoly_key(G)
    c = _CURVES.get(key)
    if c is None:
        c = _CURVES[key] = Curve(G, key)
    return c


def conic_mpoly(Q):
    """A conic ``(A, B, C, D, E, F)`` as a bivariate polynomial."""
    mono = ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0))
    return mctx().from_dict({m: q_of(c) for m, c in zip(mono, Q) if c != 0})


@functools.lru_cache(maxsize=65536)
def _res_cached(k1: tuple, k2: tuple) -> fmpq_poly:
    return _xpoly(_CURVES[k1].P.resultant(_CURVES[k2].P, "y"))


def resultant_curves(C1: Curve, C2: Curve) -> fmpq_poly:
    """The resultant in ``y`` of two curves, a polynomial in ``x`` (zero where they share a root in ``y``,
    and possibly where both leading coefficients vanish)."""
    return _res_cached(C1.key, C2.key) if C1.key <= C2.key else _res_cached(C2.key, C1.key)


_FIBRES: dict = {}


def fibre(C: Curve, a: AlgReal) -> Fibre:
    """The fibre of ``C`` over ``a`` (cached by both keys)."""
    k = (C.key, a.key)
    F = _FIBRES.get(k)
    if F is None:
        if len(_FIBRES) > 65536:
            _FIBRES.clear()
        F = _FIBRES[k] = Fibre(list(C.yc), a)
    return F


def _clear(C: Curve, t: fmpq, p: fmpq, a: AlgReal) -> bool:
    """``C`` has no point on the horizontal segment ``y = t`` for ``x`` between ``p`` and ``a`` (closed;
    ``C(a, t) != 0`` is known)."""
    f = C.along_y(t)
    if f.is_zero():
        return False
    if f.degree() <= 0:
        return True
    if f(p) == 0:
        return False
    pa = rational(p)
    lo, hi = (pa, a) if cmp(pa, a) < 0 else (a, pa)
    return not roots_in(f, lo, hi)


def branch_limit(C: Curve, k: int, a: AlgReal, side: int, inner: AlgReal) -> tuple[Fibre, int]:
    """The limit at ``x = a`` of branch ``k`` (the ``k``-th real root in ``y``) of ``C`` over the open interval
    between ``inner`` and ``a`` (``side`` -1: the interval lies left of ``a``, +1: right), on which the branch
    is defined and bounded: ``(F, i)`` with ``F`` the fibre over ``a`` and ``i`` the index of the root it tends to.

    Why it is exact: let ``[l, h]`` hold root ``i`` of the fibre alone, its ends no roots. Where the branch at a
    rational ``p`` lies in ``(l, h)`` and ``C`` meets neither horizontal side ``y = l``, ``y = h`` of the
    rectangle ``[p, a] x [l, h]`` (exact root counts of univariate polynomials), the branch stays inside the
    rectangle up to ``a``, so its limit (which exists: the branch is semi-algebraic and bounded) is a root of
    ``C(a, .)`` in ``[l, h]``: root ``i``. As ``p`` tends to ``a`` both conditions come to hold."""
    F = fibre(C, a)
    hoods = [F.neighbourhood(i) for i in range(len(F.intervals))]
    p = between(inner, a) if side < 0 else between(a, inner)
    while True:
        ys = C.y_roots_at(p)
        if len(ys) <= k:
            raise AssertionError("a branch is missing at a point of its slab")
        y = ys[k]
        for i, (lo, hi) in enumerate(hoods):
            if cmp(y, rational(lo)) > 0 and cmp(y, rational(hi)) < 0:
                if _clear(C, lo, p, a) and _clear(C, hi, p, a):
                    return F, i
                break
        # move p halfway to a
        if a.q is not None:
            p = (p + a.q) / 2
            continue
        a.refine()
        end = a.lo if side < 0 else a.hi
        if (side < 0 and end > p) or (side > 0 and end < p):
            p = (p + end) / 2


class LimitBox:
    """Shrinking rational enclosures ``[lo, hi]`` of the limit at ``x = a`` of branch ``k`` of ``C`` over the
    open interval between ``inner`` and ``a`` (``side`` as in :func:`branch_limit`), in rational arithmetic
    only: where the branch at a rational ``p`` lies in ``(lo, hi)`` and ``C`` meets neither side ``y = lo``,
    ``y = hi`` of ``[p, a] x [lo, hi]``, the branch stays in the rectangle up to ``a``, so its limit is in
    ``[lo, hi]``. A filter in front of the fibres over ``a``: disjoint boxes order two limits."""

    def __init__(self, C: Curve, k: int, a: AlgReal, side: int, inner: AlgReal):
        self.C, self.k, self.a, self.side = C, k, a, side
        self.p = between(inner, a) if side < 0 else between(a, inner)
        self.width = fmpq(1, 4)
        self.lo: Any = None  # fmpq once a box is found
        self.hi: Any = None
        self.shrink()

    def _closer(self) -> None:
        # an eighth of the way left to a: about as fast as the boxes narrow
        a = self.a
        if a.q is not None:
            self.p = a.q + (self.p - a.q) / 8
            return
        for _ in range(3):
            a.refine()
        end = a.lo if self.side < 0 else a.hi
        if (self.side < 0 and end > self.p) or (self.side > 0 and end < self.p):
            self.p = end + (self.p - end) / 8

    def shrink(self, tries: int = 24) -> bool:
        """Replace the box by one about 16 times narrower (False where ``tries`` moves of ``p`` did not do)."""
        for _ in range(tries):
            ys = self.C.y_roots_at(self.p)
            if len(ys) <= self.k:
                raise AssertionError("a branch is missing at a point of its slab")
            y = ys[self.k]
            while y.q is None and y.hi - y.lo > self.width / 4:
                y.refine()
            ylo, yhi = y.bounds()
            lo, hi = ylo - self.width / 2, yhi + self.width / 2
            if self.C.at_x(self.p)(lo) != 0 and self.C.at_x(self.p)(hi) != 0:
                if _clear_open(self.C, lo, self.p, self.a) and _clear_open(self.C, hi, self.p, self.a):
                    self.lo, self.hi = lo, hi
                    self.width /= 16
                    self._closer()
                    return True
            self._closer()
        return False


def _clear_open(C: Curve, t: fmpq, p: fmpq, a: AlgReal) -> bool:
    """``C`` has no point on ``y = t`` for ``x`` in the closed interval between ``p`` and ``a``."""
    f = C.along_y(t)
    if f.is_zero():
        return False
    if f.degree() <= 0:
        return True
    # the filter: Arb's enclosure of f over an interval holding [p, a] excludes 0
    from flint import arb, arb_poly

    lo_, hi_ = a.bounds()
    if not arb_poly(f)(arb(min(p, lo_)).union(arb(max(p, hi_)))).contains(0):
        return True
    if f(p) == 0 or sign_at(f, a) == 0:
        return False
    pa = rational(p)
    lo, hi = (pa, a) if cmp(pa, a) < 0 else (a, pa)
    return not roots_in(f, lo, hi)


def _bareiss(M: list) -> fmpq_poly:
    """The determinant of a square matrix of rational polynomials (Bareiss' fraction-free elimination:
    every division is exact)."""
    M = [list(r) for r in M]
    n = len(M)
    if n == 0:
        return fmpq_poly([1])
    sign, prev = 1, fmpq_poly([1])
    for k in range(n - 1):
        if M[k][k].is_zero():
            r = next((r for r in range(k + 1, n) if not M[r][k].is_zero()), None)
            if r is None:
                return fmpq_poly([0])
            M[k], M[r] = M[r], M[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                M[i][j] = (M[i][j] * M[k][k] - M[i][k] * M[k][j]) // prev
        prev = M[k][k]
    return M[n - 1][n - 1] * sign


@functools.lru_cache(maxsize=4096)
def _first_subresultant(k1: tuple, k2: tuple) -> tuple[fmpq_poly, fmpq_poly]:
    """``(s11, s10)``: the first subresultant ``s11(x) y + s10(x)`` in ``y`` of two curves (where one is
    linear in ``y``, that one itself). Where ``s11(a) != 0``, both leading coefficients are nonzero at ``a``
    and the curves share a root in ``y`` over ``a``, that common root is unique: ``-s10(a) / s11(a)``."""
    A, B = _CURVES[k1].yc, _CURVES[k2].yc
    m, n = len(A) - 1, len(B) - 1
    if n == 1:
        return B[1], B[0]
    if m == 1:
        return A[1], A[0]
    N = m + n - 1  # powers m + n - 2 .. 0
    rows = []
    for s in range(n - 2, -1, -1):  # y^s P1
        r = [fmpq_poly([0])] * N
        for d, c in enumerate(A):
            r[N - 1 - (d + s)] = c
        rows.append(r)
    for s in range(m - 2, -1, -1):  # y^s P2
        r = [fmpq_poly([0])] * N
        for d, c in enumerate(B):
            r[N - 1 - (d + s)] = c
        rows.append(r)
    lead = [r[: N - 2] for r in rows]
    s11 = _bareiss([lr + [r[N - 2]] for lr, r in zip(lead, rows)])
    s10 = _bareiss([lr + [r[N - 1]] for lr, r in zip(lead, rows)])
    return s11, s10


_NORMS: dict = {}


def _norm(C: Curve, a: AlgReal) -> fmpq_poly:
    """``N(y) = res_x(C(x, y), m_a(x))``: every root in ``y`` of ``C(a, .)`` is a root of this rational
    polynomial."""
    key = (C.key, a.key)
    N = _NORMS.get(key)
    if N is None:
        if len(_NORMS) > 65536:
            _NORMS.clear()
        m = _minpoly(a)
        mp = mctx().from_dict({(i, 0): c for i, c in enumerate(m.coeffs()) if c != 0})
        d = C.P.resultant(mp, "x").to_dict()
        top = max((j for _, j in d), default=0)
        c = [fmpq(0)] * (top + 1)
        for (_, j), v in d.items():
            c[j] = v
        N = _NORMS[key] = fmpq_poly(c)
    return N


_REGULAR: dict = {}


def regular_at(C: Curve, a: AlgReal) -> bool:
    """Whether ``C(a, .)`` has ``C.dy`` distinct complex roots: its leading coefficient in ``y`` and (where
    ``dy >= 2``) its discriminant in ``y`` are nonzero at ``a`` (exact signs, :func:`sign_at`). Then on a
    neighbourhood of ``a`` the real roots in ``y`` are continuous, pairwise distinct functions of ``x`` and
    their number is constant (a real root can leave the real line only by meeting its conjugate, i.e.
    where the discriminant vanishes, or escape to infinity where the leading coefficient does): the ``k``-th
    real root on the left of ``a`` and the ``k``-th on the right tend to one value, the ``k``-th real root of
    ``C(a, .)``, and two different ``k`` tend to different values in the order of ``k``."""
    key = (C.key, a.key)
    got = _REGULAR.get(key)
    if got is None:
        if len(_REGULAR) > 1 << 18:
            _REGULAR.clear()
        got = C.dy >= 1 and sign_at(C.lc, a) != 0 and (C.dy < 2 or sign_at(C.disc(), a) != 0)
        _REGULAR[key] = got
    return got


_DY: dict = {}


def _mpoly_ball(P, X, Y):
    """Arb's interval extension of the bivariate polynomial ``P`` over the balls ``X``, ``Y`` (Horner in ``x``
    per power of ``y``, then in ``y``): a ball holding ``P(x, y)`` for every ``x`` in ``X`` and ``y`` in ``Y``."""
    from flint import arb

    by: dict = {}
    for (i, j), c in P.to_dict().items():
        by.setdefault(j, {})[i] = c
    v = arb(0)
    for j in range(max(by, default=0), -1, -1):
        cs = by.get(j, {})
        r = arb(0)
        for i in range(max(cs, default=0), -1, -1):
            r = r * X + arb(cs.get(i, 0))
        v = v * Y + r
    return v


def monotone_in_y(C: Curve, a: AlgReal, lo: fmpq, hi: fmpq) -> bool:
    """Whether Arb's interval extension of ``dC/dy`` over (``a``'s isolating interval) x ``[lo, hi]`` excludes 0:
    then ``C(a, .)`` is strictly monotone on ``[lo, hi]`` and has at most one root there. A filter: False
    means undecided, never "not monotone"."""
    from flint import arb

    D = _DY.get(C.key)
    if D is None:
        if len(_DY) > 65536:
            _DY.clear()
        D = _DY[C.key] = C.P.derivative("y")
    alo, ahi = a.bounds()
    v = _mpoly_ball(D, arb(alo).union(arb(ahi)), arb(lo).union(arb(hi)))
    return bool(v > 0 or v < 0)


def _one_root_in(C: Curve, a: AlgReal, lo: fmpq, hi: fmpq) -> bool:
    """``C(a, .)`` has at most one distinct root in ``[lo, hi]`` (its norm has exactly one there)."""
    N = _norm(C, a)
    if N.is_zero():
        return False
    n = len(roots_in(N, rational(lo), rational(hi))) + (N(lo) == 0) + (N(hi) == 0 and hi != lo)
    return n == 1


def _in_box(s11: fmpq_poly, s10: fmpq_poly, a: AlgReal, lo: fmpq, hi: fmpq) -> bool:
    """``-s10(a) / s11(a)`` lies in ``[lo, hi]`` (``s11(a) != 0``)."""
    sg = sign_at(s11, a)
    above = -sign_at(s10 + s11 * lo, a) * sg  # sign of y* - lo
    below = sign_at(s10 + s11 * hi, a) * sg  # sign of hi - y*
    return above >= 0 and below >= 0


def limits_equal(C1: Curve, B1: LimitBox, C2: Curve, B2: LimitBox, norms: bool = True) -> bool | None:
    """Whether the two limits enclosed by the overlapping boxes are equal, decided in rational arithmetic and
    signs of rational polynomials at ``a``: True / False where decided, None where this test cannot (then the
    fibres over ``a`` decide). Same curve: equal where its norm has one root in the hull of the boxes.
    Different curves: distinct where their resultant is nonzero at ``a`` or their one common root lies outside
    a box; equal where it lies in both and each curve has at most one root over ``a`` in its box: shown first
    by :func:`monotone_in_y` (a filter), else (where ``norms``) by the curve's norm having one root there."""
    a = B1.a
    lo, hi = min(B1.lo, B2.lo), max(B1.hi, B2.hi)
    if C1 is C2:
        if monotone_in_y(C1, a, lo, hi):
            return True
        return True if norms and _one_root_in(C1, a, lo, hi) else None
    if sign_at(resultant_curves(C1, C2), a) != 0:
        return False
    s11, s10 = _first_subresultant(C1.key, C2.key) if C1.key <= C2.key else _first_subresultant(C2.key, C1.key)
    if sign_at(s11, a) == 0 or sign_at(C1.lc, a) == 0 or sign_at(C2.lc, a) == 0:
        return None
    if not (_in_box(s11, s10, a, B1.lo, B1.hi) and _in_box(s11, s10, a, B2.lo, B2.hi)):
        return False
    # the common root y* lies in both boxes; each box holds its limit, a root of its curve over a: where the
    # curve has no other root over a in the box, the limit is y*
    one1 = monotone_in_y(C1, a, B1.lo, B1.hi) or (norms and _one_root_in(C1, a, B1.lo, B1.hi))
    if one1 and (monotone_in_y(C2, a, B2.lo, B2.hi) or (norms and _one_root_in(C2, a, B2.lo, B2.hi))):
        return True
    return None
