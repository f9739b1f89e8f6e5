"""The exact pieces of a network along a segment, for the output plot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._domain import Segment

if TYPE_CHECKING:
    from ..engines._line import LinePieces


# ----------------------------------------------------------------------------------------------------
# a segment


def line_pieces(net, segment) -> tuple[Segment, LinePieces]:
    """``segment`` (a :class:`Segment` or ``(a, b)``) and the exact pieces of ``net`` along it (``line``
    engine)."""
    from ..engines._line import walk_line

    seg = segment if isinstance(segment, Segment) else Segment(*segment)
    return seg, walk_line(net, seg)
