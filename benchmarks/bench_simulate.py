"""Simulation benchmark: 5 s free fall of the four-bar from θ1 = 90°, loopdyn vs MuJoCo.

Run from the repository root::

    python benchmarks/bench_simulate.py            # MuJoCo sweep down to dt = 1e-4
    python benchmarks/bench_simulate.py --full     # ... and dt = 2e-5, 1e-5 (slow)

loopdyn: ``ld.simulate`` (augmented KKT forward dynamics, DOP853, projection onto
the closures), rtol = atol = 1e-8 (the headline) and tighter.  The whole call is
timed (initial assembly, integration, and the post-processing of 51 output
states: q̈, λ, residuals, energy).

MuJoCo: the same model (``loopdyn.interop.mujoco.MujocoExport``: same q and v),
``mj_step`` for 5 s, timed alone; swept over timestep, integrator (RK4,
implicitfast, Euler), equality ``solref`` (default (0.02, 1) and the stiffest
stable (2 dt, 1)) and ``solimp`` (default and (0.99, 0.9999, 0.001, 0.5, 2)),
with the constraint solver at tolerance 1e-12.  Its loop closure is soft (a
spring-damper), so its answer approaches the rigid one only as dt -> 0.

Accuracy, at 51 times (every 0.1 s): energy error max |E(t) - E(0)| (the free
motion conserves E exactly), closure gap max |Φ(q)|, and trajectory error
max |q(t) - q_ref(t)| against loopdyn at rtol = atol = 1e-13.  Wall times are
the best of ``--repeat`` runs in this one process.
"""

import argparse
import time

import numpy as np

import loopdyn as ld
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

T_END = 5.0
N_OUT = 51


def _metrics(model, Q, V, Q_ref):
    E = np.array([ld.total_energy(model, q, v) for q, v in zip(Q, V, strict=True)])
    gap = max(np.abs(ld.closure_residual(model, q)).max() for q in Q)
    return float(np.abs(E - E[0]).max()), float(gap), float(np.abs(Q - Q_ref).max())


def loopdyn_run(model, repeat, ref, **kw):
    best, traj = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        traj = ld.simulate(model, t_end=T_END, t_eval=N_OUT, **kw)
        best = min(best, time.perf_counter() - t0)
    dE, gap, dq = _metrics(model, traj.q, traj.v, ref)
    return best, dE, gap, dq, traj


def mujoco_run(model, repeat, ref, dt, integrator, solref, solimp):
    import mujoco

    from loopdyn.interop.mujoco import MujocoExport

    ex = MujocoExport(model, timestep=dt, integrator=integrator, solref=solref, solimp=solimp)
    m, d = ex.model, ex.data
    m.opt.tolerance = 1e-12
    n = round(T_END / dt)
    every = round(T_END / (N_OUT - 1) / dt)
    best = np.inf
    for _ in range(repeat):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = model.q0
        d.qvel[:] = 0.0
        Q, V = [d.qpos.copy()], [d.qvel.copy()]
        t0 = time.perf_counter()
        for k in range(1, n + 1):
            mujoco.mj_step(m, d)
            if k % every == 0:
                Q.append(d.qpos.copy())
                V.append(d.qvel.copy())
        best = min(best, time.perf_counter() - t0)
        if not np.all(np.isfinite(d.qpos)):
            return best, np.inf, np.inf, np.inf
    Q, V = np.array(Q), np.array(V)
    return (best, *_metrics(model, Q, V, ref))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--full", action="store_true", help="also MuJoCo at dt = 2e-5, 1e-5")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model = ld.examples.four_bar(theta1=np.pi / 2)
    e0 = ld.total_energy(model, model.q0, np.zeros(3))
    print(f"four-bar free fall from θ1 = 90°, {T_END} s, E(0) = {e0:.6f} J")
    ref = ld.simulate(model, t_end=T_END, t_eval=N_OUT, rtol=1e-13, atol=1e-13).q
    ld.simulate(model, t_end=0.1)  # warm-up: numba caches, imports

    rows = []
    minimal = ld.methods.dynamics.MINIMAL_METHODS  # integrated in their own coordinates
    for method in ld.methods.dynamics.METHODS:
        own = "partitioning" if method in minimal else "projection"
        for stab in ("projection", "none", "partitioning"):
            if method != "augmented" and stab != own:
                continue
            for tol in (1e-8, 1e-10, 1e-12):
                if stab != own and tol != 1e-8:
                    continue
                w, dE, gap, dq, traj = loopdyn_run(
                    model, args.repeat, ref, method=method, stabilization=stab, rtol=tol, atol=tol
                )
                rows.append(
                    ("loopdyn", f"{method} DOP853 {stab} rtol=atol={tol:g}", w, dE, gap, dq,
                     traj.stats["steps"])
                )  # fmt: skip
    ours = rows[0]
    dts = [1e-3, 5e-4, 2e-4, 1e-4] + ([2e-5, 1e-5] if args.full else [])
    for dt in dts:
        for integ in ("RK4", "implicitfast", "Euler"):
            for solref in (None, (2 * dt, 1.0)):
                for solimp in (None, (0.99, 0.9999, 0.001, 0.5, 2)):
                    w, dE, gap, dq = mujoco_run(
                        model, 1 if dt < 1e-4 else args.repeat, ref, dt, integ, solref, solimp
                    )
                    label = (
                        f"dt={dt:g} {integ} solref={'default' if solref is None else '(2dt,1)'}"
                        f" solimp={'default' if solimp is None else '(.99,.9999,...)'}"
                    )
                    rows.append(("mujoco", label, w, dE, gap, dq, round(T_END / dt)))

    head = ("", "configuration", "wall [s]", "|ΔE| [J]", "max|Φ| [m]", "max|Δq|", "steps")
    print("\n{:8s} {:58s} {:>9s} {:>9s} {:>10s} {:>9s} {:>7s}".format(*head))
    for r in sorted(rows, key=lambda r: r[2]):
        print(f"{r[0]:8s} {r[1]:58s} {r[2]:9.4f} {r[3]:9.2e} {r[4]:10.2e} {r[5]:9.2e} {r[6]:7d}")

    mj = [r for r in rows if r[0] == "mujoco" and np.isfinite(r[3])]
    print("\nloopdyn (augmented, DOP853, projection) against MuJoCo; ratios are MuJoCo / loopdyn")
    for ours in rows[:3]:
        print(
            f"* {ours[1]}: {ours[2]:.3f} s, |ΔE| {ours[3]:.1e} J, gap {ours[4]:.1e} m,"
            f" |Δq| {ours[5]:.1e}"
        )
        budget = [r for r in mj if r[2] <= 2.0 * ours[2]]
        if budget:
            b = min(budget, key=lambda r: r[5])
            print(
                f"    most accurate MuJoCo run within 2x that wall time: {b[1]} ({b[2]:.3f} s):"
                f" energy {b[3] / ours[3]:.0e}x, gap {b[4] / ours[4]:.0e}x,"
                f" trajectory {b[5] / ours[5]:.0e}x worse"
            )
        match = [r for r in mj if r[5] <= ours[5] and r[3] <= ours[3]]
        if match:
            f = min(match, key=lambda r: r[2])
            print(
                f"    fastest MuJoCo run as accurate (|ΔE| and |Δq|): {f[1]}: {f[2]:.3f} s"
                f" = {f[2] / ours[2]:.0f}x the wall time, its gap {f[4] / ours[4]:.0e}x ours"
            )
        else:
            print("    no MuJoCo run in the sweep is as accurate (|ΔE| and |Δq|)")
    best = min(mj, key=lambda r: r[5])
    print(
        f"MuJoCo's most accurate run in the sweep: {best[1]}: {best[2]:.3f} s, "
        f"|ΔE| {best[3]:.1e} J, gap {best[4]:.1e} m, |Δq| {best[5]:.1e}"
    )


if __name__ == "__main__":
    main()
