"""Decision regions beside activation regions on a 2D domain."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._errors import MemoryCapError, RegionCountError
from ..results import Partition
from ._geometry import shared_edges
from ._source import DEFAULT_MAX_REGIONS

# ----------------------------------------------------------------------------------------------------
# decision regions beside activation regions


@dataclasses.dataclass(frozen=True, eq=False)
class DecisionView:
    """The exact partitions behind a picture of decision regions (DESIGN §9).

    ``base``: the activation regions of the network; ``cells``: those of its decision network, each with
    its predicted class ``classes (R,)`` and decision region ``labels (R,)``; ``boundary (S, 2, 2)``: the
    segments between cells of different classes; ``n_classes``: classes given a colour."""

    base: Partition
    cells: Partition
    classes: np.ndarray
    labels: np.ndarray
    boundary: np.ndarray
    n_classes: int

    @property
    def decision_regions(self) -> int:
        return int(np.unique(self.labels).size)

    @property
    def present(self) -> np.ndarray:
        """The classes predicted somewhere on the domain, ascending."""
        return np.unique(self.classes)


def decision_view(
    net, domain, *, classes: int | None = None, max_regions: int | None = DEFAULT_MAX_REGIONS
) -> DecisionView:
    """Activation regions and decision regions of ``net`` on a 2D ``domain``, both exact; more than
    ``max_regions`` cells raise :class:`RegionCountError`. ``classes``: how many classes to colour (default:
    the most of the predicted classes, the network's outputs, and 2)."""
    from .._decide import decision_partitions
    from ..results import decision_labels

    try:
        base, dec, cls = decision_partitions(net, domain, max_regions=max_regions)
    except MemoryCapError as e:
        raise RegionCountError(f"decision regions need the exact partition, and it has too many cells ({e})") from None
    n_cls = int(classes or max(int(cls.max()) + 1 if cls.size else 1, getattr(net, "output_dim", 1), 2))
    lab = decision_labels(dec, cls)
    E = dec.adjacency()
    boundary = shared_edges(dec, E[cls[E[:, 0]] != cls[E[:, 1]]]) if E.size else np.zeros((0, 2, 2))
    return DecisionView(base, dec, cls, lab, boundary, n_cls)
