"""Independent checks of an exact 2D partition (``count --certify``).

Each check recomputes what it needs from the network and the partition's polygons and codes, not from the
engine's internal state, and reports ``passed`` with a one-line ``detail``:

- ``areas``: the region areas (shoelace sums) add up to the domain's area (relative 1e-9);
- ``witnesses``: one interior point per region (its vertex mean) has the region's code under the sample
  engine's jitted forward pass; where float64 disagrees, the code at that point is recomputed exactly in
  rational arithmetic, which then decides;
- ``neighbours``: no two adjacent regions (sharing an edge of positive length) carry the same code;
- ``euler``: the planar graph of vertices and edges satisfies Euler's relation V - E + F = 1 for a
  subdivision of the rectangle (vertices found by clustering float points, so this check is a float check);
  not run (``passed: None``) where regions lie below float64 resolution, whose float vertices coincide (the
  areas and witness checks then leave those regions out and say how many);
- ``halfplanes`` (ReLU and Maxout programs): each polygon is the set cut out by its code: the per-layer maps
  are recomputed from the code alone, every unit's value at every vertex has the sign the code says (or a
  maxout unit's chosen piece is the largest) up to a rigorous float64 error bound, and every edge lies on a
  unit's boundary or on the domain's side.

A failed check makes the CLI exit with an error; it is never a silent number.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import _tolerances as tol
from .._predicates import EPS, affine_bounds, gamma
from ..networks import lower
from ..networks._ops import Affine, Attention, GroupMax, ReLU, Residual

#: regions per batch when maps are recomputed from codes
_BATCH = 4096


def certify(part, net) -> dict:
    """Run every applicable check on ``part`` (a :class:`Partition` of ``net``). Returns ``{"passed": bool,
    "checks": {name: {"passed": bool, "detail": str}}}``."""
    program = lower(net)
    small = _below_resolution(part)
    checks = {
        "areas": _check_areas(part, small),
        "witnesses": _check_witnesses(part, program, small),
        "neighbours": _check_neighbours(part),
        "euler": _check_euler(part)
        if not small.any()
        else {
            "passed": None,
            "detail": f"not checked: {int(small.sum())} regions lie below float64 resolution (their float vertices "
            "coincide), so vertices cannot be clustered",
        },
    }
    if _piecewise_straight(program.ops):
        checks["halfplanes"] = _check_halfplanes(part, program)
    # a check that could not run (None) neither passes nor fails the certificate; it is reported as such
    return {"passed": all(c["passed"] is not False for c in checks.values()), "checks": checks}


def _result(ok: bool, detail: str) -> dict:
    return {"passed": bool(ok), "detail": detail}


def _below_resolution(part) -> np.ndarray:
    """Regions whose float polygon cannot show them: area below (2^-45 of the domain's diameter)^2. The
    engine decided they exist exactly; float geometry (areas, witness points, vertex clusters) cannot."""
    diam = float(np.hypot(*(part._hi - part._lo)))
    return part.areas <= (diam * tol.CERT_RESOLUTION) ** 2


def _check_areas(part, small) -> dict:
    lo, hi = part._lo, part._hi
    box = float(np.prod(hi - lo))
    total = float(np.sum(part.areas))
    neg = int(np.sum((part.areas <= 0) & ~small))
    ok = abs(total - box) <= tol.CERT_AREA_RTOL * box and neg == 0
    return _result(
        ok,
        f"areas sum to {total!r} of {box!r}; {neg} resolvable regions of non-positive area; "
        f"{int(small.sum())} regions below float64 resolution",
    )


def _witness_points(part) -> np.ndarray:
    off = part.offsets
    nv = np.diff(off)
    sums = np.add.reduceat(part.vertices, off[:-1], axis=0) if part.n_regions else np.zeros((0, 2))
    return sums / nv[:, None]


def _check_witnesses(part, program, small) -> dict:
    from ..engines._forward import forward_codes

    U = _witness_points(part)
    x0, V = part.domain.input_map()
    X = np.asarray(x0, float) + U @ np.asarray(V, float).T
    n = X.shape[0]
    pad = -n % 4096  # a few batch shapes, so that the forward pass compiles once per network
    _, codes, _ = forward_codes(program, np.concatenate([X, np.repeat(X[:1], pad, axis=0)]))
    codes = np.asarray(codes)[:n]
    want = part.codes
    bad = np.flatnonzero(np.any(codes != want, axis=1) & ~small)
    exact_ok = 0
    for r in bad:
        ex = exact_point_codes(program, [Fraction(v) for v in X[r]])
        if ex is not None and np.array_equal(ex, want[r]):
            exact_ok += 1
    failed = bad.size - exact_ok
    return _result(
        failed == 0,
        f"{part.n_regions - failed - int(small.sum())} of {part.n_regions - int(small.sum())} witness points have "
        f"their region's code ({exact_ok} of them decided in exact arithmetic; {int(small.sum())} regions below "
        "float64 resolution not tried)",
    )


def _check_neighbours(part) -> dict:
    E = part.adjacency()
    if E.size == 0:
        return _result(True, "no adjacent pairs")
    cb = part.code_bytes()
    same = int(np.sum(np.all(cb[E[:, 0]] == cb[E[:, 1]], axis=1)))
    return _result(same == 0, f"{len(E)} adjacent pairs, {same} of them share a code")


def _check_euler(part) -> dict:
    """V - E + F = 1. A vertex shared by several polygons is computed in each of them, so float points are
    clustered first: points in one cell of any of four offset grids of spacing ``diam 2**-40`` are one
    vertex. Edges are counted per line tag: the elementary intervals between consecutive vertices on the
    line that some polygon edge covers."""
    from ._partition import _components

    P = part.vertices
    if part.n_regions == 0:
        return _result(False, "no regions")
    diam = float(np.hypot(*(part._hi - part._lo)))
    h = diam * tol.CERT_EULER_GRID
    n = P.shape[0]
    links = []
    for ox in (0.0, 0.5):
        for oy in (0.0, 0.5):
            key = np.floor(P / h + np.array([ox, oy])).astype(np.int64)
            _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
            links.append(np.stack([np.arange(n), first[inv.ravel()]], axis=1))
    cid = _components(n, np.concatenate(links))
    _, cid = np.unique(cid, return_inverse=True)
    nV = int(cid.max()) + 1
    nxt = part._next_vertex()
    tags = part.edge_tags if part.edge_tags is not None else np.arange(n)
    # a direction per tag (its longest edge), and every cluster's position along the lines it lies on
    d = P[nxt] - P
    length = np.hypot(d[:, 0], d[:, 1])
    order = np.lexsort((-length, tags))
    ut, start = np.unique(tags[order], return_index=True)
    lead = order[start]
    tix = np.searchsorted(ut, tags)
    u = d[lead] / np.maximum(length[lead], 1e-300)[:, None]
    rep = np.zeros((nV, 2))
    rep[cid] = P
    ends = np.concatenate([cid, cid[nxt]])
    etag = np.concatenate([tix, tix])
    pos = np.sum(rep[ends] * u[etag], axis=1)
    # rank the distinct (tag, cluster) pairs along each line; a polygon edge covers the ranks between its ends
    pair = etag.astype(np.int64) * nV + ends
    upair, inv = np.unique(pair, return_inverse=True)
    ptag = upair // nV
    ppos = np.zeros(upair.size)
    ppos[inv] = pos
    rank_order = np.lexsort((ppos, ptag))
    rank = np.empty(upair.size, np.int64)
    rank[rank_order] = np.arange(upair.size)
    ra, rb = rank[inv[:n]], rank[inv[n:]]
    lo_, hi_ = np.minimum(ra, rb), np.maximum(ra, rb)
    cover = np.zeros(upair.size + 1, np.int64)
    np.add.at(cover, lo_, 1)
    np.add.at(cover, hi_, -1)
    E = int(np.sum(np.cumsum(cover)[:-1] > 0))
    F = part.n_regions
    chi = nV - E + F
    return _result(chi == 1, f"V - E + F = {nV} - {E} + {F} = {chi} (1 expected)")


def _piecewise_straight(ops) -> bool:
    for op in ops:
        if isinstance(op, Residual):
            if not _piecewise_straight(op.body):
                return False
        elif isinstance(op, Attention):
            return False
    return True


def _halfplane_batch(part, program, lo: int, hi: int, x0, V, codes, nv, off, M: int):
    """The halfplane check on regions ``lo:hi``: (violations, edges on no boundary, worst ratio)."""
    T, q = program.tokens, program.input_dim
    n = hi - lo
    violations = 0
    worst = 0.0
    # padded vertices (n, M, 2)
    # padded vertices (n, M + 1, 2): slots from nv on repeat vertex 0, so rolling by one gives each vertex's
    # successor around the polygon
    k = np.where(np.arange(M + 1)[None, :] < nv[lo:hi, None], np.arange(M + 1)[None, :], 0)
    Vt = part.vertices[off[lo:hi, None] + k]
    Rt = part.vertex_error[off[lo:hi, None] + k] if part.vertex_error is not None else np.zeros(k.shape)
    valid = np.arange(M + 1)[None, :] < nv[lo:hi, None]
    # per vertex: the largest |value| / bound of any constraint it lies on, per edge: whether it lies on one
    on_line = np.zeros((n, M + 1), bool)  # edge from vertex m to m + 1 lies on a boundary
    Vn = np.roll(Vt, -1, axis=1)
    # domain sides
    plo, phi = np.asarray(part.domain.param_lo, float), np.asarray(part.domain.param_hi, float)
    side_tol = tol.CERT_SIDE * float(np.max(phi - plo))
    for ax in range(2):
        for bound in (plo[ax], phi[ax]):
            on_line |= (np.abs(Vt[..., ax] - bound) <= side_tol) & (np.abs(Vn[..., ax] - bound) <= side_tol)
    A = np.zeros((n, 3, T, q))
    A[:, 0] = V[:, 0]
    A[:, 1] = V[:, 1]
    A[:, 2] = x0
    hb = np.broadcast_to(np.abs(V).sum(axis=1) + np.abs(x0), (T, q)).copy()
    eb = np.zeros((T, q))  # the input map is the domain's, exactly
    ge = np.full((T, q), -(1 << 20))
    state = {"col": 0}
    sizes = np.abs(Vt).sum(axis=2) + 1.0  # |u1| + |u2| + 1 per vertex

    def check(vals, bnd, sign_ok, edge_on):
        nonlocal violations, worst
        bad = ~sign_ok & valid[:, :, None]
        violations += int(bad.sum())
        if bad.any():
            worst = max(worst, float(np.max(np.abs(vals)[bad] / np.maximum(bnd[bad], 1e-300))))
        edge_on_line[:] |= edge_on

    edge_on_line = on_line

    def values(A, eb):
        ones = np.ones((n, M + 1, 1))
        vals = np.einsum("nmc,nctd->nmtd", np.concatenate([Vt, ones], -1), A)
        aw = np.abs(A)
        bnd = gamma(3) * np.einsum("nmc,nctd->nmtd", np.concatenate([np.abs(Vt), ones], -1), aw)
        bnd += eb[None, None] * (sizes + 2 * Rt)[:, :, None, None]
        bnd += (aw[:, 0] + aw[:, 1])[:, None] * Rt[:, :, None, None]  # the exact vertex is within Rt
        return vals, bnd * (1 + 16 * EPS) + 1e-300

    def run(ops, A, hb, eb, ge):
        for op in ops:
            if isinstance(op, Residual):
                B, hb2, eb2, ge2 = run(op.body, A, hb, eb, ge)
                A = A + B
                hb, eb = hb + hb2, eb + eb2 + EPS * (hb + hb2)
                continue
            if isinstance(op, Affine):
                W, b = op.W, op.b
                bb = b if b.ndim == 2 else b[None, :]
                out = A @ W.T
                out[:, 2] += bb
                hb, eb, ge = affine_bounds(hb, eb, ge, W, b)
                A = out
                continue
            c0 = state["col"]
            vals, bnd = values(A, eb)
            if isinstance(op, ReLU):
                D = A.shape[2] * A.shape[3]
                state["col"] += D
                bits = codes[lo:hi, c0 : c0 + D].reshape(n, 1, A.shape[2], A.shape[3]).astype(bool)
                ok = np.where(bits, vals >= -bnd, vals <= bnd).reshape(n, M + 1, D)
                zero = (np.abs(vals) <= bnd).reshape(n, M + 1, D)
                edge_on = np.any(zero & np.roll(zero, -1, axis=1), axis=2)
                check(vals.reshape(n, M + 1, D), bnd.reshape(n, M + 1, D), ok, edge_on)
                A = A * bits
            elif isinstance(op, GroupMax):
                kk = op.k
                Tt, d = A.shape[2], A.shape[3]
                u = d // kk
                state["col"] += Tt * u
                dig = codes[lo:hi, c0 : c0 + Tt * u].reshape(n, Tt, u)
                v = vals.reshape(n, M + 1, Tt, u, kk)
                bb = bnd.reshape(n, M + 1, Tt, u, kk)
                vw = np.take_along_axis(v, dig[:, None, :, :, None], -1)
                bw = np.take_along_axis(bb, dig[:, None, :, :, None], -1)
                diff = vw - v
                tol = bw + bb + EPS * np.abs(diff)
                ok = np.all(diff >= -tol, axis=-1).reshape(n, M + 1, Tt * u)
                zero = np.any((np.abs(diff) <= tol) & (np.arange(kk) != dig[:, None, :, :, None]), axis=-1)
                zero = zero.reshape(n, M + 1, Tt * u)
                edge_on = np.any(zero & np.roll(zero, -1, axis=1), axis=2)
                check(diff.min(axis=-1).reshape(n, M + 1, -1), tol.max(axis=-1).reshape(n, M + 1, -1), ok, edge_on)
                A = np.take_along_axis(
                    A.reshape(n, 3, Tt, u, kk), dig.reshape(n, 1, Tt, u, 1).astype(np.int64), axis=-1
                )[..., 0]
                hb, eb, ge = (
                    hb.reshape(Tt, u, kk).max(-1),
                    eb.reshape(Tt, u, kk).max(-1),
                    ge.reshape(Tt, u, kk).min(-1),
                )
        return A, hb, eb, ge

    run(program.ops, A, hb, eb, ge)
    return violations, int(np.sum(valid & ~edge_on_line)), worst


def _check_halfplanes(part, program) -> dict:
    """Recompute every region's per-layer maps from its code and check the code's constraints at its vertices."""
    x0, V = part.domain.input_map()
    x0, V = np.asarray(x0, float), np.asarray(V, float)
    R = part.n_regions
    codes = part.codes
    off = part.offsets
    nv = np.diff(off)
    M = int(nv.max()) if R else 0
    violations = 0
    unbounded_edges = 0
    worst = 0.0
    for lo in range(0, R, _BATCH):
        v, u, w = _halfplane_batch(part, program, lo, min(R, lo + _BATCH), x0, V, codes, nv, off, M)
        violations += v
        unbounded_edges += u
        worst = max(worst, w)
    ok = violations == 0 and unbounded_edges == 0
    return _result(
        ok,
        f"{violations} vertex constraints violated beyond their float64 error bound"
        + (f" (worst {worst:.3g}x its bound)" if violations else "")
        + f"; {unbounded_edges} edges on no unit's boundary nor the domain's side",
    )


def exact_point_codes(program, x) -> np.ndarray | None:
    """The code of the input point ``x`` (Fractions) in exact rational arithmetic, in the forward pass's
    layout; ``None`` for programs with attention (not needed by the checks that call it)."""
    T = program.tokens
    H = np.array([[Fraction(v) for v in x] for _ in range(T)], dtype=object)
    out: list[int] = []

    def run(ops, H):
        for op in ops:
            if isinstance(op, Residual):
                H = H + run(op.body, H)
            elif isinstance(op, Affine):
                W = np.array([[Fraction(v) for v in row] for row in op.W], dtype=object)
                b = op.b
                bb = np.array([[Fraction(v) for v in row] for row in (b if b.ndim == 2 else b[None, :])], dtype=object)
                H = H.dot(W.T) + bb
            elif isinstance(op, ReLU):
                bits = np.vectorize(lambda v: 1 if v > 0 else 0, otypes=[object])(H)
                out.extend(int(v) for v in bits.ravel())
                H = H * bits
            elif isinstance(op, GroupMax):
                Tt, d = H.shape
                G = H.reshape(Tt, d // op.k, op.k)
                dig = np.array([[max(range(op.k), key=lambda j, g=g: (g[j], -j)) for g in row] for row in G])
                out.extend(int(v) for v in dig.ravel())
                H = np.take_along_axis(G, dig[..., None], -1)[..., 0]
            else:
                raise LookupError
        return H

    try:
        run(program.ops, H)
    except LookupError:
        return None
    return np.array(out, dtype=np.int64)
