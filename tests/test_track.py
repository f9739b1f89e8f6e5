"""``track``: every row equals ``count`` on that checkpoint alone; files whole or not at all; resumable."""

import json

import numpy as np
import pytest

from regioncount import Box, checkpoint_files, local_complexity, random_mlp, save_model, track
from regioncount._track import PARTIAL, previous_rows, step_of
from regioncount_cli.main import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ckpts(tmp_path):
    """Five checkpoints named by step (2 sorts before 10 by number, not by name)."""
    d = tmp_path / "run"
    d.mkdir()
    for i, step in enumerate((0, 2, 10, 30, 100)):
        save_model(random_mlp(2, (6, 6), 2, seed=i), d / f"ckpt-{step}.npz")
    return d


@pytest.fixture
def points(tmp_path):
    p = tmp_path / "pts.csv"
    X = np.random.default_rng(0).uniform(-1, 1, (8, 2))
    p.write_text("x,y\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in X))
    return p, X


def test_checkpoint_order_directory_glob_and_list(ckpts):
    by_dir = checkpoint_files(ckpts)
    assert [step_of(f) for f in by_dir] == [0, 2, 10, 30, 100]
    assert checkpoint_files(str(ckpts / "ckpt-*.npz")) == by_dir
    given = [ckpts / "ckpt-30.npz", ckpts / "ckpt-0.npz"]
    assert checkpoint_files(given) == given  # files in the order given


def test_each_row_equals_count_alone(capsys, tmp_path, ckpts, points):
    pfile, X = points
    out = tmp_path / "out"
    code, stdout, err = run(
        capsys, "track", ckpts, "--box", -2, 2, "--points", pfile, "--radius", 0.3, "--out", out, "--json",
        "--processes", 1,
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads(stdout)
    assert [r["step"] for r in rows] == [0, 2, 10, 30, 100]
    for r in rows:
        code, c, err = run(capsys, "count", r["checkpoint"], "--box", -2, 2, "--json")
        assert code == 0, err
        alone = json.loads(c)
        for key in ("regions", "linear_regions", "exact", "method", "kind"):
            assert r[key] == alone[key], key
        code, c, err = run(capsys, "count", r["checkpoint"], "--box", -2, 2, "--decision", "--json")
        dec = json.loads(c)
        assert r["decision_regions"] == dec["decision_regions"]
        assert r["decision_holes"] == dec["topology"]["holes"]
        assert r["boundary_components"] == dec["topology"]["boundary"]["b0"]
        from regioncount import load_model

        lc = local_complexity(load_model(r["checkpoint"]), X, 0.3)
        assert r["local"]["per_point"] == lc["per_point"] and r["local_complexity"] == lc["mean"]
    # the table, the CSV and the figure, and no partial rows left
    assert json.loads((out / "track.json").read_text())[0]["regions"] == rows[0]["regions"]
    csv = (out / "track.csv").read_text().splitlines()
    assert len(csv) == 6 and csv[0].startswith("step,checkpoint,regions,linear_regions,decision_regions")
    assert (out / "track.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / PARTIAL).exists()
    assert len({r["regions"] for r in rows}) > 1  # different networks: rows are not copies of one count


@pytest.mark.slow
def test_sampled_rows_equal_count_alone(capsys, tmp_path, ckpts):
    code, stdout, err = run(
        capsys, "track", ckpts, "--method", "sample", "--out", tmp_path / "s", "--processes", 1, "--json"
    )
    assert code == 0, err
    for r in json.loads(stdout)[:2]:
        code, c, err = run(capsys, "count", r["checkpoint"], "--method", "sample", "--json")
        alone = json.loads(c)
        assert (r["regions"], r["exact"], r["count"]["f1"]) == (alone["regions"], False, alone["f1"])
        assert "decision_regions" not in r  # decision regions come from exact partitions only


def test_interrupted_run_resumes_skipping_its_rows(capsys, tmp_path, ckpts):
    out = tmp_path / "out"
    bad = ckpts / "ckpt-10.npz"
    good = bad.read_bytes()
    bad.write_bytes(b"not a model")  # the failure: the third checkpoint cannot be read
    code, _, err = run(capsys, "track", ckpts, "--out", out, "--processes", 1, "--no-decision")
    assert code != 0 and "ckpt-10" in err and err.count("\n") == 1
    # nothing of the final set was written; the two finished rows are kept
    assert not (out / "track.json").exists() and not (out / "track.csv").exists() and not (out / "track.png").exists()
    kept = previous_rows(out)
    assert [r["step"] for r in kept] == [0, 2]
    bad.write_bytes(good)
    code, stdout, err = run(capsys, "track", ckpts, "--out", out, "--processes", 1, "--no-decision", "--json")
    assert code == 0, err
    rows = json.loads(stdout)
    assert [r["reused"] for r in rows] == [True, True, False, False, False]
    assert [r["seconds"] for r in rows[:2]] == [r["seconds"] for r in kept]  # not recounted
    fresh = track(ckpts, Box(-1, 1, 2), decision=False)
    assert [r["regions"] for r in rows] == [r["regions"] for r in fresh]
    assert [r["linear_regions"] for r in rows] == [r["linear_regions"] for r in fresh]
    assert not (out / PARTIAL).exists()


def test_failed_rerun_leaves_the_old_set(capsys, tmp_path, ckpts):
    out = tmp_path / "out"
    code, _, err = run(capsys, "track", ckpts, "--out", out, "--processes", 1, "--no-decision")
    assert code == 0, err
    before = {n: (out / n).read_bytes() for n in ("track.json", "track.csv", "track.png")}
    save_model(random_mlp(2, (6, 6), 2, seed=99), ckpts / "ckpt-500.npz")
    (ckpts / "ckpt-700.npz").write_bytes(b"broken")
    code, _, _ = run(capsys, "track", ckpts, "--out", out, "--processes", 1, "--no-decision")
    assert code != 0
    assert {n: (out / n).read_bytes() for n in before} == before


def test_library_interrupt_after_k_rows_then_resume(tmp_path, ckpts):
    out = tmp_path / "lib"
    seen = []

    def stop_after_three(rows):
        seen.append(len(rows))
        if len(rows) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        track(ckpts, Box(-1, 1, 2), out=out, on_row=stop_after_three)
    assert seen == [1, 2, 3] and len(previous_rows(out)) == 3
    rows = track(ckpts, Box(-1, 1, 2), out=out)
    assert [r["reused"] for r in rows] == [True] * 3 + [False] * 2
    # other settings: nothing is reused
    other = track(ckpts, Box(-2, 2, 2), out=out)
    assert not any(r["reused"] for r in other)


def test_worker_processes_give_the_same_rows(ckpts):
    one = track(ckpts, Box(-1, 1, 2), workers=1)
    two = track(ckpts, Box(-1, 1, 2), workers=2)
    keys = ("step", "regions", "linear_regions", "decision_regions", "decision_holes", "boundary_components")
    assert [[r.get(k) for k in keys] for r in one] == [[r.get(k) for k in keys] for r in two]


@pytest.mark.slow
def test_dask_workers_give_the_same_rows(capsys, tmp_path, ckpts):
    pytest.importorskip("distributed", reason="Dask (the distributed package) is not installed")
    code, a, err = run(capsys, "track", ckpts, "--out", tmp_path / "a", "--processes", 1, "--json")
    assert code == 0, err
    code, b, err = run(capsys, "track", ckpts, "--out", tmp_path / "b", "--workers", 2, "--json")
    assert code == 0, err
    keys = ("step", "regions", "linear_regions", "decision_regions")
    assert [[r[k] for k in keys] for r in json.loads(a)] == [[r[k] for k in keys] for r in json.loads(b)]


def test_figure_draws_the_quantities_present(ckpts):
    from regioncount.plotting import figure_track

    rows = track(ckpts, Box(-1, 1, 2))
    fig, info = figure_track(rows)
    assert info == {"panels": ["regions", "decision regions"], "rows": 5}
    (line, *_) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == [0, 2, 10, 30, 100] and list(line.get_ydata()) == [r["regions"] for r in rows]


def test_three_dimensional_box(capsys, tmp_path):
    """On a 3D box the rows hold the space engine's counts, the decision regions and their cavities."""
    d = tmp_path / "run3"
    d.mkdir()
    for i in range(2):
        save_model(random_mlp(3, (5,), 2, seed=i), d / f"c{i}.npz")
    code, out, err = run(capsys, "track", d, "--out", tmp_path / "o3", "--processes", 1, "--json")
    assert code == 0, err
    for r in json.loads(out):
        code, c, _ = run(capsys, "count", r["checkpoint"], "--json")
        alone = json.loads(c)
        assert (r["regions"], r["linear_regions"], r["exact"]) == (alone["regions"], alone["linear_regions"], True)
        assert r["decision_regions"] >= 1 and r["decision_cavities"] == 0 and r["boundary_components"] is None


def test_local_complexity_options_in_four_dimensions(capsys, tmp_path):
    """Inputs of dimension 4: the slice through each point by default (seeded directions), or along the
    directions given; the same numbers as the library."""
    from regioncount import load_model

    d = tmp_path / "run4"
    d.mkdir()
    save_model(random_mlp(4, (8,), 2, seed=3), d / "c0.npz")
    X = np.random.default_rng(1).uniform(-0.5, 0.5, (6, 4))
    np.save(tmp_path / "p.npy", X)
    base = ["track", d, "--box", -1, 1, "--origin", "0,0,0,0", "--dir1", "1,0,0,0", "--dir2", "0,1,0,0"]
    base += ["--points", tmp_path / "p.npy", "--radius", 0.4, "--processes", 1, "--json"]
    code, out, err = run(capsys, *base, "--out", tmp_path / "a", "--local-seed", 5)
    assert code == 0, err
    (row,) = json.loads(out)
    net = load_model(d / "c0.npz")
    lib = local_complexity(net, X, 0.4, seed=5)
    assert row["local"]["ball"] == "slice" and row["local"]["per_point"] == lib["per_point"]
    code, out, err = run(capsys, *base, "--out", tmp_path / "b", "--local-dir", "0,0,1,0", "--local-dir", "0,0,0,1")
    assert code == 0, err
    (row,) = json.loads(out)
    V = np.array([[0, 0, 1, 0], [0, 0, 0, 1]], float).T
    assert row["local"]["per_point"] == local_complexity(net, X, 0.4, directions=V)["per_point"]
    assert row["decision_regions"] >= 1  # the 2D slice domain also gets its decision regions


def test_bad_options_are_one_line(capsys, tmp_path, ckpts, points):
    for argv, msg in (
        (("--points", points[0]), "both --points and --radius"),
        (("--workers", 2, "--scheduler", "tcp://x:1"), "not both"),
        (("--local-slice",), "--local-slice"),
    ):
        code, _, err = run(capsys, "track", ckpts, "--out", tmp_path / "o", *argv)
        assert code == 2 and msg in err and err.count("\n") == 1
    code, _, err = run(capsys, "track", tmp_path / "nothing-*.npz", "--out", tmp_path / "o")
    assert code != 0 and "matches no file" in err


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_signalled_run_keeps_its_rows_and_resumes(tmp_path, sig):
    """The real command, signalled once it has finished two rows: one line on stderr, no final file, the finished
    rows kept; the rerun reuses exactly those."""
    import signal
    import subprocess
    import sys
    import time

    from _shared import subprocess_env

    d = tmp_path / "run"
    d.mkdir()
    for i in range(12):
        save_model(random_mlp(2, (24, 24, 24), 2, seed=i), d / f"s{i:02d}.npz")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "regioncount_cli.main", "track", str(d), "--out", str(out), "--processes", "1"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=subprocess_env(OPENBLAS_NUM_THREADS="1"))  # fmt: skip
    deadline = time.monotonic() + 120
    while p.poll() is None and len(previous_rows(out)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    if p.poll() is not None:
        pytest.skip("the run finished before it could be signalled (machine too fast for 12 checkpoints)")
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=120)
    assert p.returncode in (130, 143) and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (out / "track.json").exists() and not (out / "track.png").exists()
    kept = previous_rows(out)
    assert 2 <= len(kept) < 12
    rows = track(d, Box(-1, 1, 2), out=out)
    assert sum(r["reused"] for r in rows) == len(kept)
    assert [r["step"] for r in rows if r["reused"]] == [r["step"] for r in kept]
