"""The ``xla`` plugin signature of one JAX compile (canonical mode): the
module text without debug info and the other components JAX hashes into its
own key, plus a fingerprint of the loaded jaxlib build."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
from typing import Any

# The same logger as cachesvc.jax: one name for everything the JAX backend logs.
log = logging.getLogger("cachesvc.jax")


def _xla_flags(extra_prefixes: list[str], excluded: list[str]) -> list[str]:
    """The XLA flags JAX hashes into its key (same sources, same exclusions),
    in the order they are given (JAX's own key sorts them; ours does not).

    A flag given twice takes its last value, so ``--f=true --f=false`` and
    ``--f=false --f=true`` compile differently; sorted whole strings make the
    two one key (a launcher appending an override to ``LIBTPU_INIT_ARGS``,
    whose flags are in no compile option, could get another job's executable). The
    ``xla`` plugin sorts flags by name with a stable sort: the order of
    distinct names does not matter, the order of repeats stays in the key."""
    flags: list[str] = []
    for var in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        v = os.getenv(var)
        if v:
            flags.extend(v.split())
    for arg in sys.argv:
        if arg.startswith("--xla") or any(arg.startswith(p) for p in extra_prefixes):
            flags.append(arg)
    return [f for f in flags if f.split("=")[0] not in excluded]


def _xla_signature(module: Any, devices: Any, compile_options: Any, backend: Any,
                   args: tuple, kwargs: dict) -> dict[str, Any]:
    """The ``xla`` plugin signature of one compile, from cache_key.get's arguments.

    Mirrors what JAX hashes into its own key (jax 0.10.2 ``cache_key.get``),
    but sends the module as text without debug info so that the server can
    canonicalize names away.
    """
    from jax._src import cache_key as ck
    from jax._src import config as jcfg
    from jax._src.lib import version_str as jaxlib_version

    compression = args[0] if args else kwargs.get("compression_algorithm", "zstandard")
    ignore_callbacks = args[1] if len(args) > 1 else kwargs.get("ignore_callbacks")

    with module.context:
        m = module
        no = getattr(getattr(ck, "IgnoreCallbacks", None), "NO", None)
        if ignore_callbacks is not None and ignore_callbacks != no and hasattr(ck, "_remove_callbacks"):
            m = ck._remove_callbacks(module.operation.clone(), ignore_callbacks)
        meta_flag = getattr(jcfg, "compilation_cache_include_metadata_in_key", None)
        include_meta = bool(meta_flag.value) if meta_flag is not None else False
        text = m.operation.get_asm(enable_debug_info=False)
        # With jax_compilation_cache_include_metadata_in_key the user asks
        # that names and source locations tell programs apart, as in JAX's
        # own key: the executable carries them (HLO metadata: profiles, error
        # messages). The plugin drops them from the module text, so they go
        # in as a digest of the text with debug info.
        metadata = hashlib.sha256(m.operation.get_asm(enable_debug_info=True).encode()).hexdigest() \
            if include_meta else ""

    # JAX points XLA's own caches (autotune results, GPU kernels) into
    # jax_compilation_cache_dir, so its key depends on that directory's path.
    # The path does not change the executable: clear it, so hosts with
    # different cache directories share keys.
    compile_options = _without_cache_paths(compile_options)
    opts = hashlib.sha256()
    if hasattr(ck, "_hash_serialized_compile_options"):
        ck._hash_serialized_compile_options(opts, compile_options,
                                            strip_device_assignment=(backend.platform == "gpu"))
    else:
        opts.update(compile_options.SerializeAsString())

    topo = hashlib.sha256()
    host = _cpu_host_fingerprint() if backend.platform == "cpu" and _process_count() > 1 else ""
    if host:
        # Multi-process on CPU: XLA's CPU topology fingerprint (what JAX
        # hashes) describes the calling process's own client, process index
        # included, so every process of one job got its own key and only
        # process 0 (the one JAX lets write) ever hit. Hash what the
        # executable depends on instead: the host CPU (architecture and ISA
        # features, so other CPUs never share it) and the device kinds; the
        # device ids stay in the compile options' device assignment.
        topo.update(f"cpu-host\0{host}\0".encode())
        for d in devices.flat:
            topo.update(str(d.device_kind).encode() + b"\0")
    elif hasattr(ck, "_hash_accelerator_config"):
        ck._hash_accelerator_config(topo, devices)
    else:
        for d in devices.flat:
            topo.update(d.device_kind.encode())
    kinds = sorted({str(d.device_kind) for d in devices.flat})

    excluded = list(getattr(ck, "xla_flags_to_exclude_from_cache_key", []))
    prefixes = list(ck.get_flag_prefixes()) if hasattr(ck, "get_flag_prefixes") else []
    extra: dict[str, str] = {}
    hook = ck.custom_hook() if hasattr(ck, "custom_hook") else ""
    if hook:
        extra["custom_hook"] = hook
    if metadata:
        extra["metadata"] = metadata
    return {
        "backend": "xla",
        "module": text,
        "module_format": "stablehlo",
        "platform": str(backend.platform),
        "platform_version": str(backend.platform_version),
        "jaxlib_version": str(jaxlib_version),
        "xla_flags": _xla_flags(prefixes, excluded),
        "compile_options": opts.hexdigest(),
        "topology": f"{topo.hexdigest()} devices={devices.size} kinds={','.join(kinds)}",
        "codec": str(compression),
        "extra": extra,
        **({"jaxlib_build": build} if (build := _jaxlib_build()) else {}),
    }


def _process_count() -> int:
    """jax.process_count(), or 1 when it cannot be read."""
    try:
        import jax
        return int(jax.process_count())
    except Exception:  # noqa: BLE001
        return 1


_host_memo: str | None = None


def _cpu_host_fingerprint() -> str:
    """SHA-256 (hex) of this host's CPU architecture and ISA feature flags
    (``/proc/cpuinfo``: ``flags`` on x86, ``Features`` on ARM), the CPUs an
    XLA CPU executable compiled here may run on; "" when they cannot be read
    (then the signature keeps JAX's own topology fingerprint). Read once."""
    global _host_memo
    if _host_memo is None:
        feats = ""
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    name, sep, value = line.partition(":")
                    if sep and name.strip() in ("flags", "Features"):
                        feats = " ".join(sorted(value.split()))
                        break
        except OSError:
            pass
        import platform
        _host_memo = hashlib.sha256(f"{platform.machine()}\0{feats}".encode()).hexdigest() if feats else ""
    return _host_memo


# Names of the shared library that holds jaxlib's code when the extension
# module itself is a shim (jaxlib 0.10: _jax.so is 3.5 KB, libjax_common.so
# 350 MB beside it).
_JAXLIB_COMMON = ("libjax_common.so", "libjax_common.dylib", "jax_common.dll")


def _jaxlib_extension_files() -> list[str]:
    """The files of the loaded XLA extension: ``jaxlib._jax`` (``jaxlib.xla_extension``
    in older jaxlib) and the library beside it that holds its code; [] if not loaded."""
    for name in ("jaxlib._jax", "jaxlib.xla_extension"):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            break
    else:
        return []
    files = [os.path.realpath(path)]
    for lib in _JAXLIB_COMMON:
        p = os.path.join(os.path.dirname(path), lib)
        if os.path.isfile(p):
            files.append(os.path.realpath(p))
    return files


_build_lock = threading.Lock()
_build_memo: tuple[tuple, str] | None = None  # ((path, size, mtime_ns) per file, digest)

# The digest is also kept on disk, so that a process does not read jaxlib's
# ~333 MB again when an earlier process on the host already did (~1 s, paid
# by every warm process otherwise). A file's inode, device and ctime join
# its size and mtime there: ctime cannot be set back (utime sets mtime and
# moves ctime), so a file rewritten in place is read again.
_DISK_MEMO_NAME = "jaxlib-build.json"
_DISK_MEMO_ENTRIES = 8  # jaxlib installs remembered (venvs on one host); the oldest goes


def _disk_memo_path() -> str:
    """``$XDG_CACHE_HOME/cachesvc/jaxlib-build.json`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cachesvc", _DISK_MEMO_NAME)


def _disk_stamp(files: list[str]) -> list[list]:
    """Per file: path, size, mtime, ctime, inode, device (JSON-ready)."""
    return [[p, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
            for p in files for st in (os.stat(p),)]


def _disk_memo_entries(path: str) -> list[dict[str, Any]]:
    """The memo file's entries; [] when it is missing or not ours."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        entries = doc.get("entries") if isinstance(doc, dict) and doc.get("version") == 1 else None
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    except (OSError, ValueError):
        return []


def _disk_memo_get(stamp: list[list]) -> str:
    """The digest remembered for exactly these files, or ""."""
    for e in _disk_memo_entries(_disk_memo_path()):
        digest = e.get("sha256")
        if e.get("files") == stamp and isinstance(digest, str) and len(digest) == 64:
            try:
                int(digest, 16)
            except ValueError:
                continue
            return digest
    return ""


def _disk_memo_put(stamp: list[list], digest: str) -> None:
    """Remembers digest for these files (newest first, at most
    _DISK_MEMO_ENTRIES), written whole to a temporary file and renamed, so a
    reader never sees half of it. Fails quietly: the memo only saves time."""
    path = _disk_memo_path()
    try:
        entries = [e for e in _disk_memo_entries(path) if e.get("files") != stamp]
        doc = {"version": 1, "entries": [{"files": stamp, "sha256": digest}, *entries][:_DISK_MEMO_ENTRIES]}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".jaxlib-build-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        log.debug("cachesvc: cannot remember the jaxlib fingerprint in %s: %s", path, exc)


def _jaxlib_build() -> str:
    """SHA-256 (hex) of the loaded XLA extension's files, the signature's
    ``jaxlib_build``: two jaxlib builds with one version string then never share
    an executable (JAX issue #18750). Read (streamed) once per host and jaxlib
    install: kept in the process while every file's path, size and mtime stay
    the same, and on disk (_disk_memo_path) while its inode and ctime do too;
    "" (no field) when the files cannot be found or read."""
    global _build_memo
    try:
        files = _jaxlib_extension_files()
        if not files:
            return ""
        stamp = tuple((p, st.st_size, st.st_mtime_ns) for p in files for st in (os.stat(p),))
        with _build_lock:
            if _build_memo is not None and _build_memo[0] == stamp:
                return _build_memo[1]
            disk_stamp = _disk_stamp(files)
            digest = _disk_memo_get(disk_stamp)
            if not digest:
                h = hashlib.sha256()
                for p, size, _ in stamp:
                    h.update(f"{os.path.basename(p)}\0{size}\0".encode())
                    with open(p, "rb") as f:
                        while chunk := f.read(1 << 20):
                            h.update(chunk)
                digest = h.hexdigest()
                _disk_memo_put(disk_stamp, digest)
            _build_memo = (stamp, digest)
            return digest
    except Exception as exc:  # noqa: BLE001 - fail open: the key just lacks the field
        log.debug("cachesvc: cannot fingerprint the jaxlib build: %s", exc)
        return ""


_CACHE_PATH_OPTIONS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file")


def _without_cache_paths(compile_options: Any) -> Any:
    """A copy of ``compile_options`` with XLA's cache-file paths cleared (the
    original goes to the compiler untouched); the original if none is set."""
    try:
        dbg = compile_options.executable_build_options.debug_options
        if not any(getattr(dbg, name, "") for name in _CACHE_PATH_OPTIONS):
            return compile_options
        import copy
        c = copy.deepcopy(compile_options)
        dbg = c.executable_build_options.debug_options
        for name in _CACHE_PATH_OPTIONS:
            if getattr(dbg, name, ""):
                setattr(dbg, name, "")
        return c
    except Exception:  # noqa: BLE001 - unknown options object: hash it as is
        return compile_options
