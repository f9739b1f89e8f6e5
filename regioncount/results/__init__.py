"""Result types: the exact 2D partition with codes, polygons, affine maps and adjacency graph, and its
independent certificate."""

from ._certify import certify as certify
from ._decision import decision_labels as decision_labels, decision_summary as decision_summary
from ._partition import Partition as Partition
