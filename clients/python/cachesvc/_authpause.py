"""What a client does after the server refused its token (401).

A token is revoked or rotated for every process of a job at once, and each
compile of each process would otherwise call the server, get 401 and log a
warning. After a 401 the client sends nothing for 30 s (doubling to 5 min
while 401s go on): its calls raise :class:`Error` ``auth_paused`` at once,
which the integrations take as "cache unavailable" and compile locally. One
warning per outage says what to check. A token file is looked at (its mtime
and size) on every call meanwhile, so a rotated file ends the pause at once;
:meth:`cachesvc.Client.reload_token` ends it by hand.

A 403 does not pause: the token is valid and lacks the scope for one
namespace or action (a read-only token's PUT), and the client's other calls
(its lookups, another namespace's) still work.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ._types import Error

log = logging.getLogger("cachesvc")

#: The first pause after a 401, and the longest it doubles to.
FIRST_PAUSE = 30.0
MAX_PAUSE = 300.0


def file_signature(path: str | os.PathLike[str] | None) -> tuple[int, int] | None:
    """The token file's (mtime_ns, size), or None when unset or unreadable."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class AuthPause:
    """One client's pause after a 401: safe for concurrent use.

    ``token_file`` is the file the client's token came from (None: a token
    given directly, which only :meth:`cachesvc.Client.reload_token` can
    replace)."""

    def __init__(self, token_file: str | os.PathLike[str] | None) -> None:
        self.token_file = token_file
        self.signature = file_signature(token_file)  # of the token in use
        self.until = 0.0  # monotonic time the pause ends; 0: none
        self.delay = 0.0  # the current pause's length; 0: not in an outage
        self.refused: Error | None = None  # the 401 that started the outage
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        del state["lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def file_changed(self) -> bool:
        """Whether the token file differs (mtime or size) from the one read."""
        sig = file_signature(self.token_file)
        return sig is not None and sig != self.signature

    def check(self, what: str) -> bool:
        """Before a request: raises ``auth_paused`` while paused, unless the
        token file changed (then True: re-read it and send). False: send."""
        with self.lock:
            if time.monotonic() >= self.until:
                return False
            left, refused, delay = self.until - time.monotonic(), self.refused, self.delay
        if self.file_changed():
            return True
        raise Error(401, "auth_paused",
                    f"{what}: not sent: the server refused this client's token ({refused.message if refused else '401'}) "
                    f"and calls are paused for {left:.0f} s more (of {delay:.0f} s); {self.advice()}")

    def advice(self) -> str:
        where = (f"the token file {os.fspath(self.token_file)!r} (re-read as soon as it changes)"
                 if self.token_file else "the token passed to the client")
        return (f"check {where}, CACHESVC_TOKEN or CACHESVC_TOKEN_FILE, and that the token is still in the "
                "server's --tokens file; Client.reload_token() ends the pause")

    def failed(self, err: Error) -> None:
        """After a 401: pauses for 30 s, or twice the last pause (at most
        5 min) when the outage goes on; warns on an outage's first 401."""
        with self.lock:
            first = self.delay == 0
            self.delay = FIRST_PAUSE if first else min(2 * self.delay, MAX_PAUSE)
            self.until = time.monotonic() + self.delay
            self.refused = err
            delay = self.delay
        if first:
            log.warning("cachesvc: the server refused the token (%s); pausing all calls to it for %.0f s, "
                        "doubling to %.0f s while it goes on (compiling without the shared cache meanwhile); %s",
                        err, delay, MAX_PAUSE, self.advice())
        else:
            log.debug("cachesvc: still refused (%s); pausing %.0f s", err, delay)

    def succeeded(self) -> None:
        """After any answer that is not a 401: the outage is over."""
        if self.delay:
            with self.lock:
                if self.delay:
                    log.info("cachesvc: the server accepts the token again; calls resume")
                self.delay, self.until, self.refused = 0.0, 0.0, None

    def read(self) -> str:
        """Re-reads the token file (stat first, so that a change while
        reading is seen next time) and ends the pause: the next call is
        sent with the token it holds."""
        assert self.token_file
        sig = file_signature(self.token_file)
        token = read_token_file(self.token_file)
        with self.lock:
            self.signature = sig
        self.resume()
        return token

    def resume(self) -> None:
        """Ends the pause (a new token): the next call is sent. A 401 to it
        pauses twice as long as the last, the outage going on."""
        with self.lock:
            self.until = 0.0


def read_token_file(path: str | os.PathLike[str]) -> str:
    """Returns the bearer token on the first line of the file at ``path``."""
    with open(path, encoding="utf-8") as f:
        token = f.readline().strip()
    if not token:
        raise ValueError(f"cachesvc: token file {os.fspath(path)!r} is empty")
    return token
