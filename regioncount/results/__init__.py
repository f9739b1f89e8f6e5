"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph."""

from ._partition import Partition as Partition

__all__ = [
    "Partition",
]
