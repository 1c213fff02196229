"""SLM against SSLM: Tables 3–4 of the reduced-order paper, and a family where SSLM's lead grows.

Run from the repository root::

    python benchmarks/bench_sslm.py            # everything (~3 min)
    python benchmarks/bench_sslm.py --quick    # fewer repeats, shorter ladders
    python benchmarks/bench_sslm.py --quick --models three_rrr --no-scaling   # one row

Everything runs in one process and is reported as ratios SSLM / SLM next to the
paper's (its MATLAB timings on a Core 2 Duo, Tables 3 and 4).

1. The λ stage alone (Table 4): eq. (12) from the system-level M and J (SLM,
   operation for operation as ``methods/slm.py``) against eqs. (19)–(25) and the
   block elimination from the subsystem I_j and J_{i,j} (SSLM), both compiled, on
   the same state, timed in a compiled loop (``sslm.lambda_stage``).  Per call,
   and summed over the right-hand side evaluations of the 15-s free simulation as
   the paper does.  Also the whole forward-dynamics call, compiled kernel and
   public API (``ld.forward_dynamics``).
2. Whole simulations (Table 3), ``ld.simulate`` with scipy's RK45 (the paper's
   ode45), output every 0.01 s, closure drift removed by projection after each
   step: (a) free 15 s at rtol = atol = 1e-3, (b) free 5 s at 1e-8, (c) forced 5 s
   at 1e-8 with the actuator torques of an inverse-dynamics solution along a
   prescribed motion (carpet scraper: the crank at the constant rate of Table 2;
   3-RRR: rest-to-rest cycloidal moves of the three actuated joints), plus a light
   PD correction without which the open-loop replay diverges.
3. Scaling: ``planar_ladder(L)`` and ``spatial_ladder(L)``, a chain of L loops in
   which every loop is cut into its own small subsystem (a post and its rung), so
   the GICM is block-tridiagonal (2×2 and 3×3 blocks).  λ time per call of both
   methods, the forward-dynamics call, and log-log slopes over L >= 8.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from bench_closed import _state
from bench_tree import per_call_us
from loopdyn.examples.paper_mechanisms import (
    CARPET_SCRAPER_THETA1_DOT,
    THREE_RRR_THETA,
)
from loopdyn.kernels import tiers
from loopdyn.methods import sslm

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

# Tables 3 and 4 of the paper: seconds, (SLM, SSLM)
PAPER_T4 = {"carpet_scraper": (0.3045, 0.2205), "three_rrr": (0.2055, 0.1575)}
PAPER_T3 = {
    "carpet_scraper": {"a": (2.80, 2.72), "b": (6.51, 6.41), "c": (9.33, 9.25)},
    "three_rrr": {"a": (3.07, 2.96), "b": (10.25, 10.12), "c": (12.91, 12.81)},
}
CASES = {"a": ("free", 15.0, 1e-3), "b": ("free", 5.0, 1e-8), "c": ("forced", 5.0, 1e-8)}
# forced runs: inverse-dynamics feed-forward plus a light PD on the actuated joints
# (N·m/rad, N·m·s/rad): replayed open loop, both prescribed motions diverge
# exponentially (the error doubles every ~0.25 s); the PD keeps them on track
PD_GAINS = {"carpet_scraper": (20.0, 2.0), "three_rrr": (50.0, 5.0)}


@njit
def _repeat(n, fn, *args):
    acc = 0.0
    for _ in range(n):
        acc += fn(*args)
    return acc


def _times(fns, repeat, min_time):
    """Per-call µs of each callable, timed in alternation (bench_tree.per_call_us)."""
    out = per_call_us(list(fns), repeat, min_time)
    return list(out) if isinstance(out, list | tuple) else [out]


def kernel_ns(calls, repeat, min_time):
    """Per-call ns of compiled ``(fn, args)`` pairs, run ``n`` times in a compiled loop.

    Alternating runs of ~``min_time`` s each; the fastest of ``repeat`` runs (the
    least disturbed by other load on the machine).
    """
    ns = []
    for fn, args in calls:
        _repeat(3, fn, *args)
        n, el = 1, 0.0
        while el < min_time / 4:
            n *= 4
            t0 = time.perf_counter()
            _repeat(n, fn, *args)
            el = time.perf_counter() - t0
        ns.append(max(1, int(n * min_time / el)))
    runs = [[] for _ in calls]
    for _ in range(repeat):
        for (fn, args), n, r in zip(calls, ns, runs, strict=True):
            t0 = time.perf_counter()
            _repeat(n, fn, *args)
            r.append((time.perf_counter() - t0) / n)
    return [1e9 * float(np.min(r)) for r in runs]


def _fd_kernels(model, q, v, tau):
    """The compiled forward-dynamics entries of SLM and SSLM with their arguments."""
    out = []
    for method in ("slm", "sslm"):
        d = model.create_data()
        ld.forward_dynamics(model, q, v, tau, method=method, data=d)  # rows, plan, compile
        call = d.bound[method][0]  # functools.partial(entry, ctx[, plan buffer])
        args = (*call.args, q, v, tau, np.empty(model.nv), np.empty(model.m))
        out.append((call.func, args))
    return out


def per_call(model, repeat, min_time, seed=0):
    """λ stage, FD kernel and FD API per call (SLM, SSLM), same state."""
    q, v, tau = _state(model, seed)
    ls = [sslm.lambda_stage(model, q, v, tau, m) for m in ("slm", "sslm")]
    for kern, args, _ in ls:
        kern(*args)
    lam = [r() for _, _, r in ls]
    err = np.abs(lam[1] - lam[0]).max() / np.abs(lam[0]).max()
    t_lam = kernel_ns([(k, a) for k, a, _ in ls], repeat, min_time)
    t_fdk = kernel_ns(list(_fd_kernels(model, q, v, tau)), repeat, min_time)
    d = [model.create_data(), model.create_data()]
    fns = [
        lambda m=m, dd=dd: ld.forward_dynamics(model, q, v, tau, method=m, data=dd)
        for m, dd in zip(("slm", "sslm"), d, strict=True)
    ]
    for f in fns:
        f()
    t_api = _times(fns, repeat, min_time)
    return {"lam_ns": t_lam, "fd_kernel_ns": t_fdk, "fd_api_us": t_api, "lam_err": err}


# ------------------------------------------------------------- the simulations
def _cycloid(t, T, delta):
    s = np.clip(t / T, 0.0, 1.0)
    w = 2 * np.pi / T
    pos = delta * (s - np.sin(2 * np.pi * s) / (2 * np.pi))
    vel = delta / T * (1 - np.cos(w * t)) * (t <= T)
    acc = delta / T * w * np.sin(w * t) * (t <= T)
    return pos, vel, acc


def desired_motion(model, T):
    """Prescribed actuated motion of the forced runs: (q_a(t), q̇_a(t), q̈_a(t)) functions."""
    q0 = np.array(model.q0[model.actuated])
    if model.name == "carpet_scraper":  # the crank at Table 2's constant rate
        w = CARPET_SCRAPER_THETA1_DOT
        return lambda t: (q0 + w * t, np.array([w]), np.array([0.0]))
    delta = np.array([0.25, -0.25, 0.25])  # 3-RRR: from Table 2's angles, rest to rest

    def f(t):
        p, v, a = _cycloid(t, T, delta)
        return q0 + p, v, a

    return f


def inverse_dynamics_torque(model, T, dt=0.005):
    """Actuator torques along ``desired_motion`` (inverse dynamics), as a cubic spline of t."""
    from scipy.interpolate import CubicSpline

    motion = desired_motion(model, T)
    act = model.actuated
    free = np.setdiff1d(np.arange(model.nv), act)
    ts = np.arange(0.0, T + dt / 2, dt)
    q = np.array(model.q0)
    U = np.zeros((ts.size, act.size))
    for i, t in enumerate(ts):
        qa, va, aa = motion(t)
        guess = q.copy()
        guess[act] = qa
        q = ld.assemble(model, guess)
        v = np.zeros(model.nv)
        v[act] = va
        v = ld.complete_velocity(model, q, v)
        _, J, gamma = ld.constraints(model, q, v)
        qdd = np.zeros(model.nv)
        qdd[act] = aa
        qdd[free] = np.linalg.lstsq(J[:, free], gamma - J[:, act] @ aa, rcond=None)[0]
        U[i] = ld.inverse_dynamics(model, q, v, qdd).u
    spline = CubicSpline(ts, U)
    return spline, motion


def simulations(model, repeat):
    """Table 3: wall time of the three runs with SLM and SSLM (best of ``repeat``, alternated)."""
    v0 = np.zeros(model.nv)
    if model.name == "carpet_scraper":
        v0[model.actuated] = CARPET_SCRAPER_THETA1_DOT
    rows = {}
    for case, (kind, T, tol) in CASES.items():
        tau, motion = (None, None)
        if kind == "forced":
            spline, motion = inverse_dynamics_torque(model, T)
            kp, kd = PD_GAINS[model.name]
            act = model.actuated

            def tau(t, q, v, spline=spline, motion=motion, kp=kp, kd=kd, act=act):
                qd, vd, _ = motion(t)
                return spline(t) + kp * (qd - q[act]) + kd * (vd - v[act])

        out = {}
        for _ in range(repeat):  # alternate the methods: load changes hit both alike
            for method in ("slm", "sslm"):
                t0 = time.perf_counter()
                tr = ld.simulate(
                    model, model.q0, v0, T, tau=tau, method=method, integrator="RK45",
                    stabilization="projection", rtol=tol, atol=tol,
                    t_eval=np.arange(0.0, T + 1e-9, 0.01),
                )  # fmt: skip
                el = time.perf_counter() - t0
                if method not in out or el < out[method][0]:
                    dev = None
                    if motion is not None:
                        dev = max(
                            float(np.abs(qq[model.actuated] - motion(t)[0]).max())
                            for t, qq in zip(tr.t, tr.q, strict=True)
                        )
                    out[method] = (el, tr.stats["nfev"], dev)
        rows[case] = out
    return rows


PAPER_NAMES = ("carpet_scraper", "three_rrr", "excavator")


def paper_tables(repeat, min_time, sim_repeat, names=PAPER_NAMES):
    print("Table 4 analogue: λ computation, SLM (eq. 12) vs SSLM (eqs. 19–25, 34–36, 45–46)")
    print(
        f"{'mechanism':<16}{'n':>3}{'m':>3}{'SLM λ ns':>10}{'SSLM λ ns':>11}{'ratio':>7}"
        f"{'paper':>7}{'λ err':>9}{'FD kern SLM/SSLM µs':>22}{'ratio':>7}"
        f"{'FD API SLM/SSLM µs':>21}{'ratio':>7}"
    )  # fmt: skip
    per = {}
    for name in names:
        model = ld.examples.get(name)
        r = per[name] = per_call(model, repeat, min_time)
        (a, b), (fa, fb), (pa, pb) = r["lam_ns"], r["fd_kernel_ns"], r["fd_api_us"]
        paper = PAPER_T4.get(name)
        pr = f"{paper[1] / paper[0]:.3f}" if paper else "—"
        print(
            f"{name:<16}{model.nv:>3}{model.m:>3}{a:>10.0f}{b:>11.0f}{b / a:>7.3f}{pr:>7}"
            f"{r['lam_err']:>9.1e}{f'{fa / 1e3:.2f} / {fb / 1e3:.2f}':>22}{fb / fa:>7.3f}"
            f"{f'{pa:.1f} / {pb:.1f}':>21}{pb / pa:>7.3f}",
            flush=True,
        )
    print()
    print("Table 3 analogue: whole simulations (ld.simulate, RK45, projection), wall time s")
    print(
        f"{'mechanism':<16}{'run':<28}{'SLM s':>8}{'SSLM s':>8}{'ratio':>7}{'paper':>7}"
        f"{'nfev SLM/SSLM':>15}{'λ total SLM/SSLM s':>20}{'ratio':>7}{'paper':>7}"
    )  # fmt: skip
    for name in [n for n in ("carpet_scraper", "three_rrr") if n in names]:
        model = ld.examples.get(name)
        sims = simulations(model, sim_repeat)
        lam_ns = per[name]["lam_ns"]
        for case, (kind, T, tol) in CASES.items():
            s, ss = sims[case]["slm"], sims[case]["sslm"]
            p = PAPER_T3[name][case]
            label = f"({case}) {kind} {T:g} s, tol {tol:g}"
            lt = (s[1] * lam_ns[0] * 1e-9, ss[1] * lam_ns[1] * 1e-9)
            pt4 = PAPER_T4[name] if case == "a" else None
            p4 = f"{pt4[1] / pt4[0]:.3f}" if pt4 else "—"
            dev = "" if s[2] is None else f"  tracking error {max(s[2], ss[2]):.0e} rad"
            print(
                f"{name:<16}{label:<28}{s[0]:>8.3f}{ss[0]:>8.3f}{ss[0] / s[0]:>7.3f}"
                f"{p[1] / p[0]:>7.3f}{f'{s[1]}/{ss[1]}':>15}"
                f"{f'{lt[0]:.2e}/{lt[1]:.2e}':>20}{lt[1] / lt[0]:>7.3f}{p4:>7}{dev}",
                flush=True,
            )
    print()


def scaling(Ls, repeat, min_time):
    print("Scaling: a chain of L loops, each cut into its own small subsystem (ratios SSLM/SLM)")
    print(
        f"{'family':<16}{'L':>5}{'n':>5}{'m':>5}{'SLM λ µs':>11}{'SSLM λ µs':>11}{'ratio':>9}"
        f"{'SLM FD µs':>11}{'SSLM FD µs':>12}{'ratio':>9}   (FD: compiled kernels)"
    )  # fmt: skip
    for fam in ("planar_ladder", "spatial_ladder"):
        rows = []
        for L in Ls:
            model = ld.examples.get(fam, L=L)
            q, v, tau = _state(model)
            ls = [sslm.lambda_stage(model, q, v, tau, m) for m in ("slm", "sslm")]
            t_lam = kernel_ns([(k, a) for k, a, _ in ls], repeat, min_time)
            t_fd = kernel_ns(list(_fd_kernels(model, q, v, tau)), repeat, min_time)
            rows.append((L, *t_lam, *t_fd))
            print(
                f"{fam:<16}{L:>5}{model.nv:>5}{model.m:>5}{t_lam[0] / 1e3:>11.2f}"
                f"{t_lam[1] / 1e3:>11.2f}{t_lam[1] / t_lam[0]:>9.3g}{t_fd[0] / 1e3:>11.2f}"
                f"{t_fd[1] / 1e3:>12.2f}{t_fd[1] / t_fd[0]:>9.3g}",
                flush=True,
            )
        R = np.array(rows, float)
        sel = R[:, 0] >= 8
        if sel.sum() >= 2:
            x = np.log(R[sel, 0])
            sl = [np.polyfit(x, np.log(R[sel, k]), 1)[0] for k in (1, 2, 3, 4)]
            print(
                f"{fam}: log-log slope over L >= 8: λ SLM {sl[0]:.2f}, SSLM {sl[1]:.2f}; "
                f"forward dynamics SLM {sl[2]:.2f}, SSLM {sl[3]:.2f}"
            )
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer repeats, L up to 32")
    ap.add_argument("--no-sim", action="store_true", help="skip the Table 3 simulations")
    ap.add_argument(
        "--models",
        default=",".join(PAPER_NAMES),
        help="paper mechanisms of Tables 3-4, comma-separated (default: all three)",
    )
    ap.add_argument("--no-scaling", action="store_true", help="skip the ladder family")
    args = ap.parse_args(argv)
    repeat, min_time, sim_repeat = (5, 0.05, 1) if args.quick else (11, 0.1, 3)
    print(f"loopdyn SSLM benchmark; Table 2 initial angles of the 3-RRR: {THREE_RRR_THETA}\n")
    if args.no_sim:
        global CASES
        CASES = {}
    paper_tables(repeat, min_time, sim_repeat, tuple(args.models.split(",")))
    if not args.no_scaling:
        Ls = [1, 2, 4, 8, 16, 32] + ([] if args.quick else [64, 128])
        scaling(Ls, repeat, min_time)


if __name__ == "__main__":
    main()
