"""cachesvc: client of the shared compile cache.

Standard library only. ``cachesvc.Client`` talks to a server; the JAX
integration lives in ``cachesvc.jax`` and the torch.compile one in
``cachesvc.torch`` (imported on demand; they import JAX or torch)::

    import cachesvc.jax; cachesvc.jax.install("http://cache:8080")
    import cachesvc.torch; cachesvc.torch.install("http://cache:8080")
"""

from __future__ import annotations

from .client import BatchMember, Client, EntryInfo, Error, KeyResult, Lease, LookupResult, PutResult, ReportResult

__all__ = ["BatchMember", "Client", "Lease", "EntryInfo", "Error", "KeyResult", "LookupResult", "PutResult", "ReportResult",
           "__version__"]

__version__ = "0.1.0"
