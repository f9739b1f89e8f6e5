"""Exact 2D partitions as files other tools read: GeoParquet (one row per region) and GeoJSON (small ones).

Each row is one region (activation region, or connected cell where boundaries are curved): its polygon in the
domain's ``(u1, u2)``, its code (``code``: digits joined, or dot-separated when a digit exceeds 9), its
affine output map (``map``: ``[a, b, c]`` per output, output ``o`` being ``a u1 + b u2 + c``, flattened),
``area``, ``linear_region`` (label of its linear region, -1 where there are none), ``neighbours``.

GeoParquet 1.0.0 (https://geoparquet.org): the geometry column ``geometry`` holds WKB (``shapely.to_wkb``)
and the file's key-value metadata holds ``geo``, a JSON object with ``version``, ``primary_column`` and per
column ``encoding`` (``WKB``), ``geometry_types``, ``crs`` (``null``: the coordinates are the network's
inputs, not places on Earth), ``orientation`` (``counterclockwise``, as the plane engine writes its
polygons), ``edges`` (``planar``) and ``bbox``. Written with ``pyarrow`` (the ``export`` extra). Curved cells
are the union of their trapezoids, arcs sampled at :data:`ARC_SAMPLES` points (the counts, codes and the
``area`` column are exact; the polygons' arcs are sampled, so their own areas are off by the chords' sagittas).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from ._errors import CurvedBoundaryError, RegionCountError
from .results import Cells, Partition

#: GeoJSON (text, every coordinate spelled out) is written for partitions up to this many regions.
GEOJSON_MAX_REGIONS = 100_000
#: Arc samples per side of a curved trapezoid.
ARC_SAMPLES = 16
#: File suffixes and the format each one names.
FORMATS = {".parquet": "geoparquet", ".geoparquet": "geoparquet", ".geojson": "geojson"}


def _strings(rows) -> list[str]:
    """Codes as strings: digits joined, or dot-separated when a digit exceeds 9."""
    rows = np.asarray(rows)
    wide = rows.size and rows.max() > 9
    return [(".".join if wide else "".join)(map(str, r)) for r in rows.tolist()]


def export_format(path) -> str:
    """The format a file name asks for: ``geoparquet`` (``.parquet``) or ``geojson`` (``.geojson``)."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise RegionCountError(f"an export is .parquet (GeoParquet) or .geojson, got {Path(path).name!r}")
    return FORMATS[suffix]


def exact_partition_2d(net, domain, *, max_regions: int | None = None, progress=None) -> Partition | Cells:
    """The exact partition of a 2D ``domain``: the ``plane`` engine, or the ``curved`` engine where
    boundaries are conics."""
    from .engines._plane import partition_plane

    try:
        return partition_plane(net, domain, max_regions=max_regions, progress=progress)
    except CurvedBoundaryError:
        from .engines._curved import partition_curved

        return partition_curved(net, domain, max_traps=max_regions, progress=progress)


def _geometries(result: Partition | Cells) -> np.ndarray:
    import shapely

    if isinstance(result, Partition):
        return result.to_shapely()
    from ._views import trapezoid_polygons

    P = trapezoid_polygons(result, samples=ARC_SAMPLES)
    # a trapezoid pinched to a point at a vertical tangent is not a valid ring: make_valid keeps its area
    traps = shapely.make_valid(shapely.polygons(P))
    cell = result.cell_of
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.arange(result.n_cells + 1))
    out = np.empty(result.n_cells, dtype=object)
    # trapezoids of one cell meet along arcs sampled at different abscissae: a union on a grid of 1e-9 of the
    # domain closes the float-size gaps between them, and the parts of zero area make_valid leaves are dropped
    grid = 1e-9 * float(np.max(result.half))
    for c in range(result.n_cells):
        u = shapely.union_all(traps[order[bounds[c] : bounds[c + 1]]], grid_size=grid)
        if u.geom_type != "Polygon":
            u = shapely.union_all([g for g in shapely.get_parts(u) if g.area > 0], grid_size=grid)
        out[c] = u
    return out


def region_records(result: Partition | Cells) -> dict:
    """The columns of the export: ``geometry`` (shapely, ``(R,)``), ``region``, ``code``, ``map`` ``(R, 3 out)``,
    ``area``, ``linear_region``, ``neighbours``."""
    if isinstance(result, Partition):
        R = result.n_regions
        # the codes the ops record (a piecewise-linear op's pieces), as strings
        codes = _strings(result.region_codes) if result.region_codes is not result.codes else result.code_strings()
        maps = np.asarray(result.maps).reshape(R, -1)
        areas = np.asarray(result.areas)
        E = np.asarray(result.adjacency())
        lin = result.linear_region_labels() if result.maps.shape[1] else None
    else:
        from ._atlas_data import _maps_in_domain

        R = result.n_cells
        codes = _strings(result.region_codes)
        maps = _maps_in_domain(result).reshape(R, -1) if result.maps is not None else np.zeros((R, 0))
        areas = np.asarray(result.cell_area)
        E = np.asarray(result.adjacency)
        lin = result.linear_region_labels()
    lab = np.full(R, -1, np.int64) if lin is None else np.unique(lin, return_inverse=True)[1].reshape(-1)
    return {
        "geometry": _geometries(result),
        "region": np.arange(R, dtype=np.int64),
        "code": codes,
        "map": maps,
        "area": areas,
        "linear_region": lab,
        "neighbours": np.bincount(E.ravel(), minlength=R) if E.size else np.zeros(R, np.int64),
    }


def partition_geoparquet(result: Partition | Cells) -> bytes:
    """The GeoParquet file (bytes) of an exact 2D partition (module docstring). Needs ``pyarrow``."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RegionCountError(
            "GeoParquet export needs pyarrow: pip install 'regioncount[export]' (or export .geojson)"
        ) from None
    import shapely

    rec = region_records(result)
    geoms = rec["geometry"]
    m = rec["map"]
    maps = pa.FixedSizeListArray.from_arrays(pa.array(m.reshape(-1), pa.float64()), m.shape[1])
    table = pa.table(
        {
            "region": pa.array(rec["region"]),
            "code": pa.array(rec["code"], pa.string()),
            "map": maps,
            "area": pa.array(rec["area"], pa.float64()),
            "linear_region": pa.array(rec["linear_region"]),
            "neighbours": pa.array(rec["neighbours"].astype(np.int64)),
            "geometry": pa.array(shapely.to_wkb(geoms), pa.binary()),
        }
    )
    types = sorted(set(shapely.get_type_id(geoms).tolist()))
    names = {3: "Polygon", 6: "MultiPolygon"}
    b = shapely.total_bounds(geoms)
    geo = {
        "version": "1.0.0",
        "primary_column": "geometry",
        "columns": {
            "geometry": {
                "encoding": "WKB",
                "geometry_types": [names.get(t, "GeometryCollection") for t in types],
                "crs": None,
                "orientation": "counterclockwise",
                "edges": "planar",
                "bbox": [float(v) for v in b],
            }
        },
    }
    meta = dict(table.schema.metadata or {})
    meta[b"geo"] = json.dumps(geo).encode()
    table = table.replace_schema_metadata(meta)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def partition_geojson(result: Partition | Cells, max_regions: int = GEOJSON_MAX_REGIONS) -> str:
    """A GeoJSON FeatureCollection (text) of an exact 2D partition, one Feature per region with the
    properties of the GeoParquet rows; refuses partitions above ``max_regions`` (use GeoParquet)."""
    import shapely

    n = result.n_regions if isinstance(result, Partition) else result.n_cells
    if n > max_regions:
        raise RegionCountError(
            f"the partition has {n:,} regions, more than the {max_regions:,} a GeoJSON export holds: export .parquet"
        )
    rec = region_records(result)
    feats = []
    for i, g in enumerate(rec["geometry"]):
        feats.append(
            {
                "type": "Feature",
                "geometry": json.loads(shapely.to_geojson(g)),
                "properties": {
                    "region": int(rec["region"][i]),
                    "code": rec["code"][i],
                    "map": rec["map"][i].tolist(),
                    "area": float(rec["area"][i]),
                    "linear_region": int(rec["linear_region"][i]),
                    "neighbours": int(rec["neighbours"][i]),
                },
            }
        )
    return json.dumps({"type": "FeatureCollection", "features": feats})


def export_bytes(result: Partition | Cells, path) -> bytes:
    """The export of ``result`` in the format ``path``'s suffix names."""
    if export_format(path) == "geoparquet":
        return partition_geoparquet(result)
    return partition_geojson(result).encode()


def export_partition(result: Partition | Cells, path) -> None:
    """Write the export of ``result`` to ``path`` (format from the suffix), whole or not at all."""
    from ._io import write_atomic

    write_atomic(path, export_bytes(result, path))
