"""The space engine's ReLU kernel: per op-start parent the units whose hyperplane crosses it (ball test,
then the vertices), then rounds: round ``t`` cuts every descendant of a parent by its ``t``-th crossing unit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._rows import last_any, last_sum, nonzero2
from ._kernels import KERNELS, _splitter
from ._polytope import _cut
from ._predicates import _Family
from ._store import _CHUNK, _concat, _size_groups

if TYPE_CHECKING:
    from ._driver import _Engine


def _sides(eng: _Engine, Af: np.ndarray, fam: _Family, werr: np.ndarray):
    """Per parent and unit: does the unit take strictly positive (pos) / negative (neg) values on it?"""
    st = eng.st
    R0, c1, D = Af.shape
    pos = np.empty((R0, D), bool)
    neg = np.empty((R0, D), bool)
    scale = np.abs(Af).sum(axis=1)
    sc = np.einsum("rk,rkd->rd", st.cen[:R0], Af[:, :-1]) + Af[:, -1]
    grad = np.sqrt((Af[:, :-1] ** 2).sum(axis=1)) + werr[None, :]
    reach = grad * st.rad[:R0, None] * (1 + 1e-9) + eng._margin(scale, werr[None, :])
    pos[:], neg[:] = sc > reach, sc < -reach
    p, j = nonzero2(~(pos | neg))
    step = max(1, _CHUNK // max(1, st.M * c1))
    for lo in range(0, p.size, step):
        for g, Mg in _size_groups(st.nv[p[lo : lo + step]], st.M):
            pp, jj = p[lo : lo + step][g], j[lo : lo + step][g]
            V = st.vertices(pp, Mg)  # the vertices only: the slots are read for exact signs alone

            def slots(r, v, pp=pp):
                return st.inc[pp[r], v], st.fid[pp[r]]

            w = np.concatenate([Af[pp, :, jj], werr[jj, None]], axis=1)
            _, sg = eng.vertex_signs(V, st.nv[pp], pp, w, 2 * (fam.base + pp * D + jj), slots)
            pos[pp, jj] = last_any(sg > 0)
            neg[pp, jj] = last_any(sg < 0)
    return pos, neg


def relu(eng: _Engine, A: np.ndarray):
    st = eng.st
    R0, c1, T, d = A.shape
    D = T * d
    Af = A.reshape(R0, c1, D)
    fam = eng.family(R0 * D, "relu", D=D)
    werr = eng.E.reshape(D)
    pos, neg = _sides(eng, Af, fam, werr)
    cross = pos & neg
    st.add_extra("bits", np.packbits(pos & ~neg, axis=1))
    pp, jj = nonzero2(cross)
    cnt = np.bincount(pp, minlength=R0)
    first = np.cumsum(cnt) - cnt
    rounds = max(1, int(cnt.max(initial=1)))
    t = 0
    while True:
        anc = st.anc[: st.n]
        cand = np.flatnonzero(cnt[anc] > t)
        if cand.size == 0:
            break
        par = anc[cand]
        j = jj[first[par] + t]
        w = np.concatenate([Af[par, :, j], werr[j, None]], axis=1)
        _relu_round(eng, cand, par, w, j, 2 * (fam.base + par * D + j))
        t += 1
        if eng.progress is not None:  # within the op: one round per crossing unit (a long op shows)
            eng.progress(eng.done + t / rounds, eng.total)
    st.sort_by_parent()
    par = st.anc[: st.n]
    bits = st.extra["bits"][: st.n].copy()
    mask = np.unpackbits(bits, axis=1, count=D).reshape(-1, 1, T, d)
    out = A[par]
    out *= mask.astype(np.float64)  # by floats: a mixed-type product casts per buffer (the same products)
    return out, ("bits", D, bits)


def _relu_round(eng: _Engine, cand, par, w, j, fid):
    st = eng.st
    k = eng.k
    sc = np.einsum("nk,nk->n", st.cen[cand], w[:, :k]) + w[:, k]
    grad = np.sqrt(last_sum(w[:, :k] ** 2)) + w[:, k + 1]
    reach = grad * st.rad[cand] * (1 + 1e-9) + eng._margin(last_sum(np.abs(w[:, : k + 1])), w[:, k + 1])
    one = sc > reach
    near = np.flatnonzero(np.abs(sc) <= reach)
    step = max(1, _CHUNK // max(1, st.M * (k + 1)))
    for lo in range(0, near.size, step):
        chunk = near[lo : lo + step]
        negs = []
        for g, Mg in _size_groups(st.nv[cand[chunk]], st.M):
            nr = chunk[g]
            rows = cand[nr]

            def slots(r, v, rows=rows):
                return st.inc[rows[r], v], st.fid[rows[r]]

            # the vertices of every near region; the whole polytope only of those the plane splits
            s, sg = eng.vertex_signs(st.vertices(rows, Mg), st.nv[rows], par[nr], w[nr], fid[nr], slots)
            haspos = last_any(sg > 0)
            split = haspos & last_any(sg < 0)
            one[nr[haspos]] = True
            idx = np.flatnonzero(split)
            if idx.size:
                P = st.take(rows[idx], Mg)
                Pp, Pm = _cut(P, s[idx], sg[idx], w[nr[idx]], fid[nr[idx]])
                st.write(rows[idx], Pp, new_slot=P.nf)  # P came from these rows: only the cut's slot is new
                negs.append((g[idx], Pm, rows[idx]))
        if negs:
            # the negative parts are appended in the chunk's order, whatever the groups; each copies its
            # row's bits before this round sets the positive side's
            at = np.argsort(np.concatenate([g for g, _, _ in negs]), kind="stable")
            Pm = _concat([P for _, P, _ in negs])
            st.append(Pm.select(at) if len(negs) > 1 else Pm, np.concatenate([r for _, _, r in negs])[at])
    on = np.flatnonzero(one)
    jo = j[on]
    st.extra["bits"][cand[on], jo >> 3] |= (1 << (7 - (jo & 7))).astype(np.uint8)


# -- argmax cells --------------------------------------------------------------------------------


KERNELS.register("relu")(_splitter(lambda eng, op, A: relu(eng, A)))
