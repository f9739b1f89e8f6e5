"""An atlas page: one self-contained HTML file (no network, no server) that draws an :class:`~regioncount._atlas_data.Atlas`
on a canvas, with zoom, pan, hover, a layer slider and view toggles.

This module only writes out what :func:`regioncount._atlas_data.atlas_data` computed: typed arrays as base64
(little-endian Float64 vertices relative to the domain's centre, Float32 on the largest pages, Uint32 offsets, the code tree's differences),
the views' colours as palette indices, and the page template ``atlas.html`` (package data) that draws them.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from typing import Any

import numpy as np

from .._atlas_data import Atlas, Pieces
from ._colour import palette

#: Class colours of decision regions (darker than the region palette, so the two views look different).
CLASS_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def _arr(a: np.ndarray | None, kind: str) -> list | None:
    """``[kind, base64]`` of ``a`` as a little-endian typed array (``f4``, ``f8``, ``u1``, ``u2``, ``u4``, ``i4``)."""
    if a is None:
        return None
    dt = {"f4": "<f4", "f8": "<f8", "u1": "u1", "u2": "<u2", "u4": "<u4", "i4": "<i4"}[kind]
    return [kind, base64.b64encode(np.ascontiguousarray(a, dtype=dt).tobytes()).decode("ascii")]


def _uint(a: np.ndarray) -> list:
    """The smallest unsigned typed array that holds ``a``."""
    m = int(a.max(initial=0))
    return _arr(a, "u1" if m < 256 else "u2" if m < 65536 else "u4")  # type: ignore[return-value]


def _identity(group: np.ndarray | None) -> bool:
    """A grouping that leaves every region its own group (it needs no array on the page)."""
    return group is None or bool(np.array_equal(group, np.arange(group.shape[0])))


#: Pages with up to this many vertices keep them in float64 (slivers thinner than float32's 1e-7 of the
#: domain stay true under deep zoom, and hovering near a boundary picks the region the point is in); larger
#: pages use float32 to halve their biggest array.
F64_VERTICES = 2_000_000


def _geometry(p: Pieces, centre: np.ndarray) -> dict:
    kind = "f8" if p.vertices.shape[0] <= F64_VERTICES else "f4"
    return {
        "V": _arr(p.vertices - centre, kind),
        "O": _arr(p.offsets, "u4"),
        "R": _arr(p.region, "u4"),
        "S": _arr(p.size, "f4"),
    }


def atlas_payload(atlas: Atlas, title: str, subtitle: str = "") -> dict:
    """The JSON object the page reads (arrays base64-encoded)."""
    dom: Any = atlas.domain
    lo = np.asarray(dom.param_lo, dtype=np.float64)
    hi = np.asarray(dom.param_hi, dtype=np.float64)
    centre = (lo + hi) / 2
    n_colours = max([int(v.colour.max(initial=0)) + 1 for v in atlas.views] + [1])
    t = atlas.codes
    s = atlas.summary
    kind_label = str(s["kind"]) if s["engine"] == "plane" else f"{s['kind']} (connected cells)"
    out = {
        "title": title,
        "subtitle": subtitle,
        "regions": atlas.n_regions,
        "summary": s,
        "kind_label": kind_label,
        "lo": lo.tolist(),
        "hi": hi.tolist(),
        "centre": centre.tolist(),
        "palette": palette(max(n_colours, 8)),
        "class_palette": list(CLASS_PALETTE),
        "geometry": _geometry(atlas.pieces, centre),
        "outputs": int(atlas.maps.shape[1]),
        "maps": _arr(atlas.maps.reshape(-1), "f4"),
        "areas": _arr(atlas.areas, "f4"),
        "n_vertices": _uint(np.asarray(atlas.n_vertices)),
        "neighbours": _uint(np.asarray(atlas.neighbours)),
        "codes": {
            "parent": _arr(t.parent, "i4"),
            "count": _uint(np.diff(t.off)),  # differences per region (the page sums them into offsets)
            "pos": _uint(t.pos),
            "val": _uint(t.val),
            "length": t.length,
        },
        "code_groups": [[label, int(a), int(b)] for label, a, b in atlas.code_groups],
        "views": [
            {
                "key": v.key,
                "label": v.label,
                "count": v.count,
                "group": None if _identity(v.group) else _arr(v.group, "u4"),
                "colour": _uint(v.colour),
            }
            for v in atlas.views
        ],
        "layer_views": atlas.layer_views,
        "levels": atlas.levels.tolist(),
        "level_segments": _arr((atlas.level_segments - centre).reshape(-1), "f4"),
        "decision": None,
        "outline": None if atlas.outline is None else _arr((atlas.outline - centre).reshape(-1), "f4"),
    }
    d = atlas.decision
    if d is not None:
        out["decision"] = {
            "geometry": _geometry(d.pieces, centre),
            "cells": d.pieces.n,
            "classes": _uint(d.classes),
            "labels": _arr(d.labels, "u4"),
            "count": d.count,
            "n_classes": d.n_classes,
            "boundary": _arr((d.boundary - centre).reshape(-1), "f4"),
        }
    return out


def atlas_html(atlas: Atlas, title: str = "regioncount atlas", subtitle: str | None = None) -> str:
    """The atlas page as one HTML string (self-contained: its data, script and style inline)."""
    s = atlas.summary
    if subtitle is None:
        parts = [f"{s['regions']:,} {s['kind']}" + (" (connected cells)" if s["engine"] == "curved" else "")]
        parts.append("exact" if s["exact"] else "NOT certified exact")
        if s.get("linear_regions") is not None:
            parts.append(f"{s['linear_regions']:,} linear regions")
        if s.get("decision_regions") is not None:
            parts.append(f"{s['decision_regions']:,} decision regions")
        subtitle = " \u00b7 ".join(parts)
    payload = json.dumps(atlas_payload(atlas, title, subtitle), separators=(",", ":"))
    # no "<" at all inside the script element ("</script>" or "<!--" in a label would end or escape it); "<"
    # only occurs inside JSON strings, where \u003c means the same
    payload = payload.replace("<", "\\u003c")
    template = resources.files("regioncount.plotting").joinpath("atlas.html").read_text(encoding="utf-8")
    esc = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return template.replace("__TITLE__", esc).replace("__REGIONS__", str(atlas.n_regions)).replace("__DATA__", payload)
