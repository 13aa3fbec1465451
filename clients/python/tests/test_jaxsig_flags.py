"""The xla signature's flags, keyed by a real server: a flag given twice takes
its last value (XLA's and libtpu's parsers), so two launches that repeat one
flag in opposite orders compile differently and must not share a key; flags
that only differ in order of distinct names must."""

from __future__ import annotations

import pytest

import cachesvc._jaxsig as cj  # the signature code (needs no JAX for flags)
from cachesvc.client import Client

MODULE = "module @jit_f {\n  func.func public @main() {\n    return\n  }\n}\n"
EXCLUDED = ["--xla_dump_to", "--xla_force_host_platform_device_count"]  # as in jax's cache_key


def _key(client: Client, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: list[str]) -> str:
    """The server's key of a TPU signature whose flags come from env and argv."""
    for var in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(cj.sys, "argv", ["train.py", *argv])
    sig = {"backend": "xla", "module": MODULE, "module_format": "stablehlo", "platform": "tpu",
           "jaxlib_version": "0.10.2", "xla_flags": cj._xla_flags([], EXCLUDED)}
    return client.key(sig).key


@pytest.mark.parametrize("name,a,b,same", [
    # A launcher appends an override to a base value: the last one wins.
    ("repeat in opposite orders (libtpu)",
     ({"LIBTPU_INIT_ARGS": "--xla_tpu_enable_latency_hiding_scheduler=true "
                           "--xla_tpu_enable_latency_hiding_scheduler=false"}, []),
     ({"LIBTPU_INIT_ARGS": "--xla_tpu_enable_latency_hiding_scheduler=false "
                           "--xla_tpu_enable_latency_hiding_scheduler=true"}, []), False),
    ("repeat in opposite orders (XLA_FLAGS)",
     ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=true --xla_cpu_enable_fast_math=false"}, []),
     ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_cpu_enable_fast_math=true"}, []), False),
    ("env then argv override vs the reverse",
     ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"}, ["--xla_cpu_enable_fast_math=false"]),
     ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}, ["--xla_cpu_enable_fast_math=true"]), False),
    ("distinct flags in another order",
     ({"XLA_FLAGS": "--xla_b=1 --xla_a=2"}, []),
     ({"XLA_FLAGS": "--xla_a=2 --xla_b=1"}, []), True),
    ("distinct flags across sources",
     ({"XLA_FLAGS": "--xla_b=1", "LIBTPU_INIT_ARGS": "--xla_a=2"}, []),
     ({"XLA_FLAGS": "--xla_a=2"}, ["--xla_b=1"]), True),
    ("an excluded flag between repeats",
     ({"XLA_FLAGS": "--xla_a=1 --xla_dump_to=/tmp/x --xla_a=2"}, []),
     ({"XLA_FLAGS": "--xla_a=1 --xla_a=2"}, []), True),
])
def test_flag_order_in_key(server, monkeypatch, name, a, b, same):
    c = Client(server.url, retries=0)
    ka = _key(c, monkeypatch, *a)
    kb = _key(c, monkeypatch, *b)
    assert (ka == kb) == same, f"{name}: keys {ka[:12]} and {kb[:12]}, want {'equal' if same else 'different'}"
