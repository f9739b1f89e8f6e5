"""Exact counts by tiles: the same regions and linear regions as one partition of the whole domain, for every
architecture and construction, with borders through vertices and along region boundaries; Dask = in-process."""

import sys

import numpy as np
import pytest

from regioncount import (
    MLP,
    bound_attaining_transformer,
    count_regions,
    product_maxout,
    product_relu,
    random_maxout,
    random_mlp,
    random_transformer,
)
from regioncount._domain import Box, Segment, Slice
from regioncount._errors import DomainError, RegionCountError
from regioncount.engines._plane import partition_plane
from regioncount.engines._sample import count_sampled
from regioncount.engines._tiles import _cuts, count_tiled, split_domain, tile_grid

TILES = [1, 4, 9, 16]


def line_mlp(lines, readout) -> MLP:
    """One ReLU layer, unit ``i`` = ``a_i u1 + b_i u2 + c_i`` for ``lines[i] = (a_i, b_i, c_i)``."""
    L = np.asarray(lines, dtype=np.float64)
    return MLP((L[:, :2], np.asarray(readout, dtype=np.float64).reshape(1, -1)), (L[:, 2], np.zeros(1)))


def _compiled(layout):
    net, info = bound_attaining_transformer(2, 2, 2, 6, layout=layout)
    return net, Box(*info["box"])


CASES = {
    "mlp": lambda: (random_mlp(2, [8, 8], seed=1), Box(-1, 1, 2)),
    "maxout": lambda: (random_maxout(2, [4, 3], k=3, seed=0), Box(-1, 1, 2)),
    # product_relu (6, 6, 3) on [-1, 2]^2: 1792 regions, the ReLU lower bound (DESIGN §5)
    "product_relu": lambda: (product_relu([6, 6, 3], 2), Box(-1, 2, 2)),
    # product_maxout k = 3 (4, 4, 2): 5625, the maxout lower bound
    "product_maxout": lambda: (product_maxout([4, 4, 2], 2, 3), Box(-1, 2, 2)),
    "transformer_paper": lambda: _compiled("paper"),
    "transformer_compact": lambda: _compiled("compact"),
    # hardmax attention whose linear regions are fewer than its activation regions
    "random_transformer": lambda: (
        random_transformer(input_dim=2, tokens=3, d_model=4, depth=1, d_ff=2, seed=3),
        Box(-1, 1, 2),
    ),
    "slice": lambda: (
        random_mlp(3, [6, 6], seed=2),
        Slice([0.1, -0.2, 0.3], [1.0, 0.2, -0.3], [0.1, 1.0, 0.5], (-1.5, -1.0), (1.0, 1.5)),
    ),
}
CLOSED_FORMS = {"product_relu": 1792, "product_maxout": 5625}


@pytest.fixture(scope="module")
def untiled():
    out = {}
    for name, make in CASES.items():
        net, dom = make()
        part = partition_plane(net, dom)
        out[name] = (net, dom, part, part.n_regions, part.linear_regions())
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_tiles_equal_one_partition(untiled, name):
    net, dom, _, regions, linear = untiled[name]
    if name in CLOSED_FORMS:
        assert regions == linear == CLOSED_FORMS[name]
    seen_pieces = []
    for n in TILES:
        t = count_tiled(net, dom, n)
        assert (t.regions, t.linear_regions) == (regions, linear), n
        seen_pieces.append(t.pieces)
    assert seen_pieces[0] == regions
    # the borders did cut regions (else the merge was never exercised)
    assert max(seen_pieces) > regions
    if name == "random_transformer":
        assert linear < regions


def test_non_square_grid(untiled):
    net, dom, _, regions, linear = untiled["maxout"]
    for grid in [(2, 3), (3, 1), (1, 5), 6]:
        t = count_tiled(net, dom, grid)
        assert (t.regions, t.linear_regions) == (regions, linear)
    assert tile_grid(6) == (2, 3) and tile_grid(7) == (1, 7) and tile_grid(16) == (4, 4)


def test_pieces_cover_the_regions(untiled):
    """The kept pieces, grouped by cell, have the codes and areas of the single partition's regions; the
    merged view's own adjacency (border edges share tags) joins the same pieces (a second route)."""
    net, dom, part, regions, _ = untiled["product_maxout"]
    t = count_tiled(net, dom, 9, keep=True)
    P = t.partition
    assert P.n_regions == t.pieces
    cells, inv = np.unique(t.cell_of_piece, return_inverse=True)
    assert cells.size == regions
    # every piece of a cell has the cell's code, and each cell's area is its region's
    codes = P.code_bytes()
    assert np.all(codes == codes[t.cell_of_piece])
    key = {bytes(c): i for i, c in enumerate(part.code_bytes())}
    assert len(key) == regions
    area = np.bincount(inv, P.areas)
    ref = part.areas[[key[bytes(codes[c])] for c in cells]]
    np.testing.assert_allclose(area, ref, rtol=1e-9, atol=1e-12)
    E = P.adjacency()
    same = np.all(codes[E[:, 0]] == codes[E[:, 1]], axis=1)
    from regioncount.results._partition import _components

    assert np.unique(_components(P.n_regions, E[same])).size == regions
    assert np.unique(t.linear_of_piece).size == t.linear_regions


def test_border_along_lines_and_through_vertices():
    """Units whose lines are the tile borders, crossing at the tile corner (0, 0), on [-1, 1]^2 with N = 4:
    u1 = 0, u2 = 0 and u1 = u2 give 6 regions. The third unit has readout 0, so its line is no boundary of
    the function: 4 linear regions (the quadrants)."""
    net = line_mlp([(1, 0, 0), (0, 1, 0), (1, -1, 0)], [1.0, -2.0, 0.0])
    dom = Box(-1, 1, 2)
    for n in TILES:
        t = count_tiled(net, dom, n)
        assert (t.regions, t.linear_regions) == (6, 4), n
    # one line on a border (its two sides never share a code across it) and a readout that hides it
    net = line_mlp([(1, 0, 0), (0.3, 1, 0.1)], [0.0, 1.0])
    for n in TILES:
        t = count_tiled(net, dom, n)
        assert (t.regions, t.linear_regions) == (4, 2), n


def test_linear_regions_across_a_border_are_decided_exactly():
    """The line u1 = 0 is the border of the 2 x 2 tiles; its unit's readout is 1e-17, so the maps on its two
    sides differ by 1e-17 u1: exactly, no two of the 4 regions share a map. The float rule with a relative
    tolerance (``rtol``) merges some across the border and says it is not exact."""
    net = line_mlp([(1, 0, 0), (0.3, 1, 0.1)], [1e-17, 1.0])
    dom = Box(-1, 1, 2)
    part = partition_plane(net, dom)
    assert (part.n_regions, part.linear_regions()) == (4, 4)
    for n in TILES:
        t = count_tiled(net, dom, n)
        assert (t.regions, t.linear_regions, t.linear_exact) == (4, 4, True), n
    t = count_tiled(net, dom, 4, rtol=1e-9)
    assert (t.regions, t.linear_exact) == (4, False) and t.linear_regions < 4


def test_borders_of_a_3x3_grid_as_lines():
    """N = 9 on [-1, 1]^2: the lines u1 = x_1 and u2 = y_2 are tile borders (the same floats the tiles use)
    and u1 = u2 runs through the tile corners (x_1, y_1) and (x_2, y_2): three lines in general position
    with their crossings inside, 1 + 3 + 3 = 7 regions (Zaslavsky)."""
    xs = _cuts(-1.0, 1.0, 3)
    net = line_mlp([(1, 0, -xs[1]), (0, 1, -xs[2]), (1, -1, 0)], [1.0, 1.0, 1.0])
    dom = Box(-1, 1, 2)
    assert partition_plane(net, dom).n_regions == 7
    for n in TILES:
        t = count_tiled(net, dom, n)
        assert (t.regions, t.linear_regions) == (7, 7), n


def test_split_domain_covers_the_domain():
    dom = Box([-1.0, 0.0], [2.0, 0.7])
    tiles = split_domain(dom, (2, 3))
    assert [i for i, _ in tiles] == [(r, c) for r in range(2) for c in range(3)]
    area = sum(float(np.prod(t.hi - t.lo)) for _, t in tiles)
    assert area == pytest.approx(2.1, rel=1e-12)
    assert tiles[0][1].lo.tolist() == [-1.0, 0.0] and tiles[-1][1].hi.tolist() == [2.0, 0.7]
    # neighbours share their cut coordinates bitwise
    assert tiles[0][1].hi[0] == tiles[1][1].lo[0] and tiles[0][1].hi[1] == tiles[3][1].lo[1]


def test_bad_tiles():
    net = random_mlp(2, [4], seed=0)
    with pytest.raises(DomainError):
        count_tiled(net, Box(-1, 1, 2), 0)
    with pytest.raises(DomainError):
        count_tiled(net, Box(-1, 1, 2), (2, 0))
    with pytest.raises(DomainError):
        split_domain(Box(-1, 1, 3), 4)
    with pytest.raises(RegionCountError):
        count_regions(net, Segment([0, 0], [1, 1]), method="line", tiles=4)


def test_count_regions_with_tiles(untiled):
    net, dom, _, regions, linear = untiled["mlp"]
    out = count_regions(net, dom, tiles=9)
    assert (out["regions"], out["linear_regions"], out["tiles"]) == (regions, linear, [3, 3])
    assert out["exact"] is True and out["pieces"] > regions


def test_without_dask(monkeypatch):
    """A missing dask is one clear error naming the extra, only when a cluster is asked for."""
    from regioncount.engines._distributed import dask_client

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(RegionCountError, match=r"regioncount\[dask\]"):
        with dask_client(workers=1):
            pass
    net = random_mlp(2, [4], seed=0)
    assert count_tiled(net, Box(-1, 1, 2), 4).regions == partition_plane(net, Box(-1, 1, 2)).n_regions


def test_dask_equals_in_process(untiled):
    """Tiles and sample chunks as tasks on a LocalCluster started here give the in-process numbers."""
    pytest.importorskip("distributed")
    from regioncount.engines._distributed import dask_client

    mlp, dom, _, regions, linear = untiled["mlp"]
    tf, tdom, _, t_regions, t_linear = untiled["transformer_paper"]
    with dask_client(workers=2, processes=False) as client:
        for net, d, ref in ((mlp, dom, (regions, linear)), (tf, tdom, (t_regions, t_linear))):
            local = count_tiled(net, d, 9)
            remote = count_tiled(net, d, 9, client=client)
            assert (remote.regions, remote.linear_regions, remote.pieces) == (
                local.regions,
                local.linear_regions,
                local.pieces,
            )
            assert (remote.regions, remote.linear_regions) == ref
        for opts in (dict(grid=300), dict(samples=50_000, seed=4)):
            a = count_sampled(mlp, dom, chunk=4096, **opts)
            b = count_sampled(mlp, dom, chunk=4096, client=client, **opts)
            fields = ("regions", "samples", "f1", "f2", "chao1", "ties")
            assert [getattr(b, f) for f in fields] == [getattr(a, f) for f in fields]
            assert a.regions <= regions


def test_cli_tiles(capsys, tmp_path):
    """``count --method exact --tiles N`` prints the untiled numbers; bad combinations are one stderr line."""
    import json

    from regioncount._io import save_model
    from regioncount_cli.main import main

    path = tmp_path / "m.npz"
    save_model(random_mlp(2, [8, 8], seed=1), path)
    assert main(["count", str(path), "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    for tiles, grid in (("9", [3, 3]), ("2x3", [2, 3])):
        assert main(["count", str(path), "--method", "exact", "--tiles", tiles, "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert (res["regions"], res["linear_regions"], res["tiles"]) == (ref["regions"], ref["linear_regions"], grid)
    assert main(["count", str(path), "--tiles", "4", "--shards", str(tmp_path / "shards"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["regions"] == ref["regions"]
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == [
        f"tile-{r}-{c}.npz" for r in (0, 1) for c in (0, 1)
    ]
    for argv in (
        ["--tiles", "0"],
        ["--tiles", "2y3"],
        ["--tiles", "4", "--method", "sample"],
        ["--workers", "2"],
        ["--tiles", "4", "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"],
        ["--tiles", "4", "--box", "-1", "1", "--from", "0,0", "--to", "1,1"],
        ["--shards", str(tmp_path / "s")],
    ):
        assert main(["count", str(path), *argv]) != 0
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("regioncount: error: ") and err.count("\n") == 1, argv


def test_shards_on_disk(tmp_path, untiled):
    """Each tile's partition goes to its own shard, whole; the shards read back as the tiles' partitions and
    count again (from disk, one tile at a time) to the same numbers."""
    from regioncount.engines._tiles import count_shards, read_shard

    net, dom, _, regions, linear = untiled["slice"]
    folder = tmp_path / "shards"
    t = count_tiled(net, dom, (2, 3), shards=folder, keep=True)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(f"tile-{r}-{c}.npz" for r in range(2) for c in range(3))
    parts = [read_shard(folder / f"tile-{r}-{c}.npz") for r in range(2) for c in range(3)]
    assert sum(p.n_regions for p in parts) == t.pieces
    np.testing.assert_array_equal(np.concatenate([p.code_bytes() for p in parts]), t.partition.code_bytes())
    np.testing.assert_array_equal(np.concatenate([p.areas for p in parts]), t.partition.areas)
    assert (
        isinstance(parts[0].domain, Slice)
        and parts[0].domain.hi.tolist() == split_domain(dom, (2, 3))[0][1].hi.tolist()
    )
    again = count_shards(dom, (2, 3), folder)
    assert (again.regions, again.linear_regions) == (t.regions, t.linear_regions) == (regions, linear)


def test_scan_counts_big_cells_by_tiles(monkeypatch):
    """A scan cell over TILE_REGIONS is counted by tiles, to the same numbers; counted_cells says which cells
    were counted and which stayed formulas."""
    from regioncount import _scan
    from regioncount_cli._cluster import counted_line

    whole = _scan.constructed_row(6)
    monkeypatch.setattr(_scan, "TILE_REGIONS", 500)
    calls = []
    real = count_tiled

    def spy(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr("regioncount.engines._tiles.count_tiled", spy)
    tiled = _scan.constructed_row(6)
    assert calls and whole["constructed_formula"] > 500
    assert (tiled["constructed"], tiled["constructed_linear"]) == (whole["constructed"], whole["constructed_linear"])
    assert (tiled["compact"], tiled["compact_linear"]) == (whole["compact"], whole["compact_linear"])
    cap = whole["constructed_formula"]
    rows = [_scan.constructed_row(D, region_cap=cap) for D in range(1, 7)]
    cells = _scan.counted_cells(rows)
    for name, key in (("paper", "constructed"), ("compact", "compact")):
        f = {r["depth"]: r[key + "_formula"] for r in rows if r[key + "_formula"] is not None}
        assert cells["counted"][name] == [d for d, v in f.items() if v <= cap]
        assert cells["formulas"][name] == [d for d, v in f.items() if v > cap]
    assert cells["formulas"]["compact"]  # the cap leaves some compact cells as formulas
    line = counted_line(cells, cap)
    assert line == (
        "counted exactly: paper D = 3-6; compact D = 2-3. formulas (over --region-cap 3,283): compact D = 4-6."
    )


def test_cli_scheduler(capsys, tmp_path):
    """``--scheduler ADDRESS`` runs the tiles on a cluster someone else started (here: this test)."""
    distributed = pytest.importorskip("distributed")
    import json

    from regioncount._io import save_model
    from regioncount_cli.main import main

    path = tmp_path / "m.npz"
    net = random_mlp(2, [8, 8], seed=1)
    save_model(net, path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        assert main(["count", str(path), "--tiles", "9", "--scheduler", lc.scheduler_address, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    part = partition_plane(net, Box(-1, 1, 2))
    assert (res["regions"], res["linear_regions"]) == (part.n_regions, part.linear_regions())


def _zaslavsky_in_box(net, half: float) -> int:
    """Regions of one ReLU layer's lines (in general position, each crossing the box) inside
    ``[-half, half]^2``: 1 + n + the crossings inside, found here by solving each pair's 2 x 2 system."""
    W, b = net.weights[0], net.biases[0]
    assert np.all(np.abs(b) / np.hypot(W[:, 0], W[:, 1]) < half)  # every line crosses the box
    i, j = np.triu_indices(W.shape[0], 1)
    det = W[i, 0] * W[j, 1] - W[i, 1] * W[j, 0]
    x = (b[j] * W[i, 1] - b[i] * W[j, 1]) / det
    y = (b[i] * W[j, 0] - b[j] * W[i, 0]) / det
    m = np.maximum(np.abs(x), np.abs(y))
    assert not np.any(np.abs(m - half) < 1e-6 * half)  # no crossing near the box's sides
    return 1 + W.shape[0] + int(np.sum(m < half))


@pytest.mark.parametrize("grid", [4, (2, 3), 9, 16])
def test_tiles_exact_on_a_huge_box(grid):
    """One ReLU layer of n = 60 random lines on [-1e5, 1e5]^2 holds every crossing: 1 + n + C(n, 2) = 1831
    regions (Zaslavsky), all of them linear regions. The border merge once dropped border segments below
    1e-9 of the domain's diameter (2.8e-4 here) and counted 1832 by 2 x 2 and 4 x 4 tiles; it is decided by
    the codes now, with the geometric merge as the certificate's second route."""
    from math import comb

    net = random_mlp(2, [60], seed=0)
    dom = Box(-1e5, 1e5, 2)
    want = 1 + 60 + comb(60, 2)
    assert _zaslavsky_in_box(net, 1e5) == want == partition_plane(net, dom).n_regions
    t = count_tiled(net, dom, grid, certify=grid == (2, 3))
    assert (t.regions, t.linear_regions) == (want, want)
    assert t.pieces > want
    if grid != (2, 3):
        return
    cert = t.certificate
    assert cert["passed"] and cert["checks"]["merge"]["passed"] and cert["checks"]["tiles"]["passed"]
    assert len(cert["tile_checks"]) == t.tiles[0] * t.tiles[1]


@pytest.mark.slow
def test_tiles_exact_2000_units():
    """A 2000-unit layer on [-1e5, 1e5]^2 by 2 x 2 tiles: 1 + 2000 + 1,998,991 crossings inside (9 of the
    C(2000, 2) pairs of this seed cross outside) = 2,000,992 regions; the old merge gave about 2,003,000.
    Over two minutes under load and about 1 GB: slow."""
    net = random_mlp(2, [2000], seed=0)
    t = count_tiled(net, Box(-1e5, 1e5, 2), 4)
    assert t.regions == t.linear_regions == _zaslavsky_in_box(net, 1e5) == 2_000_992


def test_certify_with_tiles_cli(capsys, tmp_path):
    """``count --tiles --certify`` certifies each tile and the merge (it was dropped without a word)."""
    import json

    from regioncount._io import save_model
    from regioncount_cli.main import main

    path = tmp_path / "m.npz"
    save_model(random_mlp(2, [8, 8], seed=1), path)
    assert main(["count", str(path), "--tiles", "2x3", "--certify", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["certificate"]["passed"] is True
    assert set(res["certificate"]["checks"]) == {"tiles", "merge"}
    assert res["regions"] == partition_plane(random_mlp(2, [8, 8], seed=1), Box(-1, 1, 2)).n_regions


def test_certify_merge_catches_a_wrong_merge(untiled):
    """The merge check is a second route: a merged count that is off by one fails it."""
    import dataclasses

    from regioncount.engines._tiles import certify_merge

    net, dom, _, regions, _ = untiled["product_relu"]
    grid = (2, 2)
    from regioncount.engines._tiles import summarise_tile

    done = {i: summarise_tile(net, dom, i, t, grid, certify=True) for i, t in split_domain(dom, grid)}
    from regioncount.engines._tiles import merge_tiles

    good = merge_tiles(dom, grid, done)
    assert good.regions == regions and certify_merge(dom, grid, done, good)["passed"]
    bad = dataclasses.replace(good, regions=good.regions + 1)
    assert not certify_merge(dom, grid, done, bad)["checks"]["merge"]["passed"]


@pytest.mark.parametrize("width,seed", [(12, 0), (30, 3), (60, 5)])
def test_first_layer_estimate_is_the_line_arrangement_count(width, seed):
    """One torch-init hidden layer: its lines are in general position, so the estimate 1 + L + X (Zaslavsky)
    is the exact partition's count."""
    from regioncount.engines import first_layer_regions

    net = random_mlp(2, [width], seed=seed, init="torch")
    dom = Box(-2, 2, 2)
    assert first_layer_regions(net, dom) == partition_plane(net, dom).n_regions


def test_workers_take_the_tiles_most_lines_cross_first():
    """With several workers, the tiles go out in order of the number of first-layer lines that cross them, most
    first (ties in grid order): three vertical lines in the right half of [0, 1]^2 cross the two right tiles of a
    2 x 2 grid and neither left one. Without a first ReLU layer the grid order is kept. The counts do not
    change."""
    from regioncount.engines._tiles import _largest_first

    net = line_mlp([(1, 0, -0.6), (1, 0, -0.7), (1, 0, -0.8)], [1, 1, 1])
    dom = Box(0, 1, 2)
    parts = split_domain(dom, (2, 2))
    assert [i for i, _ in _largest_first(net, parts)] == [(0, 1), (1, 1), (0, 0), (1, 0)]
    mx = random_maxout(2, [4], 3, seed=0)
    assert [i for i, _ in _largest_first(mx, parts)] == [i for i, _ in parts]
    one = partition_plane(net, dom)
    two = count_tiled(net, dom, (2, 2), workers=2)
    assert (two.regions, two.linear_regions) == (one.n_regions, one.linear_regions()) == (4, 4)


def test_a_large_count_is_tiled_by_default(monkeypatch):
    """Where the first layer's estimate passes AUTO_TILES_MIN, count_record splits the domain into tiles by
    itself (and says so); tiles=1 and max_regions keep one partition; the counts agree."""
    from regioncount import count_record
    from regioncount.engines import _tiles

    net = random_mlp(2, [40, 6], seed=1, init="torch")
    dom = Box(-2, 2, 2)
    one = count_record(net, dom, tiles=1)
    assert "tiles_chosen" not in one.details and one.details["tiles"] == [1, 1]
    plain = count_record(net, dom)
    assert plain.result is not None and "tiles" not in plain.details  # the estimate is below the threshold
    monkeypatch.setattr(_tiles, "AUTO_TILES_MIN", 100)
    auto = count_record(net, dom)
    assert auto.details["tiles_chosen"] == "auto" and auto.details["tiles"] == [2, 2] and auto.result is None
    assert auto.details["linear_exact"]
    assert (
        (auto.regions, auto.linear_regions)
        == (one.regions, one.linear_regions)
        == (plain.regions, plain.linear_regions)
    )
    capped = count_record(net, dom, max_regions=10**6)
    assert capped.result is not None  # a region cap is a cap on one partition: no tiles


@pytest.mark.parametrize("seed", [0, 2])
def test_border_maps_in_the_domain_coordinates_hold_the_exact_maps(seed):
    """_maps_in_u rewrites a tile's float maps into the domain's coordinates u with an error bound: every
    coefficient lies within it of the exact map of the region's code (rationals from the weights)."""
    from fractions import Fraction

    from regioncount.engines._tiles import _maps_in_u
    from regioncount.networks._interpret import ExactProgram

    net = random_mlp(2, [14, 9], seed=seed, init="torch")
    dom = Box(-2, 2, 2)
    for _, tile in split_domain(dom, (3, 2))[1:4]:
        part = partition_plane(net, tile)
        rows = np.arange(0, part.n_regions, 7)
        G, err = _maps_in_u(part, rows)
        x0, V = dom.input_map()
        ex = ExactProgram.of_domain(part.program, x0, V)
        for n, r in enumerate(rows.tolist()):
            exact = ex.output(part.code_rows(np.array([r]))[0]).fractions()  # (3, out)
            for k in range(3):
                for o in range(exact.shape[1]):
                    assert abs(Fraction(float(G[n, k, o])) - exact[k, o]) <= Fraction(float(err[n, o]))
            # and the bound is tight enough to separate maps that differ: far below the coefficients
            assert np.all(err[n] < 1e-9 * (1 + np.abs(G[n]).max()))


def test_a_tiled_count_reports_the_tiles_sign_tests_and_their_exactness():
    """The record of a tiled count sums its tiles' sign tests, exact fallbacks and assumed identities (a
    tile that assumed one makes the count inexact, as one partition would be)."""
    from regioncount import count_record
    from regioncount.engines._tiles import TiledCount

    net = random_mlp(2, [20, 9], seed=4, init="torch")
    dom = Box(-2, 2, 2)
    rec = count_record(net, dom, tiles=(2, 3))
    want = np.sum(
        [
            [partition_plane(net, t).stats[k] for k in ("predicates", "exact_predicates", "assumed")]
            for _, t in split_domain(dom, (2, 3))
        ],
        axis=0,
    )
    got = [rec.details["predicates"], rec.details["exact_predicates"], rec.details["assumed_identities"]]
    assert got == want.tolist() and got[0] > 0
    assert rec.exact
    inexact = TiledCount(1, 1, 1, (1, 1), 0.0, [0.0], tests=(10, 0, 1))
    assert not inexact.exact and inexact.as_dict()["exact"] is False
