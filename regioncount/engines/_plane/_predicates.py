"""Exact decisions of the plane engine: the table of lines its cuts were made along and the exact sign
tests (from the float lines where those are exact, else from lines recomputed from the weights)."""

from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np

from ..._errors import InexactError
from ..._memory import check_rss
from ..._predicates import (
    EPS,
    TINY,
    int_intersection,
    intersection,
    intersections_bounded,
    vertex_sign,
    vertex_signs_bounded,
)
from ...networks._ops import Program
from .._exact import ExactMap, ExactReplay, exact_scores
from .._rows import nonzero2
from ._maps import _token_column
from ._polygon import _FIRST_TAG, _cut


def _unique_lines(batches: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines of ``batches`` (tags, coefficients ``(n, 3)``, errors) as a table sorted by tag with one row per
    tag: the line first recorded for it, and the largest error recorded, or inf where two recorded lines differ
    (aliased boundaries that are not bitwise the same line)."""
    t = np.concatenate([a for a, _, _ in batches])
    w = np.concatenate([b for _, b, _ in batches])
    e = np.concatenate([c for _, _, c in batches])
    order = np.argsort(t, kind="stable")
    t, w, e = t[order], w[order], e[order]
    first = np.ones(t.size, bool)
    first[1:] = t[1:] != t[:-1]
    idx = np.cumsum(first) - 1
    ut, uw = t[first], w[first]
    ue = np.zeros(ut.size)
    np.maximum.at(ue, idx, e)
    ue[idx[np.any(w != uw[idx], axis=1)]] = np.inf
    return ut, uw, ue


def _merge_lines(old: tuple, new: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two tables of :func:`_unique_lines`, ``new`` recorded after ``old``, as one: the same table as
    :func:`_unique_lines` of all their lines (a tag in both keeps its old line, the larger error, inf where the lines
    differ). Fresh arrays: a table may be held elsewhere (a batch run beside forked ones restores the old one)."""
    ot, ow, oe = old
    nt, nw, ne = new
    k = np.searchsorted(ot, nt)
    hit = k < ot.size
    hit[hit] = ot[k[hit]] == nt[hit]
    if hit.any():
        kh = k[hit]
        oe = oe.copy()
        oe[kh] = np.maximum(oe[kh], ne[hit])
        oe[kh[np.any(ow[kh] != nw[hit], axis=1)]] = np.inf
    miss = ~hit
    km = k[miss]
    return np.insert(ot, km, nt[miss]), np.insert(ow, km, nw[miss], axis=0), np.insert(oe, km, ne[miss])


class _Decisions:
    """The line table and exact decisions the driver (:class:`~._driver._Engine`) inherits. It keeps a
    table of the lines its cuts were made along (tag -> float coefficients and their error), so that a sign
    its float test cannot decide is decided exactly at the vertex where two of them meet."""

    program: Program
    blocks: list
    pos: int

    def __init__(self, program: Program):
        self.program = program
        # the lines of the domain's sides (u2 = -1, u1 = 1, u2 = 1, u1 = -1), exact
        sides = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [1.0, 0.0, 1.0]])
        self._lines: list = [(np.arange(4), sides, np.zeros(4))]
        self._table: tuple | None = None
        self.n_predicates = 0  # vertex sign tests
        self.n_exact = 0  # of which decided in exact arithmetic
        self.n_assumed = 0  # attention identities taken from equal floats (not proven)
        # per op that cuts: the tags it allocated, its leaf position and its parents' codes, so that the exact
        # line of any tag can be recomputed from the weights (see _exact_line)
        self.records: list[dict] = []
        self._rec_starts: list[int] = []
        self.pos = 0  # leaf position of the op being run
        self.M0: ExactMap | None = None  # the exact input map, set by partition_plane
        self._exact_cache: dict = {}
        self._replay: ExactReplay | None = None

    def register(self, tags, w, e):
        """Record that the cuts with ``tags`` were made along lines ``w (n, 3)`` with coefficient error ``e``."""
        if len(tags):
            self._lines.append((np.asarray(tags, np.int64), np.asarray(w, np.float64), np.asarray(e, np.float64)))
            self._table = None

    def _lookup(self, tags):
        """Float coefficients ``(n, 3)`` and error ``(n,)`` of the lines with ``tags``. A tag recorded with two
        different lines (aliased boundaries that are not bitwise the same line) gets error inf."""
        if self._table is None:
            # the first entry is the table so far (sorted, one row per tag); the batches registered since are merged
            # into it, rather than every line sorted again
            table = self._lines[0]
            if len(self._lines) > 1:
                table = _merge_lines(table, _unique_lines(self._lines[1:]))
            self._lines = [table]
            self._table = table
        ut, uw, ue = self._table
        k = np.searchsorted(ut, tags)
        k = np.minimum(k, ut.size - 1)
        if not np.all(ut[k] == tags):
            raise RuntimeError("internal error: an edge's line is missing from the line table")
        return uw[k], ue[k]

    def _refuse(self, what: str):
        raise InexactError(
            f"the plane engine could not decide {what} exactly: the float64 error bounds of this network's maps "
            "are too wide there and its lines are not exact binary fractions; use --method line or --method sample "
            "(lower bound)"
        )

    def decide(self, sg, tags, nv, w, e, wtag):
        """Replace the undecided signs (2) in ``sg (n, M)`` by exact ones. ``tags (n, M)`` are the polygons'
        edge tags, ``nv (n,)`` their vertex counts, ``w (n, 3)``, ``e (n,)`` and ``wtag (n,)`` the line being
        tested (its float coefficients, their error, its tag)."""
        # the valid slots: each row's count, capped by the slots there are (rows never hold more, see _Store)
        self.n_predicates += int(np.minimum(nv, sg.shape[1]).sum())
        check_rss()
        unk = sg == 2
        if not unk.any():
            return sg
        M = sg.shape[1]
        valid = np.arange(M) < nv[:, None]
        rr, jj = nonzero2(unk & valid)
        prev = np.where(jj == 0, nv[rr] - 1, jj - 1)
        t1, t2 = tags[rr, prev], tags[rr, jj]
        l1, e1 = self._lookup(t1)
        l2, e2 = self._lookup(t2)
        lo_t, hi_t = np.minimum(t1, t2), np.maximum(t1, t2)
        # the vertex is where its two edges' lines meet: the tested line's sign there is a 3x3 determinant of
        # the three float lines, decided in floats wherever its bound allows (it does not inherit the vertex
        # radius, which grows along a chain of cuts); exact arithmetic decides the rest
        out = vertex_signs_bounded(l1, e1, l2, e2, w[rr], e[rr])
        left = out == 2
        self.n_exact += int(left.sum())
        # where the three float lines are exact, the float lines themselves decide (one test per distinct
        # vertex and line: a vertex is shared by the polygons around it)
        cheap = left & (e1 == 0) & (e2 == 0) & (e[rr] == 0)
        idx = np.flatnonzero(cheap)
        if idx.size:
            keys = np.concatenate([lo_t[idx, None], hi_t[idx, None], w[rr[idx]].view(np.int64)], axis=1)
            _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            vals = np.array([vertex_sign(l1[idx[f]], l2[idx[f]], w[rr[idx[f]]]) for f in first], np.int8)
            out[idx] = vals[inv.ravel()]
        idx = np.flatnonzero(left & ~cheap)
        if idx.size:
            # lines recomputed exactly from the weights; a tag names a line, not a side, so each row's sign is
            # turned to its own float line's orientation
            t3 = wtag[rr[idx]]
            keys = np.stack([lo_t[idx], hi_t[idx], t3], axis=1)
            uk, inv = np.unique(keys, axis=0, return_inverse=True)
            vals = self._exact_vertex_signs(uk[:, 0], uk[:, 1], uk[:, 2])
            u3, i3 = np.unique(t3, return_inverse=True)
            ref = np.array([self._exact_direction(c) for c in u3.tolist()])[i3.ravel()]
            orient = np.sign(np.sum(ref * w[rr[idx]], axis=1)).astype(np.int8)
            v = vals[inv.ravel()]
            if np.any((orient == 0) & (v != 0)):
                raise RuntimeError("internal error: a tested line has no orientation against its exact line")
            out[idx] = v * orient
        sg[rr, jj] = out
        # padding slots repeat vertex 0
        pr, pc = nonzero2(unk & ~valid)
        sg[pr, pc] = sg[pr, 0]
        return sg

    def _exact_point(self, ta, tb):
        """Float points ``(n, 2)`` at the exact intersections of the lines tagged ``ta`` and ``tb``, and the
        radius ``(n,)`` that holds each exact point: from the float lines by Cramer's rule where its bound
        proves the lines meet (:func:`intersections_bounded`), else the float point nearest the exact one
        (from the float lines where those are exact, else from lines recomputed from the weights)."""
        l1, e1 = self._lookup(ta)
        l2, e2 = self._lookup(tb)
        P, r = intersections_bounded(l1, e1, l2, e2)
        exact_lines = (e1 == 0) & (e2 == 0)
        for n in np.flatnonzero(exact_lines | ~np.isfinite(r)).tolist():
            if exact_lines[n]:
                P[n] = intersection(l1[n], l2[n])
            else:
                P[n] = int_intersection(self._exact_line(int(ta[n])), self._exact_line(int(tb[n])))
            r[n] = np.sqrt(np.sum(P[n] ** 2)) * (2 * EPS) + TINY
        return P, r

    def record(self, kind: str, start: int, count: int, **info):
        """Note that tags ``start .. start + count - 1`` belong to an op of ``kind`` at the current leaf, whose
        parents have the codes in ``self.blocks``."""
        self.records.append(
            dict(kind=kind, start=start, end=start + count, leaf=self.pos, blocks=list(self.blocks), **info)
        )
        self._rec_starts.append(start)

    def _exact_maps(self, rec: dict, p: int, before: int = 0):
        """Exact maps of parent ``p`` of ``rec`` at the start of the leaf ``before`` leaves before its op."""
        key = (id(rec), p, before)
        hit = self._exact_cache.get(key)
        if hit is None:
            check_rss()  # exact maps and lines are cached: measured where the cache grows
            rows = []
            for kind, w, arr in rec["blocks"]:
                row = arr[p]
                rows.append(np.unpackbits(row, count=w) if kind == "bits" else row)
            hit = self.replay().maps_at(rows, rec["leaf"] - before)
            self._exact_cache[key] = hit
        return hit

    def replay(self) -> ExactReplay:
        if self._replay is None:
            if self.M0 is None:
                raise RuntimeError("internal error: the exact input map is not set")
            self._replay = ExactReplay(self.program, self.M0)
        return self._replay

    def _exact_line(self, tag: int) -> tuple[int, ...]:
        """The exact line (integers, up to a positive factor) that the cuts with ``tag`` were made along,
        recomputed from the network's weights and the code of the parent that was cut."""
        if tag < _FIRST_TAG:
            return ((0, 1, 1), (1, 0, -1), (0, 1, -1), (1, 0, 1))[tag]
        key = ("line", tag)
        if key in self._exact_cache:
            return self._exact_cache[key]
        i = bisect.bisect_right(self._rec_starts, tag) - 1
        rec = self.records[i]
        if not rec["start"] <= tag < rec["end"]:
            raise RuntimeError("internal error: a tag belongs to no op")
        off = tag - rec["start"]
        if rec["kind"] == "relu":
            p, j = divmod(off, rec["D"])
            prev = self.replay().affine_before(rec["leaf"])
            if prev is None:
                M = self._exact_maps(rec, p)
                line = tuple(int(v) for v in M.N.reshape(3, -1)[:, j])
            else:
                # the ReLU reads an affine op: only unit j's column of it is needed, not the whole product
                M = self._exact_maps(rec, p, before=1)
                t, jj = divmod(j, prev.W.shape[0])
                col = _token_column(M, prev, t, jj)
                line = tuple(int(v) for v in col.N[:, 0, 0])
        else:
            pair, p = divmod(off, rec["R0"])
            b = int((1 + np.sqrt(1 + 8 * pair)) // 2)
            while b * (b - 1) // 2 > pair:
                b -= 1
            while (b + 1) * b // 2 <= pair:
                b += 1
            a = pair - b * (b - 1) // 2
            prev = self.replay().affine_before(rec["leaf"]) if rec["kind"] == "groupmax" else None
            if prev is not None:
                # the group max reads an affine op: only pieces a and b of unit u are needed
                k, u = rec["k"], rec["u"]
                M = self._exact_maps(rec, p, before=1)
                d = prev.W.shape[0]
                cols = []
                for piece in (a, b):
                    t, jj = divmod(u * k + piece, d)
                    cols.append(_token_column(M, prev, t, jj))
                diff = cols[0] + ExactMap(-cols[1].N, cols[1].s)
                line = tuple(int(v) for v in diff.N[:, 0, 0])
            elif rec["kind"] == "groupmax":
                M = self._exact_maps(rec, p)
                k, u = rec["k"], rec["u"]
                N = M.N.reshape(3, -1, k)[:, u]
                line = tuple(int(x) - int(y) for x, y in zip(N[:, a], N[:, b], strict=True))
            else:  # attention: query u = h T + i, keys a and b
                M = self._exact_maps(rec, p)
                op, T, u = rec["op"], rec["T"], rec["u"]
                h, i = divmod(u, T)
                skey = ("scores", id(rec), p, h)
                hit = self._exact_cache.get(skey)
                if hit is None:
                    hit = exact_scores(M, op.Wq[h], op.Wk[h])
                    self._exact_cache[skey] = hit
                F, Q2, _ = hit
                if any(Q2[c, i, a] != Q2[c, i, b] for c in range(3)):
                    self._refuse("an attention boundary that is curved in exact arithmetic")
                line = tuple(int(F[c, i, a]) - int(F[c, i, b]) for c in range(3))
        self._exact_cache[key] = line
        return line

    def _exact_lines(self, tags: np.ndarray) -> np.ndarray:
        """Exact lines ``(n, 3)`` (an object array of ints) of ``tags``."""
        ut, inv = np.unique(tags, return_inverse=True)
        table = np.empty((ut.size, 3), dtype=object)
        for i, t in enumerate(ut.tolist()):
            table[i] = self._exact_line(t)
        return table[inv.ravel()]

    def _exact_vertex_signs(self, ta, tb, tc) -> np.ndarray:
        """Exact signs ``(n,)`` of the lines ``tc`` at the vertices where lines ``ta`` and ``tb`` meet
        (vectorised over Python ints: ``l_c . (l_a x l_b)`` times the sign of the cross product's last entry)."""
        L = self._exact_lines(np.concatenate([ta, tb, tc]))
        n = ta.size
        (a1, b1, c1), (a2, b2, c2), (a3, b3, c3) = (L[k * n : (k + 1) * n].T for k in range(3))
        Z = a1 * b2 - b1 * a2
        if np.any(Z == 0):
            raise ZeroDivisionError("internal error: a vertex between parallel lines")
        v = a3 * (b1 * c2 - c1 * b2) + b3 * (c1 * a2 - a1 * c2) + c3 * Z
        sv = (v > 0).astype(np.int8) - (v < 0).astype(np.int8)
        return np.where((Z > 0).astype(bool), sv, -sv).astype(np.int8)

    def _exact_direction(self, tag: int) -> np.ndarray:
        """The exact line of ``tag`` scaled to unit max-norm, as floats (only its orientation is used)."""
        key = ("dir", tag)
        hit = self._exact_cache.get(key)
        if hit is None:
            line = self._exact_line(tag)
            scale = max(abs(v) for v in line) or 1
            hit = np.array([float(Fraction(v, scale)) for v in line])
            self._exact_cache[key] = hit
        return hit

    def cut(self, V, nv, s, sg, tag, newtag, d, R, sides=(1, -1)):
        """:func:`_cut`, with the crossings whose float interpolation is meaningless placed exactly."""
        parts, (ta, tb, bad) = _cut(V, nv, s, sg, tag, newtag, d, R, sides)
        if bad.size:
            P, rP = self._exact_point(ta, tb)
            for Vo, no, _t, Ro, Co in parts:
                hit = np.isin(Co, bad)
                k = np.searchsorted(bad, Co[hit])
                Vo[hit] = P[k]
                Ro[hit] = rP[k]
                pr = np.flatnonzero(hit[:, 0])
                if pr.size:  # padding repeats the first vertex
                    pad = np.arange(Vo.shape[1]) >= no[pr, None]
                    rows, cols = nonzero2(pad)
                    Vo[pr[rows], cols] = Vo[pr[rows], 0]
                    Ro[pr[rows], cols] = Ro[pr[rows], 0]
        return [(Vo, no, To, Ro) for Vo, no, To, Ro, _c in parts]
