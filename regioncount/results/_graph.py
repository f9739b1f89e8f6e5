"""Connected components of a region graph, shared by every result type."""

from __future__ import annotations

import numpy as np


def n_labels(labels: np.ndarray) -> int:
    """How many distinct values labels in ``0 .. n-1`` (one per region, e.g. :func:`_components`) take: a count,
    not a sort."""
    lab = np.asarray(labels).reshape(-1)
    return int(np.count_nonzero(np.bincount(lab, minlength=1))) if lab.size else 0


def shared(labels: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: the entries of ``labels (n,)`` whose value another entry also takes."""
    # a sort and its neighbours, not np.isin: isin (and np.unique) import numpy.ma, 7 ms of a command's start-up
    # the values sorted (faster than the sorting permutation), then each entry looked up among those taken twice
    s = np.sort(labels)
    twice = s[1:][s[1:] == s[:-1]]  # sorted
    if twice.size == 0:
        return np.zeros(labels.shape, bool)
    k = np.minimum(np.searchsorted(twice, labels), twice.size - 1)
    return twice[k] == labels


def dense_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-D integer array, by a sort: the distinct values (sorted)
    and each entry's index among them. np.unique imports numpy.ma (10-30 ms, once per process: each forked worker
    of a tiled count paid it)."""
    order = np.argsort(values, kind="stable")
    s = values[order]
    new = np.ones(s.size, bool)
    new[1:] = s[1:] != s[:-1]
    inv = np.empty(values.size, np.intp)
    inv[order] = np.cumsum(new) - 1
    return s[new], inv


def _components(n: int, E: np.ndarray) -> np.ndarray:
    """Connected-component labels ``(n,)`` (smallest member) of the graph with edges ``E (m, 2)``;
    vectorised union-find: hook roots to smaller roots, then jump pointers."""
    parent = np.arange(n)
    if E.size == 0:
        return parent
    a, b = E[:, 0], E[:, 1]
    while True:
        pa, pb = parent[a], parent[b]
        diff = pa != pb
        if not diff.any():
            return parent
        lo, hi = np.minimum(pa, pb)[diff], np.maximum(pa, pb)[diff]
        np.minimum.at(parent, hi, lo)
        while True:
            nxt = parent[parent]
            if np.array_equal(nxt, parent):
                break
            parent = nxt
