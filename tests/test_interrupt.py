"""SIGINT and SIGTERM at several points of `scan` and `plot` leave the complete old results or the complete new
ones, and no temporary files; the set-writer's two phases (staging, renaming) are also tested in-process."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from _shared import subprocess_env

from regioncount_cli._files import Interrupted, signals_as_exceptions, write_files

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def _leftovers(d: Path) -> list[str]:
    return [str(p) for p in d.rglob("*") if p.name.startswith(".regioncount-") or p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------------------
# in-process: a signal while files are staged, and one while they are renamed


def _old_set(d: Path) -> dict[Path, bytes]:
    files = {d / "out" / "a.json": b'{"old": 1}\n', d / "out" / "a.csv": b"old\n", d / "b.txt": b"old b\n"}
    for p, data in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def _signal_main_thread(sig: int) -> None:
    """Send ``sig`` to this process's main thread. ``os.kill`` would direct it at the process, and while the
    main thread masks it (the renaming phase) the kernel may hand it to another of pytest's threads (JAX's,
    OpenBLAS's), whose Python handler then runs in the main thread at some later bytecode: perhaps after the
    phase under test, outside any ``pytest.raises``. A thread-directed signal stays pending on the main thread,
    as the tests assume. Process-directed signals are the subprocess tests' below."""
    signal.pthread_kill(threading.main_thread().ident, sig)


def _drain_signals() -> None:
    """Let a signal that is still pending (one a finaliser swallowed is delivered again) land here, not in a
    later test: these tests signal the pytest process itself."""
    with signals_as_exceptions():
        for _ in range(3):
            try:
                time.sleep(0.01)
            except Interrupted:
                pass


@pytest.mark.parametrize("at_call", [1, 2, 3])
def test_signal_while_staging_leaves_the_old_set(tmp_path, monkeypatch, at_call):
    old = _old_set(tmp_path)
    calls = []
    real_fsync = os.fsync

    def fsync_then_signal(fd):
        real_fsync(fd)
        calls.append(fd)
        if len(calls) == at_call:
            _signal_main_thread(signal.SIGTERM)

    monkeypatch.setattr("regioncount_cli._files.os.fsync", fsync_then_signal)
    with signals_as_exceptions(), pytest.raises(Interrupted):
        write_files({p: b"new " + p.name.encode() for p in old})
    _drain_signals()
    assert {p: p.read_bytes() for p in old} == old
    assert _leftovers(tmp_path) == []


def test_signal_while_renaming_is_held_until_the_new_set_is_whole(tmp_path, monkeypatch):
    old = _old_set(tmp_path)
    real_replace = os.replace
    sent = []

    def replace_and_signal(a, b):
        if not sent:
            _signal_main_thread(signal.SIGINT)
            sent.append(1)
        real_replace(a, b)

    monkeypatch.setattr("regioncount_cli._files.os.replace", replace_and_signal)
    new = {p: b"new " + p.name.encode() for p in old}
    _drain_signals()
    with signals_as_exceptions(), pytest.raises(Interrupted):
        write_files(new)
    _drain_signals()
    assert sent and {p: p.read_bytes() for p in old} == new
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------
# subprocess: the real commands, signalled once their handlers are installed


def _handles_sigterm(pid: int) -> bool:
    """Whether the process has installed a SIGTERM handler (bit 15 of SigCgt): it is inside ``main``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return False


def _run_and_signal(argv: list[str], sig: int, when: str, watch: Path) -> tuple[int, str]:
    """Start ``regioncount argv``; once it is inside ``main`` send ``sig`` at once (``when="start"``), after 1 s
    (``"work"``), or as soon as a staging folder appears under ``watch`` (``"write"``; the run may finish first)."""
    env = subprocess_env(OPENBLAS_NUM_THREADS="1")
    p = subprocess.Popen(
        [sys.executable, "-m", "regioncount_cli.main", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while p.poll() is None and not _handles_sigterm(p.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    if when == "work":
        time.sleep(1.0)
    while when == "write" and p.poll() is None and not _leftovers(watch) and time.monotonic() < deadline:
        time.sleep(0.0005)
    if p.poll() is None:
        p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def _check_outcome(code: int, err: str, files: dict[Path, bytes], is_new_set) -> str:
    assert code in (0, 130, 143), err
    assert "Traceback" not in err
    now = {p: p.read_bytes() for p in files}
    if now == files:
        return "old"
    assert all(now[p] != files[p] for p in files), "a mix of old and new files"
    is_new_set(now)
    return "new"


# two points per command, each signal at each point across the two (the in-process tests above cover the
# staging and renaming phases with both signals); "start" (as soon as main is entered) is also available
SCAN_POINTS = [(signal.SIGINT, "work"), (signal.SIGTERM, "write")]
PLOT_POINTS = [(signal.SIGTERM, "work"), (signal.SIGINT, "write")]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    rng = np.random.default_rng(1)
    np.savez(d / "m.npz", **{"0.weight": rng.normal(size=(6, 2)), "0.bias": rng.normal(size=6)})
    return d / "m.npz"


@pytest.mark.slow
@pytest.mark.parametrize("sig, when", SCAN_POINTS, ids=[f"{signal.Signals(s).name}-{w}" for s, w in SCAN_POINTS])
def test_interrupted_scan_leaves_old_or_new_set(tmp_path, sig, when):
    out = tmp_path / "scan"
    out.mkdir()
    old = {out / "scan.json": b"[]\n", out / "scan.csv": b"depth\n", out / "scan.png": PNG + b"old"}
    for p, data in old.items():
        p.write_bytes(data)

    def is_new(now):
        rows = json.loads(now[out / "scan.json"])
        assert [r["depth"] for r in rows] == [1] and rows[0]["run"]["grid"] == 8
        assert now[out / "scan.csv"].decode().splitlines()[1].startswith("1,")
        assert now[out / "scan.png"].startswith(PNG)

    argv = [
        "scan",
        "--depth",
        "1",
        "--seeds",
        "1",
        "--grid",
        "8",
        "--d-model",
        "4",
        "--relu-exact-depth",
        "0",
        "--out",
        str(out),
    ]
    code, err = _run_and_signal(argv, sig, when, tmp_path)
    _check_outcome(code, err, old, is_new)
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig, when", PLOT_POINTS, ids=[f"{signal.Signals(s).name}-{w}" for s, w in PLOT_POINTS])
def test_interrupted_plot_leaves_old_or_new_set(tmp_path, model, sig, when):
    fig, side, stats = tmp_path / "fig.png", tmp_path / "fig.json", tmp_path / "stats.png"
    old = {fig: PNG + b"old", side: b'{"figure": "fig.png", "format": "png", "old": true}\n', stats: PNG + b"o"}
    for p, data in old.items():
        p.write_bytes(data)

    def is_new(now):
        info = json.loads(now[side])
        assert info["figure"] == str(fig) and info["stats_figure"] == str(stats) and info["exact"] is True
        assert now[fig].startswith(PNG) and now[stats].startswith(PNG)

    argv = ["plot", str(model), "--out", str(fig), "--stats", str(stats), "--box", "-2", "2", "--dpi", "40"]
    code, err = _run_and_signal(argv, sig, when, tmp_path)
    _check_outcome(code, err, old, is_new)
    assert _leftovers(tmp_path) == []
