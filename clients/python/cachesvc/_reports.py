"""Reports and quarantine: ``POST .../entries/{key}/reports`` (any client)
and the admin calls that read reports, quarantine, restore and list."""

from __future__ import annotations

import hashlib
import os
import socket
import urllib.parse
from typing import Any

from ._transport import _json_body, _Transport
from ._types import ReportResult


class _Reports(_Transport):
    """The :class:`cachesvc.Client` methods on entry reports and quarantine."""

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
