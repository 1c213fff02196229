"""Saha & Schiehlen, Sec. VI, reproduced with ``ld.simulate`` (and Anderson & Critchley's
drift comparison, Sec. 4.1 / Fig. 6).  Writes figures and a JSON of the numbers.

    python examples/saha_schiehlen.py              # figures in out/
    python examples/saha_schiehlen.py --out figs   # elsewhere

Four-bar (Sec. VI.A): θ1 30° → 90° in T = 20 s, cycloidal (eqs. 35–36)
  fig5_6_four_bar_inverse.png  joint angles along the trajectory and the actuated
                               torque τ1 from closed-loop inverse dynamics (Figs. 5a, 6)
  fig7_four_bar_free_fall.png  free fall from θ1 = 90° at rest, energy drift (Fig. 7)
  fig8_four_bar_forced.png     forced simulation with the inverse-dynamics torque
                               (open loop, Fig. 8) and with the feedback of eq. (37), λ = 1
Five-bar (Sec. VI.B): free fall from θ1⁽¹⁾ = 80°, θ1⁽²⁾ = 70° at rest
  fig12_five_bar_free_fall.png the paper's minimal coordinates (θ1⁽¹⁾, θ1⁽²⁾ fixed as
                               independent) stop at the singular configuration;
                               automatic re-partitioning and the full-coordinate
                               method pass through it with energy conserved (Fig. 12)
Drift (Anderson & Critchley Fig. 6): four-bar, RK4 with a fixed step of 0.01 s, 10 s
  drift_four_bar_rk4.png       max |Φ| for none, baumgarte, projection, partitioning
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

import loopdyn as ld
from loopdyn.analysis.motion import PrescribedMotion, cycloidal
from loopdyn.examples.planar import circle_intersection

T = 20.0
DEG = np.pi / 180.0


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def four_bar_motion(t):
    return cycloidal(t, T, 30 * DEG, 90 * DEG)


# ------------------------------------------------------------------ four-bar
def four_bar_inverse(out, results):
    """Figs. 5(a) and 6: joint angles and τ1 along the cycloidal trajectory."""
    plt = _plt()
    model = ld.examples.four_bar()
    pm = PrescribedMotion(model, four_bar_motion)
    ts = np.linspace(0.0, T, 1001)
    Q, tau, E, P = [], [], [], []
    for t in ts:
        q, v, qdd = pm.state(t)
        u = ld.inverse_dynamics(model, q, v, qdd).tau
        Q.append(q)
        tau.append(u[0])
        E.append(ld.total_energy(model, q, v))
        P.append(u @ v)
    Q, tau = np.array(Q), np.array(tau)
    from scipy.integrate import simpson

    work = float(simpson(P, x=ts))
    results["four_bar_inverse"] = {
        "tau1_start": float(tau[0]),
        "tau1_end": float(tau[-1]),
        "tau1_max": float(tau.max()),
        "tau1_min": float(tau.min()),
        "work_of_tau1": work,
        "energy_change": float(E[-1] - E[0]),
    }
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for i, name in enumerate(("θ1", "θ2", "θ3")):
        ax[0].plot(ts, np.rad2deg(Q[:, i]), label=name)
    ax[0].set(xlabel="t (s)", ylabel="angle (deg)", title="Fig. 5(a): joint angles")
    ax[0].legend()
    ax[1].plot(ts, tau)
    ax[1].set(xlabel="t (s)", ylabel="τ1 (N·m)", title="Fig. 6: actuated torque τ1")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig5_6_four_bar_inverse.png", dpi=110)
    plt.close(fig)


def four_bar_free_fall(out, results, t_end=20.0):
    """Fig. 7: free fall from θ1 = 90° at rest; energy conserved to the tolerance."""
    plt = _plt()
    model = ld.examples.four_bar(theta1=90 * DEG)
    runs = {}
    for rtol in (1e-6, 1e-8, 1e-10, 1e-12):
        traj = ld.simulate(model, t_end=t_end, rtol=rtol, atol=rtol, t_eval=2001)
        runs[rtol] = traj
        results.setdefault("four_bar_free_fall", {})[f"rtol={rtol:g}"] = {
            "steps": traj.stats["steps"],
            "wall_time": traj.stats["wall_time"],
            "max_energy_drift": float(np.abs(traj.energy_drift).max()),
            "energy": float(traj.energy[0]),
            "max_residual": traj.max_residual,
        }
    traj = runs[1e-10]
    traj.save(out / "four_bar_free_fall.npz")
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(traj.t, np.rad2deg(traj.q[:, 0]))
    ax[0].set(ylabel="θ1 (deg)", title="Fig. 7: four-bar free fall from θ1 = 90°")
    for rtol, tr in runs.items():
        ax[1].semilogy(tr.t, np.maximum(np.abs(tr.energy_drift), 1e-16), label=f"rtol = {rtol:g}")
    ax[1].set(xlabel="t (s)", ylabel="|E(t) - E(0)| (J)")
    ax[1].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig7_four_bar_free_fall.png", dpi=110)
    plt.close(fig)
    traj.animate(out / "four_bar_free_fall.gif", fps=20, speed=1.0)


def four_bar_forced(out, results):
    """Fig. 8: the inverse-dynamics torque fed forward, and the feedback law (37)."""
    plt = _plt()
    model = ld.examples.four_bar()
    fig, ax = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    ts = np.linspace(0.0, T, 401)
    ax[0].plot(ts, np.rad2deg([four_bar_motion(t)[0] for t in ts]), "k--", lw=2, label="org")
    res = results.setdefault("four_bar_forced", {})
    for rtol in (1e-6, 1e-8, 1e-10):
        ctl = PrescribedMotion(model, four_bar_motion).feedforward()
        traj = ld.simulate(model, t_end=T, tau=ctl, rtol=rtol, atol=rtol, t_eval=401)
        err = traj.q[:, 0] - np.array([four_bar_motion(t)[0] for t in traj.t])
        bad = np.flatnonzero(np.abs(err) > 1e-2)
        t_div = float(traj.t[bad[0]]) if bad.size else None
        res[f"open_loop_rtol={rtol:g}"] = {
            "diverges_at": t_div,
            "max_error": float(np.abs(err).max()),
        }
        ax[0].plot(traj.t, np.rad2deg(traj.q[:, 0]), label=f"sim, open loop, rtol {rtol:g}")
    ctl = PrescribedMotion(model, four_bar_motion).computed_torque(lam=1.0)
    traj = ld.simulate(model, t_end=T, tau=ctl, t_eval=401)
    err = traj.q[:, 0] - np.array([four_bar_motion(t)[0] for t in traj.t])
    res["feedback_lambda=1"] = {"max_error": float(np.abs(err).max())}
    ax[0].plot(traj.t, np.rad2deg(traj.q[:, 0]), ":", lw=2, label="sim, feedback eq. (37), λ = 1")
    ax[0].set(ylabel="θ1 (deg)", title="Fig. 8: forced simulation of the four-bar")
    ax[0].set_ylim(-200, 250)
    ax[0].legend(fontsize=8, loc="lower left")
    ax[1].semilogy(traj.t, np.maximum(np.abs(err), 1e-16))
    ax[1].set(xlabel="t (s)", ylabel="|θ1 - θ1,d| (rad)", title="tracking error with eq. (37)")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig8_four_bar_forced.png", dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ five-bar
def _angle(p_from, p_to):
    d = np.asarray(p_to) - np.asarray(p_from)
    return float(np.arctan2(d[1], d[0]))


def five_bar_lower(theta1=80 * DEG, theta2=70 * DEG):
    """The five-bar assembled with the end-effector below the elbows (the other branch)."""
    model = ld.examples.five_bar(theta1, theta2)
    A1 = 0.6 * np.array([np.cos(theta1), np.sin(theta1)])
    A2 = np.array([1.2, 0.0]) + 0.7 * np.array([np.cos(theta2), np.sin(theta2)])
    P = circle_intersection(A1, 1.1, A2, 0.8, upper=False)
    guess = [theta1, _angle(A1, P) - theta1, theta2, _angle(A2, P) - theta2]
    return model, ld.assemble(model, guess)


def singular_crossings(model, traj, dependent=(1, 3)):
    """Times where det J[:, dependent] changes sign (the fixed choice is singular)."""
    dets = np.array(
        [np.linalg.det(ld.constraint_jacobian(model, q)[:, list(dependent)]) for q in traj.q]
    )
    idx = np.flatnonzero(np.sign(dets[1:]) != np.sign(dets[:-1]))
    return [float(0.5 * (traj.t[i] + traj.t[i + 1])) for i in idx]


def five_bar_free_fall(out, results, t_end=3.0):
    """Fig. 12: free fall from 80°/70°: stop at the singularity or pass through it."""
    plt = _plt()
    res = results.setdefault("five_bar_free_fall", {})
    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for label, (model, q0), ls in (
        ("end-effector below", five_bar_lower(), "-"),
        ("end-effector above (catalog)", (ld.examples.five_bar(80 * DEG, 70 * DEG), None), "--"),
    ):
        entry = res.setdefault(label, {})
        ref = ld.simulate(
            model, q0, None, t_end, stabilization="partitioning", rtol=1e-10, atol=1e-10,
            t_eval=3001,
        )  # fmt: skip
        entry["auto_partitioning"] = {
            "completed": ref.completed,
            "repartitions": [r[0] for r in ref.stats["repartitions"]],
            "max_energy_drift": float(np.abs(ref.energy_drift).max()),
            "max_residual": ref.max_residual,
            "singular_crossings_of_actuated_choice": singular_crossings(model, ref),
        }
        aug = ld.simulate(model, q0, None, t_end, rtol=1e-10, atol=1e-10, t_eval=3001)
        entry["augmented_projection"] = {
            "completed": aug.completed,
            "max_energy_drift": float(np.abs(aug.energy_drift).max()),
            "max_residual": aug.max_residual,
            "max_q_difference_vs_partitioning": float(np.abs(aug.q - ref.q).max()),
        }
        try:
            ld.simulate(
                model, q0, None, t_end, stabilization="partitioning", independent=model.actuated,
                repartition=False, rtol=1e-10, atol=1e-10, t_eval=3001,
            )  # fmt: skip
            entry["fixed_actuated_coordinates"] = {"completed": True}
            stop = None
        except ld.SingularityError as e:
            stop = e.trajectory
            entry["fixed_actuated_coordinates"] = {
                "completed": False,
                "stopped_at": e.t,
                "condition": e.condition,
                "error": type(e).__name__,
            }
        for k, (name, c) in enumerate((("θ1⁽¹⁾", "C0"), ("θ1⁽²⁾", "C1"))):
            col = 0 if k == 0 else 2
            ax[0].plot(ref.t, np.rad2deg(ref.q[:, col]), ls, color=c, label=f"{name}, {label}")
            if stop is not None:
                ax[0].plot(stop.t[-1], np.rad2deg(stop.q[-1, col]), "x", color="k", ms=10)
        ax[1].semilogy(
            ref.t,
            [np.linalg.cond(ld.constraint_jacobian(model, q)[:, [1, 3]]) for q in ref.q],
            ls,
            label=f"cond J_d for (θ1⁽¹⁾, θ1⁽²⁾) independent, {label}",
        )
        ax[2].semilogy(
            ref.t, np.maximum(np.abs(ref.energy_drift), 1e-16), ls, label=f"{label}, partitioning"
        )
        if stop is not None:
            for a in ax:
                a.axvline(stop.t[-1], color="0.5", lw=0.8, ls=ls)
    ax[0].set(
        ylabel="angle (deg)",
        title="Fig. 12: five-bar free fall from 80°/70° (× = fixed choice stops)",
    )
    ax[0].legend(fontsize=7)
    ax[1].set(ylabel="condition number")
    ax[1].legend(fontsize=7)
    ax[2].set(xlabel="t (s)", ylabel="|E(t) - E(0)| (J)")
    ax[2].legend(fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig12_five_bar_free_fall.png", dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------- drift
def drift(out, results, t_end=10.0):
    """Anderson & Critchley Fig. 6: closure drift of a four-bar, RK4, h = 0.01 s."""
    plt = _plt()
    model = ld.examples.four_bar(theta1=90 * DEG)
    res = results.setdefault("drift_rk4_h0.01", {})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for stab in ("none", "baumgarte", "projection", "partitioning"):
        tr = ld.simulate(
            model, t_end=t_end, integrator="RK4", dt=0.01, stabilization=stab, t_eval=1001
        )
        rp = tr.residual_position
        res[stab] = {
            "max_position_residual": float(rp.max()),
            "at_1s": float(rp[100]),
            "at_5s": float(rp[500]),
            "at_10s": float(rp[-1]),
            "max_velocity_residual": float(tr.residual_velocity.max()),
            "max_energy_drift": float(np.abs(tr.energy_drift).max()),
            "wall_time": tr.stats["wall_time"],
        }
        ax.semilogy(tr.t, np.maximum(rp, 1e-17), label=stab)
    none = res["none"]
    t = np.linspace(0.5, t_end, 50)
    ax.semilogy(t, none["at_5s"] * (t / 5.0) ** 2, "k:", label="∝ t²")
    ax.set(
        xlabel="t (s)",
        ylabel="max |Φ(q)| (m)",
        title="Closure drift of the four-bar, RK4 h = 0.01 s (cf. Anderson & Critchley Fig. 6)",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "drift_four_bar_rk4.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="out", help="output folder (default out/)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for step in (four_bar_inverse, four_bar_free_fall, four_bar_forced, five_bar_free_fall, drift):
        t0 = time.perf_counter()
        step(out, results)
        print(f"{step.__name__}: {time.perf_counter() - t0:.1f} s")
    (out / "saha_schiehlen.json").write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps(results, indent=2, default=float))
    print(f"figures and saha_schiehlen.json in {out}/")


if __name__ == "__main__":
    main()
