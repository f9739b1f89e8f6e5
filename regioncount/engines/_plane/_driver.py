"""The plane engine's driver: runs a program's ops on a store of regions, op by op (each by its kernel), in
row batches once the store is large, and builds the :class:`~regioncount.results._partition.Partition`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..._blas import one_thread
from ..._domain import Box, Slice
from ..._errors import DomainError, InexactError, MemoryCapError
from ..._magnitude import check_magnitudes
from ..._memory import check_rss
from ..._predicates import EPS, INEXACT_G, column_granularity, exact_frame_error, sum_bounds
from ...networks import check_domain, lower, walk_widths
from ...networks._ops import Affine, Program, Residual, live_entries
from ...results._partition import Partition
from .. import _fork
from .._exact import ExactMap
from .._fork import default_workers, mid_cuts, restoring, run_here, run_job, splits_regions
from .._protocol import refuse_unsupported
from . import _affine_op, _attention, _groupmax, _relu  # noqa: F401  (each registers its kernel)
from ._kernels import KERNELS
from ._maps import _Added, _Bounds, _Live, _materialise, _take_rows, _Tokens, live_cut
from ._polygon import _FIRST_TAG, _areas, _as_complex
from ._predicates import _Decisions
from ._store import _Store

#: Regions per batch once a partition grows past it (bounds the engine's working memory), for one token; a
#: program with T tokens batches ``BATCH // T**2`` regions: its maps are ``3 T d`` floats per region, and an
#: attention op's scores ``6 H T**2`` (the Thm 4.4 Transformer's sub-box, T = 3, one process: peak 670 MB with
#: ``BATCH``, 337 MB with ``BATCH // T``, 260 MB and 4% less time with ``BATCH // T**2``).
BATCH = 1 << 15

#: Processes that run the row batches of a large partition (forked from this one, each with its share of the
#: resident-memory limit); None: ``REGIONCOUNT_WORKERS`` if set, else one per available core; 1: every batch
#: here, one after the other.
WORKERS: int | None = None

#: Batches run on worker processes only where the partition has at least this many regions when it is cut
#: into batches (below it, starting workers costs more than it saves).
PARALLEL_MIN = 1 << 14

#: Tags of the cuts a batch makes start at ``its batch number * TAG_STRIDE`` past the tags already taken, on a
#: worker or here alike, so that tags stay distinct across batches run apart and the partition (its edge tags
#: included) is the same wherever the batches run.
TAG_STRIDE = 1 << 44


@dataclasses.dataclass
class _Piece:
    """A finished batch of regions, flattened: normalised vertices, counts, edge tags, areas, output maps
    ``(R, 3, out)`` in normalised coordinates, a bound ``(out,)`` on every output coefficient's distance from
    the exact one (the op bounds, :class:`~._maps._Bounds`), and code blocks."""

    verts: np.ndarray
    nv: np.ndarray
    tags: np.ndarray
    rad: np.ndarray
    areas: np.ndarray
    maps: np.ndarray
    blocks: list
    eb: np.ndarray


def _cat(parts: list) -> np.ndarray:
    """The pieces' arrays joined; one piece's array as it is (no copy: the engine made it for this)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _leaves(op) -> int:
    return sum(_leaves(o) for o in op.body) if isinstance(op, Residual) else 1


class _Engine(_Decisions):
    """Applies a program's ops to a store of regions. Once a store holds more than ``batch`` regions at a
    top-level op boundary, the rest of the program runs on row batches one after the other, so the working
    set (maps are ``3 T d`` floats per region) stays bounded while finished regions are kept flat.

        Each op is applied by its kernel (:data:`~._kernels.KERNELS`, one module per op); the exact decisions
        are inherited from :class:`~._predicates._Decisions`."""

    def __init__(self, program: Program, st: _Store, progress, max_regions, batch: int):
        super().__init__(program)
        self.total = len(walk_widths(program))
        self.st: _Store = st
        self.blocks: list = []
        self.progress = progress
        self.max_regions = max_regions
        self.batch = batch
        self.next_tag = _FIRST_TAG
        self.finished = 0  # regions in finished pieces
        self.pending = 0  # regions in batches not yet started
        self._pos = 0.0  # progress, in leaf ops
        self._step = 1.0
        self._shown = 0
        st.cap_check = self.cap_check
        self._after_relu: Affine | None = None
        #: per op (by id), the entries of its output that something after it reads (an affine op or a residual
        #: computes only those where they are few: the affine tail of a Transformer)
        self.live = live_entries(program)
        #: affine ops (by id) whose output a ReLU takes next, little of whose output the affine op after it reads
        #: and computes: they leave it unformed (_Deferred), for the ReLU may settle every unit from their input
        #: (the clipping units of a compiled Transformer's last feed-forward block)
        self.defer: set[int] = set()
        self._find_deferred(program.ops)
        self.in_worker = False  # a forked worker runs its batches itself
        self.cut_once = False  # the store has been cut into batches (the mid-sized cut or BATCH): no cut after

    def _find_deferred(self, ops):
        for op, nxt, then in zip(ops, ops[1:], ops[2:], strict=False):
            if (op.key, nxt.key, then.key) == ("affine", "relu", "affine") and all(
                live_cut(self.live.get(id(o))) is not None for o in (nxt, then)
            ):
                self.defer.add(id(op))
        for op in ops:
            if isinstance(op, Residual):
                self._find_deferred(op.body)

    def take_tags(self, count: int) -> int:
        base = self.next_tag
        self.next_tag += int(count)
        return base

    def cap_check(self, n_current: int):
        check_rss()  # measured, where the store is about to grow
        if self.max_regions is not None and self.finished + self.pending + n_current > self.max_regions:
            raise MemoryCapError(
                f"the partition passed max_regions={self.max_regions} regions; raise the cap, shrink the "
                "domain, or count with --method sample"
            )

    def _tick(self):
        self._pos += self._step
        shown = int(np.floor(self._pos + 1e-9))
        if self.progress is not None and shown > self._shown:
            self._shown = shown
            self.progress(shown, self.total)

    def solve(self, ops, A, bd, span: float, start: int = 0) -> list[_Piece]:
        """Apply the top-level ``ops`` (whose first leaf is leaf ``start`` of the program) to the current
        store, advancing progress by ``span`` leaf ops."""
        leaves = [_leaves(op) for op in ops]
        unit = span / max(1, sum(leaves))
        for k, op in enumerate(ops):
            n = self.st.n
            if (n > self.batch or (n >= _fork.MID_MIN and not self.cut_once)) and splits_regions(ops[k:]):
                rest, at = unit * sum(leaves[k:]), start + sum(leaves[:k])
                if n > self.batch:
                    return self._batched(ops[k:], A, bd, rest, at)
                return self._mid_cut(ops[k:], A, bd, rest, at)
            self._step = unit
            self.pos = start + sum(leaves[:k])
            A, bd, _ = self.run([op], A, bd)
        return [self._finish(A, bd)]

    def _run_batch(self, ops, A, bd, span: float, start: int, st: _Store, blocks: list, lo: int, hi: int):
        """Rows ``lo:hi`` of the store ``st`` (code blocks ``blocks``, maps ``A``) through ``ops``: its pieces."""
        self.st = st.subset(lo, hi)
        self.blocks = [(kind, w, a[lo:hi]) for kind, w, a in blocks]
        return self.solve(ops, _take_rows(A, lo, hi), bd, span, start)

    def _batched(self, ops, A, bd, span: float, start: int) -> list[_Piece]:
        self.cut_once = True
        st, blocks = self.st, self.blocks
        n = st.n
        nb = -(-n // self.batch)
        cuts = np.linspace(0, n, nb + 1).astype(np.int64)
        workers = min(default_workers(WORKERS), nb) if not self.in_worker and n >= PARALLEL_MIN else 1
        if workers > 1:
            return self._forked(ops, A, bd, span, start, cuts, workers)
        return run_here(
            self,
            cuts,
            lambda b, lo, hi: self._run_batch(ops, A, bd, span / nb, start, st, blocks, lo, hi),
            "next_tag",
            TAG_STRIDE,
        )

    def _mid_cut(self, ops, A, bd, span: float, start: int) -> list[_Piece]:
        """The store cut into batches once (:func:`~.._fork.mid_cuts`), paired into jobs that run on a worker and
        here at once where there is a worker, else here one after the other."""
        self.cut_once = True
        st, blocks = self.st, self.blocks
        n = st.n
        cuts, jobs = mid_cuts(n)
        workers = min(default_workers(WORKERS), len(jobs)) if not self.in_worker else 1
        if workers > 1:
            return self._forked(ops, A, bd, span, start, cuts, workers, jobs)
        return run_here(
            self,
            cuts,
            lambda b, lo, hi: self._run_batch(ops, A, bd, span * (hi - lo) / n, start, st, blocks, lo, hi),
            "next_tag",
            TAG_STRIDE,
        )

    def _job_in_worker(self, job: tuple, here: bool = False):
        """The batches ``job`` of :attr:`_fork_job`, one after the other, in a forked child (which starts from this
        engine as it was at the fork): their pieces by batch and the counters they added. ``here``: run in this
        process beside the children (:meth:`_job_here`), reporting progress as if its batches were all of them
        (they are about the children's size)."""
        ops, A, bd, span, start, cuts, st, blocks, tag0 = self._fork_job
        self.in_worker = True
        if not here:
            self.progress = None  # the parent reports progress as jobs finish
        before = (self.n_predicates, self.n_exact, self.n_assumed)

        def batch(k: int, b: int):
            self.next_tag = tag0 + b * TAG_STRIDE
            return self._run_batch(ops, A, bd, span / len(job), start, st, blocks, int(cuts[b]), int(cuts[b + 1]))

        out = run_job(self, job, cuts, batch)
        counts = (self.n_predicates - before[0], self.n_exact - before[1], self.n_assumed - before[2])
        return out, counts

    def _job_here(self, job: tuple):
        """:meth:`_job_in_worker` run in this process (while the children run the other jobs): the same work
        and result, with this engine's state as it was before (the caller adds the counters, as for a child), but
        for the progress it showed (it never goes back)."""
        names = ["st", "blocks", "in_worker", "progress", "next_tag", "pending", "finished", "pos", "_pos"]
        names += ["n_predicates", "n_exact", "n_assumed"]
        # the decisions' tables, which a child's additions never reach either
        names += ["_lines", "_table", "records", "_rec_starts", "_exact_cache"]
        with restoring(self, names):
            return self._job_in_worker(job, here=True)

    def _forked(self, ops, A, bd, span: float, start: int, cuts: np.ndarray, workers: int, jobs=None) -> list[_Piece]:
        """The batches on ``workers`` forked processes (:func:`~.._fork.fork_map`), each job (batches, one after the
        other; by default one batch each) in a child that starts from this engine as it is and sends back its
        finished pieces, the last here: the partition of the batches run here one after the other, edge tags included
        (each batch takes its own tag range, :data:`TAG_STRIDE`, wherever it runs)."""
        from .._fork import fork_map

        nb = cuts.size - 1
        jobs = [(b,) for b in range(nb)] if jobs is None else jobs
        self._fork_job = (ops, A, bd, span, start, cuts, self.st, self.blocks, self.next_tag)
        pos0 = self._pos
        done: dict[int, list[_Piece]] = {}
        rows = np.diff(cuts)
        try:
            for _, (by_batch, (n_pred, n_exact, n_assumed)) in fork_map(
                self._job_in_worker, jobs, workers, here=self._job_here
            ):
                done.update(by_batch)
                self.n_predicates += n_pred
                self.n_exact += n_exact
                self.n_assumed += n_assumed
                self.finished += sum(p.nv.size for ps in by_batch.values() for p in ps)
                self._pos = pos0 + span * rows[list(done)].sum() / rows.sum()
                shown = int(np.floor(self._pos + 1e-9))
                if self.progress is not None and shown > self._shown:
                    self._shown = shown
                    self.progress(shown, self.total)
        finally:
            del self._fork_job
        self.next_tag += nb * TAG_STRIDE
        self.cap_check(0)
        del self.st
        return [p for b in range(nb) for p in done[b]]

    def _finish(self, A, bd: _Bounds) -> _Piece:
        st = self.st
        R = st.n
        t = self.program.out_token
        kept = A.token(t) if isinstance(A, _Live) else None  # the output token kept whole: no full maps
        maps = kept if kept is not None else _materialise(A)[:, :, t, :]
        nv = st.nv[:R].copy()
        valid = np.arange(st.M) < nv[:, None]
        piece = _Piece(
            _as_complex(st.V[:R])[valid].view(np.float64).reshape(-1, 2),  # a vertex as one element
            nv,
            st.tag[:R][valid],
            st.R[:R][valid],
            _areas(st.V[:R]),
            np.ascontiguousarray(maps),
            [(kind, w, a.copy()) for kind, w, a in self.blocks],
            np.asarray(bd.eb[t], np.float64).copy(),
        )
        self.finished += R
        del self.st  # the next batch sets its own store
        return piece

    def run(self, ops, A, bd):
        """Apply ``ops``, each by its kernel (:data:`~._kernels.KERNELS`); returns maps, bounds and the parent
        of each region at entry."""
        chain = np.arange(self.st.n)
        for op in ops:
            if isinstance(A, _Added):  # lazy only until the store is split into batches
                A = A.full()
            A, bd, par = KERNELS.lookup(op)(self, op, A, bd)
            if par is not None:
                chain = chain[par]
        return A, bd, chain


@KERNELS.register("residual")
def residual(eng: _Engine, op: Residual, A, bd: _Bounds):
    """``H + body(H)``: the body runs on a copy of the maps; each region adds its parent's input maps."""
    A_in, bd_in = _materialise(A), bd
    A_b, bd_b, par = eng.run(op.body, A_in, bd)
    same = par.size == A_in.shape[0] and np.array_equal(par, np.arange(par.size))
    cut = None if isinstance(A_b, _Tokens) else live_cut(eng.live.get(id(op)))
    if cut is not None:
        # most of its output is read by nothing after it: only the rest is added, and kept apart (_Live)
        toks, cols = cut
        ti, ci = toks[:, None], cols[None, :]
        x = A_in[:, :, ti, ci][par]
        if isinstance(A_b, _Live) and np.array_equal(A_b.toks, toks) and np.array_equal(A_b.cols, cols):
            x += A_b.vals  # x + y == y + x exactly
        else:
            x += _materialise(A_b)[:, :, ti, ci]
        A = _Live(x, toks, cols, A_in.shape[2], A_in.shape[3])
    elif isinstance(A_b, _Tokens):
        if not same:  # kept lazy (see _Added): a batched count gathers its batches' rows only
            A = _Added(A_in, par, A_b)
        else:
            A = A_in.copy()
            A_b.add_to(A)  # x + y == y + x exactly
    elif same:
        A = _materialise(A_b)  # no region split: no gather
        if A is A_b and np.may_share_memory(A, A_in):
            A = A + A_in
        else:  # a fresh array of the body's: add in place (x + y == y + x exactly), no new store of maps
            A += A_in
    else:
        A = A_in[par]  # a fresh array: add in place (x + y == y + x exactly)
        A += _materialise(A_b)
    hb, eb, ge = sum_bounds(bd_in.hb, bd_in.eb, bd_in.ge, bd_b.hb, bd_b.eb, bd_b.ge)
    bd = _Bounds(hb, eb, ge, bd_in.same_u and bd_b.same_u, bd_in.u_bound() + bd_b.u_bound())
    bd.check_finite()
    return A, bd, par


def _frame(program: Program, domain):
    """Input map in normalised coordinates: ``x = x0 + V (c + h u')``; returns ``(x0', V', c, h)``."""
    q = program.input_dim
    if q < 2:
        raise DomainError("the network takes 1 input, so it has no 2D domain: use --method line")
    if isinstance(domain, Slice):
        if domain.x0.shape[0] != q:
            raise DomainError(f"the slice lives in R^{domain.x0.shape[0]} but the network takes {q} inputs")
    elif isinstance(domain, Box):
        if domain.dim != 2 or q != 2:
            raise DomainError(
                f"the exact 2D engines need a 2D domain: a 2D box for a 2-input network, or a Slice for a "
                f"{q}-input one (got a {domain.dim}D box)"
            )
    else:
        raise DomainError("the exact 2D engines need a 2D Box or a Slice")
    x0, V = domain.input_map()
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    c, h = (lo + hi) / 2, (hi - lo) / 2
    corners = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    X = x0 + corners @ V.T
    return x0 + V @ c, V * h, c, h, X.min(axis=0), X.max(axis=0)


def partition_plane(
    net,
    domain,
    *,
    max_regions: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Partition:
    """Exact partition of a 2D domain into the activation regions of ``net`` (docs/design.md §3 ``plane``).

    ``net``: an MLP, Maxout, hardmax Transformer or lowered :class:`Program`. ``domain``: a 2D
    :class:`Box` for a 2-input network, or a :class:`Slice` (required when the input dimension is not 2).
    ``max_regions``: raise :class:`MemoryCapError` once the partition would exceed it.
    ``progress(done_ops, total_ops)`` is called after each op.

    Every region of positive area is found, however small: signs are decided exactly (see the module
    docstring). ``Partition.stats`` reports the number of vertex sign tests, how many needed exact arithmetic,
    and how many attention identities (ties, straight boundaries) were taken from bitwise-equal floats whose
    error bounds are not zero (``assumed``: 0 means every decision was proven).

    Raises :class:`CurvedBoundaryError` where a hardmax boundary is a quadric or for ReLU attention,
    :class:`NotPiecewiseError` for softmax attention, :class:`DomainError` for a wrong domain, and
    :class:`InexactError` where float64 overflows or a sign can be decided neither by its bound nor exactly.

    Examples
    --------
    Three ReLU units whose lines ``x = 0``, ``y = 0``, ``x + y = 1/2`` meet pairwise inside the square, no
    three at one point: ``1 + 3 + 3 = 7`` regions (Zaslavsky 1975), as many as the bound allows:

    >>> import regioncount as rc
    >>> net = rc.MLP(([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], [[1.0, 2.0, 3.0]]), ([0.0, 0.0, 0.5], [0.0]))
    >>> part = rc.partition_plane(net, rc.Box(-1, 1, 2))
    >>> part.n_regions, part.linear_regions(), rc.relu_upper_serra([3], 2), part.stats["assumed"]
    (7, 7, 7, 0)
    >>> float(part.areas.sum())
    4.0
    """
    program = lower(net)
    refuse_unsupported("plane", (op for op, _, _ in walk_widths(program)))
    check_magnitudes(program, domain)  # refuse magnitudes whose float bounds could overflow
    x0n, Vn, c, h, xlo, xhi = _frame(program, domain)
    check_domain(net, xlo, xhi)
    T = program.tokens
    q = program.input_dim
    A = np.zeros((1, 3, T, q))
    A[0, 0] = Vn[:, 0]
    A[0, 1] = Vn[:, 1]
    A[0, 2] = x0n
    hb = np.broadcast_to(np.abs(Vn).sum(axis=1) + np.abs(x0n), (T, q)).copy()
    x0, V = domain.input_map()
    lo, hi = np.asarray(domain.param_lo, float), np.asarray(domain.param_hi, float)
    ce = [(Fraction(lo[k]) + Fraction(hi[k])) / 2 for k in range(2)]
    he = [(Fraction(hi[k]) - Fraction(lo[k])) / 2 for k in range(2)]
    e0 = exact_frame_error(x0n, Vn, np.asarray(x0, float), np.asarray(V, float), ce, he)
    ge0 = np.broadcast_to(column_granularity(A[0], 0), (T, q)).copy() if e0 == 0 else np.full((T, q), INEXACT_G)
    hu = np.broadcast_to(np.abs(Vn).sum(axis=1), (T, q)).copy()
    bd = _Bounds(hb, np.full((T, q), e0), ge0, same_u=True, hu=hu)
    bd.check_finite()
    square = np.array([[[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]]])
    st = _Store(square, np.array([4]), np.array([[0, 1, 2, 3, -1]], np.int64), None)
    eng = _Engine(program, st, progress, max_regions, max(1, BATCH // (T * T)))
    M0 = np.empty((3, T, q), dtype=object)
    for i in range(q):
        for k in range(2):
            M0[k, :, i] = Fraction(V[i, k]) * he[k]
        M0[2, :, i] = Fraction(x0[i]) + sum(Fraction(V[i, k]) * ce[k] for k in range(2))
    eng.M0 = ExactMap.of_fractions(M0)
    # one BLAS thread: the engine's float products are then the same wherever its batches run (see _blas)
    with np.errstate(over="raise", invalid="raise"), one_thread():
        try:
            pieces = eng.solve(program.ops, A, bd, float(eng.total))
        except FloatingPointError as exc:
            raise InexactError(
                "float64 overflow: the network's values exceed the range of float64 on this domain, so no exact "
                "count can be made; rescale the network's weights or shrink the domain"
            ) from exc
    nv = _cat([p.nv for p in pieces])
    offsets = np.zeros(nv.size + 1, np.int64)
    np.cumsum(nv, out=offsets[1:])
    verts = _cat([p.verts for p in pieces])
    verts *= h  # in place: the pieces' arrays are the engine's own (the same values as c + h * verts)
    verts += c
    tags = _cat([p.tags for p in pieces])
    areas = _cat([p.areas for p in pieces])
    areas *= h[0] * h[1]
    Mn = _cat([p.maps for p in pieces]).transpose(0, 2, 1)  # (R, out, 3) in u'
    maps = np.empty_like(Mn)
    maps[..., 0] = Mn[..., 0] / h[0]
    maps[..., 1] = Mn[..., 1] / h[1]
    maps[..., 2] = Mn[..., 2] - Mn[..., 0] * c[0] / h[0] - Mn[..., 1] * c[1] / h[1]
    blocks = [(kind, w, _cat([p.blocks[i][2] for p in pieces])) for i, (kind, w, _) in enumerate(pieces[0].blocks)]
    rad = _cat([p.rad for p in pieces]) * float(np.max(h)) + 4 * EPS * float(np.max(np.abs(c) + h))
    stats = {
        "predicates": eng.n_predicates,
        "exact_predicates": eng.n_exact,
        "assumed": eng.n_assumed,
        "min_area": float(areas.min()) if areas.size else None,
    }
    # the engine's own output maps and their error bounds (every batch's bound, the largest): the linear-region
    # merge compares these instead of re-composing every region's map from its code (results/_linear.py)
    eb = np.max([p.eb for p in pieces], axis=0) if pieces else np.zeros(0)
    part = Partition(
        domain,
        verts,
        offsets,
        maps,
        areas,
        blocks,
        edge_tags=tags,
        vertex_error=rad,
        stats=stats,
        copy=False,
        program=program,
        engine_maps=(Mn.transpose(0, 2, 1), eb),
    )
    return part
