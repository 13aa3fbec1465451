"""A JAX program the tests run in separate processes.

Usage: python jaxprog.py <program> [--mode canonical|jax-key] [--no-cache]

Settings come from CACHESVC_URL / CACHESVC_NAMESPACE / CACHESVC_RUN. The last
stdout line is a JSON report: XLA compile counts, JAX cache-hit events, the
backend's counters, digests of the results and timings.

Counting compiles: in jax 0.10.2 the duration event
``/jax/core/compile/backend_compile_duration`` wraps ``compile_or_get_cached``
and so fires on persistent-cache hits too. Real XLA compiles are therefore
``backend_compile events - /jax/compilation_cache/cache_hits events``; the
report also counts calls of ``compiler.backend_compile_and_load`` directly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import monitoring

COUNTS = {"backend_compile_events": 0, "backend_compile_secs": 0.0, "cache_hits": 0, "xla_compiles": 0}
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


def _on_duration(event: str, duration: float, **kw: object) -> None:
    if event == BACKEND_COMPILE:
        COUNTS["backend_compile_events"] += 1
        COUNTS["backend_compile_secs"] += duration


def _on_event(event: str, **kw: object) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        COUNTS["cache_hits"] += 1


monitoring.register_event_duration_secs_listener(_on_duration)
monitoring.register_event_listener(_on_event)

from jax._src import compiler as _compiler  # noqa: E402

_orig_compile = _compiler.backend_compile_and_load


def _counting_compile(*a, **k):
    COUNTS["xla_compiles"] += 1
    return _orig_compile(*a, **k)


_compiler.backend_compile_and_load = _counting_compile


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(arrays):
        a = np.asarray(leaf)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def real_compiles() -> int:
    return COUNTS["backend_compile_events"] - COUNTS["cache_hits"]


# ---- programs -------------------------------------------------------------------

def init_mlp(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((m, n), dtype=np.float32) / np.sqrt(m)),
             jnp.asarray(np.zeros((n,), np.float32))) for m, n in zip(sizes[:-1], sizes[1:])]


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    logits = mlp(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    new = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return new, loss


def prog_mlp(report: dict) -> None:
    """A small MLP training loop plus a handful of other jitted functions."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((64, 32), dtype=np.float32))
    labels = rng.integers(0, 10, 64)
    y = jnp.asarray(np.eye(10, dtype=np.float32)[labels])
    params = init_mlp([32, 128, 128, 10])
    t0 = time.perf_counter()
    params, loss = train_step(params, x, y)
    jax.block_until_ready(loss)
    report["first_step_secs"] = time.perf_counter() - t0
    losses = [float(loss)]
    for _ in range(4):
        params, loss = train_step(params, x, y)
        losses.append(float(loss))
    others = [
        jax.jit(lambda a: jnp.sort(a, axis=-1))(x),
        jax.jit(lambda a: jnp.cumsum(a, axis=0))(x),
        jax.jit(lambda a: jax.nn.softmax(a @ a.T))(x),
        jax.jit(jax.vmap(lambda v: jnp.linalg.norm(v)))(x),
        jax.jit(lambda a: jax.lax.fori_loop(0, 10, lambda i, c: c * 0.9 + jnp.sin(c), a))(x),
        jax.jit(lambda a: jnp.fft.rfft(a, axis=-1).real)(x),
    ]
    report["losses"] = losses
    report["digest"] = digest(params, losses, others)


def prog_canonical(report: dict) -> None:
    """f, a renamed copy g and an equivalent lambda; then other dtype/shape."""
    x = np.arange(64, dtype=np.float32).reshape(8, 8) / 64

    def f(a, b):
        return jnp.tanh(a @ b) * 2.0 + jnp.sum(a, axis=0)

    def g(p, q):
        return jnp.tanh(p @ q) * 2.0 + jnp.sum(p, axis=0)

    h = lambda u, v: jnp.tanh(u @ v) * 2.0 + jnp.sum(u, axis=0)  # noqa: E731

    steps = {}
    outs = {}
    for name, fn, arg in [("f", f, x), ("g", g, x), ("lambda", h, x),
                          ("f_float16", f, x.astype(np.float16)),
                          ("f_shape", f, np.ones((4, 4), np.float32))]:
        before = real_compiles()
        outs[name] = np.asarray(jax.jit(fn)(arg, arg))
        steps[name] = real_compiles() - before
    report["compiles_per_call"] = steps
    report["same_result"] = bool(np.array_equal(outs["f"], outs["g"]) and np.array_equal(outs["f"], outs["lambda"]))
    report["digest"] = digest([outs[k] for k in sorted(outs)])


def prog_sharded(report: dict) -> None:
    """Eight CPU devices, a 4x2 mesh, sharded arrays and a sharded train step."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    assert jax.device_count() == 8, jax.devices()
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    rng = np.random.default_rng(2)
    x = jax.device_put(rng.standard_normal((64, 32), dtype=np.float32), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(rng.standard_normal((32, 16), dtype=np.float32), NamedSharding(mesh, P(None, "model")))

    @jax.jit
    def step(w, x):
        def loss(w):
            return jnp.mean((jnp.tanh(x @ w)) ** 2)
        l, gw = jax.value_and_grad(loss)(w)
        return w - 0.1 * gw, l

    losses = []
    for _ in range(3):
        w, l = step(w, x)
        losses.append(float(l))
    y = jax.jit(lambda a: jnp.sum(a, axis=0), out_shardings=NamedSharding(mesh, P("model")))(w)
    report["shardings"] = str(w.sharding.spec)
    report["losses"] = losses
    report["digest"] = digest(w, y, losses)


def prog_numerics(report: dict) -> None:
    """Programs whose results change with code-generation settings (fast math,
    x64): a hit across settings shows as another digest. Settings from the
    environment: JAXPROG_COMPILER_OPTIONS (JSON, every jit's compiler_options)
    and JAXPROG_LATE_XLA_FLAGS (XLA_FLAGS set after XLA has read it: ignored
    by XLA, seen by the keys)."""
    late = os.environ.get("JAXPROG_LATE_XLA_FLAGS")
    if late is not None:
        jax.devices()  # the backend reads XLA_FLAGS here, once
        os.environ["XLA_FLAGS"] = late
    opts = json.loads(os.environ.get("JAXPROG_COMPILER_OPTIONS") or "null")
    rng = np.random.default_rng(4)
    x = rng.standard_normal(4099).astype(np.float32)

    def transcendental(a):
        return jnp.exp(a), jnp.log1p(jnp.abs(a)), jnp.tanh(a), jax.nn.gelu(a)

    def random_normal(seed):
        return jax.random.normal(jax.random.key(seed), (1000,))

    outs = [jax.jit(transcendental, compiler_options=opts)(x),
            jax.jit(random_normal, compiler_options=opts)(np.uint32(7))]
    report["digest"] = digest(outs)


def prog_outage(report: dict) -> None:
    """Compiles in two phases; between them the test kills the server."""
    go = os.environ["CACHESVC_TEST_GO_FILE"]
    ready = os.environ["CACHESVC_TEST_READY_FILE"]
    rng = np.random.default_rng(3)
    params = init_mlp([16, 32, 4])
    x = jnp.asarray(rng.standard_normal((32, 16), dtype=np.float32))
    y = jnp.asarray(np.eye(4, dtype=np.float32)[rng.integers(0, 4, 32)])
    losses = []
    params, loss = train_step(params, x, y)
    losses.append(float(loss))
    with open(ready, "w") as f:
        f.write("phase1 done\n")
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the go file")
        time.sleep(0.05)
    # Phase 2: new shapes force new compiles while the server is gone.
    for n in (8, 24, 40):
        xs, ys = x[:n], y[:n]
        params, loss = train_step(params, xs, ys)
        losses.append(float(loss))
    for _ in range(3):
        params, loss = train_step(params, x, y)
        losses.append(float(loss))
    report["losses"] = losses
    report["digest"] = digest(params, losses)


PROGRAMS = {"mlp": prog_mlp, "canonical": prog_canonical, "sharded": prog_sharded, "outage": prog_outage,
            "numerics": prog_numerics}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("program", choices=sorted(PROGRAMS))
    ap.add_argument("--mode", default=None)
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--leases", action="store_true", help="compile under leases (one compile per fleet)")
    ap.add_argument("--prefetch", metavar="RUN", help="warm the in-process view from RUN's manifest first")
    ap.add_argument("--local-dir", help="local directory tier in front of the server")
    ap.add_argument("--sync-uploads", action="store_true", help="write entries inside put (no background thread)")
    ap.add_argument("--dead-reports", action="store_true",
                    help="send reports of unloadable entries to a port where nothing listens")
    ap.add_argument("--no-write", action="store_true",
                    help="JAX writes nothing (its min compile time set out of reach), like a process other than 0")
    args = ap.parse_args()
    backend = None
    report: dict = {"program": args.program}
    if not args.no_cache:
        import cachesvc.jax
        backend = cachesvc.jax.install(mode=args.mode, timeout=args.timeout, breaker_cooldown=5.0,
                                       leases=args.leases or None, local_dir=args.local_dir,
                                       background_uploads=not args.sync_uploads,
                                       min_compile_time_secs=1e9 if args.no_write else 0.0)
        if args.dead_reports and backend is not None:
            import socket

            from cachesvc import Client
            with socket.socket() as sk:  # a free port, closed again: connections are refused
                sk.bind(("127.0.0.1", 0))
                dead = f"http://127.0.0.1:{sk.getsockname()[1]}"
            backend.client.report = Client(dead, retries=0).report
        if args.prefetch:
            report["prefetched"] = cachesvc.jax.prefetch(args.prefetch)
    t0 = time.perf_counter()
    PROGRAMS[args.program](report)
    report["wall_secs"] = time.perf_counter() - t0
    if backend is not None:
        report["flushed"] = backend.flush(120)  # background uploads done before the counters are read
    report.update(COUNTS)
    report["real_compiles"] = real_compiles()
    report["stats"] = backend.stats() if backend is not None else {}
    report["local_passthrough_keys"] = bool(backend is not None and backend._passthrough_plugin)
    sys.stdout.flush()
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
