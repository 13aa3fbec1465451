"""jax.distributed on CPU: two processes of one job share cache entries.

On CPU, JAX's key hashes the topology fingerprint of the process's own CPU
client, which differs between the processes of one job; the canonical
signature leaves it out (the device list and host CPU stay in), so a program
sharded over every process's devices that process 0 wrote is a hit in every
process of the next job."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from conftest import free_port, run_py

PROG = Path(__file__).with_name("jaxmulti.py")


def run_job(server, run: str) -> list[dict]:
    """Both processes of one two-process job; their reports by process id."""
    port = free_port()
    env = {"CACHESVC_URL": server.url, "CACHESVC_NAMESPACE": "multiprocess", "CACHESVC_RUN": run}
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        futs = [ex.submit(run_py, PROG, [str(i), str(port)], env, 300) for i in range(2)]
        return [f.result()[0] for f in futs]


def test_two_process_cpu_job_hits_in_every_process(server):
    cold = run_job(server, "cold")
    assert [r["devices"] for r in cold] == [2, 2]
    assert cold[0]["xla_compiles"] == 1 and cold[0]["stats"]["puts"] == 1, cold[0]
    assert cold[1]["stats"]["puts"] == 0  # JAX writes from process 0 only

    warm = run_job(server, "warm")
    for r in warm:
        assert r["xla_compiles"] == 0 and r["stats"]["hits"] == 1, r
        assert r["result"] == cold[0]["result"]
