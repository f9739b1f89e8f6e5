"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph, its
higher-dimensional sibling (convex polytopes), curved cells and decision regions (the certificate sits above the engines: ``regioncount.certify``)."""

from ._cells import Cells as Cells
from ._decision import decision_labels as decision_labels, decision_summary as decision_summary
from ._partition import Partition as Partition
from ._polytopes import Polytopes as Polytopes
from ._protocol import CountRecord as CountRecord, RegionResult as RegionResult
from ._topology import Topology as Topology, topology as topology

__all__ = [
    "Cells",
    "CountRecord",
    "Partition",
    "Polytopes",
    "RegionResult",
    "Topology",
    "decision_labels",
    "decision_summary",
    "topology",
]
