"""A box that holds every region of a 2-input ReLU MLP or Maxout network: counting it counts all of R^2.

:func:`whole_plane_box` partitions ``B = [-L, L]^2`` with the plane engine and inspects every region whose
polygon touches the boundary of ``B``. For such a region ``R`` it rebuilds the full polyhedron ``P`` of
``R`` in R^2, the intersection of the halfplanes of *all* its units at all layers given its code (given a
code every pre-activation is affine in ``x``; a ReLU unit that is on gives ``z >= 0``, off ``z <= 0``; a
maxout unit whose piece ``r`` wins gives ``f_r >= f_j`` for every ``j``). It accepts ``B`` when every such
``P`` satisfies

    (C)  every vertex of ``P`` lies in the open box ``int B``, and every edge of ``P`` meets ``int B``

(the second half only adds something for an edge without vertices: a whole line, as in a strip). Otherwise
it grows ``L`` past the offending vertex or line and repeats.

Why (C) for the touching regions is enough (no region of R^2 is missed). Regions are open convex
polyhedra (Serra et al. 2018), finitely many, and neighbours across edges connect them all. Suppose some
region misses ``int B``; then some ``R1`` meeting ``int B`` shares an edge piece ``e`` (positive length)
with a region ``R2`` missing ``int B``, and ``e`` lies outside ``int B`` (a point of ``e`` inside would
put points of ``R2`` inside). ``cl R1`` is convex, meets ``int B`` and holds ``e``, so it meets the
boundary of ``B``: (C) holds for ``P1 = cl R1``. The edge ``E1`` of ``P1`` holding ``e`` meets ``int B``
and has its vertices inside, so ``E1`` leaves ``B`` once along a ray ``r`` that holds ``e``. Walk along
``E1`` from inside ``B`` outwards and list the regions across it, ``G_1, G_2, ...``, switching at points
``w_1, w_2, ...``; each switch point is a vertex of the regions on both sides of it (their closures meet
``E1`` in segments that end there). Let ``G_j`` be the first region across ``E1`` whose stretch reaches
outside ``int B``: it meets ``int B`` (its stretch starts inside) and its closure meets the boundary of
``B``, so (C) puts its far switch point ``w_j``, a vertex of ``cl G_j``, inside ``int B`` unless it does
not exist. Hence ``G_j`` lies across all of ``r``, so ``R2 = G_j`` meets ``int B``: a contradiction.
Therefore every region meets ``int B``, and the plane partition of ``B`` counts every region of R^2.

Checking (C) on a touching region. ``P`` is clipped to the square ``G = [-S, S]^2``, ``S = 2^20 L``
(vectorised over regions, one constraint at a time). Vertices of ``P ∩ G`` between two constraint edges
are vertices of ``P`` and must lie in ``int B``; a constraint edge with both ends on the boundary of ``G``
is a line of ``P`` and must meet ``int B``. Each run of ``G``-edges sits between an incoming constraint
edge (direction ``d1``) and an outgoing one (``d2``): when they converge (``d1 x d2 > 0``) ``P`` has a
vertex beyond ``G``; when they diverge, ``P`` beyond ``G`` lies in the arc plus the cone of ``d1`` and
``-d2``, and any constraint that decreases along ``d1`` or ``-d2`` cuts it there (a vertex or an edge
beyond ``G``). In each of these cases ``L`` grows past what offends, and past ``S`` for what lies beyond
``G``.

Numerics. The partition of ``B`` is the plane engine's (the box is only as complete as that partition).
The check runs twice: first in float64 on ``P`` clipped to ``G`` (cheap; it proposes how far to grow),
then, for a region the float check accepts, in exact arithmetic on the float64 network as given
(:func:`_verify`): the region's halfplanes are rebuilt from its code in integers times powers of two, and
the float clip's cycle of edges is accepted only if every candidate vertex satisfies every halfplane
exactly and lies in the open box, every unbounded direction keeps every halfplane and the directions
diverge, and every vertex-free line crosses the box. Where the float cycle fails (an edge far below its
resolution, as with nearly concurrent lines) the polygon is clipped again in exact rationals
(:func:`_exact_cycle`) and checked. So (C), hence "every region meets the box", is decided exactly given
the partition's codes. The growth stops with :class:`RegionCountError` once ``L`` would pass
``max_half_width`` (default 2^40, about 1.1e12), and for Transformers, whose curved or spline boundaries
this argument does not cover.
"""

from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction

import numpy as np

from .. import _tolerances as tol
from .._domain import Box
from .._errors import RegionCountError
from ..networks import lower, walk_widths
from ..networks._interpret import ExactProgram, float_maps
from ..networks._ops import Program
from ..networks._protocol import refuse_unsupported
from ._plane import _cut, partition_plane

#: The clipping square is this many times the box (a power of two keeps ``S`` exact).
_FAR = 2.0**20
#: Relative size of ``a.d`` below which a constraint is parallel to a ray (or two lines parallel).
_PARALLEL = tol.WHOLE_PLANE_PARALLEL
#: Relative value below which a vertex counts as on a line while clipping.
_SNAP = tol.WHOLE_PLANE_SNAP
DEFAULT_START = 2.0
DEFAULT_MAX_HALF_WIDTH = 2.0**40


@dataclasses.dataclass(frozen=True)
class WholePlane:
    """The result of :func:`whole_plane_box`: ``box = [-half_width, half_width]^2`` holds every region.

    ``rounds``: the half-widths tried, in order (the last is ``half_width``); ``checked``: touching regions
    whose full polyhedron was rebuilt in the last round; ``partition``: the plane partition of ``box``.
    """

    box: Box
    half_width: float
    rounds: tuple[float, ...]
    checked: int
    partition: object


def _check_program(program: Program) -> None:
    if program.input_dim != 2:
        raise RegionCountError(
            f"--whole-plane needs a network with 2 inputs (this one takes {program.input_dim}); count a 2D slice instead"
        )

    refuse_unsupported("whole_plane", (op for op, _, _ in walk_widths(program)))
    if program.tokens != 1:
        raise RegionCountError("--whole-plane covers ReLU MLPs and Maxout networks (one token)")


def region_constraints(program: Program, codes: np.ndarray) -> np.ndarray:
    """The halfplanes that cut out each region from its code: ``(R, m, 3)`` rows ``(a1, a2, c)`` with
    ``a1 x1 + a2 x2 + c >= 0`` inside region ``r`` (rows of zeros where a unit's map is constant).

    ``codes (R, C)`` in :func:`~regioncount.engines._forward.forward_codes`' layout; ReLU MLP / Maxout
    programs only (one token). The rows are the one interpreter's (:func:`~regioncount.networks._interpret.float_maps`).
    """
    R = codes.shape[0]
    _, _, rows = float_maps(program, codes, np.zeros(2), np.eye(2), constraints=True)
    if not rows:
        return np.zeros((R, 0, 3))
    return np.concatenate([C for C, _, _ in rows], axis=2).transpose(0, 2, 1)


def _snap(s: np.ndarray, tol: np.ndarray) -> np.ndarray:
    return ((s > tol).astype(np.int8) - (s < -tol).astype(np.int8)).astype(np.int8)


def _clip(F: np.ndarray, S: float):
    """Clip the square ``[-S, S]^2`` by the halfplanes ``F (R, m, 3)`` of each region (rows of zeros are
    skipped) -> padded polygons ``(V (R, M, 2), counts (R,), tags (R, M))``; tags 0..3 are the square's
    sides, ``4 + j`` constraint ``j``."""
    R, m, _ = F.shape
    V = np.broadcast_to(np.array([[-S, -S], [S, -S], [S, S], [-S, S], [-S, -S]]), (R, 5, 2)).copy()
    nv = np.full(R, 4)
    tag = np.broadcast_to(np.array([0, 1, 2, 3, -1]), (R, 5)).copy()
    for j in range(m):
        w = F[:, j]
        live = np.flatnonzero(np.any(w[:, :2] != 0, axis=1))
        if live.size == 0:
            continue
        x, y = V[live, :, 0] * w[live, 0, None], V[live, :, 1] * w[live, 1, None]
        s = x + y + w[live, 2, None]
        # a vertex within rounding of the line is on it (else a duplicate line cuts its twin at noise)
        sg = _snap(s, _SNAP * (np.abs(x) + np.abs(y) + np.abs(w[live, 2, None])))
        zero = np.zeros_like(s)  # the float pre-check: no bounds (its result is verified exactly after)
        parts, _ = _cut(V[live], nv[live], s, sg, tag[live], np.full(live.size, 4 + j), zero, zero, sides=(1,))
        Vc, nc, tc = parts[0][:3]
        M = max(V.shape[1], Vc.shape[1])
        if M > V.shape[1]:
            V = np.concatenate([V, np.repeat(V[:, :1], M - V.shape[1], axis=1)], axis=1)
            tag = np.concatenate([tag, np.full((R, M - tag.shape[1]), -1)], axis=1)
        V[live, : Vc.shape[1]] = Vc
        V[live, Vc.shape[1] :] = Vc[:, :1]
        tag[live, : tc.shape[1]] = tc
        tag[live, tc.shape[1] :] = -1
        nv[live] = nc
    return V, nv, tag


def _offence(F: np.ndarray, L: float, exact_rows=None) -> float:
    """The largest sup-norm radius that the box must exceed for (C) to hold on the polyhedra ``F (R, m, 3)``
    (0.0 when (C) already holds on ``[-L, L]^2``; ``inf`` for an empty polyhedron, which is a bug).

    ``exact_rows(r)``: region ``r``'s halfplanes in exact integers; where given, a region that passes
    the float check must also pass :func:`_verify` (else the box grows past ``G``)."""
    S = _FAR * L
    scale = np.abs(F).max(axis=2, keepdims=True)
    F = np.divide(F, scale, out=np.zeros_like(F), where=scale > 0)
    V, nv, tag = _clip(F, S)
    need = 0.0
    corners = np.array([[-L, -L], [L, -L], [L, L], [-L, L]])
    for r in range(F.shape[0]):
        n = int(nv[r])
        if n < 3:
            return np.inf
        v, t = V[r, :n], tag[r, :n]
        here = _float_offence(F[r], v, t, L, S, corners)
        if here == 0.0 and exact_rows is not None:
            rows = exact_rows(r)
            # the float clip can miss an edge far below its resolution (nearly concurrent lines): then
            # clip exactly and check that cycle
            if not _verify(rows, t, L) and not _verify(rows, _exact_cycle(rows, S), L):
                here = 2 * S
        need = max(need, here)
    return need


def _float_offence(F: np.ndarray, v: np.ndarray, t: np.ndarray, L: float, S: float, corners) -> float:
    """:func:`_offence` for one region: ``F (m, 3)`` normalised halfplanes, ``P ∩ G`` as vertices ``v (n, 2)``
    and edge tags ``t (n,)``."""
    n = t.shape[0]
    need = 0.0
    F = F[None]
    r = 0
    if True:
        real = t >= 4
        if not real.any():
            if np.any(F[r, :, :2] != 0):
                need = max(need, 2 * S)  # some line cuts P, all of it beyond G
            return need
        t_in = np.roll(t, 1)  # tag of the edge ending at each vertex
        a_in, a_out = F[r, np.maximum(t_in, 4) - 4, :2], F[r, np.maximum(t, 4) - 4, :2]
        turn = np.abs(a_in[:, 0] * a_out[:, 1] - a_in[:, 1] * a_out[:, 0])
        # a vertex joins two constraint edges on lines that are not parallel (twins meet at no vertex)
        vert = real & (t_in >= 4) & (turn > _PARALLEL * np.hypot(*a_in.T) * np.hypot(*a_out.T))
        if vert.any():
            rad = np.abs(v[vert]).max()
            if rad >= L:
                need = max(need, rad)
        for i in np.flatnonzero(real):  # a constraint edge with both ends on G is a line of P
            starts_on_g = t_in[i] < 4
            ends_on_g = t[(i + 1) % n] < 4
            if starts_on_g and ends_on_g:
                a1, a2, c = F[r, t[i] - 4]
                vals = corners @ np.array([a1, a2]) + c
                if not (vals.max() > 0 and vals.min() < 0):
                    need = max(need, abs(c) / (abs(a1) + abs(a2)))
        # runs of G-edges: incoming constraint edge before the run, outgoing one after it
        for i in np.flatnonzero(~real & (t_in >= 4)):
            j = i
            while t[j % n] < 4:
                j += 1
            a = F[r, t[(i - 1) % n] - 4, :2]
            b = F[r, t[j % n] - 4, :2]
            d1, d2 = np.array([a[1], -a[0]]), np.array([b[1], -b[0]])
            cross = d1[0] * d2[1] - d1[1] * d2[0]
            if cross > _PARALLEL * np.hypot(*d1) * np.hypot(*d2):
                need = max(need, 2 * S)  # converging rays: a vertex beyond G
                continue
            A = F[r, :, :2]
            norms = np.hypot(A[:, 0], A[:, 1])
            for d in (d1, -d2):
                if np.any(A @ d < -_PARALLEL * norms * np.hypot(*d)):
                    need = max(need, 2 * S)
    return need


def exact_constraints(program: Program, code: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """:func:`region_constraints` for one region in exact integers: ``(m, 3)`` object array of Python ints,
    each row a positive multiple of the exact halfplane ``a1 x1 + a2 x2 + c >= 0`` (the one interpreter of
    codes, :class:`~regioncount.networks._interpret.ExactProgram`; ``cache`` holds it between calls)."""
    key = ("interpreter", id(program))
    ex = None if cache is None else cache.get(key)
    if ex is None or ex[0] is not program:
        ex = (program, ExactProgram.of_domain(program, np.zeros(2), np.eye(2), size=16))
        if cache is not None:
            cache[key] = ex
    C, _ = ex[1].constraints(code)
    return C.N.T.copy()


def _exact_cycle(rows: np.ndarray, S: float) -> np.ndarray:
    """Edge tags of ``[-S, S]^2`` clipped by the integer halfplanes ``rows (m, 3)`` in exact rational
    arithmetic (Sutherland-Hodgman; tags as in :func:`_clip`)."""
    Sf = Fraction(S)
    poly = [((-Sf, -Sf), 0), ((Sf, -Sf), 1), ((Sf, Sf), 2), ((-Sf, Sf), 3)]  # (vertex, tag of its edge)
    for k, (a1, a2, c) in enumerate(rows.tolist()):
        if a1 == 0 and a2 == 0:
            continue
        out = []
        n = len(poly)
        val = [a1 * x + a2 * y + c for (x, y), _ in poly]
        for i in range(n):
            (P, tag), (Q, _) = poly[i], poly[(i + 1) % n]
            sP, sQ = val[i], val[(i + 1) % n]
            if sP >= 0:
                if sQ >= 0:
                    out.append((P, tag))
                elif sP > 0:
                    f = sP / (sP - sQ)
                    out.append((P, tag))
                    out.append(((P[0] + f * (Q[0] - P[0]), P[1] + f * (Q[1] - P[1])), 4 + k))
                else:
                    out.append((P, 4 + k))
            elif sQ > 0:
                f = sP / (sP - sQ)
                out.append(((P[0] + f * (Q[0] - P[0]), P[1] + f * (Q[1] - P[1])), tag))
        poly = out
        if len(poly) < 3:
            break
    return np.array([tag for _, tag in poly], dtype=np.int64)


def _exact_row(program: Program, codes: np.ndarray, cache: dict, r: int) -> np.ndarray:
    return exact_constraints(program, codes[r], cache)


def _verify(rows: np.ndarray, t: np.ndarray, L: float) -> bool:
    """Check (C) in exact arithmetic on the region cut out by the integer halfplanes ``rows (m, 3)``, given
    the float clip's cycle of edge tags ``t`` (the candidate: its constraint edges in order, runs of
    ``G``-edges standing for the region's unbounded directions).

    With ``P'`` the region bounded by the candidate edges: ``P`` lies in ``P'`` (its halfplanes are among
    ``P``'s); every candidate vertex (two consecutive edges turning left) satisfies every halfplane and
    every unbounded direction (``d1`` and ``-d2`` at each run of ``G``-edges, which must diverge) keeps
    every halfplane, so ``P'`` lies in ``P``. Then the candidate vertices are all of ``P``'s: they must lie
    in the open box, and a line of ``P`` without vertices must cross it."""
    live = np.array([r[0] != 0 or r[1] != 0 for r in rows.tolist()], bool)
    if any(r[2] < 0 for r in rows[~live].tolist()):
        return False  # a constant halfplane below 0: empty, cannot be a region
    R = rows[live]
    if R.shape[0] == 0:
        return True  # one region: the plane
    a1, a2, c = R[:, 0], R[:, 1], R[:, 2]
    Lf = Fraction(L)
    seq: list[int] = []  # constraint indices in cycle order; -1 for a run of G-edges
    for tag in t.tolist():
        item = tag - 4 if tag >= 4 else -1
        if item == -1 and seq and seq[-1] == -1:
            continue
        seq.append(item)
    if len(seq) > 1 and seq[0] == -1 and seq[-1] == -1:
        seq.pop()
    full = rows.tolist()

    def same_line(i, j):
        (p1, p2, pc), (q1, q2, qc) = full[i], full[j]
        return p1 * q2 == p2 * q1 and p1 * q1 + p2 * q2 > 0 and p1 * qc == q1 * pc and p2 * qc == q2 * pc

    cyc: list[int] = []
    for item in seq:  # twins (duplicate units) are one edge
        if cyc and item >= 0 and cyc[-1] >= 0 and same_line(cyc[-1], item):
            continue
        cyc.append(item)
    if len(cyc) > 1 and cyc[0] >= 0 and cyc[-1] >= 0 and same_line(cyc[-1], cyc[0]):
        cyc.pop()
    n = len(cyc)
    edges = [i for i in cyc if i >= 0]
    if not edges:
        return False
    n_vert = 0
    for k in range(n):
        i, j = cyc[k], cyc[(k + 1) % n]
        if i < 0 or j < 0:
            continue
        (p1, p2, pc), (q1, q2, qc) = full[i], full[j]
        D = p1 * q2 - p2 * q1
        if D <= 0:
            return False  # consecutive edges must turn left
        Nx, Ny = p2 * qc - q2 * pc, q1 * pc - p1 * qc
        if not np.all(a1 * Nx + a2 * Ny + c * D >= 0):
            return False
        if not (abs(Nx) < Lf * D and abs(Ny) < Lf * D):
            return False
        n_vert += 1
    for k in range(n):  # runs of G-edges: the unbounded directions must diverge and keep every halfplane
        if cyc[k] != -1:
            continue
        i, j = cyc[(k - 1) % n], cyc[(k + 1) % n]
        if i < 0 or j < 0:
            return False
        (p1, p2, _), (q1, q2, _) = full[i], full[j]
        if p1 * q2 - p2 * q1 > 0:
            return False
        for dx, dy in ((p2, -p1), (-q2, q1)):
            if not np.all(a1 * dx + a2 * dy >= 0):
                return False
    corners = [(-Lf, -Lf), (Lf, -Lf), (Lf, Lf), (-Lf, Lf)]
    if n_vert == 0:  # a strip or a halfplane: every halfplane parallel, each line crosses the box
        if len(edges) > 2:
            return False
        e1, e2, _ = full[edges[0]]
        if not np.all(a1 * e2 - a2 * e1 == 0):
            return False
        if len(edges) == 1 and not np.all(a1 * e1 + a2 * e2 > 0):
            return False
        for i in edges:
            p1, p2, pc = full[i]
            nn = p1 * p1 + p2 * p2  # the point -pc (p1, p2) / nn of line i, times nn
            if not np.all(-pc * (a1 * p1 + a2 * p2) + c * nn >= 0):
                return False
    for k in range(n):  # an edge between two runs of G-edges is a whole line: it must cross the box
        i = cyc[k]
        if i < 0 or cyc[(k - 1) % n] >= 0 or cyc[(k + 1) % n] >= 0:
            continue
        p1, p2, pc = full[i]
        vals = [p1 * x + p2 * y + pc for x, y in corners]
        if not (max(vals) > 0 and min(vals) < 0):
            return False
    return True


def whole_plane_box(
    net,
    *,
    start: float = DEFAULT_START,
    max_half_width: float = DEFAULT_MAX_HALF_WIDTH,
    max_regions: int | None = None,
    progress=None,
) -> WholePlane:
    """A box ``[-L, L]^2`` that meets every region of a 2-input ReLU MLP or Maxout ``net`` in R^2.

    Starts at ``L = start`` and grows ``L`` (at least doubling) until condition (C) of the module
    docstring holds for every region touching the box's boundary; the partition of that box then counts
    every region of R^2. ``max_regions`` and ``progress`` go to each plane partition.

    Raises :class:`RegionCountError` for networks other than 2-input ReLU MLPs / Maxout, and when ``L``
    would pass ``max_half_width`` (vertices too far out for float64 boxes, or no finite box).
    """
    program = lower(net)
    _check_program(program)
    if not (0 < start <= max_half_width and np.isfinite(max_half_width)):
        raise RegionCountError(f"need 0 < start <= max_half_width < inf, got {start} and {max_half_width}")
    L = float(start)
    rounds: list[float] = []
    weights: dict = {}  # the float64 weights as exact integers, converted once
    while True:
        rounds.append(L)
        box = Box([-L, -L], [L, L])
        part = partition_plane(net, box, max_regions=max_regions, progress=progress)
        V = part.vertices
        on_edge = np.abs(V).max(axis=1) >= L * (1 - 1e-9)
        touching = np.unique(np.searchsorted(part.offsets, np.flatnonzero(on_edge), side="right") - 1)
        codes = part.code_rows(touching)
        F = region_constraints(program, codes)
        need = _offence(F, L, functools.partial(_exact_row, program, codes, weights))
        if need == 0.0:
            return WholePlane(box, L, tuple(rounds), int(touching.size), part)
        if not np.isfinite(need):
            raise RegionCountError("a region's halfplanes cut out an empty set: the partition and its codes disagree")
        L_next = max(2.0 * L, 2.0 ** np.ceil(np.log2(need)) * 2.0)
        if L_next > max_half_width:
            raise RegionCountError(
                f"no box up to [-{max_half_width:.3g}, {max_half_width:.3g}]^2 holds every vertex of the partition "
                f"(a vertex or boundary line lies beyond {min(need, L_next):.3g}); count a box with --box instead"
            )
        L = float(L_next)
