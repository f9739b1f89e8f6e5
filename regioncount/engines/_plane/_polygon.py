"""Polygon kernels of the plane engine, vectorised over a batch of padded convex polygons: values and error
bounds of lines at vertices, sign tests, areas, enclosing discs, and the cut of polygons by lines."""

from __future__ import annotations

import numpy as np

from ..._predicates import EPS, TINY, gamma
from .._rows import last_max, last_sum, slot_sum

#: Number of float64 values a chunked temporary may hold.
_CHUNK = 1 << 18


#: Edge tags 0..3 are the domain's sides; tags of cuts start here.
_FIRST_TAG = 4


def _eval(V: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Values of the affine maps ``w (N, 3)`` at the vertices ``V (N, M, 2)`` -> ``(N, M)``."""
    s = V[..., 0] * w[:, 0, None]
    s += V[..., 1] * w[:, 1, None]
    s += w[:, 2, None]  # (x w0 + y w1) + w2, as written out
    return s


def _eval_bound(V: np.ndarray, R: np.ndarray, w: np.ndarray, e: np.ndarray):
    """Values of lines ``w (N, 3)`` (coefficient error ``e (N,)``) at vertices ``V (N, M, 2)`` (exact vertex
    within ``R (N, M)``) and a bound ``(N, M)`` on the distance of each value from the exact one: rounding
    of the three-term sum, the coefficients' error and the vertex's displacement."""
    s = _eval(V, w)
    aw = np.abs(w)
    g3 = gamma(3)
    # gamma(3) (|x| |w0| + |y| |w1| + |w2|) + e (1 + |x| + |y| + 2 R) + (|w0| + |w1|) R, gathered per line
    # (four products per vertex instead of ten; the factor below covers the roundings of either order)
    c0, c1 = (g3 * aw[:, 0] + e)[:, None], (g3 * aw[:, 1] + e)[:, None]
    c2, cr = (g3 * aw[:, 2] + e)[:, None], (aw[:, 0] + aw[:, 1] + 2.0 * e)[:, None]
    d = np.abs(V[..., 0])
    d *= c0
    t = np.abs(V[..., 1])
    t *= c1
    d += t
    d += c2
    np.multiply(R, cr, out=t)
    d += t
    # an exactly zero bound (exact line and vertex, and an exact sum) stays zero: it proves s == 0
    # (in place: d (1 + 16u) + TINY where d > 0, 0 elsewhere, without three temporaries of d's size)
    d *= 1.0 + 16 * EPS
    np.add(d, TINY, out=d, where=d > 0)
    return s, d


def _float_signs(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """+1 / -1 where the value is farther than its bound from zero, 0 where it is exactly zero (``d == 0``),
    and 2 where the float value cannot decide."""
    pos = s > d
    neg = s < -d
    sg = pos.view(np.int8) - neg.view(np.int8)  # int8 from the start: no int64 temporaries
    np.putmask(sg, ~(pos | neg), 2)
    zero = d == 0
    if zero.any():
        sg[zero & (s == 0)] = 0
    return sg


def _areas(V: np.ndarray) -> np.ndarray:
    """Signed (counter-clockwise positive) areas of padded polygons ``(N, M, 2)`` -> ``(N,)``.

    Coordinates are taken relative to the first vertex, so tiny polygons keep their relative accuracy."""
    out = np.empty(V.shape[0])
    step = max(1, _CHUNK // max(1, V.shape[1]))  # in row chunks: the temporaries stay in cache
    for lo in range(0, V.shape[0], step):
        W = V[lo : lo + step]
        x = W[..., 0] - W[:, :1, 0]
        y = W[..., 1] - W[:, :1, 1]
        out[lo : lo + step] = 0.5 * np.sum(x[:, :-1] * y[:, 1:] - x[:, 1:] * y[:, :-1], axis=1)
    return out


def _as_complex(V: np.ndarray) -> np.ndarray:
    """Vertices ``(..., M, 2)`` float64, each vertex's two coordinates adjacent, as a complex view ``(..., M)``
    (``x + i y`` per vertex; writes reach ``V``): gathers, scatters and sums then move one 16-byte element per vertex,
    not a two-float subspace."""
    return V.view(np.complex128)[..., 0]


def _discs(V: np.ndarray, nv: np.ndarray, R: np.ndarray):
    """Vertex mean ``(N, 2)`` (an interior point) and the radius ``(N,)`` of the disc around it that holds
    the exact polygon (each exact vertex lies within ``R`` of its float one)."""
    N, M = V.shape[:2]
    V = np.ascontiguousarray(V)
    # the slots summed as complex numbers (one strided add per slot, the same sums per coordinate)
    ctr = slot_sum(_as_complex(V)).view(np.float64).reshape(N, 2) - (M - nv)[:, None] * V[:, 0]
    ctr /= nv[:, None]
    # the distances written out per coordinate (the same sums as a sum over the last axis of length 2)
    X = V - ctr[:, None, :]
    X *= X
    d = X[..., 0] + X[..., 1]
    np.sqrt(d, out=d)
    d += R
    rad = last_max(d) * (1 + 1e-12)
    return ctr, rad


def _cut(V, nv, s, sg, tag, newtag, d, R, sides=(1, -1)):
    """The parts ``side * s >= 0`` of padded polygons, for each side in ``sides``.

    ``V (N, M, 2)``, counts ``nv``, vertex values ``s``, exact signs ``sg``, value bounds ``d`` and vertex
    radii ``R`` ``(N, M)``, edge tags ``(N, M)`` (tag ``j`` is the edge from vertex ``j`` to ``j+1``), ``newtag
    (N,)`` for the cut. Each part keeps its vertices on that side (in order) and gains the crossing points of
    the edges whose ends have strictly opposite signs; an edge keeps its tag, the new edge along the cut gets
    ``newtag``. A crossing point is interpolated from the positive end towards the negative one, so two
    polygons sharing an edge compute bitwise the same point; its radius bounds the distance to the exact
    crossing (the error of both end values, the ends' radii and rounding). Where an end's float value does
    not have its exact sign the interpolation is meaningless: such points get radius inf and are listed in
    ``bad`` (indices into the crossing list) with their two lines' tags, for the caller to place exactly.
    Returns ``(parts, bad_info)``: a list of ``(V (N, Mo, 2), counts (N,), tags (N, Mo), radii (N, Mo),
    crossing slots (N, Mo) -1 or crossing index, None where no crossing is bad)`` and ``(edge tags, cut tags,
    rows)`` of the bad crossings.
    """
    N, M = sg.shape
    E = M - 1  # the last slot is always padding
    ga, gb = sg[:, :E], sg[:, 1:]
    cross = (ga * gb) < 0
    # flat indices: (N, E) for edge masks, (N, M) for vertex arrays
    fc = np.flatnonzero(cross)
    ri = fc // E
    fa = fc + ri  # start vertex of each crossing edge, in (N, M)
    # a vertex's two coordinates as one complex: gathers and scatters move one 16-byte element per vertex
    Vz = _as_complex(np.ascontiguousarray(V)).reshape(-1)
    sf, gf, tf = s.reshape(-1), sg.reshape(-1), tag.reshape(-1)
    df, Rf = d.reshape(-1), R.reshape(-1)
    # each crossing edge's positive end and negative end, as flat indices (then one gather per array and end)
    fb = fa + 1
    pos_first = gf[fa] > 0
    ip, im = np.where(pos_first, fa, fb), np.where(pos_first, fb, fa)
    Pp = Vz[ip].view(np.float64).reshape(-1, 2)
    Pm = Vz[im].view(np.float64).reshape(-1, 2)
    sp, sm = sf[ip], sf[im]
    dp, dm = df[ip], df[im]
    rp, rm = Rf[ip], Rf[im]
    a, b = sp, -sm
    good = (a > dp) & (b > dm)
    with np.errstate(all="ignore"):  # where good is False these are meaningless, and replaced
        X = Pp + (a / (a + b))[:, None] * (Pm - Pp)
        # (a dm + b dp) / ((a + b) (a + b - dp - dm)), as ratios: no underflow or overflow at any scale
        S = a + b
        rest = S - dp - dm
        dt = (a / S) * (dm / rest) + (b / S) * (dp / rest) + 4 * EPS
        L = np.sqrt(last_sum((Pm - Pp) ** 2))
        rX = np.maximum(rp, rm) + dt * (L + rp + rm) + 8 * EPS * (last_sum(np.abs(Pp)) + last_sum(np.abs(Pm)))
        rX = np.where(good, rX * (1 + 1e-12) + TINY, np.inf)
    X[~good] = 0.0
    Xz = X.view(np.complex128).reshape(-1)
    bad = np.flatnonzero(~good)
    g_next = gf[fb]
    valid = np.arange(E) < nv[:, None]
    out = []
    for side in sides:
        ev = valid & ((ga >= 0) if side > 0 else (ga <= 0))  # the slots on this side (or on the cut)
        cnt = ev.astype(np.int64) + cross
        # each slot's place in the part (an exclusive running count) and the part's size, column by column (a
        # cumulative sum along rows of a dozen entries is slower)
        off = np.empty_like(cnt)
        n_out = np.zeros(N, np.int64)
        for i in range(E):
            off[:, i] = n_out
            n_out += cnt[:, i]
        off = off.reshape(-1)
        Mo = int(n_out.max(initial=0)) + 1
        Vo = np.empty(N * Mo, np.complex128)
        To = np.full(N * Mo, -1, np.int64)
        Ro = np.zeros(N * Mo)
        Co = np.full(N * Mo, -1, np.int64) if bad.size else None  # only a crossing placed exactly reads it
        fv = np.flatnonzero(ev)
        vi = fv // E
        fm = fv + vi
        dest = vi * Mo + off[fv]
        Vo[dest] = Vz[fm]
        Ro[dest] = Rf[fm]
        # a vertex on the cut whose next vertex is on the other side starts the new edge
        nxt = gf[fm + 1]
        starts_cut = (gf[fm] == 0) & ((nxt < 0) if side > 0 else (nxt > 0))
        To[dest] = np.where(starts_cut, newtag[vi], tf[fm])
        dest = ri * Mo + off[fc] + ev.reshape(-1)[fc]
        Vo[dest] = Xz
        Ro[dest] = rX
        if Co is not None:
            Co[dest] = np.arange(fc.size)
        To[dest] = np.where((g_next < 0) if side > 0 else (g_next > 0), newtag[ri], tf[fa])
        Vo = Vo.reshape(N, Mo)
        Ro = Ro.reshape(N, Mo)
        pad = np.arange(Mo) >= n_out[:, None]  # padding repeats the first vertex (both coordinates as one complex)
        np.copyto(Vo, Vo[:, :1].copy(), where=pad)
        np.copyto(Ro, Ro[:, :1].copy(), where=pad)
        Vo = Vo.view(np.float64).reshape(N, Mo, 2)
        out.append((Vo, n_out, To.reshape(N, Mo), Ro, None if Co is None else Co.reshape(N, Mo)))
    return out, (tf[fa][bad], newtag[ri][bad], bad)


#: What the underflow of two float squares can take from a norm ``sqrt(x^2 + y^2)`` (``2 sqrt(ETA)``), see
#: :func:`_norm`.
NORM_SLACK = 2.0**-536


def _norm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sqrt(x*x + y*y)`` in floats, a cheaper stand-in for ``hypot`` in bounds: the exact norm is at most
    ``value * (1 + 3 EPS) + NORM_SLACK`` (three roundings, each square losing at most ``ETA / 2`` to
    underflow). A square that overflows gives inf, which only makes a bound looser."""
    with np.errstate(over="ignore"):
        out = x * x
        out += y * y
        return np.sqrt(out, out=out)


def _disc_reach(cen, rad, w, e):
    """Value of lines ``w (..., 3)`` (coefficient error ``e``) at disc centres ``cen (..., 2)`` and how far the
    exact line can reach from it over the disc of radius ``rad``: the line is positive on the whole exact
    polygon inside the disc where ``value > reach``, negative where ``value < -reach``."""
    return _disc_reach_planes(cen[..., 0], cen[..., 1], rad, w[..., 0], w[..., 1], w[..., 2], e)


def _disc_reach_planes(c0, c1, rad, w0, w1, w2, e):
    """:func:`_disc_reach` from the coordinates and coefficients as separate arrays (a caller whose coefficients
    lie in planes passes them as they lie, rather than as strided views)."""
    p0, p1 = c0 * w0, c1 * w1
    sc = p0 + p1 + w2
    reach = gamma(3) * (np.abs(p0) + np.abs(p1) + np.abs(w2)) + e * (1 + np.abs(c0) + np.abs(c1))
    reach += (_norm(w0, w1) * (1 + 8 * EPS) + (2 * e + NORM_SLACK)) * rad
    reach *= 1 + 16 * EPS
    reach += TINY
    return sc, reach


def _pad(a: np.ndarray, M: int) -> np.ndarray:
    """Per-vertex data ``a (n, m, ...)`` (vertices, radii) widened to ``M`` slots by repeating slot 0."""
    if a.shape[1] >= M:
        return a
    out = np.empty((a.shape[0], M) + a.shape[2:], a.dtype)
    out[:, : a.shape[1]] = a
    out[:, a.shape[1] :] = a[:, :1]
    return out


def _pad_tags(t: np.ndarray, M: int) -> np.ndarray:
    if t.shape[1] >= M:
        return t
    out = np.full((t.shape[0], M), -1, np.int64)
    out[:, : t.shape[1]] = t
    return out
