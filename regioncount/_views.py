"""What a picture shows, computed: the library side of :mod:`regioncount.plotting`, which only draws it.

A 2D picture is drawn from a :class:`RegionSource`: the exact ``plane`` partition where that engine can split
the network, the exact curved cells (:mod:`regioncount.engines._curved`: hardmax after a token-wise FFN, the
first ReLU-attention op) where boundaries are conics, otherwise (boundaries of degree above 2, or more
regions than a cap) a :class:`SampledImage` of activation codes on a grid, whose count is a lower bound.
:func:`region_source` makes that choice; :meth:`RegionSource.summary` says what it holds (JSON-ready).
Also here: level sets of output 0, the segments two regions share, the networks cut after each layer, the
cross-sections of a box, and the comparison of a Maxout network with its compiled Transformer.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ._count import region_kind
from ._domain import Box, Segment, Slice
from ._enums import Kind, Picture
from ._errors import CurvedBoundaryError, DomainError, MemoryCapError, NotPiecewiseError, RegionCountError
from .networks import MLP, Maxout, Transformer, check_domain, lower, truncate, walk_widths
from .networks._ops import Attention
from .results import Cells, Partition, Polytopes

if TYPE_CHECKING:
    from .engines._line import LinePieces

#: Grid points per axis of a sampled picture when none is asked for.
DEFAULT_GRID = 400
#: Exact partitions with more regions than this are drawn from samples instead.
DEFAULT_MAX_REGIONS = 200_000
#: Points per forward-pass batch of a sampled picture (one jit compilation per network).
_BATCH = 1 << 16


# ----------------------------------------------------------------------------------------------------
# what is drawn: an exact partition, exact curved cells, or a sampled image


@dataclasses.dataclass(frozen=True, eq=False)
class SampledImage:
    """Activation codes of a ``grid x grid`` lattice of cell centres over a 2D domain.

    ``ids (grid, grid)``: code id of each cell, row ``i`` is ``u2``, column ``j`` is ``u1`` (image layout,
    origin at the bottom left); equal ids <=> equal codes. ``output (grid, grid)``: network output 0 there.
    ``n_codes``: distinct codes met, a lower bound on the number of regions.
    """

    domain: Box | Slice
    grid: int
    ids: np.ndarray
    output: np.ndarray
    n_codes: int

    @property
    def extent(self) -> tuple[float, float, float, float]:
        lo, hi = self.domain.param_lo, self.domain.param_hi
        return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """The cell centres' ``u1 (grid,)`` and ``u2 (grid,)`` coordinates."""
        lo, hi = self.domain.param_lo, self.domain.param_hi
        a1 = lo[0] + (np.arange(self.grid) + 0.5) * (hi[0] - lo[0]) / self.grid
        a2 = lo[1] + (np.arange(self.grid) + 0.5) * (hi[1] - lo[1]) / self.grid
        return a1, a2

    def adjacency(self) -> np.ndarray:
        """Pairs ``(E, 2)`` of code ids met in side-by-side cells (``i < j``, sorted, unique)."""
        pairs = [
            np.stack([self.ids[:, :-1].ravel(), self.ids[:, 1:].ravel()], 1),
            np.stack([self.ids[:-1, :].ravel(), self.ids[1:, :].ravel()], 1),
        ]
        P = np.concatenate(pairs)
        P = P[P[:, 0] != P[:, 1]]
        if P.size == 0:
            return np.zeros((0, 2), np.int64)
        return np.unique(np.sort(P, axis=1), axis=0).astype(np.int64)

    def first_points(self) -> np.ndarray:
        """The centre ``(n_codes, 2)`` of the first cell (row-major) of each code."""
        _, first = np.unique(self.ids.ravel(), return_index=True)
        lo, hi = self.domain.param_lo, self.domain.param_hi
        r, c = np.divmod(first, self.grid)
        return np.stack(
            [lo[0] + (c + 0.5) * (hi[0] - lo[0]) / self.grid, lo[1] + (r + 0.5) * (hi[1] - lo[1]) / self.grid], 1
        )


@dataclasses.dataclass(frozen=True, eq=False)
class RegionSource:
    """What a picture is drawn from: ``partition`` or ``cells`` (exact) or ``image`` (sampled), and why it
    was sampled."""

    net: object
    domain: Box | Slice
    partition: Partition | None = None
    image: SampledImage | None = None
    reason: str | None = None
    cells: Cells | None = None  # exact curved cells

    @property
    def exact(self) -> bool:
        return self.partition is not None or self.cells is not None

    def sampled_image(self) -> SampledImage:
        """The sampled image of a source that is not exact."""
        if self.image is None:
            raise ValueError("this source is exact: it has a partition, not a sampled image")
        return self.image

    def exact_partition(self) -> Partition:
        """The exact straight partition of a source that has one."""
        if self.partition is None:
            raise ValueError("this source has no straight exact partition (it is sampled, or its cells are curved)")
        return self.partition

    def summary(self, linear: bool = False) -> dict:
        """JSON-ready counts: ``method`` (:class:`Picture`), ``exact``, ``regions``, ``linear_regions``,
        ``lower_bound`` (and ``engine``, ``codes`` for curved cells; ``grid``, ``samples``, ``why_sampled``
        for a sampled image), ``kind`` and ``drawn`` (linear regions with ``linear``, else the kind)."""
        kind = region_kind(self.net)
        info: dict
        if self.cells is not None:
            c = self.cells
            info = {
                "method": Picture.EXACT,
                "engine": "curved",
                "exact": bool(c.exact),
                "regions": c.n_cells,
                "codes": c.n_codes,
                "linear_regions": c.linear_regions(),
                "lower_bound": False,
            }
        elif self.partition is not None:
            part = self.partition
            lin = part.linear_regions() if kind == Kind.ACTIVATION_REGIONS else None
            info = {
                "method": Picture.EXACT,
                "exact": True,
                "regions": part.n_regions,
                "linear_regions": lin,
                "lower_bound": False,
            }
        else:
            img = self.sampled_image()
            info = {
                "method": Picture.SAMPLED,
                "exact": False,
                "regions": img.n_codes,
                "linear_regions": None,
                "lower_bound": True,
                "grid": img.grid,
                "samples": img.grid**2,
                "why_sampled": self.reason,
            }
        info["kind"] = kind
        info["drawn"] = Kind.LINEAR_REGIONS if linear else kind
        return info


def _check_piecewise(program) -> None:
    for op, _, _ in walk_widths(program):
        if isinstance(op, Attention) and op.sigma == "softmax":
            raise NotPiecewiseError(
                "softmax attention is smooth: the network has no regions to draw (hardmax attention is its λ → ∞ limit)"
            )


def _check_plane_domain(program, domain) -> None:
    q = program.input_dim
    if isinstance(domain, Slice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    elif not (isinstance(domain, Box) and domain.dim == 2 and q == 2):
        raise DomainError(
            f"a picture needs a 2D domain: a 2D box for a 2-input network, or a slice (--origin/--dir1/--dir2) "
            f"for this {q}-input one"
        )


def _input_bbox(domain) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = domain.param_lo, domain.param_hi
    corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    X = domain.to_input(corners)
    return X.min(axis=0), X.max(axis=0)


def sample_image(net, domain, grid: int = DEFAULT_GRID) -> SampledImage:
    """Codes and output 0 of ``net`` at the ``grid x grid`` cell centres of a 2D ``domain`` (Box or Slice).

    Forward passes run in fixed-size batches (one jit compilation); memory is ``grid**2`` codes as int8.
    """
    from .engines._forward import forward_codes

    if grid < 2:
        raise RegionCountError(f"a sampled picture needs at least 2 grid points per axis, got {grid}")
    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    check_domain(net, *_input_bbox(domain))
    lo, hi = domain.param_lo, domain.param_hi
    a1 = lo[0] + (np.arange(grid) + 0.5) * (hi[0] - lo[0]) / grid
    a2 = lo[1] + (np.arange(grid) + 0.5) * (hi[1] - lo[1]) / grid
    U = np.stack(np.meshgrid(a1, a2, indexing="xy"), -1).reshape(-1, 2)  # row-major: rows u2, columns u1
    n = U.shape[0]
    batch = min(_BATCH, n)
    codes, outs = [], []
    for s in range(0, n, batch):
        Ub = U[s : s + batch]
        m = Ub.shape[0]
        if m < batch:
            Ub = np.concatenate([Ub, np.repeat(Ub[:1], batch - m, axis=0)])
        Y, C, _ = forward_codes(program, domain.to_input(Ub))
        C = np.asarray(C)[:m]
        # digits are ReLU bits or argmax indices: small non-negative ints
        codes.append(C.astype(np.int8) if C.size == 0 or C.max() < 127 else C)
        outs.append(np.asarray(Y)[:m, 0] if np.asarray(Y).shape[1] else np.zeros(m))
    ids = _code_ids(np.concatenate(codes)).reshape(grid, grid)
    return SampledImage(domain, grid, ids, np.concatenate(outs).reshape(grid, grid), int(ids.max()) + 1)


def _code_ids(C: np.ndarray) -> np.ndarray:
    """Ids ``(N,)`` of the distinct rows of ``C (N, L)``, numbered in order of first appearance.

    Rows are sorted by a 64-bit hash (one fast 1D sort instead of a row-wise one) and every row is then
    compared with its group's first row, so the ids are exact: a collision falls back to a row-wise sort.
    """
    from .engines._forward import hash_multipliers

    if C.shape[1] == 0:
        return np.zeros(C.shape[0], np.int64)
    key = C.astype(np.uint64) @ hash_multipliers(C.shape[1])[0]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not np.array_equal(C, C[first[inv]]):
        _, first, inv = np.unique(C, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
    # number groups by first appearance so the ids do not depend on hash values
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv]


def region_source(
    net, domain, *, sampled: bool = False, grid: int | None = None, max_regions: int = DEFAULT_MAX_REGIONS
) -> RegionSource:
    """The exact partition of ``domain`` where the ``plane`` engine can make it, else a sampled image.

    ``sampled=True`` or a ``grid`` forces the sampled image (``grid`` points per axis, default
    :data:`DEFAULT_GRID`). Falls back to sampling on curved boundaries (:class:`CurvedBoundaryError`:
    quadric hardmax boundaries, ReLU-attention spline pieces) and on partitions above ``max_regions``.
    Softmax attention raises :class:`NotPiecewiseError`; a wrong domain raises :class:`DomainError`.
    """
    from .engines._plane import partition_plane

    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    reason = "asked for a sampled picture"
    if not sampled and grid is None:
        try:
            return RegionSource(net, domain, partition=partition_plane(net, domain, max_regions=max_regions))
        except CurvedBoundaryError as e:
            reason = str(e)
            # conic boundaries: the curved engine draws them exactly (its trapezoids count against the cap)
            from .engines._curved import partition_curved

            try:
                return RegionSource(net, domain, cells=partition_curved(net, domain, max_traps=max_regions))
            except CurvedBoundaryError as e2:
                reason = str(e2)
            except MemoryCapError as e2:
                reason = f"more than {max_regions:,} trapezoids for an exact picture of curved cells ({e2})"
        except MemoryCapError as e:
            reason = f"more than {max_regions:,} regions for an exact picture ({e})"
    return RegionSource(net, domain, image=sample_image(net, domain, grid or DEFAULT_GRID), reason=reason)


def exact_partition(net, domain, *, max_regions: int = DEFAULT_MAX_REGIONS) -> tuple[Partition | None, str | None]:
    """The exact straight partition of a 2D ``domain`` and None, or None and why there is none (curved
    boundaries, or more than ``max_regions`` regions): what region statistics and graphs need."""
    from .engines._plane import partition_plane

    try:
        return partition_plane(net, domain, max_regions=max_regions), None
    except (CurvedBoundaryError, MemoryCapError) as e:
        return None, str(e)


def exact_solid(net, box: Box, *, max_regions: int = DEFAULT_MAX_REGIONS) -> Polytopes | None:
    """The exact partition of a box of dimension >= 3 (``space`` engine), or None where it has curved
    boundaries or more than ``max_regions`` regions."""
    from .engines._space import partition_space

    try:
        return partition_space(net, box, max_regions=max_regions)
    except (CurvedBoundaryError, MemoryCapError):
        return None


def check_linear(net, sampled: bool, reason: str | None = None) -> None:
    """Raise unless linear regions of ``net`` can be drawn: a piecewise-linear network, drawn exactly."""
    if region_kind(net) != Kind.ACTIVATION_REGIONS:
        raise RegionCountError("ReLU attention has spline pieces, not linear regions: drop --linear")
    if sampled:
        why = f" ({reason})" if reason else ""
        raise RegionCountError(
            f"linear regions need the exact partition and this picture is sampled{why}; drop --linear to draw "
            "the sampled activation codes"
        )


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
    from .engines._conic import branch_y

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


# ----------------------------------------------------------------------------------------------------
# truncations: the partition after each layer or block


def truncations(net) -> list[tuple[str, object]]:
    """``(label, network)`` for the network cut after each hidden layer (MLP, Maxout) or block
    (Transformer); the last entry is ``net`` itself.

    An MLP or Maxout network cut after layer ``l`` reads out layer ``l`` unchanged (identity readout), so
    its output 0 is unit 1 of that layer; a Transformer keeps its readout (:func:`networks.truncate`)."""
    out: list[tuple[str, object]]
    if isinstance(net, MLP):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", MLP(net.weights[:l] + (np.eye(n),), net.biases[:l] + (np.zeros(n),))))
        out.append((f"layer {L}" if L else "affine", net))
        return out
    if isinstance(net, Maxout):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", Maxout(net.weights[:l], net.biases[:l], np.eye(n), np.zeros(n))))
        out.append((f"layer {L}", net))
        return out
    if isinstance(net, Transformer):
        out = [(f"block {d}", truncate(net, d)) for d in range(1, net.depth)]
        out.append((f"block {net.depth}", net))
        return out
    return [("network", net)]


# ----------------------------------------------------------------------------------------------------
# cross-sections of a box


def axis_sections(box: Box, count: int = 3, axis: int | None = None) -> list[tuple[str, Slice, int, float]]:
    """``count`` planes ``x_axis = value`` at evenly spaced interior values of a box of dimension >= 3
    (``axis`` defaults to the last input), spanned by the first two other inputs, the rest at the box's
    centre. Returns ``(label, slice, axis, value)`` per section."""
    q = box.dim
    if q < 3:
        raise DomainError(f"cross-sections are for boxes of dimension 3 or more, got {q}")
    axis = q - 1 if axis is None else int(axis)
    if not 0 <= axis < q:
        raise DomainError(f"section axis must be in 0..{q - 1}, got {axis}")
    if count < 1:
        raise DomainError(f"give at least one section, got {count}")
    i, j = [a for a in range(q) if a != axis][:2]
    ctr = (box.lo + box.hi) / 2
    out = []
    for f in (np.arange(count) + 1) / (count + 1):
        x0 = ctr.copy()
        x0[i] = x0[j] = 0.0
        x0[axis] = box.lo[axis] + f * (box.hi[axis] - box.lo[axis])
        e1, e2 = np.eye(q)[i], np.eye(q)[j]
        sl = Slice(x0, e1, e2, (box.lo[i], box.lo[j]), (box.hi[i], box.hi[j]))
        out.append((f"x{axis + 1} = {x0[axis]:.4g}", sl, axis, float(x0[axis])))
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Section:
    """One cross-section ``x_axis = value`` of a box: its slice, what it is drawn from, and how many regions
    of the box's exact partition it meets (None without that partition)."""

    label: str
    slice: Slice
    axis: int
    value: float
    source: RegionSource
    solid_regions_met: int | None


def box_sections(
    net,
    box: Box,
    *,
    count: int = 3,
    axis: int | None = None,
    solid: Polytopes | None = None,
    sampled: bool = False,
    grid: int | None = None,
    max_regions: int = DEFAULT_MAX_REGIONS,
) -> list[Section]:
    """The :func:`axis_sections` of a box of dimension >= 3, each with its :func:`region_source`, and with
    ``solid`` (the box's exact partition) the number of its regions each section meets, which equals the
    section's own count."""
    program = lower(net)
    if program.input_dim != box.dim:
        raise DomainError(f"the box is {box.dim}D but the network takes {program.input_dim} inputs")
    secs = axis_sections(box, count, axis)
    srcs = [region_source(net, sl, sampled=sampled, grid=grid, max_regions=max_regions) for _, sl, _, _ in secs]
    out = []
    for (label, sl, a, value), src in zip(secs, srcs, strict=True):
        met = None
        if solid is not None:
            w = np.zeros(box.dim + 1)
            w[a], w[-1] = 1.0, -value
            met = int(solid.meets_hyperplane(w).size)
        out.append(Section(label, sl, a, value, src, met))
    return out


# ----------------------------------------------------------------------------------------------------
# a Maxout network beside the hardmax Transformer compiled from it


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledComparison:
    """The exact partitions of a 2-input Maxout network and of its compiled Transformer on one box.

    ``match (R_transformer,)``: the Maxout region holding each Transformer region's centroid; ``identical``:
    that map is a bijection with equal areas (to 1e-9 of the box) and equal output 0, region by region."""

    net: Maxout
    transformer: Transformer
    box: Box
    layout: str
    maxout: Partition
    compiled: Partition
    match: np.ndarray
    identical: bool


def compare_compiled(net: Maxout, lo, hi, *, layout: str = "compact") -> CompiledComparison:
    """Compile ``net`` (:func:`~regioncount.theory.compile_maxout`) on the box ``[lo, hi]^2`` and compare the
    two exact partitions region by region."""
    from .engines._plane import partition_plane
    from .theory import compile_maxout

    if not isinstance(net, Maxout) or net.input_dim != 2:
        raise RegionCountError("figure_compiled draws a 2-input Maxout network")
    box = Box(lo, hi, 2)
    tf = compile_maxout(net, box.lo, box.hi, layout=layout)
    pm = partition_plane(net, box)
    pt = partition_plane(tf, box)
    match = pm.locate(pt.centroids())
    box_area = float(np.prod(box.hi - box.lo))
    identical = bool(
        pm.n_regions == pt.n_regions
        and np.all(match >= 0)
        and np.array_equal(np.sort(match), np.arange(pm.n_regions))
        and np.allclose(pt.areas, pm.areas[match], rtol=0, atol=1e-9 * box_area)
        and np.allclose(pt.maps[:, 0], pm.maps[match, 0], rtol=1e-9, atol=1e-9)
    )
    return CompiledComparison(net, tf, box, layout, pm, pt, match, identical)


# ----------------------------------------------------------------------------------------------------
# a segment


def line_pieces(net, segment) -> tuple[Segment, LinePieces]:
    """``segment`` (a :class:`Segment` or ``(a, b)``) and the exact pieces of ``net`` along it (``line``
    engine)."""
    from .engines._line import walk_line

    seg = segment if isinstance(segment, Segment) else Segment(*segment)
    return seg, walk_line(net, seg)


# ----------------------------------------------------------------------------------------------------
# decision regions beside activation regions


@dataclasses.dataclass(frozen=True, eq=False)
class DecisionView:
    """The exact partitions behind a picture of decision regions (DESIGN §9).

    ``base``: the activation regions of the network; ``cells``: those of its decision network, each with
    its predicted class ``classes (R,)`` and decision region ``labels (R,)``; ``boundary (S, 2, 2)``: the
    segments between cells of different classes; ``n_classes``: classes given a colour."""

    base: Partition
    cells: Partition
    classes: np.ndarray
    labels: np.ndarray
    boundary: np.ndarray
    n_classes: int

    @property
    def decision_regions(self) -> int:
        return int(np.unique(self.labels).size)

    @property
    def present(self) -> np.ndarray:
        """The classes predicted somewhere on the domain, ascending."""
        return np.unique(self.classes)


def decision_view(
    net, domain, *, classes: int | None = None, max_regions: int | None = DEFAULT_MAX_REGIONS
) -> DecisionView:
    """Activation regions and decision regions of ``net`` on a 2D ``domain``, both exact; more than
    ``max_regions`` cells raise :class:`RegionCountError`. ``classes``: how many classes to colour (default:
    the most of the predicted classes, the network's outputs, and 2)."""
    from ._decide import decision_partitions
    from .results import decision_labels

    try:
        base, dec, cls = decision_partitions(net, domain, max_regions=max_regions)
    except MemoryCapError as e:
        raise RegionCountError(f"decision regions need the exact partition, and it has too many cells ({e})") from None
    n_cls = int(classes or max(int(cls.max()) + 1 if cls.size else 1, getattr(net, "output_dim", 1), 2))
    lab = decision_labels(dec, cls)
    E = dec.adjacency()
    boundary = shared_edges(dec, E[cls[E[:, 0]] != cls[E[:, 1]]]) if E.size else np.zeros((0, 2, 2))
    return DecisionView(base, dec, cls, lab, boundary, n_cls)
