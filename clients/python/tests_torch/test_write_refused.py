"""A torch write the server refuses (a token with read scope only: 403 on
every upload) costs only that entry: the warning says lookups still use the
shared cache, not "compiling without the shared cache" (the JAX side:
tests/test_write_refused.py)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import cachesvc
from cachesvc._failopen import Breaker
from cachesvc.torch._service import Service
from conftest import Server

WRITER = "cachesvc_" + "w" * 40
READER = "cachesvc_" + "r" * 40


def test_torch_write_without_write_scope_says_lookups_still_work(cachesvc_binary: str, wasm_cache: str,
                                                                 tmp_path: Path, caplog: Any) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {hashlib.sha256(WRITER.encode()).hexdigest()} default:write\n"
                      f"bob {hashlib.sha256(READER.encode()).hexdigest()} default:read\n")
    s = Server(cachesvc_binary, tmp_path / "data", extra=["--wasm-cache", wasm_cache, "--tokens", str(tokens)])
    try:
        s.wait_ready()
        svc = Service(cachesvc.Client(s.url, token=READER, retries=0), timeout=5.0, put_timeout=None,
                      breaker=Breaker(3, 30.0), warn_interval=60.0, components=None, background_uploads=False,
                      upload_queue_bytes=1 << 20, flush_at_exit=1.0)
        key = "pt2:fx-graph-v1::" + "f" * 52 + ":c1"
        # An authenticating server is not warmed by Server: ready the plugin
        # that keys torch entries outside the calls' 1 s first-byte timeout.
        cachesvc.Client(s.url, token=READER, timeout=180.0).key(svc.signature(key))
        with caplog.at_level(logging.INFO, logger="cachesvc"):
            svc.put(key, b'{"time_taken_ms": 10}')
            assert svc.get("pt2:fx-graph-v1::" + "e" * 52 + ":c1") is None  # still looked up: a miss
        st = svc.stats()
        assert st["put_errors"] == 1 and st["lookups"] == 1 and st["errors"] == 0, st
        assert not st["breaker_open"], st
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1, warned
        assert "write of fx-graph-v1 entry failed" in warned[0] and "lacks write scope" in warned[0], warned
        assert "not stored" in warned[0] and "lookups still use the shared cache" in warned[0], warned
        assert "compiling without the shared cache" not in warned[0], warned
    finally:
        s.stop()
