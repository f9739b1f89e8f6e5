"""Run independent pieces of work (tiles of an exact count, chunks of a sampled one) as Dask tasks.

Dask (``dask[distributed]``, the optional extra ``dask``) is imported only here and only when a client is
asked for, so everything else works without it. Tasks get the network once per worker (scattered), return
small summaries, and are collected as they finish, so the caller holds one result at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .._errors import RegionCountError


def _distributed():
    try:
        import distributed
    except ImportError:
        raise RegionCountError(
            "running on a Dask cluster needs dask[distributed]: pip install 'regioncount[dask]'"
        ) from None
    return distributed


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, *, processes: bool = True):
    """A ``distributed.Client``: on the running scheduler at ``scheduler`` (an address such as
    ``tcp://host:8786``), or on a new local cluster of ``workers`` single-threaded workers (processes, or
    threads with ``processes=False``) that is shut down on exit."""
    if (workers is None) == (scheduler is None):
        raise ValueError("give exactly one of workers= and scheduler=")
    dd = _distributed()
    if scheduler is not None:
        try:
            client = dd.Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise RegionCountError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        except (ValueError, TypeError) as e:  # distributed's address parser: "missing port", unknown protocol
            raise RegionCountError(
                f"{scheduler!r} is not a Dask scheduler address ({e}): give one such as tcp://host:8786"
            ) from None
        with client:
            yield client
        return
    assert workers is not None  # exactly one of workers= and scheduler= (checked above)
    if workers < 1:
        raise RegionCountError(f"--workers must be at least 1, got {workers}")
    with (
        dd.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=None
        ) as cluster,
        dd.Client(cluster) as client,
    ):
        yield client


def n_workers(client) -> int:
    """Workers the client's cluster has now (at least 1)."""
    return max(1, len(client.scheduler_info().get("workers", {})))


def map_tasks(client, fn: Callable, net, domain, arglist: list[tuple], kwargs: dict) -> Iterator:
    """``fn(net, domain, *args, **kwargs)`` for each ``args`` in ``arglist`` as Dask tasks; yields the
    results in the order they finish. The network and domain are sent to each worker once. On an error
    the remaining tasks are cancelled and the task's exception is raised here."""
    dd = _distributed()
    net_f, dom_f = client.scatter([net, domain], broadcast=True)
    futures = [client.submit(fn, net_f, dom_f, *args, pure=False, **kwargs) for args in arglist]
    try:
        for fut in dd.as_completed(futures):
            yield fut.result()
            fut.release()
    finally:
        client.cancel(futures)
