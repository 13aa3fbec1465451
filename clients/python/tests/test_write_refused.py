"""A write the server refuses (a token with read scope only: 403 on every
upload) costs only that entry: the rate-limited warning says so, instead of
"compiling without the shared cache", and lookups keep going to the server.
A transient write failure (server unreachable, timeout) keeps the usual
wording: lookups meet the same sick server. (torch's side:
tests_torch/test_write_refused.py.)"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import cachesvc
import cachesvc.jax as cj
from cachesvc._failopen import Breaker, Warner

WRITER = "cachesvc_" + "w" * 40
READER = "cachesvc_" + "r" * 40


def _reader_server(start_server, tmp_path: Path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {hashlib.sha256(WRITER.encode()).hexdigest()} default:write\n"
                      f"bob {hashlib.sha256(READER.encode()).hexdigest()} default:read\n")
    s = start_server(extra=["--tokens", str(tokens)])
    # conftest cannot warm the plugins of an authenticating server: do it
    # here, outside the calls' 1 s first-byte timeout.
    cachesvc.Client(s.url, token=READER, timeout=180.0).key({"backend": "passthrough", "kind": "jax", "key": "w"})
    return s


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_jax_write_without_write_scope_says_lookups_still_work(start_server, tmp_path, caplog):
    s = _reader_server(start_server, tmp_path)
    b = cj.install(client=cachesvc.Client(s.url, token=READER, retries=0), mode="jax-key",
                   background_uploads=False)
    try:
        with caplog.at_level(logging.INFO, logger="cachesvc"):
            b.put("jit_f-" + "a" * 64, b"executable")
            assert b.get("jit_g-" + "b" * 64) is None  # the lookup still reaches the server: a miss
        st = b.stats()
        assert st["put_errors"] == 1 and st["lookups"] == 1 and st["misses"] == 1 and st["errors"] == 0, st
        assert not st["breaker_open"], st
        warned = _warnings(caplog)
        assert len(warned) == 1, warned
        assert "write of jit_f failed" in warned[0] and "lacks write scope" in warned[0], warned
        assert "not stored" in warned[0] and "lookups still use the shared cache" in warned[0], warned
        assert "compiling without the shared cache" not in warned[0], warned
    finally:
        cj.uninstall()


def test_transient_write_failure_keeps_the_usual_wording(caplog):
    log = logging.getLogger("cachesvc.test")
    for exc in (cachesvc.Error(0, "connection_failed", "refused"), cachesvc.Error(0, "timeout", "timed out"),
                cachesvc.Error(503, "unavailable", "draining")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="cachesvc.test"):
            Warner(log, Breaker(3, 30.0), 60.0).failed("write of jit_f", exc, write=True)
        warned = _warnings(caplog)
        assert len(warned) == 1 and "compiling without the shared cache" in warned[0], (exc, warned)
    with caplog.at_level(logging.INFO, logger="cachesvc.test"):
        caplog.clear()
        Warner(log, Breaker(3, 30.0), 60.0).failed("lookup of jit_f", cachesvc.Error(403, "forbidden", "no"))
    assert "compiling without the shared cache" in _warnings(caplog)[0]


def test_jax_lookup_without_read_scope_says_what_to_check(start_server, tmp_path, caplog):
    """A lookup the token may not make (403: no read scope in the namespace,
    usually a CACHESVC_NAMESPACE the token was not made for) names the
    variables to check; it gave the server's message alone."""
    s = _reader_server(start_server, tmp_path)
    b = cj.install(client=cachesvc.Client(s.url, namespace="team-a", token=READER, retries=0), mode="jax-key",
                   background_uploads=False)
    try:
        with caplog.at_level(logging.INFO, logger="cachesvc"):
            assert b.get("jit_g-" + "b" * 64) is None
        warned = _warnings(caplog)
        assert len(warned) == 1 and 'lacks read scope in namespace "team-a"' in warned[0], warned
        assert "check CACHESVC_NAMESPACE, and that the token (CACHESVC_TOKEN or CACHESVC_TOKEN_FILE) may read it" in warned[0], warned
    finally:
        cj.uninstall()
