"""The xla signature's jaxlib_build: a fingerprint of the loaded XLA extension's
files, so that two jaxlib builds with one version string never share a key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import cachesvc._jaxsig as cj  # the jaxlib fingerprint and signature code
from cachesvc.client import Client


@pytest.fixture
def builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Two fake extension files one byte apart; the lookup points at ``current``."""
    a, b = tmp_path / "a" / "_jax.so", tmp_path / "b" / "_jax.so"
    a.parent.mkdir()
    b.parent.mkdir()
    body = bytes(range(256)) * 5000  # > one read chunk
    a.write_bytes(body)
    b.write_bytes(body[:-1] + b"\x00")
    current = {"files": [str(a)]}
    monkeypatch.setattr(cj, "_jaxlib_extension_files", lambda: list(current["files"]))
    monkeypatch.setattr(cj, "_build_memo", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return a, b, current


def _counting_opens(monkeypatch: pytest.MonkeyPatch, suffix: str) -> list:
    """Records every open() of a path ending in suffix."""
    reads: list = []
    real_open = open

    def counting(p, *k, **kw):
        if str(p).endswith(suffix):
            reads.append(str(p))
        return real_open(p, *k, **kw)

    monkeypatch.setattr("builtins.open", counting)
    return reads


def test_one_byte_changes_the_fingerprint(builds):
    a, b, current = builds
    fa = cj._jaxlib_build()
    current["files"] = [str(b)]
    fb = cj._jaxlib_build()
    assert len(fa) == len(fb) == 64 and int(fa, 16) >= 0
    assert fa != fb
    current["files"] = [str(a)]
    assert cj._jaxlib_build() == fa


def test_cached_by_path_size_and_mtime(builds, monkeypatch):
    a, _, _ = builds
    fa = cj._jaxlib_build()
    st = a.stat()
    reads = _counting_opens(monkeypatch, "_jax.so")
    # Same path, size and mtime: not read again (the memo is trusted).
    a.write_bytes(b"\xff" + a.read_bytes()[1:])
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    reads.clear()
    assert cj._jaxlib_build() == fa and reads == []
    # A new mtime: read again, and the new content shows.
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    fa2 = cj._jaxlib_build()
    assert fa2 != fa and reads == [str(a)]


def test_a_new_process_reuses_the_digest_on_disk(builds, monkeypatch, tmp_path):
    """A second process (the in-process memo empty) does not read jaxlib's
    files again: ~1 s of every warm process's first compile before."""
    a, _, _ = builds
    fa = cj._jaxlib_build()
    assert (tmp_path / "xdg" / "cachesvc" / "jaxlib-build.json").is_file()
    monkeypatch.setattr(cj, "_build_memo", None)  # as in a new process
    reads = _counting_opens(monkeypatch, "_jax.so")
    assert cj._jaxlib_build() == fa
    assert reads == [], "the extension was read again"


def test_disk_memo_sees_a_file_rewritten_in_place(builds, monkeypatch):
    """Content rewritten with size and mtime put back: the in-process memo
    trusts it, the disk memo does not (the ctime moved), so a new process
    fingerprints the new bytes."""
    a, _, _ = builds
    fa = cj._jaxlib_build()
    st = a.stat()
    a.write_bytes(b"\xff" + a.read_bytes()[1:])
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    monkeypatch.setattr(cj, "_build_memo", None)
    fresh = cj._jaxlib_build()
    assert fresh != fa and len(fresh) == 64


@pytest.mark.parametrize("memo", ["not json", '{"version": 1, "entries": [{"files": 1, "sha256": "zz"}]}',
                                  '{"version": 99}', None])
def test_disk_memo_trouble_fails_open(builds, monkeypatch, tmp_path, memo):
    """A corrupt or foreign memo file, or a cache directory that cannot be
    made (XDG_CACHE_HOME is a file), costs a read of the files, nothing more."""
    a, _, _ = builds
    want = cj._jaxlib_build()
    monkeypatch.setattr(cj, "_build_memo", None)
    if memo is None:
        blocker = tmp_path / "blocker"
        blocker.write_text("")
        monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    else:
        (tmp_path / "xdg" / "cachesvc" / "jaxlib-build.json").write_text(memo)
    reads = _counting_opens(monkeypatch, "_jax.so")
    assert cj._jaxlib_build() == want and reads == [str(a)]


@pytest.mark.parametrize("files", [[], ["/nonexistent/_jax.so"]])
def test_fails_open(builds, files):
    _, _, current = builds
    current["files"] = files
    assert cj._jaxlib_build() == ""


def test_real_extension_found():
    pytest.importorskip("jax")
    import jax  # noqa: F401 - loads jaxlib's extension
    files = cj._jaxlib_extension_files()
    assert files and all(os.path.isfile(f) for f in files)


def _real_signature() -> dict:
    """cachesvc.jax's xla signature of one real JAX compile (cache_key.get's
    arguments, as the wrapped hook receives them)."""
    jax = pytest.importorskip("jax")
    import numpy as np
    from jax._src import compiler

    lowered = jax.jit(lambda x: x * 2 + 1).lower(np.float32(1))
    module = lowered.compiler_ir("stablehlo")
    devices = np.array(jax.devices()[:1])
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    backend = jax.devices()[0].client
    return cj._xla_signature(module, devices, opts, backend, ("zstandard",), {})


def test_signature_carries_it_and_keys_differ(builds, shared_server):
    a, b, current = builds
    sig_a = _real_signature()
    current["files"] = [str(b)]
    sig_b = _real_signature()
    current["files"] = []
    sig_none = _real_signature()
    assert len(sig_a["jaxlib_build"]) == 64
    assert sig_a["jaxlib_build"] != sig_b["jaxlib_build"] and "jaxlib_build" not in sig_none
    assert {k: v for k, v in sig_a.items() if k != "jaxlib_build"} == sig_none  # the same module

    with Client(shared_server.url, namespace="jaxlib-build") as c:
        ka, kb, kn = c.key(sig_a), c.key(sig_b), c.key(sig_none)
    assert len({ka.key, kb.key, kn.key}) == 3
    assert ka.components["jaxlib_build"] == sig_a["jaxlib_build"] and "jaxlib_build" not in kn.components
