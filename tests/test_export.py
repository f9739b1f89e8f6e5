"""``count --export``: GeoParquet and GeoJSON files of the exact 2D partition that geopandas reads back, with
areas summing to the box's and the partition's codes, maps and areas; refusals before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

import regioncount as rc
from regioncount_cli import _validate as checks
from regioncount_cli.main import main

pytest.importorskip("pyarrow", reason="GeoParquet export needs pyarrow (the export extra)")
gpd = pytest.importorskip("geopandas", reason="reading the export back needs geopandas (the test extra)")

BOX = rc.Box(-1.0, 1.0, 2)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    p = tmp_path_factory.mktemp("export") / "m.npz"
    rc.save_model(rc.random_mlp(2, (12, 12), seed=4, init="torch"), p)
    return p


def _check_round_trip(df, part: rc.Partition, box_area: float) -> None:
    assert len(df) == part.n_regions
    df = df.sort_values("region")
    assert np.array_equal(df["region"].to_numpy(), np.arange(part.n_regions))
    assert df["code"].tolist() == part.code_strings()
    assert np.allclose(df["area"].to_numpy(), part.areas, rtol=0, atol=1e-15)
    assert np.isclose(df.geometry.area.sum(), box_area, rtol=1e-12)
    assert np.isclose(df["area"].sum(), box_area, rtol=1e-12)
    assert np.allclose(df.geometry.area.to_numpy(), part.areas, rtol=1e-9, atol=1e-15)
    maps = np.stack(df["map"].to_numpy())
    assert np.array_equal(maps, np.asarray(part.maps).reshape(part.n_regions, -1))
    # each polygon holds its region's centroid, and its neighbours count the partition's adjacency
    assert np.all(shapely.contains_xy(df.geometry.to_numpy(), *part.centroids().T))
    E = part.adjacency()
    assert np.array_equal(df["neighbours"].to_numpy(), np.bincount(E.ravel(), minlength=part.n_regions))


def test_geoparquet_round_trips_through_geopandas(model, tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "part.parquet"
    assert main(["count", str(model), "--export", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    part = rc.partition_plane(rc.load_network(model), BOX)
    df = gpd.read_parquet(out)
    assert res["regions"] == len(df) == part.n_regions
    _check_round_trip(df, part, 4.0)
    geo = json.loads(pq.read_metadata(out).metadata[b"geo"])
    assert geo["version"] == "1.0.0" and geo["primary_column"] == "geometry"
    col = geo["columns"]["geometry"]
    assert col["encoding"] == "WKB" and col["geometry_types"] == ["Polygon"] and col["crs"] is None
    assert np.allclose(col["bbox"], [-1, -1, 1, 1])
    assert df.crs is None


def test_geojson_for_small_partitions(model, tmp_path):
    out = tmp_path / "part.geojson"
    assert main(["count", str(model), "--export", str(out)]) == 0
    part = rc.partition_plane(rc.load_network(model), BOX)
    doc = json.loads(out.read_text())
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == part.n_regions
    # RFC 7946 has no CRS member: readers take lon/lat; these coordinates are the network's inputs
    df = gpd.read_file(out).set_crs(None, allow_override=True)
    _check_round_trip(df, part, 4.0)
    with pytest.raises(rc.RegionCountError, match="GeoJSON"):
        rc.partition_geojson(part, max_regions=part.n_regions - 1)


@pytest.mark.slow
def test_curved_cells_export_one_polygon_per_cell(tmp_path):
    net = rc.random_transformer(2, tokens=3, d_model=4, heads=1, depth=2, seed=1)
    cells = rc.exact_partition_2d(net, BOX)
    assert isinstance(cells, rc.Cells)
    out = tmp_path / "cells.parquet"
    rc.export_partition(cells, out)
    df = gpd.read_parquet(out)
    assert len(df) == cells.n_cells == rc.count_regions(net, BOX)["regions"]
    assert set(df.geom_type) == {"Polygon"}
    assert np.isclose(df["area"].sum(), 4.0, rtol=1e-9)
    # the polygons' arcs are sampled: their areas are close to the exact ones, not equal
    assert np.isclose(df.geometry.area.sum(), 4.0, rtol=1e-6)
    assert np.all(shapely.contains_xy(df.geometry.to_numpy(), *cells.witness.T))


def test_export_refusals_are_one_line_and_write_nothing(model, tmp_path, capsys):
    cases = [
        (["--export", str(tmp_path / "p.csv")], checks.USAGE, ".parquet"),
        (["--export", str(tmp_path / "p.parquet"), "--method", "sample"], checks.USAGE, "--method exact"),
        (["--export", str(tmp_path / "p.parquet"), "--decision"], checks.USAGE, "--decision"),
        (["--export", str(model)], checks.USAGE, ".parquet"),
        (["--export", str(tmp_path / "p.parquet"), "--from", "0,0", "--to", "1,1"], checks.USAGE, "2D"),
    ]
    for extra, code, must in cases:
        assert main(["count", str(model), *extra]) == code, extra
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and err[0].startswith("regioncount: error: ") and must in err[0], err
    assert list(tmp_path.iterdir()) == []
