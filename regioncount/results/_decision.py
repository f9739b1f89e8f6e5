"""Decision regions (DESIGN §9): the partition of a domain by predicted class.

A decision region is a maximal connected union of cells with the same predicted class: cells of an exact
partition of a :class:`~regioncount.networks.DecisionNet` (whose last code digit is the argmax of the
logits) joined across every shared edge of positive length where the class does not change.
"""

from __future__ import annotations

import numpy as np

from ._partition import Partition, _components


def decision_labels(part: Partition, classes) -> np.ndarray:
    """Label ``(R,)`` of the decision region of each cell (its smallest member); ``classes (R,)`` ints."""
    cls = np.asarray(classes).reshape(-1)
    if cls.shape[0] != part.n_regions:
        raise ValueError(f"need one class per region ({part.n_regions}), got {cls.shape[0]}")
    E = part.adjacency()
    same = E[cls[E[:, 0]] == cls[E[:, 1]]] if E.size else E
    return _components(part.n_regions, same)


def decision_summary(part: Partition, classes) -> dict:
    """JSON-ready: ``decision_regions`` (connected), ``classes`` present with their regions and area."""
    cls = np.asarray(classes).reshape(-1)
    lab = decision_labels(part, cls)
    roots = np.unique(lab)
    per_class: dict[str, dict] = {}
    for c in np.unique(cls):
        sel = cls == c
        per_class[str(int(c))] = {
            "regions": int(np.unique(lab[sel]).size),
            "area": float(part.areas[sel].sum()),
        }
    return {"decision_regions": int(roots.size), "classes": per_class}
