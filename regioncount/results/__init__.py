"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph, and its
higher-dimensional sibling (convex polytopes)."""

from ._partition import Partition as Partition
from ._polytopes import Polytopes as Polytopes
