import csv
import json
import statistics

import pytest

from regioncount import Box, count_sampled, partition_curved, random_transformer, scan, truncate
from regioncount._scan import CSV_COLUMNS, constructed_row, random_rows, rows_to_csv
from regioncount.theory import maxout_lower, transformer_maxout_lower
from regioncount_cli.main import main


@pytest.mark.slow  # 8 s; the scan's rows are checked in the default run by the tests below
def test_scan_cli_writes_json_csv_png(tmp_path, capsys):
    out = tmp_path / "scan"
    # in-process: the cap holds this test process (all of pytest's memory) and the scan's workers together
    args = ["--depth", "4", "--seeds", "2", "--grid", "40", "--region-cap", "5000", "--memory-cap", "16"]
    args += ["--relu-exact-depth", "0"]  # the exact ReLU-attention column: its own test below, at tiny sizes
    code = main(["scan", *args, "--out", str(out)])
    assert code == 0
    stdout = capsys.readouterr().out
    assert "Thm 4.4" in stdout
    rows = json.loads((out / "scan.json").read_text())
    assert [r["depth"] for r in rows] == [1, 2, 3, 4]
    for r in rows:
        assert r["bound"] == (transformer_maxout_lower(1, 4, 2, r["depth"]) if r["depth"] >= 3 else None)
        assert r["random_sample_mean"] == pytest.approx(statistics.fmean(r["random"]["sampled"]))
        assert r["random_chao1_mean"] == pytest.approx(statistics.fmean(r["random"]["chao1"]))
        assert len(r["random"]["line_pieces"]) == 2
        # the exact column is on by default, at every depth; a sampled count never exceeds it
        ex = r["random_exact"]
        assert isinstance(ex["exact"], bool)  # certified where small enough (tests/test_curved_certified.py)
        assert all(c >= s for c, s in zip(ex["cells"], r["random"]["sampled"], strict=True))
    assert rows[2]["constructed"] == rows[2]["constructed_linear"] == rows[2]["bound"] == 67
    # compact: D - 1 maxout layers in D blocks, counted exactly under the cap
    assert rows[2]["compact"] == maxout_lower([4, 4], 2, 4) and rows[2]["compact_beats_bound"] is True
    # over --region-cap: not counted, the construction's formula reported instead
    assert rows[3]["compact"] is None and rows[3]["compact_formula"] == maxout_lower([4, 4, 4], 2, 4)
    with open(out / "scan.csv") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == CSV_COLUMNS and [int(t["depth"]) for t in table] == [1, 2, 3, 4]
    assert (out / "scan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the sampled column, recounted by hand: seed s's depth-2 truncation on the same 40 x 40 grid of the box
    for s in range(2):
        net = truncate(random_transformer(2, 4, 8, 4, seed=s), 2)
        res = count_sampled(net, Box(-1, 2, 2), grid=40)
        assert (res.regions, res.chao1) == (rows[1]["random"]["sampled"][s], rows[1]["random"]["chao1"][s])


def test_scan_rows_do_not_depend_on_the_largest_depth():
    short = random_rows(2, seeds=1, grid=30)
    deep = random_rows(4, seeds=1, grid=30)
    for a, b in zip(short, deep[:2]):
        assert a["random"]["line_pieces"] == b["random"]["line_pieces"]
        assert a["random"]["sampled"] == b["random"]["sampled"]


def test_scan_bad_input(tmp_path, capsys):
    assert main(["scan", "--depth", "0", "--out", str(tmp_path / "x")]) == 2
    assert main(["scan", "--box", "2", "1", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_depth_nine_construction_meets_thm44_exactly():
    # the compiled paper-layout Transformer itself, counted by the plane engine (about 15 s)
    row = constructed_row(9, region_cap=0)
    assert row["constructed"] is None  # region_cap 0: not counted, formula reported
    row = constructed_row(9)
    assert row["constructed"] == row["constructed_linear"] == row["bound"] == 160_867


@pytest.mark.slow  # 6-8 s: worker processes start JAX afresh
def test_scan_rows_are_the_same_with_worker_processes():
    # the exact random column at every depth: one curved run per seed, in workers beside the sampling
    kw = dict(tokens=2, seeds=2, d_model=4, grid=40, exact_depth=3)
    here = scan(3, workers=1, **kw)
    spread = scan(3, workers=2, **kw)
    for a, b in zip(here, spread, strict=True):
        assert list(a) == list(b)  # same fields in the same order (the JSON and CSV are the same)
        assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    last = spread[-1]["random_exact"]
    # certified (exact) only where every seed's partition is small enough for the certified curved engine
    direct = [partition_curved(random_transformer(2, 2, 4, 3, seed=s), Box(-1.0, 2.0, 2)) for s in (0, 1)]
    assert last["exact"] is all(c.exact for c in direct) and len(last["cells"]) == 2
    assert last["cells"] == [c.n_cells for c in direct]
    # the exact column of a depth equals a direct count of that seed's truncated network
    net = truncate(random_transformer(2, 2, 4, 3, seed=1), 2)
    assert spread[1]["random_exact"]["cells"][1] == partition_curved(net, Box(-1.0, 2.0, 2)).n_cells


@pytest.mark.slow
def test_scan_relu_attention_column_is_exact_up_to_its_depth():
    # tiny sizes: T = 2, d_model = 2; depth 1 counted by the certified curved engine (in worker jobs), depth 2
    # sampled only
    rows = scan(2, tokens=2, seeds=2, d_model=2, grid=30, relu_exact_depth=1, workers=2)  # its own jobs
    first, second = rows
    rx = first["relu_exact"]
    assert rx["exact"] is True and rx["largest_degree"] == first["relu_exact_degree"] == 3
    box = Box(-1.0, 2.0, 2)
    for s in (0, 1):
        net = truncate(random_transformer(2, 2, 2, 2, attention="relu", scale_by_T=True, seed=s), 1)
        cells = partition_curved(net, box, certified=True)
        assert cells.kind == "spline" and cells.exact
        assert rx["spline_pieces"][s] == cells.n_cells and rx["polynomial_pieces"][s] == cells.polynomial_pieces()
        # a sampled count of distinct codes never exceeds the exact number of connected pieces
        assert first["relu_attention"]["sampled_spline_pieces"][s] <= cells.n_cells
    assert first["relu_exact_mean"] == pytest.approx(statistics.fmean(rx["spline_pieces"]))
    assert first["relu_poly_mean"] == pytest.approx(statistics.fmean(rx["polynomial_pieces"]))
    # beyond --relu-exact-depth: the sampled lower bound only, labelled so
    assert "relu_exact" not in second and second["relu_exact_mean"] is None
    assert second["relu_attention"]["lower_bound"] is True and second["relu_attention_mean"] is not None
    lines = rows_to_csv(rows).splitlines()
    head = lines[0].split(",")
    assert tuple(head) == CSV_COLUMNS
    assert lines[1].split(",")[head.index("relu_exact_degree")] == "3"
    assert lines[2].split(",")[head.index("relu_exact_mean")] == ""
