"""The plane engine's exact replay: exact maps of regions at the start of any leaf op, memoised by code prefix.

The maps come from the one exact interpreter of codes (:mod:`regioncount.networks._interpret`, its ``EXACT``
kernels); the bounds and predicates from :mod:`regioncount._predicates`, re-exported here for the plane
engine's modules (docs/design.md §3).
"""

from __future__ import annotations

import numpy as np

from .._predicates import (  # noqa: F401  (re-exported: the engines import them from here)
    EPS,
    ETA,
    INEXACT_G,
    TINY,
    ZERO_G,
    affine_bounds,
    column_granularity,
    exact_frame_error,
    finite_or_raise,
    gamma,
    granularity,
    int_intersection,
    int_line,
    int_vertex_sign,
    intersection,
    point_sign,
    sum_bounds,
    underflow_slack,
    vertex_sign,
)
from ..networks._interpret import (  # noqa: F401  (re-exported for the plane engine)
    EXACT,
    ExactMap,
    _exact_attention,
    exact_affine,
    exact_scores,
    exact_weights,
)
from ..networks._ops import Residual


class ExactReplay:
    """Exact maps of regions at the start of a leaf op, from the weights and the regions' codes, with the
    states at earlier split ops memoised by code prefix (regions that share a prefix share the work; an LRU
    of ``size`` states bounds the memory)."""

    def __init__(self, program, M0: ExactMap, size: int = 8192):
        from collections import OrderedDict

        self.M0 = M0
        self.size = size
        self.memo: OrderedDict = OrderedDict()
        # flattened program: ("push",), ("pop",), ("leaf", op, leaf index, split?, kernel); each op's kernel is
        # looked up once here, not per region
        self.ins: list[tuple] = []
        self.leaf_pos: dict[int, int] = {}
        self.split_before: dict[int, int] = {}  # leaf index -> split leaves before it
        count = {"leaf": 0, "split": 0}

        def flat(ops):
            for op in ops:
                if isinstance(op, Residual):
                    self.ins.append(("push",))
                    flat(op.body)
                    self.ins.append(("pop",))
                else:
                    i = count["leaf"]
                    self.leaf_pos[i] = len(self.ins)
                    self.split_before[i] = count["split"]
                    split = op.key != "affine"
                    self.ins.append(("leaf", op, i, split, EXACT.lookup(op)))
                    count["leaf"] += 1
                    count["split"] += split

        flat(program.ops)

    def affine_before(self, leaf: int):
        """The Affine op that leaf ``leaf`` reads directly (the instruction before it), or None."""
        pos = self.leaf_pos[leaf]
        if pos == 0:
            return None
        ins = self.ins[pos - 1]
        return ins[1] if ins[0] == "leaf" and ins[1].is_affine else None

    def _step(self, ins, M, stack, code):
        if ins[0] == "push":
            return M, stack + (M,)
        if ins[0] == "pop":
            return stack[-1] + M, stack[:-1]
        _, op, _, split, kernel = ins
        return kernel(op, M, np.asarray(code).astype(np.int64) if split else None, None), stack

    def maps_at(self, code_rows: list, stop_leaf: int) -> ExactMap:
        """The exact maps at the start of leaf ``stop_leaf``; ``code_rows``: the region's decisions at every
        earlier split leaf (``np.uint8``-viewable int arrays)."""
        k_stop = self.split_before[stop_leaf]
        keys = [b""]
        acc = b""
        for row in code_rows[:k_stop]:
            acc += np.ascontiguousarray(row).tobytes() + b"|"
            keys.append(acc)
        # split-leaf starts are where states are memoised: (instruction position, prefix of k splits)
        start, M, stack, k0 = 0, self.M0, (), 0
        split_pos = [p for p, ins in enumerate(self.ins) if ins[0] == "leaf" and ins[3]]
        for k in range(min(k_stop, len(split_pos) - 1), 0, -1):
            pos = split_pos[k]
            if pos > self.leaf_pos[stop_leaf]:
                continue
            hit = self.memo.get((pos, keys[k]))
            if hit is not None:
                self.memo.move_to_end((pos, keys[k]))
                start, (M, stack), k0 = pos, hit, k
                break
        k = k0
        stop = self.leaf_pos[stop_leaf]
        for pos in range(start, stop):
            ins = self.ins[pos]
            if ins[0] == "leaf" and ins[3]:
                if pos != start:
                    self.memo[(pos, keys[k])] = (M, stack)
                    if len(self.memo) > self.size:
                        self.memo.popitem(last=False)
                M, stack = self._step(ins, M, stack, code_rows[k])
                k += 1
            else:
                M, stack = self._step(ins, M, stack, None)
        self.memo[(stop, keys[k])] = (M, stack)
        if len(self.memo) > self.size:
            self.memo.popitem(last=False)
        return M
