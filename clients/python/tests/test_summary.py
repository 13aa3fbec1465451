"""``cachesvc.jax.summary()`` / ``cachesvc.torch.summary()``: the counters as
one line a person reads at the end of a job (``print(stats())`` is a dict of
30 keys on one line, the torch one with a nested ``by_cache``)."""

from __future__ import annotations

import pytest

from cachesvc._summary import summary


@pytest.mark.parametrize("name,stats,want", [
    ("cachesvc.jax", {}, "cachesvc.jax: not installed (see the warning logged by install())"),
    ("cachesvc.jax",
     {"lookups": 7, "hits": 7, "misses": 0, "errors": 0, "skipped": 0, "puts": 0, "put_errors": 0,
      "hit_bytes": 21438, "put_bytes": 0, "compile_seconds_saved": 0.228, "breaker_open": False},
     "cachesvc.jax: 7 hits of 7 lookups (100%); read 21.4 KB, wrote 0 entries; saved 0.2 s of compiling"),
    ("cachesvc.jax",
     {"lookups": 4, "hits": 1, "misses": 3, "errors": 0, "skipped": 0, "puts": 3, "put_errors": 0,
      "hit_bytes": 1000, "put_bytes": 3_500_000, "compile_seconds_saved": 75.0, "breaker_open": False},
     "cachesvc.jax: 1 hit of 4 lookups (25%); read 1.0 KB, wrote 3 entries (3.5 MB); saved 1 min 15 s of compiling"),
    ("cachesvc.jax",
     {"lookups": 0, "hits": 0, "misses": 0, "errors": 2, "skipped": 5, "puts": 0, "put_errors": 1,
      "hit_bytes": 0, "put_bytes": 0, "compile_seconds_saved": 0.0, "breaker_open": True},
     "cachesvc.jax: 0 lookups answered; 2 failed, 5 skipped while the breaker was open (see the warning "
     "logged); wrote 0 entries, 1 write failed"),
    ("cachesvc.torch",
     {"lookups": 16, "hits": 16, "misses": 0, "errors": 0, "skipped": 0, "puts": 0, "put_errors": 0,
      "hit_bytes": 800255, "put_bytes": 0, "compile_seconds_saved": 18.19, "breaker_open": False,
      "by_cache": {"autograd-experimental": {"hits": 1, "hit_bytes": 230092},
                   "fx-graph-v1": {"hits": 2, "hit_bytes": 239779},
                   "inductor-cpp": {"hits": 13, "misses": 2}}},
     "cachesvc.torch: 16 hits of 16 lookups (100%); read 800.3 KB, wrote 0 entries; saved 18.2 s of compiling; "
     "by cache: autograd-experimental 1/1, fx-graph-v1 2/2, inductor-cpp 13/15"),
])
def test_summary(name, stats, want) -> None:
    assert summary(name, stats) == want


def test_exported() -> None:
    import cachesvc.jax

    assert cachesvc.jax.summary() == "cachesvc.jax: not installed (see the warning logged by install())"
