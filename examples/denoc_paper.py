"""Saha & Schiehlen, Sec. VI, with their own method: DeNOC inverse and forward dynamics.

    python examples/denoc_paper.py              # figures and denoc_paper.json in out/
    python examples/denoc_paper.py --out figs   # elsewhere

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
  fig8_four_bar_forced.png      the IDA torque fed forward, and the feedback law (37) (Fig. 8)
Five-bar (Sec. VI.B), the end-effector below the elbows (the branch on which DeNOC's
free fall stops near the paper's 1.4 s; above them it stops at 0.48 s):
  fig11_five_bar_torques.png    τ1⁽¹⁾, τ1⁽²⁾ by IDA along θ1⁽¹⁾ 30° → 90°, θ1⁽²⁾ 30° → 70.3°
                                in 20 s (eqs. 35, 38–39; Fig. 11)
  fig12_five_bar_free_fall.png  free fall from 80°/70° (Fig. 12): DeNOC in (θ1⁽¹⁾, θ1⁽²⁾) stops
                                where Φ of eq. (14a) turns singular; full coordinates go on
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

import loopdyn as ld
from loopdyn.analysis.motion import PrescribedMotion, cycloidal
from loopdyn.examples.planar import circle_intersection
from loopdyn.methods import denoc

T = 20.0
DEG = np.pi / 180.0


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
    ts = np.linspace(0.0, T, 1001)  # the paper's t̄ = 0.02 s
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
    fig.savefig(out / "fig5_four_bar_kinematics.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, tau)
    ax.set(xlabel="t (s)", ylabel="τ1 (N·m)", title="Fig. 6: τ1 by DeNOC inverse dynamics")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig6_four_bar_torque.png", dpi=110)
    plt.close(fig)


def four_bar_free_fall(out, results, t_end=20.0):
    """Fig. 7: free fall from θ1 = 90° at rest, minimal coordinates; ld.simulate as reference."""
    plt = _plt()
    model = ld.examples.four_bar(theta1=90 * DEG)
    ts = np.linspace(0.0, t_end, 2001)
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
    fig.savefig(out / "fig7_four_bar_free_fall.png", dpi=110)
    plt.close(fig)


def four_bar_forced(out, results):
    """Fig. 8: the IDA torque fed forward (open loop), and the feedback law (37), λ = 1."""
    plt = _plt()
    model = ld.examples.four_bar()
    ts = np.linspace(0.0, T, 401)
    desired = np.array([four_bar_motion(t)[0] for t in ts])
    pm = PrescribedMotion(model, four_bar_motion)

    def feedforward(t, q, v):
        qd, vd, ad = pm.state(t)
        out = np.zeros(model.nv)
        out[model.actuated] = denoc.inverse(model, qd, vd, ad)
        return out

    def feedback(t, q, v, lam=1.0):
        # eq. (37): τ = I τ_e + C θ̇ (gravity included), τ_e = θ̈_d - 2λ(θ̇ - θ̇_d) - λ²(θ - θ_d):
        # the DeNOC inverse dynamics at the actual state with θ̈ = τ_e
        th, dth, ddth = four_bar_motion(t)
        act = model.actuated
        a = np.zeros(model.nv)
        a[act] = ddth - 2 * lam * (v[act] - dth) - lam**2 * (q[act] - th)
        out = np.zeros(model.nv)
        out[act] = denoc.inverse(model, q, v, a)
        return out

    res = results.setdefault("four_bar_forced", {})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(ts, np.rad2deg(desired), "k--", lw=2, label="org")
    for label, ctl in (("open loop", feedforward), ("feedback (37), λ = 1", feedback)):
        mm = MinimalModel(model, model.q0, tau=ctl)
        sol, _ = mm.simulate(T, ts)
        err = sol.y[0] - desired[: sol.y.shape[1]]
        bad = np.flatnonzero(np.abs(err) > 1e-2)
        res[label] = {
            "diverges_at": float(sol.t[bad[0]]) if bad.size else None,
            "max_error": float(np.abs(err).max()),
        }
        ax.plot(sol.t, np.rad2deg(sol.y[0]), label=f"sim, {label}")
    ax.set(xlabel="t (s)", ylabel="θ1 (deg)", title="Fig. 8: forced simulation of the four-bar")
    ax.set_ylim(-200, 250)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig8_four_bar_forced.png", dpi=110)
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
    """Fig. 11: τ1⁽¹⁾ and τ1⁽²⁾ by IDA along eqs. (35), (38)–(39)."""
    plt = _plt()
    model, q0 = five_bar(30 * DEG, 30 * DEG)
    pm = PrescribedMotion(model, five_bar_motion, q_start=q0)
    ts = np.linspace(0.0, T, 1001)
    tau, diff = [], []
    for t in ts:
        q, v, qdd = pm.state(t)
        u = denoc.inverse(model, q, v, qdd)
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
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, tau[:, 0], label="τ1⁽¹⁾")
    ax.plot(ts, tau[:, 1], label="τ1⁽²⁾")
    ax.set(xlabel="t (s)", ylabel="N·m", title="Fig. 11: five-bar torques by DeNOC IDA")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig11_five_bar_torques.png", dpi=110)
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
    fig.savefig(out / "fig12_five_bar_free_fall.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="out", help="output folder (default out/)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    steps = (four_bar_inverse, four_bar_free_fall, four_bar_forced, five_bar_torques,
             five_bar_free_fall)  # fmt: skip
    for step in steps:
        t0 = time.perf_counter()
        step(out, results)
        print(f"{step.__name__}: {time.perf_counter() - t0:.1f} s")
    (out / "denoc_paper.json").write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps(results, indent=2, default=float))
    print(f"figures and denoc_paper.json in {out}/")


if __name__ == "__main__":
    main()
