"""Domains: a box in R^q, a 2D affine slice, a k-dimensional affine slice, a segment (DESIGN §2).

Domains are immutable: their arrays are read-only float64 copies of what the caller passed (writing to one
raises ``ValueError``), so a domain never changes under an engine or a result that holds it.

Each serialises itself: ``as_dict()`` is a JSON-ready ``{kind: {field: list}}`` (the ``domain`` a count
records), and :func:`domain_from_dict` (or ``cls.from_dict``) rebuilds the same domain from it, bit for bit
(float64 values survive ``json`` round trips).

Each maps its parameter coordinates to inputs: a box is its own parameter space; a slice maps
``(u1, u2)`` to ``x0 + u1 v1 + u2 v2``; a segment maps ``t in [0, 1]`` to ``a + t (b - a)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._errors import DomainError


def _vec(a, n: int | None = None) -> np.ndarray:
    """A float64 vector copy of ``a`` (a scalar is repeated ``n`` times); never aliases the caller's array."""
    v = np.atleast_1d(np.array(a, dtype=np.float64))
    if n is not None and v.shape == (1,):
        v = np.full(n, v[0])
    if v.ndim != 1 or not np.all(np.isfinite(v)):
        raise DomainError(f"domain bounds must be finite vectors, got {a!r}")
    return v


def _frozen(v: np.ndarray) -> np.ndarray:
    """A read-only, contiguous copy of ``v``: a domain's arrays cannot change after construction."""
    out = np.array(v, dtype=np.float64)
    out.setflags(write=False)
    return out


class _AffineDomain:
    """A domain whose inputs are an affine image ``x = x0 + V u`` of its parameters (see ``input_map``)."""

    def input_map(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x0, V)`` with ``x = x0 + V @ u``; ``V`` is ``(q, dim)``."""
        raise NotImplementedError

    def to_input(self, U: np.ndarray) -> np.ndarray:
        """Parameter points ``(..., dim)`` -> inputs ``(..., q)``."""
        x0, V = self.input_map()
        return x0 + np.asarray(U, dtype=np.float64) @ V.T


class _RectangleParams(_AffineDomain):
    """Parameters range over the rectangle ``[lo, hi]``."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def param_lo(self) -> np.ndarray:
        return self.lo

    @property
    def param_hi(self) -> np.ndarray:
        return self.hi


@dataclasses.dataclass(frozen=True, eq=False)
class Box(_RectangleParams):
    """The box ``[lo, hi]`` in R^q; scalars broadcast to ``dim`` coordinates."""

    lo: np.ndarray
    hi: np.ndarray

    def __init__(self, lo, hi, dim: int | None = None):
        lo_v, hi_v = _vec(lo, dim), _vec(hi, dim)
        if lo_v.shape != hi_v.shape:
            lo_v, hi_v = np.broadcast_arrays(lo_v, hi_v)
        if np.any(hi_v <= lo_v):
            raise DomainError(
                f"empty box: need LO < HI in every coordinate (got LO={lo_v.tolist()}, HI={hi_v.tolist()})"
            )
        object.__setattr__(self, "lo", _frozen(lo_v))
        object.__setattr__(self, "hi", _frozen(hi_v))

    @property
    def dim(self) -> int:
        return int(self.lo.shape[0])

    def input_map(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x0, V)`` with ``x = x0 + V @ u``; ``V`` is ``(q, dim)``."""
        return np.zeros(self.dim), np.eye(self.dim)

    def as_dict(self) -> dict:
        """``{"box": {"lo": [...], "hi": [...]}}``.

        Examples
        --------
        >>> Box(-1.0, 1.0, 2).as_dict()
        {'box': {'lo': [-1.0, -1.0], 'hi': [1.0, 1.0]}}
        """
        return {"box": {"lo": self.lo.tolist(), "hi": self.hi.tolist()}}

    @classmethod
    def from_dict(cls, d: dict) -> Box:
        b = _body(d, "box")
        return cls(b["lo"], b["hi"])


@dataclasses.dataclass(frozen=True, eq=False)
class Slice(_RectangleParams):
    """The 2D slice ``x = x0 + u1 v1 + u2 v2`` over the rectangle ``[lo, hi]`` in ``(u1, u2)``."""

    x0: np.ndarray
    v1: np.ndarray
    v2: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def __init__(self, x0, v1, v2, lo=(0.0, 0.0), hi=(1.0, 1.0)):
        x0, v1, v2 = _vec(x0), _vec(v1), _vec(v2)
        if not (x0.shape == v1.shape == v2.shape):
            raise DomainError("slice origin and directions must have the same dimension")
        if np.linalg.matrix_rank(np.stack([v1, v2])) < 2:
            raise DomainError("slice directions are parallel: the slice has zero area")
        box = Box(lo, hi, 2)
        for name, val in (("x0", x0), ("v1", v1), ("v2", v2), ("lo", box.lo), ("hi", box.hi)):
            object.__setattr__(self, name, _frozen(val))

    dim = 2

    def input_map(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x0, np.stack([self.v1, self.v2], axis=1)

    def as_dict(self) -> dict:
        """``{"slice": {"origin", "dir1", "dir2", "lo", "hi"}}``."""
        return {
            "slice": {
                "origin": self.x0.tolist(),
                "dir1": self.v1.tolist(),
                "dir2": self.v2.tolist(),
                "lo": self.lo.tolist(),
                "hi": self.hi.tolist(),
            }
        }

    @classmethod
    def from_dict(cls, d: dict) -> Slice:
        b = _body(d, "slice")
        return cls(b["origin"], b["dir1"], b["dir2"], b["lo"], b["hi"])


@dataclasses.dataclass(frozen=True, eq=False)
class Segment(_AffineDomain):
    """The segment ``x = a + t (b - a)``, ``t in [0, 1]``."""

    a: np.ndarray
    b: np.ndarray

    def __init__(self, a, b):
        a_v, b_v = _vec(a), _vec(b)
        if a_v.shape != b_v.shape:
            a_v, b_v = np.broadcast_arrays(a_v, b_v)
        if np.all(a_v == b_v):
            raise DomainError("segment of zero length: A equals B")
        object.__setattr__(self, "a", _frozen(a_v))
        object.__setattr__(self, "b", _frozen(b_v))

    dim = 1

    @property
    def param_lo(self) -> np.ndarray:
        return np.zeros(1)

    @property
    def param_hi(self) -> np.ndarray:
        return np.ones(1)

    def input_map(self) -> tuple[np.ndarray, np.ndarray]:
        return self.a, (self.b - self.a)[:, None]

    def as_dict(self) -> dict:
        """``{"segment": {"from": a, "to": b}}``."""
        return {"segment": {"from": self.a.tolist(), "to": self.b.tolist()}}

    @classmethod
    def from_dict(cls, d: dict) -> Segment:
        b = _body(d, "segment")
        return cls(b["from"], b["to"])


def slice_through(points, margin: float = 0.75) -> tuple[Slice, np.ndarray]:
    """The plane through three data points ``points (3, q)`` as a :class:`Slice` over ``[-1, 1]^2``.

    An undistorted frame: the origin is the points' centroid, ``v1`` points from the first point to the
    second, ``v2`` is orthogonal to it in the plane, both of the same length, chosen so that the points lie
    at distance ``margin`` or less from the origin in ``(u1, u2)``. Areas in ``(u1, u2)`` are areas in the
    plane up to one scale. Returns the slice and the points' ``(u1, u2)`` coordinates ``(3, 2)``.
    """
    P = np.asarray(points, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != 3 or not np.all(np.isfinite(P)):
        raise DomainError(
            f"a slice through data needs three finite points of one shape, got an array of shape {P.shape}"
        )
    c = P.mean(axis=0)
    d1, d2 = P[1] - P[0], P[2] - P[0]
    n1 = np.linalg.norm(d1)
    e2 = d2 - (d2 @ d1) / (n1 * n1) * d1 if n1 > 0 else d2
    scale = max(np.linalg.norm(P - c, axis=1).max(), 1e-300)
    if n1 == 0 or np.linalg.norm(e2) <= 1e-12 * scale:
        raise DomainError("the three points are collinear (or equal): they span no plane")
    s = scale / margin
    v1, v2 = d1 / n1 * s, e2 / np.linalg.norm(e2) * s
    uv = np.stack([(P - c) @ v1, (P - c) @ v2], axis=1) / (s * s)
    return Slice(c, v1, v2, (-1.0, -1.0), (1.0, 1.0)), uv


@dataclasses.dataclass(frozen=True, eq=False)
class AffineSlice(_RectangleParams):
    """The ``k``-dimensional slice ``x = x0 + U v`` over the box ``[lo, hi]`` in ``v`` (``U (q, k)``, rank ``k``).

    A 2D slice is :class:`Slice`; this is its sibling for ``k >= 1`` directions (exact counts for ``k >= 3``
    come from the ``space`` engine)."""

    x0: np.ndarray
    U: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def __init__(self, x0, U, lo=0.0, hi=1.0):
        x0 = _vec(x0)
        Um = np.asarray(U, dtype=np.float64)
        if Um.ndim != 2 or Um.shape[0] != x0.shape[0] or not np.all(np.isfinite(Um)):
            raise DomainError(f"slice directions must be a finite ({x0.shape[0]}, k) matrix, got shape {Um.shape}")
        if np.linalg.matrix_rank(Um) < Um.shape[1]:
            raise DomainError("slice directions are linearly dependent: the slice has zero volume")
        box = Box(lo, hi, Um.shape[1])
        if box.dim != Um.shape[1]:
            raise DomainError(f"the slice has {Um.shape[1]} directions but its box has {box.dim} coordinates")
        for name, val in (("x0", x0), ("U", Um.copy()), ("lo", box.lo), ("hi", box.hi)):
            object.__setattr__(self, name, _frozen(val))

    @property
    def dim(self) -> int:
        return int(self.U.shape[1])

    def input_map(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x0, self.U

    def as_dict(self) -> dict:
        """``{"affine_slice": {"origin", "dirs", "lo", "hi"}}``: ``dirs`` lists the ``k`` directions (the
        columns of ``U``), each of the input dimension.

        Examples
        --------
        >>> AffineSlice([0.0, 0.0, 0.0, 0.5], [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]], -1, 1).as_dict()
        {'affine_slice': {'origin': [0.0, 0.0, 0.0, 0.5], 'dirs': [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], 'lo': [-1.0, -1.0, -1.0], 'hi': [1.0, 1.0, 1.0]}}
        """
        return {
            "affine_slice": {
                "origin": self.x0.tolist(),
                "dirs": self.U.T.tolist(),
                "lo": self.lo.tolist(),
                "hi": self.hi.tolist(),
            }
        }

    @classmethod
    def from_dict(cls, d: dict) -> AffineSlice:
        b = _body(d, "affine_slice")
        dirs = np.asarray(b["dirs"], dtype=np.float64)
        if dirs.ndim != 2:
            raise DomainError(f"an affine slice's 'dirs' must be a list of directions, got {b['dirs']!r}")
        return cls(b["origin"], dirs.T, b["lo"], b["hi"])


Domain = Box | Slice | AffineSlice | Segment

#: The key each domain's ``as_dict()`` records it under.
_KINDS: dict[str, type[Box] | type[Slice] | type[AffineSlice] | type[Segment]] = {
    "box": Box,
    "slice": Slice,
    "affine_slice": AffineSlice,
    "segment": Segment,
}


#: The fields each kind records.
_FIELDS = {
    "box": ("lo", "hi"),
    "slice": ("origin", "dir1", "dir2", "lo", "hi"),
    "affine_slice": ("origin", "dirs", "lo", "hi"),
    "segment": ("from", "to"),
}


def _body(d, kind: str) -> dict:
    """The fields of a serialised domain of ``kind``: one key, a dict holding exactly its fields."""
    if (
        not isinstance(d, dict)
        or set(d) != {kind}
        or not isinstance(d[kind], dict)
        or set(d[kind]) != set(_FIELDS[kind])
    ):
        raise DomainError(f"not a serialised {kind}: expected {{{kind!r}: {{{', '.join(_FIELDS[kind])}}}}}, got {d!r}")
    return d[kind]


def domain_from_dict(d: dict) -> Domain:
    """The domain that ``as_dict()`` serialised as ``d`` (a box, slice, affine slice or segment).

    Examples
    --------
    >>> s = Slice([0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], (-1, -1), (1, 1))
    >>> t = domain_from_dict(s.as_dict())
    >>> type(t).__name__, t.x0.tolist(), t.as_dict() == s.as_dict()
    ('Slice', [0.0, 0.0, 1.0], True)
    """
    if not isinstance(d, dict) or len(d) != 1 or next(iter(d)) not in _KINDS:
        raise DomainError(f"not a serialised domain: expected one key of {', '.join(_KINDS)}, got {d!r}")
    return _KINDS[next(iter(d))].from_dict(d)
