"""Unit tests of cachesvc.Client against a real `cachesvc serve`."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import pickle
import re
import socket
import threading
import time
import tracemalloc
import urllib.request
from pathlib import Path

import pytest

import cachesvc
from conftest import free_port


def k(s: str | bytes) -> str:
    return hashlib.sha256(s.encode() if isinstance(s, str) else s).hexdigest()


def test_put_get_head_delete(server):
    c = cachesvc.Client(server.url)
    key = k("roundtrip")
    assert c.get(key) is None
    assert c.head(key) is None
    r = c.put(key, b"executable bytes", compile_seconds=2.5, backend="xla", name="jit_f")
    assert r.created and r.size == 16 and r.sha256 == k(b"executable bytes")
    assert c.put(key, b"executable bytes").created is False  # identical re-upload: no-op
    assert c.get(key) == b"executable bytes"
    info = c.head(key)
    assert info is not None
    assert info.size == 16 and info.sha256 == r.sha256 and info.compile_seconds == pytest.approx(2.5)
    assert c.delete(key) is True
    assert c.delete(key) is False
    assert c.get(key) is None


def test_display_names_reach_the_server_as_utf8(server):
    """Names are sent as UTF-8 (http.client alone would send Latin-1, which the
    server refuses), non-printable characters replaced, over-long names cut:
    a display name never fails an upload."""
    c = cachesvc.Client(server.url)
    for i, (name, want) in enumerate([
        ("pjit(train_step) — naïve ✓", "pjit(train_step) — naïve ✓"),
        ("tab\there\x00", "tab\ufffdhere\ufffd"),
        ("é" * 300, "é" * 128),
    ]):
        key = k(f"display-name-{i}")
        assert c.put(key, b"x", name=name, compile_seconds=1e12).created
        req = urllib.request.Request(f"{server.url}/v1/default/entries/{key}", method="HEAD")
        with urllib.request.urlopen(req) as resp:
            got = resp.headers["X-Cachesvc-Name"].encode("latin-1").decode("utf-8")
            assert got == want
            assert float(resp.headers["X-Compile-Seconds"]) == 7 * 24 * 3600


@pytest.mark.parametrize(
    "name,call,status,code",
    [
        ("bad key", lambda c: c.get("not-a-key"), 400, "bad_key"),
        ("digest mismatch", lambda c: c.put(k("dm"), b"abc", sha256="0" * 64), 400, "digest_mismatch"),
        ("conflict", lambda c: (c.put(k("cf"), b"one"), c.put(k("cf"), b"two")), 409, "conflict"),
        ("bad namespace", lambda c: cachesvc.Client(c.url, namespace="Bad NS!").get(k("x")), 400, None),
    ],
)
def test_error_codes(server, name, call, status, code):
    c = cachesvc.Client(server.url)
    with pytest.raises(cachesvc.Error) as ei:
        call(c)
    e = ei.value
    assert e.status == status, (name, e)
    if code is not None:
        assert e.code == code, (name, e)
    assert e.code and e.message, (name, e)
    assert not e.retryable


@pytest.mark.parametrize(
    "name,call",
    [
        ("bad key", lambda c: c.get("not-a-key")),
        ("conflict", lambda c: (c.put(k("rid-cf"), b"one"), c.put(k("rid-cf"), b"two"))),
        ("HEAD, no body", lambda c: cachesvc.Client(c.url, namespace="Bad_NS").head(k("x"))),
    ],
)
def test_errors_name_the_request_id(server, name, call):
    """Each request carries a uuid4 X-Request-Id; the Error raised names it
    (attribute and text, kept through pickling) and the server's log line
    has it, so a user's report leads the operator to that line."""
    c = cachesvc.Client(server.url)
    with pytest.raises(cachesvc.Error) as ei:
        call(c)
    e = ei.value
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", e.request_id), (name, e)
    assert f"request id {e.request_id}" in str(e), (name, str(e))
    assert pickle.loads(pickle.dumps(e)).request_id == e.request_id
    deadline = time.monotonic() + 10
    while not any(f"request_id={e.request_id}" in line for line in server.lines):
        assert time.monotonic() < deadline, f"{name}: no server log line with request_id={e.request_id}"
        time.sleep(0.05)


def test_connection_failure_names_the_request_id():
    """With no server answering, the Error still names the id it sent."""
    c = cachesvc.Client(f"http://127.0.0.1:{free_port()}", retries=0)
    with pytest.raises(cachesvc.Error) as ei:
        c.get(k("nobody"))
    assert ei.value.code == "connection_failed" and ei.value.request_id, ei.value


def test_large_value_streamed(server, tmp_path: Path):
    """64 MiB up and down through files; the client never holds it in memory."""
    size = 64 << 20
    src = tmp_path / "big.bin"
    block = os.urandom(1 << 20)
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for i in range(size >> 20):
            b = block[:-1] + bytes([i % 256])
            f.write(b)
            h.update(b)
    digest = h.hexdigest()
    key = k("big")
    c = cachesvc.Client(server.url, timeout=120)
    tracemalloc.start()
    try:
        with open(src, "rb") as f:
            r = c.put(key, f, compile_seconds=10)
        dst = tmp_path / "out.bin"
        with open(dst, "wb") as out:
            info = c.download(key, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.created and r.sha256 == digest and r.size == size
    assert info is not None and info.size == size and info.sha256 == digest
    assert dst.stat().st_size == size
    assert peak < 16 << 20, f"client peak Python allocation {peak} bytes for a {size}-byte value"
    assert c.head(key).size == size


def test_put_body_types(server, tmp_path):
    """put takes bytes, any bytes-like object or a binary file object; a str,
    a text file or anything else is a TypeError saying so, and nothing is sent."""
    import array
    import io

    c = cachesvc.Client(server.url)
    for name, body in [("str", "text"), ("text file", io.StringIO("text")), ("int", 42), ("None", None),
                       ("list", [1, 2])]:
        with pytest.raises(TypeError, match="takes bytes, a bytes-like object or a binary file object") as ei:
            c.put(k(name), body)  # type: ignore[arg-type]
        assert "object has no attribute" not in str(ei.value)
        assert c.head(k(name)) is None
    with pytest.raises(TypeError, match=r"encode the str first"):
        c.put(k("str"), "text")  # type: ignore[arg-type]
    src = tmp_path / "v.txt"
    src.write_bytes(b"in a file")
    with open(src) as text, pytest.raises(TypeError, match="binary mode"):
        c.put(k("text file"), text)  # type: ignore[arg-type]

    ints = array.array("I", [1, 2, 3])
    for name, body, want in [("bytes", b"b", b"b"), ("bytearray", bytearray(b"ba"), b"ba"),
                             ("memoryview", memoryview(b"xmv")[1:], b"mv"),
                             ("array", ints, ints.tobytes()),
                             ("BytesIO", io.BytesIO(b"bio"), b"bio")]:
        r = c.put(k(name), body)
        assert r.created and r.size == len(want), name
        assert c.get(k(name)) == want, name
    with open(src, "rb") as f:
        assert c.put(k("binary file"), f).created
    assert c.get(k("binary file")) == b"in a file"


def test_put_from_non_seekable_stream(server):
    c = cachesvc.Client(server.url)
    rfd, wfd = os.pipe()
    payload = os.urandom(3 << 20)

    def writer():
        with os.fdopen(wfd, "wb") as w:
            w.write(payload)

    t = threading.Thread(target=writer)
    t.start()
    with os.fdopen(rfd, "rb") as r:
        res = c.put(k("pipe"), r)
    t.join()
    assert res.created and res.size == len(payload)
    assert c.get(k("pipe")) == payload


def test_retries_until_server_starts(start_server):
    """Connection refused is retried with backoff until the server is up."""
    port = free_port()
    c = cachesvc.Client(f"http://127.0.0.1:{port}", timeout=180, retries=100, backoff=0.2, max_backoff=1.0)
    timer = threading.Timer(1.0, lambda: start_server(addr=f"127.0.0.1:{port}", wait=False))
    timer.start()
    try:
        assert c.get(k("later")) is None  # reached the server: a miss, not an error
    finally:
        timer.join()


def test_connection_refused_is_bounded():
    port = free_port()  # nothing listens there
    c = cachesvc.Client(f"http://127.0.0.1:{port}", timeout=30, retries=2, backoff=0.01)
    t0 = time.monotonic()
    with pytest.raises(cachesvc.Error) as ei:
        c.get(k("x"))
    assert ei.value.status == 0 and ei.value.code == "connection_failed" and ei.value.retryable
    assert time.monotonic() - t0 < 25  # bounded by retries, far from the budget
    # The message names where it tried (a wrong port or host is then plain).
    assert f"http://127.0.0.1:{port}/v1/default/entries/" in ei.value.message, ei.value.message


def test_timeout_on_silent_server():
    """A server that accepts but never answers: the call ends with code 'timeout'."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        ls.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = ls.accept()
                held.append(conn)
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        c = cachesvc.Client(f"http://127.0.0.1:{ls.getsockname()[1]}", timeout=0.5, retries=3)
        t0 = time.monotonic()
        with pytest.raises(cachesvc.Error) as ei:
            c.get(k("slow"))
        assert ei.value.code == "timeout" and ei.value.status == 0
        assert time.monotonic() - t0 < 10  # the budget covers retries too
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        ls.close()


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 (with Retry-After) to the first `fail` requests, then 404."""

    fail = 2
    seen = 0

    def do_GET(self):  # noqa: N802
        type(self).seen += 1
        if type(self).seen <= type(self).fail:
            body = json.dumps({"error": {"code": "unavailable", "message": "Busy, retry."}}).encode()
            self.send_response(503)
            self.send_header("Retry-After", "0")
        else:
            body = json.dumps({"error": {"code": "not_found", "message": "No entry."}}).encode()
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):  # quiet
        pass


@pytest.mark.parametrize("retries,expect_error", [(3, False), (1, True)])
def test_retries_on_503(retries, expect_error):
    """503 is retried (the real server answers 503 only under overload, so this
    one test uses a stdlib HTTP peer that is busy twice)."""
    handler = type("H", (_Flaky,), {"seen": 0})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        c = cachesvc.Client(f"http://127.0.0.1:{srv.server_address[1]}", retries=retries, backoff=0.01)
        if expect_error:
            with pytest.raises(cachesvc.Error) as ei:
                c.get(k("x"))
            assert (ei.value.status, ei.value.code, ei.value.message) == (503, "unavailable", "Busy, retry.")
            assert handler.seen == 2
        else:
            assert c.get(k("x")) is None
            assert handler.seen == 3
    finally:
        srv.shutdown()
        srv.server_close()


def test_threads_share_keepalive_pool(server):
    c = cachesvc.Client(server.url, max_idle=4)
    errors: list[BaseException] = []

    def work(i: int):
        try:
            for j in range(20):
                key = k(f"t{i}-{j}")
                val = f"value {i} {j}".encode() * 100
                c.put(key, val)
                assert c.get(key) == val
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert 1 <= len(c._pool._idle) <= 4


def test_stale_keepalive_connection_after_restart(start_server, tmp_path):
    """A pooled connection the server closed (restart) is replaced transparently."""
    port = free_port()
    s1 = start_server(addr=f"127.0.0.1:{port}", data=tmp_path / "d")
    c = cachesvc.Client(s1.url, retries=0)
    c.put(k("s"), b"v")
    assert len(c._pool._idle) == 1
    s1.stop()
    start_server(addr=f"127.0.0.1:{port}", data=tmp_path / "d")
    assert c.get(k("s")) == b"v"


def test_key_and_lookup_passthrough(server):
    c = cachesvc.Client(server.url)
    sig = {"backend": "passthrough", "kind": "jax", "key": "jit_f-" + k("f")}
    kr = c.key(sig)
    assert len(kr.key) == 64 and kr.key == c.key(sig).key
    assert kr.backend == "passthrough"
    miss = c.lookup_result(sig)
    assert miss.value is None and miss.key == kr.key
    assert c.lookup(sig) is None
    c.put(kr.key, b"exe", compile_seconds=3)
    hit = c.lookup_result(sig)
    assert hit.value == b"exe" and hit.key == kr.key and hit.compile_seconds == pytest.approx(3)
    other = dict(sig, key="jit_g-" + k("g"))
    assert c.key(other).key != kr.key


def test_key_bad_signature(server):
    c = cachesvc.Client(server.url)
    for bad in ({"backend": "no-such-backend"}, {"kind": "jax"}):
        with pytest.raises(cachesvc.Error) as ei:
            c.key(bad)
        assert 400 <= ei.value.status < 500 and ei.value.code and ei.value.message


def test_bearer_token_and_auth_errors(start_server, tmp_path):
    """--tokens: the client's token is sent; 401/403 come back as Error codes."""
    writer, reader = "cachesvc_" + "w" * 40, "cachesvc_" + "r" * 40
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {hashlib.sha256(writer.encode()).hexdigest()} default:write\n"
                      f"bob {hashlib.sha256(reader.encode()).hexdigest()} default:read\n")
    s = start_server(extra=["--tokens", str(tokens)])
    key = k("auth")
    assert cachesvc.Client(s.url, token=writer).put(key, b"v").created
    assert cachesvc.Client(s.url, token=reader).get(key) == b"v"
    for token, status in [(None, 401), ("cachesvc_wrong", 401), (reader, 403)]:
        with pytest.raises(cachesvc.Error) as ei:
            cachesvc.Client(s.url, token=token).put(k("auth2"), b"x")
        assert ei.value.status == status and ei.value.code and ei.value.message, (token, ei.value)
        assert not ei.value.retryable
