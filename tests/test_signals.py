"""Signals at the end of a run (issue 25): a SIGINT while the final files are committed, or after, is never
swallowed (the run exits 130 with every file whole), and repeated Ctrl-C of ``plot`` never kills the process
by a signal of its own (it once ended in SIGSEGV 1 time in 28: the interpreter's teardown of compiled code
and plotting threads; the CLI now leaves through ``os._exit`` once every file is written)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _shared import subprocess_env

from regioncount import random_mlp, save_model

#: A count whose commit (os.replace of its --out) sends SIGINT to the process itself.
IN_COMMIT = """
import os, signal, sys
sys.argv = ["regioncount", "count", sys.argv[1], "--out", sys.argv[2], "--json"]
from regioncount_cli import _files, main as M
real = os.replace
def replace(a, b):
    os.kill(os.getpid(), signal.SIGINT)
    real(a, b)
_files.os.replace = replace
M.main()
"""

#: A count that gets SIGINT after its files are written and its signal handlers are the last ones (the
#: moment the handlers once ignored signals, and the run exited 0).
AFTER_COMMIT = """
import os, signal, sys, time
sys.argv = ["regioncount", "count", sys.argv[1], "--out", sys.argv[2], "--json"]
from regioncount_cli import main as M
real_signal = signal.signal
class Signals:
    def __getattr__(self, name):
        return getattr(signal, name)
    def signal(self, s, h):
        old = real_signal(s, h)
        if getattr(h, "__name__", "") == "_late" and s == signal.SIGTERM:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        return old
M.signal = Signals()
M.main()
"""


@pytest.fixture
def model(tmp_path):
    p = tmp_path / "m.npz"
    save_model(random_mlp(2, [6, 6], seed=0), p)
    return p


@pytest.mark.parametrize("script", [IN_COMMIT, AFTER_COMMIT], ids=["in-commit", "after-commit"])
def test_sigint_at_the_commit_is_not_swallowed(tmp_path, model, script):
    out = tmp_path / "o.json"
    p = subprocess.run(
        [sys.executable, "-c", script, str(model), str(out)],
        capture_output=True,
        text=True,
        env=subprocess_env(OPENBLAS_NUM_THREADS="1"),
        timeout=120,
    )
    assert p.returncode == 130, p.stderr
    assert p.stderr.startswith("regioncount: error: interrupted") and p.stderr.count("\n") == 1, p.stderr
    assert json.loads(out.read_text())["regions"] > 0  # the whole file: the commit had happened
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".regioncount-")]


@pytest.mark.slow
def test_repeated_ctrl_c_of_plot_never_crashes(tmp_path):
    """16 runs of ``plot``, each sent SIGINT at a random moment (from start-up to after the picture is
    written): every one ends with status 0 or 130, never by a signal (SIGSEGV was -11), never with a
    traceback, and leaves the old picture or a whole new one."""
    m = tmp_path / "m.npz"
    rng = np.random.default_rng(7)
    np.savez(m, **{"0.weight": rng.normal(size=(12, 2)), "0.bias": rng.normal(size=12)})
    fig, side = tmp_path / "fig.png", tmp_path / "fig.json"
    env = subprocess_env(OPENBLAS_NUM_THREADS="1")
    pick = random.Random(3)
    codes = []
    for _ in range(16):
        fig.write_bytes(b"old")
        side.write_text('{"figure": "fig.png", "format": "png", "old": true}\n')  # a sidecar of ours
        p = subprocess.Popen(
            [sys.executable, "-m", "regioncount_cli.main", "plot", str(m), "--out", str(fig), "--dpi", "40"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        time.sleep(pick.uniform(0.2, 4.0))
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        codes.append(p.returncode)
        assert p.returncode in (0, 130), (p.returncode, err)
        assert "Traceback" not in err and "Fatal Python error" not in err, err
        data = fig.read_bytes()
        if data != b"old":
            assert data.startswith(b"\x89PNG") and json.loads(side.read_text())["figure"] == str(fig)
        else:
            assert json.loads(side.read_text())["old"] is True
    assert 130 in codes  # some signals did land mid-run
    assert not [q for q in Path(tmp_path).iterdir() if q.name.startswith(".regioncount-")]
