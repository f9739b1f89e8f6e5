"""Figures (matplotlib, Agg). Functions return image bytes so callers can write files whole."""

from ._depth import plot_scan as plot_scan
