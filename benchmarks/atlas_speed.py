"""The atlas page (``regioncount view``) in headless Chromium: build time, page size, opening, hover and zoom.

Cases: the torch 2->100x5 net of ``shared/data`` on [-2, 2]^2 (46 122 regions) and the one-layer MLPs
``random_mlp(2, (570,), seed=0)`` and ``random_mlp(2, (1800,), seed=0)`` on [-2, 2]^2 (about 10^5 and 10^6
regions). For each: seconds to compute the atlas
(exact partition, code tree, views) and to write the page, its size in bytes, seconds from ``goto`` until the
first full drawing is done (every piece in view drawn), the hover latency the page measures itself
(``performance.now()`` around picking and filling the panel; the panel's code is checked against the forward
pass) for 20 random points, the seconds a zoom of 5 wheel steps takes to finish drawing, and the time from
each view change (5 wheel steps, 10 drag steps) to its first frame on screen (the page's ``firstFrameMs``).

    python benchmarks/atlas_speed.py                 # both cases, a table
    python benchmarks/atlas_speed.py --case torch    # one case
    python benchmarks/atlas_speed.py --json

Needs playwright (pip) and Chromium (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _machine import ROOT, Clock, machine

import regioncount as rc
from regioncount.plotting import atlas_html

CASES = {
    "torch": (
        "torch 2->100x5 (shared/data)",
        lambda: rc.load_network(ROOT.parent / "shared/data/torch_mlp_w100_d5_s0.npz"),
    ),
    "1e5": ("2->570 (random_mlp seed 0)", lambda: rc.random_mlp(2, (570,), seed=0)),
    "1e6": ("2->1800 (random_mlp seed 0)", lambda: rc.random_mlp(2, (1800,), seed=0)),
}
BOX = rc.Box(-2.0, 2.0, 2)


def measure(case: str, points: int = 20) -> dict:
    from playwright.sync_api import sync_playwright

    label, make = CASES[case]
    net = make()
    with Clock() as c_data:
        atlas = rc.atlas_data(net, BOX)
    with Clock() as c_page:
        page_text = atlas_html(atlas, title=label)
    data = page_text.encode()
    del page_text
    row = {
        "case": label,
        "regions": atlas.n_regions,
        "atlas_seconds": round(c_data.wall, 2),
        "page_seconds": round(c_page.wall, 2),
        "page_bytes": len(data),
        "peak_rss_mb": round(c_page.rss1 / 1024),
    }
    program = rc.lower(net)
    with tempfile.TemporaryDirectory() as d, sync_playwright() as pw:
        path = Path(d) / "atlas.html"
        path.write_bytes(data)
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 850})
        t0 = time.perf_counter()
        page.goto(path.as_uri(), timeout=600_000)
        page.wait_for_function("window.atlas && window.atlas.idle", timeout=600_000, polling=100)
        row["open_seconds"] = round(time.perf_counter() - t0, 2)
        row["drawn_regions"] = page.evaluate("atlas.drawnRegions()")
        row["first_draw_ms"] = round(page.evaluate("atlas.stats.lastRenderMs"))
        box = page.locator("#atlas").bounding_box()
        rng = np.random.default_rng(0)
        times, picked, shown = [], [], []
        for u in rng.uniform(-1.98, 1.98, (points, 2)):
            x, y = page.evaluate(f"atlas.toPixel({float(u[0])!r}, {float(u[1])!r})")
            page.mouse.move(box["x"] + x, box["y"] + y)
            got = page.evaluate(
                "(() => { const p = document.getElementById('panel').dataset, h = atlas.stats.hoverMs;"
                " return [p.code, p.u, h[h.length - 1]]; })()"
            )
            shown.append([int(v) for v in got[0].split(",")])
            picked.append([float(v) for v in got[1].split(",")])
            times.append(float(got[2]))
        _, C, _ = rc.forward_codes(program, np.array(picked))
        row["hover_codes_match"] = bool(np.array_equal(np.asarray(C), np.array(shown)))
        row["hover_ms_median"] = round(statistics.median(times), 2)
        row["hover_ms_max"] = round(max(times), 2)
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        n0 = page.evaluate("atlas.stats.firstFrameMs.length")
        t0 = time.perf_counter()
        for _ in range(5):
            page.mouse.wheel(0, -400)
        page.wait_for_function("window.atlas.idle", timeout=600_000, polling=50)
        row["zoom_seconds"] = round(time.perf_counter() - t0, 2)
        # how fast the view answers: from each wheel step's redraw to its first frame (the old picture rescaled,
        # then the largest pieces), and the same for 10 drag steps of a pan
        frames = page.evaluate(f"atlas.stats.firstFrameMs.slice({n0})")
        page.mouse.down()
        for k in range(10):
            page.mouse.move(box["x"] + box["width"] / 2 + 15 * (k + 1), box["y"] + box["height"] / 2 + 8 * (k + 1))
        page.mouse.up()
        page.wait_for_function("window.atlas.idle", timeout=600_000, polling=50)
        frames += page.evaluate(f"atlas.stats.firstFrameMs.slice({n0 + len(frames)})")
        row["first_frame_ms_median"] = round(statistics.median(frames), 1)
        row["first_frame_ms_max"] = round(max(frames), 1)
        row["pixels_per_unit_after_zoom"] = round(page.evaluate("atlas.view().s"), 1)
        row["drawn_after_zoom"] = page.evaluate("atlas.drawnRegions()")
        browser.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [measure(c) for c in (args.case or ["torch", "1e5", "1e6"])]
    if args.json:
        print(json.dumps({"machine": machine(), "rows": rows}, indent=1))
        return
    print(json.dumps(machine()))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
