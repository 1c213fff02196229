"""Work at scale (issue 16): batch throughput against a Python loop of Pinocchio's
``constraintDynamics`` (StdVec containers, ProximalSettings 1e-12), and the compiled
simulation loop against the Python loop.  One process, A/B alternated rounds,
median and min-max of the wall times; ratios.

    PYTHONPATH=src python benchmarks/bench_scale.py [--rounds 5] [--n 10000]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from bench_closed import _pin


def _states(model, n, seed=0):
    """n consistent states (actuated coordinates perturbed) and random actuator forces."""
    rng = np.random.default_rng(seed)
    Q = np.empty((n, model.nq))
    V = np.empty((n, model.nv))
    TAU = np.zeros((n, model.nv))
    base = [ld.assemble(model, model.q0 + 0.05 * k * (np.arange(model.nq) == 0)) for k in range(8)]
    for i in range(n):
        Q[i] = base[i % 8]
        v = np.zeros(model.nv)
        v[model.actuated] = rng.normal(size=model.actuated.size)
        V[i] = ld.complete_velocity(model, Q[i], v)
        TAU[i, model.actuated] = rng.normal(size=model.actuated.size)
    return Q, V, TAU


def _alternate(fns, rounds):
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: (np.median(v), min(v), max(v)) for k, v in times.items()}


def batch(name, model, n, rounds, method):
    Q, V, TAU = _states(model, n)
    ex, make = _pin(model)
    calls = [make(Q[i], V[i], TAU[i]) for i in range(n)]
    res = ld.forward_dynamics_batch(model, Q, V, TAU, method=method)  # compile, check
    err = max(
        np.abs(ex.v_from(calls[i]()) - res.qdd[i]).max() for i in range(0, n, max(1, n // 50))
    )

    def pin_loop():
        for c in calls:
            c()

    t = _alternate(
        {
            "loopdyn batch": lambda: ld.forward_dynamics_batch(model, Q, V, TAU, method=method),
            "pin loop": pin_loop,
        },
        rounds,
    )
    print(f"\n{name}: {n} states, method {method}, max |q̈ - pin| = {err:.1e}")
    for k, (med, lo, hi) in t.items():
        print(
            f"  {k:14s} {1e6 * med / n:8.3f} µs/state "
            f"(min {1e6 * lo / n:.3f}, max {1e6 * hi / n:.3f})"
        )
    print(f"  throughput ratio batch / pin loop: {t['pin loop'][0] / t['loopdyn batch'][0]:.1f}x")


def free_fall(rounds, rtol):
    model = ld.examples.four_bar()
    kw = dict(t_end=5.0, integrator="RK45", rtol=rtol, atol=rtol)
    ld.simulate(model, **kw)
    res = {}
    for compiled in (True, False):
        tr = ld.simulate(model, compiled=compiled, **kw)
        res[compiled] = (np.abs(tr.energy - tr.energy[0]).max(), tr.stats["steps"])
    t = _alternate(
        {
            "compiled loop": lambda: ld.simulate(model, compiled=True, **kw),
            "python loop": lambda: ld.simulate(model, compiled=False, **kw),
        },
        rounds,
    )
    print(f"\nfour_bar free fall 5 s, RK45 rtol = atol = {rtol:g}, projection, 501 outputs")
    for (k, (med, lo, hi)), c in zip(t.items(), (True, False), strict=True):
        print(
            f"  {k:14s} {1e3 * med:8.2f} ms (min {1e3 * lo:.2f}, max {1e3 * hi:.2f}), "
            f"max |dE| = {res[c][0]:.2e} J, {res[c][1]} steps"
        )
    print(f"  ratio python / compiled: {t['python loop'][0] / t['compiled loop'][0]:.1f}x")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=10_000)
    a = p.parse_args()
    free_fall(a.rounds, 1e-10)
    batch("four_bar", ld.examples.four_bar(), a.n, a.rounds, "augmented")
    batch("spatial_ladder(32)", ld.examples.spatial_ladder(32), a.n, a.rounds, "recursive_lambda")
