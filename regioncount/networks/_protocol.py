"""The op protocol: which engine runs which op of :mod:`regioncount.networks._ops`, and how each refuses the rest.

It lives in the networks layer (it names engines only as strings and imports them lazily), so that the exact
interpreter (:mod:`._interpret`, used by results and engines alike) registers its kernels here too;
``regioncount.engines._protocol`` re-exports it.

Every op of a lowered :class:`~regioncount.networks.Program` has a *key* (:func:`op_key`): its class name in
lower case, and for :class:`~regioncount.networks._ops.Attention` its ``sigma`` too (``"attention/hardmax"``).
:data:`SUPPORT` is the one table of which engine supports which key; a key an engine does not support maps to
the :class:`Refusal` (error class and message) it raises, before any work (:func:`refuse_unsupported`).

An engine holds one :class:`Kernels` registry and registers one kernel per key it supports::

    KERNELS = Kernels("plane")

    @KERNELS.register("relu")
    def _relu(eng, op, A, bd): ...

and its driver dispatches with ``KERNELS.lookup(op)`` once per op (never per region). What a kernel takes and
returns is the engine's own business; the registry only maps keys to kernels. ``tests/test_ops_protocol.py``
fails when an engine lacks a kernel for a key its row supports, when a kernel is registered for a key its row
refuses, when an op dataclass is missing from the vocabulary, or when a refusal is not the one the engine raises.

Adding an op: add its dataclass to ``_ops.py`` (and to the ``Op`` union); its key is then supported by
every row of :data:`SUPPORT` unless the row lists a refusal for it, and the test fails until every engine
that supports it registers a kernel (docs/design.md §10).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Iterable

from .._errors import CurvedBoundaryError, InexactError, NotPiecewiseError, RegionCountError
from ._ops import SIGMAS, Attention, Op


def op_key(op) -> str:
    """The protocol key of one op: ``"affine"``, ``"relu"``, ``"groupmax"``, ``"residual"`` or
    ``"attention/<sigma>"``."""
    key = getattr(op, "key", None)
    if not isinstance(key, str):
        raise TypeError(f"not an op of networks._ops: {type(op).__name__}")
    return key


def all_keys() -> tuple[str, ...]:
    """Every key the op vocabulary has (one per op type, one per attention sigma)."""
    keys: list[str] = []
    for cls in typing.get_args(Op):
        name = cls.__name__.lower()
        keys += [f"{name}/{s}" for s in SIGMAS] if cls is Attention else [name]
    return tuple(keys)


@dataclasses.dataclass(frozen=True)
class Refusal:
    """What an engine raises for an op it does not support."""

    error: type[RegionCountError]
    message: str

    def raise_(self) -> typing.NoReturn:
        raise self.error(self.message)


_SOFTMAX_LAMBDA = "(hardmax attention is its λ → ∞ limit)"


def _row(refused: dict[str, Refusal]) -> dict[str, Refusal | None]:
    """A row of :data:`SUPPORT`: every key of the vocabulary, supported unless ``refused`` names it."""
    unknown = set(refused) - set(all_keys())
    if unknown:
        raise KeyError(f"not op keys: {sorted(unknown)}")
    return {key: refused.get(key) for key in all_keys()}


_PLANE_REFUSALS: dict[str, Refusal] = {
    "attention/relu": Refusal(
        CurvedBoundaryError,
        "ReLU attention is not piecewise linear: its cells are spline pieces bounded by algebraic curves "
        "(Lai, Lim, Liu 2024), which the plane engine cannot split; use --method line or --method sample",
    ),
    "attention/softmax": Refusal(
        NotPiecewiseError,
        f"softmax attention is smooth: the network is not piecewise, so it has no regions to count {_SOFTMAX_LAMBDA}",
    ),
}

#: engine -> key -> None (supported: the engine has a kernel) or the refusal it raises. ``plane``: the exact
#: 2D engine (:mod:`._plane`, refuses before any work), ``line``: the 1D engine's walk (:mod:`._line`, refuses
#: before any work), ``space``: the exact engine for dimension >= 3 (:mod:`._space`, refuses when it reaches
#: the op), ``sample``: the JAX forward pass that records codes (:mod:`._forward`), ``curved``: the exact 2D
#: engine for cells bounded by conic arcs (:mod:`._curved`).
SUPPORT: dict[str, dict[str, Refusal | None]] = {
    "sample": _row({}),  # every op: softmax attention is smooth and records nothing
    "plane": _row(_PLANE_REFUSALS),
    "line": _row(
        {
            "attention/softmax": Refusal(
                NotPiecewiseError,
                f"softmax attention is smooth, not piecewise: it has no pieces to count {_SOFTMAX_LAMBDA}; a "
                "sampled count would see only the FFN ReLU codes",
            ),
        }
    ),
    # the curved exact 2D engine (:mod:`._curved`, refuses before any work); ReLU attention is split while
    # its input is affine (its first attention op), past that it stops where a boundary's degree exceeds 2
    "curved": _row({"attention/softmax": _PLANE_REFUSALS["attention/softmax"]}),
    # the exact interpreter of codes (:mod:`regioncount.networks._interpret`): affine maps and constraints from a
    # region's code, in rational arithmetic; used by the plane engine's exact replay, the linear-region merge
    # and the certificate
    "exact": _row(
        {
            "attention/relu": Refusal(
                CurvedBoundaryError,
                "ReLU attention is not piecewise linear: its pieces carry polynomial maps, not the affine maps the "
                "exact interpreter of codes computes",
            ),
            "attention/softmax": _PLANE_REFUSALS["attention/softmax"],
        }
    ),
    # the float interpreter with rigorous bounds (same module): the filter in front of the exact one
    "float": _row(
        {
            "attention/relu": Refusal(
                CurvedBoundaryError, "ReLU attention is not piecewise linear: its pieces carry no affine maps"
            ),
            "attention/softmax": _PLANE_REFUSALS["attention/softmax"],
        }
    ),
    "space": _row(
        {
            "attention/relu": Refusal(
                CurvedBoundaryError,
                "ReLU attention is not piecewise linear: its cells are spline pieces bounded by algebraic "
                "surfaces (Lai, Lim, Liu 2024); use --method line or --method sample",
            ),
            "attention/softmax": Refusal(
                NotPiecewiseError, "softmax attention is smooth: the network has no regions to count"
            ),
        }
    ),
}


_WHOLE_PLANE = Refusal(
    RegionCountError,
    "--whole-plane covers ReLU MLPs and Maxout networks (convex regions cut out by lines); Transformer cells are "
    "bounded by curves: count a box with --box instead",
)
_NOT_AFFINE = Refusal(
    InexactError,
    "attention's constraints are not affine: the certificate's exact checks cover ReLU and Maxout (its float "
    "checks still run)",
)
_RETRIEVAL = Refusal(RegionCountError, "a retrieval program holds affine, ReLU and a final GroupMax only")

#: Consumers of the op vocabulary that run on the interpreter of codes rather than on kernels of their own:
#: each has a row here (what it supports and how it refuses the rest) and the interpretations it relies on
#: (:data:`CONSUMERS`); ``tests/test_ops_protocol.py`` fails when a key a consumer supports lacks a kernel in
#: one of them.
SUPPORT.update(
    {
        # the plane engine's exact replay (``engines/_exact.py``)
        "plane/replay": _row(_PLANE_REFUSALS),
        # the line engine's exact ReLU/Maxout walk (attention walks are float walks that report exact: false)
        "line/exact": _row({k: _NOT_AFFINE for k in all_keys() if k.startswith("attention/")}),
        # the space engine's rational fallback
        "space/exact": _row({k: r for k, r in SUPPORT["space"].items() if r is not None}),
        # the whole-plane search (``engines/_whole_plane.py``): lines only
        "whole_plane": _row({k: _WHOLE_PLANE for k in all_keys() if k.startswith("attention/")}),
        # the certificate's exact checks (``engines/_certify*.py``)
        "certificate": _row({k: _NOT_AFFINE for k in all_keys() if k.startswith("attention/")}),
        # retrieval score maps (``relations/_retrieval.py``)
        "retrieval": _row({k: _RETRIEVAL for k in all_keys() if k.startswith("attention/")}),
        # the linear-region merge (``results/_linear.py``): exact maps; the float filter where it has bounds
        "linear": _row({k: r for k, r in SUPPORT["exact"].items() if r is not None}),
    }
)

#: consumer -> the interpretations (rows with kernel registries) it runs on
CONSUMERS: dict[str, tuple[str, ...]] = {
    "plane/replay": ("exact",),
    "line/exact": ("exact",),
    "space/exact": ("exact",),
    "whole_plane": ("exact", "float"),
    "certificate": ("exact", "float"),
    "retrieval": ("float",),
    "linear": ("exact",),
}

#: The module whose ``KERNELS`` is each engine's :class:`Kernels` (importing it registers every kernel).
MODULES: dict[str, str] = {
    "plane": "regioncount.engines._plane",
    "line": "regioncount.engines._line",
    "space": "regioncount.engines._space",
    "sample": "regioncount.engines._forward",
    "exact": "regioncount.networks._interpret:EXACT",
    "float": "regioncount.networks._interpret:FLOAT",
    "curved": "regioncount.engines._curved",
}


def kernels_of(engine: str) -> Kernels:
    """The kernel registry of ``engine`` (its module's ``KERNELS``), with every kernel registered."""
    module, _, attr = MODULES[engine].partition(":")
    kernels = getattr(importlib.import_module(module), attr or "KERNELS")
    if not isinstance(kernels, Kernels) or kernels.engine != engine:
        raise TypeError(f"{MODULES[engine]} is not the {engine} engine's kernel registry")
    return kernels


def support(engine: str, key: str) -> Refusal | None:
    """The table's entry for ``engine`` and ``key`` (KeyError: the table has no such row or key)."""
    return SUPPORT[engine][key]


def first_refusal(engine: str, ops: Iterable) -> Refusal | None:
    """The refusal of the first op in ``ops`` (leaf ops, in order) that ``engine`` does not support, or None."""
    row = SUPPORT[engine]
    for op in ops:
        refusal = row[op_key(op)]
        if refusal is not None:
            return refusal
    return None


def refuse_unsupported(engine: str, ops: Iterable) -> None:
    """Raise the refusal of the first op in ``ops`` (leaf ops, in order) that ``engine`` does not support."""
    refusal = first_refusal(engine, ops)
    if refusal is not None:
        refusal.raise_()


class Kernels:
    """One engine's kernels, one per supported key of its row in :data:`SUPPORT`. ``structural``: supported
    keys the engine's driver applies itself, without a kernel (say why where it is declared)."""

    def __init__(self, engine: str, *, structural: tuple[str, ...] = ()):
        if engine not in SUPPORT:
            raise KeyError(f"engine {engine!r} has no row in the support table")
        if any(SUPPORT[engine].get(k, Refusal(RegionCountError, "")) is not None for k in structural):
            raise ValueError(f"structural keys {structural} must be keys the {engine} engine supports")
        self.engine = engine
        # a piecewise-linear activation never reaches a kernel: lowering (``networks.lower``) and the
        # interpreter replace it by its exact ReLU form (``_ops.relu_form``), which every engine runs
        self.structural = tuple(structural) + ("piecewiselinear",)
        self.table: dict[str, Callable] = {}

    def register(self, *keys: str) -> Callable[[Callable], Callable]:
        """Decorator: ``fn`` is this engine's kernel for ``keys``."""
        row = SUPPORT[self.engine]

        def add(fn: Callable) -> Callable:
            for key in keys:
                if key not in row:
                    raise KeyError(f"{key!r} is not an op key of the support table")
                if row[key] is not None:
                    raise ValueError(f"the {self.engine} engine refuses {key!r}: it registers no kernel for it")
                if key in self.table or key in self.structural:
                    raise ValueError(f"the {self.engine} engine has two kernels for {key!r}")
                self.table[key] = fn
            return fn

        return add

    def lookup(self, op) -> Callable:
        """The kernel for ``op``; an op the engine refuses raises its refusal."""
        key = op_key(op)
        fn = self.table.get(key)
        if fn is None:
            refusal = SUPPORT[self.engine][key]
            if refusal is not None:
                refusal.raise_()
            raise TypeError(f"the {self.engine} engine has no kernel for {key!r}")
        return fn

    def missing(self) -> list[str]:
        """Keys the engine's row supports but no kernel is registered for (empty when complete)."""
        return [
            k for k, r in SUPPORT[self.engine].items() if r is None and k not in self.table and k not in self.structural
        ]
