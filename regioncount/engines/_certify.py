"""Independent checks of an exact partition (``count --certify``): 2D here, 3D and up in :mod:`._certify_space`.

Each check recomputes what it needs from the network and the partition's polygons and codes, not from the
engine's internal state, and reports ``passed`` with a one-line ``detail`` (and, where it names regions,
``regions``):

- ``halfplanes``, ``witnesses``, ``neighbour_lines`` (ReLU and Maxout programs): **exact**
  (:mod:`._certify_exact`): every exact vertex of every polygon satisfies every constraint of its code, every
  witness point has exactly its region's code, and neighbours differ exactly in the units of their shared
  edge's line; each sign from a float value with a rigorous bound or in rational arithmetic, never a
  tolerance. A region merged into a neighbour (a split not made), of any area, fails them, named;
- ``witnesses`` (attention programs): the vertex mean of each region has its code under the sample engine's
  forward pass (a float check: the exact interpreter gives maps, not hardmax decisions at a point); a
  disagreement fails; ``halfplanes`` is then not run (``passed: None``);
- ``areas``: the region areas (shoelace sums) add up to the domain's area (a float check, ``CERT_AREA_RTOL``);
- ``neighbours``: no two adjacent regions (sharing an edge of positive length) carry the same code;
- ``euler``: the planar graph of vertices and edges satisfies Euler's relation V - E + F = 1 for a
  subdivision of the rectangle (vertices found by clustering float points, so this is a float check); not run
  (``passed: None``) where regions lie below float64 resolution, whose float vertices coincide.

A failed check makes the CLI exit with an error; it is never a silent number. This module sits above the
engines (it uses the sample engine's forward pass); ``regioncount.certify`` is its public name.
"""

from __future__ import annotations

import numpy as np

from .. import _tolerances as tol
from ..networks import lower

#: regions per batch when maps are recomputed from codes
_BATCH = 4096


def certify(part, net) -> dict:
    """Run every applicable check on ``part`` (a :class:`Partition` or :class:`Polytopes` of ``net``). Returns
    ``{"passed": bool, "checks": {name: {"passed": bool or None, "detail": str}}}``; a check that names regions
    lists them under ``"regions"``."""
    from ..results._polytopes import Polytopes

    program = lower(net)
    if isinstance(part, Polytopes):
        from ._certify_space import certify_polytopes

        return certify_polytopes(part, program)
    small = _below_resolution(part)
    from ._certify_space import _affine_constraints

    exact = _affine_constraints(program)
    checks = {
        "areas": _check_areas(part, small),
        "neighbours": _check_neighbours(part),
        "euler": _check_euler(part)
        if not small.any()
        else {
            "passed": None,
            "detail": f"not checked: {int(small.sum())} regions lie below float64 resolution (their float vertices "
            "coincide), so vertices cannot be clustered",
        },
    }
    if exact:
        from ._certify_exact import check_constraints

        got = check_constraints(part, program)
        checks["witnesses"] = got["witnesses"]
        checks["halfplanes"] = got["constraints"]
        checks["neighbour_lines"] = got["neighbour_lines"]
    else:
        checks["witnesses"] = _check_witnesses(part, program, small)
        checks["halfplanes"] = {
            "passed": None,
            "detail": "not checked: attention's constraints are not affine (the exact checks cover ReLU and Maxout)",
        }
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
    failed = bad.size
    return _result(
        failed == 0,
        f"{part.n_regions - failed - int(small.sum())} of {part.n_regions - int(small.sum())} witness points have "
        "their region's code under the float64 forward pass (attention: a float check; the exact checks cover "
        f"ReLU and Maxout); {int(small.sum())} regions below float64 resolution not tried",
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
    from ..results._partition import _components

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
