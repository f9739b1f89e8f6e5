"""Pictures: what is drawn is checked as geometry (polygons, colours, segments), not as pixels."""

import json

import networkx as nx
import numpy as np
import pytest
import shapely
from _nets import lines_mlp
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba

from regioncount import MLP, random_maxout, random_mlp, random_transformer
from regioncount._domain import Box, Segment, Slice
from regioncount._errors import RegionCountError
from regioncount._io import save_model
from regioncount.engines._forward import forward_codes
from regioncount.engines._line import walk_line
from regioncount.engines._plane import partition_plane
from regioncount.engines._sample import grid_codes
from regioncount.networks import lower
from regioncount.plotting import (
    figure_bytes,
    figure_compiled,
    figure_line,
    figure_region_graph,
    figure_region_stats,
    figure_regions,
    format_of,
    greedy_colouring,
    level_segments,
    region_colours,
    region_stats,
    sample_image,
    truncations,
)
from regioncount.plotting._output import new_figure
from regioncount.plotting._regions import draw_partition, shared_edges
from regioncount.theory import compile_maxout
from regioncount_cli.main import main

BOX = Box(-1.0, 1.0, 2)


def regions_collection(ax) -> PolyCollection:
    (pc,) = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_gid() == "regions"]
    return pc


def drawn_polygons(pc: PolyCollection) -> np.ndarray:
    return np.array([shapely.Polygon(p.vertices) for p in pc.get_paths()], dtype=object)


def assert_tiles(polys, box_area: float, lo=-1.0, hi=1.0):
    """The polygons lie in the box, their areas add up to the box's, and no two overlap."""
    areas = shapely.area(polys)
    assert abs(areas.sum() - box_area) <= 1e-9
    assert shapely.contains(shapely.box(lo, lo, hi, hi).buffer(1e-12), polys).all()
    tree = shapely.STRtree(polys)
    i, j = tree.query(polys, predicate="intersects")
    keep = i < j
    overlap = shapely.area(shapely.intersection(polys[i[keep]], polys[j[keep]]))
    assert keep.sum() > 0 and overlap.max() <= 1e-12


# ---------------------------------------------------------------------------------------------------
# colouring


def test_greedy_colouring_is_proper_and_small_on_planar_graphs():
    rng = np.random.default_rng(0)
    # Delaunay-like planar graph: a triangulated grid with random diagonals
    n = 12
    idx = np.arange(n * n).reshape(n, n)
    E = [np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1), np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)]
    flip = rng.random((n - 1, n - 1)) < 0.5
    a = np.where(flip, idx[:-1, :-1], idx[:-1, 1:]).ravel()
    b = np.where(flip, idx[1:, 1:], idx[1:, :-1]).ravel()
    E = np.concatenate(E + [np.stack([a, b], 1)])
    for spread in (0, 8):
        col = greedy_colouring(n * n, E, spread=spread)
        assert np.all(col[E[:, 0]] != col[E[:, 1]])
        assert col.max() + 1 <= max(6, spread)
    assert greedy_colouring(n * n, E).max() + 1 <= 6  # planar, smallest-last: at most 6
    # K6 needs 6 colours whatever the spread; no edges need 1
    K = np.array([(i, j) for i in range(6) for j in range(i + 1, 6)])
    assert sorted(greedy_colouring(6, K, spread=3)) == list(range(6))
    assert greedy_colouring(5, np.zeros((0, 2))).tolist() == [0] * 5


def test_spread_uses_the_palette_evenly():
    col = greedy_colouring(80, np.zeros((0, 2)), spread=8)
    assert np.bincount(col).tolist() == [10] * 8


def test_preferred_colours_are_kept_where_neighbours_allow():
    # a path 0-1-2-3 where every node prefers colour 5: alternate nodes keep it, the colouring stays proper
    E = np.array([[0, 1], [1, 2], [2, 3]])
    col = greedy_colouring(4, E, spread=3, prefer=[5, 5, 5, 5])
    assert np.all(col[E[:, 0]] != col[E[:, 1]]) and np.count_nonzero(col == 5) == 2
    assert greedy_colouring(3, np.zeros((0, 2)), spread=2, prefer=[1, -1, 0])[[0, 2]].tolist() == [1, 0]


# ---------------------------------------------------------------------------------------------------
# exact pictures


@pytest.fixture(scope="module")
def small():
    net = lines_mlp(6, seed=1)  # 22 regions on [-1, 1]^2 (Zaslavsky)
    return net, partition_plane(net, BOX)


def test_drawn_polygons_tile_the_box_and_neighbours_differ(small):
    net, part = small
    fig, info = figure_regions(net, BOX)
    pc = regions_collection(fig.axes[0])
    polys = drawn_polygons(pc)
    assert len(polys) == part.n_regions == 1 + 6 + 15 == info["regions"]
    assert_tiles(polys, 4.0)
    assert abs(shapely.area(shapely.union_all(polys)) - 4.0) <= 1e-9
    # the drawn polygons are the partition's regions, in order, so adjacency() applies to them
    C = part.centroids()
    assert shapely.contains_xy(polys, C[:, 0], C[:, 1]).all()
    face = pc.get_facecolors()
    E = part.adjacency()
    assert len(E) > 20
    assert np.all(np.any(face[E[:, 0]] != face[E[:, 1]], axis=1))
    assert info["method"] == "exact" and info["exact"] and not info["lower_bound"]
    assert "exact" in fig.axes[0].get_title() and "sampled" not in fig.axes[0].get_title()


def test_bigger_random_partition_tiles_and_colours_properly():
    net = random_mlp(2, [10, 10], init="normal", seed=3)
    part = partition_plane(net, Box(-2, 2, 2))
    ax = new_figure(4, 4).subplots()
    draw_partition(ax, part)
    pc = regions_collection(ax)
    polys = drawn_polygons(pc)
    assert len(polys) == part.n_regions > 50
    assert_tiles(polys, 16.0, -2.0, 2.0)
    face = pc.get_facecolors()
    E = part.adjacency()
    assert np.all(np.any(face[E[:, 0]] != face[E[:, 1]], axis=1))
    assert len({tuple(c) for c in face}) <= 8  # a small palette


def test_linear_colouring_merges_equal_maps_and_separates_neighbours():
    net = random_mlp(2, [8, 4, 1], init="normal", seed=0)
    part = partition_plane(net, Box(-2, 2, 2))
    lab = part.linear_region_labels()
    assert np.unique(lab).size < part.n_regions  # this net has merged linear regions
    col = region_colours(part, linear=True)
    E = part.adjacency()
    same = lab[E[:, 0]] == lab[E[:, 1]]
    assert np.all(col[E[same, 0]] == col[E[same, 1]])
    assert np.all(col[E[~same, 0]] != col[E[~same, 1]])
    for r in np.unique(lab):  # one colour per linear region
        assert np.unique(col[lab == r]).size == 1
    fig, info = figure_regions(net, Box(-2, 2, 2), linear=True)
    assert info["drawn"] == "linear regions" and info["linear_regions"] == np.unique(lab).size
    assert "linear regions" in fig.axes[0].get_title()


def test_shared_edges_are_the_common_boundaries():
    net = random_mlp(2, [6, 6], init="normal", seed=2)
    part = partition_plane(net, Box(-2, 2, 2))
    E = part.adjacency()
    polys = part.to_shapely()
    rings = shapely.boundary(polys)
    total = 0.0
    for i, j in E:
        segs = shared_edges(part, np.array([[i, j]]))
        # reference: the part of i's boundary within 1e-9 of j (shapely's exact intersection of two touching
        # polygons is often empty: their common edge is equal only up to rounding)
        want = shapely.length(shapely.intersection(rings[i], shapely.buffer(polys[j], 1e-9)))
        total += want
        assert np.hypot(*(segs[:, 1] - segs[:, 0]).T).sum() == pytest.approx(want, abs=1e-7)
        pts = shapely.points(np.concatenate([segs[:, 0], segs[:, 1]]))
        assert shapely.distance(rings[i], pts).max() < 1e-9 and shapely.distance(rings[j], pts).max() < 1e-9
    # all pairs at once, in chunks, give the same total
    segs = shared_edges(part, E, chunk=7)
    assert np.hypot(*(segs[:, 1] - segs[:, 0]).T).sum() == pytest.approx(total, abs=1e-6)


def test_level_sets_are_exact():
    # output = relu(x1) - relu(-x1) + 0 x2 = x1: the level set {output = c} is the vertical segment x1 = c
    net = MLP((np.array([[1.0, 0.0], [-1.0, 0.0], [0.3, 1.0]]), np.array([[1.0, -1.0, 0.0]])), (np.zeros(3), [0.0]))
    part = partition_plane(net, BOX)
    for c in (-0.55, 0.0, 0.25, 0.8):
        segs = level_segments(part, c)
        assert np.allclose(segs[..., 0], c, atol=1e-12)
        assert np.hypot(*(segs[:, 1] - segs[:, 0]).T).sum() == pytest.approx(2.0, abs=1e-12)
    # a random net: every level point evaluates to its level
    net = random_mlp(2, [8, 8], init="normal", seed=4)
    part = partition_plane(net, BOX)
    y_corner, _, _ = forward_codes(lower(net), np.array([[-1.0, -1.0], [1.0, 1.0]]))
    c = float(np.mean(np.asarray(y_corner)[:, 0]))  # between two values taken on the box
    segs = level_segments(part, c)
    pts = np.concatenate([segs[:, 0], segs[:, 1], segs.mean(axis=1)])
    y, _, _ = forward_codes(lower(net), pts)
    assert len(segs) > 3 and np.allclose(np.asarray(y)[:, 0], c, atol=1e-9)


def test_levels_and_zero_set_are_drawn(small):
    net, _ = small
    fig, info = figure_regions(net, BOX, levels=5, zero=True)
    assert len(info["levels"]) == 5 and info["zero_set"]
    lines = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert len(lines) == 2 and all(len(c.get_segments()) > 0 for c in lines)
    assert to_rgba("#c8102e") in [tuple(c.get_colors()[0]) for c in lines]


def test_level_values_on_a_colour_bar_and_no_zero_legend_without_a_zero_set(small):
    net, _ = small
    fig, info = figure_regions(net, BOX, levels=4, zero=True)
    bar = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bar) == 1 and np.allclose(bar[0].get_yticks(), info["levels"])
    # shift the output so it has no zero on the box: the zero set is not drawn, nor put in the legend
    far = MLP(net.weights, net.biases[:-1] + (net.biases[-1] + 1e6,))
    fig, info = figure_regions(far, BOX, zero=True)
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert info["zero_set"] is False and not any("zero set" in t for t in labels)


def test_layers_refine_and_end_with_the_network():
    net = random_mlp(2, [5, 5, 5], init="normal", seed=1)
    names = [name for name, _ in truncations(net)]
    assert names == ["layer 1", "layer 2", "layer 3"]
    fig, info = figure_regions(net, BOX, layers=True, levels=3)
    counts = [p["regions"] for p in info["panels"]]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(fig.axes) == 4 and len(panels) == 3  # with the colour bar of the level sets
    assert [ax.get_title().split("\n")[0] for ax in panels] == [
        "after layer 1",
        "after layer 2",
        "after layer 3",
    ]
    assert counts == sorted(counts) and counts[-1] == partition_plane(net, BOX).n_regions == info["regions"]
    # every panel is properly coloured, and a region of layer 2 mostly keeps its layer-1 parent's colour
    parts = [partition_plane(t, BOX) for _, t in truncations(net)]
    faces = [regions_collection(ax).get_facecolors() for ax in panels]
    for part, face in zip(parts, faces):
        E = part.adjacency()
        assert len(face) == part.n_regions and np.all(np.any(face[E[:, 0]] != face[E[:, 1]], axis=1))
    parent = parts[0].locate(parts[1].centroids())
    kept = np.all(faces[1] == faces[0][parent], axis=1)
    assert np.unique(parent[kept]).size >= 0.8 * parts[0].n_regions
    # the first panel is the first layer's line arrangement: its regions are sign patterns of 5 lines
    first = partition_plane(truncations(net)[0][1], BOX)
    assert counts[0] == first.n_regions and first.code_length == 5
    # Maxout and Transformer truncations
    mx = random_maxout(2, [3, 3], k=3, seed=0)
    (l1, m1), (l2, m2) = truncations(mx)
    assert (l1, l2) == ("layer 1", "layer 2") and m2 is mx and m1.output_dim == 3
    x = np.random.default_rng(0).normal(size=(20, 2))
    y1, _, _ = forward_codes(lower(m1), x)
    h = np.max(np.einsum("kij,nj->nki", mx.weights[0], x) + mx.biases[0][None], axis=1)
    np.testing.assert_allclose(np.asarray(y1), h, atol=1e-12)
    tf = random_transformer(2, 3, 4, 3, seed=0)
    assert [n for n, _ in truncations(tf)] == ["block 1", "block 2", "block 3"]
    assert [t.depth for _, t in truncations(tf)] == [1, 2, 3]


def test_maxout_and_compiled_transformer_look_identical():
    net = random_maxout(2, [3, 2], k=3, seed=5)
    fig, info = figure_compiled(net, -1.0, 1.0, layout="compact", levels=3)
    assert info["identical"] and info["maxout_regions"] == info["transformer_regions"] > 5
    pcm, pct = (regions_collection(ax) for ax in fig.axes[:2])
    polys_m, polys_t = drawn_polygons(pcm), drawn_polygons(pct)
    assert_tiles(polys_m, 4.0)
    assert_tiles(polys_t, 4.0)
    # same picture: each Transformer region has the colour of the Maxout region at its centroid
    ct = shapely.centroid(polys_t)
    tree = shapely.STRtree(polys_m)
    q, m = tree.query(ct, predicate="within")
    assert np.array_equal(np.sort(q), np.arange(len(polys_t)))
    np.testing.assert_array_equal(pct.get_facecolors()[q], pcm.get_facecolors()[m])
    # and the transformer's neighbours differ too
    part_t = partition_plane(compile_maxout(net, -1, 1, "compact"), BOX)
    E = part_t.adjacency()
    face = pct.get_facecolors()
    assert np.all(np.any(face[E[:, 0]] != face[E[:, 1]], axis=1))


# ---------------------------------------------------------------------------------------------------
# sampled pictures


def test_curved_boundaries_are_drawn_exactly():
    # small enough for the certified curved engine (a larger partition is the float engine's, not exact)
    tf = random_transformer(2, 3, 4, 2, attention="hardmax", seed=0)
    fig, info = figure_regions(tf, BOX)  # block 2 has conic boundaries: the curved engine draws them
    title = fig.axes[0].get_title()
    assert "exact" in title and "sampled" not in title and "lower bound" not in title
    assert info["method"] == "exact" and info["engine"] == "curved" and info["exact"] and not info["lower_bound"]
    assert not fig.axes[0].images
    assert [c for c in fig.axes[0].collections if c.get_gid() == "regions"]


def test_curved_spline_pieces_are_drawn_exactly_and_past_the_degree_cap_sampled():
    tf = random_transformer(2, 2, 2, 1, attention="relu", d_ff=2, seed=1)  # ReLU attention, then an FFN: cubic walls
    fig, info = figure_regions(tf, BOX, max_regions=10_000)
    title = fig.axes[0].get_title()
    assert "spline pieces" in title and "exact" in title and "sampled" not in title and "linear" not in title
    assert info["exact"] and info["method"] != "sampled"
    deep = random_transformer(2, 2, 2, 3, attention="relu", d_ff=1, seed=1)  # walls up to degree 27
    fig, info = figure_regions(deep, BOX, max_regions=10_000)
    title = fig.axes[0].get_title()
    assert "sampled" in title and "lower bound" in title and "exact" not in title
    assert info["method"] == "sampled" and info["lower_bound"] and not info["exact"]
    assert "degree 27" in info["why_sampled"]
    assert [im.get_gid() for im in fig.axes[0].images] == ["sampled"]


def test_partitions_over_the_cap_are_sampled(small):
    net, part = small
    fig, info = figure_regions(net, BOX, max_regions=5)
    assert info["method"] == "sampled" and "more than 5" in info["why_sampled"]
    assert "sampled" in fig.axes[0].get_title() and info["regions"] == part.n_regions  # 400^2 grid sees all 22


def test_relu_attention_pictures_say_spline_pieces():
    tf = random_transformer(2, 3, 4, 1, attention="relu", seed=1)
    fig, info = figure_regions(tf, BOX, grid=60)
    title = fig.axes[0].get_title()
    assert "spline pieces" in title and "sampled" in title and "linear" not in title
    assert info["kind"] == "spline pieces" and info["drawn"] == "spline pieces"
    with pytest.raises(RegionCountError, match="spline pieces"):
        figure_regions(tf, BOX, linear=True)
    fig, info = figure_line(tf, Segment([-1, -1], [1, 1]))
    assert "spline pieces" in fig.axes[0].get_title() and "linear" not in fig.axes[0].get_title()
    assert info["kind"] == "spline pieces" and info["linear_pieces"] is None


def test_sampled_image_ids_are_the_grid_codes(small):
    net, part = small
    img = sample_image(net, BOX, 40)
    U, codes = grid_codes(net, BOX, 40)  # U in 'ij' order: u1 slow
    ids = img.ids.T.ravel()  # back to 'ij'
    pairs = {(int(i), tuple(c)) for i, c in zip(ids, codes)}
    assert len(pairs) == img.n_codes == len({tuple(c) for c in codes})  # ids <-> codes, one to one
    assert {tuple(c) for c in codes} <= {tuple(c) for c in part.codes}  # sampled codes are exact regions' codes
    # adjacency pairs are ids met side by side
    E = img.adjacency()
    assert len(E) and np.all(E[:, 0] < E[:, 1]) and E.max() < img.n_codes
    fig, info = figure_regions(net, BOX, sampled=True, grid=40)
    assert info["method"] == "sampled" and info["grid"] == 40 and "sampled" in fig.axes[0].get_title()


# ---------------------------------------------------------------------------------------------------
# line plots, statistics, graphs, bytes


def test_line_plot_marks_every_break_and_matches_the_network():
    net = random_mlp(2, [6, 6], init="normal", seed=7)
    seg = Segment([-2.0, -1.0], [2.0, 1.5])
    fig, info = figure_line(net, seg)
    lp = walk_line(net, seg)
    ax = fig.axes[0]
    (pieces,) = [c for c in ax.collections if c.get_gid() == "pieces"]
    (rug,) = [c for c in ax.collections if c.get_gid() == "breaks"]
    curves = pieces.get_segments()
    assert len(curves) == lp.activation_pieces == info["pieces"] and len(rug.get_segments()) == len(curves) - 1
    cols = pieces.get_colors()
    assert np.all(np.any(cols[1:] != cols[:-1], axis=1))  # neighbouring pieces differ
    ends = np.concatenate([c[[0, -1]] for c in curves])
    y, _, _ = forward_codes(lower(net), lp.points(ends[:, 0]))
    np.testing.assert_allclose(ends[:, 1], np.asarray(y)[:, 0], atol=1e-9)
    dots = sum(len(line.get_xdata()) for line in ax.lines)
    assert dots == len(info["breaks"]) == lp.activation_pieces - 1
    with pytest.raises(RegionCountError, match="--output"):
        figure_line(net, seg, output=3)


def test_region_stats_and_graph(small):
    _, part = small
    stats = region_stats(part)
    assert sum(stats["vertices_per_region"].values()) == part.n_regions
    assert stats["area_fraction"]["total"] == pytest.approx(1.0, abs=1e-12)
    assert stats["neighbour_pairs"] == len(part.adjacency())
    fig, info = figure_region_stats(part)
    assert info["regions"] == part.n_regions and len(fig.axes) == 2
    fig, info = figure_region_graph(part)
    assert info == {"nodes": part.n_regions, "edges": len(part.adjacency())}
    with pytest.raises(RegionCountError, match="graphml"):
        figure_region_graph(part, max_regions=5)


@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<"), ("pdf", b"%PDF")])
def test_figure_bytes_formats(small, fmt, magic):
    net, _ = small
    fig, _ = figure_regions(net, BOX)
    data = figure_bytes(fig, fmt, dpi=60)
    assert data.startswith(magic)
    if fmt == "svg":
        assert b"<svg" in data[:400]
    assert format_of(f"x/pic.{fmt.upper()}") == fmt
    if fmt == "png":
        assert figure_bytes(fig, "png", dpi=60, compact=True).startswith(magic)


def test_unknown_format_is_refused():
    with pytest.raises(RegionCountError, match=r"\.png, \.svg or \.pdf"):
        format_of("picture.gif")
    with pytest.raises(RegionCountError):
        format_of("picture")


# ---------------------------------------------------------------------------------------------------
# CLI


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("regioncount: error:") and "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mlp.npz"
    save_model(random_mlp(2, [6, 6], init="normal", seed=0), path)
    return path


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_cli_plot_writes_format_and_sidecar(capsys, tmp_path, model, suffix, magic):
    out = tmp_path / f"pic.{suffix}"
    code, stdout, err = run(capsys, "plot", model, "--out", out, "--box", -2, 2, "--levels", 3, "--zero", "--dpi", 50)
    assert code == 0, err
    data = out.read_bytes()
    assert data.startswith(magic)
    if suffix == "svg":
        assert b"<svg" in data[:400]
    side = json.loads((tmp_path / "pic.json").read_text())
    part = partition_plane(random_mlp(2, [6, 6], init="normal", seed=0), Box(-2, 2, 2))
    assert side["regions"] == part.n_regions and side["method"] == "exact" and side["format"] == suffix
    assert side["linear_regions"] == part.linear_regions() and len(side["levels"]) == 3
    assert "wrote" in stdout


def test_cli_plot_extras(capsys, tmp_path, model):
    out = tmp_path / "p.png"
    code, _, err = run(
        capsys, "plot", model, "--out", out, "--box", -2, 2, "--linear", "--layers", "--dpi", 40,
        "--stats", tmp_path / "s.svg", "--graph", tmp_path / "g.pdf", "--graphml", tmp_path / "g.graphml",
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "s.svg").read_bytes().lstrip().startswith(b"<?xml")
    assert (tmp_path / "g.pdf").read_bytes().startswith(b"%PDF")
    G = nx.read_graphml(tmp_path / "g.graphml")
    side = json.loads((tmp_path / "p.json").read_text())
    assert G.number_of_nodes() == side["regions"] and G.number_of_edges() == side["stats"]["neighbour_pairs"]
    assert len(side["panels"]) == 2 and side["drawn"] == "linear regions"


@pytest.mark.parametrize("layers", [[], ["--layers"]])
def test_cli_plot_stats_computes_the_partition_once(capsys, tmp_path, model, monkeypatch, layers):
    import regioncount.engines._plane as plane

    calls = []
    real = plane.partition_plane

    def counted(net, domain, **kw):
        calls.append(getattr(net, "widths", None))
        return real(net, domain, **kw)

    monkeypatch.setattr(plane, "partition_plane", counted)
    argv = ["plot", model, "--out", tmp_path / "p.png", "--box", -2, 2, "--dpi", 30, "--stats", tmp_path / "s.png"]
    code, _, err = run(capsys, *argv, "--graph", tmp_path / "g.png", *layers)
    assert code == 0, err
    # the whole network once (for the figure, the statistics and the graph); with --layers also its truncation
    assert sorted(calls) == ([(6,), (6, 6)] if layers else [(6, 6)]), calls
    side = json.loads((tmp_path / "p.json").read_text())
    assert side["regions"] == real(random_mlp(2, [6, 6], init="normal", seed=0), Box(-2, 2, 2)).n_regions


def test_cli_plot_sampled_and_slice(capsys, tmp_path):
    path = tmp_path / "m3.npz"
    save_model(random_mlp(3, [5], seed=0), path)
    # without a slice a 3-input model gets cross-sections (tests/test_space.py); --layers needs one 2D domain
    code, _, err = run(capsys, "plot", path, "--out", tmp_path / "a.png", "--layers")
    assert code == 2 and "slice" in one_error_line(err)
    assert not (tmp_path / "a.png").exists()
    out = tmp_path / "s.png"
    code, _, err = run(
        capsys, "plot", path, "--out", out, "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,1",
        "--grid", 30, "--dpi", 40,
    )  # fmt: skip
    assert code == 0, err
    side = json.loads((tmp_path / "s.json").read_text())
    assert side["method"] == "sampled" and side["lower_bound"] and side["samples"] == 900
    exact = partition_plane(random_mlp(3, [5], seed=0), Slice([0, 0, 0], [1, 0, 0], [0, 1, 1], (-1, -1), (1, 1)))
    assert side["regions"] <= exact.n_regions


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--out", "{tmp}/pic.gif"], ".gif"),
        (["--out", "{tmp}/pic"], "suffix"),
        (["--out", "{tmp}/pic.png", "--box", "1", "1"], "LO must be below HI"),
        (["--out", "{tmp}/pic.png", "--box", "2", "-2"], "LO must be below HI"),
        (["--out", "{tmp}/pic.png", "--levels", "-1"], "--levels"),
        (["--out", "{tmp}/pic.png", "--stats", "{tmp}/s.bmp"], ".bmp"),
        (["--out", "{tmp}/pic.png", "--bogus"], "--bogus"),
    ],
)
def test_cli_plot_bad_arguments(capsys, tmp_path, model, args, needle):
    argv = ["plot", model, *[a.format(tmp=tmp_path) for a in args]]
    code, _, err = run(capsys, *argv)
    assert code != 0 and needle in one_error_line(err)
    assert list(tmp_path.iterdir()) == []


def test_cli_plot_missing_model_and_spline_linear(capsys, tmp_path):
    code, _, err = run(capsys, "plot", tmp_path / "nope.npz", "--out", tmp_path / "p.png")
    assert code != 0 and "no such model file" in one_error_line(err)
    path = tmp_path / "relu.npz"
    save_model(random_transformer(2, 3, 4, 1, attention="relu", seed=1), path)
    code, _, err = run(capsys, "plot", path, "--out", tmp_path / "p.png", "--linear")
    assert code != 0 and "spline pieces" in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["relu.npz"]


def test_cli_plot_line(capsys, tmp_path, model):
    out = tmp_path / "line.svg"
    code, _, err = run(capsys, "plot-line", model, "--out", out, "--from", "-2,-1", "--to", "2,1.5")
    assert code == 0, err
    assert out.read_bytes().startswith(b"<?xml")
    side = json.loads((tmp_path / "line.json").read_text())
    lp = walk_line(random_mlp(2, [6, 6], init="normal", seed=0), Segment([-2, -1], [2, 1.5]))
    assert side["pieces"] == lp.activation_pieces and len(side["breaks"]) == lp.activation_pieces - 1
    code, _, err = run(capsys, "plot-line", model, "--out", tmp_path / "l.jpg")
    assert code == 2 and ".jpg" in one_error_line(err)
    code, _, err = run(capsys, "plot-line", model, "--out", tmp_path / "l.png", "--from", "0,0")
    assert code == 2 and "--to" in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["line.json", "line.svg"]
