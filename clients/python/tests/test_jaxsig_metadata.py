"""jax_compilation_cache_include_metadata_in_key in canonical mode: names and
source locations reach the key only when the user asks for it, as in JAX's own
key. The executable carries them (its HLO metadata: profiles, error messages),
so with the flag set a program must not get the executable of a copy under
other names."""

from __future__ import annotations

import pytest

import cachesvc._jaxsig as cj
from cachesvc.client import Client

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")


def _keys(client: Client, scope: str) -> tuple[str, str]:
    """(JAX's own key, the server's key) of one real compile of a function
    whose only difference from the other scope's is its named_scope."""
    from jax._src import cache_key, compiler

    def f(x):
        with jax.named_scope(scope):
            return jax.numpy.sin(x) * 2 + 1

    module = jax.jit(f).lower(np.ones(8, np.float32)).compiler_ir("stablehlo")
    devices = np.array(jax.devices()[:1])
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    backend = jax.devices()[0].client
    jax_key = cache_key.get(module, devices, opts, backend, "zstandard")
    sig = cj._xla_signature(module, devices, opts, backend, ("zstandard",), {})
    return jax_key, client.key(sig).key


@pytest.mark.parametrize("include_metadata,jax_differs,ours_differ", [
    (False, False, False),  # canonical mode's point: names and locations are not the program
    (True, True, True),     # asked for: as JAX's own key does
])
def test_metadata_in_key(shared_server, include_metadata, jax_differs, ours_differ):
    from jax._src import config as jax_config

    with jax_config.compilation_cache_include_metadata_in_key(include_metadata), \
            Client(shared_server.url, namespace="jaxsig-metadata") as c:
        jax_a, ours_a = _keys(c, "alpha")
        jax_b, ours_b = _keys(c, "beta")
    assert (jax_a != jax_b) == jax_differs, (jax_a, jax_b)
    assert (ours_a != ours_b) == ours_differ, \
        f"include_metadata_in_key={include_metadata}: our keys {ours_a[:12]} and {ours_b[:12]}, " \
        f"want {'different' if ours_differ else 'equal'}"
