"""Relation models and retrieval cells (Altabaa and Lafferty 2024): closed forms, fitting, exact vs sampled.

Reference geometry is built here independently of the plane engine: Voronoi cells by GEOS (shapely's
``voronoi_polygons``), power cells by clipping the box with shapely halfplanes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

from regioncount import Box, Slice, load_model, save_model
from regioncount._errors import KeySetError
from regioncount.networks import RelationModel, attention_head_relation, linear_map, random_relation
from regioncount.relations import (
    CallableRelation,
    GaussianKernel,
    ModelUtility,
    fit_relation,
    retrieval_error,
    retrieval_partition,
    softmax_inverse_temperature,
    voronoi_bias,
)
from regioncount_cli.main import main

BOX = Box(-1.0, 1.0, 2)
SQUARE = shapely.box(-1.0, -1.0, 1.0, 1.0)
IDENTITY = RelationModel(linear_map(np.eye(2)))


def _keys(n: int, seed: int, spread: float = 1.6) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-spread, spread, (n, 2))


def _same_cell(a, b, tol: float = 1e-9):
    assert a.geom_type == "Polygon" and b.geom_type == "Polygon"
    assert shapely.hausdorff_distance(a, b) <= tol
    assert shapely.symmetric_difference(a, b).area <= tol


# ----------------------------------------------------------------------------------------------------
# closed forms


def test_identity_features_give_the_voronoi_diagram():
    K = _keys(9, seed=4)  # keys spread past the box: some cells miss it
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=voronoi_bias(IDENTITY, K))
    ref = shapely.voronoi_polygons(shapely.MultiPoint(K), extend_to=shapely.box(-20, -20, 20, 20))
    clipped = {}
    for cell in ref.geoms:
        owner = [j for j in range(len(K)) if cell.contains(shapely.Point(K[j]))]
        assert len(owner) == 1
        piece = cell.intersection(SQUARE)
        if piece.area > 0:
            clipped[owner[0]] = piece
    assert 0 < len(clipped) < len(K), "the test needs keys whose cells miss the box"
    assert ret.n_cells == ret.retrieved.size == len(clipped)
    assert sorted(ret.retrieved.tolist()) == sorted(clipped)
    for j, piece in clipped.items():
        _same_cell(ret.cells[j], piece)
        assert abs(ret.key_areas[j] - piece.area) <= 1e-12


def test_additive_weights_give_the_power_diagram():
    K = _keys(7, seed=11, spread=0.9)
    w = np.random.default_rng(2).uniform(-0.3, 0.3, len(K))
    w[3] = -3.0  # so negative that key 3's power cell is empty although the key lies in the box
    # power distance |x - y_j|^2 - w_j; score <x, y_j> - (|y_j|^2 - w_j) / 2 ranks keys the same way
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=-0.5 * ((K**2).sum(1) - w))

    def halfplane(a, c):  # {x : a . x <= c}, as a big polygon
        n = np.linalg.norm(a)
        p0, t, out = a * c / n**2, np.array([-a[1], a[0]]) / n, a / n
        L = 50.0
        return shapely.Polygon([p0 + L * t, p0 - L * t, p0 - L * t - L * out, p0 + L * t - L * out])

    cells = {}
    for j in range(len(K)):
        cell = SQUARE
        for i in range(len(K)):
            if i != j:
                # |x-y_j|^2 - w_j <= |x-y_i|^2 - w_i  <=>  2 x.(y_i - y_j) <= |y_i|^2 - |y_j|^2 - w_i + w_j
                cell = cell.intersection(halfplane(2 * (K[i] - K[j]), K[i] @ K[i] - K[j] @ K[j] - w[i] + w[j]))
        if cell.area > 0:
            cells[j] = cell
    assert 3 not in cells and np.all(np.abs(K[3]) < 1)
    assert sorted(ret.retrieved.tolist()) == sorted(cells)
    for j, cell in cells.items():
        _same_cell(ret.cells[j], cell)
    # the plain Voronoi diagram of the same keys is a different partition
    vor = retrieval_partition(IDENTITY, K, BOX, key_bias=voronoi_bias(IDENTITY, K))
    assert 3 in vor.retrieved.tolist()


def test_a_single_key_gives_one_cell():
    for model in (IDENTITY, random_relation(2, [12, 12], 4, seed=5)):
        ret = retrieval_partition(model, [[0.3, -0.2]], BOX)
        assert ret.n_keys == 1 and ret.n_cells == 1 and ret.retrieved.tolist() == [0]
        assert ret.key_areas[0] == pytest.approx(4.0, abs=1e-12)
        _same_cell(ret.cells[0], SQUARE)
        assert ret.margin_area(0.5) == pytest.approx(4.0)


def test_score_maps_are_the_models_scores_on_every_region():
    model = random_relation(2, [10, 10], 5, symmetric=False, seed=3, init="normal")
    K = _keys(6, seed=1, spread=1.0)
    ret = retrieval_partition(model, K, BOX)
    c = ret.partition.centroids()
    S = ret.score_maps[..., 0] * c[:, :1] + ret.score_maps[..., 1] * c[:, 1:] + ret.score_maps[..., 2]
    np.testing.assert_allclose(S, ret.scores(c), atol=1e-12)
    assert np.array_equal(np.argmax(S, axis=1), ret.key_of_region)
    # each key's cell is the union of its regions: areas add up to the box
    assert ret.key_areas.sum() == pytest.approx(4.0, abs=1e-12)
    assert sum(cell.area for cell in ret.cells) == pytest.approx(4.0, abs=1e-10)


def test_attention_head_retrieval_on_a_slice():
    rng = np.random.default_rng(0)
    Wq, Wk = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    head = attention_head_relation(Wq, Wk)
    K = rng.normal(size=(5, 3))
    dom = Slice([0.1, 0.0, -0.2], [1.0, 0.0, 0.5], [0.0, 1.0, -0.3], (-1, -1), (1, 1))
    ret = retrieval_partition(head, K, dom)
    U = rng.uniform(-1, 1, (2000, 2))
    direct = np.argmax((dom.to_input(U) @ Wq) @ (K @ Wk).T, axis=1)
    located = ret.key_of_region[ret.partition.locate(U)]
    assert np.mean(direct == located) > 0.999


# ----------------------------------------------------------------------------------------------------
# fitting


@pytest.fixture(scope="module")
def width_sweep():
    """Symmetric fits of the Gaussian kernel at growing width of phi, one fixed seed."""
    return {w: fit_relation("gaussian", widths=(w,), features=8, steps=1000, seed=0) for w in (2, 8, 32)}


def test_fitting_error_falls_as_width_grows(width_sweep):
    mean = [width_sweep[w].mean_error for w in (2, 8, 32)]
    sup = [width_sweep[w].sup_error for w in (2, 8, 32)]
    assert mean[0] > mean[1] > mean[2]
    assert sup[0] > sup[2]
    assert sup[2] < 0.25 and mean[2] < 0.03
    assert width_sweep[32].losses[-1] < width_sweep[32].losses[0]


def test_fitted_symmetric_model_is_psd_on_gram_matrices(width_sweep):
    model = width_sweep[32].model
    assert model.symmetric
    rng = np.random.default_rng(7)
    for n in (5, 40, 120):
        X = rng.uniform(-1, 1, (n, 2))
        G = model.relation(X, X)
        np.testing.assert_allclose(G, G.T, atol=1e-12)
        lam = np.linalg.eigvalsh(G)
        assert lam.min() >= -1e-10 * max(1.0, lam.max())
        # and it approximates the (positive-definite) target Gram matrix
        assert np.abs(G - GaussianKernel().matrix(X, X)).max() < 0.3


def test_asymmetric_fit_learns_an_asymmetric_relation():
    res = fit_relation("bilinear", widths=(8,), features=4, steps=600, seed=1)
    assert not res.model.symmetric
    X = np.random.default_rng(3).uniform(-1, 1, (30, 2))
    G = res.model.relation(X, X)
    assert np.abs(G - G.T).max() > 0.2  # <x, A y> with A != A^T is not symmetric, and the fit follows it
    assert res.mean_error < 0.1


def test_fit_is_seeded_and_takes_a_callable():
    fn = lambda X, Y: np.cos(X[:, 0] - Y[:, 0]) * np.exp(-((X[:, 1] - Y[:, 1]) ** 2))
    a = fit_relation(fn, widths=(8,), features=4, steps=200, seed=3)
    b = fit_relation(CallableRelation(fn), widths=(8,), features=4, steps=200, seed=3)
    assert a.sup_error == b.sup_error and np.array_equal(a.model.phi.weights[0], b.model.phi.weights[0])
    assert not a.model.symmetric


# ----------------------------------------------------------------------------------------------------
# retrieval error


def test_retrieval_error_is_zero_when_the_model_is_the_target():
    model = random_relation(2, [16, 16], 6, symmetric=False, seed=2)
    K = _keys(7, seed=2, spread=1.0)
    ret = retrieval_partition(model, K, BOX)
    assert ret.retrieved.size >= 5 and ret.partition.n_regions > 100
    err = retrieval_error(ret, model)
    assert err.exact and err.area == 0.0 and err.mistakes == []
    smp = retrieval_error(ret, model, method="sample", samples=20_000)
    assert not smp.exact and smp.area == 0.0
    # the same model against another target does make mistakes: the zero above is not built in
    assert retrieval_error(ret, "gaussian").area > 1e-3


def test_gaussian_retrieval_is_voronoi_retrieval():
    K = _keys(8, seed=5, spread=1.2)
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=voronoi_bias(IDENTITY, K))
    assert retrieval_error(ret, "gaussian").area == pytest.approx(0.0, abs=1e-12)
    assert retrieval_error(ret, "bilinear").area > 0.1


@pytest.mark.parametrize("target", ["gaussian", "prefers", "bilinear"])
@pytest.mark.parametrize("which", ["random", "fitted"])
def test_exact_area_agrees_with_the_sampled_estimate(width_sweep, target, which):
    model = random_relation(2, [16, 16], 6, symmetric=False, seed=2) if which == "random" else width_sweep[8].model
    K = _keys(7, seed=2, spread=1.0)
    ret = retrieval_partition(model, K, BOX)
    exact = retrieval_error(ret, target)
    smp = retrieval_error(ret, target, method="sample", samples=200_000, seed=1)
    assert exact.exact and not smp.exact and smp.std_error > 0
    assert 0.003 < exact.fraction < 0.999
    assert abs(exact.area - smp.area) <= 4 * smp.std_error
    # the mistaken pieces carry exactly the mistake area
    assert sum(p.area for p in exact.mistakes) == pytest.approx(exact.area, rel=1e-9)


def test_a_callable_target_is_sampled_and_labelled_so():
    K = _keys(5, seed=3, spread=1.0)
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=voronoi_bias(IDENTITY, K))
    fn = lambda X, Y: -np.abs(X - Y).sum(1)  # nearest key in the L1 norm: not polygons of an affine utility
    err = retrieval_error(ret, fn, samples=50_000)
    d = err.as_dict()
    assert not err.exact and d["mistake_exact"] is False and d["mistake_method"] == "sample"
    assert d["mistake_samples"] == 50_000 and d["mistake_std_error"] > 0
    with pytest.raises(Exception, match="cannot be exact"):
        retrieval_error(ret, fn, method="exact")


def test_margin_areas_are_exact_and_match_samples():
    model = random_relation(2, [16, 16], 6, symmetric=False, seed=2)
    K = _keys(7, seed=2, spread=1.0)
    ret = retrieval_partition(model, K, BOX)
    U = np.random.default_rng(0).uniform(-1, 1, (100_000, 2))
    m = ret.margins(U)
    areas = [ret.margin_area(g) for g in (0.01, 0.05, 0.2)]
    assert areas[0] >= areas[1] >= areas[2] and areas[0] < 4.0
    for g, a in zip((0.01, 0.05, 0.2), areas):
        p = np.mean(m >= g)
        assert abs(a / 4.0 - p) <= 4 * np.sqrt(p * (1 - p) / U.shape[0]) + 1e-9
    assert softmax_inverse_temperature(0.1, 5, 0.99) == pytest.approx(np.log(4 * 99) / 0.1)


def test_margin_area_closed_form():
    # keys (-1/2, 0), (1/2, 0) with Voronoi scores: s_0 - s_1 = -x1, so the margin is |x1| and it is at
    # least g on an area 4 (1 - g) of [-1, 1]^2; a third key far away adds a rival that never binds
    K = np.array([[-0.5, 0.0], [0.5, 0.0], [0.0, 40.0]])
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=voronoi_bias(IDENTITY, K))
    assert ret.retrieved.tolist() == [0, 1]
    for g in (0.01, 0.3, 0.75):
        assert ret.margin_area(g) == pytest.approx(4 * (1 - g), abs=1e-12)
    assert ret.margin_area(1.5) == 0.0


# ----------------------------------------------------------------------------------------------------
# model files and the CLI


@pytest.mark.parametrize("symmetric", [True, False])
def test_relation_models_round_trip(tmp_path, symmetric):
    model = random_relation(2, [5, 3], 4, symmetric=symmetric, seed=1)
    save_model(model, tmp_path / "r.npz")
    back = load_model(tmp_path / "r.npz")
    assert isinstance(back, RelationModel) and back.symmetric == symmetric
    X = np.random.default_rng(0).uniform(-1, 1, (20, 2))
    assert np.array_equal(back.relation(X, X), model.relation(X, X))


def test_key_sets_are_checked():
    with pytest.raises(KeySetError, match="empty"):
        IDENTITY.lower(np.zeros((0, 2)))
    with pytest.raises(KeySetError, match="dimension 3"):
        IDENTITY.lower(np.zeros((4, 3)))
    with pytest.raises(KeySetError, match="not finite"):
        IDENTITY.lower([[0.0, 1.0], [np.nan, 0.0]])


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_fit_then_retrieval(tmp_path, capsys):
    model = tmp_path / "m.npz"
    code, out, err = _run(
        capsys,
        "relation",
        "fit",
        "--out",
        model,
        "--widths",
        "8",
        "--features",
        "4",
        "--steps",
        "200",
        "--asymmetric",
        "--json",
    )
    assert code == 0, err
    fit = json.loads(out)
    assert fit["symmetric"] is False and fit["sup_error"] >= fit["mean_error"] > 0
    keys = tmp_path / "keys.csv"
    keys.write_text("0.5,0.2\n-0.4,0.6\n0.1,-0.7\n")
    csv_path, fig, js = tmp_path / "k.csv", tmp_path / "f.png", tmp_path / "r.json"
    code, out, err = _run(
        capsys,
        "retrieval",
        model,
        "--keys",
        keys,
        "--target",
        "gaussian",
        "--csv",
        csv_path,
        "--figure",
        fig,
        "--out",
        js,
        "--json",
    )
    assert code == 0, err
    res = json.loads(out)
    assert res == json.loads(js.read_text())
    assert res["keys"] == 3 and res["exact"] is True and res["mistake_exact"] is True
    assert sum(res["key_areas"]) == pytest.approx(4.0)
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("key,y1,y2") and len(rows) == 4
    assert fig.read_bytes()[:4] == b"\x89PNG"
    # a sampled mistake area says so, in the table and in JSON
    code, out, err = _run(capsys, "retrieval", model, "--keys", keys, "--target", "gaussian", "--method", "sample")
    assert code == 0, err
    assert "sampled from 100,000 points" in out
    code, out, err = _run(
        capsys, "retrieval", model, "--keys", keys, "--target", "gaussian", "--method", "sample", "--json"
    )
    res = json.loads(out)
    assert res["exact"] is True and res["mistake_exact"] is False and res["mistake_std_error"] > 0


@pytest.mark.parametrize(
    "content, message",
    [("1,2,3\n4,5,6\n", "dimension 3"), ("", "empty"), ("0.1,0.2\nnan,0.3\n", "not finite")],
    ids=["wrong-dimension", "empty", "nan"],
)
def test_cli_bad_keys_give_one_error_line(tmp_path, capsys, content, message):
    model = tmp_path / "m.npz"
    save_model(random_relation(2, [4], 3, seed=0), model)
    keys = tmp_path / "keys.csv"
    keys.write_text(content)
    fig = tmp_path / "f.png"
    code, out, err = _run(capsys, "retrieval", model, "--keys", keys, "--figure", fig)
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("regioncount: error:") and message in lines[0]
    assert not fig.exists()


def test_cli_counting_a_relation_model_asks_for_keys(tmp_path, capsys):
    model = tmp_path / "m.npz"
    save_model(random_relation(2, [4], 3, seed=0), model)
    code, _, err = _run(capsys, "count", model)
    assert code != 0 and len(err.strip().splitlines()) == 1 and "--keys" in err


def test_a_target_that_cannot_rank_the_keys_is_refused():
    model = random_relation(2, [4], 3, key_dim=3, symmetric=False, seed=0)
    ret = retrieval_partition(model, np.zeros((2, 3)) + [[0.0], [1.0]], BOX)
    with pytest.raises(Exception, match="cannot rank these keys"):
        retrieval_error(ret, "gaussian")  # |x - y| needs keys of the query dimension


def test_model_utility_with_bias_matches_its_model():
    K = _keys(4, seed=1, spread=1.0)
    b = voronoi_bias(IDENTITY, K)
    ret = retrieval_partition(IDENTITY, K, BOX, key_bias=b)
    assert retrieval_error(ret, ModelUtility(IDENTITY, b)).area == 0.0
