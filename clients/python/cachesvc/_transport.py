"""The HTTP transport: keep-alive connection pool, the retrying request loop,
error decoding, and the paths and headers every request shares.

:class:`_Transport` is the base of every part of :class:`cachesvc.Client`:
it declares the configuration that :meth:`Client.__init__` sets, so that the
parts (entries, lookups, batch, leases, reports) can each send requests
without knowing about one another.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from typing import IO, Any, Mapping

from . import _ed25519
from ._authpause import AuthPause
from ._types import Error

log = logging.getLogger("cachesvc")

_CHUNK = 256 * 1024
_USER_AGENT = "cachesvc-python/0.1"
# What a timeout's message says to do.
_MORE_TIME = "; pass a larger timeout= (to the call, or Client(timeout=...)) for large entries or slow links"


class _Deadline:
    """A point in monotonic time after which a call gives up."""

    __slots__ = ("budget", "end")

    def __init__(self, budget: float | None) -> None:
        self.budget = budget
        self.end = None if budget is None else time.monotonic() + budget

    def remaining(self) -> float | None:
        if self.end is None:
            return None
        return self.end - time.monotonic()

    def expired(self) -> bool:
        r = self.remaining()
        return r is not None and r <= 0


class _Pool:
    """A LIFO pool of idle keep-alive connections to one host.

    A connection is owned by one request at a time; the pool only guards the
    list of idle ones with a lock, so it is safe for concurrent use.
    """

    def __init__(self, scheme: str, host: str, port: int | None, max_idle: int,
                 context: ssl.SSLContext | None = None) -> None:
        self._scheme = scheme
        self._host = host
        self._port = port
        self._max_idle = max_idle
        self._context = context  # https only; None: http.client's default
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def acquire(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """Returns a connection and whether it was reused from the pool."""
        with self._lock:
            if self._pid != os.getpid():  # forked: never share the parent's sockets
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        if self._scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, blocksize=_CHUNK, context=self._context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout, blocksize=_CHUNK)
        return conn, False

    def release(self, conn: http.client.HTTPConnection) -> None:
        """Returns a connection whose last response was fully read."""
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Closes every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


class _Response:
    """A response being read; returns its connection to the pool when done."""

    def __init__(self, client: "_Transport", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, deadline: _Deadline) -> None:
        self._client = client
        self._conn = conn
        self.resp = resp
        self.status = resp.status
        self._deadline = deadline
        self._done = False
        self._body: bytes | None = None  # a body already read (a 404's), served by read_chunks

    def header(self, name: str) -> str | None:
        return self.resp.getheader(name)

    def read_chunks(self):
        """Yields the body in chunks, enforcing the call's time budget."""
        if self._body is not None:
            body, self._body = self._body, b""
            if body:
                yield body
            return
        try:
            while True:
                if self._deadline.expired():
                    raise self._out_of_time()
                chunk = self.resp.read(_CHUNK)
                if not chunk:
                    # http.client ends a body the peer cut short like a
                    # complete one; its count of what is left tells them apart.
                    if self.resp.length:
                        raise Error(0, "connection_failed",
                                    f"the connection closed {self.resp.length} bytes before the end of the "
                                    "response body (the server stopped or the network failed); retry the call")
                    break
                yield chunk
        except Error:
            self.abort()
            raise
        except (OSError, http.client.HTTPException) as exc:
            self.abort()
            if isinstance(exc, (socket.timeout, TimeoutError)) and self._deadline.expired():
                raise self._out_of_time() from exc  # the socket's timeout is what was left of the budget
            raise _transport_error(exc) from exc
        self.finish()

    def _out_of_time(self) -> Error:
        return Error(0, "timeout", f"the call's time budget of {self._deadline.budget}s ran out while "
                     f"reading the response{_MORE_TIME}")

    def read_all(self, limit: int = 64 << 20) -> bytes:
        """Reads a (small) body completely."""
        buf = bytearray()
        for chunk in self.read_chunks():
            buf += chunk
            if len(buf) > limit:
                self.abort()
                raise Error(self.status, "bad_response", "response body is larger than expected")
        return bytes(buf)

    def finish(self) -> None:
        """Drains nothing; returns the connection if the body was consumed."""
        if self._done:
            return
        self._done = True
        if self.resp.isclosed() and not self.resp.will_close:
            self._client._pool.release(self._conn)
        else:
            self._conn.close()

    def abort(self) -> None:
        """Closes the connection (the body was not consumed)."""
        if self._done:
            return
        self._done = True
        self._conn.close()


# The TLS alerts of a server that requires a client certificate (serve
# --tls-client-ca) and got none, or one it does not accept.
_CLIENT_CERT_ALERTS = ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE")

# OpenSSL's verify codes for a server certificate whose chain ends in no CA
# the client trusts (self-signed, or a private CA's): the usual first
# mistake with serve --tls-cert, answered as the CLI does (serverHint).
_UNTRUSTED_CA_CODES = (18, 19, 20, 21)  # X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT .. UNABLE_TO_VERIFY_LEAF_SIGNATURE


def _transport_error(exc: BaseException) -> Error:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return Error(0, "timeout", f"request timed out: {exc}")
    msg = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_code in _UNTRUSTED_CA_CODES:
        msg += (" (trust the CA that signed the server's --tls-cert: SSL_CERT_FILE=ca.pem, or install it "
                "in the system's store)")
    elif isinstance(exc, ssl.SSLError) and exc.reason in _CLIENT_CERT_ALERTS:
        msg += (" (the server requires a client certificate signed by its --tls-client-ca: pass "
                "client_cert= and client_key=, or set CACHESVC_CLIENT_CERT and CACHESVC_CLIENT_KEY)")
    return Error(0, "connection_failed", msg)


# What to change on a reverse proxy that answered one of these statuses
# itself: cachesvc answers each in JSON, so a page with one of them is the
# proxy's (README, "Behind a reverse proxy"). Go's wire.ForeignAnswer says
# the same.
_PROXY_ADVICE = {
    413: "a proxy in front of cachesvc refused the body as too large: lift its limit "
         "(nginx: client_max_body_size 0; cachesvc applies --max-entry-size itself)",
    502: "a proxy in front of cachesvc could not reach it: check that cachesvc serve runs at the "
         "proxy's upstream address",
    503: "a proxy in front of cachesvc has no server to send to: check that cachesvc serve runs at "
         "the proxy's upstream address",
    504: "a proxy in front of cachesvc stopped waiting for its answer: raise its read timeout above "
         "the longest ?wait= long poll, 300 s (nginx: proxy_read_timeout 330s)",
}


def _with_request_id(err: Error, request_id: str) -> Error:
    """err naming request_id (the id sent, or the one the server answered
    with), unless it names one already."""
    if err.request_id or not request_id:
        return err
    return Error(err.status, err.code, err.message, request_id)


def _error_from_body(status: int, body: bytes, request_id: str = "", head: bool = False) -> Error:
    """The Error of an error answer with this body; request_id is the
    answer's X-Request-Id ("" if none: the body's is used). head: the
    answer is a HEAD's, which has no body to judge by."""
    code, message = f"http_{status}", http.client.responses.get(status, "HTTP error")
    details = None
    try:
        doc = json.loads(body.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or message)
            request_id = request_id or str(err.get("request_id") or "")
            details = err.get("details")
    except (ValueError, UnicodeDecodeError):
        # Another service's page (a proxy's, a wrong port's): its start on
        # one line, and what to check.
        text = " ".join(body[:640].decode("utf-8", "replace").split())
        advice = _PROXY_ADVICE.get(status, "check that the URL is the cachesvc server's")
        if text:
            if len(text) > 160:
                text = text[:159] + "…"
            message = f'not a cachesvc answer ("{text}"): {advice}'
        elif not head:
            # cachesvc's errors always have a JSON body (Go's
            # wire.ForeignAnswer says the same).
            message = f"not a cachesvc answer (an empty body): {advice}"
    return Error(status, code, message, request_id, details)


def _segment(p: str) -> str:
    """One path segment, percent-encoded except for what a segment may hold
    as is (RFC 3986 pchar): run ids such as ``sweep:arm@2+x`` reach the
    server as written (servers before path decoding refused ``%3A`` in a
    run id)."""
    return urllib.parse.quote(p, safe=":@+")


def _float_header(v: str | None) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _text_header(v: str | None) -> str:
    """A text header's value as the server sent it, UTF-8 (``http.client``
    decodes header bytes as Latin-1); "" when absent."""
    if not v:
        return ""
    try:
        return v.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return v


def _json_body(r: _Response) -> dict[str, Any]:
    data = r.read_all(limit=64 << 20)
    if not data:
        return {}
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise Error(r.status, "bad_response", f"response is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise Error(r.status, "bad_response", "response is not a JSON object")
    return doc


# The server warnings already logged (each once per process), and how many
# distinct ones are remembered: past it, new ones are no longer logged.
_warned: set[str] = set()
_warned_lock = threading.Lock()
_MAX_WARNINGS_SEEN = 64


def _warning_text(v: str) -> str:
    """The text of a Warning header value (``code agent "text" ["date"]``,
    RFC 7234 section 5.5) unquoted, or the value itself when it is not of
    that form."""
    parts = v.split(" ", 2)
    if len(parts) < 3 or not parts[2].startswith('"'):
        return v
    out = []
    rest = parts[2]
    i = 1
    while i < len(rest):
        ch = rest[i]
        if ch == '"':
            return "".join(out)
        if ch == "\\" and i + 1 < len(rest):
            i += 1
            ch = rest[i]
        out.append(ch)
        i += 1
    return v  # unterminated


def _note_warnings(method: str, path: str, resp: http.client.HTTPResponse) -> None:
    """Logs, once per process, each distinct Warning header of ``resp``: a
    cachesvc server names there a field of the request's JSON body that it
    ignored because it does not know it (it is older than this client),
    e.g. ``299 - "unknown field \\"priority\\" ignored"``."""
    values = resp.msg.get_all("Warning") if resp.msg is not None else None
    for v in values or ():
        text = _warning_text(v)
        with _warned_lock:
            if text in _warned or len(_warned) >= _MAX_WARNINGS_SEEN:
                continue
            _warned.add(text)
        log.warning("the server ignored part of a request (%s %s): %s", method, path, text)


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError, ValueError):
        return False



class _Transport:
    """Sends requests for a :class:`cachesvc.Client` (its base class).

    The attributes are set by ``Client.__init__``; they are declared here
    because every method of every part reads them.
    """

    url: str
    namespace: str
    token: str | None
    timeout: float | None
    first_byte_timeout: float | None
    retries: int
    backoff: float
    max_backoff: float
    wait_slice: float
    run: str | None
    digest_first: bool
    _verify_keys: list[bytes] | None
    _auth: AuthPause
    _prefix: str
    _pool: _Pool
    _user_agent: str
    _rand: random.Random

    # ---- paths ----------------------------------------------------------------

    def _ns_path(self, *parts: str) -> str:
        return self._ns_path_in(self.namespace, *parts)

    def _entry_path(self, key: str) -> str:
        return self._ns_path("entries", key)

    def _ns_path_in(self, namespace: str | None, *parts: str) -> str:
        segs = [namespace if namespace is not None else self.namespace, *parts]
        return f"{self._prefix}/v1/" + "/".join(_segment(p) for p in segs)
    # ---- the request loop -----------------------------------------------------

    def _headers(self, extra: Mapping[str, str | bytes | None] | None) -> dict[str, str | bytes]:
        h: dict[str, str | bytes] = {"User-Agent": self._user_agent}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.run:
            h["X-Cachesvc-Run"] = self.run
        if extra:
            h.update({k: v for k, v in extra.items() if v is not None})
        return h

    def _sleep_backoff(self, attempt: int, deadline: _Deadline, retry_after: float | None) -> bool:
        """Sleeps before retry number ``attempt``; False if the budget is spent."""
        cap = min(self.max_backoff, self.backoff * (2 ** attempt))
        delay = self._rand.uniform(0, cap)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff))
        rem = deadline.remaining()
        if rem is not None and rem <= delay:
            return False
        time.sleep(delay)
        return True

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        body_file: IO[bytes] | None = None,
        body_len: int | None = None,
        headers: Mapping[str, str | bytes | None] | None = None,
        timeout: float | None = None,
        first_byte_timeout: float | None = None,
        ok: tuple[int, ...] = (200,),
        allow: tuple[int, ...] = (),
    ) -> _Response:
        """Sends a request with retries; returns a response whose status is
        in ``ok`` or ``allow`` (body unread) or raises :class:`Error`.

        ``first_byte_timeout`` bounds each attempt's connect, send and wait
        for the response headers (within the budget); the body is then read
        within what remains of the budget. A first-byte timeout is not
        retried: a server that does not answer a small request in time is
        hung or overloaded, and waiting again only delays the caller.

        ``body_file`` must be seekable if it is to be retried; it is rewound
        to its starting position before each attempt.
        """
        if self._auth.check(f"{method} {path}"):  # paused after a 401, but the token file changed
            self.token = self._auth.read()
        budget = self.timeout if timeout is None else timeout
        deadline = _Deadline(budget)
        hdrs = self._headers(headers)
        # One id for the call, kept across its retries: the operator finds
        # every attempt's log line by the id the raised Error names.
        request_id = str(hdrs.setdefault("X-Request-Id", str(uuid.uuid4())))
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        elif body_file is not None:
            hdrs["Content-Length"] = str(body_len)
        start_pos = body_file.tell() if body_file is not None else None
        attempt = 0
        stale_retry_used = False
        token_reread = False
        while True:
            rem = deadline.remaining()
            if rem is not None and rem <= 0:
                raise Error(0, "timeout", f"{method} {path}: time budget of {budget}s exhausted{_MORE_TIME}", request_id)
            sock_timeout = rem if rem is not None else None
            short = first_byte_timeout is not None and (sock_timeout is None or first_byte_timeout < sock_timeout)
            if short:
                sock_timeout = first_byte_timeout
            conn, reused = self._pool.acquire(sock_timeout)  # type: ignore[arg-type]
            retry_after: float | None = None
            try:
                if body_file is not None and start_pos is not None:
                    body_file.seek(start_pos)
                conn.request(method, path, body=body if body is not None else body_file, headers=hdrs)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                err = _with_request_id(_transport_error(exc), request_id)
                if err.code == "connection_failed":
                    # "Connection refused" alone does not say where: a training
                    # job's one warning must show the URL it was given.
                    origin = urllib.parse.urlsplit(self.url)._replace(path="", query="", fragment="").geturl()
                    msg = f"{method} {origin}{path}: {err.message}"
                    if isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
                        # Nothing listens there, or no such host: as the CLI says.
                        msg += (f" (is cachesvc serve running at {origin}? Set the client's url or CACHESVC_URL "
                                "to the server's URL)")
                    err = Error(0, err.code, msg, request_id)
                # A kept-alive connection the server closed meanwhile fails at
                # once: retry that immediately, once, without counting it.
                if reused and not stale_retry_used and err.code == "connection_failed":
                    stale_retry_used = True
                    continue
                if short and err.code == "timeout":
                    raise Error(0, "timeout", f"{method} {path}: no response within the first-byte "
                                f"timeout of {first_byte_timeout}s", request_id) from exc
                if attempt >= self.retries or (body_file is not None and not _seekable(body_file)):
                    raise err from exc
                if not self._sleep_backoff(attempt, deadline, None):
                    raise err from exc
                attempt += 1
                continue
            if short and conn.sock is not None:  # the body: the rest of the budget
                rest = deadline.remaining()
                conn.sock.settimeout(None if rest is None else max(rest, 0.001))
            r = _Response(self, conn, resp, deadline)
            _note_warnings(method, path, resp)
            if r.status != 401:
                self._auth.succeeded()
            if r.status == 404 and 404 in allow:
                return self._absent(r, method, path, request_id)
            if r.status in ok or r.status in allow:
                return r
            # An error: read the (small) JSON body.
            try:
                data = r.read_all(limit=1 << 20)
            except Error:
                data = b""
            answered_id = _text_header(r.header("X-Request-Id"))
            err = _with_request_id(_error_from_body(r.status, data, answered_id, head=method == "HEAD"), request_id)
            if method == "HEAD" and r.header("X-Cachesvc-Error"):  # no body: the code comes in a header
                err = Error(r.status, str(r.header("X-Cachesvc-Error")), f"HEAD {path}: {err.message}", err.request_id)
            if r.status == 401 and 401 not in ok and 401 not in allow:
                if not token_reread and self._auth.file_changed() and (body_file is None or _seekable(body_file)):
                    # Rotated since it was read: send again with the new
                    # token, once, without counting a retry.
                    token_reread = True
                    self.token = self._auth.read()
                    hdrs["Authorization"] = f"Bearer {self.token}"
                    continue
                self._auth.failed(err)
                raise err
            if r.status in (429, 503) and attempt < self.retries and (body_file is None or _seekable(body_file)):
                retry_after = _float_header(resp.getheader("Retry-After"))
                if self._sleep_backoff(attempt, deadline, retry_after):
                    attempt += 1
                    continue
            raise err

    def _absent(self, r: _Response, method: str, path: str, request_id: str) -> _Response:
        """A 404 the caller takes for "no such entry" (``allow``): returned
        with its body read, unless it is not the server's answer about an
        entry (an unknown route, or no cachesvc error at all): then the URL
        is wrong, and every call would otherwise look like a miss."""
        if method == "HEAD":
            # No body: the server names the code in a header. A server
            # without it (older, or not cachesvc) leaves HEAD's 404 a miss.
            code = r.header("X-Cachesvc-Error") or "not_found"
            err = Error(404, code, f"HEAD {path}: no such route", request_id)
            data = b""
        else:
            data = r.read_all(limit=1 << 20)
            err = _with_request_id(_error_from_body(404, data, _text_header(r.header("X-Request-Id"))), request_id)
        if err.code == "route_not_found" or err.code.startswith("http_"):
            raise Error(404, err.code, f"{err.message} ({self.url} does not answer like a cachesvc server: "
                        "give the server's root URL, e.g. http://host:8080, without /v1)", err.request_id)
        r._body = data
        return r

    def _json(self, method: str, path: str, doc: Any, *, ok: tuple[int, ...] = (200,),
              allow: tuple[int, ...] = (), timeout: float | None = None,
              first_byte_timeout: float | None = None) -> _Response:
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return self._request(method, path, body=body, ok=ok, allow=allow, timeout=timeout,
                             first_byte_timeout=first_byte_timeout,
                             headers={"Content-Type": "application/json", "Accept": "application/json"})
    # ---- signatures ---------------------------------------------------------------

    def _check_signature(self, key: str, sha256: str, signature: str | None) -> None:
        """With verify keys, raises Error ``bad_signature`` unless
        ``signature`` signs key ‖ sha256 under one of them."""
        if self._verify_keys is None:
            return
        if not signature:
            raise Error(200, "bad_signature",
                        f"entry {key} is not signed, but the client requires signatures (verify_key)")
        if not _ed25519.verify_entry_any(self._verify_keys, key, sha256, signature):
            under = ("the verify key" if len(self._verify_keys) == 1
                     else f"any of the {len(self._verify_keys)} verify keys")
            raise Error(200, "bad_signature",
                        f"entry {key}: the signature does not match its key and sha256 {sha256} under {under}")
