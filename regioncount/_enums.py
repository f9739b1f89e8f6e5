"""The words results are labelled with, spelled once: how a count or a picture was made, and what a cell is.

Each is a :class:`enum.StrEnum`, so a member *is* its string: JSON, CSV, tables, f-strings and ``repr`` show
the same text as before, members compare equal to plain strings, and callers may keep passing ``"sample"`` or
``"exact"``. Imports nothing, so every layer may use it.
"""

from __future__ import annotations

from enum import StrEnum


class _Word(StrEnum):
    """A StrEnum that also *prints* as its string: ``repr`` is the string's own repr, so a result dict shown
    with ``print`` or ``!r`` reads exactly as it did when these were plain strings."""

    def __repr__(self) -> str:
        return repr(self.value)


class Method(_Word):
    """How :func:`~regioncount.count_regions` counts (its ``method`` argument and the ``"method"`` of its result);
    :func:`~regioncount.relations.retrieval_error` takes the same words plus ``AUTO``."""

    EXACT = "exact"
    LINE = "line"
    SAMPLE = "sample"
    #: exact where possible, else sampled (retrieval errors only; not a count method)
    AUTO = "auto"


#: The methods :func:`~regioncount.count_regions` takes, in the order help texts list them.
METHODS: tuple[Method, ...] = (Method.EXACT, Method.LINE, Method.SAMPLE)


class Picture(_Word):
    """How a picture of regions was made (the ``"method"`` of a figure's info): from the exact partition, or
    from a grid of sampled codes (a lower bound). Counts say ``Method.SAMPLE``; pictures say ``SAMPLED``."""

    EXACT = "exact"
    SAMPLED = "sampled"


class Kind(_Word):
    """What the cells of a result are called (the ``"kind"`` of a count, the ``"drawn"`` of a figure)."""

    #: cells of a piecewise-linear network (ReLU, Maxout, hardmax attention)
    ACTIVATION_REGIONS = "activation regions"
    #: cells with ReLU attention: a cubic spline per block (Lai, Lim, Liu 2024)
    SPLINE_PIECES = "spline pieces"
    #: softmax attention is smooth: only the FFN ReLU codes are counted
    SOFTMAX_CODES = "FFN ReLU codes (softmax is smooth)"
    #: neighbouring activation regions with equal affine maps merged
    LINEAR_REGIONS = "linear regions"
    #: cells along a segment of a piecewise-linear network
    ACTIVATION_PIECES = "activation pieces"
