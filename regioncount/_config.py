"""Process-wide JAX settings, applied without importing JAX.

x64 policy: regioncount computes in float64 everywhere, so it switches JAX's ``jax_enable_x64`` on for the
whole process (default dtypes of every JAX array in it become 64-bit). It does so when JAX is first imported
in the process, or at once if JAX was already imported when regioncount was; ``import regioncount`` itself
never imports JAX, so the bounds, the NumPy engines and ``--help`` start without it.

The same hook registers regioncount's network classes as JAX pytrees (:func:`when_jax_imported`): a network
built before JAX is imported still passes through ``jax.jit`` afterwards.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

#: Memory cap (bytes) of a run when none is given: the sample engine's distinct-code table, the plane engine's
#: regions. Here, not in an engine, so that the NumPy path reads it without importing JAX.
DEFAULT_MEMORY_CAP = 4 * 2**30

_pending: list[Callable[[ModuleType], None]] = []


def when_jax_imported(callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(jax)`` now if JAX is imported, else right after the first ``import jax``."""
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "tree_util"):
        callback(jax)
        return
    _pending.append(callback)
    if not any(isinstance(f, _JaxImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _JaxImportHook())


def _run_pending(jax: ModuleType) -> None:
    while _pending:
        _pending.pop(0)(jax)


class _LoaderThenCallbacks:
    """Wraps JAX's own loader (importlib's loader protocol): executes the module, then runs the callbacks."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _run_pending(module)


class _JaxImportHook:
    """A one-shot ``sys.meta_path`` finder for the top-level ``jax`` package; it removes itself when asked."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "jax":
            return None
        sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:  # ask the other finders, in order, as the import system would
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LoaderThenCallbacks(spec.loader)
        return spec


def _enable_x64(jax: ModuleType) -> None:
    jax.config.update("jax_enable_x64", True)


when_jax_imported(_enable_x64)
