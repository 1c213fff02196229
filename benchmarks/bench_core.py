"""The compiled core as a user calls it: per-call cost, input kinds, peers, cold start.

Run from the repository root::

    python benchmarks/bench_core.py            # everything but the cold start (~2 min)
    python benchmarks/bench_core.py --quick    # fewer rounds
    python benchmarks/bench_core.py --cold     # also: first call on an empty numba cache (~1-2 min)

1. Four-bar forward dynamics, every method, against ``pin.constraintDynamics`` with
   Pinocchio's fast containers (``StdVec_RigidConstraintModel`` / ``...Data``,
   ``ProximalSettings(1e-12, 1e-8, 20)``): per-call ratios; Pinocchio's answer is
   checked against ours first.
2. The price of each input kind (read-only ``model.q0``, list, int array, strided,
   Fortran-ordered, float32) over a writable C-contiguous float64 array, for
   ``ld.forward_dynamics`` and ``ld.aba``.
3. SSLM's whole call against SLM's on the paper's mechanisms.
4. ``ld.aba`` against ``pin.aba`` on the 6-DOF arm and on the four-bar's open tree.
5. (``--cold``) the first ``ld.forward_dynamics`` of the four-bar in a new process
   with an empty numba cache, model build included, and the same with a warm cache.

All timings alternate the functions within rounds (``benchmarks/timing.py``);
ratios are medians over the rounds with their min–max.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from loopdyn.kernels import tiers
from timing import alternate, fmt_ratio, median_us, ratio, use_cpu_time

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, model.q0, v)
    tau = np.zeros(model.nv)
    tau[model.actuated] = rng.normal(size=model.actuated.size)
    return np.array(model.q0), v, tau


def pinocchio_call(model, q, v, tau):
    """(Pinocchio's fastest exact constraintDynamics call, its q̈ in loopdyn's layout)."""
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    ex = PinocchioExport(model)
    pd = ex.model.createData()
    cms = ex.constraints  # StdVec_RigidConstraintModel
    cds = ex.constraint_datas()  # StdVec_RigidConstraintData
    pin.initConstraintDynamics(ex.model, pd, cms, cds)
    prox = pin.ProximalSettings(1e-12, 1e-8, 20)
    qp, vp, tp = ex.q(q), ex.v(v), ex.v(tau)

    def call():
        return pin.constraintDynamics(ex.model, pd, qp, vp, tp, cms, cds, prox)

    return call, ex.v_from(call())


def four_bar(rounds):
    model = ld.examples.four_bar()
    q, v, tau = _state(model)
    exact = ld.forward_dynamics(model, q, v, tau).qdd
    pin_call, pin_qdd = pinocchio_call(model, q, v, tau)
    err = np.abs(pin_qdd - exact).max() / np.abs(exact).max()
    print(f"\n1. four-bar forward dynamics (Pinocchio's q̈ vs ours: {err:.1e} relative)")
    methods = ld.methods.dynamics.METHODS
    fns = [lambda m=m: ld.forward_dynamics(model, q, v, tau, method=m) for m in methods]
    t = alternate([pin_call, *fns], rounds)
    print(f"   pin.constraintDynamics (StdVec)   {median_us(t, 0):6.2f} µs")
    for k, m in enumerate(methods, 1):
        print(f"   {m:<34}{median_us(t, k):6.2f} µs   ratio {fmt_ratio(ratio(t, k, 0))}")


def input_kinds(rounds):
    model = ld.examples.four_bar()
    q, v, tau = _state(model)
    kinds = {
        "writable C float64": q.copy(),
        "read-only (model.q0)": model.q0,
        "list": list(q),
        "strided": np.repeat(q, 2)[::2],
        "Fortran-ordered 2-D column": np.asfortranarray(q.reshape(-1, 1)),
        "float32": q.astype(np.float32),
    }
    tau_int = np.round(10 * tau).astype(np.int64)  # integer joint forces
    print("\n2. the price of an input kind (µs over a writable C float64 q)")
    for what, call in (
        ("forward_dynamics", lambda x, t: ld.forward_dynamics(model, x, v, t)),
        ("aba", lambda x, t: ld.aba(model, x, v, t)),
    ):
        fns = [partial(call, x, tau) for x in kinds.values()]
        fns.append(partial(call, q, tau_int))
        names = [*kinds, "int tau"]
        refs = [partial(call, q, tau)] * len(kinds) + [partial(call, q, tau_int.astype(float))]
        for f, r in zip(fns, refs, strict=True):  # every kind gives the fast path's answer
            a, b = f(), r()
            a = a.qdd if hasattr(a, "qdd") else a
            b = b.qdd if hasattr(b, "qdd") else b
            assert np.allclose(a, b, rtol=1e-4), what  # float32 q: rounded inputs
        t = alternate(fns, rounds)
        base = median_us(t, 0)
        print(f"   {what}: {base:.2f} µs for a writable C float64 q")
        for k, name in enumerate(names[1:], 1):
            extra = float(np.median(t[:, k] - t[:, 0]))
            print(f"     {name:<28} +{extra:5.2f} µs   ratio {fmt_ratio(ratio(t, k, 0))}")


def sslm_vs_slm(rounds):
    print("\n3. SSLM's whole call against SLM's (ld.forward_dynamics)")
    for name in ("carpet_scraper", "three_rrr", "excavator"):
        model = getattr(ld.examples, name)()
        q, v, tau = _state(model)
        a = ld.forward_dynamics(model, q, v, tau, method="slm").qdd
        b = ld.forward_dynamics(model, q, v, tau, method="sslm").qdd
        assert np.allclose(a, b, rtol=1e-9, atol=1e-12)
        fd = partial(ld.forward_dynamics, model, q, v, tau)
        t = alternate([partial(fd, method="slm"), partial(fd, method="sslm")], rounds)
        print(
            f"   {name:<16} slm {median_us(t, 0):6.2f} µs  sslm {median_us(t, 1):6.2f} µs"
            f"   sslm/slm {fmt_ratio(ratio(t, 1, 0))}"
        )


def aba_vs_pinocchio(rounds):
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    print("\n4. ld.aba against pin.aba")
    for model in (ld.examples.serial_arm(), ld.examples.four_bar().spanning_tree()):
        rng = np.random.default_rng(1)
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        ex = PinocchioExport(model)
        pd = ex.model.createData()
        qp, vp, tp = ex.q(q), ex.v(v), ex.v(tau)
        mine = ld.aba(model, q, v, tau)
        theirs = ex.v_from(pin.aba(ex.model, pd, qp, vp, tp))
        err = np.abs(mine - theirs).max() / np.abs(theirs).max()
        t = alternate(
            [partial(pin.aba, ex.model, pd, qp, vp, tp), partial(ld.aba, model, q, v, tau)], rounds
        )
        print(
            f"   {model.name:<16} pin {median_us(t, 0):5.2f} µs  ld {median_us(t, 1):5.2f} µs"
            f"   ld/pin {fmt_ratio(ratio(t, 1, 0))}   (answers agree to {err:.0e})"
        )


_COLD = """
import time
t0 = time.perf_counter()
import numpy as np, loopdyn as ld
t1 = time.perf_counter()
m = ld.examples.four_bar()
t2 = time.perf_counter()
r = ld.forward_dynamics(m, m.q0, np.zeros(3))
t3 = time.perf_counter()
print(f"{t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f} {t3 - t0:.2f}")
"""


def cold_start():
    print("\n5. first forward dynamics of the four-bar in a new process (import, build, call)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("empty numba cache", "warm numba cache"):
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", _COLD], env=env, capture_output=True, text=True, check=True
            ).stdout.split()
            wall = time.perf_counter() - t0
            imp, build, call, total = (float(x) for x in out)
            print(
                f"   {label:<18} import {imp:5.2f} s  build {build:5.2f} s  first call "
                f"{call:5.2f} s  total {total:5.2f} s  (process {wall:5.2f} s)"
            )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cold", action="store_true")
    p.add_argument("--cpu-time", action="store_true", help="time CPU, not wall (shared machine)")
    a = p.parse_args()
    if a.cpu_time:
        use_cpu_time()
    print(f"clock: {'process CPU time' if a.cpu_time else 'wall'}")
    rounds = 7 if a.quick else 21
    four_bar(rounds)
    input_kinds(rounds)
    sslm_vs_slm(rounds)
    aba_vs_pinocchio(rounds)
    if a.cold:
        cold_start()


if __name__ == "__main__":
    main()
