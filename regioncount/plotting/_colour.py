"""Colours for region pictures: a greedy colouring of the region graph, so neighbours never share a colour.

Region graphs of plane partitions are planar, and greedy colouring in smallest-last (degeneracy) order
uses at most 6 colours on a planar graph (every planar graph has a vertex of degree <= 5). Grids of
sampled code ids can give non-planar graphs (one code met in several places); the colouring stays
proper there and the palette grows if it has to.
"""

from __future__ import annotations

import numpy as np

#: Light fills (ColorBrewer Set3 tints) under which dark boundaries and level lines stay readable.
PALETTE = (
    "#a6dcd3",
    "#fff3a8",
    "#cdc9e8",
    "#f7b2a8",
    "#a9cbe6",
    "#fdd3a6",
    "#cfe8a4",
    "#f6d3e4",
)


def greedy_colouring(n: int, edges, spread: int = 0, prefer=None) -> np.ndarray:
    """A proper colouring of the graph on nodes ``0..n-1`` with ``edges (E, 2)`` -> colour index ``(n,)`` int64.

    Greedy in smallest-last order (Matula and Beck 1983): when a node is coloured at most ``degeneracy``
    of its neighbours already are, so at most ``max(degeneracy + 1, spread)`` colours are used (at most 6
    on planar graphs with ``spread=0``). ``spread``: pick the least-used free colour among the first
    ``spread`` (fills a palette evenly instead of using as few colours as possible); a new colour only
    when all of those are taken by neighbours. ``prefer (n,)``: a colour each node takes when no neighbour
    has it yet (-1: none), e.g. the colour of the region it was split from. Self-loops and repeated edges are
    ignored. Deterministic; O(n + E) Python steps (times ``spread``).
    """
    E = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    E = E[E[:, 0] != E[:, 1]]
    if E.size:
        E = np.unique(np.sort(E, axis=1), axis=0)
    # CSR neighbour lists
    both = np.concatenate([E, E[:, ::-1]])
    both = both[np.argsort(both[:, 0], kind="stable")]
    start = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(both[:, 0], minlength=n), out=start[1:])
    nbr = both[:, 1].tolist()
    start_l = start.tolist()
    degree = np.diff(start).tolist()

    # smallest-last order: repeatedly remove a node of least remaining degree (bucket queue)
    buckets: list[set[int]] = [set() for _ in range(max(degree, default=0) + 1)]
    for v, d in enumerate(degree):
        buckets[d].add(v)
    removed = [False] * n
    order: list[int] = []
    low = 0
    for _ in range(n):
        while not buckets[low]:
            low += 1
        v = buckets[low].pop()
        removed[v] = True
        order.append(v)
        for w in nbr[start_l[v] : start_l[v + 1]]:
            if not removed[w]:
                d = degree[w]
                buckets[d].discard(w)
                degree[w] = d - 1
                buckets[d - 1].add(w)
        low = max(low - 1, 0)

    colour = [-1] * n
    used = [0] * spread
    want = [-1] * n if prefer is None else np.asarray(prefer, dtype=np.int64).tolist()
    for v in reversed(order):
        taken = {colour[w] for w in nbr[start_l[v] : start_l[v + 1]]}
        free = [c for c in range(spread) if c not in taken]
        if want[v] >= 0 and want[v] not in taken:
            c = want[v]
            if c < spread:
                used[c] += 1
        elif free:
            c = min(free, key=used.__getitem__)
            used[c] += 1
        else:
            c = spread
            while c in taken:
                c += 1
        colour[v] = c
    return np.asarray(colour, dtype=np.int64)


def palette(count: int) -> list[str]:
    """``count`` distinct fill colours: :data:`PALETTE` first, then evenly spaced hues if more are needed."""
    import matplotlib.colors as mcolors

    out = list(PALETTE[:count])
    extra = count - len(out)
    if extra > 0:
        hues = (np.arange(extra) * 0.618034) % 1.0  # golden-ratio steps keep consecutive hues apart
        hsv = np.stack([hues, np.full(extra, 0.35), np.full(extra, 0.95)], axis=1)
        out += [mcolors.to_hex(c) for c in mcolors.hsv_to_rgb(hsv)]
    return out
