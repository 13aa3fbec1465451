"""Real JAX against a fleet: two `cachesvc serve` replicas on one bucket of a
real S3 server (versitygw, which scripts/test.sh builds into
~/.cache/cachesvc/bin). What one process compiles through replica A, a second
process reaching replica B does not compile again.

Without the versitygw binary these tests skip, unless CACHESVC_REQUIRE_S3=1
(scripts/test.sh sets it), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from conftest import free_port, run_py

PROG = Path(__file__).with_name("jaxprog.py")
ACCESS_KEY, SECRET_KEY = "cachesvc-py-test", "cachesvc-py-test-secret"


def versitygw_binary() -> str | None:
    path = os.environ.get("CACHESVC_VERSITYGW")
    if not path:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(cache, "cachesvc", "bin", "versitygw")
    return path if os.access(path, os.X_OK) else None


@pytest.fixture
def s3_bucket(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A running versitygw on a free loopback port and one bucket: (endpoint, bucket)."""
    binary = versitygw_binary()
    if binary is None:
        msg = "versitygw not built (scripts/test.sh builds it into ~/.cache/cachesvc/bin)"
        if os.environ.get("CACHESVC_REQUIRE_S3") == "1":
            pytest.fail(msg + " and CACHESVC_REQUIRE_S3=1")
        pytest.skip(msg)
    root = tmp_path / "s3"
    (root / "fleet").mkdir(parents=True)  # a posix bucket is a directory
    port = free_port()
    env = dict(os.environ, ROOT_ACCESS_KEY=ACCESS_KEY, ROOT_SECRET_KEY=SECRET_KEY)
    proc = subprocess.Popen([binary, "--port", f"127.0.0.1:{port}", "posix", str(root)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except urllib.error.HTTPError:
            break  # it answers (403 without a signature): up
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("versitygw did not start")
            time.sleep(0.1)
    yield f"127.0.0.1:{port}", "fleet"
    proc.terminate()
    proc.wait(timeout=15)


@pytest.fixture
def replicas(start_server, s3_bucket, monkeypatch):
    """A factory of replicas on the test's bucket."""
    endpoint, bucket = s3_bucket
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)

    def start():
        return start_server(extra=["--s3-endpoint", endpoint, "--s3-bucket", bucket, "--s3-insecure"])
    return start


@pytest.mark.parametrize("mode", ["canonical", "jax-key"])
def test_second_process_on_another_replica_compiles_nothing(replicas, mode):
    a, b = replicas(), replicas()
    # A hot-tier miss on a replica asks S3 before it answers: on a loaded
    # 2-core CI machine (a Go build beside it) two lookups ran past the
    # client's 1 s default and opened its breaker. This test is about what
    # the fleet shares; test_failfast owns the timeouts.
    env = {"CACHESVC_NAMESPACE": "fleet", "CACHESVC_LOOKUP_TIMEOUT": "10"}
    cold, err = run_py(PROG, ["mlp", "--mode", mode], {**env, "CACHESVC_URL": a.url, "CACHESVC_RUN": "cold"})
    assert cold["real_compiles"] > 0, cold
    st = cold["stats"]
    assert st["errors"] == 0 and st["put_errors"] == 0 and st["puts"] == cold["xla_compiles"], (json.dumps(st), err[-3000:])

    warm, _ = run_py(PROG, ["mlp", "--mode", mode], {**env, "CACHESVC_URL": b.url, "CACHESVC_RUN": "warm"})
    assert warm["real_compiles"] == 0, warm
    assert warm["xla_compiles"] == 0, warm
    assert warm["stats"]["hits"] == warm["cache_hits"] == cold["backend_compile_events"], warm
    assert warm["digest"] == cold["digest"] and warm["losses"] == cold["losses"]
