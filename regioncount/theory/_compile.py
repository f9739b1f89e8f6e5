"""Maxout -> hardmax transformer compiler (DESIGN §5), exact on a bounded box.

A rank-k Maxout network becomes a Transformer on T = k tokens; token t computes piece t of every
unit, one hardmax head per unit takes the max over tokens. Every token's stream is

    [ x-slot (X) | one-hot e_t (T) | 1 | z-slot (Z) | max-slot (Z) ]

with X the widest layer input that has to sit in the x-slot and Z the widest layer. All FFN ReLUs see
``±v + C`` or ``a ± C`` with ``|v|, |a| < C`` on the box, so none of them ever switches there; the
only decisions the compiled model makes are the hardmax argmaxes, which are the maxout argmaxes.
The lower bound it is measured against is Gu, Yang, Zhou 2026 (arXiv 2603.03084), Thm 4.4.
"""

from __future__ import annotations

import math

import numpy as np

from .._domain import Box
from ..networks import Block, Maxout, Transformer, pad_to_depth
from ._bounds import _int, maxout_lower, transformer_maxout_lower
from ._constructions import maxout_fold_pieces, product_maxout, product_maxout_regions

LAYOUTS = ("paper", "compact")


#: Cells :func:`preactivation_bound` starts from (about; a grid of equal cells per axis), and the most it
#: refines to.
BOUND_CELLS = 4096
BOUND_MAX_CELLS = 1 << 17


def _cell_bounds(net: Maxout, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell ``[lo, hi]`` (``(G, q)`` each): an interval bound (centre-radius form, layer by layer) on
    ``|x|`` and on every piece and unit value, and the largest ``|piece|`` at the cell's centre (a value the
    network takes there)."""
    bound = np.maximum(np.abs(lo), np.abs(hi)).max(axis=1)
    h_lo, h_hi = lo, hi
    c = (lo + hi) / 2
    met = np.zeros(lo.shape[0])
    for W, b in zip(net.weights, net.biases, strict=True):
        mid, rad = (h_lo + h_hi) / 2, (h_hi - h_lo) / 2
        a_mid = np.einsum("kni,gi->gkn", W, mid) + b  # (cells, k, n)
        a_rad = np.einsum("kni,gi->gkn", np.abs(W), rad)
        a_lo, a_hi = a_mid - a_rad, a_mid + a_rad
        bound = np.maximum(bound, np.maximum(np.abs(a_lo), np.abs(a_hi)).max(axis=(1, 2)))
        h_lo, h_hi = a_lo.max(axis=1), a_hi.max(axis=1)
        a_c = np.einsum("kni,gi->gkn", W, c) + b
        met = np.maximum(met, np.abs(a_c).max(axis=(1, 2)))
        c = a_c.max(axis=1)
    return bound, met


def _power_of_two_above(x: float) -> float:
    m, e = math.frexp(x)
    return math.ldexp(1.0, e) if m != 0.5 else x


def preactivation_bound(net: Maxout, lo, hi) -> float:
    """An upper bound on ``|x|`` and on every maxout piece and unit value over the box ``[lo, hi]``, by
    interval arithmetic (centre-radius form), layer by layer, on cells of the box (the largest over the cells).
    Intervals widen with the width they start from, so the box is cut into a grid of about
    :data:`BOUND_CELLS` cells, and the cells whose bound keeps :func:`compile_constant` above the power of two
    that the values met at cell centres need are halved along every axis, while that can still lower it and
    the cells stay under :data:`BOUND_MAX_CELLS` (the (12, 12, 12) fold network on [-1, 2]^2: 2,283 against
    133,887 from the box alone, with 720 the largest value met on a fine grid). ``lo, hi`` are
    scalars or ``(q,)``."""
    q = net.input_dim
    lo = np.broadcast_to(np.asarray(lo, np.float64), (q,))
    hi = np.broadcast_to(np.asarray(hi, np.float64), (q,))
    g = max(1, int(round(BOUND_CELLS ** (1.0 / q))))
    while g**q > BOUND_CELLS and g > 1:
        g -= 1
    idx = np.stack(np.meshgrid(*[np.arange(g)] * q, indexing="ij"), axis=-1).reshape(-1, q)
    step = (hi - lo) / g
    c_lo = np.minimum(lo + idx * step, hi)
    c_hi = np.where(idx == g - 1, hi, np.minimum(lo + (idx + 1) * step, hi))  # the last cell ends at hi exactly
    done = 0.0  # the largest bound of the cells no longer refined
    met = 0.0
    while True:
        bound, m = _cell_bounds(net, c_lo, c_hi)
        met = max(met, float(m.max(initial=0.0)))
        # a bound under (target - 1) / 2 gives the smallest constant the values met allow
        target = _power_of_two_above(2.0 * met + 1.0)
        split = bound > (target - 1.0) / 2
        if not split.any() or c_lo.shape[0] + split.sum() * (2**q - 1) > BOUND_MAX_CELLS:
            return max(done, float(bound.max(initial=0.0)))
        done = max(done, float(bound[~split].max(initial=0.0)))
        s_lo, s_hi = c_lo[split], c_hi[split]
        s_mid = (s_lo + s_hi) / 2
        corners = np.stack(np.meshgrid(*[np.arange(2)] * q, indexing="ij"), axis=-1).reshape(-1, q).astype(bool)
        c_lo = np.concatenate([np.where(k, s_mid, s_lo) for k in corners])
        c_hi = np.concatenate([np.where(k, s_hi, s_mid) for k in corners])


def compile_constant(net: Maxout, lo, hi) -> float:
    """The constant C of the compiled model: the smallest power of two at least 2 B + 1, with
    B = :func:`preactivation_bound`, so every FFN ReLU input keeps a margin of at least B + 1 from zero on
    the box. A power of two adds no significant bits: where the Maxout network's maps are exact binary
    fractions (integer weights, a dyadic box) the compiled model's ``a + C - C`` are exact in float64 too,
    so its boundary lines are the Maxout network's exact float lines and the plane engine decides their
    signs from the floats, not by recomputing them in rationals."""
    return _power_of_two_above(2.0 * preactivation_bound(net, lo, hi) + 1.0)


class _Stream:
    """Column indices of the token stream."""

    def __init__(self, X: int, T: int, Z: int):
        self.X, self.T, self.Z = X, T, Z
        self.e = X  # one-hot e_t occupies e .. e + T - 1
        self.one = X + T
        self.z = X + T + 1
        self.m = X + T + 1 + Z
        self.d = X + T + 1 + 2 * Z


def _block(d: int, heads=None, ffn=None) -> Block:
    """A Block from optional attention ``(Wq, Wk, Wv, Wo)`` and FFN ``(W1, b1, W2, b2)`` parts."""
    Wq, Wk, Wv, Wo = heads if heads is not None else (np.zeros((0, d, 1)),) * 3 + (np.zeros((0, 1, d)),)
    W1, b1, W2, b2 = ffn if ffn is not None else (np.zeros((0, d)), np.zeros(0), np.zeros((d, 0)), np.zeros(d))
    return Block(Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, W1=W1, b1=b1, W2=W2, b2=b2)


class _FFN:
    """Accumulates hidden ReLU neurons ``relu(w . h + c)`` that each add ``scale *`` their value to one
    stream entry, plus a constant ``b2``."""

    def __init__(self, s: _Stream):
        self.s = s
        self.rows: list[np.ndarray] = []
        self.b1: list[float] = []
        self.targets: list[int] = []
        self.b2 = np.zeros(s.d)

    def neuron(self, w: np.ndarray, c: float, target: int) -> None:
        self.rows.append(w)
        self.b1.append(c)
        self.targets.append(target)

    def pieces(self, W: np.ndarray, b: np.ndarray, src: int, C: float) -> None:
        """z_{i,t} = sum_s relu(a_{i,s}(h) + 2C e_{t,s} - C) - C, h read from columns ``src ..``
        (DESIGN §5): only s = t passes (a + C > 0), every other piece sees a - C < 0."""
        k, n, n_in = W.shape
        for i in range(n):
            for r in range(k):
                w = np.zeros(self.s.d)
                w[src : src + n_in] = W[r, i]
                w[self.s.e + r] = 2.0 * C
                self.neuron(w, b[r, i] - C, self.s.z + i)
            self.b2[self.s.z + i] -= C

    def add(self, col: int, sign: float, target: int, C: float) -> None:
        """``stream[target] += relu(sign * v + C) - C``, which is ``sign * v`` for ``v = stream[col]``, |v| < C."""
        w = np.zeros(self.s.d)
        w[col] = sign
        self.neuron(w, C, target)
        self.b2[target] -= C

    def clear(self, col: int, C: float) -> None:
        self.add(col, -1.0, col, C)

    def parts(self):
        if not self.rows:
            return np.zeros((0, self.s.d)), np.zeros(0), np.zeros((self.s.d, 0)), self.b2
        W1 = np.stack(self.rows)
        W2 = np.zeros((self.s.d, len(self.rows)))
        W2[self.targets, np.arange(len(self.rows))] = 1.0
        return W1, np.array(self.b1), W2, self.b2


def _max_heads(s: _Stream, n: int):
    """Head i: query = the constant slot, key = value = z_i, output to max_i: hardmax over key tokens
    returns max_t z_{i,t} (the score of key t is z_{i,t}, affine in x; DESIGN §5)."""
    Wq = np.zeros((n, s.d, 1))
    Wk = np.zeros((n, s.d, 1))
    Wv = np.zeros((n, s.d, 1))
    Wo = np.zeros((n, 1, s.d))
    for i in range(n):
        Wq[i, s.one, 0] = 1.0
        Wk[i, s.z + i, 0] = 1.0
        Wv[i, s.z + i, 0] = 1.0
        Wo[i, 0, s.m + i] = 1.0
    return Wq, Wk, Wv, Wo


def compile_maxout(net: Maxout, lo, hi, layout: str = "paper") -> Transformer:
    """A hardmax Transformer on T = k tokens that equals ``net`` on the box ``[lo, hi]`` (scalars
    broadcast to ``net.input_dim``), with the same activation regions; ``valid_box = (lo, hi)``.

    ``layout="paper"``: 3 blocks per maxout layer (D = 3L, as Gu, Yang, Zhou 2026 Thm 4.4 counts):
    FFN pieces into z; attention max into the max-slot; FFN move max -> x and clear z, max. The readout
    reads the x-slot of token 0. ``layout="compact"``: L + 1 blocks: FFN pieces of layer 1; then per
    layer attention max, and an FFN that clears z and max while computing the next layer's pieces from
    the max-slot; the readout reads the max-slot.
    """
    if not isinstance(net, Maxout):
        raise TypeError(f"compile_maxout takes a Maxout network, not {type(net).__name__}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    box = Box(lo, hi, net.input_dim)
    if box.dim != net.input_dim:
        raise ValueError(f"box has dimension {box.dim}, the network takes {net.input_dim} inputs")
    C = compile_constant(net, box.lo, box.hi)
    q, k, widths = net.input_dim, net.k, net.widths
    X = q if layout == "compact" else max(q, *widths)
    s = _Stream(X, k, max(widths))
    E = np.zeros((s.d, q))
    E[np.arange(q), np.arange(q)] = 1.0
    P = np.zeros((k, s.d))
    P[np.arange(k), s.e + np.arange(k)] = 1.0
    P[:, s.one] = 1.0

    blocks: list[Block] = []
    if layout == "paper":
        n_prev = q
        for W, b, n in zip(net.weights, net.biases, widths, strict=True):
            f = _FFN(s)
            f.pieces(W, b, 0, C)
            blocks.append(_block(s.d, ffn=f.parts()))
            blocks.append(_block(s.d, heads=_max_heads(s, n)))
            f = _FFN(s)
            for j in range(n_prev):
                f.clear(j, C)
            for i in range(n):
                f.add(s.m + i, 1.0, i, C)
                f.clear(s.z + i, C)
                f.clear(s.m + i, C)
            blocks.append(_block(s.d, ffn=f.parts()))
            n_prev = n
        out_col = 0
    else:
        f = _FFN(s)
        f.pieces(net.weights[0], net.biases[0], 0, C)
        blocks.append(_block(s.d, ffn=f.parts()))
        for l, n in enumerate(widths):
            if l + 1 < len(widths):
                f = _FFN(s)
                for i in range(n):
                    f.clear(s.z + i, C)
                    f.clear(s.m + i, C)
                f.pieces(net.weights[l + 1], net.biases[l + 1], s.m, C)
                ffn = f.parts()
            else:
                ffn = None
            blocks.append(_block(s.d, heads=_max_heads(s, n), ffn=ffn))
        out_col = s.m
    R = np.zeros((net.output_dim, s.d))
    R[:, out_col : out_col + widths[-1]] = net.readout_W
    return Transformer(
        E=E,
        P=P,
        blocks=tuple(blocks),
        readout_W=R,
        readout_b=net.readout_b,
        attention="hardmax",
        causal=False,
        readout_token=0,
        valid_box=(tuple(box.lo), tuple(box.hi)),
    )


def bound_attaining_transformer(m: int, T: int, q: int, D: int, layout: str = "paper", seed: int = 0, lo=-1.0, hi=2.0):
    """The transformer that meets Gu, Yang, Zhou 2026 (arXiv 2603.03084) Thm 4.4: :func:`product_maxout`
    with width mT, rank T, n0 = q and L = floor(D/3) layers, compiled on the box [lo, hi]^q (default [-1, 2]^q, which holds every crossing).

    The paper layout is padded with identity blocks to exactly D blocks; the compact one has L + 1.
    Returns ``(transformer, info)``; ``info`` holds the parameters, ``bound`` (Thm 4.4),
    ``construction_regions`` (what this construction has, exact int), ``attainable`` (True when
    floor(mT/q) is even, T = 2, or L = 1: DESIGN §4's caveat), ``maxout`` (the network compiled),
    ``box``, ``C`` and ``blocks``.
    """
    m, T, q, D = _int("m", m, 1), _int("T", T, 2), _int("q", q, 1), _int("D", D, 0)
    bound = transformer_maxout_lower(m, T, q, D)  # raises for D < 3 or mT < q with L >= 2
    L = D // 3
    widths = (m * T,) * L
    net = product_maxout(widths, q, T, seed=seed)
    box = Box(lo, hi, q)
    lo, hi = box.lo, box.hi
    tf = compile_maxout(net, lo, hi, layout)
    if layout == "paper":
        tf = pad_to_depth(tf, D)
    p = (m * T) // q
    info = {
        "m": m,
        "T": T,
        "q": q,
        "D": D,
        "L": L,
        "layout": layout,
        "blocks": tf.depth,
        "widths": widths,
        "k": T,
        "n0": q,
        "bound": bound,
        "maxout_lower": maxout_lower(widths, q, T),
        "construction_regions": product_maxout_regions(widths, q, T),
        "fold_pieces": maxout_fold_pieces(p, T) if L > 1 else None,
        "attainable": L == 1 or p % 2 == 0 or T == 2,
        "box": (tuple(lo), tuple(hi)),
        "C": compile_constant(net, lo, hi),
        "maxout": net,
    }
    return tf, info


def compiled_nbytes(widths, q: int, k: int, layout: str = "paper", depth: int | None = None) -> int:
    """Bytes of the float64 arrays of ``compile_maxout`` applied to a Maxout network with these widths, input
    dimension ``q``, rank ``k`` and one output (padded with identity blocks to ``depth`` blocks when given),
    from the shapes alone: a build can be refused before it allocates anything."""
    ws = [int(w) for w in widths]
    Z = max(ws)
    X = q if layout == "compact" else max(q, Z)
    d = X + k + 1 + 2 * Z

    def ffn(rows: int) -> int:  # W1 (rows, d), b1 (rows), W2 (d, rows), b2 (d)
        return 2 * rows * d + rows + d

    def heads(n: int) -> int:  # Wq, Wk, Wv (n, d, 1), Wo (n, 1, d)
        return 4 * n * d

    floats, blocks = 0, 0
    if layout == "paper":
        n_prev = q
        for n in ws:
            floats += ffn(k * n) + (heads(n) + d) + ffn(n_prev + 3 * n)
            blocks += 3
            n_prev = n
    else:
        floats += ffn(k * ws[0])
        blocks += 1
        for l, n in enumerate(ws):
            floats += heads(n) + (ffn(2 * n + k * ws[l + 1]) if l + 1 < len(ws) else d)
            blocks += 1
    if depth is not None and depth > blocks:
        floats += (depth - blocks) * d  # identity blocks: b2 only
    floats += d * q + k * d + d + 1  # E, P, readout_W (1, d), readout_b
    return 8 * floats


def bound_attaining_nbytes(m: int, T: int, q: int, D: int, layout: str = "paper") -> int:
    """Bytes of the arrays of :func:`bound_attaining_transformer` ``(m, T, q, D, layout)``, from the shapes."""
    L = max(int(D) // 3, 1)
    return compiled_nbytes((int(m) * int(T),) * L, int(q), int(T), layout, int(D) if layout == "paper" else None)
