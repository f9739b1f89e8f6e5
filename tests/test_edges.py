"""Edges of the command line (issue 25): no input overwritten and no output of a run overwriting another, in
every command; the limits of retrieval, --workers and --tiles; options that would be ignored refused;
results that record their domain and version; strict JSON; extreme magnitudes refused with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from regioncount import random_mlp, save_model
from regioncount.networks import random_relation
from regioncount_cli.main import main


def strict_json(text: str):
    """``json.loads`` that refuses NaN and Infinity tokens (which are not JSON)."""

    def refuse(token):
        raise ValueError(f"non-JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, out, err, status, match):
    assert code == status, (code, err)
    assert err.startswith("regioncount: error: ") and err.count("\n") == 1, err
    assert match in err, err


@pytest.fixture
def files(tmp_path):
    """A 2-input MLP, a relation model and a keys file, with their bytes (to check nothing changed)."""
    mlp, rel, keys = tmp_path / "m.npz", tmp_path / "rel.npz", tmp_path / "keys.csv"
    save_model(random_mlp(2, [6, 6], seed=0), mlp)
    save_model(random_relation(2, [8], 4, seed=0), rel)
    np.savetxt(keys, np.random.default_rng(0).uniform(-1, 1, (5, 2)), delimiter=",")
    return {p.name: (p, p.read_bytes()) for p in (mlp, rel, keys)}


def unchanged(files):
    for p, data in files.values():
        assert p.read_bytes() == data, p


# ---------------------------------------------------------------------------------------------------------
# inputs never overwritten, outputs never each other


def test_retrieval_outputs_never_overwrite_inputs_or_each_other(capsys, files, tmp_path):
    rel, keys = files["rel.npz"][0], files["keys.csv"][0]
    base = ["retrieval", rel, "--keys", keys]
    for argv, what in (
        (["--out", keys], "is the input --keys"),
        (["--csv", keys], "is the input --keys"),
        (["--csv", rel], "is the input MODEL"),
        (["--out", tmp_path / "." / "keys.csv"], "is the input --keys"),
        (["--figure", tmp_path / "x.png", "--out", tmp_path / "x.png"], "name the same file"),
        (["--csv", tmp_path / "a.csv", "--out", tmp_path / "a.csv"], "name the same file"),
    ):
        one_error(*run(capsys, *base, *argv), 4, what)
    # a symlink to the keys file is the same file
    link = tmp_path / "link.csv"
    link.symlink_to(keys)
    one_error(*run(capsys, *base, "--out", link), 4, "is the input --keys")
    unchanged(files)
    # and the files of a good run are written as a set, with the domain and the version recorded
    code, out, err = run(capsys, *base, "--out", tmp_path / "r.json", "--csv", tmp_path / "r.csv", "--json")
    assert code == 0, err
    res = strict_json((tmp_path / "r.json").read_text())
    assert res["domain"] == {"box": {"lo": [-1.0, -1.0], "hi": [1.0, 1.0]}} and res["version"]
    assert (tmp_path / "r.csv").read_text().startswith("key,")


def test_relation_fit_out_and_report(capsys, tmp_path):
    x = tmp_path / "x.npz"
    one_error(*run(capsys, "relation", "fit", "--out", x, "--report", x, "--steps", "2"), 4, "name the same file")
    assert not x.exists()
    one_error(*run(capsys, "relation", "fit", "--out", tmp_path / "y.npz", "--lr", "nan"), 2, "--lr")
    assert not (tmp_path / "y.npz").exists()
    code, _, err = run(
        capsys, "relation", "fit", "--out", x, "--report", tmp_path / "r.json", "--steps", "2", "--widths", "4"
    )
    assert code == 0, err
    rep = strict_json((tmp_path / "r.json").read_text())
    assert rep["domain"] == {"box": {"lo": [-1.0, -1.0], "hi": [1.0, 1.0]}} and rep["version"]
    assert np.isfinite(rep["final_loss"])


def test_count_shards_folder(capsys, files, tmp_path):
    m = files["m.npz"][0]
    base = ["count", m, "--tiles", "4"]
    one_error(*run(capsys, *base, "--shards", tmp_path), 4, "is the folder of the model")
    one_error(*run(capsys, *base, "--shards", m), 4, "is a file; give a folder")
    (tmp_path / "sh").mkdir()
    one_error(
        *run(capsys, *base, "--shards", tmp_path / "sh", "--out", tmp_path / "sh" / "tile-0-1.npz"),
        4,
        "is the name of one of the shards",
    )
    unchanged(files)


def test_shards_unwritable_is_one_line_not_an_internal_error(capsys, files, tmp_path, monkeypatch):
    """A shard that cannot be written (here: the folder turns read-only after the checks, which root would
    pass anyway) is exit status 4 with one line, not 70."""
    import regioncount.engines._tiles as tiles_mod

    def denied(path, part):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(tiles_mod, "write_shard", denied)
    code, out, err = run(capsys, "count", files["m.npz"][0], "--tiles", "4", "--shards", tmp_path / "s")
    one_error(code, out, err, 4, "cannot write the shard")
    assert "Permission denied" in err


# ---------------------------------------------------------------------------------------------------------
# retrieval's memory


def test_retrieval_memory_refused_up_front(capsys, files, tmp_path, monkeypatch):
    """A key set whose estimated memory is over --memory-cap is refused before any work, naming the cap."""
    from regioncount.engines import _plane

    keys = tmp_path / "many.csv"
    # 1,000 keys against a 4 GiB cap: a cap well above what the test process itself holds (pytest has loaded
    # much of the library by now), so it is the estimate that refuses, not the guard
    np.savetxt(keys, np.random.default_rng(1).uniform(-1, 1, (1000, 2)), delimiter=",")

    def never(*a, **k):
        raise AssertionError("the partition ran")

    monkeypatch.setattr(_plane, "partition_plane", never)
    monkeypatch.setattr("regioncount.relations._retrieval.partition_plane", never)
    code, out, err = run(capsys, "retrieval", files["rel.npz"][0], "--keys", keys, "--memory-cap", "4")
    one_error(code, out, err, 5, f"1,000 keys need about {8192 * 1000**2 / 2**30:.2f} GiB")
    assert "4.00 GiB memory cap" in err


def test_retrieval_70_keys_is_small_and_exact():
    """70 keys once took over 23 GB (an all-pairs comparison of the argmax's boundary lines, k^4); now the
    comparison runs on sorted candidates. The cells tile the domain and every key's area is what sampling
    the scores finds."""
    import resource

    from regioncount import Box
    from regioncount.relations import retrieval_partition

    model = random_relation(2, [16], 8, seed=3)
    K = np.random.default_rng(4).uniform(-1, 1, (70, 2))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ret = retrieval_partition(model, K, Box(-1, 1, 2), memory_cap=2**30)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024  # KiB
    assert ret.partition.areas.sum() == pytest.approx(4.0, rel=1e-12)
    U = np.random.default_rng(5).uniform(-1, 1, (20000, 2))
    won = np.argmax(model.scores(U, K, np.zeros(70)), axis=1)
    frac = np.bincount(won, minlength=70) / U.shape[0]
    assert np.abs(frac - ret.key_areas / 4.0).max() < 0.02


def test_line_classes_by_candidates_equal_all_pairs():
    """The sorted-candidate route of the argmax's same-line classes gives the all-pairs answer, on random
    lines, coincident lines (within and just past the tolerance), opposite normals and degenerate ones."""
    from regioncount.engines._plane._argmax import ALIAS_TOL, _same_line_min, _same_line_min_blocks

    rng = np.random.default_rng(0)
    for trial in range(200):
        P = int(rng.integers(1, 60))
        base = rng.normal(size=(3, max(1, P // 3)))
        ni = base[:, rng.integers(0, base.shape[1], P)] * rng.choice([-1, 1], P)
        ni = ni + rng.choice([0, ALIAS_TOL * 0.5, ALIAS_TOL * 1.5, ALIAS_TOL * 0.99], (3, P))
        ni[:, rng.random(P) < 0.1] = np.nan
        if trial % 3 == 0:
            ni = rng.normal(size=(3, P))
        assert np.array_equal(_same_line_min(ni, P), _same_line_min_blocks(ni, P)), trial


# ---------------------------------------------------------------------------------------------------------
# limits known in advance: tiles and workers


def test_tiles_and_workers_bounded_before_work(capsys, files, monkeypatch):
    from regioncount_cli import _cluster

    m = files["m.npz"][0]

    def never(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr("regioncount.engines.dask_client", never)
    monkeypatch.setattr("regioncount.engines._tiles.count_tiled", never)
    one_error(*run(capsys, "count", m, "--tiles", "1000000"), 5, "over the limit of 10,000 tiles")
    one_error(*run(capsys, "count", m, "--tiles", "200x200"), 5, "--tiles 40,000 is over the limit")
    n = _cluster.cores()
    one_error(*run(capsys, "count", m, "--tiles", "4", "--workers", "100"), 5, f"more than the {n} cores")
    monkeypatch.setattr(_cluster, "cores", lambda: 64)
    one_error(
        *run(capsys, "count", m, "--tiles", "4", "--workers", "40", "--memory-cap", "4"),
        5,
        "--workers 40 would hold about 10.00 GiB before any work (256 MiB each), over --memory-cap 4 GiB",
    )


def test_memory_guard_counts_worker_processes():
    """The measured cap holds for the process tree: a child process's memory is in children_rss_bytes."""
    import subprocess
    import sys
    import time

    from regioncount._memory import children_rss_bytes

    base = children_rss_bytes()
    code = "import sys, time; a = bytearray(300 * 2**20); a[::4096] = b'x' * len(a[::4096]); print(1, flush=True); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"1"
        time.sleep(0.05)
        assert children_rss_bytes() - base > 250 * 2**20
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


# ---------------------------------------------------------------------------------------------------------
# extreme magnitudes: refused with one line on every engine, never a number that overflow decided


@pytest.fixture
def mlp3(tmp_path):
    p = tmp_path / "m3.npz"
    save_model(random_mlp(3, [6, 6], seed=0), p)
    return p


@pytest.mark.parametrize(
    "argv",
    [
        ["--box", "-1e300", "1e300"],  # 3D: once 1 region, exact: true
        ["--box", "-1e300", "1e300", "--method", "sample", "--grid", "10"],
        ["--method", "line", "--from", "-1e300,0,0", "--to", "1e300,0,0"],
        ["--box", "-1e100", "1e100", "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,0"],  # 2D slice
        ["--box", "-1e100", "1e100", "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,0", "--certify"],
        ["--box", "-1e100", "1e100", "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,0", "--tiles", "4"],
    ],
)
def test_extreme_boxes_are_refused(capsys, mlp3, argv):
    one_error(*run(capsys, "count", mlp3, *argv, "--json"), 1, "beyond the 1.81e+75 where the float64 bounds")


def test_extreme_2d_and_curved_refused(capsys, tmp_path):
    from regioncount import random_transformer

    m2, tf = tmp_path / "m2.npz", tmp_path / "tf.npz"
    save_model(random_mlp(2, [6, 6], seed=0), m2)
    save_model(random_transformer(input_dim=2, tokens=3, d_model=4, depth=2, d_ff=2, seed=3), tf)
    for m in (m2, tf):
        one_error(*run(capsys, "count", m, "--box", "-1e300", "1e300", "--json"), 1, "|x| = 1e+300")


def test_space_engine_refuses_values_past_the_limit(capsys, tmp_path):
    """A function-preserving rescale (first layer by 2^-600, second by 2^600) once changed the space
    engine's count from 327 regions to 36 without a word (its products of the tiny first-layer values
    underflow): refused now, naming the weights; below the limit (2^200) the count is the unscaled one. The plane and line engines count such rescales exactly
    (tests/test_exact_plane.py), so they are not refused."""
    from regioncount import MLP, Box
    from regioncount._errors import InexactError
    from regioncount.engines import partition_space

    net = random_mlp(3, [8, 8], seed=4)

    def rescaled(power):
        W, B = list(net.weights), list(net.biases)
        W[0], B[0] = W[0] * 2.0**-power, B[0] * 2.0**-power
        W[1] = W[1] * 2.0**power
        return MLP(tuple(W), tuple(B))

    box = Box(-2, 2, 3)
    assert partition_space(rescaled(200), box).n_regions == partition_space(net, box).n_regions == 327
    with pytest.raises(InexactError, match="weights as small as .* could underflow"):
        partition_space(rescaled(600), box)
    big = tmp_path / "big.npz"
    save_model(rescaled(600), big)
    one_error(*run(capsys, "count", big, "--json"), 1, "could underflow to 0")
    # weights so large that the values pass the limit
    huge = random_mlp(3, [4], seed=0)
    huge = MLP(tuple(w * 2.0**300 for w in huge.weights), huge.biases)
    with pytest.raises(InexactError, match="the network's values on this domain reach about"):
        partition_space(huge, box)


def test_large_but_safe_box_is_counted_with_strict_json(capsys, tmp_path):
    """Below the limit a huge box is counted, and its JSON is strict (no NaN area)."""
    m2 = tmp_path / "m2.npz"
    save_model(random_mlp(2, [6, 6], seed=0), m2)
    code, out, err = run(capsys, "count", m2, "--box", "-1e60", "1e60", "--json")
    assert code == 0, err
    res = strict_json(out)
    code, out, err = run(capsys, "count", m2, "--box", "-1e3", "1e3", "--json")
    assert res["regions"] == strict_json(out)["regions"] and res["exact"] is True


def test_dump_json_is_strict():
    from regioncount_cli._common import dump_json

    text = dump_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": np.float64("-inf")})
    assert strict_json(text) == {"a": None, "b": [None, 1.5], "c": None}


# ---------------------------------------------------------------------------------------------------------
# options that would be ignored are refused; results record what they are


def test_ignored_options_are_refused(capsys, files, mlp3, tmp_path):
    m = files["m.npz"][0]
    one_error(*run(capsys, "count", m, "--method", "line", "--max-regions", "5"), 2, "--max-regions does not apply")
    one_error(*run(capsys, "count", m, "--method", "sample", "--max-regions", "5"), 2, "--max-regions does not apply")
    one_error(*run(capsys, "count", m, "--method", "sample", "--certify"), 2, "--certify does not apply")
    one_error(*run(capsys, "count", m, "--method", "line", "--certify"), 2, "--certify does not apply")
    # a 3D count is certified (exact vertex and witness checks), not refused and not silently skipped
    code, out, err = run(capsys, "count", mlp3, "--certify", "--json")
    assert code == 0 and json.loads(out)["certificate"]["passed"] is True, err
    one_error(*run(capsys, "count", m, "--scheduler", "garbage", "--tiles", "4"), 2, "not a scheduler address")
    png = tmp_path / "p.png"
    one_error(*run(capsys, "plot", m, "--out", png, "--sections", "4"), 2, "the model has 2 inputs")
    one_error(*run(capsys, "plot", m, "--out", png, "--section-axis", "1"), 2, "--section-axis does not apply")
    assert not png.exists()


def test_library_scheduler_address_is_one_error():
    pytest.importorskip("distributed")
    from regioncount._errors import RegionCountError
    from regioncount.engines import dask_client

    with pytest.raises(RegionCountError, match="not a Dask scheduler address"):
        with dask_client(scheduler="garbage"):
            pass


def test_plot_line_records_what_count_line_says(capsys, tmp_path):
    """A hardmax Transformer's line pieces are decided with tolerances: `count --method line` says exact:
    false, and so must plot-line's record and title (it said exact: true)."""
    from regioncount import random_transformer

    tf = tmp_path / "tf.npz"
    save_model(random_transformer(input_dim=2, tokens=3, d_model=4, depth=1, d_ff=2, seed=3), tf)
    code, out, err = run(capsys, "count", tf, "--method", "line", "--json")
    assert code == 0, err
    counted = strict_json(out)
    code, _, err = run(capsys, "plot-line", tf, "--out", tmp_path / "l.png")
    assert code == 0, err
    drawn = strict_json((tmp_path / "l.json").read_text())
    assert drawn["exact"] == counted["exact"] is False
    assert drawn["pieces"] == counted["regions"]


def test_decision_json_records_domain_and_version(capsys, files):
    code, out, err = run(capsys, "count", files["m.npz"][0], "--decision", "--json")
    assert code == 0, err
    res = strict_json(out)
    assert res["domain"] == {"box": {"lo": [-1.0, -1.0], "hi": [1.0, 1.0]}} and res["version"]


def test_space_progress_inside_a_relu_op():
    """A 3D count reports progress within each ReLU op (one step per round of crossing units), so a long
    op on a huge box shows it advancing instead of sitting at one value (issue 25: 300 s with no progress)."""
    from regioncount import Box
    from regioncount.engines._space import partition_space

    seen = []
    partition_space(random_mlp(3, [6, 6], seed=0), Box(-1, 1, 3), progress=lambda d, t: seen.append((d, t)))
    assert any(d != int(d) for d, _ in seen)  # fractions of an op
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == seen[-1][1]
