"""--memory-cap is measured: the resident set of the process stays under the cap."""

import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from regioncount._errors import MemoryCapError
from regioncount_cli._validate import MemoryGuard, rss_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(params=["python", "ignored"])
def sigint(request):
    """SIGINT as Python sets it up, and ignored, as in a job a shell starts in the background (where
    ``_thread.interrupt_main`` alone does nothing)."""
    before = signal.getsignal(signal.SIGINT)
    if request.param == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield request.param
    signal.signal(signal.SIGINT, before)


def test_guard_stops_a_growing_process_before_the_cap(sigint):
    before = signal.getsignal(signal.SIGINT)
    guard = MemoryGuard(_cap_tripping_at(rss_bytes() + 800 * 2**20)).start()
    held = []
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in range(150):  # up to 3 GB in 20 MB steps, stopped long before
                held.append(np.ones(20 * 2**20 // 8))
        with pytest.raises(MemoryCapError, match="resident memory"):
            guard.raise_if_tripped()
    finally:
        guard.stop()
        held.clear()
    assert 0 < guard.tripped_at <= guard.cap
    assert signal.getsignal(signal.SIGINT) == before  # the guard gave the handler back


def test_guard_leaves_an_ignored_sigint_ignored(sigint):
    """Where SIGINT was ignored, a SIGINT that is not the guard's stays without effect while it runs."""
    if sigint != "ignored":
        pytest.skip("only where SIGINT is ignored")
    guard = MemoryGuard(_cap_tripping_at(rss_bytes() + 800 * 2**20)).start()
    try:
        signal.raise_signal(signal.SIGINT)  # nothing happens: not the guard's, and ignored before
    finally:
        guard.stop()
    assert guard.tripped_at == 0
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def _guard_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "regioncount-memory-guard"]


def _cap_tripping_at(trip: int) -> int:
    """The cap whose guard trips at ``trip`` bytes (MemoryGuard keeps a headroom of 2/5 of the cap, at least
    320 MiB and at most 2 GiB), so a test's margin above the process's resident memory does not depend on how
    much the test process already holds."""
    for cap in (trip + 320 * 2**20, int(trip / 0.6) + 1, trip + 2 * 2**30):
        if MemoryGuard(cap).trip >= trip:
            return cap
    raise AssertionError(trip)


def test_the_guard_is_a_context_around_the_work_and_gone_after_it():
    import regioncount._memory as mem

    held = []
    with pytest.raises(MemoryCapError, match="resident memory"):  # the interrupt, told as the cap
        with MemoryGuard(_cap_tripping_at(rss_bytes() + 600 * 2**20)) as guard:
            assert len(_guard_threads()) == 1
            for _ in range(150):
                held.append(np.ones(20 * 2**20 // 8))
    held.clear()
    assert 0 < guard.tripped_at <= guard.cap and not _guard_threads()
    with MemoryGuard(
        _cap_tripping_at(rss_bytes() + 2**30)
    ):  # a body that stays under the cap: nothing raised, nothing left
        pass
    assert not _guard_threads() and mem.LIMIT is None


def test_a_command_starts_its_guard_around_its_body_only(tmp_path, capsys):
    from regioncount_cli import _validate
    from regioncount_cli.main import main

    seen = []
    real_enter = MemoryGuard.__enter__

    def enter(self):
        seen.append(("enter", self.cap))
        return real_enter(self)

    pytest.MonkeyPatch().setattr(MemoryGuard, "__enter__", enter)
    try:
        # parsing alone (a usage error) starts no guard; a command with --memory-cap runs inside one
        assert main(["count", str(tmp_path / "none.npz"), "--memory-cap", "0"]) == 2
        assert seen == [] and not _guard_threads()
        argv = ["build", "random-mlp", "--out", str(tmp_path / "m.npz"), "--widths", "3", "--memory-cap", "16"]
        assert main(argv) == 0 and (tmp_path / "m.npz").exists()
        assert seen == [("enter", 16 * 2**30)] and not _guard_threads() and _validate.active_guard is None
    finally:
        MemoryGuard.__enter__ = real_enter  # type: ignore[method-assign]
    capsys.readouterr()


@pytest.mark.slow
def test_exact_count_under_the_cap_never_passes_it(tmp_path):
    from memory_cap import peak_rss_of

    from regioncount._io import save_model
    from regioncount.theory._compile import bound_attaining_transformer

    model = tmp_path / "c.npz"
    save_model(bound_attaining_transformer(4, 3, 2, 9)[0], model)
    cap = 2.0  # GiB, the figure; the uncapped count of these 8,254,129 regions holds about 22 GB
    code, _, peak, err = peak_rss_of(["count", str(model), "--box", "-1", "2", "--memory-cap", str(cap)])
    assert code == 5 and "--memory-cap" in err and "Traceback" not in err
    assert peak <= cap * 2**30
