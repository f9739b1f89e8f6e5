"""``count --export FILE``: the exact 2D partition of the count as GeoParquet or GeoJSON (checks before any
work, the file's bytes after the count; ``count`` writes them with its other files, whole or not at all)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regioncount import DomainError, RegionCountError, Segment, Slice

from . import _validate as checks
from ._common import LazyProgress

ExportOpt = Annotated[
    Path | None,
    typer.Option(
        help="exact 2D: also write the partition, one row per region (polygon, code, affine map, area): "
        ".parquet (GeoParquet, needs pyarrow) or .geojson (small partitions).",
    ),
]


def check_export(export: Path, out, model, method, decision, whole_plane, tiles) -> None:
    """--export: an exact 2D count with a file of a known format, checked before any work."""
    from regioncount import export_format

    if method != "exact" or decision or whole_plane or tiles:
        raise checks.UsageError(
            "--export writes the exact 2D partition: it needs --method exact, without --decision/--whole-plane/--tiles"
        )
    try:
        export_format(export)
    except RegionCountError as e:
        raise checks.UsageError(f"--export: {e}") from None
    checks.check_outputs({"--out": out, "--export": export}, {"MODEL": model})


def export_domain(dom) -> None:
    if isinstance(dom, Segment) or not (isinstance(dom, Slice) or dom.dim == 2):
        raise DomainError("--export writes a 2D partition: give a 2D box (a 2-input model) or a 2D slice")


def export_file_bytes(net, dom, path: Path, max_regions, regions: int) -> bytes:
    """The partition the count was made of, recomputed by the same engine, as the file ``path`` names."""
    from regioncount import exact_partition_2d, export_bytes

    with LazyProgress("partitioning for --export") as bar:
        result = exact_partition_2d(net, dom, max_regions=max_regions, progress=bar)
    n = result.n_regions if hasattr(result, "n_regions") else result.n_cells
    if n != regions:
        raise RegionCountError(f"internal: the export has {n} regions, the count {regions}")
    return export_bytes(result, path)
