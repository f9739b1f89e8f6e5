"""--memory-cap is measured: the resident set of the process stays under the cap."""

import sys
from pathlib import Path

import numpy as np
import pytest

from regioncount._errors import MemoryCapError
from regioncount_cli._validate import MemoryGuard, rss_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_guard_stops_a_growing_process_before_the_cap():
    guard = MemoryGuard(rss_bytes() + 800 * 2**20).start()
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
