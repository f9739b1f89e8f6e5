import jax

# regioncount computes in float64 inside its own entry points (regioncount/_config.py x64) and leaves the
# process's jax_enable_x64 alone: the suite runs with JAX's default (32 bits), so every test checks that
# regioncount does not depend on the caller's setting.
# strict promotion: an implicit mix of dtypes (int32 code with uint64 key, float32 with float64) is an error
jax.config.update("jax_numpy_dtype_promotion", "strict")
# and no implicit rank promotion (broadcasting a (n,) against a (n, 1) by accident)
jax.config.update("jax_numpy_rank_promotion", "raise")
