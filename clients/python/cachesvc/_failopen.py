"""Fail-open machinery shared by the compiler integrations (``cachesvc.jax``,
``cachesvc.torch``): settings from ``CACHESVC_*`` environment variables, a
circuit breaker, rate-limited warnings and a bounded background uploader.

The rule they implement: a cache that is down, slow or failing must cost a
training job nothing but a miss, and a hung one at most a few seconds in
total. Every call has a time budget (the :class:`cachesvc.Client` timeout);
lookups also have a short first-byte timeout (``lookup_timeout``, default
1 s, ``$CACHESVC_LOOKUP_TIMEOUT``) distinct from the budget for streaming a
large hit. A failure is logged once (then at most once per ``warn_interval``
seconds); a timeout opens the breaker at once, other transient failures
after ``threshold`` in a row, and an open breaker skips the server for
``cooldown`` seconds. Writes leave the compile path through a queue bounded
in items and bytes, and waiting for it (at exit, in ``flush``) stops as soon
as the breaker is open.

Private: the integrations' public APIs are their own modules.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from .client import Client, Error


#: Old names of variables, still read when the new one is unset (the new name
#: wins); the same aliases as the ``cachesvc`` command's.
ENV_ALIASES: dict[str, tuple[str, ...]] = {
    "CACHESVC_URL": ("CACHESVC_SERVER",),
    "CACHESVC_NAMESPACE": ("CACHESVC_NS",),
}
_noted_aliases: set[str] = set()


def env(name: str, default: str | None = None) -> str | None:
    """``os.environ[name]`` when set and non-empty, else that of an old name
    in :data:`ENV_ALIASES` (logged once as deprecated), else ``default``."""
    v = os.environ.get(name)
    if v:
        return v
    for old in ENV_ALIASES.get(name, ()):
        v = os.environ.get(old)
        if v:
            if old not in _noted_aliases:
                _noted_aliases.add(old)
                logging.getLogger("cachesvc").warning(
                    "cachesvc: %s is an old name of %s; set %s instead", old, name, name)
            return v
    return default


def env_flag(name: str) -> bool:
    """True when the variable is ``1``, ``true``, ``yes`` or ``on``."""
    return (env(name, "") or "").lower() in ("1", "true", "yes", "on")


def several_ranks() -> bool:
    """Whether this process is one of several ranks of a job (torchrun and
    torch.distributed launchers set ``WORLD_SIZE``): they compile the same
    programs at the same moment, and save one run's blob each."""
    try:
        return int(os.environ.get("WORLD_SIZE") or "1") > 1
    except ValueError:
        return False


def default_run_id() -> str:
    """The run id when none is configured: ``torchrun-<rendezvous id>`` in a
    rank that torchrun started, else ``<host>-<pid>-<random>``.

    torchrun gives every rank of a job, on every host, one
    ``TORCHELASTIC_RUN_ID`` (its ``--rdzv-id``, else a random UUID per
    launch), so the server counts the job as one run, not one run per rank.
    """
    elastic = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic != "none":
        return f"torchrun-{elastic}"
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


# The server's rule for a namespace (README "HTTP API"), checked before any
# call: a launcher's typo is then one warning naming the variable.
NAMESPACE_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")  # used with fullmatch: "$" would let a trailing newline through


@dataclass
class Settings:
    """Connection settings resolved from arguments, then ``CACHESVC_*`` variables.

    ``url`` is None when neither gave one (the caller installs nothing).
    """

    url: str | None
    namespace: str
    token: str | None
    token_file: str | None
    verify_key: str | list[str] | None
    run: str
    client_cert: str | None = None
    client_key: str | None = None
    lookup_timeout: float | None = 1.0

    @classmethod
    def resolve(cls, url: str | None = None, namespace: str | None = None, token: str | None = None,
                run: str | None = None, verify_key: str | list[str] | None = None,
                lookup_timeout: float | None = None) -> "Settings":
        """Arguments win; then ``CACHESVC_URL`` (old name ``CACHESVC_SERVER``),
        ``CACHESVC_NAMESPACE`` (old name ``CACHESVC_NS``; default ``default``), ``CACHESVC_TOKEN``, ``CACHESVC_TOKEN_FILE``,
        ``CACHESVC_VERIFY_KEY``, ``CACHESVC_CLIENT_CERT``, ``CACHESVC_CLIENT_KEY``,
        ``CACHESVC_RUN`` (default :func:`default_run_id`),
        ``CACHESVC_LOOKUP_TIMEOUT`` (seconds, default 1; ``0`` or ``none``: no
        first-byte timeout, only the call's budget)."""
        return cls(
            url=url or env("CACHESVC_URL"),
            namespace=namespace or env("CACHESVC_NAMESPACE", "default") or "default",
            token=token or env("CACHESVC_TOKEN"),
            token_file=env("CACHESVC_TOKEN_FILE"),
            verify_key=verify_key or env("CACHESVC_VERIFY_KEY"),
            run=run or env("CACHESVC_RUN") or default_run_id(),
            lookup_timeout=resolve_lookup_timeout(lookup_timeout),
            client_cert=env("CACHESVC_CLIENT_CERT"),
            client_key=env("CACHESVC_CLIENT_KEY"),
        )

    def client(self, *, timeout: float | None, retries: int) -> Client:
        """A :class:`Client` with these settings (``url`` must be set).

        Raises ValueError for a namespace the server would refuse (400
        ``bad_namespace`` on every call), naming where it came from."""
        assert self.url is not None
        if not NAMESPACE_RE.fullmatch(self.namespace):
            raise ValueError(f'namespace "{self.namespace}" (namespace= or CACHESVC_NAMESPACE) is invalid: use 1 to '
                             "63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
        return Client(self.url, namespace=self.namespace, token=self.token, token_file=self.token_file,
                      verify_key=self.verify_key, timeout=timeout, retries=retries, run=self.run,
                      client_cert=self.client_cert, client_key=self.client_key)

    def client_or_warn(self, log: logging.Logger, *, timeout: float, retries: int,
                       not_installed: str) -> Client | None:
        """:meth:`client`, or None after one warning when the settings cannot
        make one (a URL without ``http(s)://``, an unreadable or empty token
        file, a malformed verify key, a client certificate that does not
        load): a misconfigured cache must not stop
        the training job, which then compiles as it would without it."""
        try:
            return self.client(timeout=timeout, retries=retries)
        except (ValueError, OSError) as exc:
            msg = str(exc).removeprefix("cachesvc: ")
            log.warning("cachesvc: cannot use the configured server (%s: %s); check CACHESVC_URL, "
                        "CACHESVC_NAMESPACE, CACHESVC_TOKEN_FILE, CACHESVC_VERIFY_KEY, CACHESVC_CLIENT_CERT and "
                        "CACHESVC_CLIENT_KEY (or the arguments); %s",
                        type(exc).__name__, msg, not_installed)
            return None

    def install_client(self, client: Client | None, log: logging.Logger, *, timeout: float, retries: int,
                       not_installed: str) -> Client | None:
        """The client an integration's ``install`` uses: the caller's
        ``client`` (given these settings' run when it has none, so that its
        entries join the run's manifest), else :meth:`client_or_warn`'s, which
        is None after its warning."""
        if client is None:
            return self.client_or_warn(log, timeout=timeout, retries=retries, not_installed=not_installed)
        if client.run is None:
            client.run = self.run
        return client


def resolve_lookup_timeout(value: float | None) -> float | None:
    """``value`` if given, else ``$CACHESVC_LOOKUP_TIMEOUT``, else 1.0 s; a
    value <= 0 (or ``none``/``off`` in the variable) means no first-byte timeout."""
    if value is None:
        raw = (env("CACHESVC_LOOKUP_TIMEOUT", "") or "").strip().lower()
        if raw in ("none", "off"):
            return None
        try:
            value = float(raw) if raw else 1.0
        except ValueError:
            logging.getLogger("cachesvc").warning(
                "cachesvc: CACHESVC_LOOKUP_TIMEOUT=%r is not a number; using 1s", raw)
            value = 1.0
    return value if value > 0 else None


def write_timeout(put_timeout: float | None, timeout: float, size: int) -> float:
    """The time budget of one write of ``size`` bytes: ``put_timeout`` when
    the caller set one, else ``timeout`` plus one second per 20 MB, so that a
    large executable on a slow link is not cut off at a lookup's budget."""
    return put_timeout if put_timeout is not None else timeout + size / 20e6


def is_timeout(exc: BaseException) -> bool:
    """Whether a failure is a timeout: the server accepted the connection but
    did not answer in time (hung or overloaded)."""
    return isinstance(exc, (TimeoutError, socket.timeout)) or (
        isinstance(exc, Error) and exc.status == 0 and exc.code == "timeout")


class Breaker:
    """Counts consecutive failures; opens for ``cooldown`` s after ``threshold``.

    While open, :meth:`allow` is False. After the cooldown one call is let
    through (half-open); its failure re-opens the breaker at once.
    """

    def __init__(self, threshold: int, cooldown: float) -> None:
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
        self.failures = 0
        self.open_until = 0.0
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """False while the breaker is open."""
        with self._lock:
            return time.monotonic() >= self.open_until

    def success(self) -> None:
        """Records a success: closes the breaker."""
        with self._lock:
            self.failures = 0
            self.open_until = 0.0

    def failure(self, immediate: bool = False) -> bool:
        """Records a failure; returns True if this opened the breaker.
        ``immediate`` (a timeout) opens it regardless of the threshold."""
        with self._lock:
            self.failures += 1
            if immediate or self.failures >= self.threshold:
                self.open_until = time.monotonic() + self.cooldown
                return True
            return False


def is_transient(exc: BaseException) -> bool:
    """Whether a failure says the server is unreachable or unwell (counts
    toward the breaker), as opposed to a refusal of this one request."""
    return not isinstance(exc, Error) or exc.status == 0 or exc.status >= 500


#: What a write the server refused (4xx) costs: that one value is not
#: stored; lookups still go to the server.
WRITE_CONSEQUENCE = "it was not stored, but lookups still use the shared cache"


def auth_hint(exc: BaseException, write: bool = False) -> str:
    """What to check when the server does not know the token (401), or it
    may not read the namespace (a 403 to a read: the server names the scope,
    but not that the namespace setting is as likely wrong as the token), as
    a clause to append to the error; "" otherwise (a refused write says what
    it costs instead: WRITE_CONSEQUENCE)."""
    if isinstance(exc, Error) and exc.status == 401:
        return "; check CACHESVC_TOKEN or CACHESVC_TOKEN_FILE (or the token argument)"
    if isinstance(exc, Error) and exc.status == 403 and not write:
        return "; check CACHESVC_NAMESPACE, and that the token (CACHESVC_TOKEN or CACHESVC_TOKEN_FILE) may read it"
    return ""


class Warner:
    """Rate-limited warnings about failed calls, feeding a :class:`Breaker`.

    The first failure logs a warning; later ones within ``interval`` seconds
    log at debug level only.
    """

    def __init__(self, log: logging.Logger, breaker: Breaker, interval: float,
                 consequence: str = "compiling without the shared cache") -> None:
        self.log = log
        self.breaker = breaker
        self.interval = interval
        self.consequence = consequence
        self._last = -1e18
        self._lock = threading.Lock()

    def warn(self, what: str, exc: BaseException, consequence: str | None = None, *, write: bool = False) -> None:
        """Logs ``what failed (exc); consequence`` unless a warning was logged
        recently; ``consequence`` defaults to the one given at construction.
        A refused token (401, or ``auth_paused`` after one) logs at debug
        level only: the client itself warned once for the whole outage
        (``_authpause.py``), and every compile of every process meets it."""
        if isinstance(exc, Error) and exc.status == 401:
            self.log.debug("cachesvc: %s failed: %s", what, exc)
        elif self._due():
            self.log.warning("cachesvc: %s failed (%s%s); %s "
                             "(further cachesvc warnings suppressed for %.0fs)",
                             what, exc, auth_hint(exc, write), consequence or self.consequence, self.interval)
        else:
            self.log.debug("cachesvc: %s failed: %s", what, exc)

    def notice(self, message: str) -> None:
        """Logs ``cachesvc: message`` as a warning unless this warner logged
        one recently (then at debug level): for what is not a failed call."""
        if self._due():
            self.log.warning("cachesvc: %s (further such warnings suppressed for %.0fs)",
                             message, self.interval)
        else:
            self.log.debug("cachesvc: %s", message)

    def _due(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.interval:
                return False
            self._last = now
            return True

    def failed(self, what: str, exc: BaseException, *, write: bool = False) -> None:
        """Records a failed call: a timeout opens the breaker at once, another
        transient one counts toward it; then :meth:`warn`.

        ``write``: the call stored a value. When the server refused it (a
        4xx: a token without write scope, an entry too large) only that value
        is lost, and the warning says so (:data:`WRITE_CONSEQUENCE`); a
        transient failure (server unreachable, 5xx, timeout) says the usual
        consequence: the server itself is unwell, and lookups meet it too."""
        transient = is_transient(exc)
        if transient and self.breaker.failure(immediate=is_timeout(exc)):
            self.log.debug("cachesvc: circuit breaker open for %.0fs", self.breaker.cooldown)
        self.warn(what, exc, WRITE_CONSEQUENCE if write and not transient else None, write=write)


class Uploader:
    """One background thread draining a queue of writes bounded in items and bytes.

    ``submit`` never blocks: it refuses work when the queue is full (the
    server is slower than compiles). ``flush`` waits for the queue to drain.
    Safe for concurrent use; restarts its thread after a fork.
    """

    def __init__(self, fn: Callable[..., None], max_items: int, max_bytes: int,
                 give_up: Callable[[], bool] | None = None) -> None:
        self._fn = fn
        self._give_up = give_up
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._q: collections.deque[tuple[tuple, int]] = collections.deque()
        self._bytes = 0
        self._busy = False
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def submit(self, args: tuple, size: int) -> bool:
        """Queues ``fn(*args)``; False (nothing queued) when the queue is full."""
        with self._cv:
            if len(self._q) >= self._max_items or (self._q and self._bytes + size > self._max_bytes):
                return False
            self._q.append((args, size))
            self._bytes += size
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._busy = False
                self._thread = threading.Thread(target=self._run, name="cachesvc-upload", daemon=True)
                self._thread.start()
            self._cv.notify_all()
            return True

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._q:
                    self._cv.wait()
                args, size = self._q.popleft()
                self._busy = True
            try:
                self._fn(*args)
            except Exception:  # noqa: BLE001 - fn reports its own failures
                pass
            finally:
                with self._cv:
                    self._bytes -= size
                    self._busy = False
                    self._cv.notify_all()

    def flush(self, timeout: float | None) -> bool:
        """Waits until the queue is empty and no write runs; False if
        ``timeout`` ran out, the thread is gone with work queued, or
        ``give_up()`` (the breaker is open: queued writes will be skipped, and
        one in flight is stuck on a sick server) turned true."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._q or self._busy:
                if self._thread is None or not self._thread.is_alive():
                    return False
                if self._give_up is not None and self._give_up():
                    return False
                rem = None if end is None else end - time.monotonic()
                if rem is not None and rem <= 0:
                    return False
                self._cv.wait(0.1 if rem is None or self._give_up is not None and rem > 0.1 else rem)
            return True
