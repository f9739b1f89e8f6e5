"""Every shell command shown in README.md and docs/*.md runs (issue 25): each ```bash block is split into
commands, run in order in one temporary folder per page, and each must exit 0.

- ``regioncount ...`` runs in this process (``regioncount_cli.main.main``; the words expanded by bash, so
  ``digit_{a,b,c}.npy`` works); other shell commands (``printf ... > keys.csv``) run under bash.
- Not run, checked instead: the README's two install lines (``python3 -m venv ... && pip install ...``;
  CI runs the second itself) and ``python scripts/...`` / ``python benchmarks/...`` lines, whose script
  must exist (each is a long job of its own).
- Too slow for the default run, replaced there by a fast equivalent (:data:`FAST`), and run as written by
  the slow test: ``regioncount scan --depth 9`` (about a minute: replaced by a depth-1, one-seed, 10x10-grid
  scan of d = 4 in this process, into the same folder) and the digits CNN's decision count on its slice through three digits (19,000
  regions: replaced by the same command on the slice's central [-0.05, 0.05]^2).

The default run covers README.md (a few seconds); the slow test covers every page.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: command prefix (as written) -> the fast command the default run uses instead
FAST = {
    "regioncount scan --depth 9": "regioncount scan --depth 1 --seeds 1 --grid 10 --d-model 4 --workers 1 --relu-exact-depth 0",
    "regioncount count docs/digits/digits_cnn.onnx --through": None,  # None: append --box -0.05 0.05
}


def commands(page: Path) -> list[str]:
    """The commands of ``page``'s ```bash blocks: continuation lines joined, blank and comment lines left out."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip())
    return out


def test_every_page_has_commands_and_no_stray_shell():
    """Each page's commands are found, and no command line sits outside a ```bash block (the README once
    had its Dask commands as plain text)."""
    assert all(commands(p) for p in PAGES if p.name in ("README.md", "cli.md", "engines.md", "models.md"))
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        stray = [ln for ln in text.splitlines() if ln.startswith("regioncount ")]
        assert not stray, (page.name, stray)


def _argv(line: str, cwd: Path) -> list[str]:
    """The words of ``line`` as bash expands them (braces, quotes; comments dropped; no globbing)."""
    out = subprocess.run(
        ["bash", "-c", "set -f; printf '%s\\0' " + line], cwd=cwd, capture_output=True, check=True
    ).stdout
    return out.decode().split("\0")[:-1]


def _fast(line: str) -> str:
    for prefix, fast in FAST.items():
        if line.startswith(prefix):
            return line.replace(prefix, fast, 1) if fast else line.split("#")[0].rstrip() + " --box -0.05 0.05"
    return line


def run_page(page: Path, tmp: Path, capsys, *, fast: bool) -> list[str]:
    """Run every command of ``page`` in ``tmp``; returns what was not run (and why), for the record."""
    from regioncount_cli.main import main

    (tmp / "docs").mkdir(exist_ok=True)
    if not (tmp / "docs" / "digits").exists():
        (tmp / "docs" / "digits").symlink_to(ROOT / "docs" / "digits")  # the committed CNN and digits
    skipped = []
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        for line in commands(page):
            if line.startswith("python3 -m venv"):
                skipped.append(f"install: {line}")
                continue
            if line.startswith("python "):
                script = shlex.split(line)[1]
                assert (ROOT / script).is_file(), (page.name, line)
                skipped.append(f"script: {line}")
                continue
            run = _fast(line) if fast else line
            if run.startswith("regioncount "):
                code = main(_argv(run, tmp)[1:])
                out, err = capsys.readouterr()
                assert code == 0, (page.name, run, err[-2000:])
            else:
                p = subprocess.run(["bash", "-c", run], cwd=tmp, capture_output=True, text=True)
                assert p.returncode == 0, (page.name, run, p.stderr)
    finally:
        os.chdir(cwd)
    return skipped


def test_readme_commands_run(tmp_path, capsys):
    skipped = run_page(ROOT / "README.md", tmp_path, capsys, fast=True)
    # only the two install lines are not run; the scan ran as its fast equivalent
    assert len(skipped) == 2 and all(s.startswith("install: ") for s in skipped)
    assert (tmp_path / "docs" / "scan" / "scan.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_docs_command_runs_as_written(tmp_path, capsys, page):
    run_page(page, tmp_path, capsys, fast=False)


def test_readme_scan_table_is_docs_scan():
    """The README's scan table is the one docs/scan/ holds, with the exact random column the text describes
    (connected cells mean ± sd / linear regions, per depth)."""
    import json

    rows = json.loads((ROOT / "docs" / "scan" / "scan.json").read_text())
    text = (ROOT / "README.md").read_text()
    assert "rand. exact cells /" in text
    for r in rows:
        cell = f"{r['random_exact_mean']:,.0f}±{r['random_exact_std']:,.0f} / {r['random_exact_linear_mean']:,.0f}"
        line = next(ln for ln in text.splitlines() if ln.startswith(f"│ {r['depth']} │"))
        assert cell in line, (r["depth"], cell, line)
