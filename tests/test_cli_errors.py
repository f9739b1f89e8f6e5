"""Bad input through the CLI: one line on stderr, the documented exit status, no traceback, and every file
that existed before the run byte-identical after it (and no new file)."""

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _shared import subprocess_env

from regioncount_cli import _validate as checks
from regioncount_cli.main import main

USAGE, INPUT, OUTPUT, LIMIT, CANNOT = checks.USAGE, checks.INPUT_FILE, checks.OUTPUT_FILE, checks.LIMIT, 1
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A folder of inputs and of outputs from earlier runs that no failed run may touch."""
    d = tmp_path_factory.mktemp("inputs")
    assert main(["build", "random-mlp", "--widths", "6,6", "--out", str(d / "m.npz")]) == 0
    assert main(["build", "random-maxout", "--widths", "3", "--out", str(d / "mx.npz")]) == 0
    assert main(["build", "random-transformer", "--depth", "2", "--out", str(d / "tf.npz")]) == 0
    args = ["build", "random-transformer", "--depth", "3", "--attention", "relu", "--out", str(d / "rtf.npz")]
    assert main(args) == 0
    (d / "text.npz").write_text("this is a text file\n")
    np.save(d / "plain.npy", np.ones(3))
    os.replace(d / "plain.npy", d / "plain.npz")
    np.savez(d / "pickled.npz", a=np.array([{"x": 1}], dtype=object))
    np.savez(d / "nan.npz", **{"0.weight": np.array([[np.nan, 1.0]]), "0.bias": np.zeros(1)})
    np.savez(d / "zero_width.npz", **{"0.weight": np.ones((0, 2)), "0.bias": np.ones(0), "2.weight": np.ones((1, 0))})
    np.savez(d / "bad_shape.npz", **{"0.weight": np.ones((3, 2)), "2.weight": np.ones((1, 5))})
    np.savez(d / "bad_key.npz", **{"layer_one": np.ones((3, 2))})
    np.savez(d / "bad_config.npz", __regioncount__=np.array("[1, 2]"), x=np.ones(1))
    _huge_header(d / "huge.npz")
    (d / "folder").mkdir()
    (d / "fig.json").write_text('{"mine": "a file of the user that happens to share the stem"}\n')
    (d / "old_scan").mkdir()
    return d


def _huge_header(path: Path) -> None:
    """An .npz whose one member declares a (10^12,) float64 array but holds 8 bytes."""
    import io
    import zipfile

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    buf.write(np.float64(1.0).tobytes())
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("0.weight.npy", buf.getvalue())


def _snapshot(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(d.rglob("*"))
    }


# (id, argv with {d} for the folder, exit status, text the line must hold, text it must not hold)
CASES = [
    # outputs that are directories, unwritable, or inputs
    ("count-out-dir", "count {d}/m.npz --out {d}/folder", OUTPUT, "directory", None),
    ("count-out-under-file", "count {d}/m.npz --out {d}/m.npz/x.json", OUTPUT, "not a folder", None),
    ("count-out-is-model", "count {d}/m.npz --out {d}/m.npz", OUTPUT, "input", None),
    ("plot-out-dir", "plot {d}/m.npz --out {d}/folder", USAGE, "--out", None),
    ("plot-out-under-file", "plot {d}/m.npz --out {d}/m.npz/x.png", OUTPUT, "not a folder", None),
    ("plot-stats-is-out", "plot {d}/m.npz --out {d}/new.png --stats {d}/new.png", OUTPUT, "same file", None),
    ("plot-sidecar-clobber", "plot {d}/m.npz --out {d}/fig.png", OUTPUT, "sidecar", None),
    ("plot-line-out-dir", "plot-line {d}/m.npz --out {d}/folder", USAGE, "--out", None),
    ("plot-line-sidecar", "plot-line {d}/m.npz --out {d}/fig.svg", OUTPUT, "sidecar", None),
    ("build-out-dir", "build random-mlp --out {d}/folder", USAGE, ".npz", None),
    ("build-out-under-file", "build random-mlp --out {d}/m.npz/x.npz", OUTPUT, "not a folder", None),
    ("compile-out-is-model", "build compile {d}/mx.npz --out {d}/mx.npz", OUTPUT, "input", None),
    ("scan-out-file", "scan --depth 1 --out {d}/m.npz", OUTPUT, "is a file", None),
    # option values out of range
    ("grid-0", "count {d}/m.npz --method sample --grid 0", USAGE, "--grid", None),
    ("grid-neg", "count {d}/m.npz --method sample --grid -5", USAGE, "at least 1", None),
    ("samples-0", "count {d}/m.npz --method sample --samples 0", USAGE, "--samples", None),
    ("seed-neg", "count {d}/m.npz --method sample --samples 10 --seed -1", USAGE, "--seed", None),
    ("cap-nan", "count {d}/m.npz --memory-cap nan", USAGE, "--memory-cap", None),
    ("cap-inf", "count {d}/m.npz --memory-cap inf", USAGE, "--memory-cap", None),
    ("cap-zero", "count {d}/m.npz --memory-cap 0", USAGE, "above 0", None),
    ("cap-tiny", "count {d}/m.npz --memory-cap 1e-12", LIMIT, "--memory-cap", None),
    ("cap-negative", "count {d}/m.npz --memory-cap -1", USAGE, "--memory-cap", None),
    ("box-nan", "count {d}/m.npz --box nan 1", USAGE, "--box", None),
    ("box-lo-hi-count", "count {d}/m.npz --box 1 1", USAGE, "LO", None),
    ("box-lo-hi-plot", "plot {d}/m.npz --out {d}/new.png --box 2 1", USAGE, "LO", None),
    ("box-lo-hi-line", "plot-line {d}/m.npz --out {d}/new.png --box 2 1", USAGE, "LO", None),
    ("box-lo-hi-scan", "scan --box 2 1 --out {d}/new_scan", USAGE, "LO", None),
    ("box-lo-hi-compile", "build compile {d}/mx.npz --out {d}/c.npz --box 1 0", USAGE, "LO", None),
    ("method", "count {d}/m.npz --method magic", USAGE, "magic", None),
    ("activation", "count {d}/m.npz --activation tanh", USAGE, "relu", None),
    ("activation-plot", "plot {d}/m.npz --out {d}/new.png --activation tanh", USAGE, "relu", None),
    ("dpi-huge", "plot {d}/m.npz --out {d}/new.png --dpi 100000", USAGE, "--dpi", "sample"),
    ("levels-neg", "plot {d}/m.npz --out {d}/new.png --levels -1", USAGE, "--levels", None),
    ("plot-region-cap-0", "plot {d}/m.npz --out {d}/new.png --max-regions 0", USAGE, "--region-cap", None),
    ("plot-line-output", "plot-line {d}/m.npz --out {d}/new.png --output 3", USAGE, "--output", None),
    # build parameters
    ("inputs-0", "build random-mlp --inputs 0 --out {d}/new.npz", USAGE, "--inputs", None),
    ("init", "build random-mlp --init xavier --out {d}/new.npz", USAGE, "xavier", None),
    ("widths-0", "build random-mlp --widths 4,0 --out {d}/new.npz", USAGE, "--widths", None),
    ("widths-x", "build random-mlp --widths 4,x --out {d}/new.npz", USAGE, "--widths", None),
    ("tokens-0", "build random-transformer --tokens 0 --out {d}/new.npz", USAGE, "--tokens", None),
    ("heads-0", "build random-transformer --heads 0 --out {d}/new.npz", USAGE, "--heads", None),
    ("d-model-0", "build random-transformer --d-model 0 --out {d}/new.npz", USAGE, "--d-model", None),
    ("attention", "build random-transformer --attention linear --out {d}/new.npz", USAGE, "linear", None),
    ("scale-by-t-hardmax", "build random-transformer --scale-by-t --out {d}/new.npz", USAGE, "--scale-by-t", None),
    ("maxout-k-1", "build random-maxout --k 1 --out {d}/new.npz", USAGE, "--k", None),
    ("bt-m-0", "build bound-transformer --m 0 --out {d}/new.npz", USAGE, "--m", None),
    ("bt-T-1", "build bound-transformer -T 1 --out {d}/new.npz", USAGE, "--tokens", None),
    ("bt-D-2", "build bound-transformer --D 2 --out {d}/new.npz", USAGE, "--depth", None),
    ("bt-layout", "build bound-transformer --layout wide --out {d}/new.npz", USAGE, "--layout", None),
    ("fold-width-2", "build fold-relu --widths 2 --out {d}/new.npz", USAGE, "n >= 3", None),
    ("compile-mlp", "build compile {d}/m.npz --out {d}/new.npz", INPUT, "Maxout", None),
    # scan parameters, refused before any work
    ("scan-q-3", "scan --q 3 --out {d}/new_scan", USAGE, "--inputs", None),
    ("scan-q-0", "scan --q 0 --out {d}/new_scan", USAGE, "--inputs", "segment"),
    ("scan-T-1", "scan -T 1 --out {d}/new_scan", USAGE, "--tokens", None),
    ("scan-grid-0", "scan --grid 0 --out {d}/new_scan", USAGE, "--grid", None),
    ("scan-depth-0", "scan --depth 0 --out {d}/new_scan", USAGE, "--depth", None),
    ("scan-m-0", "scan --m 0 --out {d}/new_scan", USAGE, "--m", None),
    ("scan-region-cap", "scan --region-cap 100000000 --out {d}/new_scan", LIMIT, "--memory-cap", None),
    # limits known up front
    ("bt-huge", "build bound-transformer --m 50 --T 50 --D 30 --out {d}/new.npz", LIMIT, "--memory-cap", None),
    ("mlp-huge", "build random-mlp --widths 100000,100000,100000 --out {d}/new.npz", LIMIT, "GiB", None),
    ("bound-huge-D", "bound transformer_maxout_lower --m 4 --T 3 --q 2 --D 100000000", LIMIT, "digits", None),
    ("bound-serra-huge", "bound relu_upper_serra --widths 5000,5000,5000,5000 --n0 3000", LIMIT, "steps", None),
    ("plot-region-cap-huge", "plot {d}/m.npz --out {d}/new.png --region-cap 10000000000", LIMIT, "--memory-cap", None),
    # options that would be ignored
    ("grid-with-exact", "count {d}/m.npz --grid 100", USAGE, "--grid", None),
    ("seed-with-grid", "count {d}/m.npz --method sample --grid 10 --seed 3", USAGE, "--seed", None),
    ("bound-extra-option", "bound zaslavsky --n 5 --n0 2 --k 3", USAGE, "--k", None),
    ("box-with-segment", "plot-line {d}/m.npz --out {d}/new.png --from 0,0 --to 1,1 --box 0 2", USAGE, "--box", None),
    ("temperature-hardmax", "build random-transformer --inv-temperature 2 --out {d}/new.npz", USAGE, "softmax", None),
    ("bound-missing-option", "bound maxout_lower --widths 4 --n0 2", USAGE, "--k", None),
    ("bound-unknown", "bound no_such_bound", USAGE, "no_such_bound", None),
    ("bound-list-with-option", "bound --k 3", USAGE, "--k", None),
    # malformed model files
    ("model-missing", "count {d}/none.npz", INPUT, "no such model file", None),
    ("model-directory", "count {d}/folder", INPUT, "directory", "no such"),
    ("model-text", "count {d}/text.npz", INPUT, "not an .npz", "pickle"),
    ("model-npy", "count {d}/plain.npz", INPUT, "not an .npz", None),
    ("model-pickled", "count {d}/pickled.npz", INPUT, "pickle", None),
    ("model-nan", "count {d}/nan.npz --method sample", INPUT, "finite", None),
    ("model-huge-header", "count {d}/huge.npz", INPUT, "corrupt", "sample count"),
    ("model-bad-shape", "count {d}/bad_shape.npz", INPUT, "bad_shape.npz", None),
    ("model-bad-key", "count {d}/bad_key.npz", INPUT, "layer_one", None),
    ("model-bad-config", "count {d}/bad_config.npz", INPUT, "config", None),
    ("zero-width-line", "count {d}/zero_width.npz --method line", INPUT, "width 0", None),
    ("zero-width-plot-line", "plot-line {d}/zero_width.npz --out {d}/new.png", INPUT, "width 0", None),
    # questions the engine cannot answer
    # hardmax cells are curved and counted exactly; three ReLU-attention blocks reach walls of degree 27, past the cap
    ("curved-exact", "count {d}/rtf.npz --method exact", CANNOT, "line", None),
    ("curved-plot-stats", "plot {d}/tf.npz --out {d}/new.png --stats {d}/stats.png", CANNOT, "sampled", "--method"),
    # the command line itself
    ("no-arguments", "", USAGE, "no command", None),
    ("no-build-kind", "build", USAGE, "no command", None),
    ("unknown-option", "count {d}/m.npz --bogus", USAGE, "--bogus", None),
    ("unknown-command", "counts", USAGE, "counts", None),
]


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("regioncount: error: ") and len(lines[0]) > len("regioncount: error: ") + 3
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv, code, must, must_not", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_touches_nothing(files, capsys, argv, code, must, must_not):
    before = _snapshot(files)
    got = main(argv.format(d=files).split())
    _, err = capsys.readouterr()
    line = _one_line(err)
    assert got == code, line
    if must:
        assert must in line
    if must_not:
        assert must_not not in line
    assert _snapshot(files) == before


def test_every_exit_status_is_documented_in_the_readme():
    readme = (ROOT / "docs" / "cli.md").read_text()  # the README's reference moved to docs/cli.md
    for code in checks.EXIT_CODES:
        assert f"| {code} |" in readme, code


def test_an_unexpected_exception_is_still_one_line(files, capsys, monkeypatch):
    import regioncount_cli.count as cli

    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "count_regions", boom)
    assert main(["count", str(files / "m.npz")]) == checks.INTERNAL
    assert "ZeroDivisionError" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("argv, code", [(["count", "/nonexistent/m.npz", "--box", "0", "1"], INPUT)])
def test_console_script_gives_one_line(argv, code):
    env = subprocess_env()
    p = subprocess.run(
        [sys.executable, "-m", "regioncount_cli.main", *argv], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == code, p.stderr
    _one_line(p.stderr)


def test_old_spellings_still_work_and_help_shows_one(capsys):
    assert main(["bound", "transformer_maxout_lower", "--m", "4", "--T", "3", "--q", "2", "--D", "6", "--json"]) == 0
    old = json.loads(capsys.readouterr().out)["value"]
    argv = ["bound", "transformer_maxout_lower", "--m", "4", "--tokens", "3", "--inputs", "2", "--depth", "6", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["value"] == old == 48841
    assert main(["scan", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "--tokens" in help_text and "-T " not in help_text and "--q " not in help_text
    assert "<bool>" not in help_text and "<float,float>" not in help_text


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"regioncount {checks.tool_version()}"


def test_help_names_no_internal_documents(capsys):
    for argv in (["--help"], ["count", "--help"], ["bound", "--help"], ["build", "fold-relu", "--help"]):
        assert main(argv) == 0
        assert "DESIGN" not in capsys.readouterr().out


def test_named_module_state_dict_counts_like_the_numbered_one(tmp_path, capsys):
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(5, 2)), rng.normal(size=5)), (rng.normal(size=(1, 5)), rng.normal(size=1))]
    np.savez(tmp_path / "num.npz", **{"0.weight": layers[0][0], "0.bias": layers[0][1]}, **{"2.weight": layers[1][0]})
    named = {"fc1.weight": layers[0][0], "fc1.bias": layers[0][1], "fc2.weight": layers[1][0]}
    np.savez(tmp_path / "named.npz", **named)
    counts = []
    for name in ("num", "named"):
        assert main(["count", str(tmp_path / f"{name}.npz"), "--box", "-3", "3", "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["activation"].startswith("relu (assumed")
        counts.append(res["regions"])
    # 5 lines in general position in the plane cut at most 1 + 5 + 10 = 16 regions (Zaslavsky 1975)
    assert counts[0] == counts[1] and 1 <= counts[0] <= 16


def test_count_records_domain_seed_grid_version_and_skips_linear(files, capsys):
    argv = ["count", str(files / "m.npz"), "--method", "sample", "--samples", "2000", "--seed", "4", "--json"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["seed"] == 4 and res["domain"] == {"box": {"lo": [-1.0, -1.0], "hi": [1.0, 1.0]}}
    assert res["version"] == checks.tool_version() and res["grid"] is None
    assert main(["count", str(files / "m.npz"), "--no-linear", "--json"]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main(["count", str(files / "m.npz"), "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert fast["linear_regions"] is None and fast["regions"] == full["regions"]
    # the CLI prints the library's counts of the same file and box, and those are the equal-map components
    from _nets import assert_linear_regions_match

    from regioncount import Box, load_model, partition_plane

    part = partition_plane(load_model(files / "m.npz"), Box(-1, 1, 2))
    assert (full["regions"], full["linear_regions"]) == (part.n_regions, part.linear_regions())
    assert_linear_regions_match(part, part.linear_region_labels())


def test_per_layer_counts_end_with_the_whole_network(files, capsys):
    assert main(["count", str(files / "m.npz"), "--per-layer", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    layers = res["per_layer"]
    assert [r["layer"] for r in layers] == ["layer 1", "layer 2"]
    # one ReLU layer of 6 units in the plane: at most 1 + 6 + 15 = 22 regions (Zaslavsky 1975)
    assert 1 <= layers[0]["regions"] <= 22
    assert layers[-1]["regions"] == res["regions"] and layers[0]["regions"] <= res["regions"]


def test_bound_size_estimates_are_upper_bounds():
    import math

    from regioncount.theory._bounds import BOUNDS, estimate_size

    cases = [
        ("zaslavsky", dict(n=50, n0=3)),
        ("relu_lower_montufar", dict(widths=[6, 6, 3], n0=2)),
        ("relu_lower_serra", dict(widths=[6, 9, 3], n0=2)),
        ("relu_upper_serra", dict(widths=[8, 8, 8], n0=2)),
        ("maxout_lower", dict(widths=[4, 4, 2], n0=2, k=3)),
        ("maxout_upper_mrz", dict(widths=[5, 4], n0=2, k=3)),
        ("maxout_upper_serra", dict(widths=[5, 4], n0=2, k=3)),
        ("transformer_maxout_lower", dict(m=4, T=3, q=2, D=30)),
    ]
    assert {c[0] for c in cases} == set(BOUNDS)
    for name, options in cases:
        digits, steps = estimate_size(name, **options)
        assert math.log10(BOUNDS[name](**options)) <= digits and steps >= 1


@pytest.mark.parametrize("args", [(1, 2, 1, 6, "paper"), (2, 3, 2, 9, "paper"), (1, 4, 2, 9, "compact")])
def test_construction_size_is_known_before_it_is_built(args):
    from regioncount.theory._compile import bound_attaining_nbytes, bound_attaining_transformer

    tf, _ = bound_attaining_transformer(*args)
    arrays = [tf.E, tf.P, tf.readout_W, tf.readout_b]
    arrays += [getattr(b, f) for b in tf.blocks for f in ("Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2")]
    assert bound_attaining_nbytes(*args) == sum(a.nbytes for a in arrays)


def test_plain_values_convert_as_typer_converts_them(tmp_path):
    # the CLI converts plain option values without pydantic (regioncount_cli/_coerce.py, for start-up): for
    # every parameter of every command and values typed well and badly, the same value or the same error
    # as typer's own conversion
    import typer.core
    from typer._click import Context
    from typer._click.exceptions import BadParameter

    from regioncount_cli import _coerce
    from regioncount_cli.main import COMMANDS, build_command

    assert _coerce.typer_build is not None, "the plain converter is not installed with this typer"
    (tmp_path / "m.npz").write_text("")
    texts = ["5", "-3", "0", "-0", "007", "1e3", "1.5", "-2.25e-3", ".5", "5.", " 5", "+5", "1_000", "nan", "inf",
             "x", "", "123456789012345678901234567890", "1e999", str(tmp_path / "m.npz"), str(tmp_path), "~/x"]  # fmt: skip
    commands = []
    for name in COMMANDS:
        cmd = build_command(name)
        commands += list(getattr(cmd, "commands", {}).values()) or [cmd]
    kinds, compared, fast = set(), 0, 0
    for cmd in commands:
        ctx = Context(cmd)
        for param in cmd.params:
            desc = param.type_descriptor
            if not _coerce.is_plain(desc):
                continue
            ours, theirs = typer.core.build_runtime_param(desc), _coerce.typer_build(desc)
            assert type(ours).__name__ == "PlainParam" and type(theirs).__name__ != "PlainParam"
            arity = param.nargs if param.nargs > 1 else 0
            values = [(t,) * arity if arity else ([t] if param.multiple else t) for t in texts]
            for value in [*values, param.default]:
                with contextlib.suppress(_coerce.NotPlain, BadParameter):
                    _coerce.plain_value(desc, value, param, ctx)
                    fast += 1  # converted without typer's pydantic adapter
                outcomes = []
                for runtime in (ours, theirs):
                    try:
                        v = runtime.coerce(value, param=param, ctx=ctx)
                        outcomes.append(("value", repr(v), type(v)))
                    except BadParameter as e:
                        outcomes.append(("error", e.format_message(), None))
                assert outcomes[0] == outcomes[1], (cmd.name, param.name, value)
                compared += 1
            kinds.add(repr(desc.annotation))
    assert {"<class 'int'>", "<class 'float'>", "<class 'str'>", "<class 'pathlib.Path'>"} <= kinds
    assert "tuple[float, float]" in kinds and "list[str]" in kinds and compared > 1000 and fast > compared / 3
