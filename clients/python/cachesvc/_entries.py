"""Entries by key: ``GET``/``HEAD``/``PUT``/``DELETE /v1/{ns}/entries/{key}``."""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
import time
from typing import IO, BinaryIO, Union

from ._transport import (_CHUNK, _error_from_body, _float_header, _Response, _seekable, _text_header,
                         _Transport)
from ._types import EntryInfo, Error, PutResult

Body = Union[bytes, bytearray, memoryview, BinaryIO, IO[bytes]]


log = logging.getLogger("cachesvc")

# The server's bound on one ?wait=, and the shortest slice a long poll is
# cut into (a proxy that cuts sooner is answering, not timing out).
_MAX_WAIT = 300.0
_MIN_SLICE = 1.0
# The longest slice of a long poll that must notice a hung server
# (``hung_after``): the integrations' lease waits, which a stopped server
# held for the slice plus the budget, 60 s, where a lookup costs 1 s.
HUNG_SLICE = 5.0


def _proxy_cut(exc: Error) -> bool:
    """Whether a long poll's failure is a reverse proxy's read timeout: its
    own 504 page (cachesvc never answers 504, and its errors are JSON)."""
    return exc.status == 504 and exc.code == "http_504"


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


def _body_type_error(data: object) -> str:
    return f"put() takes bytes, a bytes-like object or a binary file object, not {type(data).__name__}"


def _body_bytes(data: object) -> bytes:
    """The bytes of a bytes-like ``data`` (anything with the buffer
    protocol); TypeError naming what ``put`` takes for anything else."""
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        raise TypeError(_body_type_error(data) + " (encode the str first, e.g. value.encode())")
    try:
        return bytes(memoryview(data))  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(_body_type_error(data)) from None


def _hash_stream(f: IO[bytes], copy_to: IO[bytes] | None = None) -> tuple[str, int]:
    """Reads f to its end in chunks: its SHA-256 (hex) and length, writing
    each chunk to copy_to too when given. Nothing is held whole in memory."""
    h = hashlib.sha256()
    n = 0
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        h.update(chunk)
        if copy_to is not None:
            copy_to.write(chunk)
        n += len(chunk)
    return h.hexdigest(), n


class _Entries(_Transport):
    """The :class:`cachesvc.Client` methods on one entry by its key."""

    def get(self, key: str, *, timeout: float | None = None, wait: float | None = None) -> bytes | None:
        """Returns the entry's bytes, or None on a miss (404).

        The body is verified against the ``X-Content-SHA256`` header. With
        ``wait`` (seconds), a miss behind a compile lease long-polls
        (``?wait=``) until the holder writes the entry (bytes) or the lease
        ends without it or the wait runs out (None). The wait goes out in
        slices of at most ``wait_slice`` seconds, each with the budget
        ``timeout`` plus its slice, so ``wait`` may exceed the server's
        300 s bound on one request and a proxy's read timeout. A wait is
        for a key this client already looked up and missed (a ``get``
        without ``wait``): the server counted that miss, so a wait that ends
        empty counts none, and its hit counts in ``wait_hits`` (misses minus
        wait hits are the compiles clients ran).

        Raises:
            Error: on any other failure (bad key -> ``400``, auth, server errors
                after retries, ``digest_mismatch`` when the bytes received do
                not match the announced digest).
        """
        value, _, _ = self._wait_get(key, timeout=timeout, wait=wait)
        return value

    def _wait_get(self, key: str, *, timeout: float | None, wait: float | None,
                  hung_after: float | None = None) -> tuple[bytes | None, Error | None, float | None]:
        """:meth:`get`, and on a miss the server's answer as an Error: after
        a ``wait`` its code says why the wait ended (``not_found``: no lease,
        or it ended without the entry; ``wait_timeout``: the holder is still
        at it, and the message names it). The third item is what a hit
        saved: the compile seconds the entry records minus the time this
        call waited for it (its long poll, up to the answer's headers),
        never below zero, as the server counts the hit; None on a miss or
        for an entry that records no compile time. ``hung_after``: see
        :meth:`_long_poll`."""
        buf = io.BytesIO()
        info, miss, waited = self._download(key, buf, timeout=timeout, wait=wait, hung_after=hung_after)
        if info is None:
            return None, miss, None
        saved = None if info.compile_seconds is None else max(0.0, info.compile_seconds - waited)
        return buf.getvalue(), None, saved

    def download(self, key: str, out: IO[bytes], *, timeout: float | None = None,
                 wait: float | None = None) -> EntryInfo | None:
        """Streams the entry into ``out`` (a writable binary file object).

        Returns its :class:`EntryInfo`, or None on a miss. The bytes are
        hashed while streaming and checked against ``X-Content-SHA256``; on a
        mismatch :class:`Error` ``digest_mismatch`` is raised (``out`` then
        holds the bad bytes: write to a temporary file and rename on success).
        """
        return self._download(key, out, timeout=timeout, wait=wait)[0]

    def _download(self, key: str, out: IO[bytes], *, timeout: float | None, wait: float | None,
                  hung_after: float | None = None) -> tuple[EntryInfo | None, Error | None, float]:
        """:meth:`download`, the miss's Error, and the seconds a ``wait``
        spent before the answer's headers (0 without one)."""
        path = self._entry_path(key)
        waited = 0.0
        if wait is not None and wait > 0:
            start = time.monotonic()
            r, miss = self._long_poll(path, wait, timeout, hung_after)
            waited = time.monotonic() - start
            if r is None:
                return None, miss, waited
        else:
            r = self._request("GET", path, timeout=timeout, allow=(404,))
        if r.status == 404:
            return None, _error_from_body(404, r.read_all(limit=1 << 20),
                                          _text_header(r.header("X-Request-Id"))), waited
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
                         etag=r.header("ETag"), name=_text_header(r.header("X-Cachesvc-Name")),
                         backend=r.header("X-Cachesvc-Backend") or ""), None, waited

    def _long_poll(self, path: str, wait: float, timeout: float | None,
                   hung_after: float | None = None) -> tuple[_Response | None, Error | None]:
        """GET ``path?wait=`` for up to ``wait`` seconds in all, in slices of
        at most ``wait_slice`` (and the server's 300 s): a slice that ends in
        404 ``wait_timeout`` (the holder is still compiling: its lease lives)
        is followed by the next. Every slice is sent with ``&waited=`` the
        time spent so far (0 on the first): the caller's own lookup counted
        the miss, so the server counts no second miss when the wait ends
        empty, and one wait hit when the entry comes. A reverse proxy whose read
        timeout cut a slice (its own 504 page, not a cachesvc answer) makes
        this client's slices 0.8 times the cut from then on. Each slice has
        the call's budget (``timeout``) on top of its wait. Returns the
        response (200, or a 404 with its body read), or the miss when a cut
        slice spent the wait.

        ``hung_after`` (seconds; None: only the budget) tells a hung server
        from a parked wait: slices are then at most ``HUNG_SLICE`` long and
        each must answer within its span plus ``hung_after`` plus 1 s (the
        server looks every second), else :class:`Error` ``timeout``. A
        server stopped while this waits then costs seconds, not the slice
        plus the budget (60 s by default)."""
        budget = self.timeout if timeout is None else timeout
        start = time.monotonic()
        while True:
            waited = time.monotonic() - start
            longest = self.wait_slice if hung_after is None else min(self.wait_slice, HUNG_SLICE)
            span = max(min(wait - waited, longest, _MAX_WAIT), _MIN_SLICE)
            # waited on every slice, 0 on the first: the caller's own
            # lookup counted the miss this wait answers, so none counts another.
            q = f"?wait={span:.3f}s&waited={waited:.3f}"
            sent = time.monotonic()
            try:
                r = self._request("GET", path + q, timeout=None if budget is None else budget + span,
                                  first_byte_timeout=None if hung_after is None else span + hung_after + 1.0,
                                  allow=(404,))
            except Error as exc:
                cut = time.monotonic() - sent
                if not _proxy_cut(exc) or cut < _MIN_SLICE / 0.8:
                    raise  # not a read timeout: a proxy that fails at once fails every slice
                self.wait_slice = min(self.wait_slice, 0.8 * cut)
                log.debug("cachesvc: a proxy cut a %.1fs long poll after %.1fs; polling in %.1fs slices (%s)",
                          span, cut, self.wait_slice, exc.message)
                spent = time.monotonic() - start
                if spent >= wait:
                    return None, Error(404, "wait_timeout", f"the entry was not written after waiting {spent:.0f}s "
                                       "(in slices: a proxy cuts long polls)")
                continue
            if r.status != 404 or time.monotonic() - start >= wait - 0.001:
                return r, None
            if _error_from_body(404, r._body or b"").code != "wait_timeout":
                return r, None  # no lease, or it ended without the entry: compile

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
            name=_text_header(r.header("X-Cachesvc-Name")),
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
            data: bytes (or another bytes-like object: ``bytearray``,
                ``memoryview`` ...), or a binary file object positioned at
                the start. Anything else, a ``str`` or a text file included,
                raises ``TypeError``.
            compile_seconds: sent as ``X-Compile-Seconds`` (how long it took
                to produce the value; the dashboard counts it as time saved on
                every hit).
            backend: sent as ``X-Cachesvc-Backend`` (e.g. ``"xla"``).
            name: a display name sent as ``X-Cachesvc-Name``.
            sha256: the hex digest if already known (skips hashing).
            size: the byte count if already known (a file's, from its position
                to its end; a seekable file whose length differs raises
                ``ValueError``).
        """
        spool: IO[bytes] | None = None
        try:
            if isinstance(data, (bytes, bytearray, memoryview)) or not callable(getattr(data, "read", None)):
                raw = _body_bytes(data)
                digest = sha256 or hashlib.sha256(raw).hexdigest()
                body_bytes: bytes | None = raw
                body_file: IO[bytes] | None = None
                length = len(raw)
            else:
                if isinstance(data, io.TextIOBase):
                    raise TypeError(_body_type_error(data) + " (open the file in binary mode, 'rb')")
                body_bytes = None
                f: IO[bytes] = data  # type: ignore[assignment]
                if _seekable(f):
                    start = f.tell()
                    if sha256 is None or size is None:
                        digest, length = _hash_stream(f)
                    else:
                        digest, length = sha256, size
                        have = f.seek(0, io.SEEK_END) - start
                        if have != size:
                            raise ValueError(f"put(): size={size} but the file holds {have} bytes from its current "
                                             "position: pass its true size, or leave size and sha256 out")
                    f.seek(start)
                    body_file = f
                elif sha256 is not None and size is not None:
                    digest, length, body_file = sha256, size, f
                else:
                    spool = tempfile.TemporaryFile()
                    digest, length = _hash_stream(f, copy_to=spool)
                    spool.seek(0)
                    body_file = spool
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
