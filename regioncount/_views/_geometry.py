"""The geometry of what is drawn: level sets of an output, the segments two regions share, outlines of linear regions, curved trapezoids as polygons, a domain as JSON."""

from __future__ import annotations

import numpy as np

from .._domain import Box
from ..results import Cells, Partition
from ._source import RegionSource

# ----------------------------------------------------------------------------------------------------
# geometry of what is drawn: level sets, shared edges, curved trapezoids


def level_segments(part: Partition, value: float, output: int = 0) -> np.ndarray:
    """Segments ``(S, 2, 2)`` of the level set ``{output == value}``, exactly: the output is affine on each
    convex region, so the set meets it in one segment (or not at all)."""
    P = part.vertices
    reg = np.repeat(np.arange(part.n_regions), np.diff(part.offsets))
    nxt = np.arange(P.shape[0]) + 1
    nxt[part.offsets[1:] - 1] = part.offsets[:-1]
    m = part.maps[reg, output]
    f = m[:, 0] * P[:, 0] + m[:, 1] * P[:, 1] + m[:, 2] - value
    g = f[nxt]
    # half-open signs: a vertex on the level counts as above, so each crossing is found once
    cross = (f >= 0) != (g >= 0)
    idx = np.flatnonzero(cross)
    if idx.size == 0:
        return np.zeros((0, 2, 2))
    t = f[idx] / (f[idx] - g[idx])
    X = P[idx] + t[:, None] * (P[nxt[idx]] - P[idx])
    r = reg[idx]
    # a convex region is crossed on two edges; pair its first and last crossing
    first = np.ones(r.size, bool)
    first[1:] = r[1:] != r[:-1]
    last = np.ones(r.size, bool)
    last[:-1] = r[1:] != r[:-1]
    two = first & ~last
    a = np.flatnonzero(two)
    b = np.flatnonzero(last)[np.isin(r[last], r[two])]
    return np.stack([X[a], X[b]], axis=1)


def level_values(lo: float, hi: float, levels: int) -> np.ndarray:
    """``levels`` evenly spaced values strictly inside ``(lo, hi)``."""
    if levels <= 0 or not hi > lo:
        return np.zeros(0)
    return np.linspace(lo, hi, levels + 2)[1:-1]


def output_range(src: RegionSource) -> tuple[float, float]:
    """The least and greatest value of output 0 on what ``src`` holds (exact: over region vertices or cell
    witnesses; sampled: over the grid)."""
    if src.cells is not None:
        c = src.cells
        if c.maps is None or c.maps.shape[1] == 0:
            return 0.0, 0.0
        x, y = c.traps.witness()
        f = c.maps[:, 0, 0] * x + c.maps[:, 0, 1] * y + c.maps[:, 0, 2]  # normalised coordinates
        return float(f.min()), float(f.max())
    if src.partition is not None:
        part = src.partition
        reg = np.repeat(np.arange(part.n_regions), np.diff(part.offsets))
        m = part.maps[reg, 0] if part.maps.shape[1] else np.zeros((reg.size, 3))
        f = m[:, 0] * part.vertices[:, 0] + m[:, 1] * part.vertices[:, 1] + m[:, 2]
        return float(f.min()), float(f.max())
    img = src.sampled_image()
    return float(img.output.min()), float(img.output.max())


def shared_edges(part: Partition, pairs: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """The boundary segments ``(S, 2, 2)`` that the regions of each pair ``(i, j)`` in ``pairs (m, 2)`` share.

    Edges of ``i`` and ``j`` on one line (within 1e-9 of the domain's diameter) running in opposite
    directions (both polygons are counter-clockwise) overlap in the shared segment; T-junctions (an edge of
    ``i`` that meets several regions across) are handled because only the overlap is kept. NumPy, in chunks
    of pairs; no polygon unions, so no slivers from rounding.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size == 0:
        return np.zeros((0, 2, 2))
    nv = np.diff(part.offsets)
    M = int(nv.max())
    k = np.arange(M)
    diam = float(np.hypot(*(part.domain.param_hi - part.domain.param_lo)))
    eps = 1e-9 * diam
    out = []
    for s in range(0, len(pairs), chunk):
        pr = pairs[s : s + chunk]

        def edges(r):
            n = nv[r][:, None]
            a = part.offsets[r][:, None] + np.minimum(k, n - 1)
            b = part.offsets[r][:, None] + (k + 1) % n
            return part.vertices[a], part.vertices[b], k < n

        Pa, Qa, va = edges(pr[:, 0])  # (m, M, 2)
        Pb, Qb, vb = edges(pr[:, 1])
        d = Qa - Pa
        L = np.hypot(d[..., 0], d[..., 1])
        u = d / np.where(L > 0, L, 1.0)[..., None]
        nrm = np.stack([-u[..., 1], u[..., 0]], -1)
        # distances of b's endpoints from a's line, and positions along it: (m, M_a, M_b)
        off_p = np.einsum("mak,mbk->mab", nrm, Pb) - np.einsum("mak,mak->ma", nrm, Pa)[..., None]
        off_q = np.einsum("mak,mbk->mab", nrm, Qb) - np.einsum("mak,mak->ma", nrm, Pa)[..., None]
        t_p = np.einsum("mak,mbk->mab", u, Pb) - np.einsum("mak,mak->ma", u, Pa)[..., None]
        t_q = np.einsum("mak,mbk->mab", u, Qb) - np.einsum("mak,mak->ma", u, Pa)[..., None]
        lo = np.maximum(0.0, np.minimum(t_p, t_q))
        hi = np.minimum(L[..., None], np.maximum(t_p, t_q))
        ok = (
            va[:, :, None]
            & vb[:, None, :]
            & (L[..., None] > eps)
            & (np.abs(off_p) <= eps)
            & (np.abs(off_q) <= eps)
            & (t_q < t_p)  # opposite direction
            & (hi - lo > eps)
        )
        m_, a_, _ = np.nonzero(ok)
        P0 = Pa[m_, a_] + lo[ok][:, None] * u[m_, a_]
        P1 = Pa[m_, a_] + hi[ok][:, None] * u[m_, a_]
        out.append(np.stack([P0, P1], axis=1))
    return np.concatenate(out)


def linear_outlines(part: Partition) -> np.ndarray:
    """The segments ``(S, 2, 2)`` between neighbouring regions of different linear regions."""
    lab = part.linear_region_labels()
    E = part.adjacency()
    return shared_edges(part, E[lab[E[:, 0]] != lab[E[:, 1]]])


def trapezoid_polygons(cells: Cells, samples: int = 24) -> np.ndarray:
    """Every trapezoid of curved ``cells`` as a polygon ``(N, 2 samples, 2)`` in domain coordinates: its lower
    arc and then its upper arc backwards, each sampled at ``samples`` Chebyshev-spaced abscissae."""
    from ..engines._conic import branch_y

    t = cells.traps
    th = np.linspace(0, np.pi, samples)
    X = (t.xa + t.xb)[:, None] / 2 - (t.xb - t.xa)[:, None] / 2 * np.cos(th)
    lo = branch_y(t.Lc[:, None], t.Lk[:, None], X)
    hi = branch_y(t.Uc[:, None], t.Uk[:, None], X)
    P = np.concatenate([np.stack([X, lo], -1), np.stack([X, hi], -1)[:, ::-1]], axis=1)
    return cells.centre + cells.half * P


def domain_info(domain) -> dict:
    """A 2D box or slice as JSON: ``{"box": {lo, hi}}`` or ``{"slice": {origin, dir1, dir2, lo, hi}}``."""
    if isinstance(domain, Box):
        return {"box": {"lo": domain.lo.tolist(), "hi": domain.hi.tolist()}}
    return {
        "slice": {
            "origin": domain.x0.tolist(),
            "dir1": domain.v1.tolist(),
            "dir2": domain.v2.tolist(),
            "lo": domain.lo.tolist(),
            "hi": domain.hi.tolist(),
        }
    }
