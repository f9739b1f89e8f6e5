"""Linear regions (Montúfar et al. 2014), decided exactly: the one merge every result type uses.

Two neighbouring activation regions belong to one linear region when the network's output is the same affine
map on both, in exact arithmetic on the float64 network as given. :func:`same_maps` decides each neighbour
pair:

1. the float maps of both regions are recomputed from their codes with a rigorous bound on every
   coefficient (:func:`regioncount.networks._interpret.float_maps`); where some coefficient differs by more
   than the two bounds (the float difference shrunk by its own rounding), the maps differ: decided;
2. where the float maps are bitwise equal and both bounds are zero (the floats are the exact values), they
   are equal: decided;
3. every other pair is decided in rational arithmetic from the weights and the two codes
   (:class:`regioncount.networks._interpret.ExactProgram`).

No relative tolerance enters. :func:`linear_labels` turns the decided pairs into labels. A result type that
has its network's program and codes calls these; without them (a partition built by hand from arrays) the
float rule ``maps_agree`` with a tolerance remains, and the result says its linear regions are not exact.
"""

from __future__ import annotations

import numpy as np

from .._predicates import EPS, gamma
from ..networks._interpret import ExactProgram, exact_equal, float_maps
from ..networks._protocol import SUPPORT, op_key

#: regions per batch of the float interpretation (bounds its memory)
_BATCH = 2048


def _float_supported(program) -> bool:
    from ..networks._ops import walk_widths

    return all(SUPPORT["float"][op_key(op)] is None for op, _, _ in walk_widths(program))


def check_program(program) -> None:
    """Refuse, before any work, a program with an op the merge cannot interpret (its row of the op protocol)."""
    from ..networks._ops import walk_widths
    from ..networks._protocol import refuse_unsupported

    refuse_unsupported("linear", (op for op, _, _ in walk_widths(program)))


def output_maps(program, codes, x0, V):
    """Float output maps ``(R, c, d_out)`` of regions with codes ``codes (R, C)`` and a bound ``(R, d_out)`` on
    every coefficient's distance from the exact one, or ``(None, None)`` where the float interpreter has no
    bounds for an op of ``program`` (every pair is then decided exactly)."""
    if not _float_supported(program):
        return None, None
    R = codes.shape[0]
    F, E = [], []
    for lo in range(0, R, _BATCH):
        A, Eb, _ = float_maps(program, codes[lo : lo + _BATCH], x0, V)
        F.append(A[:, :, program.out_token])
        E.append(Eb[:, program.out_token])
    if not F:
        c = np.asarray(V).shape[1] + 1
        return np.zeros((0, c, 0)), np.zeros((0, 0))
    return np.concatenate(F), np.concatenate(E)


def candidate_labels(F, E) -> list:
    """Two labellings ``(R,)`` such that any two regions whose exact output maps can be equal share a label in
    at least one of them: a fixed projection ``s`` (weights in [1, 2)) of the float maps moves by at most
    ``delta`` between equal exact maps, so on grids of spacing ``4 delta`` at offsets 0 and 1/2 two such regions
    fall in one cell of one grid (one dimension: no corner can separate them in both). ``None`` where the bounds
    are unusable (every pair is then a candidate)."""
    R = F.shape[0]
    if R == 0 or not np.all(np.isfinite(E)):
        return [None]
    # the projection's weights in [1, 2): a Weyl sequence (any weights serve the bound; spread ones separate
    # distinct maps), fixed, without importing numpy.random for it (5 ms of a command's start-up)
    r = 1.0 + (np.arange(1, F.shape[1] * F.shape[2] + 1) * 0.6180339887498949 % 1.0).reshape(F.shape[1:])  # (c, d)
    s = np.einsum("rcd,cd->r", F, r)
    n = F.shape[1] * F.shape[2]
    err = gamma(n + 1) * np.einsum("rcd,cd->r", np.abs(F), r) * (1 + 4 * EPS)
    # |s_i - s_j| <= sum_cd r_cd (E_i[d] + E_j[d]) plus the rounding of both projections
    delta = 2 * (float(np.max(E @ r.sum(axis=0))) * (1 + gamma(n)) + float(np.max(err))) * (1 + 4 * EPS)
    unit = 4 * delta
    if not np.isfinite(unit) or unit <= 0 or not np.all(np.isfinite(s / unit)):
        return [None]
    return [np.floor(s / unit + shift).astype(np.int64) for shift in (0.0, 0.5)]


def candidate_pairs(F, E, find) -> np.ndarray | None:
    """The neighbour pairs whose exact output maps can be equal, from float output maps ``F (R, c, d_out)`` and
    their error bounds ``E (R, d_out)``: pairs that share a label of one of the two grids of
    :func:`candidate_labels`. ``find(grids)`` gets the grids that offer a pair, as ``(g (R,), mask (R,))`` with
    ``mask`` the regions sharing their label ``g`` with another, and gives distinct neighbour pairs ``(m, 2)``
    covering every neighbour pair of equal labels in one of them (each result type matches its own facets: one
    search over the union of the masks, or one per grid); only those pairs are kept. No pair where every label
    is a region's own; ``None`` where the bounds are unusable (every neighbour pair is then a candidate)."""
    from ._graph import shared

    grids = candidate_labels(F, E)
    if any(g is None for g in grids):
        return None
    offer = [(g, m) for g, m in ((g, shared(g)) for g in grids) if m.any()]
    if not offer:
        return np.zeros((0, 2), np.int64)
    P = find(offer)
    keep = np.zeros(P.shape[0], bool)
    for g, _ in offer:
        keep |= g[P[:, 0]] == g[P[:, 1]]
    return P[keep]


def same_maps(pairs: np.ndarray, program, codes, x0, V, stats: dict | None = None, float_maps_=None) -> np.ndarray:
    """``(m,)`` bool: whether the output maps of regions ``pairs[:, 0]`` and ``pairs[:, 1]`` are equal in exact
    arithmetic (module docstring). ``codes (R, C)``: flat codes in the forward pass's layout, or a function
    ``codes(index) -> (n, C)`` giving the rows ``index`` (then only the rows the exact step needs are expanded;
    ``float_maps_`` is required with it); ``x = x0 + V u`` the domain's input map (floats taken exactly).
    ``float_maps_ (F (R, c, d_out), E (R, d_out))``: float output maps in any coordinates that are an exact
    invertible affine image of ``u``, with a rigorous bound on each coefficient's error (default: recomputed
    from the codes by :func:`output_maps`). ``stats`` (optional) receives how many pairs each step decided."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if float_maps_ is None:
        codes = np.asarray(codes)
        F, E = output_maps(program, codes, x0, V)
    else:
        F, E = float_maps_
    out = np.zeros(pairs.shape[0], bool)
    undecided = np.ones(pairs.shape[0], bool)
    n_float = 0
    if F is not None and pairs.size:
        a, b = pairs[:, 0], pairs[:, 1]
        diff = np.abs(F[a] - F[b])  # (m, c, d): rounded by at most EPS relative
        bound = (E[a] + E[b])[:, None, :] * (1 + 4 * EPS)
        differ = np.any(diff * (1 - 2 * EPS) > bound, axis=(1, 2))
        equal = np.all(diff == 0, axis=(1, 2)) & np.all(E[a] == 0, axis=1) & np.all(E[b] == 0, axis=1)
        out[equal] = True
        undecided = ~(differ | equal)
        n_float = int(np.sum(~undecided))
    idx = np.flatnonzero(undecided)
    if idx.size:
        ex = ExactProgram.of_domain(program, x0, V, size=max(4096, 2 * idx.size))
        need = np.unique(pairs[idx])
        rows = codes(need) if callable(codes) else np.asarray(codes)[need]
        at = {int(r): k for k, r in enumerate(need.tolist())}
        for e in idx.tolist():
            i, j = at[int(pairs[e, 0])], at[int(pairs[e, 1])]
            out[e] = exact_equal(ex.output(rows[i]), ex.output(rows[j]))
    if stats is not None:
        stats.update(linear_pairs=int(pairs.shape[0]), linear_float=n_float, linear_exact=int(idx.size))
    return out


def linear_labels(
    n: int, pairs: np.ndarray, program, codes, x0, V, stats: dict | None = None, float_maps_=None
) -> np.ndarray:
    """Label ``(n,)`` (the smallest member) of the linear region of each of ``n`` activation regions whose
    neighbour pairs are ``pairs (m, 2)``: connected components of the pairs with exactly equal maps."""
    from ._graph import _components

    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    check_program(program)
    if pairs.size == 0:
        return np.arange(n)
    keep = same_maps(pairs, program, codes, x0, V, stats, float_maps_)
    return _components(n, pairs[keep])


__all__ = ["linear_labels", "same_maps", "output_maps", "candidate_pairs"]
