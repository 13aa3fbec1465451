"""cachesvc.Client as an API: what a caller gets back, and what a mistaken
call or a server that goes away mid-response raises. Real servers only."""

from __future__ import annotations

import hashlib
import io

import pytest

import cachesvc


def k(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


class _KillOnFirstWrite(io.RawIOBase):
    """A download target that kills the server as the first bytes arrive."""

    def __init__(self, server) -> None:
        self.server = server
        self.n = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        if self.n == 0:
            self.server.kill()  # SIGKILL, and waits until it has exited
        self.n += len(b)
        return len(b)


def test_body_cut_short_by_a_dying_server_is_a_connection_error(start_server):
    """A server killed while it sends a body: the caller gets a retryable
    connection error, not ``digest_mismatch`` (which says the stored bytes
    are bad)."""
    server = start_server()
    c = cachesvc.Client(server.url, timeout=120, retries=0)
    value = bytes(range(256)) * (256 << 10)  # 64 MiB: far more than socket buffers hold
    key = k("cut-short")
    c.put(key, value)
    out = _KillOnFirstWrite(server)
    with pytest.raises(cachesvc.Error) as ei:
        c.download(key, out)
    e = ei.value
    assert (e.status, e.code) == (0, "connection_failed"), e
    assert e.retryable and "before the end of the response body" in e.message
    assert 0 < out.n < len(value)


def test_download_and_head_return_the_name_and_backend_as_stored(server):
    """The display name is UTF-8 on the wire; both calls return it as
    written, with the backend."""
    c = cachesvc.Client(server.url)
    key = k("named")
    name = "pjit(train_step) — naïve ✓"
    c.put(key, b"exe", name=name, backend="xla", compile_seconds=3)
    head = c.head(key)
    out = io.BytesIO()
    got = c.download(key, out)
    assert head is not None and got is not None
    assert (head.name, head.backend) == (name, "xla")
    assert (got.name, got.backend) == (name, "xla")
    assert out.getvalue() == b"exe"


@pytest.mark.parametrize("method", ["exists", "batch_get", "batch"])
def test_one_key_instead_of_a_list_is_a_type_error(server, method):
    """A str is an iterable of characters: passing one key where a list is
    wanted must say so, not send 64 one-character keys (400 bad_key)."""
    c = cachesvc.Client(server.url)
    key = k("single")
    c.put(key, b"v")
    call = getattr(c, method)
    args = (key, lambda m, f: None) if method == "batch" else (key,)
    with pytest.raises(TypeError, match=rf"{method}\(\) takes an iterable of keys.*{method}\(\[key\]\)"):
        call(*args)
    args = ([key], lambda m, f: None) if method == "batch" else ([key],)
    assert call(*args) in ({key}, {key: b"v"}, [])


@pytest.mark.parametrize("bad", ["xla", [("backend", "passthrough")], None])
def test_a_signature_that_is_not_a_dict_is_a_type_error(server, bad):
    c = cachesvc.Client(server.url)
    for call in (c.key, c.lookup, c.lookup_result):
        with pytest.raises(TypeError, match=r"a signature is a dict"):
            call(bad)  # type: ignore[arg-type]


def _get_in_worker(url: str, key: str) -> bytes | None:
    return cachesvc.Client(url).get(key)


def test_an_error_in_a_worker_process_reaches_the_parent(server):
    """cachesvc.Error survives pickling: raised in a ProcessPoolExecutor
    worker, the parent gets it with its status, code and message, instead of
    a BrokenProcessPool that hides it and kills the pool."""
    import concurrent.futures
    import multiprocessing
    import pickle

    e = pickle.loads(pickle.dumps(cachesvc.Error(404, "not_found", "No entry.")))
    assert (type(e), e.status, e.code, e.message) == (cachesvc.Error, 404, "not_found", "No entry.")
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        with pytest.raises(cachesvc.Error) as ei:
            pool.submit(_get_in_worker, server.url, "not-a-key").result(timeout=120)
        assert (ei.value.status, ei.value.code) == (400, "bad_key")
        assert pool.submit(_get_in_worker, server.url, k("absent")).result(timeout=120) is None  # the pool lives on


def _roundtrip_in_worker(c: cachesvc.Client, key: str) -> tuple[bytes | None, str, str | None]:
    c.put(key, b"from the worker", name="worker")
    return c.get(key), c.namespace, c.token


def test_a_client_can_be_passed_to_a_spawned_worker(server):
    """A Client (one that has pooled connections included) pickles without
    its sockets and lock: a spawn or forkserver worker (Python 3.14's default
    on Linux) gets a working client with the same settings."""
    import concurrent.futures
    import multiprocessing

    c = cachesvc.Client(server.url, namespace="team-a", token="unused-by-this-server", run="sweep-1:arm-2")
    c.put(k("before"), b"v")
    assert c._pool._idle  # a pooled keep-alive connection (a socket) is held
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        got = pool.submit(_roundtrip_in_worker, c, k("worker")).result(timeout=120)
    assert got == (b"from the worker", "team-a", "unused-by-this-server")
    assert c.get(k("worker")) == b"from the worker" and c.get(k("before")) == b"v"  # the parent's client still works


@pytest.mark.parametrize("size", [5, 1])
def test_put_with_a_wrong_size_for_a_file_is_a_value_error(server, size):
    """A declared size that is not the file's: a ValueError saying so at
    once, not a 408 after the server's read timeout (too large) or an entry
    cut short with the rest of the file left on the connection (too small)."""
    c = cachesvc.Client(server.url)
    key = k("wz")
    with pytest.raises(ValueError, match=rf"size={size} but the file holds 2 bytes"):
        c.put(key, io.BytesIO(b"wz"), sha256=k("wz"), size=size)
    assert c.head(key) is None
    f = io.BytesIO(b"..wz")
    f.seek(2)  # the size counts from the file's position
    assert c.put(key, f, sha256=hashlib.sha256(b"wz").hexdigest(), size=2).created
    assert c.get(key) == b"wz"


def test_a_body_slower_than_the_budget_says_which_budget_and_what_to_do(server):
    """A download that outlasts the call's timeout names the budget and the
    argument that raises it."""
    import time

    class Slow(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:  # type: ignore[override]
            time.sleep(0.2)
            return len(b)

    c = cachesvc.Client(server.url, timeout=60)
    key = k("slow-reader")
    c.put(key, bytes(8 << 20))
    with pytest.raises(cachesvc.Error) as ei:
        c.download(key, Slow(), timeout=0.5)
    e = ei.value
    assert (e.status, e.code) == (0, "timeout"), e
    assert "time budget of 0.5s" in e.message and "pass a larger timeout=" in e.message, e


def test_a_wrong_url_is_an_error_not_a_miss(server):
    """A URL that is not the server's root (here with /v1, as in the API's
    paths) gets 404 route_not_found for every call: get, head (the code in
    X-Cachesvc-Error, HEAD having no body), delete and report raise it,
    saying what the URL should be, instead of reading as misses forever. A
    real miss is still None / False."""
    key = k("absent")
    wrong = cachesvc.Client(server.url + "/v1")
    for call in (lambda: wrong.get(key), lambda: wrong.get(key, wait=0.1), lambda: wrong.head(key),
                 lambda: wrong.delete(key), lambda: wrong.report(key, "x")):
        with pytest.raises(cachesvc.Error) as ei:
            call()
        e = ei.value
        assert (e.status, e.code) == (404, "route_not_found"), e
        assert "does not answer like a cachesvc server" in e.message and "server's root URL" in e.message, e
    right = cachesvc.Client(server.url)
    assert right.get(key) is None and right.get(key, wait=0.1) is None and right.head(key) is None
    assert right.delete(key) is False and right.report(key, "x") is None


def test_a_url_of_another_http_service_is_an_error_not_a_miss():
    """An HTTP server that is not cachesvc answers 404 with a page of its
    own: get raises (code http_404) rather than returning None."""
    import http.server
    import threading

    class NotCachesvc(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b"<html><body>Not Found</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotCachesvc)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        c = cachesvc.Client(f"http://127.0.0.1:{srv.server_address[1]}")
        with pytest.raises(cachesvc.Error) as ei:
            c.get(k("x"))
        assert (ei.value.status, ei.value.code) == (404, "http_404") and "cachesvc server" in ei.value.message
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("status,call,advice,page", [
    (413, lambda c: c.put(k("big"), b"x" * 4096), "client_max_body_size 0", True),
    (504, lambda c: c.get(k("slow"), wait=90), "proxy_read_timeout", True),
    (502, lambda c: c.get(k("down")), "could not reach it", True),
    (502, lambda c: c.get(k("down")), "could not reach it", False),  # an empty body: a proxy's too
    (413, lambda c: c.put(k("big"), b"x" * 4096), "client_max_body_size 0", False),
])
def test_a_proxys_own_error_page_says_what_to_change_there(status, call, advice, page):
    """A reverse proxy in front of cachesvc answers some errors with its own
    HTML page (nginx's 413 for a body over client_max_body_size, 504 when a
    long poll outlasts proxy_read_timeout), or with none: the error quotes it
    on one line and names the proxy setting, not a URL to check. (cachesvc's
    errors always have a JSON body, so an empty one is not its answer.)"""
    import http.client
    import http.server
    import threading

    class Proxy(http.server.BaseHTTPRequestHandler):
        def answer(self):
            body = (f"<html>\r\n<head><title>{status} {http.client.responses[status]}</title></head>\r\n"
                    "<body>\r\n<center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n").encode() if page else b""
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = answer  # noqa: N815

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        c = cachesvc.Client(f"http://127.0.0.1:{srv.server_address[1]}", retries=0)
        with pytest.raises(cachesvc.Error) as ei:
            call(c)
        e = ei.value
        assert (e.status, e.code) == (status, f"http_{status}"), e
        assert "not a cachesvc answer" in e.message and ("nginx/1.22.1" in e.message) == page, e.message
        assert advice in e.message and "\n" not in e.message and "check that the URL" not in e.message, e.message
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_lookup_hit_holds_its_value_once_in_memory(server):
    """lookup() returns a hit's bytes without a second copy: a large
    executable costs its size in the trainer's memory, not twice that."""
    import tracemalloc

    c = cachesvc.Client(server.url, timeout=120)
    sig = {"backend": "passthrough", "kind": "jax", "key": "jit_big-1"}
    size = 48 << 20
    c.put(c.key(sig).key, bytes(range(256)) * (size // 256))
    tracemalloc.start()
    try:
        value = c.lookup(sig)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value is not None and len(value) == size
    assert peak < size * 1.25, f"lookup of a {size >> 20} MiB value peaked at {peak >> 20} MiB of Python allocations"


@pytest.mark.parametrize("run", ["sweep-1:lr-3e-4", "user@host+retry.2"])
def test_manifest_of_a_sweep_arm_run(server, run):
    """Run ids with ':' (the SWEEP:ARM form the dashboard groups), '@' or
    '+' reach the server as written: the manifest (what prefetch warms from)
    is found, not refused as 400 bad_run for a run id "sweep-1%3Alr-3e-4"."""
    c = cachesvc.Client(server.url, run=run)
    key = k("arm-" + run)
    c.put(key, b"exe")
    assert c.get(key) == b"exe"
    m = c.manifest(run)
    assert m["run"] == run and [e["key"] for e in m["keys"]] == [key]


def _draw_jitter(c: cachesvc.Client, q) -> None:
    q.put(tuple(c._rand.uniform(0, 1) for _ in range(4)))


def test_forked_workers_draw_their_own_backoff_jitter(server):
    """Processes forked from one client (a data loader's workers) must not
    retry in lockstep after a server restart: each draws its own jitter."""
    import multiprocessing

    c = cachesvc.Client(server.url)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_draw_jitter, args=(c, q)) for _ in range(4)]
    for p in procs:
        p.start()
    draws = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    assert len(set(draws)) == len(draws), draws


@pytest.mark.parametrize("kwargs, named", [
    ({"timeout": -1}, "timeout"),  # before: accepted, then every call failed "budget of -1s exhausted"
    ({"timeout": 0}, "timeout"),
    ({"timeout": "30"}, "timeout"),
    ({"first_byte_timeout": 0}, "first_byte_timeout"),
    ({"namespace": None}, "namespace"),  # before: TypeError from quote() on the first call
    ({"namespace": ""}, "namespace"),
])
def test_bad_client_settings_are_refused_at_construction(kwargs, named):
    with pytest.raises(ValueError, match=named):
        cachesvc.Client("http://127.0.0.1:1", **kwargs)
    cachesvc.Client("http://127.0.0.1:1", timeout=None)  # None: no limit


def test_from_env_reads_what_install_reads(server, monkeypatch, tmp_path):
    """Client.from_env takes the server, namespace, token file and run from
    the CACHESVC_* variables a launcher sets for install(), arguments first;
    with no URL anywhere it says what to set."""
    for name in ("CACHESVC_URL", "CACHESVC_SERVER", "CACHESVC_NAMESPACE", "CACHESVC_NS", "CACHESVC_TOKEN",
                 "CACHESVC_TOKEN_FILE", "CACHESVC_RUN", "CACHESVC_VERIFY_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="set CACHESVC_URL"):
        cachesvc.Client.from_env()
    token = tmp_path / "token"
    token.write_text("s3cr3t-from-env\n")
    monkeypatch.setenv("CACHESVC_URL", server.url)
    monkeypatch.setenv("CACHESVC_NAMESPACE", "from-env")
    monkeypatch.setenv("CACHESVC_TOKEN_FILE", str(token))
    monkeypatch.setenv("CACHESVC_RUN", "sweep:arm-1")
    c = cachesvc.Client.from_env()
    assert (c.url, c.namespace, c.token, c.run) == (server.url, "from-env", "s3cr3t-from-env", "sweep:arm-1")
    key = k("from-env")
    assert c.put(key, b"executable").created and c.get(key) == b"executable"
    assert cachesvc.Client(server.url, namespace="from-env").get(key) == b"executable"
    assert cachesvc.Client.from_env(namespace="other").namespace == "other"  # arguments win
    monkeypatch.setenv("CACHESVC_URL", "host:8080")
    with pytest.raises(ValueError, match="http"):
        cachesvc.Client.from_env()


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9",                 # nothing listens there
    "http://cachesvc-test.invalid:8080",  # no such host
])
def test_an_unreachable_server_says_to_check_the_url(url):
    """As the CLI's "is cachesvc serve running at URL?": before, only
    "ConnectionRefusedError: [Errno 111] Connection refused"."""
    with pytest.raises(cachesvc.Error) as e:
        cachesvc.Client(url, retries=0).get(hashlib.sha256(b"x").hexdigest())
    assert e.value.code == "connection_failed", e.value
    assert "is cachesvc serve running at " + url in e.value.message and "CACHESVC_URL" in e.value.message, e.value
