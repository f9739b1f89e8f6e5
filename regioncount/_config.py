"""Process-wide numerical settings: every engine computes in float64."""

import jax

jax.config.update("jax_enable_x64", True)
