"""Inductor's compiled C++ libraries (CPU kernels) in cachesvc.

On CPU, torch 2.15's FX graph cache entries hold the generated C++ *source*:
a process that hits the remote FX graph cache with an empty
``TORCHINDUCTOR_CACHE_DIR`` still runs the C++ compiler for every kernel (the
``.so`` files live only in the local cache directory; Triton kernels, by
contrast, are bundled into the FX graph entries). This tier closes that gap,
like ccache: it wraps ``torch._inductor.cpp_builder.CppBuilder.build`` and,
for a build that compiles C++ sources straight to a shared library, looks the
library up before compiling and writes it after.

The key (a ``pt2`` signature of cache id ``inductor-cpp``, so the libraries
count under torch on the dashboard) hashes what decides the
library: the compile command with this process's cache paths replaced by
placeholders (flags, defines, include directories, the ISA), the sources'
bytes, the compiler driver's bytes, torch's version and the machine
architecture, and for ``-march=native`` builds (Inductor's default on CPU)
this CPU's model and feature flags. Headers are covered through torch's version (torch's own
headers) and the compiler's identity (the system's); a host whose system
headers differ under the same compiler binary is outside what it checks.
Builds it cannot key (preprocessing, precompiled headers, object files,
relative-path builds) run as before. A library served that is not a sound
shared object for this machine (``_elf``) is reported like an FX graph torch
cannot load, and built here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import shlex
import shutil
import tempfile
import time
from typing import Any, Callable

from . import _elf, _keys

log = logging.getLogger("cachesvc.torch")

CACHE = "inductor-cpp"
TARGET = ("torch._inductor.cpp_builder", "CppBuilder")
_SOURCE_EXT = (".cpp", ".cc", ".cxx", ".c")


@functools.lru_cache(maxsize=8)
def _compiler_id(compiler: str) -> str:
    """sha256 of the compiler driver's bytes (found on PATH), or its name."""
    path = shutil.which(compiler) or compiler
    try:
        with open(os.path.realpath(path), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return compiler


@functools.lru_cache(maxsize=1)
def _host_cpu() -> str:
    """Digest of this CPU's model and feature flags (``-march=native`` builds
    for exactly them), from /proc/cpuinfo; the processor name elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            keep = []
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                k = line.split(":", 1)[0].strip()
                if k in ("vendor_id", "cpu family", "model", "model name", "flags", "Features", "CPU part"):
                    keep.append(line.strip())
        return hashlib.sha256("\n".join(keep).encode()).hexdigest()
    except OSError:
        return platform.processor() or platform.machine()


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def signature(builder: Any) -> tuple[dict[str, Any], str] | None:
    """(pt2 signature, target path) of a build this tier handles, or None."""
    if getattr(builder, "_use_relative_path", False) or not getattr(builder, "_do_link", False):
        return None
    target = str(builder.get_target_file_path())
    sources = shlex.split(str(getattr(builder, "_sources_args", "")))
    if not target.endswith(".so") or not sources or \
            not all(s.endswith(_SOURCE_EXT) and os.path.isfile(s) for s in sources):
        return None
    cmd = str(builder.get_command_line())
    # Other files the command reads (a precompiled header, a kernel library):
    # their bytes are part of the key.
    inputs = sorted({t for t in shlex.split(cmd) if os.path.isabs(t) and os.path.isfile(t)
                     and t not in sources and t != target})
    for i, src in enumerate(sources):
        cmd = cmd.replace(src, f"<src{i}>")
    cmd = cmd.replace(target, "<target>")
    out_dir = str(getattr(builder, "_output_dir", "") or "")
    if out_dir:
        cmd = cmd.replace(out_dir, "<out>")
    try:
        from torch._inductor.runtime.runtime_utils import cache_dir, default_cache_dir

        # The precompiled headers live under the default cache dir
        # ($TMPDIR/torchinductor_$USER) even with TORCHINDUCTOR_CACHE_DIR set;
        # their file names hash their contents and the header's bytes are in
        # "inputs", so their directory only made other users and jobs with
        # their own TMPDIR miss. The longer path first: one may hold the other.
        places = {default_cache_dir(): "<default-cache>", cache_dir(): "<cache>"}
        for path in sorted(places, key=len, reverse=True):
            cmd = cmd.replace(path, places[path])
    except Exception:  # noqa: BLE001 - keep the paths: more misses, never a wrong hit
        pass
    doc = {
        "torch": _keys.torch_version(),
        "machine": platform.machine(),
        "compiler": _compiler_id(str(getattr(builder, "_compiler", ""))),
        "command": cmd,
        "sources": [_file_digest(s) for s in sources],
        "inputs": [_file_digest(t) for t in inputs],
    }
    if "-march=native" in cmd or "-mcpu=native" in cmd or "-mtune=native" in cmd:
        doc["cpu"] = _host_cpu()  # the library runs only where these features are
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    sig = {"backend": "pt2", "cache": CACHE, "key": key, "torch_version": doc["torch"], "device": "cpu",
           "name": os.path.basename(target)[:120]}
    return sig, target


def _write_target(path: str, data: bytes) -> None:
    """Writes the library atomically, executable like a linker's output."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".cachesvc-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def wrap_build(orig: Callable[[Any], None], service: Any) -> Callable[[Any], None]:
    """Wraps ``CppBuilder.build``: a library found in cachesvc is written to
    the build's target instead of compiling; a compiled one is uploaded."""

    @functools.wraps(orig)
    def build(self: Any) -> None:
        try:
            plan = signature(self)
        except Exception as exc:  # noqa: BLE001 - cannot key it: build as usual
            log.debug("cachesvc: not keying a C++ build: %s", exc)
            plan = None
        if plan is None:
            return orig(self)
        sig, target = plan
        pending = f"{CACHE}:{sig['key']}"
        data = service.lookup(sig, CACHE, pending)
        served = service.take_hit() if data is not None else None
        bad = _elf.problem(data) if data is not None else None
        if bad is not None:
            # Written, torch would fail the job loading it: report it
            # (quarantined after enough reporters) and compile instead.
            service.load_failed(served or "", f"the C++ library {os.path.basename(target)} is not a "
                                f"loadable shared library here: {bad}")
            data = None
        if data is not None:
            try:
                _write_target(target, data)
                return None
            except OSError as exc:
                log.debug("cachesvc: cannot write %s: %s; compiling", target, exc)
        t0 = time.monotonic()
        orig(self)
        secs = time.monotonic() - t0
        service.cpp_built(secs)  # not to be counted again in the FX graph's time
        try:
            with open(target, "rb") as f:
                built = f.read()
        except OSError:
            return None
        service.submit(pending, sig, CACHE, built, secs, os.path.basename(target)[:120])
        return None

    build.__cachesvc__ = True  # type: ignore[attr-defined]
    return build
