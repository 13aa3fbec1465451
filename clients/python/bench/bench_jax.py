"""Measures the JAX integration: MLP compile time cold vs warm, and the client's
overhead per lookup on a miss. A benchmark, not a test: it prints numbers.

Usage (from the repository root):

    go build -o /tmp/cachesvc ./cmd/cachesvc
    .venv/bin/python clients/python/bench/bench_jax.py --bin /tmp/cachesvc [--rounds 3]

It starts `cachesvc serve` on a free port with a temporary data directory,
runs clients/python/tests/jaxprog.py (the MLP training step plus six other
jitted functions) in fresh processes: without any cache, cold (empty
namespace) and warm (second process), and times lookups that miss.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

PY_DIR = Path(__file__).resolve().parents[1]
PROG = PY_DIR / "tests" / "jaxprog.py"
sys.path.insert(0, str(PY_DIR))

import cachesvc  # noqa: E402


def start_server(binary: str, data: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([binary, "serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "text",
                          "--log-level", "warn"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+", line)
        if m:
            url = m.group(0)
            if cachesvc.Client(url).healthy(timeout=5):
                # Plugins get ready on first use: keep that out of the numbers.
                c = cachesvc.Client(url, timeout=300)
                c.key({"backend": "passthrough", "kind": "jax", "key": "warmup"})
                c.key({"backend": "xla", "module": "module @warmup {\n}\n", "module_format": "stablehlo",
                       "platform": "cpu"})
                return p, url
    p.kill()
    raise SystemExit("server did not start")


def run(args: list[str], env: dict[str, str]) -> dict:
    e = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu", **env)
    r = subprocess.run([sys.executable, str(PROG), *args], env=e, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="cachesvc binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lookups", type=int, default=300)
    ap.add_argument("--mode", default="canonical")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        p, url = start_server(a.bin, d)
        try:
            rows = []
            for i in range(a.rounds):
                ns = f"bench-{uuid.uuid4().hex[:8]}"
                env = {"CACHESVC_URL": url, "CACHESVC_NAMESPACE": ns}
                base = run(["mlp", "--no-cache"], {})
                cold = run(["mlp", "--mode", a.mode], dict(env, CACHESVC_RUN=f"cold{i}"))
                warm = run(["mlp", "--mode", a.mode], dict(env, CACHESVC_RUN=f"warm{i}"))
                assert warm["real_compiles"] == 0 and warm["digest"] == cold["digest"], warm
                rows.append((base, cold, warm))
                print(f"round {i}: compile phase (sum of backend_compile_duration events, {cold['backend_compile_events']} programs): "
                      f"no cache {base['backend_compile_secs']:.3f}s, cold {cold['backend_compile_secs']:.3f}s "
                      f"(xla compiles {cold['real_compiles']}), warm {warm['backend_compile_secs']:.3f}s "
                      f"(xla compiles {warm['real_compiles']}, hits {warm['stats']['hits']}); "
                      f"first train step {base['first_step_secs']:.3f}/{cold['first_step_secs']:.3f}/{warm['first_step_secs']:.3f}s; "
                      f"program wall {base['wall_secs']:.3f}/{cold['wall_secs']:.3f}/{warm['wall_secs']:.3f}s", flush=True)

            def med(idx: int, field: str) -> float:
                return statistics.median(r[idx][field] for r in rows)

            print(f"MEDIAN compile phase: no cache {med(0, 'backend_compile_secs'):.3f}s, "
                  f"cold {med(1, 'backend_compile_secs'):.3f}s, warm {med(2, 'backend_compile_secs'):.3f}s; "
                  f"first step {med(0, 'first_step_secs'):.3f}/{med(1, 'first_step_secs'):.3f}/{med(2, 'first_step_secs'):.3f}s; "
                  f"wall {med(0, 'wall_secs'):.3f}/{med(1, 'wall_secs'):.3f}/{med(2, 'wall_secs'):.3f}s")
            cold_stats = rows[-1][1]["stats"]
            print(f"cold client time: signatures {cold_stats.get('signature_seconds', 0):.3f}s, "
                  f"lookups {cold_stats['lookup_seconds']:.3f}s for {cold_stats['lookups']} misses, "
                  f"puts {cold_stats['put_seconds']:.3f}s for {cold_stats['puts']} writes ({cold_stats['put_bytes']} bytes)")

            # Overhead per lookup on a miss, one keep-alive connection.
            c = cachesvc.Client(url, namespace="bench-miss")
            sig = {"backend": "passthrough", "kind": "jax", "key": ""}
            for _ in range(20):  # warm up the connection and the plugin pool
                c.lookup_result(dict(sig, key=f"jit_warm-{uuid.uuid4().hex}"))
            lat = []
            for _ in range(a.lookups):
                s = dict(sig, key=f"jit_f-{uuid.uuid4().hex}")
                t0 = time.perf_counter()
                assert c.lookup_result(s).value is None
                lat.append(time.perf_counter() - t0)
            print(f"miss lookup (passthrough, {a.lookups}x): mean {statistics.mean(lat) * 1e3:.2f} ms, "
                  f"p50 {pct(lat, .5) * 1e3:.2f} ms, p99 {pct(lat, .99) * 1e3:.2f} ms")
            mod = _mlp_signature()
            if mod is not None:
                lat = []
                for _ in range(max(20, a.lookups // 3)):
                    s = dict(mod, extra={"nonce": uuid.uuid4().hex})
                    t0 = time.perf_counter()
                    assert c.lookup_result(s).value is None
                    lat.append(time.perf_counter() - t0)
                print(f"miss lookup (xla signature of the MLP step, module {len(mod['module'])} bytes, {len(lat)}x): "
                      f"mean {statistics.mean(lat) * 1e3:.2f} ms, p50 {pct(lat, .5) * 1e3:.2f} ms, "
                      f"p99 {pct(lat, .99) * 1e3:.2f} ms")
        finally:
            p.terminate()
            p.wait(timeout=30)


def _mlp_signature() -> dict | None:
    """Captures the xla signature cachesvc.jax would send for the MLP train step."""
    import cachesvc.jax as cj
    sys.path.insert(0, str(PROG.parent))
    b = cj.install("http://127.0.0.1:9", mode="canonical", breaker_threshold=1, breaker_cooldown=3600)
    if b is None:
        return None
    import logging
    logging.getLogger("cachesvc.jax").setLevel(logging.ERROR)
    import jaxprog  # noqa: F401  (defines train_step)
    import jax.numpy as jnp
    import numpy as np
    x = jnp.asarray(np.ones((64, 32), np.float32))
    y = jnp.asarray(np.ones((64, 10), np.float32))
    jaxprog.train_step(jaxprog.init_mlp([32, 128, 128, 10]), x, y)
    sigs = [s for s in b._signatures.values() if "jit_train_step" in s["module"][:200]]
    cj.uninstall()
    return sigs[-1] if sigs else None


if __name__ == "__main__":
    main()
