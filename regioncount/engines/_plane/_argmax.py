"""Argmax cells, shared by the plane engine's GroupMax (maxout units) and hardmax attention splitters: per
unit, the cells of an argmax of ``k`` affine functions, obtained by clipping each region with the halfplanes
``f_r >= f_j`` (ties go to the lower index, like ``argmax``)."""

from __future__ import annotations

import numpy as np

from ... import _tolerances as tol
from ..._predicates import EPS, TINY, gamma
from .._rows import last_any, last_max, last_max_abs, last_min
from ._polygon import _CHUNK, _disc_reach_planes, _eval_bound, _float_signs, _pad, _pad_tags

#: A clip round forms its differences once per row (piece of a parent) where the rows are at most this many times
#: the live copies, else once per copy: the same floats either way, only the work differs.
PER_ROW_AT = 1.0

#: relative tolerance of the tag aliasing of coincident argmax boundary lines (adjacency only, never counts)
ALIAS_TOL = tol.ARGMAX_ALIAS


def argmax_start(eng, F: np.ndarray, E: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Winner per parent and unit where it is provably the argmax on the whole polygon, else -1.

    ``F (R0, U, 3, k)`` affine pieces, ``E (R0 or 1, U, k)`` their coefficient errors, ``active (R0, U, k)``.
    """
    st = eng.st
    R0, U, _, k = F.shape
    win = np.full((R0, U), -1, np.int64)
    step = max(1, _CHUNK // max(1, 4 * st.M * U * k))
    for lo in range(0, R0, step):
        sl = slice(lo, min(R0, lo + step))
        V, Rv = st.V[sl], st.R[sl]
        El = E[sl] if E.shape[0] > 1 else E
        Fs, act = F[sl], active[sl]
        # (n, M, U, k) values at vertices and their bounds, and the values at an interior point
        vals = np.einsum("nmc,nuck->nmuk", np.concatenate([V, np.ones(V.shape[:2] + (1,))], -1), Fs)
        aF = np.abs(Fs)
        aV = np.abs(V)
        bnd = gamma(3) * np.einsum("nmc,nuck->nmuk", np.concatenate([aV, np.ones(V.shape[:2] + (1,))], -1), aF)
        bnd += El[:, None] * (1.0 + aV.sum(axis=2) + 2 * Rv)[:, :, None, None]
        bnd += (aF[:, None, :, 0] + aF[:, None, :, 1]) * Rv[:, :, None, None]
        ctr = vals.mean(axis=1)
        ctr = np.where(act, ctr, -np.inf)
        r = np.argmax(ctr, axis=-1)
        vr = np.take_along_axis(vals, r[:, None, :, None], -1)
        br = np.take_along_axis(bnd, r[:, None, :, None], -1)
        diff = vr - vals
        dd = (br + bnd + EPS * np.abs(diff)) * (1 + 16 * EPS) + TINY
        lower = np.arange(k) < r[..., None]
        ok = np.all(diff >= dd, axis=1) & (~lower | np.any(diff > dd, axis=1))
        ok |= ~act
        ok[np.arange(ok.shape[0])[:, None], np.arange(U)[None, :], r] = True
        win[sl] = np.where(np.all(ok, axis=-1), r, -1)
    return win


def _difference_errors(g, e):
    """Error bounds ``(n, k)`` of float differences of pieces ``g (n, 3, k)``: the pieces' summed errors ``e (n, k)``
    and the rounding of the subtraction."""
    return e + 2 * EPS * last_max_abs(g.transpose(0, 2, 1))


def _on_discs(cen, rad, g, eg):
    """:func:`~._polygon._disc_reach` of the differences ``g (n, 3, k)`` (errors ``eg (n, k)``) on the discs
    ``(cen (n, 2), rad (n,))``."""
    return _disc_reach_planes(cen[:, 0, None], cen[:, 1, None], rad[:, None], g[:, 0], g[:, 1], g[:, 2], eg)


def _beaten(cen, rad, F, E, act, par) -> np.ndarray:
    """``(n, k)``: piece ``r`` provably loses, on the whole disc ``(cen (n, 2), rad (n,))`` that holds a
    polygon, to the first allowed piece ``j`` it is clipped against in :func:`argmax_unit` (``F (R0, 3, k)``,
    errors ``E`` and ``act (R0, k)`` of the parents, ``par (n,)`` each polygon's parent). That clip is then the
    first one its cell meets and leaves no vertex on the positive side, so the cell dies there, untouched:
    dropping it before any geometry changes nothing, not even the width of the polygon store. The rival and
    the difference depend on the parent only: they are formed once per parent."""
    R0, _, k = F.shape
    if k < 2 or par.size == 0:
        return np.zeros((par.size, k), bool)
    if R0 > par.size:  # fewer polygons than parents: their parents' rows only
        F, E, act, par = F[par], E[par], act[par], np.arange(par.size)
    # clip order of piece r: j = r + 1, r + 2, ... (mod k); the first allowed one
    js = (np.arange(k)[:, None] + np.arange(1, k)) % k  # (k, k - 1)
    a = act[:, js]  # (R0, k, k - 1)
    if a[:, :, 0].all():  # every piece's next one is allowed (every piece active): one permutation for all rows
        nxt = js[:, 0]
        Fj, Ej = F[:, :, nxt], E[:, nxt]
    else:
        j = js[np.arange(k), np.argmax(a, axis=2)]  # (R0, k)
        Fj = np.take_along_axis(F, np.broadcast_to(j[:, None, :], F.shape), axis=2)
        Ej = np.take_along_axis(E, j, axis=1)
    g = Fj - F  # f_j - f_r
    eg = _difference_errors(g, E + Ej)
    sc, reach = _on_discs(cen, rad, g[par], eg[par])
    return last_any(a)[par] & (sc > reach)


def _wins(cen, rad, F, E, act, r) -> np.ndarray:
    """``(n,)``: piece ``r (n,)`` is strictly above every other allowed piece on the whole disc ``(cen (n, 2), rad
    (n,))`` (``F (n, 3, k)``, errors ``E`` and ``act (n, k)``, as in :func:`_beaten`)."""
    n = F.shape[0]
    g = F - np.take_along_axis(F, r[:, None, None], axis=2)  # f_j - f_r
    sc, reach = _on_discs(cen, rad, g, _difference_errors(g, E + np.take_along_axis(E, r[:, None], axis=1)))
    below = (sc < -reach) | ~act
    below[np.arange(n), r] = True
    return np.all(below, axis=1)


def argmax_unit(eng, u: int, F_u, E_u, act_u, win_u, R0: int, kind: str, info: dict):
    """Split every region whose op-start parent has no proven winner for unit ``u`` into argmax cells.

    ``F_u (R0, 3, k)``, ``E_u (R0 or 1, k)``, ``act_u (R0, k)`` bool, ``win_u (R0,)``; ``kind`` and ``info``
    name the op in the engine's records (see :meth:`~._predicates._Decisions._exact_line`).
    """
    st = eng.st
    k = F_u.shape[2]
    anc = st.anc[: st.n]
    cand = np.flatnonzero(win_u[anc] < 0)
    if cand.size == 0:
        return
    Rc = cand.size
    par = anc[cand]
    base = eng.take_tags(R0 * k * (k - 1) // 2)
    eng.record(kind, base, R0 * k * (k - 1) // 2, R0=R0, u=u, k=k, **info)
    El = np.broadcast_to(E_u, (R0, k)) if E_u.shape[0] == 1 else E_u
    act_p = act_u[par]
    keep = act_p & ~_beaten(st.cen[cand], st.rad[cand], F_u, El, act_u, par)
    # a region with one piece left that provably beats every other allowed piece on the region's disc lies in
    # that piece's cell: each clip of its copy would leave the copy whole, so the region keeps its polygon (the
    # store's row as it is) and only gets its digit
    one = np.flatnonzero(keep.sum(axis=1) == 1)
    if one.size:
        rw = np.argmax(keep[one], axis=1)
        whole = _wins(st.cen[cand[one]], st.rad[cand[one]], F_u[par[one]], El[par[one]], act_p[one], rw)
        if whole.any():
            st.extra["digits"][cand[one[whole]], u] = rw[whole]
            rest = np.ones(Rc, bool)
            rest[one[whole]] = False
            cand, par, keep = cand[rest], par[rest], keep[rest]
            Rc = cand.size
            if Rc == 0:
                return
    owner = np.repeat(np.arange(Rc), k)
    r = np.tile(np.arange(k), Rc)
    keep = keep.reshape(-1)
    owner, r = owner[keep], r[keep]
    # only as many slots as the widest candidate needs (the rest repeat the first vertex), one gather each
    Mloc = int(st.nv[cand].max(initial=2)) + 1
    src = cand[owner]
    V = st.V[src, :Mloc]
    Rv = st.R[src, :Mloc]
    nv = st.nv[src]
    tg = st.tag[src, :Mloc]
    canon = _line_classes(F_u, np.unique(par), k)
    cut = np.zeros(owner.size, bool)  # the cell was cut (the others are still their region's polygon)
    # piece p of parent q as row q k + p: one gather of three contiguous floats per region
    Ft = np.ascontiguousarray(F_u.transpose(0, 2, 1)).reshape(-1, 3)
    Ef, Af = np.ascontiguousarray(El).reshape(-1), np.ascontiguousarray(act_u).reshape(-1)
    # each candidate's disc (it holds the exact polygon, so every copy of it)
    c0, c1, rad = st.cen[cand, 0], st.cen[cand, 1], st.rad[cand]
    # the copies still alive, as indices into the copies' arrays (which are never compacted: each round reads the
    # rows it evaluates, and the clipped ones are written back in place)
    cur = np.arange(owner.size)
    alive = np.ones(owner.size, bool)
    # each copy's row q k + r (piece r of parent q); what a round computes for a copy depends on its row only: where
    # the rows are fewer than the live copies (R0 k rows against millions of copies on a dense tile) it is formed
    # once per row and each copy reads its own, else per copy
    ir0 = par[owner] * k + r
    pr = np.arange(R0 * k)
    for m in range(1, k):
        oc, ir = owner[cur], ir0[cur]
        per_row = pr.size <= PER_ROW_AT * ir.size
        G, EG, AJ, NT, UP = _round_rows(Ft, Ef, Af, canon, pr if per_row else ir, k, m, base, R0)
        g, eg = (G[ir], EG[ir]) if per_row else (G, EG)
        # the disc first: where f_r - f_j has one sign on the whole disc, it has it at every vertex of the copy
        # (all positive: the copy stays as it is; all negative: it dies), which the vertices' test would find
        sc, reach = _disc_reach_planes(c0[oc], c1[oc], rad[oc], g[:, 0], g[:, 1], g[:, 2], eg)
        alive = (sc > reach) | ~(AJ[ir] if per_row else AJ)  # a piece not allowed never clips
        ev = np.flatnonzero(~alive & ~(sc < -reach))
        if ev.size:
            at = cur[ev]
            ie = ir[ev] if per_row else ev
            Ve, Re, ge, ege = V[at], Rv[at], g[ev], eg[ev]
            newtag, up = NT[ie], UP[ie]
            s, dv = _eval_bound(Ve, Re, ge, ege)
            sg = _float_signs(s, dv)
            und = np.flatnonzero(last_max(sg) == 2)  # signs are -1, 0, 1 or 2 (undecided)
            if und.size:
                sg[und] = eng.decide(sg[und], tg[at[und]], nv[at[und]], ge[und], ege[und], newtag[und])
            haspos = last_max(sg) > 0  # decided signs only now: -1, 0, 1
            hasneg = last_min(sg) < 0
            allzero = ~haspos & ~hasneg
            alive_e = np.where(allzero, up, haspos)
            alive[ev] = alive_e
            ce = np.flatnonzero(alive_e & hasneg)
            if ce.size:
                clip = at[ce]
                # registered as f_a - f_b for the pair a < b its tag names: the two clips of one pair agree
                eng.register(newtag[ce], np.where(up[ce, None], ge[ce], -ge[ce]), ege[ce])
                ((Vc, nc, tc, Rcut),) = eng.cut(
                    Ve[ce], nv[clip], s[ce], sg[ce], tg[clip], newtag[ce], dv[ce], Re[ce], sides=(1,)
                )
                Mn = max(V.shape[1], Vc.shape[1])
                V, tg, Rv = _pad(V, Mn), _pad_tags(tg, Mn), _pad(Rv, Mn)
                Vc, tc, Rcut = _pad(Vc, Mn), _pad_tags(tc, Mn), _pad(Rcut, Mn)
                V[clip], nv[clip], tg[clip], Rv[clip] = Vc, nc, tc, Rcut
                cut[clip] = True
        if m < k - 1:
            cur = cur[alive]
    # the cells alive after the last clip (read where they lie: no compacted copy first); the first cell of each
    # owner replaces it, the others are appended
    live = cur[alive]
    owner, r = owner[live], r[live]
    first = np.ones(owner.size, bool)
    first[1:] = owner[1:] != owner[:-1]
    if int(first.sum()) != Rc:  # owner stays sorted (filtered from a repeat of 0..Rc-1): one run per owner
        raise RuntimeError("internal error: an argmax split left a region without a cell")
    rows = cand[owner[first]]
    digits = st.extra["digits"]
    digits[rows, u] = r[first]
    # a first cell never cut is its region's polygon as the store holds it (same slots, padding, tags and radii):
    # only the cut ones are written back (at the width the cells have, so the store widens as it would)
    at = live[first]
    ch = cut[at]
    at = at[ch]
    st.set_rows(rows[ch], V[at], nv[at], tg[at], Rv[at])
    if (~first).any():
        at = live[~first]
        new = st.append(V[at], nv[at], tg[at], Rv[at], cand[owner[~first]])
        st.extra["digits"][new, u] = r[~first]


def _round_rows(Ft, Ef, Af, canon, rows, k: int, m: int, base: int, R0: int):
    """What clip round ``m`` of :func:`argmax_unit` needs of the rows ``rows`` (``q k + r``: piece ``r`` of parent
    ``q``, clipped against its rival ``j = r + m mod k``): the difference ``f_r - f_j`` (``Ft (R0 k, 3)``), its
    error bound (the pieces' errors ``Ef`` and the subtraction's rounding, found exactly by Knuth's TwoSum),
    whether the rival is allowed (``Af``), the tag of the line ``f_r = f_j`` (its class in ``canon``) and
    whether ``j > r``."""
    q, pc = rows // k, rows % k
    jc = (pc + m) % k
    jrow = rows - pc + jc
    fr, fj = Ft[rows], Ft[jrow]
    g = fr - fj
    bv = g - fr
    err = np.abs((fr - (g - bv)) + (-fj - bv))
    eg = Ef[rows] + Ef[jrow] + last_max(err)
    lo, hi = np.minimum(pc, jc), np.maximum(pc, jc)
    tags = base + canon[q, hi * (hi - 1) // 2 + lo] * R0 + q
    return g, eg, Af[jrow], tags, jc > pc


def _line_classes(F: np.ndarray, parents: np.ndarray, k: int) -> np.ndarray:
    """For each parent and pair ``a < b`` of the pieces ``F (R0, 3, k)`` (pair index ``b (b-1)/2 + a``),
    the smallest pair index whose line ``f_a = f_b`` is the same line (within 1e-9 of the domain's size).

    Degenerate argmaxes have coincident boundary lines (with one-dimensional heads every difference line of
    a query is ``q(u) = 0``); both sides of such a boundary must carry one edge tag. Returns ``(R0, P)``.
    """
    P = k * (k - 1) // 2
    b = np.array([bb for bb in range(k) for _ in range(bb)], dtype=np.int64)
    a = np.array([aa for bb in range(k) for aa in range(bb)], dtype=np.int64)
    canon = np.tile(np.arange(P), (F.shape[0], 1))
    if P < 2 or parents.size == 0:
        return canon
    g = F[parents][:, :, a] - F[parents][:, :, b]  # (n, 3, P)
    norm = np.hypot(g[:, 0], g[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(norm[:, None] > 0, g / norm[:, None], np.nan)
    out = np.empty((parents.size, P), np.int64)
    if P <= _SMALL_P:
        # few pairs: the full (P, P) comparison of every parent at once, in blocks of parents (the same test
        # as _same_line_min_blocks, without a Python call per parent)
        step = max(1, _LINE_CLASS_BLOCK // (2 * 3 * 8 * P * P))
        diag = np.arange(P)
        for lo in range(0, parents.size, step):
            blk = n[lo : lo + step]  # (m, 3, P)
            same = _same_lines(blk[:, :, :, None], blk[:, :, None, :], axis=1)
            same[:, diag, diag] = True
            out[lo : lo + step] = np.argmax(same, axis=2)
    else:
        for i in range(parents.size):
            out[i] = _same_line_min(n[i], P)
    canon[parents] = out
    return canon


#: Pair counts up to which :func:`_line_classes` compares all pairs of every parent at once.
_SMALL_P = 21


def _same_line_min(ni: np.ndarray, P: int) -> np.ndarray:
    """``(P,)``: for each pair's unit line ``ni[:, p]`` (``(3, P)``; NaN where degenerate) the smallest ``q``
    with ``|ni[:, p] -+ ni[:, q]| <= ALIAS_TOL`` in every entry (``p`` itself at least).

    The test is the one the full ``(P, P)`` comparison makes, run only on the candidate pairs whose first
    entries lie within 2 ALIAS_TOL (a superset, found by sorting): comparing all pairs at once held ~3 P^2
    doubles, k^4 bytes for k pieces (a retrieval program's 40 keys: 2.5 GB) and k^4 time. Where the
    candidates are many (coincident lines) the comparison runs in blocks of rows instead."""
    best = np.arange(P)
    x = ni[0]
    ok = np.flatnonzero(np.isfinite(ni).all(axis=0))
    if ok.size < 2:
        return best
    order = ok[np.argsort(x[ok], kind="stable")]
    xs = x[order]
    pp, qq = [], []
    for sign in (1.0, -1.0):
        t = sign * x[ok]
        lo = np.searchsorted(xs, t - 2 * ALIAS_TOL, side="left")
        hi = np.searchsorted(xs, t + 2 * ALIAS_TOL, side="right")
        cnt = hi - lo
        total = int(cnt.sum())
        if total > 64 * P + 2**20:
            return _same_line_min_blocks(ni, P)
        p = np.repeat(ok, cnt)
        start = np.repeat(lo - np.cumsum(cnt) + cnt, cnt)
        q = order[start + np.arange(total)]
        same = np.all(np.abs(ni[:, p] - sign * ni[:, q]) <= ALIAS_TOL, axis=0)
        pp.append(p[same])
        qq.append(q[same])
    np.minimum.at(best, np.concatenate(pp), np.concatenate(qq))
    return best


def _same_line_min_blocks(ni: np.ndarray, P: int) -> np.ndarray:
    """:func:`_same_line_min` by the full comparison, in blocks of rows of about _LINE_CLASS_BLOCK bytes."""
    rows = max(1, _LINE_CLASS_BLOCK // (3 * 8 * P))
    out = np.empty(P, np.int64)
    for lo in range(0, P, rows):
        same = _same_lines(ni[:, lo : lo + rows, None], ni[:, None, :], axis=0)
        idx = np.arange(lo, lo + same.shape[0])
        same[idx - lo, idx] = True
        out[lo : lo + same.shape[0]] = np.argmax(same, axis=1)
    return out


def _same_lines(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """Are the unit lines ``x`` and ``y`` (coefficients along ``axis``, broadcast against each other) one line,
    of either orientation: within ALIAS_TOL in every coefficient of ``y`` or of ``-y``? (NaN: never.)"""
    same = np.all(np.abs(x - y) <= ALIAS_TOL, axis=axis)
    same |= np.all(np.abs(x + y) <= ALIAS_TOL, axis=axis)
    return same


#: Bytes of one block of :func:`_line_classes`' pairwise comparisons.
_LINE_CLASS_BLOCK = 16 * 2**20
