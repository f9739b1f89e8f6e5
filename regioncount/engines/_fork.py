"""Work on forked processes of this machine: the tiles of a tiled count and the row batches of a large plane
partition use both cores (or every core there is) without pickling the network or importing anything again.

:func:`fork_map` runs ``fn(item)`` for each item in a fresh child forked from this process (copy on write: the
child sees the parent's state as it was at the fork), at most ``workers`` at a time, and yields
``(item, result)`` as they finish. A child sends its result back pickled through a pipe and leaves without the
interpreter's teardown; an exception it raises is sent back and raised here; a child that dies without a result
(killed, out of memory) raises :class:`RuntimeError` here instead of hanging. On any error, or an interrupt,
the children still running are terminated. :func:`fork_pool_map` does the same on children forked once, each
running item after item (warm memory: the tiles of a tiled count). A process that has imported JAX does not fork
(:func:`can_fork`). Each child gets its share of the resident-memory limit (:mod:`regioncount._memory`): what this
process holds now plus its part of what is left. The rule by which the plane and space engines cut a mid-sized
store for the workers is here too (:data:`MID_MIN`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from typing import cast

import numpy as np

from ..networks._ops import Residual

#: The mid-sized cut of the plane and space engines: the first time a store holds at least this many regions at
#: a top-level op boundary, with ops that split regions still to come (:func:`splits_regions`), it is cut into
#: :data:`MID_BATCHES` batches of equal size (:func:`mid_cuts`: cuts that depend on the count alone, so the
#: partition is the same wherever its batches run), paired into two jobs that run at once, one on a forked worker
#: and one in this process wherever there is a worker, so the later layers of a mid-sized count, where most of its
#: work lies, use every core from the cut on (a store of this size with a splitting op to come takes a few
#: milliseconds at least, about what starting a worker costs).
MID_MIN = 1 << 10
#: Batches of the mid-sized cut. Batch ``i`` and batch ``MID_BATCHES - 1 - i`` make a job: rows follow the plane
#: (children after their parent), and the work per row tends to grow or shrink along them (the torch 2->100x5
#: net's four quarters: 0.12, 0.14, 0.15 and 0.16 s), so the first and last quarters are about as much work as
#: the middle two, where two halves differ by a fifth.
MID_BATCHES = 4


def splits_regions(ops) -> bool:
    """Whether any of ``ops`` (residual bodies included) splits regions: every op but Affine does."""
    return any(splits_regions(o.body) if isinstance(o, Residual) else o.key != "affine" for o in ops)


def mid_cuts(n: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The mid-sized cut of ``n`` rows: the bounds ``(nb + 1,)`` of its batches, and its jobs (tuples of batch
    indices: the outer batches, then the inner ones)."""
    nb = max(1, min(MID_BATCHES, n))
    cuts = np.linspace(0, n, nb + 1).astype(np.int64)
    jobs: list[tuple[int, ...]] = [(b,) for b in range(nb)] if nb <= 2 else [(0, nb - 1), tuple(range(1, nb - 1))]
    return cuts, jobs


def run_here(eng, cuts: np.ndarray, run: Callable, ids: str, stride: int, first: int = 0) -> list:
    """The batches between ``cuts`` run in this process one after the other by ``run(b, lo, hi)``: their results,
    joined. Each takes the id range it takes on a worker: the engine's next free id (attribute ``ids``) is set
    ``(first + b) * stride`` past the ids taken, and past every batch's range at the end, so the partition is the
    same with any number of workers. The engine's ``pending`` count (the regions its cap sees beside the store)
    holds the batches not yet started."""
    eng.pending += int(cuts[-1] - cuts[0])
    base = getattr(eng, ids)
    out: list = []
    for b, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        eng.pending -= int(hi - lo)
        setattr(eng, ids, base + (first + b) * stride)
        out += run(b, int(lo), int(hi))
    setattr(eng, ids, base + (first + cuts.size - 1) * stride)
    return out


def run_job(eng, job: tuple, cuts: np.ndarray, run_batch: Callable) -> dict:
    """The batches ``job`` of a mid-sized cut (bounds ``cuts``), one after the other, by ``run_batch(k, b)`` (``k``:
    the batch's place in the job, ``b``: its index): their results by batch. The engine's ``pending`` count (the
    regions its cap sees beside the store) holds, while a batch runs, the batches of other jobs and the later
    ones of this job at their size now (each only grows), as it does where all run here one after the other."""
    rows = np.diff(cuts)
    eng.pending += int(rows.sum()) - int(rows[list(job)].sum())
    out = {}
    for k, b in enumerate(job):
        later = int(rows[list(job[k + 1 :])].sum())
        eng.pending += later
        out[b] = run_batch(k, b)
        eng.pending -= later
    return out


@contextlib.contextmanager
def restoring(obj, names):
    """Puts the attributes ``names`` of ``obj`` back as they were on leaving (lists and dicts as shallow copies of
    what they held): a batch run in this process beside forked ones leaves no more trace than theirs."""
    keep = {k: getattr(obj, k) for k in names}
    keep = {k: (type(v)(v) if isinstance(v, (list, dict)) else v) for k, v in keep.items()}
    try:
        yield
    finally:
        for k, v in keep.items():
            setattr(obj, k, v)


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether this process can fork workers: the platform forks, JAX is not loaded (its threads make a fork
    unsafe, and it says so at every fork), and this process is not itself a daemonic worker (a pool's worker,
    e.g. the scan's, or one of :func:`fork_map`'s children, may not have children); otherwise the process
    runs the work itself."""
    import multiprocessing as mp
    import sys

    return "fork" in mp.get_all_start_methods() and "jax" not in sys.modules and not mp.current_process().daemon


def default_workers(setting: int | None = None) -> int:
    """Workers for forked work: ``setting`` if given, else ``REGIONCOUNT_WORKERS`` if set, else :func:`cores`;
    1 where this process cannot fork (:func:`can_fork`)."""
    if not can_fork():
        return 1
    want = setting
    if want is None:
        env = os.environ.get("REGIONCOUNT_WORKERS", "").strip()
        if env:
            try:
                want = int(env)
            except ValueError:
                want = None
    if want is None:
        want = cores()
    return max(1, int(want))


def fork_map(fn: Callable, items: Iterable, workers: int, here: Callable | None = None) -> Iterator[tuple]:
    """``(item, fn(item))`` for each item, computed in forked children, at most ``workers`` at once, in the
    order they finish (module docstring).

    ``here``: the last item is computed in this process by ``here(item)`` (while the first children run: this
    process counts as one of the ``workers``, with a child's share of the memory limit), not in a child; its
    memory is warm, and its result is not sent through a pipe."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    from .. import _blas, _memory

    ctx = mp.get_context("fork")
    todo = list(items)
    mine = [todo.pop()] if here is not None and len(todo) > 1 else []
    if not mine:
        here = None
    workers = max(1, min(int(workers) - len(mine), len(todo)))
    limit = _share(workers + len(mine))[1]
    running: dict = {}
    # one BLAS thread here and in the children while they run: the processes are the parallel work (see _blas)
    with _blas.one_thread():
        try:
            while todo or running:
                while todo and len(running) < workers:
                    item = todo.pop(0)
                    r, w = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_child, args=(fn, item, w, limit), daemon=True)
                    p.start()
                    w.close()
                    running[r] = (item, p)
                if mine:  # the first children run: now this process's own item, within its share of the limit
                    item = mine.pop()
                    whole = _memory.LIMIT
                    _memory.set_rss_limit(None if limit is None else max(limit, _memory.rss_bytes() + 1))
                    try:
                        out = cast(Callable, here)(item)
                    finally:
                        _memory.set_rss_limit(whole)
                    yield item, out
                    continue
                for ready in wait(list(running)):
                    item, p = running.pop(ready)
                    conn = cast(Connection, ready)  # the keys of running are the read ends
                    try:
                        ok, out = conn.recv()
                    except EOFError:
                        ok, out = False, _ended(p)
                    finally:
                        conn.close()
                        p.join()
                    if not ok:
                        raise out
                    yield item, out
        finally:
            _stop(running)


def fork_pool_map(fn: Callable, items: Iterable, workers: int) -> Iterator[tuple]:
    """:func:`fork_map` on ``workers`` children forked once, each running item after item (the next item goes to
    the first child free), rather than a fresh child per item: a child's memory stays warm from one item to the
    next. A fresh child pays a page fault for every page its arrays touch (on a dense tile of the Thm 4.4
    Transformer twice the in-process faults and about 2% more CPU) and a few milliseconds to fork.

    Under a resident-memory limit each child has its share, as in :func:`fork_map`; a child whose memory after an
    item stays above a quarter of its share (the heap keeps what an item freed) leaves, and a fresh child takes
    the next item, so an item never starts with more than that quarter held beside it. Errors, dead children
    and interrupts are handled as in :func:`fork_map`."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    from .. import _blas

    ctx = mp.get_context("fork")
    todo = list(items)
    if not todo:
        return
    workers = max(1, min(int(workers), len(todo)))
    held, limit = _share(workers)
    retire = None if limit is None else held + (limit - held) // 4
    nxt = 0
    running: dict = {}  # the parent's end of each child's pipe -> (index of its item, child)

    def start(k: int) -> None:
        mine, theirs = ctx.Pipe(duplex=True)
        p = ctx.Process(target=_pool_child, args=(fn, todo, theirs, limit, retire), daemon=True)
        p.start()
        theirs.close()
        mine.send(k)
        running[mine] = (k, p)

    with _blas.one_thread():
        try:
            for _ in range(workers):
                start(nxt)
                nxt += 1
            while running:
                for ready in wait(list(running)):
                    conn = cast(Connection, ready)
                    k, p = running.pop(conn)
                    try:
                        ok, out, leaving = conn.recv()
                    except EOFError:
                        p.join()
                        conn.close()
                        raise _ended(p) from None
                    if not ok:
                        running[conn] = (k, p)  # still running: terminated below
                        raise out
                    # the next item goes out before this one's result is used: the child works on meanwhile
                    if nxt < len(todo) and not leaving:
                        conn.send(nxt)
                        running[conn] = (nxt, p)
                    else:
                        if not leaving:
                            conn.send(None)
                        conn.close()
                        p.join()
                        if nxt < len(todo):
                            start(nxt)
                    if nxt < len(todo):
                        nxt += 1
                    yield todo[k], out
        finally:
            _stop(running)


def _share(n: int) -> tuple[int, int | None]:
    """This process's resident memory now and each of ``n`` workers' share of the limit: what it holds plus its
    part of what is left (None without a limit)."""
    from .. import _memory

    if _memory.LIMIT is None:
        return 0, None
    held = _memory.rss_bytes()
    return held, held + max(1, (_memory.LIMIT - held) // n)


def _ended(p) -> RuntimeError:
    """The error for a child that closed its pipe without a result (killed, out of memory)."""
    return RuntimeError(f"a worker process ended without a result (exit status {p.exitcode})")


def _stop(running: dict) -> None:
    """Terminate the children still running (``pipe end -> (item, child)``) and close their pipes."""
    for _, p in running.values():
        p.terminate()
    for conn, (_, p) in running.items():
        p.join()
        conn.close()


def _pool_child(fn: Callable, items: list, conn, limit, retire) -> None:
    """A child of :func:`fork_pool_map`: ``fn(items[k])`` for each index ``k`` it receives, until None, or until
    its memory after an item stays above ``retire`` (it says so with that item's result, and leaves)."""
    from .. import _memory

    def serve() -> None:
        while (k := conn.recv()) is not None:
            msg = _result(fn, items[k])
            leaving = retire is not None and _memory.rss_bytes() > retire
            _send(conn, msg, leaving)
            if leaving:
                return

    _in_child(conn, limit, serve)


def _child(fn: Callable, item, conn, limit) -> None:
    """A child of :func:`fork_map`: ``fn(item)``, sent back."""
    _in_child(conn, limit, lambda: _send(conn, _result(fn, item)))


def _result(fn: Callable, item) -> tuple:
    """``(True, fn(item))``, or ``(False, the exception it raised)`` for the parent to raise."""
    try:
        return True, fn(item)
    except BaseException as e:  # noqa: BLE001  (sent to the parent and raised there)
        return False, e


def _send(conn, msg: tuple, *extra) -> None:
    """``msg + extra`` through the pipe; a result or exception that does not pickle is sent as an error."""
    try:
        conn.send(msg + extra)
    except Exception as e:  # noqa: BLE001  (an exception or result that does not pickle)
        conn.send((False, RuntimeError(f"a worker process could not send its result: {type(e).__name__}: {e}")) + extra)


def _in_child(conn, limit, body: Callable[[], None]) -> None:
    """A forked child's life: its share ``limit`` of the memory limit, ``body()``, then an exit without the
    interpreter's teardown (the parent's finalisers and buffers are not the child's). A child that fails outside
    ``body``'s own error handling exits with status 1: the parent sees the closed pipe."""
    from .. import _memory

    code = 0
    try:
        _memory.set_rss_limit(limit)
        _memory.keep_heap()  # a worker's rounds reuse freed memory rather than fresh pages
        body()
    except BaseException:  # noqa: BLE001  (the parent sees the closed pipe)
        code = 1
    finally:
        try:
            conn.close()
        finally:
            os._exit(code)
