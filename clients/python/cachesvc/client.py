"""HTTP client for a cachesvc server (standard library only).

The client speaks the v1 REST API described in DESIGN.md:

* ``GET``/``HEAD``/``PUT``/``DELETE /v1/{ns}/entries/{key}``
* ``POST /v1/{ns}/keys`` and ``POST /v1/{ns}/lookup`` (signature -> key / value)

A :class:`Client` is safe to use from many threads: it keeps a small pool of
keep-alive ``http.client`` connections, each used by one request at a time.
Connection errors, ``503 Service Unavailable`` and ``429 Too Many Requests``
(honouring ``Retry-After``) are retried with exponential
backoff and full jitter, a bounded number of times and within the call's time
budget. Every other failure raises :class:`Error`, which carries the server's
JSON error ``code`` and ``message``.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import os
import random
import re
import socket
import tarfile
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Union

from . import _ed25519

__all__ = [
    "BatchMember",
    "Client",
    "Lease",
    "Error",
    "EntryInfo",
    "KeyResult",
    "LookupResult",
    "PutResult",
    "ReportResult",
    "default_client_id",
]

_CHUNK = 256 * 1024
_USER_AGENT = "cachesvc-python/0.1"

GZIP_SIGNATURE_BYTES = 64 << 10
"""Signatures larger than this are sent gzip-compressed (``Content-Encoding: gzip``)."""

_DIGEST_HEADER = "X-Cachesvc-Signature-Sha256"
_BACKEND_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_FALSE = ("0", "false", "no", "off")
# Answers by which a server that predates digest-first requests refuses an
# empty body, and one without gzip refuses a compressed signature.
_NO_DIGEST_ANSWERS = {(400, "malformed_signature"), (404, "route_not_found"), (415, "unsupported_media_type")}
_NO_GZIP_ANSWERS = {(400, "malformed_signature"), (415, "unsupported_encoding"), (415, "unsupported_media_type")}

Body = Union[bytes, bytearray, memoryview, BinaryIO, IO[bytes]]


class Error(Exception):
    """A failed cachesvc request.

    Attributes:
        status: the HTTP status (0 when no response was received: connection
            failure or timeout).
        code: the server's snake_case error code (``"not_found"``,
            ``"digest_mismatch"`` ...), or a client-side code:
            ``"connection_failed"``, ``"timeout"``, ``"circuit_open"``,
            ``"bad_response"``, ``"http_<status>"`` when the body was not a
            cachesvc error document.
        message: a human sentence.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def retryable(self) -> bool:
        """Whether the failure is transient (connection trouble, 503 or 429)."""
        return self.status in (429, 503) or (
            self.status == 0 and self.code in ("connection_failed", "timeout")
        )


@dataclass(frozen=True)
class EntryInfo:
    """Metadata of a stored entry, from ``HEAD``/``GET`` response headers."""

    key: str
    size: int
    sha256: str
    compile_seconds: float | None = None
    etag: str | None = None
    name: str = ""  # X-Cachesvc-Name, the entry's display name
    backend: str = ""  # X-Cachesvc-Backend


@dataclass(frozen=True)
class PutResult:
    """Outcome of :meth:`Client.put`.

    ``created`` is True for ``201 Created`` and False when an identical entry
    already existed (``200``).
    """

    key: str
    created: bool
    size: int
    sha256: str


@dataclass(frozen=True)
class ReportResult:
    """What :meth:`Client.report` returns: the entry's report counts."""

    key: str
    reports: int
    distinct_reporters: int
    threshold: int
    quarantined: bool


@dataclass(frozen=True)
class KeyResult:
    """The server's answer to ``POST /v1/{ns}/keys``."""

    key: str
    backend: str = ""
    plugin: str = ""
    display_name: str = ""
    components: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LookupResult:
    """The server's answer to ``POST /v1/{ns}/lookup``.

    On a hit ``value`` holds the entry's bytes; on a miss it is None and
    ``components``/``explanation`` say why (when the server explains).
    """

    key: str
    value: bytes | None
    components: dict[str, str] = field(default_factory=dict)
    explanation: Any = None
    compile_seconds: float | None = None

    @property
    def hit(self) -> bool:
        """True when the value was found."""
        return self.value is not None


class _Deadline:
    """A point in monotonic time after which a call gives up."""

    __slots__ = ("end",)

    def __init__(self, budget: float | None) -> None:
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

    def __init__(self, scheme: str, host: str, port: int | None, max_idle: int) -> None:
        self._scheme = scheme
        self._host = host
        self._port = port
        self._max_idle = max_idle
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
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout, blocksize=_CHUNK)
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

    def __init__(self, client: "Client", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, deadline: _Deadline) -> None:
        self._client = client
        self._conn = conn
        self.resp = resp
        self.status = resp.status
        self._deadline = deadline
        self._done = False

    def header(self, name: str) -> str | None:
        return self.resp.getheader(name)

    def read_chunks(self):
        """Yields the body in chunks, enforcing the call's time budget."""
        try:
            while True:
                if self._deadline.expired():
                    raise Error(0, "timeout", "the time budget ran out while reading the response")
                chunk = self.resp.read(_CHUNK)
                if not chunk:
                    break
                yield chunk
        except Error:
            self.abort()
            raise
        except (OSError, http.client.HTTPException) as exc:
            self.abort()
            raise _transport_error(exc) from exc
        self.finish()

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


def _transport_error(exc: BaseException) -> Error:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return Error(0, "timeout", f"request timed out: {exc}")
    return Error(0, "connection_failed", f"{type(exc).__name__}: {exc}")


def _error_from_body(status: int, body: bytes) -> Error:
    code, message = f"http_{status}", http.client.responses.get(status, "HTTP error")
    try:
        doc = json.loads(body.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or message)
    except (ValueError, UnicodeDecodeError):
        text = body[:200].decode("utf-8", "replace").strip()
        if text:
            message = text
    return Error(status, code, message)


# The server's bounds on X-Cachesvc-Name and X-Compile-Seconds.
_MAX_NAME_BYTES = 256
_MAX_COMPILE_SECONDS = 7 * 24 * 3600


def _name_header(name: str | None) -> bytes | None:
    """X-Cachesvc-Name as the server takes it: UTF-8 (http.client would send
    a str as Latin-1), printable characters only, at most 256 bytes cut at a
    character boundary. A display name never fails an upload."""
    if not name:
        return None
    clean = "".join(c if c.isprintable() else "\ufffd" for c in name)
    data = clean.encode("utf-8")[:_MAX_NAME_BYTES]
    return data.decode("utf-8", "ignore").encode("utf-8") or None


def _float_header(v: str | None) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except ValueError:
        return None


class Client:
    """A client of one cachesvc server and namespace.

    Args:
        url: the server's base URL, e.g. ``"http://cache:8080"``.
        namespace: the namespace entries live in (``"default"`` exists).
        token: a bearer token sent as ``Authorization: Bearer <token>``.
        timeout: the time budget of one call in seconds, retries included;
            also the socket timeout of each attempt. ``None`` waits forever.
        retries: how many times a call is retried after a connection error or a
            503 or 429 (so at most ``retries + 1`` attempts).
        backoff: the first retry's maximum delay in seconds; it doubles with
            every retry (capped at ``max_backoff``) and each delay is drawn
            uniformly from ``[0, cap]`` (full jitter).
        run: a run id sent as ``X-Cachesvc-Run`` with every request, so the
            server can record the run's manifest.
        max_idle: how many idle keep-alive connections are kept.
        user_agent: the ``User-Agent`` header.
        token_file: a file whose first line is the bearer token, used when
            ``token`` is not given.
        verify_key: an Ed25519 public key (base64 of its 32 bytes, as
            ``cachesvc signkey new`` prints, or the PEM ``.pub`` file's
            text). With it every entry the client returns (get, download,
            lookup, batch) must carry a valid ``X-Cachesvc-Signature`` over
            its key and SHA-256, else :class:`Error` ``bad_signature`` is
            raised and the bytes are not returned.
        digest_first: for :meth:`key` and :meth:`lookup`, send only the
            signature's SHA-256 first (``X-Cachesvc-Signature-Sha256``, an
            empty body) and the signature itself only when the server asks
            (428 ``signature_required``), so a repeated lookup of a large
            module uploads a few hundred bytes. A server that predates it is
            detected once and then always sent the signature. ``None``: on
            unless the environment sets ``CACHESVC_DIGEST_FIRST=0``.
        first_byte_timeout: for lookups (:meth:`lookup`,
            :meth:`lookup_result`), how long each attempt may wait to
            connect and receive the response headers; a hit's body is then
            streamed within the rest of ``timeout``. Such a timeout is not
            retried. ``None``: only ``timeout`` applies.

    The client is safe for concurrent use by many threads. Close it with
    :meth:`close` (or use it as a context manager) to drop idle connections.
    """

    def __init__(
        self,
        url: str,
        namespace: str = "default",
        token: str | None = None,
        timeout: float | None = 30.0,
        *,
        retries: int = 3,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
        run: str | None = None,
        max_idle: int = 8,
        user_agent: str = _USER_AGENT,
        token_file: str | os.PathLike[str] | None = None,
        verify_key: str | bytes | None = None,
        first_byte_timeout: float | None = None,
        digest_first: bool | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"cachesvc: url must be http(s)://host[:port], got {url!r}")
        self.url = url.rstrip("/")
        self.namespace = namespace
        if not token and token_file:
            token = read_token_file(token_file)
        self.token = token
        self._verify_key = _ed25519.parse_public_key(verify_key) if verify_key else None
        self.timeout = timeout
        self.first_byte_timeout = first_byte_timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.run = run
        self._prefix = parsed.path.rstrip("/")
        self._pool = _Pool(parsed.scheme, parsed.hostname, parsed.port, max_idle)
        self._user_agent = user_agent
        self._rand = random.Random()
        if digest_first is None:
            digest_first = os.environ.get("CACHESVC_DIGEST_FIRST", "1").strip().lower() not in _FALSE
        self.digest_first = digest_first
        # What the server turned out not to support (an older server): set
        # once, by the first request that finds out.
        self._no_digest = False
        self._no_gzip = False

    # ---- context management -------------------------------------------------

    def close(self) -> None:
        """Closes idle connections. The client stays usable."""
        self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r}, namespace={self.namespace!r})"

    # ---- paths ----------------------------------------------------------------

    def _ns_path(self, *parts: str) -> str:
        segs = [urllib.parse.quote(self.namespace, safe="")]
        segs += [urllib.parse.quote(p, safe="") for p in parts]
        return f"{self._prefix}/v1/" + "/".join(segs)

    def _entry_path(self, key: str) -> str:
        return self._ns_path("entries", key)

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
        budget = self.timeout if timeout is None else timeout
        deadline = _Deadline(budget)
        hdrs = self._headers(headers)
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        elif body_file is not None:
            hdrs["Content-Length"] = str(body_len)
        start_pos = body_file.tell() if body_file is not None else None
        attempt = 0
        stale_retry_used = False
        while True:
            rem = deadline.remaining()
            if rem is not None and rem <= 0:
                raise Error(0, "timeout", f"{method} {path}: time budget of {budget}s exhausted")
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
                err = _transport_error(exc)
                # A kept-alive connection the server closed meanwhile fails at
                # once: retry that immediately, once, without counting it.
                if reused and not stale_retry_used and err.code == "connection_failed":
                    stale_retry_used = True
                    continue
                if short and err.code == "timeout":
                    raise Error(0, "timeout", f"{method} {path}: no response within the first-byte "
                                f"timeout of {first_byte_timeout}s") from exc
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
            if r.status in ok or r.status in allow:
                return r
            # An error: read the (small) JSON body.
            try:
                data = r.read_all(limit=1 << 20)
            except Error:
                data = b""
            err = _error_from_body(r.status, data)
            if r.status in (429, 503) and attempt < self.retries and (body_file is None or _seekable(body_file)):
                retry_after = _float_header(resp.getheader("Retry-After"))
                if self._sleep_backoff(attempt, deadline, retry_after):
                    attempt += 1
                    continue
            raise err

    def _json(self, method: str, path: str, doc: Any, *, ok: tuple[int, ...] = (200,),
              allow: tuple[int, ...] = (), timeout: float | None = None,
              first_byte_timeout: float | None = None) -> _Response:
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return self._request(method, path, body=body, ok=ok, allow=allow, timeout=timeout,
                             first_byte_timeout=first_byte_timeout,
                             headers={"Content-Type": "application/json", "Accept": "application/json"})

    # ---- entries ----------------------------------------------------------------

    def get(self, key: str, *, timeout: float | None = None, wait: float | None = None) -> bytes | None:
        """Returns the entry's bytes, or None on a miss (404).

        The body is verified against the ``X-Content-SHA256`` header. With
        ``wait`` (seconds), a miss behind a compile lease long-polls
        (``?wait=``) until the holder writes the entry (bytes) or the lease
        ends without it or the wait runs out (None); the call's budget is
        ``timeout + wait``.

        Raises:
            Error: on any other failure (bad key -> ``400``, auth, server errors
                after retries, ``digest_mismatch`` when the bytes received do
                not match the announced digest).
        """
        buf = io.BytesIO()
        info = self.download(key, buf, timeout=timeout, wait=wait)
        return None if info is None else buf.getvalue()

    def download(self, key: str, out: IO[bytes], *, timeout: float | None = None,
                 wait: float | None = None) -> EntryInfo | None:
        """Streams the entry into ``out`` (a writable binary file object).

        Returns its :class:`EntryInfo`, or None on a miss. The bytes are
        hashed while streaming and checked against ``X-Content-SHA256``; on a
        mismatch :class:`Error` ``digest_mismatch`` is raised (``out`` then
        holds the bad bytes: write to a temporary file and rename on success).
        """
        path = self._entry_path(key)
        if wait is not None and wait > 0:
            path += f"?wait={wait:.3f}s"
            budget = self.timeout if timeout is None else timeout
            timeout = None if budget is None else budget + wait
        r = self._request("GET", path, timeout=timeout, allow=(404,))
        if r.status == 404:
            r.read_all(limit=1 << 20)
            return None
        want = (r.header("X-Content-SHA256") or "").lower()
        h = hashlib.sha256()
        n = 0
        for chunk in r.read_chunks():
            h.update(chunk)
            out.write(chunk)
            n += len(chunk)
        got = h.hexdigest()
        if want and got != want:
            raise Error(r.status, "digest_mismatch",
                        f"entry {key}: received bytes hash to {got}, server announced {want}")
        self._check_signature(key, got, r.header("X-Cachesvc-Signature"))
        return EntryInfo(key=key, size=n, sha256=got,
                         compile_seconds=_float_header(r.header("X-Compile-Seconds")),
                         etag=r.header("ETag"))

    def head(self, key: str, *, timeout: float | None = None) -> EntryInfo | None:
        """Returns the entry's metadata without its body, or None on a miss."""
        r = self._request("HEAD", self._entry_path(key), timeout=timeout, allow=(404,))
        r.resp.read()
        r.finish()
        if r.status == 404:
            return None
        return EntryInfo(
            key=key,
            size=int(r.header("Content-Length") or 0),
            sha256=(r.header("X-Content-SHA256") or "").lower(),
            compile_seconds=_float_header(r.header("X-Compile-Seconds")),
            etag=r.header("ETag"),
            name=r.header("X-Cachesvc-Name") or "",
            backend=r.header("X-Cachesvc-Backend") or "",
        )

    def put(
        self,
        key: str,
        data: Body,
        *,
        compile_seconds: float | None = None,
        backend: str | None = None,
        name: str | None = None,
        sha256: str | None = None,
        size: int | None = None,
        timeout: float | None = None,
    ) -> PutResult:
        """Stores an entry, streaming it from ``bytes`` or a binary file object.

        A seekable file is read twice (once to hash it, once to send it) and
        never held in memory; a non-seekable stream is spooled to a temporary
        file first unless both ``sha256`` and ``size`` are given (it then
        cannot be retried). Entries are immutable: re-uploading identical bytes
        returns ``created=False``; different bytes raise :class:`Error`
        ``409``.

        Args:
            key: 64 lowercase hex digits.
            data: the bytes, or a binary file object positioned at the start.
            compile_seconds: sent as ``X-Compile-Seconds`` (how long it took
                to produce the value; the dashboard counts it as time saved on
                every hit).
            backend: sent as ``X-Cachesvc-Backend`` (e.g. ``"xla"``).
            name: a display name sent as ``X-Cachesvc-Name``.
            sha256: the hex digest if already known (skips hashing).
            size: the byte count if already known.
        """
        spool: IO[bytes] | None = None
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                raw = bytes(data)
                digest = sha256 or hashlib.sha256(raw).hexdigest()
                body_bytes: bytes | None = raw
                body_file: IO[bytes] | None = None
                length = len(raw)
            else:
                body_bytes = None
                f: IO[bytes] = data  # type: ignore[assignment]
                if _seekable(f):
                    start = f.tell()
                    if sha256 is None or size is None:
                        h = hashlib.sha256()
                        n = 0
                        while True:
                            chunk = f.read(_CHUNK)
                            if not chunk:
                                break
                            h.update(chunk)
                            n += len(chunk)
                        digest, length = h.hexdigest(), n
                    else:
                        digest, length = sha256, size
                    f.seek(start)
                    body_file = f
                elif sha256 is not None and size is not None:
                    digest, length, body_file = sha256, size, f
                else:
                    spool = tempfile.TemporaryFile()
                    h = hashlib.sha256()
                    n = 0
                    while True:
                        chunk = f.read(_CHUNK)
                        if not chunk:
                            break
                        h.update(chunk)
                        spool.write(chunk)
                        n += len(chunk)
                    spool.seek(0)
                    digest, length, body_file = h.hexdigest(), n, spool
            headers: dict[str, str | bytes | None] = {
                "Content-Type": "application/octet-stream",
                "X-Content-SHA256": digest,
                "X-Compile-Seconds": None if compile_seconds is None
                else f"{min(max(compile_seconds, 0.0), _MAX_COMPILE_SECONDS):.6f}",
                "X-Cachesvc-Backend": backend,
                "X-Cachesvc-Name": _name_header(name),
            }
            r = self._request("PUT", self._entry_path(key), body=body_bytes, body_file=body_file,
                              body_len=length, headers=headers, timeout=timeout, ok=(200, 201))
            r.read_all(limit=1 << 20)
            return PutResult(key=key, created=r.status == 201, size=length, sha256=digest)
        finally:
            if spool is not None:
                spool.close()

    def delete(self, key: str, *, timeout: float | None = None) -> bool:
        """Deletes an entry (an admin operation). Returns False if it was absent."""
        r = self._request("DELETE", self._entry_path(key), timeout=timeout, ok=(200, 202, 204), allow=(404,))
        r.read_all(limit=1 << 20)
        return r.status != 404

    # ---- reports and quarantine -------------------------------------------------

    def report(self, key: str, reason: str, *, client: str | None = None,
               namespace: str | None = None, timeout: float | None = None) -> "ReportResult | None":
        """Reports that the entry ``key`` was fetched but could not be loaded
        (``POST .../entries/{key}/reports``). After reports from the server's
        ``--quarantine-after`` distinct clients, or one from an admin token,
        the server quarantines the entry (never serves it again until an
        admin restores it). ``reason`` is cut to 256 bytes; ``client``
        (default :func:`default_client_id`) is this process's stable id.
        Returns None when the server has no such entry (404)."""
        body = {"reason": _truncate(reason or "unknown", 256), "client": _truncate(client or default_client_id(), 128)}
        r = self._json("POST", self._ns_path_in(namespace, "entries", key, "reports"), body,
                       timeout=timeout, allow=(404,))
        doc = _json_body(r)
        if r.status == 404:
            return None
        return ReportResult(key=str(doc.get("key", key)), reports=int(doc.get("reports", 0)),
                            distinct_reporters=int(doc.get("distinct_reporters", 0)),
                            threshold=int(doc.get("threshold", 0)), quarantined=bool(doc.get("quarantined")))

    def reports(self, key: str, *, namespace: str | None = None, timeout: float | None = None) -> dict[str, Any] | None:
        """An entry's reports and quarantine state (admin), or None on a 404."""
        r = self._request("GET", self._ns_path_in(namespace, "entries", key, "reports"), timeout=timeout,
                          allow=(404,), headers={"Accept": "application/json"})
        doc = _json_body(r)
        return None if r.status == 404 else doc

    def quarantine(self, key: str, reason: str, *, namespace: str | None = None,
                   timeout: float | None = None) -> bool:
        """Quarantines an entry now (admin). False when there is no such entry."""
        r = self._json("POST", self._ns_path_in(namespace, "entries", key, "quarantine"),
                       {"reason": _truncate(reason, 256)}, timeout=timeout, allow=(404,))
        _json_body(r)
        return r.status != 404

    def restore(self, key: str, *, namespace: str | None = None, timeout: float | None = None) -> bool:
        """Serves a quarantined entry again, its reports cleared (admin).
        False when it is not quarantined (or its bytes are gone)."""
        r = self._request("POST", self._ns_path_in(namespace, "entries", key, "restore"), timeout=timeout,
                          allow=(404,), headers={"Accept": "application/json"})
        _json_body(r)
        return r.status != 404

    def quarantined(self, *, namespace: str | None = None, after: str | None = None, limit: int = 1000,
                    timeout: float | None = None) -> dict[str, Any]:
        """One page of the namespace's quarantined entries (admin):
        ``{"entries": [...], "next": cursor}``."""
        q = urllib.parse.urlencode({k: v for k, v in (("after", after), ("limit", str(limit))) if v})
        r = self._request("GET", self._ns_path_in(namespace, "quarantine") + "?" + q, timeout=timeout,
                          headers={"Accept": "application/json"})
        return _json_body(r)

    def _ns_path_in(self, namespace: str | None, *parts: str) -> str:
        if namespace is None or namespace == self.namespace:
            return self._ns_path(*parts)
        segs = [urllib.parse.quote(namespace, safe="")] + [urllib.parse.quote(p, safe="") for p in parts]
        return f"{self._prefix}/v1/" + "/".join(segs)

    # ---- signatures -------------------------------------------------------------

    def _signature(self, path: str, signature: Mapping[str, Any], *, timeout: float | None,
                   first_byte_timeout: float | None, allow: tuple[int, ...] = ()) -> _Response:
        """POSTs a signature to ``path`` (keys or lookup): digest first when
        enabled, then, if the server asks or predates digests, the signature
        itself (gzip-compressed past :data:`GZIP_SIGNATURE_BYTES`).

        The digest is the SHA-256 of the exact JSON bytes the full request
        would send (compact, sorted keys, UTF-8), before compression."""
        body = json.dumps(dict(signature), separators=(",", ":"), sort_keys=True).encode("utf-8")
        hdrs: dict[str, str | bytes | None] = {"Content-Type": "application/json", "Accept": "application/json",
                                               _DIGEST_HEADER: hashlib.sha256(body).hexdigest()}
        backend = signature.get("backend")
        if self.digest_first and not self._no_digest:
            dh = dict(hdrs)
            if isinstance(backend, str) and _BACKEND_RE.match(backend):
                dh["X-Cachesvc-Backend"] = backend
            try:
                return self._request("POST", path, body=b"", headers=dh, timeout=timeout,
                                     first_byte_timeout=first_byte_timeout, allow=allow)
            except Error as e:
                if e.status == 428:
                    pass  # the server does not know this signature yet: send it
                elif (e.status, e.code) in _NO_DIGEST_ANSWERS:
                    self._no_digest = True  # an older server; and it has no gzip either
                    self._no_gzip = True
                else:
                    raise
        if len(body) > GZIP_SIGNATURE_BYTES and not self._no_gzip:
            gz = dict(hdrs, **{"Content-Encoding": "gzip"})
            try:
                return self._request("POST", path, body=gzip.compress(body, compresslevel=1), headers=gz,
                                     timeout=timeout, first_byte_timeout=first_byte_timeout, allow=allow)
            except Error as e:
                if (e.status, e.code) not in _NO_GZIP_ANSWERS:
                    raise
                self._no_gzip = True
        return self._request("POST", path, body=body, headers=hdrs, timeout=timeout,
                             first_byte_timeout=first_byte_timeout, allow=allow)

    def key(self, signature: Mapping[str, Any], *, timeout: float | None = None,
            first_byte_timeout: float | None = None) -> KeyResult:
        """Asks the server's plugin for the key of a signature.

        ``signature`` is a JSON object with a ``backend`` field (``"xla"``,
        ``"passthrough"`` ...) and the backend's fields.
        """
        r = self._signature(self._ns_path("keys"), signature, timeout=timeout,
                            first_byte_timeout=first_byte_timeout)
        doc = _json_body(r)
        return KeyResult(
            key=str(doc.get("key", "")),
            backend=str(doc.get("backend", "")),
            plugin=str(doc.get("plugin", "")),
            display_name=str(doc.get("display_name", "")),
            components=dict(doc.get("components") or {}),
        )

    def lookup(self, signature: Mapping[str, Any], *, timeout: float | None = None,
               first_byte_timeout: float | None = None) -> bytes | None:
        """Returns the value stored under a signature's key, or None on a miss.

        ``timeout`` is the call's budget (streaming a large hit included);
        ``first_byte_timeout``, when given, bounds the wait for the response
        headers (default: the client's :attr:`first_byte_timeout`)."""
        return self.lookup_result(signature, timeout=timeout, first_byte_timeout=first_byte_timeout).value

    def lookup_result(self, signature: Mapping[str, Any], *, timeout: float | None = None,
                      first_byte_timeout: float | None = None) -> LookupResult:
        """Like :meth:`lookup` but also returns the key (hit or miss) and, on a
        miss, the server's components and explanation."""
        if first_byte_timeout is None:
            first_byte_timeout = self.first_byte_timeout
        r = self._signature(self._ns_path("lookup"), signature, timeout=timeout, allow=(404,),
                            first_byte_timeout=first_byte_timeout)
        if r.status == 404:
            doc = _json_body(r)
            if "key" not in doc and isinstance(doc.get("error"), dict):
                # A 404 that is an error (e.g. unknown namespace), not a miss.
                err = doc["error"]
                raise Error(404, str(err.get("code", "not_found")), str(err.get("message", "")))
            return LookupResult(key=str(doc.get("key", "")), value=None,
                                components=dict(doc.get("components") or {}),
                                explanation=doc.get("explanation"))
        key = (r.header("X-Cachesvc-Key") or "").lower()
        want = (r.header("X-Content-SHA256") or "").lower()
        buf = bytearray()
        h = hashlib.sha256()
        for chunk in r.read_chunks():
            h.update(chunk)
            buf += chunk
        if want and h.hexdigest() != want:
            raise Error(200, "digest_mismatch",
                        f"lookup {key}: received bytes hash to {h.hexdigest()}, server announced {want}")
        self._check_signature(key, h.hexdigest(), r.header("X-Cachesvc-Signature"))
        return LookupResult(key=key, value=bytes(buf),
                            compile_seconds=_float_header(r.header("X-Compile-Seconds")))

    # ---- batch, exists, runs, leases --------------------------------------------

    MAX_BATCH_KEYS = 10_000
    """The server's limit of keys per batch/exists request; longer lists are split."""

    def exists(self, keys: Iterable[str], *, timeout: float | None = None) -> set[str]:
        """Returns the subset of ``keys`` the server holds (``POST /exists``),
        without transferring any value. Long lists are split into requests
        of :attr:`MAX_BATCH_KEYS`."""
        present: set[str] = set()
        for chunk in _chunks(list(dict.fromkeys(keys)), self.MAX_BATCH_KEYS):
            r = self._json("POST", self._ns_path("exists"), {"keys": chunk}, timeout=timeout)
            doc = _json_body(r)
            present.update(str(k) for k in doc.get("present") or [])
        return present

    def batch(self, keys: Iterable[str], handle: Callable[["BatchMember", IO[bytes]], None], *,
              timeout: float | None = None) -> list[str]:
        """Fetches many entries in one streamed request per :attr:`MAX_BATCH_KEYS` keys.

        ``handle(member, reader)`` is called for each entry found, in stream
        order; ``reader`` is valid only during the call (whatever ``handle``
        leaves unread is skipped). Each member is verified against its
        SHA-256 PAX record before the next one is read; a mismatch or a stream
        that ends before its ``missing.json`` raises :class:`Error`
        (``digest_mismatch`` / ``broken_stream``): then entries already
        handled are good, but absent ones must not be trusted as missing.

        Returns the keys the server did not have. Memory stays bounded: the
        stream is never held whole.
        """
        missing: list[str] = []
        for chunk in _chunks(list(dict.fromkeys(keys)), self.MAX_BATCH_KEYS):
            missing += self._batch_one(chunk, handle, timeout)
        return missing

    def _batch_one(self, keys: list[str], handle: Callable[["BatchMember", IO[bytes]], None],
                   timeout: float | None) -> list[str]:
        r = self._json("POST", self._ns_path("batch"), {"keys": keys}, timeout=timeout)
        stream = _ResponseReader(r)
        try:
            try:
                tf = tarfile.open(fileobj=stream, mode="r|")  # type: ignore[call-overload]
                for ti in tf:
                    if ti.name == "missing.json":
                        f = tf.extractfile(ti)
                        doc = json.loads(f.read(64 << 20).decode("utf-8")) if f else {}
                        _drain(stream)
                        return [str(k) for k in doc.get("missing") or []]
                    pax = ti.pax_headers or {}
                    member = BatchMember(
                        key=ti.name, size=ti.size,
                        sha256=str(pax.get("CACHESVC.sha256", "")).lower(),
                        compile_seconds=_float_header(pax.get("CACHESVC.compile_seconds")),
                        name=str(pax.get("CACHESVC.name", "")),
                        backend=str(pax.get("CACHESVC.backend", "")),
                    )
                    # The signature covers the announced SHA-256, checked
                    # before handle sees a byte; the bytes are checked
                    # against that SHA-256 after.
                    self._check_signature(member.key, member.sha256, pax.get("CACHESVC.signature"))
                    f = tf.extractfile(ti)
                    hr = _HashingReader(f if f is not None else io.BytesIO())
                    handle(member, hr)  # type: ignore[arg-type]
                    hr.drain()
                    if member.sha256 and hr.hexdigest() != member.sha256:
                        raise Error(r.status, "digest_mismatch",
                                    f"batch member {member.key} hashes to {hr.hexdigest()}, header says {member.sha256}")
            except (tarfile.TarError, EOFError, ValueError) as exc:
                raise Error(r.status, "broken_stream", f"batch stream is incomplete: {exc}") from exc
            raise Error(r.status, "broken_stream", "batch stream ended without its missing.json member")
        finally:
            r.abort()  # no-op once finished

    def batch_get(self, keys: Iterable[str], *, timeout: float | None = None) -> dict[str, bytes]:
        """Fetches many entries into memory with :meth:`batch`; returns
        ``{key: bytes}`` for the keys found (absent keys are simply missing)."""
        out: dict[str, bytes] = {}

        def keep(m: BatchMember, f: IO[bytes]) -> None:
            out[m.key] = f.read()

        self.batch(keys, keep, timeout=timeout)
        return out

    def manifest(self, run: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Returns a run's manifest (``GET /v1/{ns}/runs/{run}/manifest``):
        ``{"run", "namespace", "keys": [{"key", "name", "looked_up", "written"}], "truncated"}``."""
        r = self._request("GET", self._ns_path("runs", run, "manifest"), timeout=timeout,
                          headers={"Accept": "application/json"})
        return _json_body(r)

    def lease(self, key: str, *, holder: str | None = None, ttl: float = 60.0,
              renew: bool = True) -> "Lease":
        """A compile lease on ``key``, as a context manager::

            with client.lease(key, ttl=120) as lease:
                if lease.granted:              # we compile
                    client.put(key, compile())  # the PUT releases the lease
                else:                          # someone else compiles (or it exists)
                    value = lease.wait(60)     # bytes, or None: compile yourself

        On exit a granted lease that was not released by a PUT is released
        (``DELETE``). With ``renew`` a background thread renews it every
        ``ttl/3`` seconds while the block runs, so long compiles keep it.
        """
        return Lease(self, key, holder or default_holder(), ttl, renew)

    # ---- signatures ---------------------------------------------------------------

    def _check_signature(self, key: str, sha256: str, signature: str | None) -> None:
        """With a verify key, raises Error ``bad_signature`` unless
        ``signature`` signs key ‖ sha256 under it."""
        if self._verify_key is None:
            return
        if not signature:
            raise Error(200, "bad_signature",
                        f"entry {key} is not signed, but the client requires signatures (verify_key)")
        if not _ed25519.verify_entry(self._verify_key, key, sha256, signature):
            raise Error(200, "bad_signature",
                        f"entry {key}: the signature does not match its key and sha256 {sha256} under the verify key")

    # ---- health -------------------------------------------------------------------

    def healthy(self, *, timeout: float | None = 2.0) -> bool:
        """True if ``GET /healthz`` answers 200 within ``timeout``."""
        try:
            r = self._request("GET", f"{self._prefix}/healthz", timeout=timeout)
            r.read_all(limit=1 << 20)
            return True
        except Error:
            return False


def read_token_file(path: str | os.PathLike[str]) -> str:
    """Returns the bearer token on the first line of the file at ``path``."""
    with open(path, encoding="utf-8") as f:
        token = f.readline().strip()
    if not token:
        raise ValueError(f"cachesvc: token file {os.fspath(path)!r} is empty")
    return token


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


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable())
    except (AttributeError, OSError, ValueError):
        return False


@dataclass(frozen=True)
class BatchMember:
    """One entry of a batch stream (from its tar header and PAX records)."""

    key: str
    size: int
    sha256: str
    compile_seconds: float | None = None
    name: str = ""
    backend: str = ""


def default_client_id() -> str:
    """This process's reporter id for :meth:`Client.report`: a hash of the
    host name and pid, stable for the life of the process and distinct
    between processes (so that the server counts distinct clients)."""
    raw = f"{socket.gethostname()}:{os.getpid()}".encode()
    return "py-" + hashlib.sha256(raw).hexdigest()[:16]


def _truncate(s: str, limit: int) -> str:
    """Cuts s to at most limit UTF-8 bytes, on a character boundary."""
    b = s.encode("utf-8")
    if len(b) <= limit:
        return s
    return b[:limit].decode("utf-8", "ignore")


def default_holder() -> str:
    """A lease holder id naming this process: ``<host>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease:
    """A compile lease (see :meth:`Client.lease`).

    Attributes:
        key: the entry key.
        holder: our holder id.
        granted: True when we hold the lease (we compile).
        current_holder: who holds it when not granted ("" when the entry
            already exists: fetch it).
        expires: the lease expiry as the server reported it (RFC 3339).
        code: the server's code when not granted (``lease_held`` /
            ``entry_exists``).
    """

    def __init__(self, client: Client, key: str, holder: str, ttl: float, renew: bool) -> None:
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl = ttl
        self.renew_in_background = renew
        self.granted = False
        self.current_holder = ""
        self.expires = ""
        self.code = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        """Asks for (or renews) the lease; returns :attr:`granted`."""
        r = self.client._json("POST", self.client._ns_path("leases", self.key),
                              {"holder": self.holder, "ttl_s": self.ttl}, ok=(201,), allow=(409,))
        doc = _json_body(r)
        self.granted = r.status == 201
        self.current_holder = str(doc.get("holder", ""))
        self.expires = str(doc.get("expires", ""))
        err = doc.get("error")
        self.code = str(err.get("code", "")) if isinstance(err, dict) else ""
        return self.granted

    def wait(self, timeout: float = 60.0) -> bytes | None:
        """Long-polls for the entry another holder is compiling: its bytes, or
        None when the lease ended without it or ``timeout`` ran out (then
        compile yourself)."""
        try:
            return self.client.get(self.key, wait=timeout)
        except Error as e:
            if e.status == 503:  # too many waiters: compile yourself
                return None
            raise

    def release(self) -> None:
        """Releases the lease without writing (no-op if not held)."""
        self._stop.set()
        if not self.granted:
            return
        self.granted = False
        path = self.client._ns_path("leases", self.key) + "?holder=" + urllib.parse.quote(self.holder, safe="")
        r = self.client._request("DELETE", path, ok=(200, 204), allow=(404, 409))
        r.read_all(limit=1 << 20)

    def _renew_loop(self) -> None:
        while not self._stop.wait(max(0.5, self.ttl / 3)):
            try:
                if not self.acquire():
                    return
            except Error:
                pass  # the next attempt, or expiry, decides

    def __enter__(self) -> "Lease":
        if self.acquire() and self.renew_in_background:
            self._thread = threading.Thread(target=self._renew_loop, name=f"cachesvc-lease-{self.key[:8]}",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.release()
        except Error:
            pass  # it expires by itself


class _ResponseReader(io.RawIOBase):
    """A file-like view of a response body (for tarfile), within its budget."""

    def __init__(self, r: _Response) -> None:
        self._r = r
        self._it: Iterator[bytes] = r.read_chunks()
        self._buf = b""

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return self._buf + b"".join(self._it)
        while len(self._buf) < n:
            try:
                self._buf += next(self._it)
            except StopIteration:
                break
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _drain(stream: _ResponseReader) -> bool:
    """Reads what remains (tar padding); True when the body ended cleanly."""
    try:
        while stream.read(_CHUNK):
            pass
        return True
    except Error:
        return False


class _HashingReader:
    """Wraps a member reader, hashing what is read."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self._h = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        b = self._f.read(n)
        self._h.update(b)
        return b

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _chunks(xs: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(xs), n):
        yield xs[i:i + n]
