"""The eager tier (``loopdyn.kernels.eager``, ``loopdyn.kernels.tiers``): the kernels'
own Python, run by the interpreter, gives the compiled tier's answers to rounding;
``loopdyn info`` / ``models`` compile nothing; no kernel compiles twice."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from conftest import COMPILE_LOG, CompileLog
from loopdyn.kernels import tiers

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _state(model, seed):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, model.q0, v)
    return np.array(model.q0), v, rng.normal(size=model.nv)


class _Policy:
    def __init__(self, p):
        self.p = p

    def __enter__(self):
        self.old = tiers.set_policy(self.p)

    def __exit__(self, *exc):
        tiers.set_policy(self.old)


CASES = [
    ("four_bar", "augmented"),
    ("four_bar", "slm"),
    ("four_bar", "recursive_lambda"),
    ("five_bar", "denoc"),
    ("carpet_scraper", "augmented"),
    ("three_rrr", "slm"),
    ("stewart", "augmented"),
    ("stewart", "denoc"),
    ("stewart", "sslm"),
    ("stewart", "embedding"),
    ("stewart", "rcr"),
    ("carpet_scraper", "sslm"),
]


@pytest.mark.parametrize("name,method", CASES)
def test_eager_tier_equals_compiled_tier(name, method):
    """Forward dynamics (q̈, λ) of both tiers on random consistent states: equal to
    rounding (the same operations; libm and numba may differ in the last bit)."""
    model = ld.examples.get(name)
    for seed in range(2):
        q, v, tau = _state(model, seed)
        ref = ld.forward_dynamics(model, q, v, tau, method=method)
        with _Policy("eager"):
            got = ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
        assert got.method == ref.method == method
        scale = max(np.abs(ref.qdd).max(), 1.0)
        np.testing.assert_allclose(got.qdd, ref.qdd, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(got.lam, ref.lam, rtol=1e-10, atol=1e-12 * scale)


def test_eager_tier_builds_and_simulates_as_the_compiled_tier():
    """A model built eagerly (assembly) and a short simulation in the Python loop, each
    tier: the same q0 and trajectory to rounding (amplified by the integration)."""
    ref_model = ld.examples.four_bar(theta1=1.2)
    ref = ld.simulate(ref_model, t_end=0.2, compiled=False)
    with _Policy("eager"):
        model = ld.examples.four_bar(theta1=1.2)
        got = ld.simulate(model, t_end=0.2)
        assert tiers.kernel(ld.sim.compiled.loop) is not ld.sim.compiled.loop
    np.testing.assert_allclose(model.q0, ref_model.q0, rtol=0, atol=1e-13)
    assert got.q.shape == ref.q.shape
    np.testing.assert_allclose(got.q, ref.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.v, ref.v, rtol=0, atol=1e-8)


def test_eager_entry_converts_and_refuses_inputs_as_the_compiled_entry():
    m = ld.examples.four_bar()
    q, v, tau = _state(m, 3)
    ref = ld.forward_dynamics(m, q, v, tau).qdd
    with _Policy("eager"):
        d = m.create_data()
        got = ld.forward_dynamics(m, list(q), tuple(v), tau.astype(np.float32), data=d).qdd
        np.testing.assert_allclose(got, ld.forward_dynamics(m, q, v, tau.astype(np.float32)).qdd)
        assert np.abs(ld.forward_dynamics(m, q, v, tau, data=d).qdd - ref).max() < 1e-12
        with pytest.raises((TypeError, ValueError)):
            ld.forward_dynamics(m, q, v, ["a", "b", "c"], data=d)
    assert "eager" in tiers.used()


_COUNT = r"""
import json, sys
from numba.core import event
n = []
class L(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        n.append(f.__module__ + "." + f.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", L())
from loopdyn.cli import app
for argv in ([["models"], ["info", "stewart"], ["info", "four_bar"]]):
    try:
        app(argv, standalone_mode=False)
    except SystemExit:
        pass
from loopdyn.kernels import tiers
print("@@" + json.dumps(dict(compiled=n, used=tiers.used())))
"""


def test_info_and_models_never_compile(tmp_path):
    """``loopdyn models``, ``loopdyn info stewart`` on an empty numba cache, even with
    ``LOOPDYN_TIER=compiled``: no numba compilation in the process (what is not on disk
    runs eagerly)."""
    env = dict(
        os.environ,
        NUMBA_CACHE_DIR=str(tmp_path / "cache"),
        LOOPDYN_TIER="compiled",
        LOOPDYN_BACKGROUND="0",
        PYTHONPATH=SRC,
    )
    r = subprocess.run(
        [sys.executable, "-c", _COUNT], capture_output=True, text=True, timeout=600, env=env
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stewart" in r.stdout and "four_bar" in r.stdout
    out = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("@@"))[2:])
    assert out["compiled"] == [], f"compiled: {out['compiled']}"
    assert out["used"] == ["eager"]


def test_compile_log_finds_a_kernel_compiled_twice():
    """The session check of conftest (``COMPILE_LOG``): a kernel compiled again for the
    same signature (here by ``recompile``) is reported; another dispatcher of the same
    function (as ``controller_address`` makes per controller) is not."""
    from numba import njit
    from numba.core import event

    log = CompileLog()

    class _L(event.Listener):
        def on_start(self, ev):
            k = log.key(ev)
            log.counts[k] = log.counts.get(k, 0) + 1

        def on_end(self, ev):
            pass

    def twice_compiled(x):
        return x + 1.0

    listener = _L()
    event.register("numba:compile", listener)
    try:
        f = njit(twice_compiled)
        f(1.0)
        f.recompile()
        njit(lambda x: x)(1.0)
        njit(lambda x: x)(1.0)
    finally:
        event.unregister("numba:compile", listener)
    assert [k[0].rsplit(".", 1)[-1] for k in log.twice(prefix="test_tiers")] == ["twice_compiled"]
    assert COMPILE_LOG.twice() == []  # this process so far
