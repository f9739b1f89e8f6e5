"""A partition of a k-dimensional domain (k >= 3) into activation regions: convex polytopes with codes,
affine maps, volumes, witness points and facet adjacency.

Memory is linear in the number of regions: vertices are one flat ``(V_total, k)`` array with ``offsets
(R+1,)``; each vertex carries a bitmask (``uint64`` words) of its region's constraint slots it lies on;
each region lists its slots (hyperplane ids and planes). Codes are kept compact as in :class:`Partition`.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _tolerances as tol
from ..networks._ops import op_codes
from ._graph import n_labels
from ._partition import _components, block_code_rows


class Polytopes:
    """Activation regions (Serra et al. 2018) of a network on a box or affine slice of dimension ``k >= 3``.

    Coordinates are the domain's parameters ``v`` (for a :class:`Box`, the inputs themselves).

    - ``vertices (V_total, k)`` and ``offsets (R+1,)``: region ``r``'s vertices are
      ``vertices[offsets[r]:offsets[r+1]]``;
    - ``incidence (V_total, W)`` uint64: bit ``s`` of a vertex is set when it lies on slot ``s`` of its region;
    - ``facet_ids (R, F)`` int64: slot ``s`` of region ``r`` is hyperplane ``facet_ids[r, s] // 2``, the region
      on side ``facet_ids[r, s] % 2`` of it (-1: unused slot); two regions on opposite sides of one id may
      share a facet; ``facet_planes (R, F, k+1)``: the slot's affine function, ``>= 0`` on the region;
    - ``maps (R, out, k+1)``: the network output on region ``r`` is ``maps[r] @ [v, 1]``;
    - codes in :func:`~regioncount.engines._forward.forward_codes`' layout, as blocks ``(kind, width, array)``;
    - ``exact_decisions``: how many vertex signs the engine decided in rational arithmetic.
    """

    def __init__(
        self,
        domain,
        vertices,
        offsets,
        maps,
        codes,
        *,
        incidence,
        facet_ids,
        facet_planes,
        exact_decisions=0,
        program=None,
        float_output=None,
    ):
        self.domain = domain
        self.k = int(np.asarray(vertices).shape[1])
        self.vertices = np.ascontiguousarray(vertices, dtype=np.float64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.maps = np.asarray(maps, dtype=np.float64)
        self.incidence = np.asarray(incidence, dtype=np.uint64)
        self.facet_ids = np.asarray(facet_ids, dtype=np.int64)
        self.facet_planes = np.asarray(facet_planes, dtype=np.float64)
        self.exact_decisions = int(exact_decisions)
        R = self.offsets.shape[0] - 1
        if self.offsets[-1] != self.vertices.shape[0] or self.maps.shape[0] != R or self.facet_ids.shape[0] != R:
            raise ValueError("vertices, offsets, maps and facets do not describe the same number of regions")
        self._blocks = [(str(kd), int(w), np.asarray(a)) for kd, w, a in codes]
        for _, _, a in self._blocks:
            if a.shape[0] != R:
                raise ValueError("every code block needs one row per region")
        lo = np.asarray(domain.param_lo, dtype=np.float64)
        hi = np.asarray(domain.param_hi, dtype=np.float64)
        self._lo, self._hi = lo, hi
        self._c, self._h = (lo + hi) / 2, (hi - lo) / 2
        self._adjacency = None
        #: the lowered network the engine partitioned (None: linear regions by the float rule, not exact)
        self.program = program
        self._linear: np.ndarray | None = None
        #: how the linear-region merge decided its pairs (filled when linear regions are asked for)
        self.stats: dict = {}
        #: the engine's float output maps ``(R, c, d_out)`` in coordinates that are an exact invertible affine
        #: image of the domain's, and a bound ``(d_out,)``, valid on every region, on each coefficient's error
        #: (or None): the linear merge finds its candidate pairs from these, so that where no two regions'
        #: maps can be equal it recomputes no maps from the codes
        self._float_output = float_output

    # -- basics --------------------------------------------------------------------------------------

    @property
    def n_regions(self) -> int:
        """Number of activation regions: distinct codes on sets of positive volume."""
        return int(self.offsets.shape[0] - 1)

    def __len__(self) -> int:
        return self.n_regions

    # -- the result protocol (results/_protocol.py) ------------------------------------------------------

    @property
    def regions(self) -> int:
        return self.n_regions

    @property
    def exact(self) -> bool:
        """Always: every vertex sign is decided for the float64 network (rationals where floats cannot)."""
        return True

    @property
    def region_codes(self) -> np.ndarray:
        """The codes the network's ops record (a piecewise-linear op's piece per entry); :attr:`codes` is the
        code of the lowered program the engine ran (the same array for every other op)."""
        return op_codes(self.program, self.codes) if self.program is not None else self.codes

    @property
    def witnesses(self) -> np.ndarray:
        """``(R, k)`` the vertex mean of each region (:meth:`witness_points`)."""
        return self.witness_points()

    @property
    def code_length(self) -> int:
        return sum(w for _, w, _ in self._blocks)

    def code_rows(self, index) -> np.ndarray:
        """Codes of the regions ``index`` (int array or slice) as int32 ``(n, C)``."""
        return block_code_rows(self._blocks, index, self.n_regions)

    @functools.cached_property
    def codes(self) -> np.ndarray:
        """``(R, C)`` int32 activation codes (expanded and cached on first access)."""
        return self.code_rows(slice(None))

    def code_bytes(self) -> np.ndarray:
        """Compact ``(R, nbytes)`` uint8 rows: equal rows <=> equal codes."""
        parts = [np.ascontiguousarray(a).view(np.uint8).reshape(self.n_regions, -1) for _, _, a in self._blocks]
        return np.concatenate(parts, axis=1) if parts else np.zeros((self.n_regions, 0), np.uint8)

    def polytope(self, i: int) -> np.ndarray:
        """Vertices ``(V_i, k)`` of region ``i``."""
        return self.vertices[self.offsets[i] : self.offsets[i + 1]]

    @property
    def nbytes(self) -> int:
        arrs = [self.vertices, self.offsets, self.maps, self.incidence, self.facet_ids, self.facet_planes]
        return int(sum(a.nbytes for a in arrs) + sum(a.nbytes for _, _, a in self._blocks))

    def _region_of_vertex(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_regions), np.diff(self.offsets))

    def witness_points(self) -> np.ndarray:
        """``(R, k)``: the vertex mean of each region, a point in its interior (its code is the region's)."""
        reg = self._region_of_vertex()
        cnt = np.diff(self.offsets)[:, None]
        out = np.zeros((self.n_regions, self.k))
        np.add.at(out, reg, self.vertices)
        return out / cnt

    def _slot_bits(self, rows: np.ndarray) -> np.ndarray:
        """Incidence of vertex rows as bool ``(n, F)``."""
        F = self.facet_ids.shape[1]
        inc = self.incidence[rows]
        b = np.unpackbits(inc.view(np.uint8).reshape(inc.shape[0], -1), axis=1, bitorder="little")
        return b[:, :F].astype(bool)

    # -- volumes -------------------------------------------------------------------------------------

    @functools.cached_property
    def volumes(self) -> np.ndarray:
        """``(R,)`` k-dimensional volumes, from a recursive cone decomposition over the faces that the
        vertex-slot incidence names: ``vol_d(P) = (1/d) sum_facets dist(c_P, aff G) vol_{d-1}(G)``
        (lower-dimensional faces contribute zero). Vectorised for k = 3 (cones over the facet polygons); a
        Python loop per region for k >= 4, meant for checks and moderate partitions."""
        if self.k == 3:
            return self._volumes_3d()
        out = np.empty(self.n_regions)
        for r in range(self.n_regions):
            lo, hi = self.offsets[r], self.offsets[r + 1]
            X = (self.vertices[lo:hi] - self._c) / self._h  # normalised: well scaled
            bits = self._slot_bits(np.arange(lo, hi))
            bits = bits[:, self.facet_ids[r] >= 0]
            out[r] = _face_volume(X, bits, np.arange(hi - lo), self.k) * np.prod(self._h)
        return out

    def _facets_3d(self):
        """Every facet of every region of a 3-polytope partition, in normalised coordinates, all at once: a
        slot whose plane holds three or more vertices holds a facet; slots with the same vertex set (duplicate
        planes) count once. Returns ``(r, s, X, on, nrm, n, cf, e1, e2, a, b, o)``: region and slot ``(n,)``,
        vertices ``(n, M, 3)`` with their mask ``on``, the plane's normal length and unit normal, the facet's
        centroid, an orthonormal basis ``(e1, e2)`` of its plane, the vertices' coordinates ``(a, b)`` in it
        and the order ``o (n, M)`` that goes round the centroid (masked vertices last)."""
        r, s = np.nonzero(self.facet_ids >= 0)
        X, on = self._facet_vertices(r, s)
        big = on.sum(axis=1) >= 3
        r, s, X, on = r[big], s[big], X[big], on[big]
        key = np.concatenate([r[:, None].view(np.uint8).reshape(r.size, -1), np.packbits(on, axis=1)], axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        r, s, X, on = r[first], s[first], X[first], on[first]
        w = self._planes_normalised(r)[np.arange(r.size), s]  # (n, 4)
        nrm = np.linalg.norm(w[:, :3], axis=1)
        n = w[:, :3] / nrm[:, None]
        cnt = on.sum(axis=1)
        cf = np.where(on[..., None], X, 0.0).sum(axis=1) / cnt[:, None]
        # an orthonormal basis of each facet's plane
        e1 = np.cross(n, np.where(np.abs(n[:, :1]) < 0.9, [[1.0, 0, 0]], [[0, 1.0, 0]]))
        e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
        e2 = np.cross(n, e1)
        Y = X - cf[:, None]
        a, b = np.einsum("nmk,nk->nm", Y, e1), np.einsum("nmk,nk->nm", Y, e2)
        ang = np.where(on, np.arctan2(b, a), np.inf)
        o = np.argsort(ang, axis=1)
        return r, s, X, on, nrm, n, cf, e1, e2, a, b, o

    def _volumes_3d(self) -> np.ndarray:
        """Sum over facets (:meth:`_facets_3d`) of (1/3) height x polygon area, in normalised coordinates,
        all regions at once."""
        r, s, _, on, nrm, _, _, _, _, a, b, o = self._facets_3d()
        a, b, ok = (np.take_along_axis(z, o, axis=1) for z in (a, b, on))
        a = np.where(ok, a, a[:, :1])
        b = np.where(ok, b, b[:, :1])
        area = 0.5 * np.abs(np.sum(a * np.roll(b, -1, axis=1) - np.roll(a, -1, axis=1) * b, axis=1))
        wc = self._planes_normalised(np.arange(self.n_regions))
        ctr = (self.witness_points() - self._c) / self._h
        h = np.abs(np.einsum("nk,nk->n", wc[r, s, :3], ctr[r]) + wc[r, s, 3]) / nrm
        vol = np.bincount(r, h * area / 3.0, minlength=self.n_regions)
        return vol * np.prod(self._h)

    # -- segments ------------------------------------------------------------------------------------

    def meet_segment(self, a, b) -> tuple[np.ndarray, np.ndarray]:
        """Regions met with positive length by the segment ``v = a + t (b - a)``, ``t in [0, 1]`` (parameter
        coordinates): ``(indices (n,), intervals (n, 2))`` sorted by where the segment enters them."""
        a, b = np.asarray(a, float), np.asarray(b, float)
        w = self.facet_planes
        used = self.facet_ids >= 0
        alpha = w[..., :-1] @ a + w[..., -1]
        beta = w[..., :-1] @ (b - a)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -alpha / beta
        lo = np.where(used & (beta > 0), t, 0.0).max(axis=1, initial=0.0)
        hi = np.where(used & (beta < 0), t, 1.0).min(axis=1, initial=1.0)
        scale = np.abs(w[..., :-1]) @ np.abs(b - a) + np.abs(alpha)
        dead = np.any(used & (beta == 0) & (alpha < -tol.POLYTOPE_SEGMENT * scale), axis=1)
        ok = (hi - lo > tol.POLYTOPE_SEGMENT) & ~dead
        idx = np.flatnonzero(ok)
        order = np.argsort(lo[idx], kind="stable")
        idx = idx[order]
        return idx, np.stack([lo[idx], hi[idx]], axis=1)

    def meets_hyperplane(self, w) -> np.ndarray:
        """Regions that the hyperplane ``w[:k] . v + w[k] = 0`` (parameter coordinates) cuts with positive
        (k-1)-measure: those with vertices strictly on both sides. Returns their indices."""
        w = np.asarray(w, dtype=np.float64)
        s = self.vertices @ w[:-1] + w[-1]
        reg = self._region_of_vertex()
        above = np.zeros(self.n_regions, bool)
        below = np.zeros(self.n_regions, bool)
        np.logical_or.at(above, reg, s > 0)
        np.logical_or.at(below, reg, s < 0)
        return np.flatnonzero(above & below)

    # -- neighbours ----------------------------------------------------------------------------------

    def adjacency(self) -> np.ndarray:
        """Neighbour pairs ``(E, 2)`` int64, ``i < j``, sorted: regions sharing a (k-1)-face of positive
        measure. Candidates are regions on opposite sides of one hyperplane id; two of them touch in
        positive measure unless a constraint of one keeps the other's facet on its far side (a separating
        axis test: complete for k = 3, where facets are convex polygons; for k >= 4 a pair touching only in
        a lower-dimensional face may be kept in rare configurations). Cost grows with the product of the
        region counts on the two sides of each hyperplane: meant for moderate partitions."""
        if self._adjacency is None:
            self._adjacency = self._find_adjacency(None)
            self._adjacency.setflags(write=False)
        return self._adjacency

    def _entries(self):
        """Per (region, slot) with a cut id: region, slot, id, side."""
        r, s = np.nonzero(self.facet_ids >= 2 * 2 * self.k)  # box sides (ids < 2k) have no neighbour
        f = self.facet_ids[r, s]
        return r, s, f // 2, f % 2

    def _find_by_grid(self, offer) -> np.ndarray:
        """Distinct neighbour pairs of equal label in one of the grids ``offer`` (:func:`~._linear.candidate_pairs`):
        facets matched within each label (one label for every marked region would make that matching quadratic)."""
        found = [p for p in (self._find_adjacency(g) for g, _ in offer) if p.size]
        return np.unique(np.concatenate(found), axis=0) if found else np.zeros((0, 2), np.int64)

    def _find_adjacency(self, label) -> np.ndarray:
        if self.n_regions < 2:
            return np.zeros((0, 2), np.int64)
        r, s, ident, side = self._entries()
        key = ident if label is None else ident * (int(label.max()) + 1) + label[r]
        i0 = np.flatnonzero(side == 0)
        i1 = np.flatnonzero(side == 1)
        i0 = i0[np.argsort(key[i0], kind="stable")]
        i1 = i1[np.argsort(key[i1], kind="stable")]
        k0, k1 = key[i0], key[i1]
        u0, st0, c0 = np.unique(k0, return_index=True, return_counts=True)
        pos = np.searchsorted(k1, u0, "left")
        c1 = np.searchsorted(k1, u0, "right") - pos
        npair = c0 * c1
        g = np.repeat(np.arange(u0.size), npair)
        p = np.arange(g.size) - np.repeat(np.cumsum(npair) - npair, npair)
        ea = i0[st0[g] + p // np.maximum(c1[g], 1)]
        eb = i1[pos[g] + p % np.maximum(c1[g], 1)]
        keep = r[ea] != r[eb]
        ea, eb = ea[keep], eb[keep]
        ok = np.zeros(ea.size, bool)
        step = 1 << 14
        for lo in range(0, ea.size, step):
            sl = slice(lo, lo + step)
            ok[sl] = self._touch(r[ea[sl]], s[ea[sl]], r[eb[sl]], s[eb[sl]], ident[ea[sl]])
        i, j = r[ea][ok], r[eb][ok]
        pairs = np.stack([np.minimum(i, j), np.maximum(i, j)], axis=1)
        return np.unique(pairs, axis=0) if pairs.size else np.zeros((0, 2), np.int64)

    def _facet_vertices(self, reg, slot):
        """Normalised vertices ``(n, Mf, k)`` of the facets ``(reg, slot)`` and their mask ``(n, Mf)``."""
        nv = np.diff(self.offsets)[reg]
        Mx = int(nv.max(initial=1))
        idx = self.offsets[reg][:, None] + np.arange(Mx)
        valid = np.arange(Mx) < nv[:, None]
        idx = np.where(valid, idx, self.offsets[reg][:, None])
        inc = self.incidence[idx]  # (n, Mx, W)
        word = inc[np.arange(reg.size)[:, None], np.arange(Mx), (slot // 64)[:, None]]
        on = ((word >> (slot % 64).astype(np.uint64)[:, None]) & np.uint64(1)).astype(bool) & valid
        X = (self.vertices[idx] - self._c) / self._h
        return X, on

    def _planes_normalised(self, reg):
        w = self.facet_planes[reg]
        out = np.empty_like(w)
        out[..., :-1] = w[..., :-1] * self._h
        out[..., -1] = w[..., -1] + (w[..., :-1] * self._c).sum(axis=-1)
        return out

    def _touch(self, ra, sa, rb, sb, ident) -> np.ndarray:
        Xa, ma = self._facet_vertices(ra, sa)
        Xb, mb = self._facet_vertices(rb, sb)

        def separated(reg, X, m):
            w = self._planes_normalised(reg)  # (n, F, k+1)
            usable = (self.facet_ids[reg] >= 0) & (self.facet_ids[reg] // 2 != ident[:, None])
            vals = np.einsum("nfk,nmk->nfm", w[..., :-1], X) + w[..., -1:]
            slack = tol.POLYTOPE_TOUCH * np.abs(w).sum(axis=-1)
            top = np.where(m[:, None, :], vals, -np.inf).max(axis=2)
            return np.any(usable & (top <= slack), axis=1)

        return ~separated(ra, Xb, mb) & ~separated(rb, Xa, ma)

    @property
    def linear_exact(self) -> bool:
        """Whether :meth:`linear_region_labels` decides in exact arithmetic (the result carries its program)."""
        return self.program is not None

    def linear_region_labels(self, rtol: float | None = None) -> np.ndarray:
        """Label ``(R,)`` of the linear region (Montúfar et al. 2014) of each activation region: neighbours
        across a facet whose output maps are equal in exact arithmetic (:mod:`._linear`, the merge
        :class:`Partition` uses). ``rtol`` (a float), or polytopes built without their program: the float rule,
        maps equal within ``rtol`` (default 1e-9) of their size on the domain (not exact)."""
        R = self.n_regions
        if R < 2:
            return np.arange(R)
        if rtol is None and self.program is not None:
            if self._linear is None:
                from ._linear import candidate_pairs, linear_labels, output_maps

                x0, V = self.domain.input_map()
                if self._float_output is not None and self._adjacency is None:
                    self._linear = self._linear_from_engine_maps(x0, V)
                    if self._linear is not None:
                        self._linear.setflags(write=False)
                        return self._linear
                F, Eb = output_maps(self.program, self.codes, x0, V)
                # only neighbours whose maps can be equal (adjacency within each grid's labels)
                pairs = None if F is None or self._adjacency is not None else candidate_pairs(F, Eb, self._find_by_grid)
                pairs = self.adjacency() if pairs is None else pairs
                fm = None if F is None else (F, Eb)
                self._linear = linear_labels(R, pairs, self.program, self.codes, x0, V, self.stats, fm)
                self._linear.setflags(write=False)
            return self._linear
        rtol = 1e-9 if rtol is None else rtol
        Mn = np.empty_like(self.maps)
        Mn[..., :-1] = self.maps[..., :-1] * self._h
        Mn[..., -1] = self.maps[..., -1] + (self.maps[..., :-1] * self._c).sum(axis=-1)
        size = np.abs(Mn).sum(axis=-1).max(axis=-1) if Mn.shape[1] else np.zeros(R)
        unit = max(float(size.max(initial=0.0)), 1e-300) * 1e-7
        cands = []
        for shift in (0.0, 0.5):
            # only regions whose maps fall in one grid cell are candidates (two shifted grids, so maps equal
            # to rounding never straddle every cell boundary)
            q = np.floor(Mn.reshape(R, -1) / unit + shift).astype(np.int64)
            _, label = np.unique(q, axis=0, return_inverse=True)
            cands.append(self._find_adjacency(label.reshape(-1)))
        E = np.unique(np.concatenate(cands), axis=0) if any(p.size for p in cands) else np.zeros((0, 2), np.int64)
        if E.size == 0:
            return np.arange(R)
        diff = np.abs(Mn[E[:, 0]] - Mn[E[:, 1]]).sum(axis=-1).max(axis=-1) if Mn.shape[1] else np.zeros(len(E))
        same = diff <= rtol * np.maximum(size[E[:, 0]], size[E[:, 1]])
        return _components(R, E[same])

    def _linear_from_engine_maps(self, x0, V) -> np.ndarray | None:
        """Exact linear-region labels with candidate pairs from the engine's float maps (``_float_output``):
        the two grid labellings of :func:`~._linear.candidate_labels` hold every pair whose exact maps can be
        equal, whatever the coordinates and however loose the (uniform) bound; the neighbours so found are
        decided as always, on maps recomputed from the codes of just their regions (tight per-region bounds,
        then rational arithmetic). None where the bound is unusable (the caller takes the general path)."""
        from ._linear import candidate_pairs, linear_labels, output_maps

        Fe, Ee = self._float_output
        R = self.n_regions
        pairs = candidate_pairs(Fe, np.broadcast_to(Ee, (R, Ee.shape[0])), self._find_by_grid)
        if pairs is None:
            return None
        if pairs.size == 0:
            return np.arange(R)
        need = np.unique(pairs)
        codes = self.codes
        F, Eb = output_maps(self.program, codes[need], x0, V)
        fm = None
        if F is not None:  # rows of the regions in no pair are never read
            Ff = np.zeros((R,) + F.shape[1:])
            Ef = np.full((R,) + Eb.shape[1:], np.inf)
            Ff[need], Ef[need] = F, Eb
            fm = (Ff, Ef)
        return linear_labels(R, pairs, self.program, codes, x0, V, self.stats, fm)

    def linear_regions(self, rtol: float | None = None) -> int:
        """Number of linear regions (Montúfar et al. 2014); never more than :attr:`n_regions`."""
        return n_labels(self.linear_region_labels(rtol))

    def __repr__(self) -> str:
        return f"Polytopes({self.n_regions} regions in {self.k}D, {self.vertices.shape[0]} vertices)"


def _face_volume(X: np.ndarray, bits: np.ndarray, S: np.ndarray, d: int, memo: dict | None = None) -> float:
    """d-volume of the face with vertex indices ``S`` (rows of ``X``); ``bits (nv, F)`` vertex-slot incidence.
    ``memo`` shares sub-face volumes between the faces that contain them."""
    memo = {} if memo is None else memo
    mkey = (S.tobytes(), d)
    if mkey in memo:
        return memo[mkey]
    memo[mkey] = out = _face_volume_uncached(X, bits, S, d, memo)
    return out


def _face_volume_uncached(X, bits, S, d, memo) -> float:
    P = X[S]
    if d == 1:
        return float(np.max(np.linalg.norm(P - P[0], axis=1))) if len(S) > 1 else 0.0
    c = P.mean(axis=0)
    total = 0.0
    seen: set = set()
    sub = bits[S]
    for g in range(bits.shape[1]):
        on = sub[:, g]
        m = int(on.sum())
        if m < d or m == len(S):
            continue
        G = S[on]
        key = G.tobytes()
        if key in seen:
            continue
        seen.add(key)
        Q = X[G]
        D = Q[1:] - Q[0]
        _, sv, Vt = np.linalg.svd(D, full_matrices=False)
        rank = int(np.sum(sv > 1e-12 * max(sv.max(initial=0.0), 1e-300)))
        B = Vt[:rank]
        y = c - Q[0]
        h = float(np.linalg.norm(y - B.T @ (B @ y)))
        if h > 0:
            total += h * _face_volume(X, bits, G, d - 1, memo)
    return total / d
