import jax

# float64 everywhere, as regioncount sets for the process (regioncount/_config.py); set here too so a test
# module that imports jax before regioncount sees it from the start
jax.config.update("jax_enable_x64", True)
# strict promotion: an implicit mix of dtypes (int32 code with uint64 key, float32 with float64) is an error
jax.config.update("jax_numpy_dtype_promotion", "strict")
