"""Connected components of a region graph, shared by every result type."""

from __future__ import annotations

import numpy as np


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
