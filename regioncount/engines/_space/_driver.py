"""The space engine's driver: the engine (state, op loop), the domain's frame and cube, and
:func:`partition_space`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..._blas import one_thread
from ..._domain import AffineSlice, Box, Slice
from ..._errors import DomainError, MemoryCapError
from ..._magnitude import check_magnitudes
from ...networks import check_domain, lower, walk_widths
from ...networks._ops import Program
from ...results._polytopes import Polytopes
from .. import _fork
from .._fork import default_workers, mid_cuts, restoring, run_here, run_job, splits_regions
from .._rows import last_sum
from . import _attention, _groupmax, _relu  # noqa: F401  (each registers its kernel)
from ._kernels import KERNELS
from ._predicates import _Decisions, _Exact, _Family, _gamma
from ._store import _WB, _balls, _pack, _Store

#: Processes for the batches of a store cut at its mid size (``_fork.MID_MIN``, the plane engine's rule; None:
#: ``REGIONCOUNT_WORKERS`` if set, else one per core; 1: here).
WORKERS: int | None = None

#: The hyperplane ids a batch of the mid-sized cut allocates start at ``(its batch number + 1) * ID_STRIDE`` past
#: those taken, on a worker or here alike (so the partition, its facet ids included, is the same wherever the
#: batches run), so that ids stay distinct across batches run apart (a count allocates parents x units ids per op, far
#: fewer; the ids stay small enough that ``Polytopes`` can key them by a region label in an int64).
ID_STRIDE = 1 << 36


@dataclasses.dataclass
class _Piece:
    """A finished batch, flat: its vertices ``(V, k)`` (normalised) and their incidence words ``(V, W)``, vertex
    counts ``(R,)``, slot ids ``(R, F)`` and planes ``(R, F, k+2)``, output maps ``(R, k+1, out)``, code blocks,
    and the bound ``E`` on the error of the output token's map coefficients ``(d_out,)``."""

    verts: np.ndarray
    inc: np.ndarray
    nv: np.ndarray
    fid: np.ndarray
    fpl: np.ndarray
    maps: np.ndarray
    blocks: list
    E: np.ndarray


def _padded(arrays: list, fill) -> np.ndarray:
    """The arrays joined along axis 0, their axis 1 padded with ``fill`` to the widest."""
    width = max(a.shape[1] for a in arrays)
    out = []
    for a in arrays:
        if a.shape[1] < width:
            pad = np.full((a.shape[0], width - a.shape[1]) + a.shape[2:], fill, a.dtype)
            a = np.concatenate([a, pad], axis=1)
        out.append(a)
    return out[0] if len(out) == 1 else np.concatenate(out)


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
        self.cut_once = False  # the store has been cut into batches once (the mid-sized cut): never again
        self.in_worker = False  # a forked worker runs its batch itself
        self.finished = 0  # regions in finished batches
        self.pending = 0  # regions in batches not yet started
        st.cap_check = self.cap_check

    def cap_check(self, n: int):
        n = n + self.finished + self.pending
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

    def solve(self, ops, A) -> list[_Piece]:
        """Apply the top-level ``ops`` to the store and maps ``A``: the finished batches (one where the store is
        never cut, see ``_fork.MID_MIN``)."""
        for k, op in enumerate(ops):
            if not self.cut_once and self.st.n >= _fork.MID_MIN and splits_regions(ops[k:]):
                return self._mid_cut(ops[k:], A)
            A, _ = self.run([op], A)
        return [self._finish(A)]

    def _finish(self, A) -> _Piece:
        st, k = self.st, self.k
        st._settle()
        n = st.n
        valid = np.arange(st.M) < st.nv[:n, None]
        F = max(1, int(st.nf[:n].max(initial=1)))  # the slots from nf on are empty
        out = self.program.out_token
        piece = _Piece(
            st.V[:n, :, :k][valid],
            st.inc[:n][valid],
            st.nv[:n].copy(),
            st.fid[:n, :F].copy(),
            st.fpl[:n, :F].copy(),
            np.ascontiguousarray(A[:, :, out, :]),
            self.blocks,
            self.E[out].copy(),
        )
        self.finished += n
        return piece

    def _mid_cut(self, ops, A) -> list[_Piece]:
        """The store cut into batches once (:func:`~.._fork.mid_cuts`), paired into jobs that run on a worker and
        here at once where there is a worker, else here one after the other."""
        self.cut_once = True
        st, n = self.st, self.st.n
        st._settle()
        start = _State.of(self)
        cuts, jobs = mid_cuts(n)
        nb = cuts.size - 1
        workers = min(default_workers(WORKERS), len(jobs)) if not self.in_worker else 1
        if workers > 1:
            self._fork_job = (ops, A, start, cuts, self.next_id)
            done: dict[int, list[_Piece]] = {}
            try:
                for _, (by_batch, calls) in _fork.fork_map(self._job_in_worker, jobs, workers, here=self._job_here):
                    done.update(by_batch)
                    self.exact_calls += calls
                    self.finished += sum(p.nv.size for got in by_batch.values() for p in got)
            finally:
                del self._fork_job
            self.next_id += (nb + 1) * ID_STRIDE
            self.cap_check(0)
            return [p for b in range(nb) for p in done[b]]

        def batch(b: int, lo: int, hi: int) -> list[_Piece]:
            return self._run_batch(ops, A, start, lo, hi, start.part_of(b, nb))

        # each batch takes the ids it takes on a worker (_job_in_worker: from the first stride on)
        return run_here(self, cuts, batch, "next_id", ID_STRIDE, first=1)

    def _run_batch(self, ops, A, start: _State, lo: int, hi: int, progress) -> list[_Piece]:
        """Rows ``lo:hi`` of the store as it was at ``start`` through ``ops``, with the bounds, op count and
        progress of that moment (``progress``: where this batch reports it, or None)."""
        start.restore(self)
        self.st = start.st.subset(lo, hi)
        self.st.cap_check = self.cap_check
        self.blocks = [(kind, w, a[lo:hi]) for kind, w, a in start.blocks]
        self.progress = progress
        return self.solve(ops, A[lo:hi])

    def _job_in_worker(self, job: tuple, here: bool = False):
        """The batches ``job`` of :attr:`_fork_job`, one after the other, in a forked child (``here``: in this
        process beside it, reporting the progress as if its batches were all of them): their pieces by batch and
        the exact decisions they made."""
        ops, A, start, cuts, next_id = self._fork_job
        self.in_worker = True
        before = self.exact_calls

        def batch(k: int, b: int):
            self.next_id = next_id + (b + 1) * ID_STRIDE
            progress = start.part_of(k, len(job)) if here else None
            return self._run_batch(ops, A, start, int(cuts[b]), int(cuts[b + 1]), progress)

        out = run_job(self, job, cuts, batch)
        return out, self.exact_calls - before

    def _job_here(self, job: tuple):
        """:meth:`_job_in_worker` in this process, with this engine's state as it was before (the caller adds
        the decisions and regions, as for a child)."""
        with restoring(self, ("in_worker", "next_id", "pending", "finished", "exact_calls", "families", "_cache")):
            return self._job_in_worker(job, here=True)

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


@dataclasses.dataclass
class _State:
    """What every batch of a cut store starts from: the store, code blocks, bounds, op count and progress."""

    st: _Store
    blocks: list
    E: np.ndarray
    hb: np.ndarray
    split_index: int
    done: int
    total: int
    progress: Callable | None

    @classmethod
    def of(cls, eng: _Engine) -> _State:
        return cls(eng.st, eng.blocks, eng.E, eng.hb, eng.split_index, eng.done, eng.total, eng.progress)

    def restore(self, eng: _Engine):
        eng.E, eng.hb, eng.split_index, eng.done, eng._cache = self.E, self.hb, self.split_index, self.done, {}

    def part_of(self, i: int, nb: int) -> Callable | None:
        """Progress for batch ``i`` of ``nb`` run one after the other: its ops map to its share of what is left."""
        if self.progress is None:
            return None
        show, d0, left = self.progress, self.done, self.total - self.done
        return lambda d, t: show(d0 + (i + (d - d0) / max(left, 1)) * left / nb, t)


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
    eng = _Engine(program, _cube(k), _Exact(program, x0, V, lo, hi), progress, max_regions)
    # the float input maps against the exact x = x0 + V (c + h u): c, h, V h and x0 + V c each round
    q = program.input_dim
    size = np.abs(V) @ (np.abs(c) + np.abs(h)) + np.abs(x0)
    eng.E = np.broadcast_to(_gamma(2 * k + 6) * size, (T, q)).copy()
    eng.hb = np.broadcast_to(np.abs(A[0]).sum(axis=0)[0] + eng.E[0], (T, q)).copy()
    with one_thread():  # the engine's float products are those of one BLAS thread wherever it runs (see _blas)
        pieces = eng.solve(program.ops, A)
    blocks = [
        (kind, w, np.concatenate([p.blocks[i][2] for p in pieces])) for i, (kind, w, _) in enumerate(pieces[0].blocks)
    ]
    nv = np.concatenate([p.nv for p in pieces])
    offsets = np.zeros(nv.size + 1, np.int64)
    np.cumsum(nv, out=offsets[1:])
    # the output arrays from the pieces' own (fresh) arrays, in place: a new array per step would fault in its
    # pages again (tens of megabytes on a large count)
    verts = np.concatenate([p.verts for p in pieces])
    verts *= h
    verts += c
    inc = _padded([p.inc for p in pieces], np.uint64(0))
    Mn = np.concatenate([p.maps for p in pieces]).transpose(0, 2, 1)  # (R, out, k+1) in normalised u
    maps = np.empty_like(Mn)
    maps[..., :k] = Mn[..., :k] / h
    maps[..., k] = Mn[..., k] - last_sum(Mn[..., :k] * (c / h))
    fpl = _padded([p.fpl for p in pieces], 0.0)
    ch = c / h
    if k < 8:  # the sum of fpl[..., i] c_i / h_i left to right, as .sum(axis=-1) adds fewer than 8 terms
        shift = fpl[..., 0] * ch[0]
        for i in range(1, k):
            shift += fpl[..., i] * ch[i]
    else:
        shift = last_sum(fpl[..., :k] * ch)
    const = fpl[..., k] - shift
    fpl[..., :k] /= h
    fpl[..., k] = const
    planes = fpl[..., : k + 1]  # the error column stays behind the view
    return Polytopes(
        domain,
        verts,
        offsets,
        maps,
        blocks,
        incidence=inc,
        facet_ids=_padded([p.fid for p in pieces], -1),
        facet_planes=planes,
        exact_decisions=eng.exact_calls,
        program=program,
        float_output=_float_output(program, Mn, np.max([p.E for p in pieces], axis=0)),
    )


#: ops whose float maps the engine's bound ``E`` covers with the code's own decisions (hardmax attention averages
#: keys tied within SNAP, a tolerance: its maps are not offered to the linear merge)
_BOUNDED = frozenset({"affine", "relu", "groupmax", "residual"})


def _float_output(program: Program, Mn: np.ndarray, E: np.ndarray):
    """The output maps ``Mn (R, d_out, k+1)`` in the normalised coordinates (an exact affine image of the
    domain's: ``u = c + h t`` in rationals) as ``(R, k+1, d_out)``, and the engine's bound ``E (d_out,)`` on every
    coefficient's error (the l1 bound of each output entry, valid on every region: the largest of every batch's),
    or None where an op is not covered."""
    if any(op.key not in _BOUNDED for op, _, _ in walk_widths(program)):
        return None
    return np.ascontiguousarray(Mn.transpose(0, 2, 1)), np.asarray(E, dtype=np.float64).copy()
