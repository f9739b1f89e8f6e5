"""The space engine's hardmax attention kernel: per head and query, the argmax cells of the scores over the keys,
where score differences are affine on the regions (:class:`CurvedBoundaryError` where they are not)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..._errors import CurvedBoundaryError
from ...networks._ops import Attention
from ._argmax import _argmax_unit
from ._kernels import KERNELS, _splitter
from ._predicates import _U, SNAP, _gamma

if TYPE_CHECKING:
    from ._driver import _Engine


def _same_units(F, quad, act) -> np.ndarray:
    """For each query ``u`` of ``F (R0, U, k+1, T)``: the smallest ``v`` with bitwise the same scores and keys."""
    U = F.shape[1]
    rep = np.arange(U)
    seen: dict[tuple, list[int]] = {}
    for u in range(U):
        key = tuple(hash(np.ascontiguousarray(a[:, u]).tobytes()) for a in (F, quad, act))
        for v in seen.get(key, []):
            if all(np.array_equal(a[:, u], a[:, v]) for a in (F, quad, act)):
                rep[u] = v
                break
        else:
            seen.setdefault(key, []).append(u)
    return rep


def attention(eng: _Engine, A: np.ndarray, op: Attention):
    st = eng.st
    R0, c1, T, d = A.shape
    k = c1 - 1
    H = op.heads
    allowed = np.tril(np.ones((T, T), bool)) if op.causal else np.ones((T, T), bool)
    U = H * T
    F = np.zeros((R0, U, c1, T))
    quad = np.zeros((R0, U, k, k, T))
    VO = np.zeros((H, R0, c1, T, d))
    # error bounds (see run): of the scores' affine parts per query and key, and of the outputs
    eF, hF = np.zeros((U, T)), np.zeros((U, T))
    E_att, hb_att = np.zeros(d), np.zeros(d)

    def lin(E: np.ndarray, hb: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        aW = np.abs(W)
        e = E @ aW + _gamma(W.shape[0] + 1) * (hb @ aW)
        return e, hb @ aW + e

    for h in range(H):
        eQ, hQ = lin(eng.E, eng.hb, op.Wq[h])
        eK, hK = lin(eng.E, eng.hb, op.Wk[h])
        dk = op.Wq[h].shape[1]
        ef = 2 * (eQ @ hK.T + hQ @ eK.T + eQ @ eK.T) + 2 * _gamma(2 * dk + 2) * (hQ @ hK.T)
        eF[h * T : (h + 1) * T], hF[h * T : (h + 1) * T] = ef, 2 * hQ @ hK.T + ef
        eV, hV = lin(*lin(eng.E, eng.hb, op.Wv[h]), op.Wo[h])
        E_att += eV.max(axis=0) + (T + 2 + H) * _U * hV.max(axis=0)
        hb_att += hV.max(axis=0)
        Q = A @ op.Wq[h]  # (R0, c1, T, dk)
        K = A @ op.Wk[h]
        VO[h] = (A @ op.Wv[h]) @ op.Wo[h]
        C = np.einsum("raie,rbje->rijab", Q, K)  # (R0, T, T, c1, c1)
        u = slice(h * T, (h + 1) * T)
        F[:, u, :k] = (C[..., :k, k] + C[..., k, :k]).transpose(0, 1, 3, 2)
        F[:, u, k] = C[..., k, k]
        qq = C[..., :k, :k]
        quad[:, u] = (qq + np.swapaxes(qq, -1, -2)).transpose(0, 1, 3, 4, 2)
    act = np.broadcast_to(np.tile(allowed, (H, 1))[None], (R0, U, T)).copy()
    ref = np.argmax(act, axis=-1)
    qref = np.take_along_axis(quad, ref[:, :, None, None, None], -1)
    if np.any(act[:, :, None, None, :] & (quad != qref)):
        rr, uu = np.nonzero(np.any(act[:, :, None, None, :] & (quad != qref), axis=(2, 3, 4)))
        raise CurvedBoundaryError(
            f"hardmax attention (head {int(uu[0]) // T}, query {int(uu[0]) % T}): the score differences are "
            "quadratic (curved boundaries) on this domain, and the space engine only splits along hyperplanes; "
            "use --method line (exact along segments) or --method sample"
        )
    rep = _same_units(F, quad, act)
    fam = eng.family(R0 * U * (T * (T - 1) // 2), "argmax", U=U, P=T * (T - 1) // 2, k=T)
    st.add_extra("digits", np.zeros((R0, U), np.int32))
    for uq in range(U):
        if rep[uq] == uq:
            _argmax_unit(eng, uq, F[:, uq], act[:, uq], fam, eF[uq], hF[uq])
    st.extra["digits"][: st.n] = st.extra["digits"][: st.n][:, rep]
    st.sort_by_parent()
    dig = st.extra["digits"][: st.n].astype(np.int64)
    anc = st.anc[: st.n]
    R = st.n
    out = np.zeros((R, c1, T, d))
    done: dict[tuple, np.ndarray] = {}  # (head, query class): queries with equal scores share outputs
    for h in range(H):
        VOt = np.ascontiguousarray(VO[h].transpose(0, 2, 1, 3))  # (R0, T, c1, d)
        for i in range(T):
            uq = h * T + i
            key = (h, int(rep[uq]))
            if key not in done:
                # keys whose score equals the winner's identically are tied: hardmax averages them
                Fp = F[anc, uq]  # (R, c1, T)
                Fw = np.take_along_axis(Fp, dig[:, uq, None, None], axis=-1)
                tol = SNAP * (np.abs(Fp).sum(axis=1) + np.abs(Fw).sum(axis=1))
                tied = act[anc, uq] & np.all(np.abs(Fp - Fw) <= tol[:, None, :], axis=1)
                val = VOt[anc, dig[:, uq]]  # (R, c1, d): the winner's value
                many = np.flatnonzero(tied.sum(axis=1) > 1)
                if many.size:
                    wts = tied[many] / tied[many].sum(axis=1, keepdims=True)
                    val[many] = np.einsum("rj,rjcd->rcd", wts, VOt[anc[many]])
                done[key] = val
            out[:, :, i, :] += done[key]
    eng.E = np.broadcast_to(E_att, (T, d)).copy()
    eng.hb = np.broadcast_to(hb_att + E_att, (T, d)).copy()
    return out, ("digits", U, dig.astype(np.uint8 if T <= 256 else np.int32))


KERNELS.register("attention/hardmax")(_splitter(lambda eng, op, A: attention(eng, A, op)))
