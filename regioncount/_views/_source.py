"""What a 2D picture is drawn from: the exact partition, exact curved cells, or a sampled image (:func:`region_source`), and the exact partitions region statistics and solids need."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._count import region_kind
from .._domain import Box, Slice
from .._enums import Kind, Picture
from .._errors import CurvedBoundaryError, DomainError, MemoryCapError, NotPiecewiseError, RegionCountError
from ..networks import check_domain, lower, op_codes, walk_widths
from ..results import Cells, Partition, Polytopes

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
        if op.smooth:
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
    from ..engines._forward import forward_codes

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
        C = op_codes(program, np.asarray(C)[:m])  # a piecewise-linear op's pieces, not its ReLU form's bits
        # digits are ReLU bits, pieces or argmax indices: small non-negative ints
        codes.append(C.astype(np.int8) if C.size == 0 or C.max() < 127 else C)
        outs.append(np.asarray(Y)[:m, 0] if np.asarray(Y).shape[1] else np.zeros(m))
    ids = _code_ids(np.concatenate(codes)).reshape(grid, grid)
    return SampledImage(domain, grid, ids, np.concatenate(outs).reshape(grid, grid), int(ids.max()) + 1)


def _code_ids(C: np.ndarray) -> np.ndarray:
    """Ids ``(N,)`` of the distinct rows of ``C (N, L)``, numbered in order of first appearance.

    Rows are sorted by a 64-bit hash (one fast 1D sort instead of a row-wise one) and every row is then
    compared with its group's first row, so the ids are exact: a collision falls back to a row-wise sort.
    """
    from ..engines._forward import hash_multipliers

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
    :data:`DEFAULT_GRID`). The engine comes from :func:`~regioncount.choose_engine` before any work: the
    curved engine for ReLU attention, else the plane engine, which hands over to the curved engine where it
    meets a quadric hardmax boundary; it falls back to sampling where the curved engine meets a boundary of
    degree above 2 (:class:`CurvedBoundaryError`) and on partitions above ``max_regions``.
    Softmax attention raises :class:`NotPiecewiseError`; a wrong domain raises :class:`DomainError`.
    """
    from ..engines._plane import partition_plane

    program = lower(net)
    _check_piecewise(program)
    _check_plane_domain(program, domain)
    reason = "asked for a sampled picture"
    if not sampled and grid is None:
        from .._count import choose_engine

        engine = choose_engine(net, domain)[0]  # the support table: plane, or curved (ReLU attention)
        if engine == "plane":
            try:
                return RegionSource(net, domain, partition=partition_plane(net, domain, max_regions=max_regions))
            except CurvedBoundaryError as e:  # a quadric hardmax boundary: the weights decide it, not the ops
                reason, engine = str(e), "curved"
            except MemoryCapError as e:
                reason = f"more than {max_regions:,} regions for an exact picture ({e})"
        if engine == "curved":
            # conic boundaries: the curved engine draws them exactly (its trapezoids count against the cap)
            from ..engines._curved import partition_curved

            try:
                return RegionSource(net, domain, cells=partition_curved(net, domain, max_traps=max_regions))
            except CurvedBoundaryError as e2:
                reason = str(e2)
            except MemoryCapError as e2:
                reason = f"more than {max_regions:,} trapezoids for an exact picture of curved cells ({e2})"
    return RegionSource(net, domain, image=sample_image(net, domain, grid or DEFAULT_GRID), reason=reason)


def exact_partition(net, domain, *, max_regions: int = DEFAULT_MAX_REGIONS) -> tuple[Partition | None, str | None]:
    """The exact straight partition of a 2D ``domain`` and None, or None and why there is none (curved
    boundaries, or more than ``max_regions`` regions): what region statistics and graphs need."""
    from ..engines._plane import partition_plane

    try:
        return partition_plane(net, domain, max_regions=max_regions), None
    except (CurvedBoundaryError, MemoryCapError) as e:
        return None, str(e)


def exact_solid(net, box: Box, *, max_regions: int = DEFAULT_MAX_REGIONS) -> Polytopes | None:
    """The exact partition of a box of dimension >= 3 (``space`` engine), or None where it has curved
    boundaries or more than ``max_regions`` regions."""
    from ..engines._space import partition_space

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
