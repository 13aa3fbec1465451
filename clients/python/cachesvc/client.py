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

import os
import random
import ssl
import urllib.parse
from collections.abc import Sequence

from . import _ed25519
from ._authpause import AuthPause, read_token_file

# Client is composed of one part per job, each in its own module; the names
# below are re-exported so that ``from cachesvc.client import X`` keeps
# working for everything this module has always offered.
from ._batch import _Batch
from ._entries import Body, _Entries  # noqa: F401 - Body re-exported
from ._leases import Lease, _Leases, default_holder  # noqa: F401 - default_holder re-exported
from ._lookups import GZIP_SIGNATURE_BYTES, _Lookups  # noqa: F401 - re-exported
from ._reports import _Reports, default_client_id
from ._transport import _USER_AGENT, _Pool
from ._types import BatchMember, EntryInfo, Error, KeyResult, LookupResult, PutResult, ReportResult

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

# The public names keep cachesvc.client as their module, as before the split:
# tracebacks, reprs and pickles name cachesvc.client.Error, not a private module.
for _obj in (BatchMember, EntryInfo, Error, KeyResult, Lease, LookupResult, PutResult, ReportResult,
             default_client_id, default_holder):
    _obj.__module__ = __name__
del _obj

_FALSE = ("0", "false", "no", "off")


class Client(_Entries, _Lookups, _Batch, _Leases, _Reports):
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
            ``token`` is not given. After the server refuses the token
            (401) the client sends nothing for 30 s, doubling to 5 min while
            401s go on (its calls raise :class:`Error` ``auth_paused`` at
            once; one warning says what to check), and re-reads this file
            as soon as its mtime or size changes: a rotated token file
            ends the pause on the next call. :meth:`reload_token` ends it
            by hand. A 403 (a scope the token lacks) pauses nothing.
        verify_key: the trusted Ed25519 public keys: one key (base64 of its
            32 bytes, as ``cachesvc signkey new`` prints, or the PEM
            ``.pub`` file's text), several separated by commas, or a list.
            With it every entry the client returns (get, download, lookup,
            batch) must carry an ``X-Cachesvc-Signature`` over its key and
            SHA-256 that verifies under one of them, else :class:`Error`
            ``bad_signature`` is raised and the bytes are not returned.
            Several keys serve a key rotation: trust the old and the new
            key while the servers change their ``--signing-key``.
        digest_first: for :meth:`key` and :meth:`lookup`, send only the
            signature's SHA-256 first (``X-Cachesvc-Signature-Sha256``, an
            empty body) and the signature itself only when the server asks
            (428 ``signature_required``), so a repeated lookup of a large
            module uploads a few hundred bytes. A server that predates it is
            detected once and then always sent the signature. ``None``: on
            unless the environment sets ``CACHESVC_DIGEST_FIRST=0``.
        client_cert: a PEM file with the client certificate to present to
            a server that requires one (``serve --tls-client-ca``), and its
            private key unless ``client_key`` names the key's file. The
            server is trusted as without it (the system's CAs, or
            ``SSL_CERT_FILE``). A file that cannot be loaded raises
            :class:`ValueError` naming it.
        client_key: the PEM file with ``client_cert``'s private key.
        wait_slice: the longest single ``?wait=`` request of a long poll
            (:meth:`get` with ``wait``, :meth:`Lease.wait`, the integrations'
            ``lease_wait``), in seconds: a longer wait is sent as slices
            of at most this, each continuing the last (``&waited=``), so
            that a reverse proxy's read timeout (nginx's 60 s default)
            does not cut it. When a proxy cuts one all the same (its 504),
            the slices shrink to 0.8 times the cut. Default 50.
        first_byte_timeout: for lookups (:meth:`lookup`,
            :meth:`lookup_result`), how long each attempt may wait to
            connect and receive the response headers; a hit's body is then
            streamed within the rest of ``timeout``. Such a timeout is not
            retried. ``None``: only ``timeout`` applies.

    The client is safe for concurrent use by many threads. Close it with
    :meth:`close` (or use it as a context manager) to drop idle connections.
    It pickles without its connections, so it can be passed to a worker
    process (``multiprocessing``, ``ProcessPoolExecutor``), which opens its
    own; a client inherited by ``fork`` never reuses the parent's.
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
        verify_key: str | bytes | Sequence[str | bytes] | None = None,
        first_byte_timeout: float | None = None,
        digest_first: bool | None = None,
        client_cert: str | os.PathLike[str] | None = None,
        client_key: str | os.PathLike[str] | None = None,
        wait_slice: float = 50.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"cachesvc: url must be http(s)://host[:port], got {url!r}")
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"cachesvc: namespace must be a non-empty string, got {namespace!r}")
        if isinstance(wait_slice, bool) or not isinstance(wait_slice, (int, float)) or not 1 <= wait_slice <= 300:
            raise ValueError(f"cachesvc: wait_slice must be a number of seconds from 1 to 300 (the server's "
                             f"longest ?wait=), got {wait_slice!r}")
        for name, v in (("timeout", timeout), ("first_byte_timeout", first_byte_timeout)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
                raise ValueError(f"cachesvc: {name} must be a positive number of seconds or None (no limit), "
                                 f"got {v!r}")
        self.url = url.rstrip("/")
        self.namespace = namespace
        if not token and token_file:
            self._auth = AuthPause(token_file)  # watches the file from the token's read on
            token = read_token_file(token_file)
        else:
            self._auth = AuthPause(None)
        self.token = token
        # "" (CACHESVC_VERIFY_KEY unset) checks nothing; an empty list is
        # refused by the parser, since it would silently trust every entry.
        self._verify_keys = (_ed25519.parse_public_keys(verify_key)
                             if verify_key or isinstance(verify_key, (list, tuple)) else None)
        self.timeout = timeout
        self.first_byte_timeout = first_byte_timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.wait_slice = float(wait_slice)
        self.run = run
        self._prefix = parsed.path.rstrip("/")
        self._client_cert, self._client_key, self._max_idle = client_cert, client_key, max_idle
        self._pool = _new_pool(self.url, max_idle, client_cert, client_key)
        self._user_agent = user_agent
        # The backoff's jitter: from the OS, so that processes forked from
        # one client do not all retry after the same delays.
        self._rand = random.SystemRandom()
        if digest_first is None:
            digest_first = os.environ.get("CACHESVC_DIGEST_FIRST", "1").strip().lower() not in _FALSE
        self.digest_first = digest_first
        # What the server turned out not to support (an older server): set
        # once, by the first request that finds out.
        self._no_digest = False
        self._no_gzip = False

    def reload_token(self, token: str | None = None) -> None:
        """Replaces the bearer token and ends a pause after a 401 at once.

        With ``token``, that token is used from now on; without it the
        token file the client was made with (``token_file``,
        ``CACHESVC_TOKEN_FILE``) is read again. The client also re-reads
        that file by itself whenever its mtime or size changes during a
        pause, and before pausing on a 401.

        Raises:
            ValueError: no ``token`` and no token file, or the file is empty.
            OSError: the file cannot be read.
        """
        if token is not None:
            if not token.strip():
                raise ValueError("cachesvc: reload_token(token) needs a non-empty token")
            self.token = token.strip()
            self._auth.resume()
        elif self._auth.token_file:
            self.token = self._auth.read()
        else:
            raise ValueError("cachesvc: this client has no token file to re-read (its token was given "
                             "directly): pass the new one, reload_token(token)")

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

    @classmethod
    def from_env(cls, url: str | None = None, namespace: str | None = None, *, timeout: float | None = 30.0,
                 retries: int = 3, run: str | None = None) -> "Client":
        """A client configured as :func:`cachesvc.jax.install` and
        :func:`cachesvc.torch.install` configure theirs: the arguments, then
        ``CACHESVC_URL``, ``CACHESVC_NAMESPACE`` (default ``default``),
        ``CACHESVC_TOKEN`` or ``CACHESVC_TOKEN_FILE``, ``CACHESVC_VERIFY_KEY``,
        ``CACHESVC_CLIENT_CERT``/``CACHESVC_CLIENT_KEY`` and ``CACHESVC_RUN``
        (default ``<host>-<pid>-<random>``, ``torchrun-<job id>`` in a
        torchrun rank), so a script run by the same launcher talks to the
        same server as the training job.

        Raises:
            ValueError: when neither ``url`` nor ``CACHESVC_URL`` is set, or
                a setting is malformed (the message names it).
        """
        from ._failopen import Settings  # imports this module

        s = Settings.resolve(url=url, namespace=namespace, run=run)
        if s.url is None:
            raise ValueError("cachesvc: no server URL: pass url= or set CACHESVC_URL (e.g. http://host:8080)")
        return s.client(timeout=timeout, retries=retries)

    # A client is pickled without its connections (sockets, a lock): one
    # passed to a spawned or forkserver worker process opens its own there.
    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        del state["_pool"], state["_rand"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._rand = random.SystemRandom()
        self._pool = _new_pool(self.url, self._max_idle, self._client_cert, self._client_key)

    # ---- health -------------------------------------------------------------------

    def healthy(self, *, timeout: float | None = 2.0) -> bool:
        """True if ``GET /healthz`` answers 200 within ``timeout``."""
        try:
            r = self._request("GET", f"{self._prefix}/healthz", timeout=timeout)
            r.read_all(limit=1 << 20)
            return True
        except Error:
            return False


def _new_pool(url: str, max_idle: int, client_cert: str | os.PathLike[str] | None,
              client_key: str | os.PathLike[str] | None) -> _Pool:
    """An empty connection pool to the server at ``url``."""
    parsed = urllib.parse.urlsplit(url)
    context = client_cert_context(client_cert, client_key)
    return _Pool(parsed.scheme, parsed.hostname or "", parsed.port, max_idle, context)


def client_cert_context(cert: str | os.PathLike[str] | None,
                        key: str | os.PathLike[str] | None) -> ssl.SSLContext | None:
    """An SSL context trusting what ``http.client`` trusts by default and
    presenting the client certificate ``cert`` (with ``key``); None when
    neither is given."""
    if not cert:
        if key:
            raise ValueError("cachesvc: client_key (CACHESVC_CLIENT_KEY) needs client_cert (CACHESVC_CLIENT_CERT)")
        return None
    context = ssl.create_default_context()
    try:
        context.load_cert_chain(cert, key or None)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        names = f"{os.fspath(cert)!r}" + (f" and key {os.fspath(key)!r}" if key else "")
        raise ValueError(f"cachesvc: cannot load client certificate {names}: {exc}") from exc
    return context



