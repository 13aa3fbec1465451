"""The client's error and result types.

They live apart from the request code so that every part of the client (and
the JAX and torch backends) can name them without importing the rest;
:mod:`cachesvc.client` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
        request_id: the request's ``X-Request-Id`` (the server's answer names
            it; the client sends a fresh uuid4 with each call, kept across
            its retries), "" when unknown. Quote it to the server's operator:
            it finds the request's log line (key ``request_id``).
        details: the error's ``details`` JSON (e.g. how a waited-for lease
            ended: ``{"lease": "expired", "holder": ...}``), or None.
    """

    def __init__(self, status: int, code: str, message: str, request_id: str = "", details: Any = None) -> None:
        text = f"{code} ({status}): {message}" if status else f"{code}: {message}"
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details = details

    def __reduce__(self) -> tuple[type["Error"], tuple[int, str, str, str, Any]]:
        # Pickled with its fields (Exception's default would rebuild it
        # from the formatted text alone and fail): an Error raised in a
        # multiprocessing worker reaches the parent as itself.
        return type(self), (self.status, self.code, self.message, self.request_id, self.details)

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


@dataclass(frozen=True)
class BatchMember:
    """One entry of a batch stream (from its tar header and PAX records)."""

    key: str
    size: int
    sha256: str
    compile_seconds: float | None = None
    name: str = ""
    backend: str = ""
