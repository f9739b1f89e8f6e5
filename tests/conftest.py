import jax

# regioncount computes in float64 inside its own entry points (regioncount/_config.py x64) and leaves the
# process's jax_enable_x64 alone: the suite runs with JAX's default (32 bits), so every test checks that
# regioncount does not depend on the caller's setting.
# strict promotion: an implicit mix of dtypes (int32 code with uint64 key, float32 with float64) is an error
jax.config.update("jax_numpy_dtype_promotion", "strict")
# and no implicit rank promotion (broadcasting a (n,) against a (n, 1) by accident)
jax.config.update("jax_numpy_rank_promotion", "raise")


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


_TRIM_ABOVE = 3 << 29  # 1.5 GiB: the CLI guard trips at 2.4 GiB of the default 4 GiB cap


def pytest_runtest_teardown(item):
    """Give memory back between tests once the suite's one process holds more than 1.5 GiB.

    The CLI tests run the commands in this process, and the commands' --memory-cap measures the whole
    process's resident memory (as it should for a command run on its own). What earlier tests left behind
    (JAX's compiled executables, freed but unreturned heap) is not theirs: drop JAX's caches, collect, and
    ask glibc to return free pages, so each command starts near what a fresh process holds."""
    if _resident_bytes() < _TRIM_ABOVE:
        return
    import ctypes
    import gc

    jax.clear_caches()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
