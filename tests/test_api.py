"""The public surface: __all__ of each public package, lazy imports, and what starts without JAX."""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import INSTALLED, ROOT, subprocess_env

PUBLIC_PACKAGES = [
    "regioncount",
    "regioncount.engines",
    "regioncount.networks",
    "regioncount.plotting",
    "regioncount.results",
    "regioncount.theory",
]


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_every_name_in_all_exists_and_none_is_private(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    assert exported, f"{name} exports nothing"
    for attr in exported:
        assert not attr.startswith("_"), f"{name} exports the private name {attr}"
        getattr(module, attr)  # raises if the lazy table or __all__ names a missing object
    assert len(set(exported)) == len(exported)


def test_all_lists_what_the_package_exported_before_it_became_lazy():
    import regioncount

    # the names the eager __init__ had, every one still importable from the top level
    before = """count_regions Box Segment Slice CurvedBoundaryError DegreeTooHighError DomainError MemoryCapError
    ModelFileError NotPiecewiseError RegionCountError load_model save_model scan LinePieces SampleCount
    count_sampled forward_codes partition_plane walk_line MLP Block Maxout Program Transformer lower random_maxout
    random_mlp random_transformer truncate Partition BOUNDS bound_attaining_transformer compile_maxout
    maxout_lower product_maxout product_relu relu_lower_serra relu_upper_serra transformer_maxout_lower""".split()
    assert set(before) <= set(regioncount.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        regioncount.nope  # noqa: B018


@pytest.mark.parametrize("name", ["regioncount", "regioncount.engines", "regioncount.theory"])
def test_type_checking_imports_match_the_lazy_table(name):
    # each lazy package repeats its table as imports under TYPE_CHECKING (for mypy and editors): they must agree
    path = Path(importlib.util.find_spec(name).origin)
    tree = ast.parse(path.read_text())
    table = next(
        ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "_EXPORTS"
    )
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    imported = {
        alias.name: "." * node.level + (node.module or "")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == table


def _fresh_python(code: str, *args: str) -> str:
    env = subprocess_env(OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_bounds_and_the_numpy_engines_do_not_import_jax():
    out = _fresh_python(
        "import sys, regioncount as rc\n"
        "assert 'jax' not in sys.modules and 'numpy' not in sys.modules, 'import regioncount'\n"
        "b = rc.BOUNDS['transformer_maxout_lower'](m=4, T=3, q=2, D=6)\n"
        "assert 'jax' not in sys.modules and 'numpy' not in sys.modules, 'bounds'\n"
        "import regioncount.theory\n"
        "assert 'jax' not in sys.modules, 'theory'\n"
        "net = rc.random_mlp(2, [4, 4], seed=1)\n"
        "part = rc.partition_plane(net, rc.Box(-1, 1, 2))\n"
        "line = rc.walk_line(net, rc.Segment([-1, -1], [1, 1]))\n"
        "assert 'jax' not in sys.modules, 'plane and line engines'\n"
        "print(b, part.n_regions, line.activation_pieces)"
    )
    bound, regions, pieces = map(int, out.split())
    assert bound == 48_841
    assert regions >= pieces >= 1


def test_networks_built_before_jax_is_imported_still_pass_through_jit():
    out = _fresh_python(
        "import sys, regioncount as rc\n"
        "net = rc.random_mlp(2, [3], seed=0)\n"
        "assert 'jax' not in sys.modules\n"
        "import jax, jax.numpy as jnp\n"
        "assert not jax.config.jax_enable_x64\n"
        "with jax.enable_x64(True):\n"
        "    s = jax.jit(lambda n: n.weights[0].sum())(net)\n"
        "print(s.dtype, jnp.ones(2).dtype, float(s) == float(net.weights[0].sum()))"
    )
    assert out == "float64 float32 True"


# In a fresh process: the caller's jax_enable_x64 (off, JAX's default, or on) before and after importing and
# using regioncount, and what regioncount computed: the forward pass against float64 NumPy, and a sampled count.
_X64_RUN = (
    "import sys, json, numpy as np, jax\n"
    "if sys.argv[1] == 'on':\n"
    "    jax.config.update('jax_enable_x64', True)\n"
    "before = bool(jax.config.jax_enable_x64)\n"
    "import regioncount as rc\n"
    "after_import = bool(jax.config.jax_enable_x64)\n"
    "net = rc.random_mlp(2, [16, 16], seed=3)\n"
    "X = np.random.default_rng(0).uniform(-2, 2, (64, 2))\n"
    "Y, C, _ = rc.forward_codes(rc.lower(net), X)\n"
    "H = X\n"
    "for i, (W, b) in enumerate(zip(net.weights, net.biases)):\n"
    "    H = H @ W.T + b\n"
    "    H = np.maximum(H, 0) if i < len(net.weights) - 1 else H\n"
    "res = rc.count_sampled(net, rc.Box(-2, 2, 2), grid=400)\n"
    "rec = rc.count_regions(net, rc.Box(-2, 2, 2), method='sample', samples=5000)\n"
    "print(json.dumps({'before': before, 'after_import': after_import, 'after_use': bool(jax.config.jax_enable_x64),\n"
    "    'dtype': str(Y.dtype), 'f64': bool(np.allclose(np.asarray(Y), H, rtol=1e-13, atol=1e-13)),\n"
    "    'sampled': [res.regions, res.f1, res.f2], 'record': [rec['regions'], rec['f1']]}))"
)


def test_import_regioncount_leaves_jax_config_as_it_found_it_and_still_computes_in_float64():
    runs = {flag: json.loads(_fresh_python(_X64_RUN, flag)) for flag in ("off", "on")}
    for flag, run in runs.items():
        want = flag == "on"
        assert run["before"] is want and run["after_import"] is want and run["after_use"] is want, run
        # float64, and the float64 NumPy forward pass to 1e-13 (a float32 pass is ~1e-7 off)
        assert run["dtype"] == "float64" and run["f64"], run
    # the counts do not depend on the caller's setting
    assert runs["off"]["sampled"] == runs["on"]["sampled"] and runs["off"]["record"] == runs["on"]["record"]
    assert runs["off"]["sampled"][0] >= 1


def test_fresh_processes_import_the_tree_under_test():
    # the source tree, or in CI's second run the installed wheel (REGIONCOUNT_TEST_INSTALLED=1), never a mix
    out = _fresh_python("import regioncount, regioncount_cli; print(regioncount.__file__, regioncount_cli.__file__)")
    for path in map(Path, out.split()):
        assert path.is_relative_to(ROOT) != INSTALLED, path
    import regioncount

    assert Path(regioncount.__file__).is_relative_to(ROOT) != INSTALLED


_CLI_RUN = (
    "import contextlib, io, json, sys\n"
    "from regioncount_cli.main import main\n"
    "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
    "    code = main(sys.argv[1:])\n"
    "heavy = ['jax', 'numpy', 'matplotlib', 'shapely', 'networkx', 'rich', 'pydantic']\n"
    "cli = sorted(m for m in sys.modules if m.startswith('regioncount_cli.') and not m.startswith('regioncount_cli._'))\n"
    "print(json.dumps({'code': code, 'out': out.getvalue(), 'cli': cli, 'heavy': [m for m in heavy if m in sys.modules]}))"
)


def _cli_imports(*argv: str) -> dict:
    """Run ``regioncount argv`` in a fresh process: its exit status, stdout, which command modules and which
    heavy packages it imported."""
    return json.loads(_fresh_python(_CLI_RUN, *argv))


def test_help_and_the_bounds_do_not_import_jax():
    run = _cli_imports("--help")
    assert run["code"] == 0 and "bound" in run["out"]
    assert "jax" not in run["heavy"]
    for argv in (["bound"], ["bound", "transformer_maxout_lower", "--m", "4", "--tokens", "3", "--inputs", "2",
                             "--depth", "6", "--json"]):  # fmt: skip
        run = _cli_imports(*argv)
        assert run["code"] == 0 and run["out"]
        assert run["cli"] == ["regioncount_cli.bound", "regioncount_cli.main"]
        assert not {"jax", "numpy", "pydantic"} & set(run["heavy"]), argv
    assert json.loads(run["out"])["value"] == 48_841


def test_count_imports_only_its_own_command_and_no_jax(tmp_path):
    # a PyTorch state dict counted exactly in the plane: NumPy engines only, no other command's module, and
    # neither plotting, graph, geometry nor table libraries with --json, nor typer's pydantic adapters
    import numpy as np

    rng = np.random.default_rng(0)
    path = tmp_path / "torch_mlp.npz"
    np.savez(path, **{"0.weight": rng.normal(size=(6, 2)), "0.bias": rng.normal(size=6),
                      "2.weight": rng.normal(size=(1, 6)), "2.bias": rng.normal(size=1)})  # fmt: skip
    run = _cli_imports("count", str(path), "--json")
    assert run["code"] == 0 and json.loads(run["out"])["regions"] >= 1
    assert run["cli"] == ["regioncount_cli.count", "regioncount_cli.main"]
    assert not {"jax", "matplotlib", "shapely", "networkx", "rich", "pydantic"} & set(run["heavy"])


# Folders whose code is a user of the library: they import public names only.
USERS = ["notebooks", "scripts", "benchmarks", "cli"]


def _private_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module.split(".")[0] == "regioncount":
                modules += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for m in modules:
            parts = m.split(".")
            if parts[0] == "regioncount" and any(p.startswith("_") for p in parts[1:]):
                found.append(m)
    return found


def test_notebooks_scripts_benchmarks_and_the_cli_import_only_public_names():
    import json

    offenders = {}
    for folder in USERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix == ".py":
                sources = [path.read_text()]
            elif path.suffix == ".ipynb":
                cells = json.loads(path.read_text())["cells"]
                sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
            else:
                continue
            bad = [m for s in sources for m in _private_imports(s)]
            if bad:
                offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}
    # the checker itself sees a private import
    assert _private_imports("from regioncount.engines._plane import partition_plane") == [
        "regioncount.engines._plane",
        "regioncount.engines._plane.partition_plane",
    ]
    assert _private_imports("from regioncount import _config") == ["regioncount._config"]


def test_the_exact_count_of_a_state_dict_does_not_import_jax(tmp_path):
    # the exact 2D path of a torch-layout MLP file, linear regions included: NumPy engines only (issue 21)
    import numpy as np

    rng = np.random.default_rng(0)
    path = tmp_path / "mlp.npz"
    np.savez(path, **{"0.weight": rng.normal(size=(8, 2)), "0.bias": rng.normal(size=8),
                      "2.weight": rng.normal(size=(1, 8)), "2.bias": rng.normal(size=1)})  # fmt: skip
    run = _cli_imports("count", str(path), "--box", "-2", "2", "--json")
    assert run["code"] == 0
    doc = json.loads(run["out"])
    assert doc["exact"] and doc["regions"] >= doc["linear_regions"] > 1
    assert "jax" not in run["heavy"]
