"""The small vocabulary of piecewise ops that every architecture is lowered to.

A lowered network is a :class:`Program`: the input ``x`` (shape ``(q,)``) is copied onto
``tokens`` rows to form ``H`` of shape ``(T, q)``, the ops are applied in order to ``H``, and
the output is row ``out_token`` of the final ``H``. An MLP or Maxout network has ``T = 1``.

Every engine (sample, line, plane) implements each op here once. Each op appends its
discrete decisions to the activation code in a fixed layout (see :func:`code_length`):

- :class:`Affine` records nothing (adds no region);
- :class:`ReLU` records one bit per entry (``T * width``), 1 where the input is > 0;
- :class:`GroupMax` records the argmax index per unit (``T * n``);
- :class:`Attention` with ``sigma="hardmax"`` records the argmax key per head and query
  (``heads * T``); with ``sigma="relu"`` one bit per head, query and key (``heads * T * T``,
  masked entries 0); with ``sigma="softmax"`` nothing (it is smooth);
- :class:`Residual` records what its body records.

Arrays are NumPy float64 and never change after construction. The dataclasses are JAX pytrees
(registered when JAX is imported; this module does not import it), so programs pass through ``jax.jit``
and ``jax.grad`` as arguments.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._config import when_jax_imported
from ._spans import Span, bilinear_zero, entrywise_spans


def _exact_product(A, B) -> list[list]:
    """``A @ B`` of two float matrices in exact rationals (a list of rows of Fractions)."""
    from fractions import Fraction

    Af = [[Fraction(float(x)) for x in row] for row in np.asarray(A)]
    Bt = [[Fraction(float(x)) for x in col] for col in np.asarray(B).T]
    return [[sum((a * b for a, b in zip(r, c) if a and b), Fraction(0)) for c in Bt] for r in Af]


SIGMAS = ("hardmax", "relu", "softmax")


def _pytree(cls, data: tuple[str, ...], meta: tuple[str, ...]):
    """Register the frozen dataclass ``cls`` as a pytree with leaves ``data`` and static ``meta`` fields.

    Unflatten builds the instance field by field without calling ``__init__``/``__post_init__`` (as
    equinox does): validation and the read-only float64 copies belong to construction by the user, and
    re-running them on tracers inside ``jax.jit``/``jax.grad`` would try to convert tracers to NumPy.
    """
    data, meta = tuple(data), tuple(meta)
    fields = {f.name for f in dataclasses.fields(cls)}
    if set(data) | set(meta) != fields or set(data) & set(meta):
        raise TypeError(f"{cls.__name__}: pytree fields {data} + {meta} must partition {sorted(fields)}")

    def flatten(obj):
        return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)

    def unflatten(aux, children):
        obj = object.__new__(cls)
        for name, value in zip(data, children):
            object.__setattr__(obj, name, value)
        for name, value in zip(meta, aux):
            object.__setattr__(obj, name, value)
        return obj

    def register(jax) -> None:
        keys = tuple(jax.tree_util.GetAttrKey(name) for name in data)

        def flatten_with_keys(obj):
            return [(k, getattr(obj, n)) for k, n in zip(keys, data)], tuple(getattr(obj, n) for n in meta)

        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)

    # registered when JAX is imported (now, if it is): building networks needs no JAX
    when_jax_imported(register)
    return cls


def as_f64(a) -> np.ndarray:
    """A read-only float64 copy of ``a`` (NumPy)."""
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


def _frozen(a):
    """A read-only float64 copy of a NumPy-convertible ``a``; a JAX array or tracer (a network lowered inside
    ``jax.jit`` or ``jax.grad``) is kept as it is: only its shape is checked."""
    if type(a).__module__.startswith("jax"):
        return a
    return as_f64(a)


#: what an op records in the code: ``"nothing"``, ``"bits"`` (one 0/1 entry per decision, 1 where the compared
#: value is > 0), ``"argmax"`` (the index of the first largest of several values) or ``"piece"`` (the index of
#: the piece of a piecewise-linear function of one variable: the number of its breakpoints below the input)
RECORDS = ("nothing", "bits", "argmax", "piece")


class _Facts:
    """The facts every op states about itself (validated and frozen at construction; the op protocol and
    every consumer read them instead of branching on the op's class):

    - :attr:`key`: its protocol key (``"relu"``, ``"attention/hardmax"``, ...);
    - :attr:`records`: what it records in the code (:data:`RECORDS`);
    - :meth:`code_length`: how many code entries it writes, given its input width and the tokens;
    - :meth:`digit_max`: the largest value a code entry can take (0 when it records nothing);
    - :attr:`degree`: the degree of its output in its input on one piece (1: affine on every piece);
    - :attr:`decision_degree`: the degree of what decides its code (attention's scores: 2);
    - :attr:`smooth`: True when it makes no discrete decision at all (softmax);
    - :meth:`width_out`: its output width given its input width (raises ``ValueError`` when they do not fit);
    - :attr:`is_affine`: it is one affine map ``H @ W.T + b`` (attributes ``W``, ``b``);
    - :attr:`entrywise`: it acts on each entry alone (keeps any shape: a conv net's activations);
    - :attr:`label`: what its code entries are, in words (figures and tables);
    - :meth:`work_floats`: floats one example keeps live in it beyond its input and output (memory sizing).
    """

    records: str = "nothing"
    degree: int = 1
    #: the degree, in its input, of the values whose signs or order decide its code (attention scores: 2)
    decision_degree: int = 1
    smooth: bool = False
    is_affine: bool = False
    entrywise: bool = False

    @property
    def label(self) -> str:
        return self.key

    def work_floats(self, tokens: int) -> int:
        return 0

    @property
    def body_ops(self) -> tuple | None:
        """The ops of a block that holds others (:class:`Residual`), None for a leaf op."""
        return None

    def spans(self, Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
        """The spans of its output rows' linear parts and of their differences across tokens, given those of
        its input (supersets, exact; :mod:`._spans`). By default: anything of its output width."""
        w = self.width_out(Z.d)
        return Span.coordinates(w, range(w)), Span.coordinates(w, range(w))

    def straight_on(self, Z: Span, D: Span) -> bool:
        """Its boundaries are lines on every region when its input has these spans (only hardmax attention
        compares products of its input)."""
        return True

    @property
    def key(self) -> str:
        return type(self).__name__.lower()

    def code_length(self, width_in: int, tokens: int) -> int:
        return 0

    def digit_max(self, tokens: int) -> int:
        return 0

    def width_out(self, width_in: int) -> int:
        return width_in

    def reads(self, live: np.ndarray, width_in: int) -> np.ndarray:
        """The entries ``(T, width_in)`` of its input it reads, given the entries ``live (T, width_out)`` of its
        output that are read after it. By default every entry: an op that decides anything decides on each
        entry of its input (a ReLU's bit, a group's argmax, attention's scores over every token), whatever is
        read of its output."""
        return np.ones((live.shape[0], width_in), bool)

    def form_spec(self) -> tuple | None:
        """None: the op runs as itself and the code it records is the engines' code. An op that lowering
        rewrites into other ops (:class:`PiecewiseLinear`) says here how its form's code gives its own."""
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class Affine(_Facts):
    """``H <- H @ W.T + b``; ``W`` is ``(d_out, d_in)``, ``b`` is ``(d_out,)`` or per token ``(T, d_out)``."""

    W: np.ndarray
    b: np.ndarray
    is_affine = True

    def __post_init__(self):
        W, b = _frozen(self.W), _frozen(self.b)
        if len(np.shape(W)) != 2 or len(np.shape(b)) not in (1, 2) or np.shape(b)[-1] != np.shape(W)[0]:
            raise ValueError(f"affine op: weight {np.shape(W)} and bias {np.shape(b)} do not fit")
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "b", b)

    def width_out(self, width_in: int) -> int:
        if self.W.shape[1] != width_in:
            raise ValueError(f"affine expects width {self.W.shape[1]}, gets {width_in}")
        return int(self.W.shape[0])

    def spans(self, Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
        return Z.map(self.W.T), D.map(self.W.T)

    def reads(self, live: np.ndarray, width_in: int) -> np.ndarray:
        """Per token, the input columns with a nonzero weight in one of its live outputs (it decides nothing)."""
        nz = self.W != 0
        return (live.astype(np.int64) @ nz.astype(np.int64)) > 0


@dataclasses.dataclass(frozen=True, eq=False)
class ReLU(_Facts):
    """Entrywise ``max(H, 0)``; records one bit per entry (``T * width``), 1 where the input is > 0."""

    records = "bits"
    entrywise = True

    def code_length(self, width_in: int, tokens: int) -> int:
        return tokens * width_in

    def digit_max(self, tokens: int) -> int:
        return 1

    def spans(self, Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
        return entrywise_spans(Z, D, tokens)


@dataclasses.dataclass(frozen=True, eq=False)
class GroupMax(_Facts):
    """Maxout: ``H`` of shape ``(T, n*k)`` read as ``(T, n, k)`` (unit-major), max over the last axis; records
    the first largest piece per unit (``T * n`` digits in ``0 .. k - 1``)."""

    k: int
    records = "argmax"
    label = "maxout argmax"  # type: ignore[assignment]

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise ValueError(f"group max needs a positive integer rank, not {self.k!r}")
        object.__setattr__(self, "k", int(self.k))

    def code_length(self, width_in: int, tokens: int) -> int:
        return tokens * (width_in // self.k)

    def digit_max(self, tokens: int) -> int:
        return self.k - 1

    def width_out(self, width_in: int) -> int:
        if width_in % self.k:
            raise ValueError(f"group max of rank {self.k} on width {width_in}")
        return width_in // self.k

    def spans(self, Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
        # unit u keeps one of its k entries: its output moves where one of them does
        n = Z.d // self.k
        z = {i // self.k for i in Z.support()}
        zd = z | {i // self.k for i in D.support()}
        return Span.coordinates(n, z), (Span.coordinates(n, zd) if tokens > 1 else Span(n))


@dataclasses.dataclass(frozen=True, eq=False)
class Attention(_Facts):
    """Multi-head attention ``sum_h sigma(S_h) (H Wv_h) Wo_h`` with ``S_h = (H Wq_h)(H Wk_h)^T``.

    Shapes: ``Wq, Wk`` are ``(heads, d, d_k)``, ``Wv`` is ``(heads, d, d_v)``, ``Wo`` is
    ``(heads, d_v, d)``. ``sigma`` is ``"hardmax"`` (one-hot argmax per row, ties averaged; records the
    argmax key per head and query), ``"relu"`` (entrywise, divided by ``T`` when ``scale_by_T``; one bit per
    head, query and key, masked entries 0) or ``"softmax"`` with inverse temperature ``inv_temperature``
    (smooth: records nothing). ``causal`` masks keys after the query.
    """

    Wq: np.ndarray
    Wk: np.ndarray
    Wv: np.ndarray
    Wo: np.ndarray
    sigma: str = "hardmax"
    causal: bool = False
    scale_by_T: bool = False
    inv_temperature: float = 1.0
    decision_degree = 2  # the scores are quadratic in H

    def __post_init__(self):
        if self.sigma not in SIGMAS:
            raise ValueError(f"attention sigma must be one of {SIGMAS}, not {self.sigma!r}")
        Wq, Wk, Wv, Wo = (_frozen(x) for x in (self.Wq, self.Wk, self.Wv, self.Wo))
        sq, sk, sv, so = (np.shape(x) for x in (Wq, Wk, Wv, Wo))
        if (
            len(sq) != 3
            or sk != sq
            or len(sv) != 3
            or len(so) != 3
            or sv[:2] != sq[:2]
            or so[0] != sq[0]
            or so[1] != sv[2]
            or so[2] != sq[1]
        ):
            raise ValueError(f"attention weights Wq {sq}, Wk {sk}, Wv {sv}, Wo {so} do not fit")
        for name, value in zip(("Wq", "Wk", "Wv", "Wo"), (Wq, Wk, Wv, Wo), strict=True):
            object.__setattr__(self, name, value)

    @property
    def heads(self) -> int:
        return int(self.Wq.shape[0])

    @property
    def key(self) -> str:
        return f"attention/{self.sigma}"

    @property
    def label(self) -> str:
        return f"{self.sigma} attention"

    def work_floats(self, tokens: int) -> int:
        dk = self.Wq.shape[2] + self.Wk.shape[2] + self.Wv.shape[2]
        return self.heads * (tokens * tokens * 3 + tokens * dk)

    @property
    def records(self) -> str:  # type: ignore[override]
        return {"hardmax": "argmax", "relu": "bits", "softmax": "nothing"}[self.sigma]

    @property
    def degree(self) -> int:  # type: ignore[override]
        # on a piece: hardmax mixes values linearly; ReLU attention multiplies a quadratic score by a value
        return 3 if self.sigma == "relu" else 1

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        return self.sigma == "softmax"

    def code_length(self, width_in: int, tokens: int) -> int:
        return {"hardmax": self.heads * tokens, "relu": self.heads * tokens * tokens, "softmax": 0}[self.sigma]

    def digit_max(self, tokens: int) -> int:
        return {"hardmax": tokens - 1, "relu": 1, "softmax": 0}[self.sigma]

    def width_out(self, width_in: int) -> int:
        if self.Wq.shape[1] != width_in or self.Wo.shape[2] != width_in:
            raise ValueError(f"attention expects width {self.Wq.shape[1]}, gets {width_in}")
        return width_in

    def spans(self, Z: Span, D: Span, tokens: int) -> tuple[Span, Span]:
        if self.sigma != "hardmax":  # weights that move with the input: anything
            return super().spans(Z, D, tokens)
        # row i is sum_j a_ij H_j Wv Wo with sum_j a_ij = 1: rows in Z Wv Wo, differences in D Wv Wo
        Zo, Do = Span(Z.d), Span(Z.d)
        for h in range(self.heads):
            VO = _exact_product(self.Wv[h], self.Wo[h])  # exact: a rounded product would not bound the span
            Zo, Do = Zo + Z.map(VO), Do + D.map(VO)
        return Zo, Do

    def straight_on(self, Z: Span, D: Span) -> bool:
        if self.sigma != "hardmax":
            return False
        return all(bilinear_zero(Z, _exact_product(self.Wq[h], np.asarray(self.Wk[h]).T), D) for h in range(self.heads))


@dataclasses.dataclass(frozen=True, eq=False)
class Residual(_Facts):
    """``H <- H + body(H)`` for a tuple of ops ``body``; records what its body records."""

    body: tuple

    @property
    def body_ops(self) -> tuple:  # type: ignore[override]
        return self.body

    def __post_init__(self):
        body = tuple(self.body)
        for op in body:
            if not isinstance(op, _Facts):
                raise TypeError(f"a residual body holds ops, not {type(op).__name__}")
        object.__setattr__(self, "body", body)

    @property
    def records(self) -> str:  # type: ignore[override]
        kinds = {op.records for op in self.body} - {"nothing"}
        return "nothing" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        return all(op.smooth or op.records == "nothing" for op in self.body) and any(op.smooth for op in self.body)

    @property
    def degree(self) -> int:  # type: ignore[override]
        return max((op.degree for op in self.body), default=1)

    def width_out(self, width_in: int) -> int:
        w = width_in
        for op in self.body:
            w = op.width_out(w)
        if w != width_in:
            raise ValueError(f"residual body maps width {width_in} to {w}")
        return width_in

    def reads(self, live: np.ndarray, width_in: int) -> np.ndarray:
        """What is read of its output is read of its input (``H + body(H)``), and what its body reads."""
        return live | _reads_of(self.body, live, width_in, None)


@dataclasses.dataclass(frozen=True, eq=False)
class PiecewiseLinear(_Facts):
    """A continuous piecewise-linear function of one variable applied entrywise: breakpoints
    ``b_1 < ... < b_k`` (``k >= 1``), ``k + 1`` slopes, and ``intercept`` (the value at 0 of the first piece's
    line). ReLU is ``((0,), (0, 1))``, LeakyReLU(a) ``((0,), (a, 1))``, Abs ``((0,), (-1, 1))``, HardTanh
    ``((lo, hi), (0, 1, 0), lo)``; a user's approximation of GELU or SiLU is its breakpoints and slopes
    (:meth:`interpolating`).

    It records the piece of each entry: ``T * width`` digits in ``0 .. k`` (the number of breakpoints strictly
    below the entry, so a point on a breakpoint takes the lower piece, as a ReLU bit is 0 at 0).

    Every engine runs it through its exact ReLU form (:meth:`relu_form`, applied by :func:`relu_form` when a
    network is lowered): per entry ``x`` the units ``(x - b_i)_+`` (one per breakpoint, a second copy where
    the previous slope is not zero), ``(b_1 - x)_+`` and the constant ``|b_1|`` where the first slope is not
    zero, combined by an affine map whose weights are the slopes themselves. Every weight is a float64 as
    given, so the rational function is the op's exactly; the extra units' lines coincide with ``x = b_1`` or
    are constant, so the regions are those of the op. The form's ReLU bits of an entry give its piece (the sum
    of the bits of the first unit of each breakpoint, :meth:`pieces_of_bits`) and, on a region, the piece gives
    the bits back (:meth:`bits_of_pieces`): the lowered program's :class:`CodeMap` translates the two codes.
    """

    breakpoints: tuple
    slopes: tuple
    intercept: float = 0.0
    records = "piece"
    entrywise = True
    label = "piecewise-linear piece"  # type: ignore[assignment]

    def __post_init__(self):
        b = tuple(float(v) for v in np.ravel(self.breakpoints))
        s = tuple(float(v) for v in np.ravel(self.slopes))
        a = float(self.intercept)
        if not b or len(s) != len(b) + 1:
            raise ValueError(f"a piecewise-linear op needs k >= 1 breakpoints and k + 1 slopes, not {len(b)}, {len(s)}")
        if not all(np.isfinite(v) for v in b + s + (a,)):
            raise ValueError("a piecewise-linear op needs finite breakpoints, slopes and intercept")
        if any(x >= y for x, y in zip(b[:-1], b[1:])):
            raise ValueError(f"breakpoints must increase strictly: {b}")
        object.__setattr__(self, "breakpoints", b)
        object.__setattr__(self, "slopes", s)
        object.__setattr__(self, "intercept", a)

    @classmethod
    def interpolating(cls, fn, breakpoints, left_slope: float, right_slope: float) -> PiecewiseLinear:
        """The continuous piecewise-linear function through ``(b_i, fn(b_i))`` at the ``breakpoints``, with
        slopes ``left_slope`` before the first and ``right_slope`` after the last (a user's approximation of a
        smooth activation, e.g. GELU with slopes 0 and 1). The slopes and intercept are the float64 values
        computed here; the op is exactly the function they define."""
        b = np.asarray(breakpoints, dtype=np.float64).ravel()
        y = np.asarray([float(fn(float(v))) for v in b])
        inner = list((y[1:] - y[:-1]) / (b[1:] - b[:-1]))
        slopes = [float(left_slope), *inner, float(right_slope)]
        return cls(tuple(b), tuple(slopes), float(y[0] - left_slope * b[0]))

    def _units(self) -> list[tuple[float, float, float]]:
        """Per entry: the ReLU form's units ``(weight, bias, output weight)`` (pre-activation ``w x + bias``)."""
        return [u for u, _ in self._unit_roles()]

    def _unit_roles(self) -> list[tuple[tuple[float, float, float], tuple[str, int]]]:
        """The ReLU form's units, each with its role: ``("above", i)`` (its bit is ``x > b_i``, the first unit
        of breakpoint ``i``), ``("copy", i)`` (the same bit again), ``("below", 0)`` (``x < b_1``) or
        ``("one", 0)`` (a constant, bit 1)."""
        b, s = self.breakpoints, self.slopes
        units = [((1.0, -b[0], s[1]), ("above", 0))]
        for i in range(1, len(b)):
            units.append(((1.0, -b[i], s[i + 1]), ("above", i)))
            if s[i] != 0:
                units.append(((1.0, -b[i], -s[i]), ("copy", i)))
        if s[0] != 0:
            units.append(((-1.0, b[0], -s[0]), ("below", 0)))
            if b[0] != 0:
                units.append(((0.0, abs(b[0]), s[0] if b[0] > 0 else -s[0]), ("one", 0)))
        return units

    @property
    def units(self) -> int:
        """ReLU units per entry in the ReLU form."""
        return len(self._unit_roles())

    @property
    def k(self) -> int:
        """Number of breakpoints (pieces: ``k + 1``)."""
        return len(self.breakpoints)

    def code_length(self, width_in: int, tokens: int) -> int:
        return tokens * width_in

    def digit_max(self, tokens: int) -> int:
        return self.k

    def piece(self, x) -> np.ndarray:
        """The index of the piece of each entry of ``x`` (the number of breakpoints below it)."""
        return np.sum(np.asarray(x, dtype=np.float64)[..., None] > np.asarray(self.breakpoints), axis=-1)

    def __call__(self, x) -> np.ndarray:
        """The function on a float array (NumPy, per piece)."""
        x = np.asarray(x, dtype=np.float64)
        b, s = np.asarray(self.breakpoints), np.asarray(self.slopes)
        consts = [self.intercept]
        for i in range(len(b)):
            consts.append(consts[-1] + (s[i] - s[i + 1]) * b[i])
        p = self.piece(x)
        return s[p] * x + np.asarray(consts)[p]

    def relu_form(self, width: int) -> tuple:
        """``(Affine, ReLU, Affine)`` computing this op exactly on ``width`` entries (class docstring)."""
        units = self._units()
        u = len(units)
        W1 = np.zeros((width * u, width))
        b1 = np.zeros(width * u)
        W2 = np.zeros((width, width * u))
        for j in range(width):
            for t, (w, c, o) in enumerate(units):
                W1[j * u + t, j] = w
                b1[j * u + t] = c
                W2[j, j * u + t] = o
        return Affine(W1, b1), ReLU(), Affine(W2, np.full(width, self.intercept))

    def form_spec(self) -> tuple[int, tuple[int, ...], tuple[tuple[str, int], ...]]:  # type: ignore[override]
        """``(units, above, roles)``: the ReLU form's units per entry, the unit index of each breakpoint's
        first unit, and every unit's role (:meth:`_unit_roles`): what a :class:`CodeMap` needs, hashable."""
        roles = tuple(r for _, r in self._unit_roles())
        above = tuple(t for t, r in enumerate(roles) if r[0] == "above")
        return len(roles), above, roles


def _pieces_of_bits(spec, bits):
    """Pieces ``(..., E)`` of ReLU-form bits ``(..., E * units)`` (NumPy or JAX arrays)."""
    units, above, _ = spec
    B = bits.reshape(bits.shape[:-1] + (bits.shape[-1] // units, units))
    return sum(B[..., t] for t in above)


def _bits_of_pieces(spec, pieces: np.ndarray) -> np.ndarray:
    """ReLU-form bits ``(..., E * units)`` of pieces ``(..., E)`` (the bits of any point inside a region)."""
    units, _, roles = spec
    p = np.asarray(pieces)
    cols = []
    for kind, i in roles:
        if kind in ("above", "copy"):
            cols.append(p > i)
        elif kind == "below":
            cols.append(p == 0)
        else:
            cols.append(np.ones_like(p, dtype=bool))
    return np.stack(cols, axis=-1).reshape(p.shape[:-1] + (p.shape[-1] * units,)).astype(p.dtype)


@dataclasses.dataclass(frozen=True)
class CodeMap:
    """How the code of a lowered program (the ReLU form every engine runs) translates to the code its ops
    record, and back. ``segments`` holds, per leaf op in order, ``(form_start, form_len, op_start, op_len,
    spec)``, with ``spec`` None where both codes agree and a :meth:`PiecewiseLinear.form_spec` where the form
    records ReLU bits for the op's pieces. Hashable: it is static data of the program's pytree."""

    segments: tuple
    form_length: int
    op_length: int

    @staticmethod
    def of(program: Program) -> CodeMap | None:
        """The map of ``program`` (before lowering) to its ReLU form, or None when the two codes agree."""
        segs, fpos, opos, any_pwl = [], 0, 0, False
        for op, w, _ in walk_widths(program):
            n = op.code_length(w, program.tokens)
            spec = op.form_spec()
            fn = n * spec[0] if spec else n
            any_pwl |= spec is not None
            if n:
                segs.append((fpos, fn, opos, n, spec))
            fpos, opos = fpos + fn, opos + n
        return CodeMap(tuple(segs), fpos, opos) if any_pwl else None

    def to_ops(self, codes):
        """The ops' codes ``(..., op_length)`` of form codes ``(..., form_length)`` (NumPy; or JAX inside a
        trace)."""
        xp = np if isinstance(codes, np.ndarray) else __import__("jax.numpy", fromlist=["numpy"])
        parts = []
        for fs, fl, _, _, spec in self.segments:
            c = codes[..., fs : fs + fl]
            parts.append(c if spec is None else _pieces_of_bits(spec, c).astype(codes.dtype))
        if not parts:
            return codes[..., :0]
        return xp.concatenate(parts, axis=-1)

    def to_form(self, codes: np.ndarray) -> np.ndarray:
        """The form's codes of the ops' codes of regions (NumPy)."""
        codes = np.asarray(codes)
        parts = []
        for _, _, os, ol, spec in self.segments:
            c = codes[..., os : os + ol]
            parts.append(c if spec is None else _bits_of_pieces(spec, c))
        return np.concatenate(parts, axis=-1) if parts else codes[..., :0]

    def form_multipliers(self, m: np.ndarray) -> np.ndarray:
        """Hash multipliers ``(L, op_length)`` as multipliers of the form's code ``(L, form_length)``: since a
        piece is the sum of its breakpoints' first bits, ``form_code . form_multipliers(m) = op_code . m`` for
        every point (mod ``2^64``), so hashing the form's code this way hashes the ops' code."""
        out = np.zeros(m.shape[:-1] + (self.form_length,), dtype=m.dtype)
        for fs, fl, os, ol, spec in self.segments:
            if spec is None:
                out[..., fs : fs + fl] = m[..., os : os + ol]
                continue
            units, above, _ = spec
            for t in above:
                out[..., fs + t : fs + fl : units] = m[..., os : os + ol]
        out.setflags(write=False)
        return out

    def form_prefix(self, op_prefix: int) -> int:
        """The form's code length covering the first ``op_prefix`` entries of the ops' code (a prefix ends
        at an op's end)."""
        for fs, fl, os, ol, _ in self.segments:
            if os + ol >= op_prefix:
                if op_prefix == os:
                    return fs
                if op_prefix != os + ol:
                    raise ValueError(f"code prefix {op_prefix} ends inside an op's code")
                return fs + fl
        return self.form_length


def op_codes(program: Program, codes):
    """The codes ``program``'s ops record (pieces for piecewise-linear ops) of codes in the layout the lowered
    ``program`` runs (the same array when the two agree)."""
    cm = getattr(program, "code_map", None)
    return codes if cm is None else cm.to_ops(codes)


def form_codes(program: Program, codes):
    """The inverse of :func:`op_codes` on the codes of regions."""
    cm = getattr(program, "code_map", None)
    return codes if cm is None else cm.to_form(codes)


def leaky_relu(a: float = 0.01) -> PiecewiseLinear:
    """LeakyReLU / PReLU with one slope ``a`` for negative inputs."""
    return PiecewiseLinear((0.0,), (a, 1.0))


def abs_op() -> PiecewiseLinear:
    """``|x|`` entrywise."""
    return PiecewiseLinear((0.0,), (-1.0, 1.0))


def hardtanh(lo: float = -1.0, hi: float = 1.0) -> PiecewiseLinear:
    """``clamp(x, lo, hi)`` entrywise."""
    return PiecewiseLinear((lo, hi), (0.0, 1.0, 0.0), lo)


def parse_activation(name: str) -> ReLU | PiecewiseLinear:
    """An activation by name: ``relu``, ``leaky_relu[:a]`` (default a = 0.01), ``abs``, ``hardtanh[:lo,hi]``
    (default -1,1); ``ValueError`` for anything else."""
    base, _, arg = name.strip().lower().partition(":")
    try:
        vals = [float(v) for v in arg.split(",")] if arg else []
    except ValueError:
        raise ValueError(f"activation {name!r}: the parameters after ':' must be numbers") from None
    if base == "relu" and not vals:
        return ReLU()
    if base == "leaky_relu" and len(vals) <= 1:
        return leaky_relu(*vals)
    if base == "abs" and not vals:
        return abs_op()
    if base == "hardtanh" and len(vals) in (0, 2):
        return hardtanh(*vals)
    raise ValueError(f"unknown activation {name!r}: use relu, leaky_relu[:a], abs or hardtanh[:lo,hi]")


def with_activation(net, act) -> Program:
    """The program of ``net`` with every ReLU op replaced by ``act`` (for state dicts, which do not record
    their activations)."""
    program = net if isinstance(net, Program) else net.lower()

    def swap(ops):
        return tuple(
            act if isinstance(op, ReLU) else Residual(swap(op.body)) if isinstance(op, Residual) else op for op in ops
        )

    return Program(program.tokens, program.input_dim, swap(program.ops), program.out_token, program.valid_box)


Op = Affine | ReLU | GroupMax | Attention | Residual | PiecewiseLinear

_pytree(Affine, ("W", "b"), ())
_pytree(ReLU, (), ())
_pytree(GroupMax, (), ("k",))
# inv_temperature is data, not static: a sweep over lambda reuses one compiled forward pass
_pytree(Attention, ("Wq", "Wk", "Wv", "Wo", "inv_temperature"), ("sigma", "causal", "scale_by_T"))
_pytree(Residual, ("body",), ())
_pytree(PiecewiseLinear, (), ("breakpoints", "slopes", "intercept"))


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """A lowered network: ``tokens`` rows, ``ops`` in order, output row ``out_token``.

    ``valid_box = ((lo...), (hi...))`` is the input box a compiled model is exact on (None: everywhere);
    lowering keeps it, so every engine refuses a domain outside it (:func:`check_domain`).
    """

    tokens: int
    input_dim: int
    ops: tuple
    out_token: int = 0
    valid_box: tuple | None = None
    #: set by lowering (:func:`relu_form`): how this program's code translates to the code of the program it
    #: was lowered from (:class:`CodeMap`); None: they agree
    code_map: CodeMap | None = None

    def __post_init__(self):
        ops = tuple(self.ops)
        for op in ops:
            if not isinstance(op, _Facts):
                raise TypeError(f"a program holds ops of networks._ops, not {type(op).__name__}")
        if int(self.tokens) < 1 or int(self.input_dim) < 1 or not 0 <= int(self.out_token) < int(self.tokens):
            raise ValueError(
                f"a program needs tokens >= 1, input_dim >= 1 and 0 <= out_token < tokens (got {self.tokens}, "
                f"{self.input_dim}, {self.out_token})"
            )
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "tokens", int(self.tokens))
        object.__setattr__(self, "input_dim", int(self.input_dim))
        object.__setattr__(self, "out_token", int(self.out_token))
        walk_widths(self)  # every width fits, or ValueError now rather than in an engine


_pytree(Program, ("ops",), ("tokens", "input_dim", "out_token", "valid_box", "code_map"))


def relu_form(program: Program) -> Program:
    """``program`` with every :class:`PiecewiseLinear` replaced by its exact ReLU form (the same object when it
    holds none): the form every engine and interpreter runs."""

    def has(ops) -> bool:
        return any(op.form_spec() is not None or (isinstance(op, Residual) and has(op.body)) for op in ops)

    if not has(program.ops):
        return program

    def rewrite(ops, width: int):
        out: list = []
        for op in ops:
            if isinstance(op, Residual):
                body, _ = rewrite(op.body, width)
                out.append(Residual(tuple(body)))
            elif op.form_spec() is not None:
                out += list(op.relu_form(width))
            else:
                out.append(op)
                width = op.width_out(width)
        return out, width

    ops, _ = rewrite(program.ops, program.input_dim)
    return Program(
        program.tokens, program.input_dim, tuple(ops), program.out_token, program.valid_box, CodeMap.of(program)
    )


def walk_widths(program: Program) -> list[tuple[Op, int, int]]:
    """Each leaf op (residual bodies flattened) with its input and output width, in order (``ValueError`` where
    a width does not fit)."""
    out: list[tuple[Op, int, int]] = []

    def visit(ops, width: int) -> int:
        for op in ops:
            if isinstance(op, Residual):
                w = visit(op.body, width)
                if w != width:
                    raise ValueError(f"residual body maps width {width} to {w}")
            else:
                w = op.width_out(width)
                out.append((op, width, w))
                width = w
        return width

    visit(program.ops, program.input_dim)
    return out


def _reads_of(ops, live: np.ndarray, width_in: int, out: dict[int, np.ndarray] | None) -> np.ndarray:
    """The entries of the input of the op sequence ``ops`` (input width ``width_in``) that it reads when the
    entries ``live`` of its output are read after it; ``out``: collects each op's live output entries by id."""
    widths = [width_in]
    for op in ops:
        widths.append(op.width_out(widths[-1]))
    for op, w_in in zip(reversed(ops), reversed(widths[:-1]), strict=True):
        if out is not None:
            key = id(op)  # an op object used twice is live where either use is
            out[key] = live | out[key] if key in out else live.copy()
            if isinstance(op, Residual):  # Residual.reads, from the walk that collects its body (not a second one)
                live = live | _reads_of(op.body, live, w_in, out)
                continue
        live = op.reads(live, w_in)
    return live


def live_entries(program: Program) -> dict[int, np.ndarray]:
    """Per op of ``program`` (by ``id``, residuals and their bodies' ops included): the entries ``(T, width_out)`` of
    its output that a later op or the output reads (the output is row ``out_token`` of the last op's). An engine
    may leave the other entries out of the maps it computes: nothing reads them. Every entry an op that decides
    something takes in is read (:meth:`_Facts.reads`), so only maps after the last decision (the affine tail of a
    Transformer, where one token is the output) have entries nothing reads."""
    width = program.input_dim
    for op in program.ops:
        width = op.width_out(width)
    live = np.zeros((program.tokens, width), bool)
    live[program.out_token] = True
    out: dict[int, np.ndarray] = {}
    _reads_of(program.ops, live, program.input_dim, out)
    return out


def _leaf(op) -> _Facts:
    if not isinstance(op, _Facts) or isinstance(op, Residual):
        raise TypeError(f"not a leaf op of networks._ops: {type(op).__name__}")
    return op


def op_code_length(op: Op, width_in: int, tokens: int) -> int:
    """Number of code entries a leaf op writes (its own fact; ``TypeError`` for anything that is not an op)."""
    return _leaf(op).code_length(width_in, tokens)


def code_length(program: Program) -> int:
    """Length of the flat activation code of ``program``."""
    return sum(op.code_length(w, program.tokens) for op, w, _ in walk_widths(program))


def is_piecewise_linear(program: Program) -> bool:
    """True when every op is affine on every piece and not smooth (ReLU attention and softmax are not)."""
    return all(op.degree == 1 and not op.smooth for op, _, _ in walk_widths(program))


def max_code_digit(program: Program) -> int:
    """The largest value any code entry can take (1 for bits, k-1 or T-1 for argmax indices)."""
    return max([1] + [op.digit_max(program.tokens) for op, _, _ in walk_widths(program)])
