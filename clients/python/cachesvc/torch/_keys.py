"""``pt2`` signatures of torch's remote-cache keys, and the miss components.

torch hands a remote-cache backend its Redis key, ``pt2:<cache_id>::<key>:c1``.
The server's ``pt2`` plugin keys entries by exactly that triple; the optional
components (versions, device, digests of the Inductor config, of the graph
and of everything else torch hashed) only explain misses.

The graph digests come from torch's own hashing: ``compiled_fx_graph_hash``
(FX graphs) returns per-attribute "debug lines" ``[<hash>] <attr>: <text>``
alongside the key, and AOTAutograd's ``_get_debug_lines_for_cache_key``
receives the pickler and the details it hashed. Wrapping those two functions
records ``key -> components`` in a bounded map; the backend looks the key up
there when torch asks for it. Anything missing or failing only drops the
components, never the lookup.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import importlib.metadata
import logging
import re
import threading
import time
from typing import Any, Callable

log = logging.getLogger("cachesvc.torch")

# Attributes of torch's FxGraphHashDetails (and AOTAutogradCacheDetails, its
# subclass) grouped into the components a person reads on a miss; every other
# attribute goes into "other".
_GRAPH_ATTRS = frozenset({"gm", "example_inputs", "aot_config", "act_input_paths"})
_CONFIG_ATTRS = frozenset({"inductor_config", "inductor_config_comms"})
_LINE_RE = re.compile(r"^\[([^\]]*)\] ([A-Za-z_]\w*)(\[[^\]]*\])?")
_DEVICE_RE = re.compile(r"device\(type='([a-z0-9_]+)'")
_DIGEST_CHARS = 24  # 96 bits: plenty to tell digests apart on a miss
_COMPONENT_MAX = 256  # the plugin's limit per field


def split_key(full: str) -> tuple[str, str, str] | None:
    """``pt2:<cache>::<key>:<format>`` -> (cache, key, format), or None when the
    string is not in that form (it is then sent verbatim)."""
    if not full.startswith("pt2:") or "::" not in full:
        return None
    cache, rest = full[4:].split("::", 1)
    if ":" not in rest:
        return None
    key, fmt = rest.rsplit(":", 1)
    if not cache or not key or not fmt or f"pt2:{cache}::{key}:{fmt}" != full:
        return None
    return cache, key, fmt


def _clean(v: str) -> str:
    """A component value the plugin accepts: printable ASCII, at most 256 bytes."""
    s = "".join(c if " " <= c <= "~" else "?" for c in v)
    return s[:_COMPONENT_MAX]


def _digest(parts: list[str]) -> str:
    h = hashlib.sha256()
    for p in sorted(parts):
        h.update(p.encode("utf-8", "replace"))
        h.update(b"\n")
    return h.hexdigest()[:_DIGEST_CHARS]


@functools.lru_cache(maxsize=1)
def torch_version() -> str:
    """``torch.__version__`` (e.g. ``2.15.0+cu132``)."""
    import torch

    return str(torch.__version__)


@functools.lru_cache(maxsize=1)
def triton_version() -> str:
    """The installed Triton distribution's version, or "" without Triton
    (read from its metadata: Triton is not imported)."""
    for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-xpu"):
        try:
            return importlib.metadata.version(dist)
        except Exception:  # noqa: BLE001 - not installed under that name
            continue
    return ""


def default_device() -> str:
    """``cuda`` when torch sees a CUDA (or ROCm) device, else ``cpu``."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001
        return "cpu"


@functools.lru_cache(maxsize=4)
def device_capability(device: str) -> str:
    """``9.0`` for CUDA (compute capability of the current device); the vector
    ISA torch dispatches to (``AVX2``, ``AVX512``, ...) for CPU; "" otherwise."""
    try:
        import torch

        if device == "cuda":
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
        if device == "cpu":
            return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - no device info: no component
        pass
    return ""


def environment(device: str | None = None) -> dict[str, str]:
    """The environment components: torch and Triton versions, device kind and
    capability (fields with no value are left out)."""
    dev = device or default_device()
    env = {"torch_version": torch_version(), "triton_version": triton_version(),
           "device": dev, "device_capability": device_capability(dev)}
    return {k: _clean(v) for k, v in env.items() if v}


def components_from_debug_lines(lines: list[str]) -> dict[str, str]:
    """Components from torch's debug lines ``[<hash>] <attr>[<i>]: <text>``:
    ``graph`` (the FX graph and its inputs' metadata), ``inductor_config``,
    ``other`` (every other attribute torch hashed), and ``device`` when the
    inputs name one. Empty when no line parses."""
    groups: dict[str, list[str]] = {"graph": [], "inductor_config": [], "other": []}
    devices: set[str] = set()
    for line in lines:
        m = _LINE_RE.match(line)
        if m is None:
            continue
        h, attr, index = m.group(1), m.group(2), m.group(3) or ""
        entry = f"{attr}{index}={h}"
        if attr in _GRAPH_ATTRS:
            groups["graph"].append(entry)
            if attr == "example_inputs":
                devices.update(_DEVICE_RE.findall(line))
        elif attr in _CONFIG_ATTRS:
            groups["inductor_config"].append(entry)
        else:
            groups["other"].append(entry)
    out = {name: _digest(parts) for name, parts in groups.items() if parts}
    if devices:
        out["device"] = "cuda" if "cuda" in devices else sorted(devices)[0]
    return out


class ComponentMap:
    """A bounded ``torch key -> components`` map filled by the hash wrappers."""

    def __init__(self, max_items: int = 2048) -> None:
        self._items: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()
        self._max = max_items
        self._lock = threading.Lock()
        self.captured = 0
        self.seconds = 0.0  # time spent deriving components

    def record(self, key: str, lines: list[str], extra_seconds: float = 0.0) -> None:
        """Records the components of torch key ``key`` from its debug lines
        (``extra_seconds``: time spent producing the lines, for the stats)."""
        t0 = time.monotonic()
        comps = components_from_debug_lines(lines)
        with self._lock:
            self.seconds += extra_seconds + time.monotonic() - t0
            if not comps:
                return
            self._items[key] = comps
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)
            self.captured += 1

    def get(self, key: str) -> dict[str, str]:
        """The components recorded for ``key`` (a copy; empty if none)."""
        with self._lock:
            return dict(self._items.get(key) or {})


def signature(full_key: str, graph: dict[str, str]) -> dict[str, Any]:
    """The ``pt2`` signature of one torch remote-cache key: the bare key with
    its cache id and format when the key splits, else the key verbatim; plus
    the environment and the graph's components."""
    parts = split_key(full_key)
    if parts is None:
        sig: dict[str, Any] = {"backend": "pt2", "key": full_key}
    else:
        cache, key, fmt = parts
        sig = {"backend": "pt2", "key": key, "cache": cache, "format": fmt}
    sig.update(environment(graph.get("device")))
    sig.update(graph)
    return sig


def mega_signature(run: str) -> dict[str, Any]:
    """The ``pt2`` signature of a Mega-Cache blob: the run id plus this
    process's environment (part of the key: a blob serves one environment)."""
    sig: dict[str, Any] = {"backend": "pt2", "cache": "mega", "key": run}
    sig.update(environment())
    return sig


# ---- the hash wrappers ----------------------------------------------------------

# (module, attribute) of the functions wrapped, and how each yields debug lines.
FX_HASH = ("torch._inductor.codecache", "compiled_fx_graph_hash")
AOT_LINES = ("torch._functorch._aot_autograd.autograd_cache", "_get_debug_lines_for_cache_key")
# Where AOT_LINES is missing (torch 2.11, as on an H200 image), autograd_cache_key
# itself computes the debug lines and returns (key, lines), as compiled_fx_graph_hash does.
AOT_KEY = ("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key")


def wrap_fx_hash(orig: Callable[..., Any], comps: ComponentMap) -> Callable[..., Any]:
    """Wraps ``compiled_fx_graph_hash`` (or, in torches without AOT_LINES,
    ``autograd_cache_key``): it already returns (key, debug_lines), so
    recording costs only parsing the lines."""

    @functools.wraps(orig)
    def compiled_fx_graph_hash(*args: Any, **kwargs: Any) -> Any:
        result = orig(*args, **kwargs)
        try:
            key, lines = result
            comps.record(str(key), list(lines))
        except Exception as exc:  # noqa: BLE001 - never break torch's hashing
            log.debug("cachesvc: no components for an FX graph: %s", exc)
        return result

    compiled_fx_graph_hash.__cachesvc__ = True  # type: ignore[attr-defined]
    return compiled_fx_graph_hash


def wrap_aot_lines(orig: Callable[..., Any], comps: ComponentMap) -> Callable[..., Any]:
    """Wraps AOTAutograd's ``_get_debug_lines_for_cache_key(pickler, details,
    key)``, which returns [] unless debug logging is on: then the lines are
    computed here with torch's pickler (one hash per attribute)."""

    @functools.wraps(orig)
    def _get_debug_lines_for_cache_key(pickler: Any, details: Any, key: Any, *rest: Any, **kw: Any) -> Any:
        lines = orig(pickler, details, key, *rest, **kw)
        try:
            t0 = time.monotonic()
            got = lines or pickler.debug_lines(details)
            comps.record(str(key), list(got), time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - never break torch's hashing
            log.debug("cachesvc: no components for an AOTAutograd graph: %s", exc)
        return lines

    _get_debug_lines_for_cache_key.__cachesvc__ = True  # type: ignore[attr-defined]
    return _get_debug_lines_for_cache_key
