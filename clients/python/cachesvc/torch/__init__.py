"""torch.compile's remote caches in cachesvc.

One line before the first compile::

    import cachesvc.torch; cachesvc.torch.install("http://cache:8080")

or configured from the environment (``CACHESVC_URL``, ``CACHESVC_NAMESPACE``,
``CACHESVC_TOKEN``, ``CACHESVC_TOKEN_FILE``, ``CACHESVC_RUN``,
``CACHESVC_VERIFY_KEY``, ``CACHESVC_CLIENT_CERT``, ``CACHESVC_CLIENT_KEY``,
``CACHESVC_LEASES``)::

    import cachesvc.torch; cachesvc.torch.install()

How it hooks in (torch has no public backend API; coded against torch 2.15.0, and run on 2.11 on a GPU):

* Every ``RemoteCache`` subclass in ``torch/_inductor/remote_cache.py`` has a
  ``backend_override_cls`` (torch's own tests inject backends with it). We set
  it on ``RemoteFxGraphCache``, ``RemoteAOTAutogradCache``,
  ``RemoteAutotuneCache``, ``RemoteBundledAutotuneCache`` and
  ``RemoteDynamoPGOCache``: torch then calls our ``_get(key)`` / ``_put(key,
  value)`` with its Redis key ``pt2:<cache_id>::<key>:c1`` and JSON bytes.
* We switch those caches on (``fx_graph_remote_cache``,
  ``enable_remote_autograd_cache``, ``autotune_remote_cache``,
  ``bundled_autotune_remote_cache`` where a GPU Triton backend exists,
  ``automatic_dynamic_remote_pgo``) unless a switch was explicitly turned off
  (``TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=0`` ...): an explicit ``False`` wins.
* For a graph with CPU kernels we add the CPU's vector ISA to torch's FX
  graph and AOTAutograd keys (``_isa.py``): torch leaves it out, and an
  AVX2 host served an AVX-512 host's kernels computed NaN.
* The server's ``pt2`` plugin computes the keys from torch's key. We add
  components that explain a miss (versions, device, digests of the Inductor
  config and the graph), captured by wrapping torch's FX graph hash function
  and AOTAutograd's debug-lines function.

Failure: a server that is down, slow or failing is a miss (torch compiles);
one warning, then at most one per ``warn_interval``; every call has a time
budget; a circuit breaker skips the server after repeated failures; writes go
through a bounded background queue flushed at exit (:func:`flush`). SIGTERM
(a scheduler stopping the job) kills Python without running exit handlers:
when SIGTERM has no handler, install sets one that flushes for at most 5 s,
releases the leases, then dies by SIGTERM as before (``cachesvc._sigterm``).

Shape classes: torch keys an FX graph or AOTAutograd entry without the
guards on its symbolic sizes and a remote cache holds one value per key, so
a process whose shapes fail the stored graph's guards writes its graph as
the key's next candidate (at most ``_candidates.SLOTS``, 4), and a lookup
fetches the next candidate only after torch rejected one (``_candidates.py``).

Autotune records: torch saves a kernel's record twice on its first launch
(the benchmarked winner, then coordinate descent's config) under one key;
entries are immutable, so each is held until it settles and written once
(``_autotune.py``).

Self-healing: an FX graph or AOTAutograd artifact from the server that torch
cannot load (unpickling raises) is reported to the server with the error and
stays a miss, so torch compiles; enough distinct reports quarantine it
(``_heal.py``).

Leases (``install(leases=True)`` or ``CACHESVC_LEASES=1``): on an FX graph
miss, the process that takes the server's compile lease compiles and the
others wait for its entry, so processes that start together compile each
graph once (``_lease.py``).

Mega-Cache: :func:`save` stores ``torch.compiler.save_cache_artifacts()``
under a run id and this environment, :func:`load` pre-fills the local caches of
a new process from it, and ``python -m cachesvc.torch load RUN`` does the same
from a launcher (see ``python -m cachesvc.torch --help``).
"""

from __future__ import annotations

import atexit
import importlib
import logging
import threading
from typing import Any, Callable

from .._failopen import Breaker, Settings, env, env_flag, resolve_lookup_timeout, several_ranks
from ..client import Client
from .. import _sigterm
from . import _cpp, _heal, _isa, _keys, _lease, _mega
from ._service import CacheStats, Service, backend_class

__all__ = ["install", "uninstall", "installed", "stats", "summary", "misses", "flush", "save", "load", "CacheStats"]

log = logging.getLogger("cachesvc.torch")

# cache name -> (RemoteCache class in torch._inductor.remote_cache, (config module, switch))
CACHES: dict[str, tuple[str, tuple[str, str]]] = {
    "fx_graph": ("RemoteFxGraphCache", ("torch._inductor.config", "fx_graph_remote_cache")),
    "autograd": ("RemoteAOTAutogradCache", ("torch._functorch.config", "enable_remote_autograd_cache")),
    "autotune": ("RemoteAutotuneCache", ("torch._inductor.config", "autotune_remote_cache")),
    "bundled_autotune": ("RemoteBundledAutotuneCache",
                         ("torch._inductor.config", "bundled_autotune_remote_cache")),
    "pgo": ("RemoteDynamoPGOCache", ("torch._dynamo.config", "automatic_dynamic_remote_pgo")),
}
# Not a torch remote cache: Inductor's compiled C++ libraries (see _cpp).
CPP = "cpp"

_lock = threading.Lock()
_installed: Service | None = None
_restore: list[Callable[[], None]] = []  # undo steps of the current install, in order
_atexit_registered = False


def _flush_at_exit(timeout: float | None = None) -> None:
    """At exit (and on SIGTERM, within ``timeout``): writes the held autotune
    records and PGO profiles and the queued uploads, then releases the leases."""
    s = _installed
    if s is None:
        return
    limit = s.flush_at_exit if timeout is None else min(timeout, s.flush_at_exit)
    if not s.flush(limit):
        if not s.breaker.allow():  # the failure was warned about already
            log.debug("cachesvc: exiting without the queued uploads (circuit breaker open)")
        else:
            log.warning("cachesvc: exiting with uploads still queued (waited %.0fs)", limit)
    if s.breaker.allow():  # else the leases expire by themselves
        s.release_leases()


def _gpu_triton() -> bool:
    """True when Inductor can key autotune bundles here (a GPU Triton backend):
    torch 2.15 fails a CPU compile with the bundled autotune cache on."""
    try:
        import torch
        from torch.utils._triton import has_triton

        return bool(torch.cuda.is_available() and has_triton())
    except Exception:  # noqa: BLE001
        return False


def _set(obj: Any, attr: str, value: Any) -> None:
    """setattr that records how to undo it."""
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    _restore.append(lambda: setattr(obj, attr, old))


def _clear_aot_remote_cache() -> None:
    """AOTAutograd memoizes its remote cache (functools.cache): drop it so the
    next compile builds one with the current backend."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

        AOTAutogradCache.get_remote_cache.cache_clear()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not memoized in this torch
        pass


def install(
    url: str | None = None,
    namespace: str | None = None,
    token: str | None = None,
    *,
    run: str | None = None,
    caches: tuple[str, ...] | list[str] | None = None,
    components: bool = True,
    timeout: float = 10.0,
    lookup_timeout: float | None = None,
    put_timeout: float | None = None,
    retries: int = 2,
    warn_interval: float = 60.0,
    breaker_threshold: int = 3,
    breaker_cooldown: float = 30.0,
    background_uploads: bool = True,
    upload_queue_bytes: int = 1 << 30,
    flush_at_exit: float = 60.0,
    client: Client | None = None,
    verify_key: str | list[str] | None = None,
    leases: bool | None = None,
    lease_ttl: float = 30.0,
    lease_wait: float = 3600.0,
) -> Service | None:
    """Routes torch.compile's remote caches to cachesvc and turns them on.

    Call it before the first compile. Installing again replaces the previous
    install.

    Args:
        url: the server URL; default ``$CACHESVC_URL``. With neither, a warning
            is logged and nothing is installed (returns None).
        namespace: default ``$CACHESVC_NAMESPACE`` or ``"default"``.
        token: bearer token; default ``$CACHESVC_TOKEN``, else the first line
            of the file ``$CACHESVC_TOKEN_FILE``.
        run: the run id sent with every request (the server records the run's
            manifest); default ``$CACHESVC_RUN``, else ``torchrun-<job id>``
            in a torchrun rank (all ranks one run), else ``<host>-<pid>-<random>``.
        caches: which caches to route, of ``fx_graph``, ``autograd``,
            ``autotune``, ``bundled_autotune``, ``pgo``, and ``cpp``
            (Inductor's compiled C++ libraries, which torch itself keeps
            only on local disk; see ``cachesvc.torch._cpp``). Default: all.
        components: capture miss components by wrapping torch's hash
            functions (versions, device, Inductor config, graph digests).
        timeout: time budget in seconds of one lookup, retries included
            (streaming a large hit included).
        lookup_timeout: how long a lookup waits to connect and receive the
            server's response headers (not retried; a timeout opens the
            breaker at once), so a hung server costs about this once; default
            ``$CACHESVC_LOOKUP_TIMEOUT`` or 1 s; 0: only ``timeout`` applies.
        put_timeout: time budget of one write; default ``timeout`` plus one
            second per 20 MB.
        retries: retries after a connection error, 503 or 429, within the budget.
        warn_interval: at most one warning per this many seconds.
        breaker_threshold: consecutive failures that open the circuit breaker
            (a timeout opens it at once).
        breaker_cooldown: seconds the breaker stays open.
        background_uploads: write from a background thread, at most
            ``upload_queue_bytes`` queued (more is dropped and counted as
            ``put_dropped``); at exit wait up to ``flush_at_exit`` seconds
            (not while the breaker is open: the server timed out or keeps failing);
            on SIGTERM, when the program set no handler of its own, at most
            5 s (``_sigterm.BOUND``), then it dies by SIGTERM.
        client: use this :class:`cachesvc.Client` instead of building one.
        verify_key: Ed25519 public key every entry must be signed with, or
            several (comma-separated, or a list: the old and the new during
            a key rotation), any of which may have signed it; default
            ``$CACHESVC_VERIFY_KEY``.
        leases: on an FX graph miss, take the server's compile lease before
            Inductor compiles, so that processes starting together compile
            each graph once: the others wait for its entry (``_lease``).
            Default ``$CACHESVC_LEASES`` (``1``, or ``0`` for off) when set,
            else on in one of several ranks (``WORLD_SIZE`` above 1: torchrun's
            ranks miss every graph together), else off. A lease ends with the
            graph's write, or when its compile returns without one.
        lease_ttl: seconds a lease lasts unless renewed; it is renewed every
            ``lease_ttl/4`` s (a failed renewal again after ``lease_ttl/12``)
            until the compile ends and its write is done, so it ends about
            this long after a holder is killed: that long its waiters stall
            before one of them compiles. Default 30 (it was 120).
        lease_wait: the most a miss waits for another holder's entry, in
            seconds, while that holder's lease lives (it is renewed while the
            holder compiles); it compiles itself as soon as the lease ends
            without the entry. Default 3600: a long compile is waited out,
            not repeated. The wait is sent in ``wait_slice`` slices (50 s),
            so a proxy's read timeout does not end it. 0: never wait,
            compile at once.

    Returns:
        The installed service (its ``stats()`` returns the counters), or None
        when nothing was installed (no URL, or this torch lacks the hooks; a
        warning says which).
    """
    global _installed, _atexit_registered
    settings = Settings.resolve(url, namespace, token, run, verify_key, lookup_timeout)
    if leases is None:
        # Ranks of one job compile the same graphs at the same moment: with
        # leases one compiles each graph and the others wait for it (2 DDP
        # ranks: first step 11.5 s against 26 s). A lone process gains nothing.
        leases = env_flag("CACHESVC_LEASES") if env("CACHESVC_LEASES") else several_ranks()
    wanted = [*CACHES, CPP] if caches is None else list(caches)
    unknown = [c for c in wanted if c not in CACHES and c != CPP]
    if unknown:
        raise ValueError(f"cachesvc.torch.install: unknown caches {unknown}; known: {[*CACHES, CPP]}")
    if client is None and not settings.url:
        log.warning("cachesvc: no server URL (pass url= or set CACHESVC_URL); "
                    "torch.compile's remote caches are not installed")
        return None
    try:
        import torch
        from torch._inductor import remote_cache as rc
    except Exception as exc:  # noqa: BLE001 - any import trouble: do nothing
        log.warning("cachesvc: cannot import torch's remote caches (%s: %s); not installed",
                    type(exc).__name__, exc)
        return None
    base = getattr(rc, "RemoteCacheBackend", None)
    missing = [] if base is not None else ["remote_cache.RemoteCacheBackend"]
    routes: list[tuple[type, Any, str]] = []  # (RemoteCache class, config module, switch)
    for name in (w for w in wanted if w in CACHES):
        cls_name, (mod_name, switch) = CACHES[name]
        cls = getattr(rc, cls_name, None)
        try:
            mod = importlib.import_module(mod_name)
        except Exception:  # noqa: BLE001
            mod = None
        if cls is None or not hasattr(cls, "backend_override_cls"):
            missing.append(f"remote_cache.{cls_name}.backend_override_cls")
            continue
        if mod is None or not hasattr(mod, switch):
            missing.append(f"{mod_name}.{switch}")
            continue
        routes.append((cls, mod, switch))
    hooks = []
    unexplained = []  # hash functions this torch lacks: caching works, explanations are coarser
    if components:
        for mod_name, fn_name in (_keys.FX_HASH, _keys.AOT_LINES):
            try:
                mod = importlib.import_module(mod_name)
            except Exception:  # noqa: BLE001
                mod = None
            wanted_fn = fn_name
            if mod is not None and not callable(getattr(mod, fn_name, None)) and fn_name == _keys.AOT_LINES[1]:
                fn_name = _keys.AOT_KEY[1]  # an older torch: the key function returns the lines
            if mod is None or not callable(getattr(mod, fn_name, None)):
                unexplained.append(f"{mod_name}.{wanted_fn}")
            else:
                hooks.append((mod, fn_name))
    cpp_builder = None
    if CPP in wanted:
        try:
            cpp_builder = getattr(importlib.import_module(_cpp.TARGET[0]), _cpp.TARGET[1])
            if not callable(getattr(cpp_builder, "build", None)):
                raise AttributeError("build")
        except Exception:  # noqa: BLE001
            cpp_builder = None
            missing.append(".".join(_cpp.TARGET) + ".build")
    if missing:
        log.warning("cachesvc: this torch (%s) lacks %s; %s", torch.__version__, ", ".join(missing),
                    "those caches are not routed to cachesvc"
                    if routes else "torch.compile's remote caches are not installed")
    if unexplained and (routes or cpp_builder is not None):
        # Only the dashboard's miss explanations lose detail: info, not a warning on every start.
        log.info("cachesvc: this torch (%s) lacks %s; its caches are routed to cachesvc, but a miss "
                 "is explained with fewer components", torch.__version__, ", ".join(unexplained))
    if base is None or not (routes or cpp_builder is not None):
        return None

    client = settings.install_client(client, log, timeout=timeout, retries=retries,
                                     not_installed="torch.compile's remote caches are not installed")
    if client is None:
        return None
    comps = _keys.ComponentMap() if hooks else None
    service = Service(client, timeout=timeout, put_timeout=put_timeout, lookup_timeout=settings.lookup_timeout,
                      breaker=Breaker(breaker_threshold, breaker_cooldown), warn_interval=warn_interval,
                      components=comps, background_uploads=background_uploads,
                      upload_queue_bytes=upload_queue_bytes, flush_at_exit=flush_at_exit,
                      leases=bool(leases) and "fx_graph" in wanted, lease_ttl=lease_ttl, lease_wait=lease_wait)
    backend = backend_class(base, service)
    gpu_triton = _gpu_triton()
    with _lock:
        _uninstall_locked()
        on = []
        for cls, mod, switch in routes:
            _set(cls, "backend_override_cls", backend)
            if switch == "bundled_autotune_remote_cache" and not gpu_triton:
                continue  # routed, but left as configured: see _gpu_triton
            if getattr(mod, switch) is None:  # unset; an explicit False stays off
                _set(mod, switch, True)
            if getattr(mod, switch):
                on.append(cls.__name__)
        if cpp_builder is not None:
            _set(cpp_builder, "build", _cpp.wrap_build(cpp_builder.build, service))
            on.append("cpp")
        for mod, fn_name in hooks:
            wrap = _keys.wrap_aot_lines if (mod.__name__, fn_name) == _keys.AOT_LINES else _keys.wrap_fx_hash
            _set(mod, fn_name, wrap(getattr(mod, fn_name), comps))
        if routes:
            _key_isa()
            try:
                guarded = getattr(importlib.import_module(_heal.TARGET[0]), _heal.TARGET[1])
                undo, ok = _heal.wrap(guarded, service)
            except Exception:  # noqa: BLE001 - no self-healing in this torch
                ok = False
            if ok:
                _restore.append(undo)
            else:
                log.warning("cachesvc: this torch lacks %s.iterate_over_candidates; artifacts that fail to "
                            "load are not reported", ".".join(_heal.TARGET))
        if service.leasebook is not None:
            try:
                undo, ok = _lease.wrap(importlib.import_module(_lease.TARGET[0]), service.compile_ended)
            except Exception:  # noqa: BLE001 - no leases in this torch
                ok = False
            if ok:
                _restore.append(undo)
                _restore.append(service.release_leases)  # undone first: before the wrapper goes
                service.leasebook.renew = True
            else:
                log.warning("cachesvc: this torch lacks %s; compiling without leases", ".".join(_lease.TARGET))
        _clear_aot_remote_cache()
        _installed = service
        if not _atexit_registered:
            atexit.register(_flush_at_exit)
            _atexit_registered = True
        _sigterm.register("torch", _flush_at_exit)
    log.info("cachesvc: torch remote caches -> %s namespace=%s run=%s on=%s leases=%s", client.url,
             client.namespace, client.run, ",".join(on), service.leasebook is not None and service.leasebook.renew)
    return service


def _key_isa() -> None:
    """Adds the CPU's vector ISA to torch's FX graph and AOTAutograd keys
    (``_isa``): torch's own keys let one ISA's kernels reach another's hosts."""
    try:
        cls = getattr(importlib.import_module(_isa.TARGET[0]), _isa.TARGET[1])
        init = cls.__dict__["__init__"]
    except Exception:  # noqa: BLE001 - another torch: its keys as they are
        log.warning("cachesvc: this torch lacks %s.__init__; FX graphs with CPU kernels are keyed without the "
                    "CPU's vector ISA, so hosts with different ISAs (AVX2, AVX-512) may share them: use one "
                    "namespace per CPU kind", ".".join(_isa.TARGET))
        return
    _set(cls, "__init__", _isa.wrap_init(init))


def _uninstall_locked() -> None:
    global _installed
    if _installed is None:
        return
    _installed.flush(_installed.flush_at_exit)
    while _restore:
        _restore.pop()()
    _clear_aot_remote_cache()
    _installed = None
    _sigterm.unregister("torch")


def uninstall() -> None:
    """Flushes queued writes and restores torch's backends, switches and hash
    functions as they were (no-op if not installed)."""
    with _lock:
        _uninstall_locked()


def installed() -> Service | None:
    """The installed service, or None."""
    return _installed


def stats() -> dict[str, Any]:
    """The installed service's counters as a dict (empty if not installed):
    ``lookups`` (answered), ``hits``, ``misses``, ``errors``, ``skipped``,
    ``puts`` ..., ``hit_bytes``, ``put_bytes``, ``lookup_seconds``,
    ``compile_seconds_saved``, ``guard_misses`` (values served whose shape
    guards failed here: not hits), ``candidates_written`` (graphs stored as
    another shape class's candidate of a key), ``candidates_full`` (not
    stored: all 4 candidates taken), ``autotune_superseded`` (autotune records
    replaced by a later save of their kernel, never written), ``autotune_held``
    (records held now until they settle), ``by_cache`` (per torch cache id)."""
    s = _installed
    return s.stats() if s is not None else {}


def summary() -> str:
    """:func:`stats` as one line for a person: hits of lookups, bytes, compile
    time saved, failures and hits per torch cache."""
    from .._summary import summary as _summary

    return _summary("cachesvc.torch", stats())


def misses() -> list[dict[str, Any]]:
    """The installed service's recent misses (at most 64), each with the torch
    key, the components sent and the server's explanation."""
    s = _installed
    return s.misses() if s is not None else []


def flush(timeout: float | None = 60.0) -> bool:
    """Waits until queued writes are done (or failed); False if ``timeout``
    ran out. True when nothing is installed."""
    s = _installed
    return True if s is None else s.flush(timeout)


def save(run: str | None = None, *, compile_seconds: float | None = None, timeout: float = 300.0,
         client: Client | None = None, url: str | None = None, namespace: str | None = None,
         token: str | None = None) -> str | None:
    """Stores this process's Mega-Cache (``torch.compiler.save_cache_artifacts()``)
    under ``run`` (default ``$CACHESVC_RUN``) and this environment.

    Call it after the compiles (e.g. after the first training steps). Uses
    the installed client unless ``client``/``url`` is given. ``compile_seconds``
    (sent as ``X-Compile-Seconds``) defaults to the compile time of the
    entries this install wrote or hit. Returns the server key, or None when
    there was nothing to save or the server failed (a warning says which);
    never raises for a server failure.

    Under torchrun every rank may call it: the first rank's blob is kept and
    the others' 409s count as ``mega_conflicts`` in :func:`stats`, logged at
    info (a lone process, ``WORLD_SIZE`` unset or 1, warns: a reused run id).
    """
    run = run or _env_run()
    if not run:
        raise ValueError("cachesvc.torch.save: pass a run id (or set CACHESVC_RUN)")
    svc = _installed
    c = _mega.resolve_client(client, svc, url=url, namespace=namespace, token=token)
    if c is None:
        log.warning("cachesvc: save(%r): no server URL (pass url= or set CACHESVC_URL)", run)
        return None
    if compile_seconds is None and svc is not None:
        st = svc.stats()
        compile_seconds = st["compile_seconds_written"] + st["compile_seconds_saved"]
    try:
        got = _mega.save_blob(c, run, compile_seconds=compile_seconds, timeout=timeout,
                              first_byte_timeout=_lookup_timeout(svc))
    except Exception as exc:  # noqa: BLE001 - saving is best effort
        log.warning("cachesvc: saving the Mega-Cache of run %r failed (%s: %s)", run, type(exc).__name__, exc)
        return None
    if got is None:
        log.warning("cachesvc: save(%r): torch has no cache artifacts to save (nothing compiled?)", run)
        return None
    if got.conflict:
        if svc is not None:
            svc.add(mega_conflicts=1)
        # Under torchrun every rank of a DDP/FSDP job compiles the same
        # graphs, so the first rank's blob serves all: a warning per rank
        # would only be noise. A lone process meeting another's blob is a
        # reused run id, worth a warning.
        (log.info if several_ranks() else log.warning)(
            "cachesvc: a Mega-Cache blob for run %r in this environment already exists with other "
            "bytes; kept the first one", run)
        return got.key
    if svc is not None:
        svc.add(mega_saved=1, mega_bytes=got.size)
    log.info("cachesvc: saved the Mega-Cache of run %r: %d bytes, %s", run, got.size, got.artifacts)
    return got.key


def load(run: str | None = None, *, timeout: float = 300.0, client: Client | None = None,
         url: str | None = None, namespace: str | None = None, token: str | None = None) -> Any:
    """Pre-fills torch's local caches from the Mega-Cache of ``run`` (default
    ``$CACHESVC_RUN``) made in this environment. Call it before the first
    compile. Returns torch's ``CacheInfo`` (what was loaded), or None when no
    blob exists for this run and environment, or on any failure (a warning
    says which); never raises for a server failure."""
    run = run or _env_run()
    if not run:
        raise ValueError("cachesvc.torch.load: pass a run id (or set CACHESVC_RUN)")
    svc = _installed
    c = _mega.resolve_client(client, svc, url=url, namespace=namespace, token=token)
    if c is None:
        log.warning("cachesvc: load(%r): no server URL (pass url= or set CACHESVC_URL)", run)
        return None
    res = _mega.load_blob(c, run, timeout=timeout, first_byte_timeout=_lookup_timeout(svc))
    if res.status == _mega.LOADED:
        if svc is not None:
            svc.add(mega_loaded=1, mega_bytes=res.size)
        log.info("cachesvc: loaded the Mega-Cache of run %r: %d bytes in %.2fs, %s", run, res.size,
                 res.seconds, res.artifacts)
        return res.info
    if res.status == _mega.MISSING:
        log.info("cachesvc: no Mega-Cache for run %r in this environment", run)
    else:
        log.warning("cachesvc: loading the Mega-Cache of run %r failed (%s)", run, res.error)
    return None


def _lookup_timeout(svc: Any) -> float | None:
    """The first-byte timeout of save/load: the installed service's, else
    ``$CACHESVC_LOOKUP_TIMEOUT`` (default 1 s)."""
    return svc.lookup_timeout if svc is not None else resolve_lookup_timeout(None)


def _env_run() -> str | None:
    return env("CACHESVC_RUN")
