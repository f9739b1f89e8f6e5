"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph, its
higher-dimensional sibling (convex polytopes), curved cells and decision regions (the certificate sits above the engines: ``regioncount.certify``)."""

from ._cells import Cells as Cells
from ._decision import decision_labels as decision_labels, decision_summary as decision_summary
from ._partition import Partition as Partition
from ._polytopes import Polytopes as Polytopes

__all__ = [
    "Cells",
    "Partition",
    "Polytopes",
    "decision_labels",
    "decision_summary",
]
