"""Many entries at once and runs: ``POST /v1/{ns}/exists``, ``/batch`` (a
streamed tar, never held whole) and ``GET /v1/{ns}/runs/{run}/manifest``."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from typing import IO, Any, Callable, Iterable, Iterator

from ._transport import _CHUNK, _float_header, _json_body, _Response, _Transport
from ._types import BatchMember, Error


class _Batch(_Transport):
    """The :class:`cachesvc.Client` methods on many keys, and run manifests."""

    MAX_BATCH_KEYS = 10_000
    """The server's limit of keys per batch/exists request; longer lists are split."""

    def exists(self, keys: Iterable[str], *, timeout: float | None = None) -> set[str]:
        """Returns the subset of ``keys`` the server holds (``POST /exists``),
        without transferring any value. Long lists are split into requests
        of :attr:`MAX_BATCH_KEYS`."""
        present: set[str] = set()
        for chunk in _chunks(_key_list(keys, "exists"), self.MAX_BATCH_KEYS):
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
        for chunk in _chunks(_key_list(keys, "batch"), self.MAX_BATCH_KEYS):
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

        self.batch(_key_list(keys, "batch_get"), keep, timeout=timeout)
        return out

    def manifest(self, run: str, *, timeout: float | None = None,
                 first_byte_timeout: float | None = None) -> dict[str, Any]:
        """Returns a run's manifest (``GET /v1/{ns}/runs/{run}/manifest``):
        ``{"run", "namespace", "keys": [{"key", "name", "looked_up", "written"}], "truncated"}``.
        ``first_byte_timeout``: as in :meth:`lookup` (a hung server fails fast)."""
        r = self._request("GET", self._ns_path("runs", run, "manifest"), timeout=timeout,
                          first_byte_timeout=first_byte_timeout, headers={"Accept": "application/json"})
        return _json_body(r)


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


def _key_list(keys: Iterable[str], method: str) -> list[str]:
    """The distinct keys of ``keys``, in order; TypeError for one key given
    alone (a str is an iterable of characters, each a bad key)."""
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"{method}() takes an iterable of keys, not a single {type(keys).__name__}: "
                        f"pass a list, e.g. {method}([key])")
    return list(dict.fromkeys(keys))


def _chunks(xs: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(xs), n):
        yield xs[i:i + n]
