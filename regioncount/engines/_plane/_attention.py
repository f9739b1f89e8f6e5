"""The plane engine's hardmax attention splitter.

Per head and query, the argmax cells of the scores over the keys. Scores are products of affine maps, so a score
difference is quadratic in ``u``; where the quadratic parts of the competing keys coincide (within a relative
tolerance) the boundaries are lines and are split exactly (:mod:`._argmax`), otherwise
:class:`~regioncount._errors.CurvedBoundaryError` is raised."""

from __future__ import annotations

import numpy as np

from ..._errors import CurvedBoundaryError
from ..._predicates import EPS, INEXACT_G, TINY, ZERO_G, affine_bounds, finite_or_raise, gamma, sum_bounds
from ...networks._ops import Attention
from ._affine_op import tightened
from ._argmax import argmax_start, argmax_unit
from ._kernels import KERNELS, splitter
from ._maps import _Bounds, _run_as_slice, _Tokens
from ._polygon import _CHUNK


@KERNELS.register("attention/hardmax")
@splitter
def split_attention(eng, op: Attention, A: np.ndarray, bd: _Bounds):
    """Hardmax attention: per head and query, the argmax cells of the scores over the keys (module docstring)."""
    st = eng.st
    R0, _, T, d = A.shape
    H = op.heads
    # the columns a query, key or value reads: every use of the bounds below is a product with those weights' magnitudes
    reads = np.flatnonzero(
        np.any(op.Wq != 0, axis=(0, 2)) | np.any(op.Wk != 0, axis=(0, 2)) | np.any(op.Wv != 0, axis=(0, 2))
    )
    bd = tightened(A, bd, reads)
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    U = H * T
    F = np.zeros((R0, U, 3, T))  # affine part of the scores of query (h, i) over keys
    quad = np.zeros((R0, U, 3, T))  # quadratic part: u1^2, u1 u2, u2^2
    eF = np.zeros((1, U, T))  # bound on the error of every coefficient of F and quad
    flat = np.zeros((1, U, T), bool)  # quad is exactly zero (query or key constant on the domain)
    mF = np.zeros((1, U, T))  # bound on the 1-norm of those coefficients
    VO = np.zeros((H, R0, 3, T, d))
    heads_bd = []
    for h in range(H):
        Wq, Wk, Wv, Wo = op.Wq[h], op.Wk[h], op.Wv[h], op.Wo[h]
        Q = A @ Wq  # (R0, 3, T, dk)
        K = A @ Wk
        VO[h] = (A @ Wv) @ Wo
        dk = Wq.shape[1]
        qa, qe, qg = affine_bounds(bd.hb, bd.eb, bd.ge, Wq.T, np.zeros(dk))
        ka, ke, kg = affine_bounds(bd.hb, bd.eb, bd.ge, Wk.T, np.zeros(dk))
        va, ve, vg = affine_bounds(bd.hb, bd.eb, bd.ge, Wv.T, np.zeros(Wv.shape[1]))
        oa, oe, og = affine_bounds(va, ve, vg, Wo.T, np.zeros(d))
        heads_bd.append(
            (oa.max(axis=0), oe.max(axis=0), og.min(axis=0), (bd.u_bound() @ np.abs(Wv) @ np.abs(Wo)).max(axis=0))
        )
        # scores whose query or key has no u coefficients at all have no quadratic part, exactly
        flat[0, h * T : (h + 1) * T] = (bd.u_bound() @ np.abs(Wq)) @ (bd.u_bound() @ np.abs(Wk)).T == 0
        C = np.einsum("raie,rbje->rijab", Q, K)  # (R0, T, T, 3, 3)
        sa = qa @ ka.T  # (T, T): bound on the 1-norm of the coefficients of S_ij
        err = 2 * (qe @ (ka + ke).T + qa @ ke.T) + gamma(2 * dk + 1) * sa + TINY
        both = (qg[:, None, :] < ZERO_G) & (kg[None, :, :] < ZERO_G)
        g = np.where(both, qg[:, None, :] + kg[None, :, :], ZERO_G).min(axis=2, initial=ZERO_G)
        exact = (qe.max(axis=1)[:, None] == 0) & (ke.max(axis=1)[None, :] == 0)
        exact &= (qg.min(axis=1)[:, None] > INEXACT_G) & (kg.min(axis=1)[None, :] > INEXACT_G)
        exact &= sa < np.ldexp(1.0, np.clip(53 + g, -1074, 1023))
        exact |= sa == 0
        queries = slice(h * T, (h + 1) * T)
        F[:, queries] = np.stack([C[..., 0, 2] + C[..., 2, 0], C[..., 1, 2] + C[..., 2, 1], C[..., 2, 2]], axis=2)
        quad[:, queries] = np.stack([C[..., 0, 0], C[..., 0, 1] + C[..., 1, 0], C[..., 1, 1]], axis=2)
        eF[0, queries] = np.where(exact, 0.0, err)
        mF[0, queries] = sa
    finite_or_raise(eF, mF, what="the attention scores")
    act = np.broadcast_to(np.tile(allowed, (H, 1))[None], (R0, U, T)).copy()
    # Queries whose scores, error bounds and allowed keys are identical on every parent (e.g. a head
    # whose query does not depend on the token) make identical decisions: only the first of each
    # class is decided, the others copy its digit column (every later split copies rows whole).
    rep = _same_units(F, quad, eF, mF, act)
    first = np.flatnonzero(rep == np.arange(U))
    Fr, quad_r, act_r = F[:, first], quad[:, first], act[:, first]
    eF_r, mF_r = eF[:, first], mF[:, first]
    if not bd.same_u and not np.all(flat[:, first] | ~np.any(act_r, axis=0, keepdims=True)):
        _check_curvature(eng, Fr, quad_r, eF_r, mF_r, act_r, first, flat[:, first])
    act[:, first] = act_r
    act = act[:, rep]
    win = argmax_start(eng, Fr, eF_r, act_r)
    info = {"op": op, "T": T}
    dt = np.uint8 if T <= 256 else np.int32
    col = np.searchsorted(first, rep)  # column of each query's class in Fr, win
    st.add_extra("digits", np.maximum(win, 0).astype(dt)[:, col])
    for u in np.flatnonzero(np.any(win < 0, axis=0)[col]):
        k = int(col[u])
        if rep[u] == u:
            argmax_unit(eng, int(u), Fr[:, k], eF_r[:, k], act_r[:, k], win[:, k], R0, "attention", info)
        else:
            eng.take_tags(R0 * T * (T - 1) // 2)  # the tags its cuts would have had: none are made
    st.sort_by_parent()
    st.extra["digits"][: st.n] = st.extra["digits"][: st.n][:, rep]
    digits = st.extra["digits"][: st.n].astype(np.int64)
    anc = st.anc[: st.n]
    R = st.n
    # query tokens whose every head falls in the same classes get the same output, summed in the same
    # order: it is computed once, for the first of them, and kept unexpanded (see _Tokens)
    sig: dict[tuple, int] = {}
    cls = [sig.setdefault(tuple(rep[h * T + i] for h in range(H)), len(sig)) for i in range(T)]
    firsts = [cls.index(c) for c in range(len(sig))]
    parts = [np.zeros((R, 3, d)) for _ in firsts]
    hb_o, eb_o, ge_o, hu_o = np.zeros(d), np.zeros(d), np.full(d, ZERO_G), np.zeros(d)
    written = [np.flatnonzero(np.any(op.Wo[h] != 0, axis=0)) for h in range(H)]
    # the columns any head writes: the others stay +0 in every part (a residual adds only these, see _Tokens)
    union = np.flatnonzero(np.any(op.Wo != 0, axis=(0, 1)))
    span = _run_as_slice(union)
    for h in range(H):
        done: dict[int, np.ndarray] = {}
        averaged = False
        for c, i in enumerate(firsts):
            u = h * T + i
            if rep[u] not in done:
                # A region's head output depends only on its parent and its winner: build it once per
                # (parent, winner) and look it up per region.
                G = np.empty((T, R0, 3, d))
                for j in range(T):
                    # keys whose score equals the winner's identically are tied: hardmax averages them
                    no_quad = bd.same_u or bool(np.all(flat[0, u]))
                    tied = act[:, u] & _identical_scores(eng, F[:, u], quad[:, u], j, eF[0, u], no_quad)
                    averaged |= bool(np.any(tied.sum(axis=1) > 1))
                    with np.errstate(invalid="ignore", divide="ignore"):  # j not allowed: never a winner
                        wts = tied / tied.sum(axis=1, keepdims=True)
                    G[j] = np.einsum("rj,rcjd->rcd", wts, VO[h])
                done[rep[u]] = G.reshape(T * R0, 3, d)
            # in row chunks: a gathered copy of every region's head output would be a fresh array of the
            # size of the result for every head (memory the system must map and zero each time). Only the
            # columns the head's output projection writes: the others are exact zeros, and a sum that starts
            # at +0 is never -0, so adding a zero to it changes no bit (a head of the Thm 4.4 construction
            # writes one column of 40)
            cols = _run_as_slice(written[h])
            src, idx = np.ascontiguousarray(done[rep[u]][:, :, cols]), digits[:, u] * R0 + anc
            step = max(1, _CHUNK // max(1, 3 * src.shape[2]))
            for lo in range(0, R, step):
                parts[c][lo : lo + step, :, cols] += np.take(src, idx[lo : lo + step], axis=0)
        oa, oe, og, ou = heads_bd[h]
        if averaged:  # a mean of tied value rows: rounding, and no granularity to speak of
            oe = oe + gamma(T + 2) * oa + TINY
            og = np.full(d, INEXACT_G)
        hb_o, eb_o, ge_o = sum_bounds(hb_o, eb_o, ge_o, oa, oe, og)
        hu_o = hu_o + ou
    hb_t, eb_t, ge_t, hu_t = (np.broadcast_to(x, (T, d)).copy() for x in (hb_o, eb_o, ge_o, hu_o))
    bd_out = _Bounds(hb_t, eb_t, ge_t, hu=hu_t)
    bd_out.check_finite()
    return (
        _Tokens(parts, cls, [span] * len(parts) if union.size < d else None),
        ("digits", U, st.extra["digits"][: st.n].copy()),
        bd_out,
    )


def _identical_scores(eng, Fu, qu, j: int, e, same_u: bool) -> np.ndarray:
    """``(R0, T)``: is key ``i``'s score polynomial identical to key ``j``'s (``Fu, qu (R0, 3, T)``, errors
    ``e (T,)``)? Decided by the bounds where they can; equal floats whose bounds are not zero are taken
    as equal and counted in ``n_assumed``; unequal floats within their bounds are refused."""
    dF = np.abs(Fu - Fu[:, :, j, None])
    bound = (e + e[j]) * (1 + 16 * EPS) + TINY + EPS * dF
    differ = np.any(dF > bound, axis=1)
    same_f = np.all(dF == 0, axis=1)
    if not same_u:
        dQ = np.abs(qu - qu[:, :, j, None])
        differ |= np.any(dQ > (e + e[j]) * (1 + 16 * EPS) + TINY + EPS * dQ, axis=1)
        same_f &= np.all(dQ == 0, axis=1)
    proven = same_f & (e == 0) & (e[j] == 0)
    unsure = ~differ & ~proven
    if np.any(unsure & ~same_f):
        eng._refuse("whether two attention keys tie")
    eng.n_assumed += int(np.sum(unsure & same_f & (np.arange(Fu.shape[2]) != j)))
    return ~differ


def _check_curvature(eng, F, quad, eF, mF, act, units, flat):
    """Where the competing keys' quadratic parts differ, drop keys provably beaten on the whole
    polygon; if curved rivals remain, the boundary is a quadric: refuse. ``units[u]`` is the query
    index (h T + i) of column ``u``."""
    st = eng.st
    R0, U, _, T = F.shape
    ref = np.argmax(act, axis=-1)  # first allowed key
    qref = np.take_along_axis(quad, ref[:, :, None, None], -1)
    eref = np.take_along_axis(np.broadcast_to(eF, act.shape), ref[:, :, None], -1)
    dq = np.abs(quad - qref)
    bound = (eF[:, :, None, :] + eref[:, :, :, None]) * (1 + 16 * EPS) + TINY + EPS * dq
    certain = np.any(dq > bound, axis=2)
    equal_f = np.all(dq == 0, axis=2)
    flat_ref = np.take_along_axis(np.broadcast_to(flat, act.shape), ref[:, :, None], -1)
    proven_equal = (equal_f & (eF == 0) & (eref == 0)) | (flat & flat_ref)
    unsure = act & ~certain & ~proven_equal
    if np.any(unsure & ~equal_f):
        eng._refuse("whether an attention boundary is straight")
    eng.n_assumed += int(np.sum(unsure))
    curved = np.any(act & certain, axis=-1)  # (R0, U)
    if not curved.any():
        return
    rr, uu = np.nonzero(curved)
    V, Rv = st.V[rr], st.R[rr]
    rmax = Rv.max(axis=1)
    lo, hi = V.min(axis=1) - rmax[:, None], V.max(axis=1) + rmax[:, None]  # boxes holding the exact polygons
    Vh = np.concatenate([V, np.ones(V.shape[:2] + (1,))], -1)
    lin = np.einsum("nmc,ncj->nmj", Vh, F[rr, uu])  # (n, M, T)
    q = quad[rr, uu]  # (n, 3, T)
    x, y = V[..., 0], V[..., 1]
    qv = (x * x)[..., None] * q[:, None, 0] + (x * y)[..., None] * q[:, None, 1] + (y * y)[..., None] * q[:, None, 2]
    ctr_val = (lin + qv).mean(axis=1)
    a = act[rr, uu]
    best = np.argmax(np.where(a, ctr_val, -np.inf), axis=1)
    # lower bound of S_best - S_j over the polygon: the affine part at the vertices (moved by at most the
    # gradient times the vertex radius) plus an interval bound of the quadric, less every error bound
    dF = np.take_along_axis(F[rr, uu], best[:, None, None], -1) - F[rr, uu]  # (n, 3, T)
    dlin = np.take_along_axis(lin, best[:, None, None], -1) - lin
    dlin_low = dlin.min(axis=1) - (np.abs(dF[:, 0]) + np.abs(dF[:, 1])) * rmax[:, None]
    dq_ = np.take_along_axis(q, best[:, None, None], -1) - q  # (n, 3, T)
    terms = _interval_products(lo, hi)  # (n, 3, 2): ranges of u1^2, u1 u2, u2^2
    qlow = np.sum(np.minimum(dq_ * terms[:, :, :1], dq_ * terms[:, :, 1:]), axis=1)
    scale = (1 + np.abs(lo).max(axis=1) + np.abs(hi).max(axis=1))[:, None] ** 2
    e_n = eF[0, uu]  # (n, T)
    e_b = np.take_along_axis(e_n, best[:, None], 1)
    m_n = mF[0, uu]
    m_b = np.take_along_axis(m_n, best[:, None], 1)
    slack = (6 * (e_n + e_b) + gamma(16) * (m_n + m_b)) * scale + TINY
    beaten = a & (dlin_low + qlow > slack)
    act[rr, uu] = a & ~beaten
    qbest = np.take_along_axis(q, best[:, None, None], -1)
    eq = eF[0, uu][:, None, :] + e_b[:, None, :]
    rival = act[rr, uu] & np.any(np.abs(q - qbest) > eq * (1 + 16 * EPS) + TINY + EPS * np.abs(q - qbest), axis=1)
    if rival.any():
        n = int(np.flatnonzero(rival.any(axis=1))[0])
        u = int(units[uu[n]])
        j = int(np.flatnonzero(rival[n])[0])
        raise CurvedBoundaryError(
            f"hardmax attention (head {u // T}, query {u % T}): the boundary between keys {int(best[n])} and "
            f"{j} is curved (a quadric) on this domain, and the plane engine only splits along lines; "
            "use --method line (exact along segments) or --method sample"
        )


def _same_units(F, quad, tol, ctol, act) -> np.ndarray:
    """For each query ``u`` of ``F, quad (R0, U, 3, T)``, ``tol, ctol (1, U, T)``, ``act (R0, U, T)``: the
    smallest ``v`` whose scores, tolerances and allowed keys equal ``u``'s exactly on every parent."""
    U = F.shape[1]
    rep = np.arange(U)
    arrays = (F, quad, tol, ctol, act)
    seen: dict[tuple, list[int]] = {}
    for u in range(U):
        # a hash of the bytes finds the candidates; equality is then checked exactly
        key = tuple(hash(np.ascontiguousarray(a[:, u]).tobytes()) for a in arrays)
        for v in seen.get(key, []):
            if all(np.array_equal(a[:, u], a[:, v]) for a in arrays):
                rep[u] = v
                break
        else:
            seen.setdefault(key, []).append(u)
    return rep


def _interval_products(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Ranges of ``u1^2, u1 u2, u2^2`` over boxes ``[lo, hi]`` (``(n, 2)`` each) -> ``(n, 3, 2)``."""

    def sq(a, b):
        m = np.where((a <= 0) & (b >= 0), 0.0, np.minimum(a * a, b * b))
        return m, np.maximum(a * a, b * b)

    s1 = sq(lo[:, 0], hi[:, 0])
    s2 = sq(lo[:, 1], hi[:, 1])
    p = np.stack([lo[:, 0] * lo[:, 1], lo[:, 0] * hi[:, 1], hi[:, 0] * lo[:, 1], hi[:, 0] * hi[:, 1]])
    s12 = (p.min(axis=0), p.max(axis=0))
    return np.stack([np.stack(s1, -1), np.stack(s12, -1), np.stack(s2, -1)], axis=1)
