"""The README's atlas screenshot (docs/figures/atlas.png): the torch 2->100x5 net's page in headless Chromium,
zoomed in twice, level sets on, one region hovered, saved with a 96-colour palette.

    python scripts/atlas_screenshot.py [--out docs/figures/atlas.png]

Needs playwright (pip) and Chromium (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs/figures/atlas.png")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    model = ROOT.parent / "shared/data/torch_mlp_w100_d5_s0.npz"
    with tempfile.TemporaryDirectory() as d:
        page_path = Path(d) / "atlas.html"
        cmd = [sys.executable, "-m", "regioncount_cli.main", "view", str(model), "--out", str(page_path)]
        subprocess.run([*cmd, "--box", "-2", "2", "--title", "torch 2→100×5 on [-2, 2]²"], check=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1160, "height": 660}, device_scale_factor=1)
            page.goto(page_path.as_uri())
            page.wait_for_function("window.atlas && window.atlas.idle", timeout=120_000)
            box = page.locator("#atlas").bounding_box()
            page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
            for _ in range(2):
                page.mouse.wheel(0, -300)
            page.click("#levels")
            page.wait_for_function("window.atlas.idle", timeout=120_000)
            page.mouse.move(box["x"] + box["width"] * 0.47, box["y"] + box["height"] * 0.46)
            png = page.screenshot()
            browser.close()
    # a palette of 96 colours (the page has a few fills and lines): a quarter of the bytes, the same picture
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    img.quantize(colors=96, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(args.out, optimize=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
