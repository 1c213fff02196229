"""Anderson & Critchley's experiments (Sec. 4) with ``method="rcr"``: Figs. 5–11.

    python examples/papers/rcr_paper.py             # figures in docs/img/papers/ (~3 min)
    python examples/papers/rcr_paper.py --quick     # shorter runs, small ladders (tests)
    python examples/papers/rcr_paper.py --t-end 1000   # the 1000-s drift run of docs/rcr.md

1. Figs. 5–6, the four-bar, fixed-step RK4 at 0.01 s, initial conditions rounded to nine
   decimals (the paper's), no stabilisation: ``rcr`` as the paper runs it — every
   coordinate integrated, the dependent speeds from the independent one by the velocity
   constraint (VC: J v = 0 at every stage), no position correction — against
   ``recursive_lambda`` (the "traditional O(n)", acceleration-level constraints only, AC),
   and ``rcr`` with loopdyn's ``stabilization="partitioning"`` (positions by Newton).
   Fig. 5: the overlapping θ1; Fig. 6: max |Φ| over time (VC: linear drift; AC: ~t²).
2. Figs. 7a/8, a redundant multi-loop parallel five-bar (``redundant_five_bar`` below:
   Saha & Schiehlen's five-bar plus a third leg meeting the end-effector, 3 legs, 2 loops,
   2 DOF; the paper gives no dimensions): RCR's independent coordinates (leg 1's two
   joints, "assigned consecutively") in free fall, against the dense ``augmented``
   solve and, pointwise, Pinocchio's ``constraintDynamics`` (our stand-ins for AUTOLEV).
3. Figs. 9–10, the Fig. 9 ladders (``hooke_ladder``, ``pendulum_ladder``: n = 4L + 2,
   m = 4L): the pendulum ladders of L = 1, 2, 4, 8 follow ``fig9_pendulum``, the
   equivalent 2-DOF spatial pendulum.
4. Fig. 11 on ``hooke_ladder(L)`` (the paper's n = 4L + 2, m = 4L): time per call of
   ``rcr``, ``ld.aba`` on the open tree (constraints ignored) and ``recursive_lambda``
   (the traditional O(n)), next to an analytic operation count (``op_counts``).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Stage, key, parse, plt, save

import loopdyn as ld
from loopdyn.examples.planar import G_PLANAR
from loopdyn.examples.shapes import rod
from loopdyn.model import ModelBuilder, Revolute

# flops per degree of freedom of the articulated-body algorithm (Featherstone, RBDA
# Table 10.x: 224n - 165 multiplications + 205n - 197 additions for revolute chains)
C_ABA = 429.0
# flops per degree of freedom of one unit-force sweep of the traditional O(n) method
# (propagate a test force inward through the articulated inertias, ~66, and the
# resulting accelerations outward, ~60: Anderson & Critchley eqs. (13)–(32))
C_ZETA = 126.0


# ------------------------------------------------------------------ 1. Figs. 5–6
def rk4_vc(model, q0, u0, t_end, dt=0.01, every=10):
    """RCR as the paper integrates it: every coordinate q and the independent speed u;
    at each stage v = the velocity with v[ind] = u and J(q) v = 0 (the loop embedded at
    velocity level), u̇ = q̈[ind] from ``method="rcr"``; no position correction.
    Returns (t, q, max |Φ|, number of calls that fell back to another method)."""
    ind = model.actuated
    fallbacks = [0]

    def f(q, u):
        g = np.zeros(model.nv)
        g[ind] = u
        v = ld.complete_velocity(model, q, g)
        res = ld.forward_dynamics(model, q, v, np.zeros(model.nv), method="rcr")
        fallbacks[0] += res.method != "rcr"
        return v, res.qdd[ind]

    q, u, _t = np.array(q0, float), np.array(u0, float), 0.0
    T, Q, R = [0.0], [q.copy()], [np.abs(ld.constraints(model, q)[0]).max()]
    n = round(t_end / dt)
    for s in range(1, n + 1):
        k1q, k1u = f(q, u)
        k2q, k2u = f(q + dt / 2 * k1q, u + dt / 2 * k1u)
        k3q, k3u = f(q + dt / 2 * k2q, u + dt / 2 * k2u)
        k4q, k4u = f(q + dt * k3q, u + dt * k3u)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        u = u + dt / 6 * (k1u + 2 * k2u + 2 * k3u + k4u)
        if s % every == 0:
            T.append(s * dt)
            Q.append(q.copy())
            R.append(np.abs(ld.constraints(model, q)[0]).max())
    return np.array(T), np.array(Q), np.array(R), fallbacks[0]


def four_bar(out, t_end):
    """Figs. 5–6 (see the module docstring)."""
    model = ld.examples.four_bar()
    q0 = np.round(np.array(model.q0), 9)  # "accurate to nine decimal places"
    v0 = np.zeros(model.nv)
    pts = round(t_end / 0.1) + 1
    tv, qv, rv, fb = rk4_vc(model, q0, v0[model.actuated], t_end)
    kw = dict(t_end=t_end, integrator="RK4", dt=0.01, t_eval=pts)
    runs = {"RCR, velocity-level (VC), no correction": (tv, qv, rv)}
    try:
        a = ld.simulate(model, q0, v0, method="recursive_lambda", stabilization="none", **kw)
    except ld.SimulationSingularityError as e:
        a = e.trajectory
    runs["traditional O(n) (AC), recursive_lambda"] = (a.t, a.q, a.residual_position)
    p = ld.simulate(model, q0, v0, method="rcr", stabilization="partitioning", **kw)
    runs["RCR + partitioning (loopdyn's default)"] = (p.t, p.q, p.residual_position)
    key("rcr_fig6_vc_fallbacks", fb)
    for label, (t, _q, r) in runs.items():
        i, j = len(t) // 4, len(t) // 2
        print(f"  {label}: max |Φ| at t = {t[i]:.0f}, {t[j]:.0f}, {t[-1]:.0f} s: "
              f"{r[i]:.2e}, {r[j]:.2e}, {r[-1]:.2e}")  # fmt: skip
    # drift exponents: log-log slope of max |Φ| over the second half of the run
    for tag, label in (("vc", "RCR, velocity-level (VC), no correction"),
                       ("ac", "traditional O(n) (AC), recursive_lambda")):  # fmt: skip
        t, _, r = runs[label]
        sel = (t >= t[-1] / 4) & (r > 0)
        slope = np.polyfit(np.log(t[sel]), np.log(r[sel]), 1)[0]
        key(f"rcr_fig6_{tag}_drift_exponent", float(slope))
        key(f"rcr_fig6_{tag}_drift_at_end", float(r[-1]))
    key("rcr_fig6_partitioning_max_residual", float(np.nanmax(p.residual_position)))
    early = tv <= 10.0  # Fig. 5's window: AC's drift later separates the curves
    dq = np.abs(qv[early, 0] - np.interp(tv[early], a.t, a.q[:, 0])).max()
    key("rcr_fig5_theta1_vc_vs_ac", float(dq))
    P = plt()
    fig, ax = P.subplots(1, 2, figsize=(12, 4))
    for (label, (t, q, r)), ls in zip(runs.items(), ("-", "--", ":"), strict=True):
        ax[0].plot(t, q[:, 0], ls, label=label)
        ax[1].loglog(t[1:], np.maximum(r[1:], 1e-17), ls, label=label)
    ax[0].set(xlabel="t (s)", ylabel="θ1 (rad)", xlim=(0, min(t_end, 10.0)),
              title="Fig. 5: four-bar, overlapping trajectories (first 10 s)")  # fmt: skip
    ax[1].set(xlabel="t (s)", ylabel="max |Φ| (m)", title="Fig. 6: constraint drift, RK4 0.01 s")
    for a_ in ax:
        a_.legend(fontsize=7)
        a_.grid(alpha=0.3)
    save(fig, out, "rcr_fig5_6_four_bar.png")


# ------------------------------------------------------------------ 2. Figs. 7a/8
def redundant_five_bar():
    """A redundant multi-loop planar parallel five-bar (Fig. 7a; the paper gives no
    dimensions, this is ours): Saha & Schiehlen's five-bar (leg 1 at the origin, 0.6 m
    3 kg + 1.1 m 1.6 kg; leg 2 at (1.2, 0), 0.7 m 2 kg + 0.8 m 1.1 kg) plus a third leg
    from (0.6, -0.4) (0.5 m, 2 kg, then a distal rod of 1.2 kg reaching the end-effector
    in the reference pose), the three distal tips meeting at the end-effector E: closures
    leg1–leg2 and leg1–leg3 (planar revolute, 2 rows each): 6 bodies, n = 6, m = 4, 2 DOF,
    two loops sharing leg 1.  Legs 1 and 2 actuated; q0: legs 1, 2 at 30°, E above.
    """
    base = ld.examples.five_bar()
    q5 = np.array(base.q0)
    # end-effector in the reference pose
    A1 = 0.6 * np.array([np.cos(q5[0]), np.sin(q5[0])])
    E = A1 + 1.1 * np.array([np.cos(q5[0] + q5[1]), np.sin(q5[0] + q5[1])])
    B3, a3, th3 = np.array([0.6, -0.4]), 0.5, np.deg2rad(20.0)
    A3 = B3 + a3 * np.array([np.cos(th3), np.sin(th3)])
    d3 = float(np.linalg.norm(E - A3))
    b = ModelBuilder("redundant_five_bar", gravity=G_PLANAR, planar=True)
    b.add_body("leg1_proximal", "ground", Revolute("z"), actuated=True, **rod(3.0, 0.6))
    b.add_body("leg1_distal", "leg1_proximal", Revolute("z"), xyz=(0.6, 0, 0), **rod(1.6, 1.1))
    b.add_body("leg2_proximal", "ground", Revolute("z"), xyz=(1.2, 0, 0), actuated=True,
               **rod(2.0, 0.7))  # fmt: skip
    b.add_body("leg2_distal", "leg2_proximal", Revolute("z"), xyz=(0.7, 0, 0), **rod(1.1, 0.8))
    b.add_body("leg3_proximal", "ground", Revolute("z"), xyz=(*B3, 0), **rod(2.0, a3))
    b.add_body("leg3_distal", "leg3_proximal", Revolute("z"), xyz=(a3, 0, 0), **rod(1.2, d3))
    b.add_frame("E_on_leg1", "leg1_distal", xyz=(1.1, 0, 0))
    b.add_frame("E_on_leg2", "leg2_distal", xyz=(0.8, 0, 0))
    b.add_frame("E_on_leg3", "leg3_distal", xyz=(d3, 0, 0))
    b.add_closure("E_12", "E_on_leg1", "E_on_leg2", "revolute")
    b.add_closure("E_13", "E_on_leg1", "E_on_leg3", "revolute")
    model = b.build()
    a = np.arctan2(*(E - A3)[::-1])
    model.q0 = ld.assemble(model, np.r_[q5, th3, a - th3])
    return model


def five_bar(out, t_end):
    """Figs. 7a/8: free fall of the redundant five-bar, RCR vs augmented vs Pinocchio."""
    from timing import pinocchio_call

    model = redundant_five_bar()
    # DOP853 at 1e-11 (the free fall is fast: RK4 at 0.005 s leaves 1e-3 rad between any
    # two formulations after 1 s, an integration error, not a dynamics one)
    kw = dict(t_end=t_end, rtol=1e-11, atol=1e-11, t_eval=round(t_end / 0.01) + 1)
    a = ld.simulate(model, method="rcr", stabilization="partitioning", **kw)
    print(
        f"  partitioning changed the independent coordinates at t = "
        f"{[round(t, 3) for t, _ in a.stats['repartitions']]} (near leg 1's singular poses)"
    )
    b = ld.simulate(model, method="augmented", stabilization="projection", **kw)
    d = model.create_data()
    plan = __import__("loopdyn.methods.rcr", fromlist=["plan_for"])
    ind = None
    fallbacks, pin_err = 0, 0.0
    for k in range(0, len(a.t), max(1, len(a.t) // 20)):
        q, v = a.q[k], a.v[k]
        res = ld.forward_dynamics(model, q, v, np.zeros(model.nv), method="rcr", data=d)
        fallbacks += res.method != "rcr"
        call, ex = pinocchio_call(model, q, v, np.zeros(model.nv))
        if call is not None:
            pin_err = max(pin_err, float(np.abs(ex.v_from(call()) - res.qdd).max()))
    ind = plan.plan_for(model, d).blocks
    indep = sorted({c for blk in ind for c in blk[3]})
    print(f"  n = {model.nv}, m = {model.m}; RCR's loops and independent coordinates: "
          f"{[(blk[1], blk[3], blk[4]) for blk in ind]}")  # fmt: skip
    key("rcr_fig8_n_m", [model.nv, model.m])
    key("rcr_fig8_independent", indep)
    key("rcr_fig8_fallbacks", fallbacks)
    key("rcr_fig8_rcr_vs_augmented", float(np.abs(a.q - b.q).max()))
    key("rcr_fig8_rcr_vs_pinocchio_qdd", pin_err)
    P = plt()
    fig, ax = P.subplots(figsize=(7, 4))
    for c in indep:
        ax.plot(a.t, a.q[:, c], label=f"RCR q[{c}] ({model.joint_names[c]})")
        ax.plot(b.t, b.q[:, c], "k:", lw=1.5)
    title = "Fig. 8: redundant five-bar, independent coordinates (dotted: augmented)"
    ax.set(xlabel="t (s)", ylabel="rad", title=title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, out, "rcr_fig8_redundant_five_bar.png")


# ------------------------------------------------------------------ 3. Fig. 10
def ladders(out, Ls, t_end=1.0):
    """Fig. 10: pendulum ladders (n = 4L + 2, m = 4L) under RCR against fig9_pendulum."""
    v0 = np.array([0.5, -0.3])
    kw = dict(t_end=t_end, t_eval=round(t_end / 0.02) + 1, rtol=1e-10, atol=1e-10)
    ref = ld.simulate(ld.examples.fig9_pendulum(), np.array([0.3, -0.2]), v0, **kw)
    P = plt()
    fig, ax = P.subplots(figsize=(7, 4))
    ax.plot(ref.t, ref.q[:, 0], "k-", lw=3, alpha=0.4, label="2-DOF pendulum q1")
    ax.plot(ref.t, ref.q[:, 1], "k-", lw=3, alpha=0.4, label="2-DOF pendulum q2")
    worst = 0.0
    for L in Ls:
        model = ld.examples.pendulum_ladder(L)
        q0 = ld.assemble(model, np.tile([0.3, -0.2], model.nbodies))
        v = ld.complete_velocity(model, q0, np.concatenate([v0, np.zeros(model.nv - 2)]))
        tr = ld.simulate(model, q0, v, method="rcr", stabilization="partitioning", **kw)
        err = float(np.abs(tr.q[:, :2] - ref.q[:, :2]).max())
        worst = max(worst, err)
        print(f"  pendulum_ladder({L}): n = {model.nv}, m = {model.m}; max |q1,2 - pendulum| "
              f"{err:.1e}")  # fmt: skip
        ax.plot(tr.t, tr.q[:, 0], "--", label=f"L = {L} (n = {model.nv}) q1")
        ax.plot(tr.t, tr.q[:, 1], ":", label=f"L = {L} q2")
    key("rcr_fig10_ladders_vs_pendulum", worst)
    ax.set(xlabel="t (s)", ylabel="rad", title="Fig. 10: ladders' independent coordinates")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    save(fig, out, "rcr_fig10_ladders.png")


# ------------------------------------------------------------------ 4. Fig. 11
def op_counts(model):
    """Leading-order flop counts of one forward-dynamics call (analytic, from the sizes
    of the model and of RCR's plan, not instrumented):

    - ``aba``: C_ABA · n (no constraints).
    - ``rcr``: C_ABA · n plus, per loop block i (m_i rows, p_i path coordinates, k
      independent coordinates of its aggregated body): J_i 12 m_i p_i, LU of Y1
      (2/3) m_i³, X and ζ (k + 1)(2 m_i (p_i - m_i) + 2 m_i²), multipliers and the
      acceptance check 2 m_i² + 4 m_i p_i; per member body of an aggregated body the
      H, P H, D, W, u sweeps 6k (6 + 12 + 12) + 6k², and D⁻¹ k³/3 per aggregated body.
    - ``recursive_lambda``: C_ABA · n for η, C_ZETA · n per constraint row for ζ (n × m),
      J ζ 2 m² p̄ (J's rows have p̄ non-zeros), the m × m Cholesky m³/3 and its
      substitutions 2 m², q̈ = η + ζ λ 2 n m.
    """
    from loopdyn.methods import rcr as R

    n, m = model.nv, model.m
    plan = R.RcrPlan(model, np.arange(m))
    aba = C_ABA * n
    loops = 0.0
    pbar = []
    for agg, _names, path, _indep, dep in plan.blocks:
        mi, p = len(dep), len(path)
        k = int(plan.agg[agg, 5])
        loops += 12 * mi * p + 2 / 3 * mi**3 + (k + 1) * (2 * mi * (p - mi) + 2 * mi**2)
        loops += 2 * mi**2 + 4 * mi * p
        pbar += [p] * mi
    for s in range(plan.agg.shape[0]):
        B, k = int(plan.agg[s, 2]), int(plan.agg[s, 5])
        loops += B * (6 * k * 30 + 6 * k * k) + k**3 / 3
    pb = float(np.mean(pbar)) if pbar else 0.0
    rl = aba + C_ZETA * n * m + 2 * m * m * pb + m**3 / 3 + 2 * m * m + 2 * n * m
    return {"aba": aba, "rcr": aba + loops, "recursive_lambda": rl}


def fig11(out, Ls, rl_max, repeat, min_time):
    """Fig. 11 on hooke_ladder(L): time per call and the operation counts."""
    from bench_embedding import alternate

    rows = []
    print(f"  {'L':>4} {'n':>5} {'m':>5} {'rcr µs':>9} {'aba µs':>9} {'rec_λ µs':>10} "
          f"{'rcr kflop':>10} {'aba kflop':>10} {'rec_λ kflop':>12}")  # fmt: skip
    for L in Ls:
        model = ld.examples.hooke_ladder(L)
        assert model.nv == 4 * L + 2 and model.m == 4 * L
        q = np.array(model.q0)
        v = ld.complete_velocity(model, q, np.r_[0.5, -0.3, np.zeros(model.nv - 2)])
        tau = np.zeros(model.nv)
        d1, d2, d3 = model.create_data(), model.create_data(), model.create_data()
        res = ld.forward_dynamics(model, q, v, tau, method="rcr", data=d1)
        assert res.method == "rcr", res.method
        args = (model, q, v, tau)
        fns = [lambda a=args, d=d1: ld.forward_dynamics(*a, method="rcr", data=d),
               lambda a=args, d=d2: ld.aba(*a, data=d)]  # fmt: skip
        if L <= rl_max:
            ref = ld.forward_dynamics(model, q, v, tau, method="recursive_lambda", data=d3)
            assert np.abs(ref.qdd - res.qdd).max() < 1e-8 * max(1, np.abs(ref.qdd).max())
            fns.append(lambda a=args, d=d3: ld.forward_dynamics(*a, method="recursive_lambda",
                                                                data=d))  # fmt: skip
        t = [x[1] for x in alternate(fns, repeat, min_time)]  # medians
        c = op_counts(model)
        rows.append((L, model.nv, model.m, *t, *([np.nan] * (3 - len(t))), c["rcr"], c["aba"],
                     c["recursive_lambda"]))  # fmt: skip
        r = rows[-1]
        print(f"  {L:>4} {r[1]:>5} {r[2]:>5} {r[3]:>9.1f} {r[4]:>9.1f} {r[5]:>10.1f} "
              f"{r[6] / 1e3:>10.1f} {r[7] / 1e3:>10.1f} {r[8] / 1e3:>12.1f}")  # fmt: skip
    R_ = np.array(rows, float)
    big = R_[:, 0] >= 8

    def slope(col, sel=big):
        s = sel & np.isfinite(R_[:, col])
        if s.sum() < 2:
            return np.nan
        return float(np.polyfit(np.log(R_[s, 1]), np.log(R_[s, col]), 1)[0])

    key("rcr_fig11_n_is_4L_plus_2", bool(np.all(R_[:, 1] == 4 * R_[:, 0] + 2)))
    key("rcr_fig11_count_slope_rcr", slope(6))
    key("rcr_fig11_count_slope_recursive_lambda", slope(8))
    key("rcr_fig11_count_ratio_rcr_over_aba_largest", float(R_[-1, 6] / R_[-1, 7]))
    key("rcr_fig11_time_slope_rcr", slope(3))  # measured: information, not checked
    key("rcr_fig11_time_slope_recursive_lambda", slope(5))
    key("rcr_fig11_time_ratio_rcr_over_aba_largest", float(R_[-1, 3] / R_[-1, 4]))
    P = plt()
    fig, ax = P.subplots(1, 2, figsize=(12, 4.2))
    for col, label, st in ((4, "no constraints (ld.aba, open tree)", "o-"),
                           (5, "traditional O(n) (recursive_lambda)", "s-"),
                           (3, "RCR", "^-")):  # fmt: skip
        ax[0].loglog(R_[:, 1], R_[:, col], st, label=label)
    for col, label, st in ((7, "no constraints: C_ABA n", "o-"),
                           (8, "traditional O(n): + C_ζ n m + 2m²p̄ + m³/3", "s-"),
                           (6, "RCR: + per-loop and aggregated-body terms", "^-")):  # fmt: skip
        ax[1].loglog(R_[:, 1], R_[:, col], st, label=label)
    ax[0].set(xlabel="n = 4L + 2", ylabel="µs per call (median)",
              title="Fig. 11: measured, hooke_ladder(L)")  # fmt: skip
    ax[1].set(xlabel="n = 4L + 2", ylabel="flops per call (analytic)",
              title="Fig. 11: operation counts")  # fmt: skip
    for a_ in ax:
        a_.legend(fontsize=7)
        a_.grid(alpha=0.3, which="both")
    save(fig, out, "rcr_fig11_hooke_ladder.png")


def main(argv=None):
    def extra(ap):
        ap.add_argument("--t-end", type=float, default=None, help="four-bar run (s)")

    args = parse(__doc__, argv, extra)
    q = args.quick
    with Stage("1. four-bar, Figs. 5-6"):
        four_bar(args.out, args.t_end or (10.0 if q else 200.0))
    with Stage("2. redundant five-bar, Figs. 7a/8"):
        five_bar(args.out, 1.0 if q else 3.0)
    with Stage("3. ladders, Figs. 9-10"):
        ladders(args.out, (1, 2, 4) if q else (1, 2, 4, 8))
    with Stage("4. Fig. 11, hooke_ladder(L)"):
        Ls = (2, 4, 8, 16, 32) if q else (2, 4, 8, 16, 32, 64, 128, 256)
        fig11(args.out, Ls, 32 if q else 128, 3 if q else 7, 0.01 if q else 0.05)


if __name__ == "__main__":
    main()
