"""One process of a two-process jax.distributed job on CPU, for the tests.

Usage: python jaxmulti.py <process id> <coordinator port> [--mode M]

Settings come from CACHESVC_URL / CACHESVC_NAMESPACE / CACHESVC_RUN. The
process installs cachesvc.jax (JAX writes every compile: min compile time
0), runs one program sharded over both processes' devices and prints a JSON
report as its last stdout line: XLA compiles, the backend's counters and the
result.
"""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np
from jax._src import compiler as _compiler

COUNTS = {"xla_compiles": 0}
_orig = _compiler.backend_compile_and_load


def _counting(*a, **k):
    COUNTS["xla_compiles"] += 1
    return _orig(*a, **k)


_compiler.backend_compile_and_load = _counting


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("process_id", type=int)
    ap.add_argument("port", type=int)
    ap.add_argument("--mode", default="canonical")
    args = ap.parse_args()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{args.port}", num_processes=2,
                               process_id=args.process_id, initialization_timeout=120)
    import cachesvc.jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    backend = cachesvc.jax.install(mode=args.mode, background_uploads=False, min_compile_time_secs=0.0)
    mesh = Mesh(np.array(jax.devices()), ("d",))
    n = len(jax.devices())
    # The input comes from host arrays (no jit): the only compile is step's.
    xs = jax.make_array_from_callback((n * 4, 8), NamedSharding(mesh, P("d")),
                                      lambda idx: np.arange(32, dtype=np.float32).reshape(4, 8) + 1)
    step = jax.jit(lambda x: jax.numpy.tanh(x * 3.0).sum(axis=0), out_shardings=NamedSharding(mesh, P()))
    out = step(xs)
    result = np.asarray(out.addressable_data(0)).round(4).tolist()
    report = {"process": jax.process_index(), "devices": n, "result": result, **COUNTS,
              "stats": backend.stats() if backend is not None else {}}
    jax.distributed.shutdown()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
