"""Bounds on the number of regions (DESIGN §4), as exact functions of Python ints.

Every function returns an ``int`` computed with integer arithmetic only (``math.comb``, products,
sums; floors are integer divisions), so values stay exact however large they get. A parameter
outside a formula's validity range raises :class:`ValueError` with a one-line message.

Notation: ``n0`` is the input dimension, ``widths = (n_1, ..., n_L)`` the hidden widths, ``k`` the
maxout rank. :data:`BOUNDS` maps a name to a :class:`BoundSpec` so a CLI can evaluate any bound from
named options without knowing its formula.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from math import comb, prod


def _int(name: str, value, minimum: int) -> int:
    try:
        v = int(value)
        ok = not isinstance(value, bool) and v == value
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if v < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {v}")
    return v


def _widths(widths: Sequence[int]) -> tuple[int, ...]:
    ws = tuple(_int("every width", w, 1) for w in widths)
    if not ws:
        raise ValueError("widths must name at least one hidden layer")
    return ws


def _need_hidden(ws: tuple[int, ...], n0: int, factor: int, source: str) -> None:
    # The conditions bind the hidden layers that fold (l < L); the last layer is a plain arrangement
    # whose count holds for any width.
    for l, n in enumerate(ws[:-1], start=1):
        if n < factor * n0:
            need = "n0" if factor == 1 else f"{factor} n0"
            raise ValueError(f"{source} needs n_l >= {need} = {factor * n0} for every hidden layer l < L; n_{l} = {n}")


def _arrangement(n: int, n0: int, parallel: int = 1) -> int:
    """Sum_{j=0}^{n0} C(n, j) parallel^j: regions of n classes of ``parallel`` parallel hyperplanes in
    general position in R^{n0} (Zaslavsky 1975 for parallel = 1)."""
    return sum(comb(n, j) * parallel**j for j in range(n0 + 1))


def zaslavsky(n: int, n0: int) -> int:
    """Regions of ``n`` hyperplanes in general position in R^{n0}: sum_{j<=n0} C(n, j).

    Zaslavsky 1975; the exact maximum for one ReLU layer of ``n`` units on R^{n0}.
    """
    return _arrangement(_int("n", n, 0), _int("n0", n0, 1))


def relu_lower_montufar(widths: Sequence[int], n0: int) -> int:
    """ReLU lower bound, Montúfar, Pascanu, Cho, Bengio 2014 (Thm 4), valid for n_l >= n0 (l < L):
    prod_{l<L} floor(n_l/n0)^{n0} * sum_{j<=n0} C(n_L, j)."""
    ws, n0 = _widths(widths), _int("n0", n0, 1)
    _need_hidden(ws, n0, 1, "Montúfar et al. 2014")
    return prod((n // n0) ** n0 for n in ws[:-1]) * _arrangement(ws[-1], n0)


def relu_lower_serra(widths: Sequence[int], n0: int) -> int:
    """ReLU lower bound, Serra, Tjandraatmadja, Ramalingam 2018 (Thm 6), valid for n_l >= 3 n0 (l < L):
    prod_{l<L} (floor(n_l/n0) + 1)^{n0} * sum_{j<=n0} C(n_L, j)."""
    ws, n0 = _widths(widths), _int("n0", n0, 1)
    _need_hidden(ws, n0, 3, "Serra et al. 2018 Thm 6")
    return prod((n // n0 + 1) ** n0 for n in ws[:-1]) * _arrangement(ws[-1], n0)


def relu_upper_serra(widths: Sequence[int], n0: int) -> int:
    """ReLU upper bound, Serra, Tjandraatmadja, Ramalingam 2018 (Thm 1):
    sum over (j_1..j_L), 0 <= j_l <= min(n0, n_1 - j_1, ..., n_{l-1} - j_{l-1}, n_l), of prod_l C(n_l, j_l).

    Computed by dynamic programming over the running cap ``min(n0, n_i - j_i for i < l)``; the exact
    maximum for n0 = 1 and every n_l >= 3, where it equals prod (n_l + 1).

    Examples
    --------
    One layer is Zaslavsky's count of an arrangement; with one input it is ``prod (n_l + 1)``:

    >>> relu_upper_serra([3], 2), zaslavsky(3, 2), relu_upper_serra([4, 4], 1)
    (7, 7, 25)
    >>> relu_upper_serra([16, 16, 16], 2)  # exact integers, however large
    2571353
    """
    ws, n0 = _widths(widths), _int("n0", n0, 1)
    totals = {n0: 1}  # running cap -> sum of products of the prefixes that reach it
    for n in ws:
        nxt: dict[int, int] = {}
        for cap, acc in totals.items():
            for j in range(min(cap, n) + 1):
                c = min(cap, n - j)
                nxt[c] = nxt.get(c, 0) + acc * comb(n, j)
        totals = nxt
    return sum(totals.values())


def maxout_lower(widths: Sequence[int], n0: int, k: int) -> int:
    """Maxout lower bound (Montúfar, Ren, Zhang 2022; Serra et al. 2018), valid for n_l >= n0 (l < L):
    prod_{l<L} (floor(n_l/n0)(k-1) + 1)^{n0} * sum_{j<=n0} C(n_L, j) (k-1)^j.

    Attained by the product of maxout folds when floor(n_l/n0) is even or k = 2 (DESIGN §4 caveat);
    for odd floor(n_l/n0) with k >= 3 it is not reached by that construction in general.
    """
    ws, n0, k = _widths(widths), _int("n0", n0, 1), _int("k", k, 2)
    _need_hidden(ws, n0, 1, "the maxout lower bound")
    return prod(((n // n0) * (k - 1) + 1) ** n0 for n in ws[:-1]) * _arrangement(ws[-1], n0, k - 1)


def maxout_upper_mrz(widths: Sequence[int], n0: int, k: int) -> int:
    """Maxout upper bound, Montúfar, Ren, Zhang 2022:
    prod_l sum_{j<=d_l} C(n_l, j) (k-1)^j with d_l = min(n0, n_1, ..., n_{l-1})."""
    ws, n0, k = _widths(widths), _int("n0", n0, 1), _int("k", k, 2)
    out, d = 1, n0
    for n in ws:
        out *= _arrangement(n, d, k - 1)
        d = min(d, n)
    return out


def maxout_upper_serra(widths: Sequence[int], n0: int, k: int) -> int:
    """Maxout upper bound, Serra, Tjandraatmadja, Ramalingam 2018:
    prod_l sum_{j<=d_l} C(k(k-1)/2 * n_l, j) with d_l = min(n0, n_1, ..., n_l)."""
    ws, n0, k = _widths(widths), _int("n0", n0, 1), _int("k", k, 2)
    out, d = 1, n0
    for n in ws:
        d = min(d, n)
        out *= _arrangement(k * (k - 1) // 2 * n, d)
    return out


def transformer_maxout_lower(m: int, T: int, q: int, D: int) -> int:
    """Lower bound for a hardmax transformer emulating Maxout, Gu, Yang, Zhou 2026 (arXiv 2603.03084, Thm 4.4):
    [floor(mT/q)(T-1) + 1]^{q(floor(D/3) - 1)} * sum_{j<=q} C(mT, j) (T-1)^j.

    ``T`` tokens, per-token width ``m``, input dimension ``q``, ``D`` blocks. It equals
    :func:`maxout_lower` with k = T, n_l = mT, n0 = q and L = floor(D/3) layers; the paper prints mT/q
    without the floor (the two agree when q divides mT). The theorem needs one maxout layer, i.e. three
    blocks, so D < 3 raises ValueError (not None: a bound that does not apply is an error, not a value).
    """
    m, T, q, D = _int("m", m, 1), _int("T", T, 2), _int("q", q, 1), _int("D", D, 0)
    if D < 3:
        raise ValueError(f"Thm 4.4 (Gu, Yang, Zhou 2026) needs D >= 3 blocks (one maxout layer per 3 blocks); D = {D}")
    return maxout_lower((m * T,) * (D // 3), q, T)


@dataclasses.dataclass(frozen=True)
class BoundSpec:
    """A named bound: ``func`` takes the parameters ``params`` (keyword names), returns an exact int.

    ``kind`` is ``"exact"``, ``"lower"`` or ``"upper"``; ``architecture`` is ``"relu"``, ``"maxout"``
    or ``"transformer"``; ``citation`` names the source; ``description`` is one line.
    """

    name: str
    func: Callable[..., int]
    params: tuple[str, ...]
    kind: str
    architecture: str
    citation: str
    description: str

    def __call__(self, **options) -> int:
        """Evaluate from named options; options this bound does not use are ignored, a missing one
        raises ValueError naming it."""
        missing = [p for p in self.params if options.get(p) is None]
        if missing:
            raise ValueError(f"bound {self.name!r} needs {', '.join('--' + p for p in missing)}")
        return self.func(**{p: options[p] for p in self.params})


def _spec(name, func, kind, architecture, citation, description) -> BoundSpec:
    params = tuple(inspect.signature(func).parameters)
    return BoundSpec(name, func, params, kind, architecture, citation, description)


BOUNDS: dict[str, BoundSpec] = {
    s.name: s
    for s in (
        _spec(
            "zaslavsky",
            zaslavsky,
            "exact",
            "relu",
            "Zaslavsky 1975",
            "regions of n hyperplanes in general position in R^n0 (one ReLU layer, exact maximum)",
        ),
        _spec(
            "relu_lower_montufar",
            relu_lower_montufar,
            "lower",
            "relu",
            "Montúfar, Pascanu, Cho, Bengio 2014, Thm 4",
            "ReLU lower bound prod floor(n_l/n0)^n0 * sum C(n_L, j); needs n_l >= n0",
        ),
        _spec(
            "relu_lower_serra",
            relu_lower_serra,
            "lower",
            "relu",
            "Serra, Tjandraatmadja, Ramalingam 2018, Thm 6",
            "ReLU lower bound prod (floor(n_l/n0)+1)^n0 * sum C(n_L, j); needs n_l >= 3 n0",
        ),
        _spec(
            "relu_upper_serra",
            relu_upper_serra,
            "upper",
            "relu",
            "Serra, Tjandraatmadja, Ramalingam 2018, Thm 1",
            "ReLU upper bound, sum over dimension budgets of prod C(n_l, j_l); exact for n0 = 1, n_l >= 3",
        ),
        _spec(
            "maxout_lower",
            maxout_lower,
            "lower",
            "maxout",
            "Montúfar, Ren, Zhang 2022; Serra, Tjandraatmadja, Ramalingam 2018",
            "Maxout lower bound prod (floor(n_l/n0)(k-1)+1)^n0 * sum C(n_L, j)(k-1)^j; needs n_l >= n0",
        ),
        _spec(
            "maxout_upper_mrz",
            maxout_upper_mrz,
            "upper",
            "maxout",
            "Montúfar, Ren, Zhang 2022",
            "Maxout upper bound prod_l sum_{j<=min(n0,n_1..n_{l-1})} C(n_l, j)(k-1)^j",
        ),
        _spec(
            "maxout_upper_serra",
            maxout_upper_serra,
            "upper",
            "maxout",
            "Serra, Tjandraatmadja, Ramalingam 2018",
            "Maxout upper bound prod_l sum_{j<=min(n0,n_1..n_l)} C(k(k-1)/2 n_l, j)",
        ),
        _spec(
            "transformer_maxout_lower",
            transformer_maxout_lower,
            "lower",
            "transformer",
            "Gu, Yang, Zhou 2026, arXiv 2603.03084, Thm 4.4",
            "hardmax transformer lower bound = maxout_lower(k=T, n_l=mT, n0=q, L=floor(D/3)); needs D >= 3",
        ),
    )
}


def _log10_arrangement(n: int, d: int, parallel: int = 1) -> float:
    """An upper bound on log10 of :func:`_arrangement`: (d + 1) terms, each at most (n * parallel)^min(d, n)."""
    n, d, parallel = max(int(n), 1), max(int(d), 0), max(int(parallel), 1)
    return math.log10(d + 1) + min(d, n) * math.log10(max(2, n * parallel))


def estimate_size(name: str, **options) -> tuple[float, int]:
    """``(log10 upper bound of the value, arithmetic steps)`` of bound ``name`` from its options, computed
    in floats without evaluating the bound, so a CLI can refuse a request whose value would have millions
    of digits or whose evaluation would run for minutes. Options missing or malformed raise ValueError or
    TypeError (the bound itself then reports them)."""
    spec = BOUNDS[name]
    o: dict = {p: options.get(p) for p in spec.params}
    if name == "transformer_maxout_lower":  # maxout_lower with floor(D/3) equal layers of width mT, k = T
        m, T, q, D = (max(int(o[p]), 1) for p in ("m", "T", "q", "D"))
        L, n, k = max(D // 3, 1), m * T, max(T, 2)
        digits = (L - 1) * q * math.log10((n // q) * (k - 1) + 2) + _log10_arrangement(n, q, k - 1)
        return digits, L + q + 1
    if name == "zaslavsky":
        return _log10_arrangement(o["n"], o["n0"]), max(int(o["n0"]), 0) + 1
    else:
        widths, n0 = [int(w) for w in o["widths"]], max(int(o["n0"]), 1)
        k = max(int(o.get("k") or 2), 2)
    widths = [max(w, 1) for w in widths] or [1]
    L = len(widths)
    if name in ("relu_lower_montufar", "relu_lower_serra", "maxout_lower", "transformer_maxout_lower"):
        per = (k - 1) if name in ("maxout_lower", "transformer_maxout_lower") else 1
        digits = sum(n0 * math.log10((n // n0) * per + 2) for n in widths[:-1])
        return digits + _log10_arrangement(widths[-1], n0, k - 1 if per > 1 else 1), L + n0 + 1
    if name == "relu_upper_serra":
        return sum(_log10_arrangement(n, n0) for n in widths), sum((n0 + 1) * (min(n0, n) + 1) for n in widths)
    if name == "maxout_upper_mrz":
        return sum(_log10_arrangement(n, n0, k - 1) for n in widths), sum(min(n0, n) + 1 for n in widths)
    if name == "maxout_upper_serra":
        c = k * (k - 1) // 2
        return sum(_log10_arrangement(c * n, n0) for n in widths), sum(min(n0, n) + 1 for n in widths)
    raise ValueError(f"no size estimate for bound {name!r}")
