"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph, and curved cells."""

from ._cells import Cells as Cells
from ._partition import Partition as Partition
