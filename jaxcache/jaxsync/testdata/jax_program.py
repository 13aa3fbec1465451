"""Stock JAX with a persistent cache dir: compile a few programs, report.

Usage: python jax_program.py CACHE_DIR
Prints one JSON line: {"backend_compiles": N, "cache_hits": N, "results": [...]}.
No cachesvc code: this is what a job that cannot import our client runs.

backend_compiles counts real XLA compiles: calls of
jax._src.compiler.backend_compile_and_load (JAX 0.10.2). The duration event
/jax/core/compile/backend_compile_duration is not usable for this in 0.10.2:
it wraps compile_or_get_cached and so also fires on persistent-cache hits.
"""
import json
import sys

import jax
import jax.numpy as jnp
from jax import monitoring
from jax._src import compiler

counts = {"backend_compiles": 0, "cache_hits": 0}
_real_compile = compiler.backend_compile_and_load


def counting_compile(*args, **kwargs):
    counts["backend_compiles"] += 1
    return _real_compile(*args, **kwargs)


compiler.backend_compile_and_load = counting_compile


def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        counts["cache_hits"] += 1


monitoring.register_event_listener(on_event)

jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@jax.jit
def mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


@jax.jit
def norm(x):
    return (x - x.mean()) / (x.std() + 1e-6)


@jax.jit
def step(x):
    return jnp.cumsum(jnp.sin(x) * 3.0)


x = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8) / 64
w1 = jnp.ones((8, 16), jnp.float32) / 8
w2 = jnp.ones((16, 4), jnp.float32) / 16
results = [
    float(mlp(x, w1, w2).sum()),
    float(norm(x).sum()),
    float(step(jnp.arange(10.0)).sum()),
]
print(json.dumps({**counts, "results": results}))
