"""The space engine's argmax cells (shared by GroupMax and hardmax attention): every region is split into the
cells ``f_r >= f_j`` of its parent's pieces by clipping a copy per piece (ties to the lower index)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._rows import last_any
from ._polytope import _cut
from ._predicates import _U, _Family, _pair_index

if TYPE_CHECKING:
    from ._driver import _Engine


def _argmax_unit(eng: _Engine, u: int, F_u: np.ndarray, act_u: np.ndarray, fam: _Family, eF, hF):
    """Split every region into the argmax cells of its parent's pieces ``F_u (R0, k+1, kk)`` (allowed
    pieces ``act_u (R0, kk)``; ``eF, hF (kk,)`` bounds on the pieces' coefficient errors and sizes) and
    write each region's winner into digit column ``u``."""
    st = eng.st
    # l1 error bound of f_a - f_b for every pair: both errors and the subtraction's rounding
    pair_err = eF[:, None] + eF[None, :] + _U * (hF[:, None] + hF[None, :])
    n = st.n
    anc = st.anc[:n]
    Fa = F_u[anc]
    # regions where one piece beats every other on the whole ball need no geometry
    sc = np.einsum("nk,nkj->nj", st.cen[:n], Fa[:, :-1]) + Fa[:, -1]
    sc = np.where(act_u[anc], sc, -np.inf)
    r0 = np.argmax(sc, axis=1)
    g = np.take_along_axis(Fa, r0[:, None, None], axis=2) - Fa  # (n, k+1, kk)
    low = np.einsum("nk,nkj->nj", st.cen[:n], g[:, :-1]) + g[:, -1]
    ge = pair_err[r0]  # (n, kk)
    low -= (np.sqrt((g[:, :-1] ** 2).sum(axis=1)) + ge) * st.rad[:n, None] * (1 + 1e-9)
    low -= eng._margin(np.abs(g).sum(axis=1), ge)
    beat = (low > 0) | ~act_u[anc]
    beat[np.arange(n), r0] = True
    settled = np.all(beat, axis=1)
    col = st.extra["digits"]
    col[np.flatnonzero(settled), u] = r0[settled]
    cand = np.flatnonzero(~settled)
    step = max(1, 4096 // F_u.shape[2])
    for lo in range(0, cand.size, step):
        _argmax_cells(eng, cand[lo : lo + step], u, F_u, act_u, fam, pair_err)


def _argmax_cells(eng: _Engine, cand, u, F_u, act_u, fam: _Family, pair_err):
    st = eng.st
    kk = F_u.shape[2]
    par_c = st.anc[cand]
    owner = np.repeat(np.arange(cand.size), kk)
    r = np.tile(np.arange(kk), cand.size)
    keep = act_u[par_c].reshape(-1)
    owner, r = owner[keep], r[keep]
    P = st.take(cand[owner])
    for m in range(1, kk):
        j = (r + m) % kk
        pj = par_c[owner]
        live = np.flatnonzero(act_u[pj, j])
        alive = np.ones(owner.size, bool)
        if live.size:
            rl, jl, pl = r[live], j[live], pj[live]
            g = np.concatenate([F_u[pl, :, rl] - F_u[pl, :, jl], pair_err[rl, jl, None]], axis=1)  # f_r - f_j
            a, b = np.minimum(rl, jl), np.maximum(rl, jl)
            # side 0 of a pair's id is f_b - f_a >= 0, so r's cell is on side (r < j)
            fidk = 2 * (fam.base + (pl * fam.U + u) * fam.P + _pair_index(a, b)) + (rl < jl)
            Pl = P.select(live)
            s, sg = eng.signs(Pl, pl, g, fidk)
            haspos = last_any(sg > 0)
            hasneg = last_any(sg < 0)
            allzero = ~haspos & ~hasneg
            al = np.where(allzero, jl > rl, haspos)  # an identical piece: the lower index wins
            alive[live] = al
            clip = np.flatnonzero(al & hasneg)
            if clip.size:
                (Pc,) = _cut(Pl.select(clip), s[clip], sg[clip], g[clip], fidk[clip], sides=(1,))
                P.assign(live[clip], Pc)
        keepm = np.flatnonzero(alive)
        P, owner, r = P.select(keepm), owner[keepm], r[keepm]
    first = np.ones(owner.size, bool)
    first[1:] = owner[1:] != owner[:-1]
    rows = cand[owner[first]]
    st.write(rows, P.select(first))
    st.extra["digits"][rows, u] = r[first]
    if (~first).any():
        new = st.append(P.select(~first), cand[owner[~first]])
        st.extra["digits"][new, u] = r[~first]
