"""Side-by-side timing of loopdyn's tree algorithms against Pinocchio.

Run from the repository root::

    python benchmarks/bench_tree.py            # full run (~2-3 min)
    python benchmarks/bench_tree.py --quick    # fewer repeats
    python benchmarks/bench_tree.py --check    # correctness self-check only

Reports, in one process, the median per-call time of ``ld.aba``, ``ld.rnea`` and
``ld.crba`` (the public Python API, input validation included) next to
``pin.aba``, ``pin.rnea`` and ``pin.crba`` on the same model, exported with
``PinocchioExport``; then the wall time of ``import loopdyn``, the first-call
cost of ``ld.aba`` with a cold and a warm numba cache, and the size of the
``Data`` workspace for growing ladders (linear in the number of bodies).

Notes: ``pin.crba`` fills only the upper triangle of M (loopdyn fills both);
``pin.aba`` uses ``Convention.LOCAL`` by default, ``Convention.WORLD`` is listed
as well.  Both libraries are called with preallocated workspaces (``model.data``
and ``pin.Data``); the state arrays are contiguous float64.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import timeit
from functools import partial

import numpy as np

import loopdyn as ld
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)


def _models():
    return [
        ("serial_arm", ld.examples.serial_arm()),
        ("random_tree(30)", ld.examples.random_tree(30, seed=0)),
        ("spatial_ladder_tree(128)", ld.examples.spatial_ladder_tree(128)),
    ]


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    a = rng.normal(size=model.nv)
    tau = rng.normal(size=model.nv)
    return q, v, a, tau


def _calls_per_run(fn, min_time):
    """Number of calls of ``fn`` that last about ``min_time`` seconds."""
    t = timeit.Timer(fn)
    n = 1
    while True:
        elapsed = t.timeit(n)
        if elapsed >= min_time:
            return n
        n = max(n * 2, int(n * min_time / max(elapsed, 1e-9) * 1.1))


def per_call_us(fns, repeat, min_time):
    """Median per-call time (µs) of each function in ``fns``.

    The functions are timed in alternation (``repeat`` runs of ~``min_time`` s
    each), so a change in machine load affects all of them alike.
    """
    timers = [timeit.Timer(f) for f in fns]
    ns = [_calls_per_run(f, min_time) for f in fns]
    runs = [[] for _ in fns]
    for _ in range(repeat):
        for t, n, r in zip(timers, ns, runs, strict=True):
            r.append(t.timeit(n) / n)
    return [1e6 * float(np.median(r)) for r in runs]


# --------------------------------------------------------------------- timing
def bench(repeat, min_time):
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    rows = []
    for name, model in _models():
        q, v, a, tau = _state(model)
        exp = PinocchioExport(model)
        pm = exp.model
        pd = pm.createData()
        pq, pv, pa, ptau = exp.q(q), exp.v(v), exp.v(a), exp.v(tau)
        d = model.data
        # warm-up: compile / load the kernels before timing
        ld.aba(model, q, v, tau)
        ld.rnea(model, q, v, a)
        ld.crba(model, q)
        cases = [
            (
                "aba",
                partial(ld.aba, model, q, v, tau, data=d),
                partial(pin.aba, pm, pd, pq, pv, ptau),
            ),
            (
                "rnea",
                partial(ld.rnea, model, q, v, a, data=d),
                partial(pin.rnea, pm, pd, pq, pv, pa),
            ),
            ("crba", partial(ld.crba, model, q, data=d), partial(pin.crba, pm, pd, pq)),
        ]
        for algo, f_ld, f_pin in cases:
            fns = [f_ld, f_pin]
            if algo == "aba" and hasattr(pin, "Convention"):
                fns.append(partial(pin.aba, pm, pd, pq, pv, ptau, pin.Convention.WORLD))
            times = per_call_us(fns, repeat, min_time)
            rows.append((name, model.nv, algo, times[0], times[1]))
            print(_fmt_row(rows[-1]), flush=True)
            if len(times) > 2:
                rows.append((name, model.nv, "aba (pin WORLD)", times[0], times[2]))
                print(_fmt_row(rows[-1]), flush=True)
    return rows


_HEADER = f"{'model':<26}{'nv':>5}  {'algorithm':<16}{'loopdyn µs':>12}{'pin µs':>10}{'ratio':>8}"


def _fmt_row(r):
    name, nv, algo, t_ld, t_pin = r
    return f"{name:<26}{nv:>5}  {algo:<16}{t_ld:>12.2f}{t_pin:>10.2f}{t_ld / t_pin:>8.2f}"


# --------------------------------------------------------------- correctness
def check(seeds=range(6), n_bodies=30, tol=1e-10):
    """Compare ld.aba/rnea/crba with Pinocchio on random trees; relative tolerance ``tol``."""
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    worst = 0.0
    models = [ld.examples.random_tree(n_bodies, seed=s) for s in seeds]
    models += [ld.examples.serial_arm(), ld.examples.spatial_ladder_tree(8)]
    for k, model in enumerate(models):
        exp = PinocchioExport(model)
        pm = exp.model
        pd = pm.createData()
        q, v, a, tau = _state(model, seed=100 + k)
        fext = np.random.default_rng(k).normal(size=(model.nbodies, 6))
        pairs = []
        qdd = ld.aba(model, q, v, tau)
        pairs.append(("aba", qdd, exp.v_from(pin.aba(pm, pd, exp.q(q), exp.v(v), exp.v(tau)))))
        pfext = exp.fext(fext)
        qdd_f = ld.aba(model, q, v, tau, fext=fext)
        pairs.append(
            (
                "aba fext",
                qdd_f,
                exp.v_from(pin.aba(pm, pd, exp.q(q), exp.v(v), exp.v(tau), pfext)),
            )
        )
        t = ld.rnea(model, q, v, a)
        pairs.append(("rnea", t, exp.v_from(pin.rnea(pm, pd, exp.q(q), exp.v(v), exp.v(a)))))
        t_f = ld.rnea(model, q, v, a, fext=fext)
        pairs.append(
            (
                "rnea fext",
                t_f,
                exp.v_from(pin.rnea(pm, pd, exp.q(q), exp.v(v), exp.v(a), pfext)),
            )
        )
        M = ld.crba(model, q)
        Mp = np.array(pin.crba(pm, pd, exp.q(q)))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        pairs.append(("crba", M, exp.matrix_from(Mp)))
        pairs.append(("crba symmetric", M, M.T))
        pairs.append(("nle", ld.nonlinear_effects(model, q, v), ld.rnea(model, q, v, 0 * v)))
        # the same call with read-only, strided and list inputs (validation / entry paths)
        q_ro = q.copy()
        q_ro.setflags(write=False)
        v_strided = np.repeat(v, 2)[::2]
        pairs.append(("aba inputs", ld.aba(model, q_ro, v_strided, list(tau)), qdd))
        for what, x, y in pairs:
            err = float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y)))))
            worst = max(worst, err)
            status = "ok" if err <= tol else "FAIL"
            if status == "FAIL":
                print(f"  {model.name:<26}{what:<16} rel err {err:.2e}  {status}")
    ok = worst <= tol
    print(
        f"check: {len(models)} models, worst relative error {worst:.2e} -> {'OK' if ok else 'FAIL'}"
    )
    return ok


# ------------------------------------------------------- import and compile
def _run_py(code, env=None):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout


_HEAVY = ("pinocchio", "mujoco", "matplotlib", "scipy", "networkx")


def import_time(n):
    """Median wall time (s) of ``import X`` in a fresh interpreter, and the heavy modules loaded.

    ``numba`` is the floor loopdyn cannot avoid; ``numba, scipy.linalg, networkx``
    the third-party modules loopdyn currently imports at ``import loopdyn``.
    """
    code = (
        "import time, sys; t = time.perf_counter(); import {m}; t = time.perf_counter() - t; "
        "print(t, ','.join(k for k in {heavy!r} if k in sys.modules) or '-')"
    )
    out = {}
    for m in ("numba", "numba, scipy.linalg, networkx", "loopdyn"):
        ts, heavy = [], ""
        for _ in range(n):
            t, heavy = _run_py(code.format(m=m, heavy=_HEAVY)).split()
            ts.append(float(t))
        out[m] = (float(np.median(ts)), heavy)
    return out


_FIRST_CALL = """
import time, numpy as np
t0 = time.perf_counter()
import loopdyn as ld
m = ld.examples.serial_arm()
t1 = time.perf_counter()
ld.aba(m, m.q0, np.zeros(m.nv), np.zeros(m.nv))
t2 = time.perf_counter()
ld.aba(m, m.q0, np.zeros(m.nv), np.zeros(m.nv))
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""


def first_call(n):
    """First-call time of ld.aba (s): cold numba cache (fresh dir) and warm (default cache)."""
    cold = []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
            cold.append(float(_run_py(_FIRST_CALL, env).split()[0]))
    _run_py(_FIRST_CALL)  # make sure the default cache is populated
    warm = [float(_run_py(_FIRST_CALL).split()[0]) for _ in range(n)]
    return float(np.median(cold)), float(np.median(warm))


def data_sizes():
    rows = []
    for L in (32, 64, 128):
        model = ld.examples.spatial_ladder_tree(L)
        d = model.create_data()
        owned = [a for a in vars(d).values() if isinstance(a, np.ndarray) and a.base is None]
        nbytes = sum(a.nbytes for a in owned)  # the buffers, not the views into them
        rows.append((L, model.nbodies, model.nv, nbytes))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, shorter runs")
    p.add_argument("--check", action="store_true", help="only run the correctness self-check")
    p.add_argument("--no-subprocess", action="store_true", help="skip import/compile timings")
    args = p.parse_args(argv)
    if args.check:
        return 0 if check() else 1
    repeat, min_time, nsub = (5, 0.05, 3) if args.quick else (15, 0.2, 5)
    if not check():
        return 1
    print()
    print(_HEADER)
    bench(repeat, min_time)
    if not args.no_subprocess:
        print()
        imp = import_time(nsub)
        for m, (t, heavy) in imp.items():
            print(f"import {m:<31} {1e3 * t:7.1f} ms  (median of {nsub}; heavy modules: {heavy})")
        cold, warm = first_call(max(1, nsub // 2) if not args.quick else 1)
        print(f"ld.aba first call, cold numba cache: {cold:8.3f} s")
        print(f"ld.aba first call, warm numba cache: {warm:8.3f} s")
    print()
    print(f"{'ladder L':>8}{'bodies':>8}{'nv':>6}{'Data bytes':>12}{'bytes/body':>12}")
    for L, nb, nv, nbytes in data_sizes():
        print(f"{L:>8}{nb:>8}{nv:>6}{nbytes:>12}{nbytes / nb:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
