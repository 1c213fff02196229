"""Saha & Schiehlen, Sec. VI, with their own method: DeNOC inverse and forward dynamics.

    python examples/papers/denoc_paper.py           # figures in docs/img/papers/ (~3 min)
    python examples/papers/denoc_paper.py --quick   # shorter runs, for the tests
    python examples/papers/denoc_paper.py --out figs   # elsewhere

Prints ``KEY name = value`` lines (tests/test_papers.py) and writes denoc_paper.json.

Everything dynamic here goes through ``loopdyn.methods.denoc`` (IDA-1..3 for the
torques, FDA-1..3 and eq. (25) for the accelerations); ``ld.simulate`` (augmented
multipliers, full coordinates) is the independent reference.  The free motions
integrate the paper's minimal-order equations (25) in the actuated angles θ: at
each evaluation the positions follow from θ by assembly (the paper's Sec. IV takes
them "from a suitable algorithm"), the unactuated rates from (11b)/(12b), and θ̈ from
I θ̈ = τ - C θ̇.

Four-bar (Sec. VI.A): θ1 30° → 90° in T = 20 s, cycloidal (eqs. 35–36)
  fig5_four_bar_kinematics.png  joint angles, rates, accelerations (Fig. 5)
  fig6_four_bar_torque.png      τ1 by IDA (Fig. 6), and its difference to ld.inverse_dynamics
  fig7_four_bar_free_fall.png   free fall from θ1 = 90° at rest (Fig. 7): θ1(t), energy
  fig8_four_bar_forced.png      the IDA torque fed forward, and the feedback law (37) (Fig. 8);
                                where the open loop leaves the desired path (> 0.01 rad) for
                                several error sources: tolerance, the torque sampled every
                                t̄ = 0.02 s, fixed-step RK4 at the paper's 0.2 s, an initial error
Five-bar (Sec. VI.B), the end-effector below the elbows (the branch on which DeNOC's
free fall stops near the paper's 1.4 s; above them it stops at 0.48 s):
  fig10_five_bar_angles.png     θ1, θ2 of both legs along the trajectory (Fig. 10)
  fig11_five_bar_torques.png    τ1⁽¹⁾, τ1⁽²⁾ by IDA along θ1⁽¹⁾ 30° → 90°, θ1⁽²⁾ 30° → 70.3°
                                in 20 s (eqs. 35, 38–39; Fig. 11)
  fig12_five_bar_free_fall.png  free fall from 80°/70° (Fig. 12): DeNOC in (θ1⁽¹⁾, θ1⁽²⁾) stops
                                where Φ of eq. (14a) turns singular; full coordinates go on
  fig13_five_bar_forced.png     the IDA torques fed forward open loop (Fig. 13; the paper's
                                program stops at 3.2 s), and with feedback (37)
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

import loopdyn as ld
from loopdyn.analysis.motion import PrescribedMotion, cycloidal
from loopdyn.examples.planar import circle_intersection
from loopdyn.methods import denoc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import key, parse

T = 20.0
DEG = np.pi / 180.0
QUICK = False  # set by --quick: fewer samples, shorter free and forced runs


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------- minimal coordinates
class MinimalModel:
    """The minimal-order equations (25) of a DeNOC model in its actuated angles θ.

    ``state(θ, θ̇)``: consistent (q, v); ``accel(t, θ, θ̇)``: θ̈ by ``denoc.run``.
    Positions by Newton assembly from the last ones (so the branch is followed).
    """

    def __init__(self, model, q_start, tau=None):
        self.model = model
        self.act = model.actuated
        self.q = np.array(q_start, dtype=float)
        self.tau = tau  # tau(t, q, v) -> (nv,), or None: gravity only

    def state(self, th, dth):
        guess = self.q.copy()
        guess[self.act] = th
        self.q = ld.assemble(self.model, guess)
        v = np.zeros(self.model.nv)
        v[self.act] = dth
        return self.q, v

    def full_velocity(self, q, v):
        """Every joint rate from the actuated ones, eqs. (11b)/(12b)."""
        return denoc.complete_rates(self.model, q, v)

    def rhs(self, t, y):
        n = self.act.size
        q, v = self.state(y[:n], y[n:])
        tau = np.zeros(self.model.nv) if self.tau is None else self.tau(t, q, v)
        qdd = denoc.run(self.model, q, v, tau)
        return np.concatenate([y[n:], qdd[self.act]])

    def simulate(self, t_end, t_eval, rtol=1e-10):
        """solve_ivp (DOP853) of θ̈ = f(θ, θ̇); stops with the SingularityError's time."""
        n = self.act.size
        y0 = np.concatenate([self.q[self.act], np.zeros(n)])
        stop = {}

        def rhs(t, y):
            try:
                return self.rhs(t, y)
            except (ld.SingularityError, ld.AssemblyError) as e:
                stop.setdefault("t", t)
                stop.setdefault("error", f"{type(e).__name__}: {e}")
                raise

        try:
            sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", t_eval=t_eval, rtol=rtol,
                            atol=rtol)  # fmt: skip
        except (ld.SingularityError, ld.AssemblyError):
            sol = None
        return sol, stop


def energy_along(mm, ts, Y):
    n = mm.act.size
    E = []
    for y in Y:
        q, v = mm.state(y[:n], y[n:])
        E.append(ld.total_energy(mm.model, q, mm.full_velocity(q, v)))
    return np.array(E)


# ------------------------------------------------------------------ four-bar
def four_bar_motion(t):
    return cycloidal(t, T, 30 * DEG, 90 * DEG)


def four_bar_inverse(out, results):
    """Figs. 5 and 6: the trajectory of eqs. (35)–(36), unactuated rates by (11b), τ1 by IDA."""
    plt = _plt()
    model = ld.examples.four_bar()
    pm = PrescribedMotion(model, four_bar_motion)
    mm = MinimalModel(model, model.q0)
    ts = np.linspace(0.0, T, 201 if QUICK else 1001)  # the paper's t̄ = 0.02 s
    Q, V, A, tau, diff, dv = [], [], [], [], [], []
    for t in ts:
        q, v_ref, qdd = pm.state(t)  # positions by assembly, q̇ and q̈ (for the reference)
        v = np.zeros(model.nv)
        v[model.actuated] = v_ref[model.actuated]
        v_all = mm.full_velocity(q, v)  # (11b)
        u = denoc.inverse(model, q, v, qdd)[0]  # reads θ̇1, θ̈1 only
        Q.append(q)
        V.append(v_all)
        A.append(qdd)
        tau.append(u)
        diff.append(abs(u - ld.inverse_dynamics(model, q, v_ref, qdd).u[0]))
        dv.append(np.abs(v_all - v_ref).max())  # v_ref: the generic null-space completion
    Q, V, A, tau = map(np.array, (Q, V, A, tau))
    results["four_bar_inverse"] = {
        "tau1_start": float(tau[0]),
        "tau1_end": float(tau[-1]),
        "tau1_min": float(tau.min()),
        "tau1_max": float(tau.max()),
        "max_unactuated_rate_difference_to_complete_velocity": float(max(dv)),
        "max_difference_to_ld_inverse_dynamics": float(max(diff)),
    }
    key("four_bar_fig6_tau1_start", float(tau[0]))
    key("four_bar_fig6_tau1_end", float(tau[-1]))
    key("four_bar_fig6_ida_vs_inverse_dynamics", float(max(diff)))
    key("four_bar_fig5_rates_11b_vs_null_space", float(max(dv)))
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    labels = ("θ1 (crank)", "θ2 (coupler, relative)", "θ3 (rocker, from the ground line)")
    for i, lab in enumerate(labels):
        ax[0].plot(ts, np.rad2deg(Q[:, i]), label=lab)
        ax[1].plot(ts, V[:, i], label=lab)
        ax[2].plot(ts, A[:, i], label=lab)
    ax[0].set(xlabel="t (s)", ylabel="deg", title="Fig. 5(a): joint angles")
    ax[1].set(xlabel="t (s)", ylabel="rad/s", title="Fig. 5(b): joint rates, eq. (11b)")
    ax[2].set(xlabel="t (s)", ylabel="rad/s²", title="Fig. 5(c): joint accelerations")
    ax[0].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig5_four_bar_kinematics.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, tau)
    ax.set(xlabel="t (s)", ylabel="τ1 (N·m)", title="Fig. 6: τ1 by DeNOC inverse dynamics")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig6_four_bar_torque.png", dpi=110)
    plt.close(fig)


def four_bar_free_fall(out, results, t_end=None):
    """Fig. 7: free fall from θ1 = 90° at rest, minimal coordinates; ld.simulate as reference."""
    plt = _plt()
    t_end = t_end or (5.0 if QUICK else 20.0)
    model = ld.examples.four_bar(theta1=90 * DEG)
    ts = np.linspace(0.0, t_end, 501 if QUICK else 2001)
    mm = MinimalModel(model, model.q0)
    t0 = time.perf_counter()
    sol, stop = mm.simulate(t_end, ts)
    wall = time.perf_counter() - t0
    E = energy_along(mm, sol.t, sol.y.T)
    ref = ld.simulate(model, t_end=t_end, rtol=1e-10, atol=1e-10, t_eval=ts)
    results["four_bar_free_fall"] = {
        "completed": bool(sol.status == 0) and not stop,
        "rhs_evaluations": int(sol.nfev),
        "wall_time": wall,
        "max_energy_drift": float(np.abs(E - E[0]).max()),
        "energy": float(E[0]),
        "max_theta1_difference_to_ld_simulate": float(np.abs(sol.y[0] - ref.q[:, 0]).max()),
    }
    key("four_bar_fig7_energy_drift", float(np.abs(E - E[0]).max()))
    key("four_bar_fig7_denoc_vs_ld_simulate", float(np.abs(sol.y[0] - ref.q[:, 0]).max()))
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(sol.t, np.rad2deg(sol.y[0]), label="DeNOC, minimal coordinates")
    ax[0].plot(ref.t, np.rad2deg(ref.q[:, 0]), "--", label="ld.simulate (augmented)")
    ax[0].set(ylabel="θ1 (deg)", title="Fig. 7: four-bar free fall from θ1 = 90°")
    ax[0].legend(fontsize=8)
    ax[1].semilogy(sol.t, np.maximum(np.abs(E - E[0]), 1e-16))
    ax[1].set(xlabel="t (s)", ylabel="|E(t) - E(0)| (J)")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig7_four_bar_free_fall.png", dpi=110)
    plt.close(fig)


def integrate(mm, y0, t_end, ts, rtol, desired, method="DOP853"):
    """θ̈ = f(θ, θ̇) of ``mm`` from y0 (solve_ivp, or fixed-step "RK4 0.2"); stops at a
    SingularityError/AssemblyError or once |θ - θ_d| > 0.5 rad (``desired(t)``).
    Returns (t, θ (n, len t), stop message or None)."""
    n = mm.act.size

    def off(t, y):
        return 0.5 - np.abs(y[:n] - desired(t)).max()

    off.terminal = True
    stop = {}

    def rhs(t, y):
        try:
            return mm.rhs(t, y)
        except (ld.SingularityError, ld.AssemblyError) as e:
            stop.setdefault("t", t)
            stop.setdefault("error", f"{type(e).__name__}: {str(e)[:100]}")
            raise

    if method == "RK4 0.2":  # fixed step, no error control
        h, y, t, T_, Y = 0.2, np.array(y0, float), 0.0, [0.0], [np.array(y0, float)]
        try:
            while t < t_end - 1e-9 and off(t, y) > 0:
                k1 = rhs(t, y)
                k2 = rhs(t + h / 2, y + h / 2 * k1)
                k3 = rhs(t + h / 2, y + h / 2 * k2)
                k4 = rhs(t + h, y + h * k3)
                y, t = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + h
                T_.append(t)
                Y.append(y)
        except (ld.SingularityError, ld.AssemblyError):
            pass
        return np.array(T_), np.array(Y).T[:n], stop.get("error")
    try:
        sol = solve_ivp(rhs, (0.0, t_end), y0, method=method, t_eval=ts, rtol=rtol, atol=rtol,
                        events=off)  # fmt: skip
        return sol.t, sol.y[:n], stop.get("error")
    except (ld.SingularityError, ld.AssemblyError):
        return None, None, stop.get("error") + f" at t = {stop['t']:.3f} s"


def first_exceed(t, th, desired, tol=1e-2):
    """First time |θ - θ_d| > tol (None if never)."""
    err = np.array([np.abs(th[:, k] - desired(tk)).max() for k, tk in enumerate(t)])
    bad = np.flatnonzero(err > tol)
    return (float(t[bad[0]]) if bad.size else None), err


def _ida_controllers(model, pm, motion, lam=1.0):
    """The two controllers of Figs. 8 and 13: the IDA torque of the prescribed motion ``pm``
    fed forward, and the feedback law (37): τ = I τ_e + C θ̇ (gravity included), τ_e = θ̈_d -
    2λ(θ̇ - θ̇_d) - λ²(θ - θ_d), the DeNOC inverse dynamics at the actual state with θ̈ = τ_e
    (``motion(t)``: θ_d, θ̇_d, θ̈_d of the actuated joints)."""
    act = model.actuated

    def feedforward(t, q, v):
        qd, vd, ad = pm.state(t)
        out = np.zeros(model.nv)
        out[act] = denoc.inverse(model, qd, vd, ad)
        return out

    def feedback(t, q, v):
        th, dth, ddth = motion(t)
        a = np.zeros(model.nv)
        a[act] = ddth - 2 * lam * (v[act] - dth) - lam**2 * (q[act] - th)
        out = np.zeros(model.nv)
        out[act] = denoc.inverse(model, q, v, a)
        return out

    return feedforward, feedback


def four_bar_forced(out, results):
    """Fig. 8: the IDA torque fed forward (open loop), and the feedback law (37), λ = 1.

    The open loop leaves the desired path (the paper: after ~2.25 s, NEWMOS's
    Adams–Bashforth–Moulton at a 0.2 s step and tolerance 1e-6).  Where it leaves depends
    on the error the unstable motion amplifies; measured here for: the tolerance (1e-10,
    1e-6), the torque sampled on the paper's t̄ = 0.02 s grid and interpolated linearly,
    fixed-step RK4 at 0.2 s, and an initial error of 1e-3 rad."""
    plt = _plt()
    model = ld.examples.four_bar()
    t_end = 12.0 if QUICK else T
    ts = np.arange(0.0, t_end + 1e-9, 0.02)

    def desired(t):
        return np.atleast_1d(four_bar_motion(t)[0])

    pm = PrescribedMotion(model, four_bar_motion)
    grid = np.linspace(0.0, T, 1001)  # t̄ = 0.02 s
    U = []
    for t in grid:
        qd, vd, ad = pm.state(t)
        U.append(denoc.inverse(model, qd, vd, ad)[0])
    U = np.array(U)
    # a new PrescribedMotion: state() continues from the last pose it solved (the grid's end)
    feedforward, feedback = _ida_controllers(model, PrescribedMotion(model, four_bar_motion),
                                             four_bar_motion)  # fmt: skip

    def sampled(t, q, v):
        out = np.zeros(model.nv)
        out[model.actuated] = np.interp(t, grid, U)
        return out

    cases = [("open loop, rtol 1e-6 (the paper's tolerance)", feedforward, 1e-6, 0.0, "DOP853")]
    if not QUICK:
        cases += [
            ("open loop, rtol 1e-10", feedforward, 1e-10, 0.0, "DOP853"),
            ("open loop, τ sampled every 0.02 s, linear", sampled, 1e-6, 0.0, "DOP853"),
            ("open loop, RK4 at a fixed 0.2 s", feedforward, None, 0.0, "RK4 0.2"),
            ("open loop, initial error 1e-3 rad", feedforward, 1e-6, 1e-3, "DOP853"),
        ]
    cases.append(("feedback (37), λ = 1", feedback, 1e-10 if not QUICK else 1e-8, 0.0, "DOP853"))
    res = results.setdefault("four_bar_forced", {})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(grid, np.rad2deg(np.array([desired(t)[0] for t in grid])), "k--", lw=2, label="org")
    for label, ctl, rtol, eps, method in cases:
        mm = MinimalModel(model, model.q0, tau=ctl)
        pm._q = np.array(model.q0)
        y0 = np.array([model.q0[0] + eps, 0.0])
        t, th, _ = integrate(mm, y0, t_end, ts, rtol, desired, method)
        t_out, err = first_exceed(t, th, desired)
        res[label] = {"diverges_at": t_out, "max_error": float(err.max())}
        print(f"  Fig. 8 {label}: leaves the path (> 0.01 rad) at {t_out} s; "
              f"max error {err.max():.2e} rad")  # fmt: skip
        ax.plot(t, np.rad2deg(th[0]), label=f"sim, {label}")
    first = res[cases[0][0]]["diverges_at"]
    key("four_bar_fig8_open_loop_leaves_at_rtol1e-6", first if first is not None else -1.0)
    key("four_bar_fig8_feedback_max_error", res[cases[-1][0]]["max_error"])
    ax.set(xlabel="t (s)", ylabel="θ1 (deg)", title="Fig. 8: forced simulation of the four-bar")
    ax.set_ylim(0, 120)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig8_four_bar_forced.png", dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------ five-bar
def five_bar(theta1, theta2, below=True):
    """The five-bar and a configuration at (θ1⁽¹⁾, θ1⁽²⁾), end-effector below (or above)."""
    model = ld.examples.five_bar(theta1, theta2)
    if not below:
        return model, np.array(model.q0)
    A1 = 0.6 * np.array([np.cos(theta1), np.sin(theta1)])
    A2 = np.array([1.2, 0.0]) + 0.7 * np.array([np.cos(theta2), np.sin(theta2)])
    P = circle_intersection(A1, 1.1, A2, 0.8, upper=False)
    a1, a2 = np.arctan2(*(P - A1)[::-1]), np.arctan2(*(P - A2)[::-1])
    return model, ld.assemble(model, [theta1, a1 - theta1, theta2, a2 - theta2])


def five_bar_motion(t):
    return cycloidal(t, T, [30 * DEG, 30 * DEG], [90 * DEG, 70.3 * DEG])


def five_bar_torques(out, results):
    """Figs. 10–11: the joint angles of both legs and τ1⁽¹⁾, τ1⁽²⁾ by IDA along eqs. (35),
    (38)–(39); θ3⁽²⁾ = [θ1 + θ2]⁽¹⁾ - [θ1 + θ2]⁽²⁾ (the angle between the distal links)."""
    plt = _plt()
    model, q0 = five_bar(30 * DEG, 30 * DEG)
    pm = PrescribedMotion(model, five_bar_motion, q_start=q0)
    ts = np.linspace(0.0, T, 201 if QUICK else 1001)
    tau, diff, Q = [], [], []
    for t in ts:
        q, v, qdd = pm.state(t)
        u = denoc.inverse(model, q, v, qdd)
        Q.append(q)
        tau.append(u)
        diff.append(np.abs(u - ld.inverse_dynamics(model, q, v, qdd).u).max())
    tau = np.array(tau)
    results["five_bar_torques"] = {
        "tau_start": tau[0].tolist(),
        "tau_end": tau[-1].tolist(),
        "tau_min": tau.min(axis=0).tolist(),
        "tau_max": tau.max(axis=0).tolist(),
        "max_difference_to_ld_inverse_dynamics": float(max(diff)),
    }
    key("five_bar_fig11_tau_start", tau[0].tolist())
    key("five_bar_fig11_tau_end", tau[-1].tolist())
    key("five_bar_fig11_ida_vs_inverse_dynamics", float(max(diff)))
    Q = np.rad2deg(np.array(Q))
    th3 = Q[:, 0] + Q[:, 1] - Q[:, 2] - Q[:, 3]
    key("five_bar_fig10_leg1_theta2_range_deg", [float(Q[:, 1].min()), float(Q[:, 1].max())])
    key("five_bar_fig10_leg2_theta2_range_deg", [float(Q[:, 3].min()), float(Q[:, 3].max())])
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(ts, Q[:, 0], label="θ1⁽¹⁾ (actuated)")
    ax[0].plot(ts, Q[:, 1], label="θ2⁽¹⁾")
    ax[1].plot(ts, Q[:, 2], label="θ1⁽²⁾ (actuated)")
    ax[1].plot(ts, Q[:, 3], label="θ2⁽²⁾")
    ax[1].plot(ts, th3, label="θ3⁽²⁾ = [θ1+θ2]⁽¹⁾ - [θ1+θ2]⁽²⁾")
    for a, leg in zip(ax, (1, 2), strict=True):
        title = f"Fig. 10({'ab'[leg - 1]}): joint angles, leg {leg}"
        a.set(xlabel="t (s)", ylabel="deg", title=title)
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig10_five_bar_angles.png", dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, tau[:, 0], label="τ1⁽¹⁾")
    ax.plot(ts, tau[:, 1], label="τ1⁽²⁾")
    ax.set(xlabel="t (s)", ylabel="N·m", title="Fig. 11: five-bar torques by DeNOC IDA")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig11_five_bar_torques.png", dpi=110)
    plt.close(fig)


def five_bar_free_fall(out, results, t_end=3.0):
    """Fig. 12: free fall from θ1⁽¹⁾ = 80°, θ1⁽²⁾ = 70° at rest, on both branches."""
    plt = _plt()
    ts = np.linspace(0.0, t_end, 3001)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for below, ls in ((True, "-"), (False, ":")):
        branch = "below" if below else "above"
        model, q0 = five_bar(80 * DEG, 70 * DEG, below)
        sol, stop = MinimalModel(model, q0).simulate(t_end, ts)
        ref = ld.simulate(model, q0, None, t_end, stabilization="partitioning", rtol=1e-10,
                          atol=1e-10, t_eval=ts)  # fmt: skip
        entry = {"reference_completed": ref.completed, "denoc_stopped_at": None}
        if stop:
            # the curve up to the stop; the comparison up to 90 % of it (Φ's condition grows
            # without bound at the stop, and the minimal equations with it)
            t_stop = stop["t"]
            mm = MinimalModel(model, q0)
            sol, _ = mm.simulate(float(ts[ts < t_stop][-1]), ts[ts < t_stop])
            n = mm.act.size
            q, v = mm.state(sol.y[:n, -1], sol.y[n:, -1])
            cond = float(np.linalg.cond(denoc.kinematics(model, q, v).Phi))
            entry.update(
                denoc_stopped_at=float(t_stop),
                error=stop["error"][:160],
                condition_of_Phi_at_last_sample=cond,
            )
        m = int(np.sum(sol.t <= 0.9 * (entry["denoc_stopped_at"] or t_end)))
        entry["max_theta_difference_to_reference_to_90pct_of_stop"] = float(
            np.abs(sol.y[:2, :m].T - ref.q[:m][:, model.actuated]).max()
        )
        results.setdefault("five_bar_free_fall", {})[f"end-effector {branch}"] = entry
        key(f"five_bar_fig12_denoc_stops_at_{branch}", entry["denoc_stopped_at"] or -1.0)
        for k, (name, c) in enumerate((("θ1⁽¹⁾", "C0"), ("θ1⁽²⁾", "C1"))):
            if below:
                ax.plot(ref.t, np.rad2deg(ref.q[:, model.actuated[k]]), "--", color=c,
                        label=f"{name}, full coordinates ({branch})")  # fmt: skip
            ax.plot(
                sol.t, np.rad2deg(sol.y[k]), ls, color=c, lw=2, label=f"{name}, DeNOC ({branch})"
            )
        if stop:
            ax.axvline(stop["t"], color="0.5", lw=0.8, ls=ls)
    ax.set(xlabel="t (s)", ylabel="deg", title="Fig. 12: five-bar free fall from 80°/70°")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig12_five_bar_free_fall.png", dpi=110)
    plt.close(fig)


def five_bar_forced(out, results):
    """Fig. 13: the IDA torques of Fig. 11 fed forward open loop in DeNOC's minimal
    coordinates (the paper's program stops at 3.2 s, "as it apparently hits a singular
    configuration"), and with the feedback (37), λ = 1, per leg."""
    plt = _plt()
    model, q0 = five_bar(30 * DEG, 30 * DEG)
    t_end = 8.0 if QUICK else T
    ts = np.arange(0.0, t_end + 1e-9, 0.02)

    def desired(t):
        return five_bar_motion(t)[0]

    pm = PrescribedMotion(model, five_bar_motion, q_start=q0)
    feedforward, feedback = _ida_controllers(model, pm, five_bar_motion)

    res = results.setdefault("five_bar_forced", {})
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for k in range(2):
        ax[k].plot(ts, np.rad2deg([desired(t)[k] for t in ts]), "k--", lw=2, label="org")
    for label, ctl, rtol in (("open loop", feedforward, 1e-6), ("feedback (37), λ = 1", feedback,
                                                                 1e-8)):  # fmt: skip
        mm = MinimalModel(model, q0, tau=ctl)
        pm._q = np.array(q0)
        t, th, stop = integrate(mm, np.array([30 * DEG, 30 * DEG, 0.0, 0.0]), t_end, ts, rtol,
                                desired)  # fmt: skip
        if t is None:
            res[label] = {"stopped": stop}
            print(f"  Fig. 13 {label}: {stop}")
            continue
        t_out, err = first_exceed(t, th, desired)
        ended = float(t[-1]) if t[-1] < t_end - 1e-9 else None
        res[label] = {"diverges_at": t_out, "max_error": float(err.max()), "ended_at": ended}
        print(f"  Fig. 13 {label}: leaves the path (> 0.01 rad) at {t_out} s; run ended at "
              f"{ended or t_end} s; max error {err.max():.2e} rad")  # fmt: skip
        for k in range(2):
            ax[k].plot(t, np.rad2deg(th[k]), label=f"sim, {label}")
    ol = res.get("open loop", {})
    key("five_bar_fig13_open_loop_leaves_at", ol.get("diverges_at") or -1.0)
    key("five_bar_fig13_feedback_max_error", res["feedback (37), λ = 1"]["max_error"])
    for k in range(2):
        ax[k].set(xlabel="t (s)", ylabel="deg", ylim=(0, 130),
                  title=f"Fig. 13({'ab'[k]}): forced simulation, θ1⁽{k + 1}⁾")  # fmt: skip
        ax[k].legend(fontsize=8)
        ax[k].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "denoc_fig13_five_bar_forced.png", dpi=100)
    plt.close(fig)


def main(argv=None):
    global QUICK
    args = parse(__doc__, argv)
    QUICK = args.quick
    out = args.out
    results = {}
    steps = (four_bar_inverse, four_bar_free_fall, four_bar_forced, five_bar_torques,
             five_bar_free_fall, five_bar_forced)  # fmt: skip
    for step in steps:
        t0 = time.perf_counter()
        step(out, results)
        print(f"{step.__name__}: {time.perf_counter() - t0:.1f} s", flush=True)
    (out / "denoc_paper.json").write_text(json.dumps(results, indent=2, default=float))
    print(f"figures and denoc_paper.json in {out}/")


if __name__ == "__main__":
    main()
