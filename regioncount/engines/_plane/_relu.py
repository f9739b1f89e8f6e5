"""The plane engine's ReLU splitter: one line per unit, split in rounds over all parents at once.

The pre-activation maps of all units are computed once per region at the start of the op (its "parent"); the
regions a parent is split into inherit its row. Units that keep one sign on the whole square are settled for
every parent at once (:func:`_whole_units`); for the others a disc test finds the units whose line may cross a
parent, and their vertices settle it. Round ``t`` splits every descendant of a parent by that parent's ``t``-th
crossing line (the order of the lines does not change the arrangement)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._predicates import EPS, TINY, gamma
from ...networks._ops import ReLU
from .._rows import last_any, last_max, last_min, nonzero2, take_lines, take_rows, where_rows
from ._kernels import KERNELS, splitter
from ._maps import _Bounds, _Deferred, _Masked, live_cut
from ._polygon import _CHUNK, NORM_SLACK, _disc_reach, _eval_bound, _float_signs


def split_relu(eng, op: ReLU, A, bd: _Bounds):
    """One line per unit: the crossing units of each op-start parent, split in rounds (module docstring)."""
    st = eng.st
    if isinstance(A, _Deferred):  # the affine op before it left its output unformed (see _Deferred)
        whole = _whole_by_intervals(A) if live_cut(eng.live.get(id(op))) is not None else None
        if whole is not None:
            return _all_whole(eng, A, bd, whole)
        A = A.full()
    R0, _, T, d = A.shape
    D = T * d
    Af = A.reshape(R0, 3, D)
    err = bd.eb.reshape(D)
    pos, neg, cols = _sides(eng, Af, err, bd.hb.reshape(D))
    cross = pos & neg
    # Each parent's crossing units, in rounds: round t splits every descendant of a parent by that
    # parent's t-th crossing unit. The order of the lines does not change the arrangement, and a round
    # is one vectorised step over all parents (not one per unit). The lists belong to an "owner":
    # first the op-start parent; when rounds test many more regions than they split (a parent crossed
    # by many lines, as the box is by the first layer), every region becomes the owner of the units
    # left in its list that cross it, so later rounds only visit regions with work left.
    if cols is None:
        pp, jj = nonzero2(cross)
    else:  # the only units that may cross: the same pairs, in the same order, from their columns alone
        pp, jj = nonzero2(cross[:, cols])
        jj = cols[jj]
    # not kept through the rounds: a small array left alive there can pin the top of the heap, and the memory the
    # rounds free above it stays resident (40 MB more peak RSS on the Thm 4.4 sub-box, with the same live data)
    del cols
    pairs = (pp, jj)  # the lists below change; the maps keep these
    cnt = np.bincount(pp, minlength=R0)
    first = np.cumsum(cnt) - cnt
    tag0 = _open_block(eng, np.packbits(pos & ~neg, axis=1), R0, D)
    t = since = 0
    while True:
        anc, own = st.anc[: st.n], st.extra["own"][: st.n]
        cand = np.flatnonzero(cnt[own] > t)
        if cand.size == 0:
            break
        par = anc[cand]
        j = jj[first[own[cand]] + t]
        made = _relu_round(eng, cand, take_lines(Af, par, j), err[j], j, tag0 + par * D + j)
        t += 1
        since += 1
        if since >= 4 and cand.size > 8 * max(made, 1):
            cnt, first, jj = _reown(eng, Af, err, cnt, first, jj, t)
            t = since = 0
    st.sort_by_parent()
    bits = st.extra["bits"][: st.n]
    A_new = _Masked(A, st.anc[: st.n].copy(), bits, pos & ~neg, cross, pairs)
    return A_new, ("bits", D, bits), dataclasses.replace(bd, same_u=False)


KERNELS.register("relu")(splitter(split_relu, lazy=(_Deferred,)))


def _open_block(eng, bits: np.ndarray, R0: int, D: int) -> int:
    """A ReLU's start on ``R0`` op-start parents of ``D`` units: its code block (``bits``, packed, per parent), each
    parent the owner of its own list, and the tags of its ``R0 D`` lines, recorded for exact decisions (the
    first is returned)."""
    st = eng.st
    st.add_extra("bits", bits)
    st.add_extra("own", np.arange(R0))
    tag0 = eng.take_tags(R0 * D)
    eng.record("relu", tag0, R0 * D, D=D)
    return tag0


def _all_whole(eng, A: _Deferred, bd: _Bounds, whole: tuple[np.ndarray, np.ndarray]):
    """:func:`split_relu` where every unit keeps one sign on every parent (``whole``: per unit, positive and
    negative): no region is split; the code block and tags are those the rounds would give, and the output stays
    unformed (:class:`_Deferred` with the units' 0/1 mask)."""
    st = eng.st
    R0, T, d = A.n, A.A_in.shape[2], A.op.W.shape[0]
    D = T * d
    on = whole[0] & ~whole[1]
    _open_block(eng, np.broadcast_to(np.packbits(on), (R0, -(-D // 8))), R0, D)
    bits = st.extra["bits"][: st.n]
    out = _Deferred(A.A_in, A.op, A.bd_in, on.reshape(T, d))
    return out, ("bits", D, bits), dataclasses.replace(bd, same_u=False)


def _whole_by_intervals(A: _Deferred) -> tuple[np.ndarray, np.ndarray] | None:
    """Units ``(T d_out,)`` of the unformed affine output ``A`` positive (first) or negative (second) on the whole
    square for every row, from the extremes over the rows of its input's coefficients alone; None unless that
    settles every unit (the maps are then formed, and :func:`_whole_units` tries with them).

    For unit ``j`` of token ``t`` the exact coefficients are ``Y_c = sum_k W_jk X_ck (+ b_j for c = 2)``, where the
    exact input coefficients ``X_ck`` lie within ``e_k`` (the input's error bounds) of floats between their least
    and largest value over the rows, ``lo_ck`` and ``hi_ck``. So on the square ``|u_i| <= 1`` the unit is at least
    ``L = sum_k min(W_jk lo_2k, W_jk hi_2k) + b_j - U_0 - U_1 - 3 E`` with ``U_c = sum_k |W_jk| max(|lo_ck|, |hi_ck|)``
    and ``E = sum_k |W_jk| e_k``, and at most ``H`` (max for min, plus for minus). Each of the float sums that form
    ``L`` and ``H`` (``K`` terms, then six more operations) is within ``gamma(K + 6)`` times the sum of the
    magnitudes ``P`` of every term of the exact value (Higham 2002, Thm 3.1): a unit is proven where ``L``
    exceeds ``8 gamma(K + 6) P``, or ``H`` falls below its negative."""
    X, W, b, bd = A.A_in, A.op.W, A.op.b, A.bd_in
    R, _, T, d = X.shape
    if R == 0:
        return None
    lo, hi = X.min(axis=0), X.max(axis=0)  # (3, T, d): exact extremes of floats
    mag = np.maximum(np.abs(lo), np.abs(hi))
    Wp, Wn, Wa = np.maximum(W, 0.0), np.minimum(W, 0.0), np.abs(W)
    bb = np.broadcast_to(b, (T, W.shape[0]))
    with np.errstate(over="ignore", invalid="ignore"):  # an inf or NaN proves nothing: the maps are formed then
        L2 = lo[2] @ Wp.T + hi[2] @ Wn.T
        H2 = hi[2] @ Wp.T + lo[2] @ Wn.T
        U = (mag[0] + mag[1]) @ Wa.T
        E = 3 * (bd.eb @ Wa.T)
        P = (mag[0] + mag[1] + mag[2] + 3 * bd.eb) @ Wa.T + np.abs(bb)
        slack = 8 * gamma(W.shape[1] + 6) * P * (1 + 1e-9) + TINY
        pos = L2 + bb - U - E > slack
        neg = H2 + bb + U + E < -slack
    if not np.all(pos | neg):
        return None
    return pos.reshape(-1), neg.reshape(-1)


def _classify(eng, rows, w, e):
    """For polygons ``rows`` and lines ``w (n, 3)`` (error ``e (n,)``): may the line be positive / negative
    somewhere on the exact polygon? A disc test settles most pairs; the rest are evaluated at the vertices,
    an undecided vertex counting as both."""
    st = eng.st
    sc, reach = _disc_reach(take_rows(st.cen, rows), st.rad[rows], w, e)
    pos, neg = sc > -reach, sc < reach
    amb = np.flatnonzero(pos & neg)
    if amb.size:
        ra = rows[amb]
        s, dv = _eval_bound(take_rows(st.V, ra), take_rows(st.R, ra), take_rows(w, amb), e[amb])
        sg = _float_signs(s, dv)
        pos[amb] = last_any((sg == 1) | (sg == 2))
        neg[amb] = last_any((sg == -1) | (sg == 2))
    return pos, neg


#: Entries per chunk of the disc test in :func:`_sides` (its temporaries stay in cache).
_SIDES_CHUNK = 1 << 14


def _sides(eng, Af: np.ndarray, err: np.ndarray, hb: np.ndarray):
    """Per parent and unit: may the unit take values > 0 (pos) and < 0 (neg) on the exact polygon? Third: the
    units that may cross a parent where they are few (the others are whole), else None.

    A disc test (value at an interior point against the gradient times the radius, with every error
    bound added) settles most pairs; the vertices are evaluated only for the pairs whose line may pass
    through the polygon, an undecided vertex counting as both signs (the rounds then decide it exactly). Units of
    one sign on the whole square (:func:`_whole_units`) skip both.
    """
    R0, _, D = Af.shape
    whole_pos, whole_neg = _whole_units(Af, err)
    whole = whole_pos | whole_neg
    todo = np.flatnonzero(~whole)
    if 2 * todo.size > D:
        # most units left: every unit per parent, then the whole ones overwritten (each pair's test is its own, so
        # the others get what a test of those alone gives), rather than a copy of most of the maps
        pos, neg = _sides_per_parent(eng, Af, err, hb)
        if todo.size < D:
            pos[:, whole], neg[:, whole] = whole_pos[whole], whole_neg[whole]
        return pos, neg, None
    pos = np.broadcast_to(whole_pos, (R0, D)).copy()
    neg = np.broadcast_to(whole_neg, (R0, D)).copy()
    if todo.size:
        pos[:, todo], neg[:, todo] = _sides_per_parent(eng, Af[:, :, todo], err[todo], hb[todo])
    return pos, neg, todo


#: Parents in the first block :func:`_whole_units` reads; each later block is :data:`_WHOLE_GROWTH` times larger.
_WHOLE_PROBE = 64
_WHOLE_GROWTH = 8


def _whole_units(Af: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Units ``(D,)`` positive (first) or negative (second) on the whole square for every parent at once.

    Every polygon lies in the square ``|c_i| <= 1``, so a unit's exact value there is at least ``min a2 - max|a0|
    - max|a1| - 3 err`` (extremes over the parents; ``err`` bounds each coefficient's distance from the exact
    one), and at most ``max a2 + max|a0| + max|a1| + 3 err``; the two float operations that form each bound round
    by at most ``EPS`` of the magnitudes they add, each. Settles with a few reductions the units that never reach
    their kink on the domain (the clipping ReLUs of a compiled Transformer's feed-forward blocks), which the
    per-parent test would visit one parent at a time. The parents are read in blocks of growing size
    (:data:`_WHOLE_PROBE` first), keeping each unit's running extremes: more parents only widen the extremes, so a
    unit that a block's parents already leave unproven is dropped and not read again (a deep MLP's last layers
    have a few units that survive the first parents but not all of them). The extremes of the units that survive
    every block are those over all parents: the result does not depend on the blocks."""
    R0, _, D = Af.shape
    pos, neg = np.zeros(D, bool), np.zeros(D, bool)
    if R0 == 0:
        return pos, neg
    cand = np.arange(D)
    lo = np.full((3, D), np.inf)
    hi = np.full((3, D), -np.inf)
    start, size = 0, _WHOLE_PROBE
    while start < R0:
        a = Af[start : start + size]
        if cand.size < D:
            a = a[:, :, cand]
        np.minimum(lo, a.min(axis=0), out=lo)  # (3, units): two passes over the rows as they lie in memory
        np.maximum(hi, a.max(axis=0), out=hi)
        start, size = start + size, size * _WHOLE_GROWTH
        a2lo, a2hi = lo[2], hi[2]
        m = np.maximum(hi[0], -lo[0])
        m += np.maximum(hi[1], -lo[1])
        slack = (3 * err[cand] + 4 * EPS * (np.maximum(np.abs(a2lo), np.abs(a2hi)) + m)) * (1 + 1e-9) + TINY
        p, n = a2lo - m > slack, a2hi + m < -slack
        keep = p | n
        if not keep.all():
            cand, lo, hi, p, n = cand[keep], lo[:, keep], hi[:, keep], p[keep], n[keep]
        if cand.size == 0:
            return pos, neg
    pos[cand], neg[cand] = p, n
    return pos, neg


def _sides_per_parent(eng, Af: np.ndarray, err: np.ndarray, hb: np.ndarray):
    """:func:`_sides` one parent and unit at a time (a disc test, then the vertices)."""
    st = eng.st
    R0, _, D = Af.shape
    pos = np.empty((R0, D), bool)
    neg = np.empty((R0, D), bool)
    amb_p, amb_j = [], []
    # |c| <= 1 for every centre (they lie in the square), so the rounding of the value at the centre and
    # the error of its coefficients are bounded per unit
    k0 = (gamma(3) * hb + 3 * err) * (1 + 1e-9) + TINY  # hb bounds |a1| + |a2| + |a0|
    e2 = 2 * err + NORM_SLACK
    # small chunks: the dozen passes over each stay in cache
    step = max(1, _SIDES_CHUNK // max(1, D))
    c1 = np.empty((step, 3))
    c1[:, 2] = 1.0
    for lo in range(0, R0, step):
        sl = slice(lo, min(R0, lo + step))
        ctr, rad = st.cen[sl], st.rad[sl]
        a = Af[sl]
        c = c1[: a.shape[0]]
        c[:, :2] = ctr
        # (a0 c0 + a1 c1) + a2 * 1, and the norm a0^2 + a1^2 (_norm), each as one contraction over the coefficient
        # axis: in any order of its two or three terms, within the bounds in k0, e2 and the factor (Higham 2002,
        # Thm 3.1); NumPy's loops add them in the order written (the same floats as the products written out)
        sc = np.einsum("rcd,rc->rd", a, c)
        with np.errstate(over="ignore"):  # a square that overflows gives inf: a looser bound, as in _norm
            reach = np.einsum("rcd,rcd->rd", a[:, :2], a[:, :2])
        np.sqrt(reach, out=reach)
        reach += e2
        reach *= rad[:, None] * (1 + 20 * EPS)
        reach += k0
        p = sc > reach
        amb = np.abs(sc) <= reach  # neither side proven (no NaN: the engine raises on invalid values)
        pos[sl] = p
        np.logical_not(p | amb, out=neg[sl])
        q, j = nonzero2(amb)
        amb_p.append(q + lo)
        amb_j.append(j)
    p, j = np.concatenate(amb_p), np.concatenate(amb_j)
    step = max(1, _CHUNK // (8 * st.M))
    for lo in range(0, p.size, step):
        q, k = p[lo : lo + step], j[lo : lo + step]
        s, dv = _eval_bound(take_rows(st.V, q), take_rows(st.R, q), take_lines(Af, q, k), err[k])
        sg = _float_signs(s, dv)
        pos[q, k] = last_any((sg == 1) | (sg == 2))
        neg[q, k] = last_any((sg == -1) | (sg == 2))
    return pos, neg


def _relu_round(eng, cand, w, e, j, newtag):
    """Split the regions ``cand`` by the lines ``w (n, 3)`` (unit ``j (n,)``, coefficient error ``e (n,)``)."""
    st = eng.st
    # disc test first: only regions whose enclosing disc meets the line need their vertices
    sc, reach = _disc_reach(take_rows(st.cen, cand), st.rad[cand], w, e)
    one = sc > reach
    near = np.flatnonzero(np.abs(sc) <= reach)
    rows_n = cand[near]
    # only as many slots as the widest of these polygons needs (the rest repeat the first vertex)
    Mloc = int(st.nv[rows_n].max(initial=2)) + 1
    V, Rv = take_rows(st.V, rows_n, Mloc), take_rows(st.R, rows_n, Mloc)
    tg_n = take_rows(st.tag, rows_n, Mloc)
    nv_n = st.nv[rows_n]
    wn, en = take_rows(w, near), e[near]
    s, dv = _eval_bound(V, Rv, wn, en)
    sg = eng.decide(_float_signs(s, dv), tg_n, nv_n, wn, en, newtag[near])
    haspos = last_max(sg) > 0  # decided signs: -1, 0, 1
    split = haspos & (last_min(sg) < 0)
    one[near[haspos & ~split]] = True
    idx = np.flatnonzero(split)
    if idx.size:
        rows = rows_n[idx]
        nt = newtag[near[idx]]
        eng.register(nt, take_rows(wn, idx), en[idx])
        (Vp, np_, tp, Rp), (Vm, nm, tm, Rm) = eng.cut(
            *(take_rows(a, idx) for a in (V, nv_n, s, sg, tg_n)), nt, take_rows(dv, idx), take_rows(Rv, idx)
        )
        one[near[idx]] = True
        st.set_rows(rows, Vp, np_, tp, Rp)
        st.append(Vm, nm, tm, Rm, rows)
    on = np.flatnonzero(one)
    jo = j[on]
    st.extra["bits"][cand[on], jo >> 3] |= (1 << (7 - (jo & 7))).astype(np.uint8)
    return int(idx.size)


def set_bits(bits: np.ndarray, rows: np.ndarray, units: np.ndarray):
    """Set bit ``units[i]`` of packed row ``rows[i]`` of ``bits`` for every pair; a row may have several pairs, some
    in one byte. Pairs sorted by (row, byte), as the lists give them, are OR-ed per byte first and written once each;
    otherwise an unbuffered ``bitwise_or.at`` (several times slower)."""
    if rows.size == 0:
        return
    byte = units >> 3
    val = (1 << (7 - (units & 7))).astype(np.uint8)
    key = rows * bits.shape[1] + byte
    if key.size > 1 and not np.all(key[1:] >= key[:-1]):
        np.bitwise_or.at(bits, (rows, byte), val)
        return
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    bits[rows[start], byte[start]] |= np.bitwise_or.reduceat(val, start)


def _reown(eng, Af, err, cnt, first, jj, t: int):
    """Make every region the owner of the units left (from position ``t``) in its owner's list that
    may cross it; set the bits of those it lies on the positive side of. Returns the new lists
    ``(cnt, first, jj)`` per region."""
    st = eng.st
    n = st.n
    own, anc = st.extra["own"][:n], st.anc[:n]
    rem = np.maximum(cnt[own] - t, 0)
    r = np.repeat(np.arange(n), rem)
    k = np.repeat(first[own] + t - np.cumsum(rem) + rem, rem) + np.arange(r.size)
    j = jj[k]
    keep = np.zeros(r.size, bool)
    step = max(1, _CHUNK // (2 * st.M))
    for lo in range(0, r.size, step):
        rs, js = r[lo : lo + step], j[lo : lo + step]
        pos, neg = _classify(eng, rs, take_lines(Af, anc[rs], js), err[js])
        keep[lo : lo + step] = pos & neg
        on = np.flatnonzero(pos & ~neg)
        set_bits(st.extra["bits"], rs[on], js[on])
    r, j = where_rows(keep, r, j)
    cnt = np.bincount(r, minlength=n)
    st.extra["own"][:n] = np.arange(n)
    return cnt, np.cumsum(cnt) - cnt, j
