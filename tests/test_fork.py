"""Work on forked worker processes (engines/_fork.py): the tiles of a tiled count and the row batches of a large
plane partition give the counts, codes and decisions of the same work done in one process.

A process that has imported JAX does not fork (its threads make a fork unsafe), and the test session imports
JAX, so each check runs in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from regioncount.engines._fork import can_fork, default_workers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: Put before a fresh interpreter's script by ``_run(..., count_forks=True)``: ``forks`` records each fork_map
#: call (items, workers, whether this process runs one item itself), which the engines make through the module.
COUNT_FORKS = """
from regioncount.engines import _fork
forks = []
real = _fork.fork_map
def counted(fn, items, workers, here=None):
    items = list(items)
    forks.append((len(items), workers, here is not None))
    return real(fn, items, workers, here=here)
_fork.fork_map = counted
"""


def _run(code: str, count_forks: bool = False) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    code = (COUNT_FORKS if count_forks else "") + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _forks() -> None:
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("worker processes are forked; this platform cannot fork")


@pytest.mark.parametrize(
    "settings, seed",
    [
        # past BATCH at an op boundary: every batch of 64 regions on the workers
        ("_driver.BATCH, _driver.PARALLEL_MIN = 64, 0", 3),
        # the mid-sized cut (_fork.mid_cuts): four batches, two jobs of two, one on a child and one here at once
        ("_fork.MID_MIN = 16", 5),
    ],
    ids=["batches", "mid-sized"],
)
def test_batches_on_worker_processes_equal_batches_run_here(settings, seed):
    """Batches run on forked workers (and on this process beside them) give the vertices, maps, codes, decisions
    and neighbours of the same batches run here one after the other."""
    _forks()
    out = _run(
        f"""
        import sys
        import numpy as np
        import regioncount as rc
        from regioncount.engines import _fork
        from regioncount.engines._plane import _driver
        assert "jax" not in sys.modules
        net = rc.random_mlp(2, [16, 16, 16], seed={seed}, init="torch")
        box = rc.Box(-2, 2, 2)
        _fork.MID_MIN = 10**9
        one = rc.partition_plane(net, box)  # one store, never cut
        {settings}
        runs = {{}}
        for w in (1, 2):
            _driver.WORKERS = w
            ticks = []
            p = rc.partition_plane(net, box, progress=lambda d, t: ticks.append(d))
            runs[w] = (p, ticks)
        # forked with two workers only, each time one batch in this process
        assert forks and all(n >= 2 and w == 2 and here for n, w, here in forks), forks
        (a, ta), (b, tb) = runs[1], runs[2]
        assert a.n_regions == b.n_regions == one.n_regions > 64 * 4, a.n_regions
        assert np.array_equal(a.code_bytes(), b.code_bytes())
        assert np.array_equal(np.unique(one.code_bytes(), axis=0), np.unique(a.code_bytes(), axis=0))
        assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.maps, b.maps)
        assert a.linear_regions() == b.linear_regions() == one.linear_regions()
        for k in ("predicates", "exact_predicates", "assumed"):
            assert a.stats[k] == b.stats[k], k
        # each batch takes its own tag range wherever it runs: the same edge tags, the same neighbours
        assert np.array_equal(a.edge_tags, b.edge_tags)
        assert np.array_equal(a.adjacency(), b.adjacency())
        assert ta[-1] == tb[-1] and tb == sorted(tb)
        # the cap holds as it does here: a partition past max_regions is refused
        try:
            rc.partition_plane(net, box, max_regions=a.n_regions - 1)
        except rc.MemoryCapError:
            pass
        else:
            raise AssertionError("max_regions not enforced with worker processes")
        print("ok")
        """,
        count_forks=True,
    )
    assert out.strip() == "ok"


def test_a_cut_space_store_on_a_worker_and_here_equals_it_run_here():
    """The space engine's mid-sized cut (_fork.mid_cuts, _space._driver._mid_cut): its jobs of batches on a forked worker
    and on this process at once give the polytopes, maps, codes and exact decisions of the same batches run here, and the
    regions, neighbours and linear regions of one store never cut; the hyperplane ids too are those of the batches
    run apart (each batch takes its own id range wherever it runs)."""
    _forks()
    out = _run(
        """
        import sys
        import numpy as np
        import regioncount as rc
        from regioncount.engines import _fork
        from regioncount.engines._space import _driver
        from regioncount.networks import walk_widths
        assert "jax" not in sys.modules
        net = rc.random_mlp(3, [8, 8, 8], seed=2, init="torch")
        box = rc.Box(-2, 2, 3)
        _fork.MID_MIN = 10**9
        one = rc.partition_space(net, box)  # one store, never cut
        _fork.MID_MIN = 16
        runs = {}
        for w in (1, 2):
            _driver.WORKERS = w
            ticks = []
            p = rc.partition_space(net, box, progress=lambda d, t: ticks.append(d))
            runs[w] = (p, ticks)
        assert forks == [(2, 2, True)], forks  # one job on a child, one here; none with one worker
        (a, ta), (b, tb) = runs[1], runs[2]
        assert a.n_regions == b.n_regions == one.n_regions > 100, a.n_regions
        assert np.array_equal(a.code_bytes(), b.code_bytes())
        assert np.array_equal(np.unique(one.code_bytes(), axis=0), np.unique(a.code_bytes(), axis=0))
        for x, y in [(a.vertices, b.vertices), (a.offsets, b.offsets), (a.maps, b.maps), (a.incidence, b.incidence)]:
            assert np.array_equal(x, y)
        assert np.array_equal(a.facet_planes, b.facet_planes)
        assert np.array_equal(a.facet_ids, b.facet_ids)
        assert a.exact_decisions == b.exact_decisions
        assert np.array_equal(a.adjacency(), b.adjacency())
        assert a.linear_regions() == b.linear_regions() == one.linear_regions()
        assert len(a.adjacency()) == len(one.adjacency())
        assert np.isclose(a.volumes.sum(), 64.0) and np.isclose(b.volumes.sum(), 64.0)
        total = len(walk_widths(rc.lower(net)))
        for t in (ta, tb):  # progress never goes back and ends at the number of ops
            assert t == sorted(t) and t[-1] == total, t
        try:
            rc.partition_space(net, box, max_regions=a.n_regions - 1)
        except rc.MemoryCapError:
            pass
        else:
            raise AssertionError("max_regions not enforced with a cut store")
        print("ok")
        """,
        count_forks=True,
    )
    assert out.strip() == "ok"


def test_tiles_on_worker_processes_equal_tiles_run_here():
    _forks()
    out = _run(
        """
        import sys
        import regioncount as rc
        from regioncount.engines._tiles import count_tiled
        assert "jax" not in sys.modules
        net = rc.random_mlp(2, [24, 24], seed=1, init="torch")
        box = rc.Box(-2, 2, 2)
        here = count_tiled(net, box, 6, workers=1)
        there = count_tiled(net, box, 6, workers=2, keep=True)
        whole = rc.partition_plane(net, box)
        assert (there.regions, there.linear_regions, there.pieces) == (here.regions, here.linear_regions, here.pieces)
        assert there.regions == whole.n_regions and there.partition.n_regions == there.pieces
        try:
            count_tiled(net, box, 4, workers=2, max_regions=4)
        except rc.MemoryCapError:
            pass
        else:
            raise AssertionError("a tile's error in a worker was not raised here")
        print("ok")
        """
    )
    assert out.strip() == "ok"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator settings")
def test_a_worker_reuses_freed_memory_rather_than_fresh_pages():
    """keep_heap (each forked worker calls it): a 48 MB array made and freed 20 times takes fresh zeroed pages each
    time without it (past 32 MB glibc gives each array a mapping of its own, returned when freed) and its pages once
    with it, counted as the process's minor page faults; a forked worker's tile count is unchanged (the test
    above)."""
    out = _run(
        """
        import resource, sys
        import numpy as np
        from regioncount import _memory
        def faults():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(20):
                a = np.ones(6 << 20)
                del a
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        plain = faults()
        if not _memory.keep_heap():
            print("no glibc")
            sys.exit(0)
        faults()  # the heap grows once
        print(plain, faults())
        """
    )
    if out.strip() == "no glibc":
        pytest.skip("not glibc")
    plain, kept = (int(v) for v in out.split())
    assert kept * 8 < plain  # fresh pages each time, or none (huge pages would make both fewer)


def test_fork_map_results_errors_and_dead_workers():
    _forks()
    out = _run(
        """
        import os
        import pytest
        from regioncount.engines._fork import can_fork, fork_map, fork_pool_map

        def fail(x):
            if x == 2:
                raise ValueError("two")
            return x

        assert can_fork()
        assert sorted(fork_map(lambda x: x * x, range(5), 2)) == [(i, i * i) for i in range(5)]
        with pytest.raises(ValueError, match="two"):
            list(fork_map(fail, range(4), 2))
        with pytest.raises(RuntimeError, match="without a result"):
            list(fork_map(lambda x: os._exit(3), [1], 1))
        # children that run item after item: every item once, each on one of two children
        pids = sorted(fork_pool_map(lambda x: (x * x, os.getpid()), range(9), 2))
        assert [(i, r[0]) for i, r in pids] == [(i, i * i) for i in range(9)]
        assert len({r[1] for _, r in pids}) == 2 and os.getpid() not in {r[1] for _, r in pids}
        with pytest.raises(ValueError, match="two"):
            list(fork_pool_map(fail, range(6), 2))
        with pytest.raises(RuntimeError, match="without a result"):
            list(fork_pool_map(lambda x: os._exit(3) if x == 3 else x, range(6), 2))
        assert list(fork_pool_map(lambda x: x, [], 2)) == []
        # under a memory limit a child that still holds more than a quarter of its share after an item leaves, and
        # a fresh child takes the next item; one that holds little stays
        import numpy as np
        from regioncount import _memory

        keep = []

        def hold(x):
            keep.append(np.ones(150 * 2**20 // 8))  # 150 MB, resident and kept
            return os.getpid()

        _memory.set_rss_limit(_memory.rss_bytes() + 2 * 400 * 2**20)  # two children: 400 MB each, leave past 100 MB
        assert len({pid for _, pid in fork_pool_map(hold, range(4), 2)}) == 4
        assert len({pid for _, pid in fork_pool_map(lambda x: os.getpid(), range(6), 2)}) == 2
        _memory.set_rss_limit(None)
        print("ok")
        """
    )
    assert out.strip() == "ok"


#: Put before a fresh interpreter's script by :func:`_run_with_openblas`: ``setter`` and ``getter`` of the
#: OpenBLAS NumPy loaded, or the line "no openblas" and an early exit.
OPENBLAS = """
from regioncount import _blas

controls = _blas._controls()
if not controls:
    print("no openblas")
    raise SystemExit(0)
setter, getter = controls[0]
"""


def _run_with_openblas(code: str) -> str:
    """:func:`_run` of ``code`` after :data:`OPENBLAS`; skips where NumPy does not use OpenBLAS."""
    out = _run(OPENBLAS + textwrap.dedent(code))
    if out.strip() == "no openblas":
        pytest.skip("NumPy here does not use OpenBLAS")
    return out


def test_workers_and_this_process_run_one_blas_thread_while_they_run():
    """OpenBLAS's thread per core in every worker would put two busy threads on each core (regioncount._blas):
    while fork_map's children run, this process and they use one, and this process gets its count back after."""
    _forks()
    out = _run_with_openblas(
        """
        from regioncount.engines._fork import fork_map

        setter(3)
        seen = []
        for item, n in fork_map(lambda x: int(getter()), range(3), 2, here=lambda x: int(getter())):
            seen.append((n, int(getter())))
        assert seen == [(1, 1)] * 3, seen
        assert int(getter()) == 3
        with _blas.one_thread():
            assert int(getter()) == 1
        print("ok", int(getter()))
        """
    )
    assert out.strip() == "ok 3"


def test_a_partition_runs_on_one_blas_thread_and_gives_the_count_back():
    """The engines' products on one BLAS thread wherever they run: the floats of a partition do not depend on
    the thread count NumPy's OpenBLAS started with (regioncount._blas)."""
    out = _run_with_openblas(
        """
        import numpy as np
        import regioncount as rc
        from regioncount.engines._plane import _driver

        seen = []
        solve = _driver._Engine.solve
        def watched(self, *a, **k):
            seen.append(int(getter()))
            return solve(self, *a, **k)
        _driver._Engine.solve = watched
        net = rc.random_mlp(2, [64, 64], seed=1, init="torch")
        parts = []
        for n in (1, 3):
            setter(n)
            parts.append(rc.partition_plane(net, rc.Box(-1.0, 1.0, 2)))
            assert int(getter()) == n
        assert set(seen) == {1}, seen
        assert np.array_equal(parts[0].vertices, parts[1].vertices)
        assert np.array_equal(parts[0].maps, parts[1].maps)
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_default_workers_reads_the_setting_then_the_environment(monkeypatch):
    monkeypatch.setenv("REGIONCOUNT_WORKERS", "3")
    if can_fork():
        assert default_workers() == 3 and default_workers(1) == 1
    else:
        assert default_workers() == 1


def _workers_in_a_pool_worker(_):
    from regioncount.engines._fork import can_fork, default_workers

    return can_fork(), default_workers(4)


def test_a_daemonic_pool_worker_does_not_fork():
    # the scan's pool workers are daemonic and may not have children: the plane engine and tiles run there in
    # one process (this once failed `regioncount scan` with "daemonic processes are not allowed to have children")
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        assert pool.map(_workers_in_a_pool_worker, [0]) == [(False, 1)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 1024, 46122])
def test_mid_cuts_cover_every_row_once_outer_batches_with_inner(n):
    from regioncount.engines._fork import MID_BATCHES, mid_cuts

    cuts, jobs = mid_cuts(n)
    assert cuts[0] == 0 and cuts[-1] == n and np.all(np.diff(cuts) > 0)
    nb = cuts.size - 1
    assert nb == min(MID_BATCHES, n)
    assert sorted(b for job in jobs for b in job) == list(range(nb))
    assert len(jobs) == min(2, nb) and max(np.diff(cuts)) - min(np.diff(cuts)) <= 1
    if nb == 4:  # the first and last quarters on one process, the middle two on the other
        assert jobs == [(0, 3), (1, 2)]
