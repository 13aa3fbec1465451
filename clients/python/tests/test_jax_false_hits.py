"""No false hits across code-generation settings, with real JAX: a process
with other XLA flags or compiler options must compile, not load the
executable another setting wrote (its results differ: a hit would have
computed something else). The xla signature carries these settings in its
flags and its compile-options digest, which the client builds itself."""

from __future__ import annotations

import json

import pytest

from conftest import run_py
from test_jax import PROG, env_for

FAST = "--xla_cpu_enable_fast_math=true"
FAST_OPTS = json.dumps({"xla_cpu_enable_fast_math": True})


@pytest.mark.parametrize("writer,reader", [
    ({"XLA_FLAGS": FAST}, {}),
    # XLA read fast math at start; the variable was cleared before any key.
    ({"XLA_FLAGS": FAST, "JAXPROG_LATE_XLA_FLAGS": ""}, {}),
    # The reverse: set too late for XLA, seen by the keys.
    ({"JAXPROG_LATE_XLA_FLAGS": FAST}, {"XLA_FLAGS": FAST}),
    ({"JAXPROG_COMPILER_OPTIONS": FAST_OPTS}, {}),
], ids=["xla-flags", "xla-flags-cleared-late", "xla-flags-set-late", "compiler-options"])
@pytest.mark.parametrize("mode", ["canonical", "jax-key"])
def test_other_setting_compiles(shared_server, writer, reader, mode):
    # env_for: one namespace per test case (its name holds the parameters).
    a, _ = run_py(PROG, ["numerics", "--mode", mode, "--sync-uploads"], env_for(shared_server, "w", **writer))
    assert a["stats"]["puts"] == a["real_compiles"] == 2, a
    b, _ = run_py(PROG, ["numerics", "--mode", mode], env_for(shared_server, "r", **reader))
    assert b["stats"]["hits"] == 0 and b["real_compiles"] == 2, \
        f"false hit: the reader ({reader}) loaded {b['stats']['hits']} executables the writer ({writer}) compiled"
    # Compiled afresh, the results differ: a hit would have been a wrong one.
    assert b["digest"] != a["digest"], "the setting changes nothing here: the case proves nothing"
