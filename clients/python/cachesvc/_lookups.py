"""Signatures to keys and values: ``POST /v1/{ns}/keys`` and ``/lookup``,
digest-first (send the SHA-256, the signature only when asked) and gzip for
large signatures, each falling back once for a server that predates it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from typing import Any, Mapping

from ._transport import _float_header, _json_body, _Response, _Transport
from ._types import Error, KeyResult, LookupResult

GZIP_SIGNATURE_BYTES = 64 << 10
"""Signatures larger than this are sent gzip-compressed (``Content-Encoding: gzip``)."""

_DIGEST_HEADER = "X-Cachesvc-Signature-Sha256"
_BACKEND_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
# Answers by which a server that predates digest-first requests refuses an
# empty body, and one without gzip refuses a compressed signature.
_NO_DIGEST_ANSWERS = {(400, "malformed_signature"), (404, "route_not_found"), (415, "unsupported_media_type")}
_NO_GZIP_ANSWERS = {(400, "malformed_signature"), (415, "unsupported_encoding"), (415, "unsupported_media_type")}


class _Lookups(_Transport):
    """The :class:`cachesvc.Client` methods that send a signature."""

    # What the server turned out not to support (an older server): set once,
    # by the first request that finds out (Client.__init__ sets them False).
    _no_digest: bool
    _no_gzip: bool

    def _signature(self, path: str, signature: Mapping[str, Any], *, timeout: float | None,
                   first_byte_timeout: float | None, allow: tuple[int, ...] = ()) -> _Response:
        """POSTs a signature to ``path`` (keys or lookup): digest first when
        enabled, then, if the server asks or predates digests, the signature
        itself (gzip-compressed past :data:`GZIP_SIGNATURE_BYTES`).

        The digest is the SHA-256 of the exact JSON bytes the full request
        would send (compact, sorted keys, UTF-8), before compression."""
        if not isinstance(signature, Mapping):
            raise TypeError(f"a signature is a dict (a JSON object with a \"backend\" field, e.g. "
                            f"{{\"backend\": \"xla\", ...}}), not {type(signature).__name__}")
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
        buf = io.BytesIO()  # its getvalue() hands over the bytes without a copy
        h = hashlib.sha256()
        for chunk in r.read_chunks():
            h.update(chunk)
            buf.write(chunk)
        if want and h.hexdigest() != want:
            raise Error(200, "digest_mismatch",
                        f"lookup {key}: received bytes hash to {h.hexdigest()}, server announced {want}")
        self._check_signature(key, h.hexdigest(), r.header("X-Cachesvc-Signature"))
        return LookupResult(key=key, value=buf.getvalue(),
                            compile_seconds=_float_header(r.header("X-Compile-Seconds")))
