"""DeNOC (Saha & Schiehlen) forward dynamics against the other exact methods and Pinocchio.

Run from the repository root::

    python benchmarks/bench_denoc.py            # full run (~3 min)
    python benchmarks/bench_denoc.py --quick    # fewer rounds

1. Per call, on the parallel mechanisms of the catalog (five_bar, three_rrr, stewart,
   delta): ``ld.forward_dynamics`` with ``method="denoc"`` (q̈ and λ, checked), next to
   ``"augmented"``, ``"slm"``, ``"sslm"``, ``"recursive_lambda"`` and ``pin.constraintDynamics``
   (``StdVec_RigidConstraintModel`` / ``StdVec_RigidConstraintData`` containers,
   ``ProximalSettings(1e-12, 1e-8, 20)``; the Delta's universal closures have no
   Pinocchio counterpart).  Every answer is checked against the augmented q̈:
   max |q̈ - q̈_aug| / max |q̈_aug|.
2. The long-leg family: ``stewart(segments=s)`` and ``delta(segments=s)``, whose
   cylinders and pistons (arms and forearms) are chains of s rigidly joined bodies,
   so that each leg has m = 2s bodies, m = 2 … 64: per-call times and the straight
   line t = a + b m fitted to them.  In the paper's class a leg has at most 6 unactuated 1-DOF
   joints (3 in the plane; more would give it an internal mobility), so legs grow
   in bodies, not in joints.
3. Inverse dynamics: ``ld.inverse_dynamics(..., method="denoc")`` (IDA-1..3 and λ,
   O(n)) against the generic least-squares path.

Timing: CPU time (``time.process_time``, so that other processes on a shared machine
weigh less), the functions of one row called in alternation (A B C … A B C …) for
``rounds`` rounds of ~``min_time`` s each; the tables give the minimum per call over
the rounds (the least disturbed one; the median in brackets, then the maximum) and
the ratios of the minima and of the medians to Pinocchio (or to augmented).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
import timing
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

METHODS = ("augmented", "slm", "sslm", "recursive_lambda")


def _state(model, seed=0):
    """A consistent state at q0: random actuated rates and forces."""
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, model.q0, v)
    tau = np.zeros(model.nv)
    tau[model.actuated] = rng.normal(size=model.actuated.size)
    return np.array(model.q0), v, tau


def _pin(model, q, v, tau):
    """A zero-argument call of pin.constraintDynamics on ``model``, or None if not exportable."""
    return timing.pinocchio_call(model, q, v, tau)


def _calls(fn, min_time):
    n = 1
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        dt = time.process_time() - t0
        if dt >= min_time:
            return n
        n = max(2 * n, int(n * min_time / max(dt, 1e-6) * 1.2))


def timings(fns, rounds, min_time):
    """Per-call CPU times (µs) of each function: (min, median, max) over alternated rounds."""
    ns = [_calls(f, min_time) for f in fns]
    runs = [[] for _ in fns]
    for _ in range(rounds):
        for f, n, r in zip(fns, ns, runs, strict=True):
            t0 = time.process_time()
            for _ in range(n):
                f()
            r.append((time.process_time() - t0) / n * 1e6)
    return [(float(np.min(r)), float(np.median(r)), float(np.max(r))) for r in runs]


def _row(model, rounds, min_time):
    q, v, tau = _state(model)
    exact = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
    scale = np.abs(exact).max()
    names = ["denoc", *METHODS]
    fns = [lambda m=m: ld.forward_dynamics(model, q, v, tau, method=m) for m in names]
    errs = []
    for m in names:
        res = ld.forward_dynamics(model, q, v, tau, method=m)
        assert res.method == m, (model.name, m, res.method)
        errs.append(np.abs(res.qdd - exact).max() / scale)
    pin_call, ex = _pin(model, q, v, tau)
    if pin_call is not None:
        names.append("pin")
        fns.append(pin_call)
        errs.append(np.abs(ex.v_from(pin_call()) - exact).max() / scale)
    t = timings(fns, rounds, min_time)
    return names, t, errs


def catalog_table(rounds, min_time):
    print("1. per call (CPU µs: min [median] max over alternated rounds; error vs augmented)")
    for name in ("five_bar", "three_rrr", "stewart", "delta"):
        model = ld.examples.get(name)
        names, t, errs = _row(model, rounds, min_time)
        ref = "pin" if "pin" in names else "augmented"
        tref = t[names.index(ref)][0]
        print(f"{name} (nv = {model.nv}, m = {model.m}, DOF = {model.actuated.size})")
        mref = t[names.index(ref)][1]
        for nm, (lo, med, hi), err in zip(names, t, errs, strict=True):
            label = nm if nm == "pin" else f"ld {nm}"
            print(
                f"  {label:<20}{lo:8.2f} [{med:6.2f}] {hi:6.2f}  ×{lo / tref:5.2f} "
                f"(median ×{med / mref:5.2f}) {ref:<9} error {err:.1e}"
            )
    print()


def scaling(segments, rounds, min_time):
    print("2. long legs: m bodies per leg (CPU µs per call, min over rounds)")
    for family in ("stewart", "delta"):
        rows = []
        for s in segments:
            model = getattr(ld.examples, family)(segments=s)
            names, t, errs = _row(model, rounds, min_time)
            rows.append((2 * s, model.nbodies, dict(zip(names, (x[0] for x in t), strict=True)),
                         max(errs)))  # fmt: skip
        cols = list(rows[0][2])
        print(f"{family}: " + "".join(f"{c:>11}" for c in ["m", "bodies", *cols, "max err"]))
        for m, nb, row, err in rows:
            cells = "".join(f"{row[c]:11.2f}" for c in cols)
            print(f"{'':<{len(family) + 2}}{m:>11}{nb:>11}{cells}{err:11.1e}")
        # cost linear in m: least squares t = a + b m, and the worst relative residual
        ms = np.array([r[0] for r in rows], dtype=float)
        for c in cols:
            t = np.array([r[2][c] for r in rows])
            b, a = np.polyfit(ms, t, 1)
            res = np.abs(a + b * ms - t).max() / t.min()
            print(f"  {c:<10} t ≈ {a:6.2f} + {b:6.3f} m µs (worst residual {res:.0%})")
    print()


def inverse_table(rounds, min_time):
    print("3. inverse dynamics (CPU µs: min [median]; |u - u_generic| / max(1, |u|))")
    for name in ("five_bar", "three_rrr", "stewart", "delta"):
        model = ld.examples.get(name)
        q, v, tau = _state(model)
        qdd = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
        gen = ld.inverse_dynamics(model, q, v, qdd)
        den = ld.inverse_dynamics(model, q, v, qdd, method="denoc")
        err = np.abs(den.u - gen.u).max() / max(1.0, np.abs(gen.u).max())
        t = timings(
            [
                lambda model=model, q=q, v=v, a=qdd: ld.inverse_dynamics(
                    model, q, v, a, method="denoc"
                ),
                lambda model=model, q=q, v=v, a=qdd: ld.inverse_dynamics(model, q, v, a),
            ],
            rounds,
            min_time,
        )
        print(
            f"  {name:<10} denoc {t[0][0]:8.2f} [{t[0][1]:7.2f}]   generic {t[1][0]:8.2f} "
            f"[{t[1][1]:7.2f}]   ×{t[0][0] / t[1][0]:5.2f}   error {err:.1e}"
        )
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer and shorter rounds")
    args = ap.parse_args(argv)
    rounds, min_time = (3, 0.03) if args.quick else (7, 0.1)
    catalog_table(rounds, min_time)
    inverse_table(rounds, min_time)
    scaling([1, 2, 4, 8, 16, 32], rounds, min_time)


if __name__ == "__main__":
    main()
