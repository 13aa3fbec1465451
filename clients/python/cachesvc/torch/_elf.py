"""A structural check of the shared libraries the ``cpp`` tier (``_cpp``) serves.

An FX graph or AOTAutograd value torch cannot load is caught by torch itself
(a miss, ``_heal`` reports it). A C++ library is different: the tier writes it
where the build would have, and torch then ``dlopen``s it with no fallback, so
a truncated or garbled library fails the training job (``OSError`` from
``cdll.LoadLibrary``, or, for the library of torch's vector-ISA probe, a
``CppCompileError`` for every kernel: the probe says the ISA is unusable and
the kernels are compiled without its flags). The server's digests rule out
storage damage, not bytes that were bad when uploaded.

So a library is written only when it is an ELF shared object for this
machine (class, byte order, architecture) whose header, program headers,
section headers and loadable segments all lie inside the bytes: what a
truncated or garbled upload fails. It does not load the library (torch loads
kernel libraries in this process, its ISA probe only in a child), so a
well-formed library that still fails to load (a missing symbol) is not
caught here.
"""

from __future__ import annotations

import functools
import struct
import sys

_MAGIC = b"\x7fELF"
_ET_DYN = 3
_PT_LOAD = 1


@functools.lru_cache(maxsize=1)
def _host_machine() -> int | None:
    """``e_machine`` of this interpreter's executable (the architecture the
    libraries must be built for), or None when it cannot be read."""
    try:
        with open("/proc/self/exe", "rb") as f:
            head = f.read(20)
    except OSError:
        try:
            with open(sys.executable, "rb") as f:
                head = f.read(20)
        except OSError:
            return None
    if len(head) < 20 or head[:4] != _MAGIC or head[5] not in (1, 2):
        return None
    return int(struct.unpack_from("<H" if head[5] == 1 else ">H", head, 18)[0])


def problem(data: bytes) -> str | None:
    """Why ``data`` is not a loadable-looking shared library for this machine,
    or None when its structure is sound."""
    n = len(data)
    if n < 52 or data[:4] != _MAGIC:
        return f"not an ELF file ({n} bytes, starting {data[:8]!r})"
    cls, order = data[4], data[5]
    want_cls = 2 if sys.maxsize > 2**32 else 1
    if cls != want_cls:
        return f"ELF class byte {cls}, this {'64' if want_cls == 2 else '32'}-bit process needs {want_cls}"
    want_order = 1 if sys.byteorder == "little" else 2
    if order != want_order:
        return f"ELF byte-order byte {order}, this machine is {sys.byteorder}-endian"
    e = "<" if order == 1 else ">"
    if cls == 2:
        if n < 64:
            return f"truncated ELF header ({n} bytes)"
        etype, machine = struct.unpack_from(e + "HH", data, 16)
        phoff, shoff = struct.unpack_from(e + "QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", data, 54)
    else:
        etype, machine = struct.unpack_from(e + "HH", data, 16)
        phoff, shoff = struct.unpack_from(e + "II", data, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", data, 42)
    if etype != _ET_DYN:
        return f"ELF type {etype}, not a shared object ({_ET_DYN})"
    host = _host_machine()
    if host is not None and machine != host:
        return f"built for ELF machine {machine}, this machine is {host}"
    if phnum == 0 or phentsize < (56 if cls == 2 else 32):
        return "no program headers"
    if phoff + phnum * phentsize > n:
        return f"truncated: program headers end at byte {phoff + phnum * phentsize} of {n}"
    if shnum and shoff + shnum * shentsize > n:
        return f"truncated: section headers end at byte {shoff + shnum * shentsize} of {n}"
    for i in range(phnum):
        at = phoff + i * phentsize
        if cls == 2:
            ptype, _, offset, _, _, filesz = struct.unpack_from(e + "IIQQQQ", data, at)
        else:
            ptype, offset, _, _, filesz = struct.unpack_from(e + "IIIII", data, at)
        if ptype == _PT_LOAD and offset + filesz > n:
            return f"truncated: a loadable segment ends at byte {offset + filesz} of {n}"
    return None
