"""The space engine's driver: the engine (state, op loop), the domain's frame and cube, and
:func:`partition_space`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..._domain import AffineSlice, Box, Slice
from ..._errors import DomainError, MemoryCapError
from ..._magnitude import check_magnitudes
from ...networks import check_domain, lower, walk_widths
from ...networks._ops import Program
from ...results._polytopes import Polytopes
from . import _attention, _groupmax, _relu  # noqa: F401  (each registers its kernel)
from ._kernels import KERNELS
from ._predicates import _Decisions, _Exact, _Family, _gamma
from ._store import _WB, _balls, _lastsum, _pack, _Store


class _Engine(_Decisions):
    #: bounds, over every region, on the l1 error and l1 size of each entry's map coefficients ``(T, d)``
    #: (set by partition_space, then by each op; see run)
    E: np.ndarray
    hb: np.ndarray

    def __init__(self, program: Program, st: _Store, exact: _Exact, progress, max_regions):
        self.program = program
        self.st = st
        self.k = st.k
        self.exact = exact
        self.progress = progress
        self.max_regions = max_regions
        self.total = len(walk_widths(program))
        self.done = 0
        self.blocks: list = []
        self.families: list[_Family] = [_Family(0, 2 * st.k, "box", -1)]
        self.next_id = 2 * st.k
        self.split_index = 0
        self.exact_calls = 0
        self._cache: dict = {}
        self._ops = [op for op, _, _ in walk_widths(program) if op.key != "affine"]
        st.cap_check = self.cap_check

    def cap_check(self, n: int):
        if self.max_regions is not None and n > self.max_regions:
            raise MemoryCapError(
                f"the partition passed max_regions={self.max_regions} regions; raise the cap, shrink the "
                "domain, or count with --method sample"
            )

    def family(self, size: int, kind: str, **kw) -> _Family:
        f = _Family(self.next_id, int(size), kind, self.split_index, **kw)
        self.next_id += int(size)
        self.families.append(f)
        return f

    def _tick(self):
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    # -- driver --------------------------------------------------------------------------------------

    def run(self, ops, A):
        """Apply ``ops`` to maps ``A``; ``self.E`` and ``self.hb`` (``(T, d)`` each) follow along: bounds, over
        every region, on the l1 error of each entry's map coefficients and on their l1 size (standard forward
        error analysis: an n-term sum of products is off by at most gamma_n times the sum of |terms|)."""
        chain = np.arange(self.st.n)
        for op in ops:
            A, par = KERNELS.lookup(op)(self, op, A)
            if par is not None:
                chain = chain[par]
        return A, chain


def _frame(program: Program, domain):
    """``(x0, V, lo, hi)`` of the domain's input map ``x = x0 + V v``, ``v in [lo, hi]`` (``k >= 3`` dims)."""
    q = program.input_dim
    if isinstance(domain, Slice):
        raise DomainError("a 2D slice is the plane engine's domain (partition_plane), not the space engine's")
    if isinstance(domain, Box):
        if domain.dim != q:
            raise DomainError(f"the box is {domain.dim}D but the network takes {q} inputs: give an AffineSlice")
    elif isinstance(domain, AffineSlice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    else:
        raise DomainError("the space engine needs a Box or an AffineSlice")
    if domain.dim < 3:
        raise DomainError(
            f"the space engine partitions domains of dimension >= 3 (got {domain.dim}): use the plane or line engine"
        )
    x0, V = domain.input_map()
    return (
        np.asarray(x0, float),
        np.asarray(V, float),
        np.asarray(domain.param_lo, float),
        np.asarray(domain.param_hi, float),
    )


def _cube(k: int) -> _Store:
    st = _Store(k)
    corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * k, indexing="ij")).reshape(k, -1).T  # (2^k, k)
    n = corners.shape[0]
    F = 2 * k
    W = -(-F // _WB)
    bits = np.zeros((n, F), bool)
    bits[:, 0::2] = corners < 0
    bits[:, 1::2] = corners > 0
    st.V = np.concatenate([corners, np.zeros((n, 1))], axis=1)[None]  # the corners are exact
    st.inc = _pack(bits, W)[None]
    st.nv = np.array([n])
    st.fid = (2 * np.arange(F))[None].astype(np.int64)
    fpl = np.zeros((F, k + 2))  # exact planes: error column 0
    fpl[0::2, :k] = np.eye(k)
    fpl[1::2, :k] = -np.eye(k)
    fpl[:, k] = 1.0
    st.fpl = fpl[None]
    st.nf = np.array([F])
    st.cen, st.rad = _balls(st.V, st.nv)
    st.anc = np.zeros(1, np.int64)
    st.n = 1
    return st


def partition_space(
    net,
    domain,
    *,
    max_regions: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Polytopes:
    """Exact partition of a box in R^q (q >= 3) or an :class:`AffineSlice` of dimension >= 3 into the
    activation regions of ``net`` (an MLP, Maxout, hardmax Transformer whose score differences are affine
    on the regions, or a lowered :class:`Program`); see the module docstring for what "exact" means here.

    ``max_regions``: raise :class:`MemoryCapError` once the partition would exceed it. ``progress(done,
    total)`` is called after each op. Raises :class:`CurvedBoundaryError` where a hardmax boundary is
    curved or for ReLU attention, :class:`NotPiecewiseError` for softmax attention, :class:`DomainError`
    for a wrong domain.

    Examples
    --------
    Four ReLU units whose planes ``x = 0``, ``y = 0``, ``z = 0``, ``x + y + z = 1/2`` are in general position
    with every vertex inside the cube: ``1 + 4 + 6 + 4 = 15`` regions (Zaslavsky 1975):

    >>> import regioncount as rc
    >>> W = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, -1.0, -1.0]]
    >>> net = rc.MLP((W, [[1.0, 2.0, 3.0, 4.0]]), ([0.0, 0.0, 0.0, 0.5], [0.0]))
    >>> solid = rc.partition_space(net, rc.Box(-1, 1, 3))
    >>> solid.n_regions, solid.linear_regions(), rc.BOUNDS["zaslavsky"](n=4, n0=3)
    (15, 15, 15)
    >>> round(float(solid.volumes.sum()), 9)
    8.0
    """
    program = lower(net)
    check_magnitudes(program, domain, values=True)  # refuse magnitudes whose float bounds could overflow
    x0, V, lo, hi = _frame(program, domain)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    xc = x0 + V @ c
    spread = np.abs(V) @ h
    check_domain(net, xc - spread, xc + spread)
    k = V.shape[1]
    T = program.tokens
    A = np.zeros((1, k + 1, T, program.input_dim))
    A[0, :k] = (V * h).T[:, None, :]
    A[0, k] = xc
    st = _cube(k)
    eng = _Engine(program, st, _Exact(program, x0, V, lo, hi), progress, max_regions)
    # the float input maps against the exact x = x0 + V (c + h u): c, h, V h and x0 + V c each round
    q = program.input_dim
    size = np.abs(V) @ (np.abs(c) + np.abs(h)) + np.abs(x0)
    eng.E = np.broadcast_to(_gamma(2 * k + 6) * size, (T, q)).copy()
    eng.hb = np.broadcast_to(np.abs(A[0]).sum(axis=0)[0] + eng.E[0], (T, q)).copy()
    A, _ = eng.run(program.ops, A)
    st = eng.st
    st._settle()
    n = st.n
    valid = np.arange(st.M) < st.nv[:n, None]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(st.nv[:n], out=offsets[1:])
    verts = c + h * st.V[:n, :, :k][valid]
    inc = st.inc[:n][valid]
    Mn = A[:, :, program.out_token, :].transpose(0, 2, 1)  # (R, out, k+1) in normalised u
    maps = np.empty_like(Mn)
    maps[..., :k] = Mn[..., :k] / h
    maps[..., k] = Mn[..., k] - _lastsum(Mn[..., :k] * (c / h))
    fpl = st.fpl[:n]
    planes = np.empty(fpl.shape[:2] + (k + 1,))
    planes[..., :k] = fpl[..., :k] / h
    planes[..., k] = fpl[..., k] - _lastsum(fpl[..., :k] * (c / h))  # the same sums as .sum(axis=-1)
    return Polytopes(
        domain,
        verts,
        offsets,
        maps,
        eng.blocks,
        incidence=inc,
        facet_ids=st.fid[:n].copy(),
        facet_planes=planes,
        exact_decisions=eng.exact_calls,
        program=program,
        float_output=_float_output(program, Mn, eng.E),
    )


#: ops whose float maps the engine's bound ``E`` covers with the code's own decisions (hardmax attention averages
#: keys tied within SNAP, a tolerance: its maps are not offered to the linear merge)
_BOUNDED = frozenset({"affine", "relu", "groupmax", "residual"})


def _float_output(program: Program, Mn: np.ndarray, E: np.ndarray):
    """The output maps ``Mn (R, d_out, k+1)`` in the normalised coordinates (an exact affine image of the
    domain's: ``u = c + h t`` in rationals) as ``(R, k+1, d_out)``, and the engine's bound on every coefficient's
    error (the l1 bound of each output entry, valid on every region), or None where an op is not covered."""
    if any(op.key not in _BOUNDED for op, _, _ in walk_widths(program)):
        return None
    return np.ascontiguousarray(Mn.transpose(0, 2, 1)), np.asarray(E[program.out_token], dtype=np.float64).copy()
