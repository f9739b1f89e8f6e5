import json

import numpy as np
import pytest

from regioncount import Box, Segment, count_sampled, load_model, partition_plane, walk_line
from regioncount_cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mlp_file(tmp_path, capsys):
    path = tmp_path / "mlp.npz"
    code, out, _ = run(capsys, "build", "random-mlp", "--out", str(path), "--widths", "8,8", "--seed", "3")
    assert code == 0 and path.exists()
    return path


def test_count_sample_json_fields(capsys, mlp_file):
    code, out, err = run(
        capsys, "count", str(mlp_file), "--method", "sample", "--box", "-2", "2", "--grid", "300", "--json"
    )
    assert code == 0, err
    res = json.loads(out)
    for key in ("regions", "linear_regions", "method", "exact", "seconds", "samples", "f1", "f2", "chao1", "coverage"):
        assert key in res
    assert res["method"] == "sample" and res["exact"] is False and res["linear_regions"] is None
    assert res["samples"] == 300 * 300 and res["lower_bound"] is True
    lib = count_sampled(load_model(mlp_file), Box(-2, 2, 2), grid=300)
    assert (res["regions"], res["f1"], res["f2"]) == (lib.regions, lib.f1, lib.f2)


def test_count_table_says_lower_bound(capsys, mlp_file):
    code, out, _ = run(capsys, "count", str(mlp_file), "--method", "sample", "--grid", "100")
    assert code == 0 and "lower bound" in out


def test_count_writes_json_file(capsys, mlp_file, tmp_path):
    target = tmp_path / "res" / "count.json"
    code, _, _ = run(capsys, "count", str(mlp_file), "--method", "sample", "--grid", "50", "--out", str(target))
    assert code == 0 and json.loads(target.read_text())["samples"] == 2500


@pytest.mark.parametrize(
    "kind, extra",
    [
        ("random-mlp", ["--widths", "4,4"]),
        ("random-maxout", ["--widths", "3,3", "--k", "3"]),
        ("random-transformer", ["--depth", "2", "--attention", "relu", "--causal"]),
    ],
)
def test_build_writes_loadable_models(capsys, tmp_path, kind, extra):
    path = tmp_path / f"{kind}.npz"
    code, _, err = run(capsys, "build", kind, "--out", str(path), *extra)
    assert code == 0, err
    net = load_model(path)
    assert net.input_dim == 2


def _one_error_line(err):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("regioncount: error:")
    assert "Traceback" not in err
    return lines[0]


def test_unknown_option(capsys, mlp_file):
    code, _, err = run(capsys, "count", str(mlp_file), "--bogus")
    assert code == 2
    assert "--bogus" in _one_error_line(err)


def test_unknown_method(capsys, mlp_file):
    code, _, err = run(capsys, "count", str(mlp_file), "--method", "magic")
    assert code == 2 and "magic" in _one_error_line(err)


def test_missing_model(capsys, tmp_path):
    code, _, err = run(capsys, "count", str(tmp_path / "none.npz"), "--method", "sample")
    assert code == 3 and "no such model file" in _one_error_line(err)


@pytest.mark.parametrize("bad", ["nan", "shape", "missing"])
def test_malformed_model(capsys, tmp_path, bad):
    path = tmp_path / "bad.npz"
    arrays = {"0.weight": np.ones((3, 2)), "0.bias": np.ones(3), "2.weight": np.ones((1, 3)), "2.bias": np.ones(1)}
    if bad == "nan":
        arrays["0.weight"][0, 0] = np.nan
    elif bad == "shape":
        arrays["2.weight"] = np.ones((1, 5))
    else:
        del arrays["2.weight"]
    np.savez(path, **arrays)
    code, _, err = run(capsys, "count", str(path), "--method", "sample")
    assert code == 3 and str(path) in _one_error_line(err)


def test_empty_box(capsys, mlp_file):
    code, _, err = run(capsys, "count", str(mlp_file), "--method", "sample", "--box", "1", "1")
    assert code == 2 and "LO" in _one_error_line(err)


def test_memory_cap_leaves_no_file(capsys, mlp_file, tmp_path):
    target = tmp_path / "never.json"
    code, _, err = run(
        capsys, "count", str(mlp_file), "--method", "sample", "--samples", "100000000000", "--out", str(target)
    )
    assert code == 5 and "cap" in _one_error_line(err)
    assert not target.exists()


def test_bad_widths(capsys, tmp_path):
    code, _, err = run(capsys, "build", "random-mlp", "--out", str(tmp_path / "x.npz"), "--widths", "4,x")
    assert code == 2 and "--widths" in _one_error_line(err)
    assert not (tmp_path / "x.npz").exists()


def test_help_explains_every_option(capsys):
    code, out, _ = run(capsys, "count", "--help")
    assert code == 0
    for opt in ("--method", "--box", "--grid", "--samples", "--seed", "--json", "--origin", "--from", "--memory-cap"):
        assert opt in out


@pytest.mark.parametrize(
    "argv, value",
    [
        (["transformer_maxout_lower", "--m", "4", "--T", "3", "--q", "2", "--D", "6"], 48841),
        (["transformer_maxout_lower", "--m", "2", "--T", "3", "--q", "3", "--D", "6"], 29125),
        (["relu_lower_serra", "--widths", "6,3", "--n0", "2"], 112),
        (["zaslavsky", "--n", "5", "--n0", "2"], 16),
    ],
)
def test_bound_json(capsys, argv, value):
    code, out, err = run(capsys, "bound", *argv, "--json")
    assert code == 0, err
    assert json.loads(out)["value"] == value


def test_bound_lists_every_registered_bound(capsys):
    from regioncount.theory._bounds import BOUNDS

    code, out, _ = run(capsys, "bound", "--json")
    assert code == 0 and {r["name"] for r in json.loads(out)} == set(BOUNDS)


def test_bound_errors(capsys):
    code, _, err = run(capsys, "bound", "maxout_lower", "--widths", "4", "--n0", "2")
    assert code == 2 and "--k" in _one_error_line(err)
    code, _, err = run(capsys, "bound", "no_such_bound")
    assert code == 2 and "no_such_bound" in _one_error_line(err)
    code, _, err = run(capsys, "bound", "transformer_maxout_lower", "--m", "1", "--T", "2", "--q", "1", "--D", "2")
    assert code == 2 and "D >= 3" in _one_error_line(err)


@pytest.mark.parametrize("method", ["exact", "line"])
def test_count_exact_methods(capsys, mlp_file, method):
    code, out, err = run(capsys, "count", str(mlp_file), "--method", method, "--box", "-2", "2", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["method"] == method and res["exact"] is True
    net = load_model(mlp_file)
    if method == "exact":
        part = partition_plane(net, Box(-2, 2, 2))
        want = (part.n_regions, part.linear_regions())
    else:  # a box's line count walks its diagonal
        line = walk_line(net, Segment([-2, -2], [2, 2]))
        want = (line.activation_pieces, line.linear_pieces)
    assert (res["regions"], res["linear_regions"]) == want
    assert res["kind"] == "activation regions"


def test_exact_agrees_with_sampling_from_the_cli(capsys, mlp_file):
    _, out, _ = run(capsys, "count", str(mlp_file), "--box", "-2", "2", "--json")
    exact = json.loads(out)["regions"]
    _, out, _ = run(capsys, "count", str(mlp_file), "--method", "sample", "--box", "-2", "2", "--grid", "400", "--json")
    assert json.loads(out)["regions"] <= exact


def test_exact_on_a_slice_and_refusals(capsys, tmp_path):
    path = tmp_path / "q3.npz"
    run(capsys, "build", "random-mlp", "--inputs", "3", "--widths", "6", "--out", str(path))
    code, out, err = run(capsys, "count", str(path), "--json")  # a 3D box: the space engine's exact partition
    assert code == 0 and json.loads(out)["exact"] is True and json.loads(out)["dimension"] == 3, err
    code, out, err = run(
        capsys, "count", str(path), "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "0,1,1", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["exact"] is True
    code, _, err = run(capsys, "count", str(path), "--origin", "0,0,0", "--dir1", "1,0,0", "--dir2", "2,0,0")
    assert code == 2 and "parallel" in _one_error_line(err)


def test_curved_boundary_names_line_and_sample(capsys, tmp_path):
    path = tmp_path / "tf.npz"
    run(capsys, "build", "random-transformer", "--depth", "2", "--out", str(path))
    code, out, _ = run(capsys, "count", str(path), "--method", "exact", "--json")  # conic cells
    res = json.loads(out)
    # past 2,000 trapezoids the curved partition is the float engine's, which says it is not exact
    assert code == 0 and res["engine"] == "curved" and res["exact"] is (res["trapezoids"] <= 2000)
    small = ("--attention", "relu", "--tokens", "2", "--d-model", "2", "--d-ff", "2")
    relu = tmp_path / "relu.npz"  # ReLU attention, then an FFN: walls of degree 3, certified cells
    run(capsys, "build", "random-transformer", "--depth", "1", *small, "--out", str(relu))
    code, out, _ = run(capsys, "count", str(relu), "--method", "exact", "--json")
    res = json.loads(out)
    assert code == 0 and res["exact"] is True and res["kind"] == "spline pieces" and res["largest_degree"] == 3
    deep = tmp_path / "relu3.npz"  # three ReLU-attention blocks: walls up to degree 27, past the cap
    run(capsys, "build", "random-transformer", "--depth", "3", *small, "--out", str(deep))
    code, _, err = run(capsys, "count", str(deep), "--method", "exact")
    line = _one_error_line(err)
    assert code == 1 and "degree 27" in line and "line" in line and "sample" in line
    code, out, _ = run(capsys, "count", str(path), "--method", "line", "--json")
    assert code == 0 and json.loads(out)["exact"] is False  # attention: the line engine still uses tolerances


def test_relu_attention_is_spline_pieces(capsys, tmp_path):
    path = tmp_path / "relu.npz"
    run(capsys, "build", "random-transformer", "--depth", "1", "--attention", "relu", "--out", str(path))
    code, out, _ = run(capsys, "count", str(path), "--method", "line", "--json")
    assert code == 0 and json.loads(out)["kind"] == "spline pieces"
    code, out, _ = run(capsys, "count", str(path), "--method", "line")
    assert "linear region" not in out


def test_build_constructions_count_to_their_formulas(capsys, tmp_path):
    from regioncount.theory import maxout_lower, relu_lower_serra

    path = tmp_path / "p.npz"
    assert run(capsys, "build", "product-relu", "--widths", "6,3", "--out", str(path))[0] == 0
    _, out, _ = run(capsys, "count", str(path), "--box", "-1", "2", "--json")
    assert json.loads(out)["regions"] == relu_lower_serra([6, 3], 2)
    assert run(capsys, "build", "product-maxout", "--widths", "4,2", "--k", "3", "--out", str(path))[0] == 0
    _, out, _ = run(capsys, "count", str(path), "--box", "-1", "2", "--json")
    assert json.loads(out)["regions"] == maxout_lower([4, 2], 2, 3)
    compiled = tmp_path / "c.npz"
    assert run(capsys, "build", "compile", str(path), "--out", str(compiled), "--layout", "compact")[0] == 0
    _, out, _ = run(capsys, "count", str(compiled), "--box", "-1", "2", "--json")
    assert json.loads(out)["regions"] == maxout_lower([4, 2], 2, 3)
    code, _, err = run(capsys, "count", str(compiled), "--box", "-2", "2")
    assert code == 2 and "compiled for the box" in _one_error_line(err)
    fold = tmp_path / "f.npz"
    assert run(capsys, "build", "fold-relu", "--widths", "3,4", "--out", str(fold))[0] == 0
    _, out, _ = run(capsys, "count", str(fold), "--box", "0", "1", "--json")
    assert json.loads(out)["regions"] == 4 * 5


def test_build_construction_errors(capsys, tmp_path):
    code, _, err = run(capsys, "build", "fold-relu", "--widths", "2", "--out", str(tmp_path / "x.npz"))
    assert code == 2 and "n >= 3" in _one_error_line(err)
    mlp = tmp_path / "m.npz"
    run(capsys, "build", "random-mlp", "--out", str(mlp))
    code, _, err = run(capsys, "build", "compile", str(mlp), "--out", str(tmp_path / "y.npz"))
    assert code == 3 and "Maxout" in _one_error_line(err)
    assert not (tmp_path / "x.npz").exists() and not (tmp_path / "y.npz").exists()


def test_exact_partition_respects_the_memory_cap(capsys, tmp_path):
    path = tmp_path / "wide.npz"
    run(capsys, "build", "random-mlp", "--widths", "32,32", "--out", str(path))
    target = tmp_path / "res.json"
    code, _, err = run(capsys, "count", str(path), "--box", "-2", "2", "--memory-cap", "0.0005", "--out", str(target))
    assert code == 5 and "--memory-cap" in _one_error_line(err)
    assert not target.exists()
    code, out, _ = run(capsys, "count", str(path), "--box", "-2", "2", "--json")
    assert code == 0 and json.loads(out)["regions"] > 0.0005 * 2**30 / 1536


def test_softmax_counts_only_ffn_codes_and_refuses_exact(capsys, tmp_path):
    path = tmp_path / "soft.npz"
    run(capsys, "build", "random-transformer", "--attention", "softmax", "--out", str(path))
    code, out, _ = run(capsys, "count", str(path), "--method", "sample", "--grid", "50", "--json")
    assert code == 0 and json.loads(out)["kind"].startswith("FFN ReLU codes")
    for method in ("line", "exact"):
        code, _, err = run(capsys, "count", str(path), "--method", method)
        assert code == 1 and "smooth" in _one_error_line(err)


@pytest.fixture
def mlp4_file(tmp_path, capsys):
    path = tmp_path / "mlp4.npz"
    argv = ["build", "random-mlp", "--out", str(path), "--inputs", "4", "--widths", "4", "--seed", "1"]
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    return path


def test_no_linear_is_honoured_on_a_4d_box_and_a_3d_slice(capsys, mlp4_file):
    slice3 = ["--origin", "0,0,0,0.25", "--dir", "1,0,0,0", "--dir", "0,1,0,0", "--dir", "0,0,1,0"]
    for extra in ([], slice3):
        code, out, err = run(capsys, "count", str(mlp4_file), *extra, "--json")
        assert code == 0, err
        full = json.loads(out)
        code, out, err = run(capsys, "count", str(mlp4_file), *extra, "--no-linear", "--json")
        assert code == 0, err
        fast = json.loads(out)
        assert full["dimension"] == (3 if extra else 4)
        assert isinstance(full["linear_regions"], int) and 1 <= full["linear_regions"] <= full["regions"]
        assert fast["linear_regions"] is None and fast["regions"] == full["regions"]
        assert "linear regions" not in run(capsys, "count", str(mlp4_file), *extra, "--no-linear")[1]


def test_a_k_dimensional_slice_records_its_origin_and_directions(capsys, mlp4_file):
    argv = ["count", str(mlp4_file), "--origin", "0,0,0,0.25", "--dir", "1,0,0,0", "--dir", "0,1,0,0"]
    code, out, err = run(capsys, *argv, "--dir", "0,0,1,0.5", "--box", "-2", "2", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dimension"] == 3
    assert res["domain"] == {
        "affine_slice": {
            "origin": [0.0, 0.0, 0.0, 0.25],
            "dirs": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.5]],
            "lo": [-2.0] * 3,
            "hi": [2.0] * 3,
        }
    }
    # the record is enough to count the same domain again
    from regioncount import count_regions, domain_from_dict

    again = count_regions(load_model(mlp4_file), domain_from_dict(res["domain"]))
    assert again["regions"] == res["regions"] and again["domain"] == res["domain"]
    # a 1D slice (one --dir) is recorded as the slice it is, not as the segment the line engine walks
    code, out, err = run(capsys, "count", str(mlp4_file), "--origin", "0,0,0,0", "--dir", "1,1,0,0", "--json")
    assert code == 0, err
    assert json.loads(out)["domain"] == {
        "affine_slice": {"origin": [0.0] * 4, "dirs": [[1.0, 1.0, 0.0, 0.0]], "lo": [-1.0], "hi": [1.0]}
    }


@pytest.mark.parametrize("given", [None, "3"])
def test_the_command_starts_blas_on_one_thread_unless_the_environment_says_otherwise(given):
    """Its parallel work is on worker processes: the command sets the BLAS thread counts to 1 before NumPy
    loads, where they are not set; a value the user set is kept."""
    import subprocess
    import sys

    from _shared import subprocess_env

    env = subprocess_env()
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env.pop(name, None)
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = (
        "import os, sys; sys.argv[0] = 'regioncount'; import regioncount_cli.main; import numpy; "
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [given or "1", "1"]
