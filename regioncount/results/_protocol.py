"""What every count's result answers (:class:`RegionResult`), and the one record a count is reported as
(:class:`CountRecord`, the JSON of DESIGN §6).

The result types (:class:`~regioncount.results.Partition`, :class:`~regioncount.results.Polytopes`,
:class:`~regioncount.results.Cells`, :class:`~regioncount.engines._line.LinePieces`,
:class:`~regioncount.engines._sample.SampleCount`) keep their own richer interfaces; the protocol is the part
they share, so that a caller (``count_regions``, a figure, a test) can read any of them the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class RegionResult(Protocol):
    """The counts of one network on one domain.

    - ``regions``: the regions counted (activation regions; connected cells for curved boundaries; spline
      pieces with ReLU attention; a lower bound for a sampled count, see ``exact``);
    - ``linear_regions()``: regions with neighbours of equal affine map merged, or None where there are none to
      count (spline pieces, a sampled count);
    - ``region_codes``: ``(regions, C)`` the activation code of each region, or None where the result keeps no
      codes (a sampled count keeps hashes);
    - ``exact``: every decision was made for the float64 network as given (False: a lower bound or float
      tolerances decided something);
    - ``witnesses``: ``(regions, dim)`` a point inside each region in the domain's parameter coordinates
      (``t`` for a segment), or None (a sampled count);
    - ``domain``: the domain counted.
    """

    @property
    def regions(self) -> int: ...

    def linear_regions(self) -> int | None: ...

    @property
    def region_codes(self) -> np.ndarray | None: ...

    @property
    def exact(self) -> bool: ...

    @property
    def witnesses(self) -> np.ndarray | None: ...

    @property
    def domain(self) -> Any: ...


@dataclasses.dataclass(frozen=True)
class CountRecord:
    """One count as :func:`~regioncount.count_regions` reports it.

    ``regions``, ``linear_regions`` (None: not computed), ``exact``, ``method``, ``kind``, ``domain`` and
    ``seconds`` are in every record; ``details`` holds what one engine adds (``predicates``, ``ties``,
    ``samples``, ``certificate``, ...), under the keys the JSON has always used; ``result`` is the result object
    counted (None for a tiled count, which merges tiles and keeps none).
    """

    regions: int
    linear_regions: int | None
    exact: bool
    method: str
    kind: str
    domain: Any
    seconds: float = 0.0
    details: dict = dataclasses.field(default_factory=dict)
    result: RegionResult | None = dataclasses.field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        """The JSON-ready dict (DESIGN §6): the common keys, then ``details``, ``domain`` as its ``as_dict()``."""
        out: dict = {"regions": int(self.regions), "linear_regions": self.linear_regions}
        out.update(self.details)
        out.update(
            exact=bool(self.exact),
            method=self.method,
            kind=self.kind,
            domain=self.domain.as_dict(),
            seconds=self.seconds,
        )
        return out
