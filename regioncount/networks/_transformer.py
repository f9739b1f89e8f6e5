"""Transformer without layer norm (DESIGN §1): embedding ``E x + p_t``, blocks of attention + FFN
with residuals, linear readout of one token."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._ops import SIGMAS, Affine, Attention, Program, ReLU, Residual, _pytree, as_f64


@dataclasses.dataclass(frozen=True, eq=False)
class Block:
    """One block: ``H <- H + sum_h sigma(S_h)(H Wv_h)Wo_h``, then ``H <- H + W2 relu(W1 h + b1) + b2`` per row.

    Shapes: ``Wq, Wk (heads, d, d_k)``, ``Wv (heads, d, d_v)``, ``Wo (heads, d_v, d)``,
    ``W1 (f, d)``, ``b1 (f,)``, ``W2 (d, f)``, ``b2 (d,)``. ``heads = 0`` or ``f = 0`` is allowed
    (no attention, or an FFN that only adds ``b2``).
    """

    Wq: np.ndarray
    Wk: np.ndarray
    Wv: np.ndarray
    Wo: np.ndarray
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, as_f64(getattr(self, f.name)))
        h, d, dk = self.Wq.shape
        dv = self.Wv.shape[2]
        f = self.W1.shape[0]
        want = {
            "Wk": (h, d, dk),
            "Wv": (h, d, dv),
            "Wo": (h, dv, d),
            "W1": (f, d),
            "b1": (f,),
            "W2": (d, f),
            "b2": (d,),
        }
        for name, shape in want.items():
            if getattr(self, name).shape != shape:
                raise ValueError(f"block {name} has shape {getattr(self, name).shape}, expected {shape}")

    @property
    def d_model(self) -> int:
        return int(self.Wq.shape[1])


_pytree(Block, tuple(f.name for f in dataclasses.fields(Block)), ())


@dataclasses.dataclass(frozen=True, eq=False)
class Transformer:
    """A Transformer on ``T`` tokens: ``H0[t] = E x + P[t]`` (``E (d, q)``, ``P (T, d)``), then blocks,
    then ``readout_W @ H[readout_token] + readout_b``.

    ``attention`` is ``"hardmax"``, ``"relu"`` or ``"softmax"`` for every head; ``scale_by_T`` divides
    ReLU attention by ``T`` (Wortsman et al. 2023); ``inv_temperature`` is softmax's lambda.
    """

    E: np.ndarray
    P: np.ndarray
    blocks: tuple
    readout_W: np.ndarray
    readout_b: np.ndarray
    attention: str = "hardmax"
    causal: bool = False
    scale_by_T: bool = False
    inv_temperature: float = 1.0
    readout_token: int = 0
    valid_box: tuple | None = None

    def __post_init__(self):
        if self.valid_box is not None:
            lo, hi = self.valid_box
            object.__setattr__(self, "valid_box", (tuple(float(v) for v in lo), tuple(float(v) for v in hi)))
        for name in ("E", "P", "readout_W", "readout_b"):
            object.__setattr__(self, name, as_f64(getattr(self, name)))
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if self.attention not in SIGMAS:
            raise ValueError(f"attention must be one of {SIGMAS}, not {self.attention!r}")
        d = self.E.shape[0]
        if self.E.ndim != 2 or self.P.ndim != 2 or self.P.shape[1] != d:
            raise ValueError(f"embedding E {self.E.shape} and positions P {self.P.shape} do not fit")
        for i, blk in enumerate(self.blocks):
            if not isinstance(blk, Block) or blk.d_model != d:
                raise ValueError(f"block {i} does not have d_model = {d}")
        if (
            self.readout_W.ndim != 2
            or self.readout_W.shape[1] != d
            or self.readout_b.shape != (self.readout_W.shape[0],)
        ):
            raise ValueError(f"readout {self.readout_W.shape}, {self.readout_b.shape} does not fit d_model {d}")
        if not 0 <= self.readout_token < self.tokens:
            raise ValueError(f"readout token {self.readout_token} outside 0..{self.tokens - 1}")

    @property
    def tokens(self) -> int:
        return int(self.P.shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.E.shape[1])

    @property
    def d_model(self) -> int:
        return int(self.E.shape[0])

    @property
    def depth(self) -> int:
        return len(self.blocks)

    @property
    def output_dim(self) -> int:
        return int(self.readout_W.shape[0])

    def lower(self) -> Program:
        ops: list = [Affine(self.E, self.P)]
        for blk in self.blocks:
            if blk.Wq.shape[0]:
                att = Attention(
                    blk.Wq, blk.Wk, blk.Wv, blk.Wo, self.attention, self.causal, self.scale_by_T, self.inv_temperature
                )
                ops.append(Residual((att,)))
            if blk.W1.shape[0]:
                ops.append(Residual((Affine(blk.W1, blk.b1), ReLU(), Affine(blk.W2, blk.b2))))
            elif np.any(blk.b2):
                ops.append(Affine(np.eye(blk.d_model), blk.b2))
        ops.append(Affine(self.readout_W, self.readout_b))
        return Program(
            tokens=self.tokens,
            input_dim=self.input_dim,
            ops=tuple(ops),
            out_token=self.readout_token,
            valid_box=self.valid_box,
        )


_pytree(
    Transformer,
    ("E", "P", "blocks", "readout_W", "readout_b", "inv_temperature"),
    ("attention", "causal", "scale_by_T", "readout_token", "valid_box"),
)


def random_transformer(
    input_dim: int = 2,
    tokens: int = 4,
    d_model: int = 8,
    depth: int = 2,
    heads: int = 1,
    d_head: int | None = None,
    d_ff: int | None = None,
    attention: str = "hardmax",
    causal: bool = False,
    scale_by_T: bool = False,
    inv_temperature: float = 1.0,
    output_dim: int = 1,
    seed: int = 0,
) -> Transformer:
    """A seeded random Transformer; weights N(0, 1/fan_in), positions N(0, 1).

    ``d_head`` defaults to ``d_model // heads`` (at least 1), ``d_ff`` to ``2 * d_model``.
    """
    if min(input_dim, tokens, d_model, heads, output_dim) < 1 or depth < 0:
        raise ValueError("input_dim, tokens, d_model, heads, output_dim must be >= 1 and depth >= 0")
    rng = np.random.default_rng(seed)
    dh = d_head or max(1, d_model // heads)
    f = 2 * d_model if d_ff is None else d_ff

    def g(*shape, fan_in):
        return rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)

    # embedding first, then blocks in order: a seed's depth-D network is the first D blocks of its
    # deeper ones (the scan relies on this), whatever the depth asked for
    E = g(d_model, input_dim, fan_in=input_dim)
    P = rng.normal(0.0, 1.0, (tokens, d_model))
    blocks = []
    for _ in range(depth):
        blocks.append(
            Block(
                Wq=g(heads, d_model, dh, fan_in=d_model),
                Wk=g(heads, d_model, dh, fan_in=d_model),
                Wv=g(heads, d_model, dh, fan_in=d_model),
                Wo=g(heads, dh, d_model, fan_in=dh * heads),
                W1=g(f, d_model, fan_in=d_model),
                b1=rng.normal(0.0, 0.5, f),
                W2=g(d_model, f, fan_in=max(f, 1)),
                b2=np.zeros(d_model),
            )
        )
    readout = np.random.default_rng([seed, 1]).normal(0.0, 1.0 / np.sqrt(d_model), (output_dim, d_model))
    return Transformer(
        E=E,
        P=P,
        blocks=tuple(blocks),
        readout_W=readout,
        readout_b=np.zeros(output_dim),
        attention=attention,
        causal=causal,
        scale_by_T=scale_by_T,
        inv_temperature=inv_temperature,
    )


def truncate(net: Transformer, depth: int) -> Transformer:
    """The same Transformer with only its first ``depth`` blocks (same embedding and readout)."""
    return dataclasses.replace(net, blocks=net.blocks[:depth])


def depth_code_ends(net: Transformer) -> tuple[int, ...]:
    """Code length of ``truncate(net, D)`` for D = 1..depth: the code of the truncation is that prefix of
    the full code, since blocks append to the code in order."""
    from ._ops import code_length

    return tuple(code_length(truncate(net, D).lower()) for D in range(1, net.depth + 1))


def identity_block(d_model: int) -> Block:
    """A block with no heads and an FFN of width 0 adding zero: it maps H to H and records nothing."""
    z = np.zeros
    return Block(
        z((0, d_model, 1)),
        z((0, d_model, 1)),
        z((0, d_model, 1)),
        z((0, 1, d_model)),
        z((0, d_model)),
        z(0),
        z((d_model, 0)),
        z(d_model),
    )


def pad_to_depth(net: Transformer, depth: int) -> Transformer:
    """``net`` followed by identity blocks up to ``depth`` blocks (same function, same regions)."""
    if net.depth > depth:
        raise ValueError(f"the network already has {net.depth} blocks, more than {depth}")
    return dataclasses.replace(
        net, blocks=net.blocks + tuple(identity_block(net.d_model) for _ in range(depth - net.depth))
    )
