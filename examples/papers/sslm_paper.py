"""Reduced-order multi-closed-loop paper (SLM / SSLM): Tables 1–4, Figs. 1–9.

    python examples/papers/sslm_paper.py            # figures in docs/img/papers/, ~30 s
    python examples/papers/sslm_paper.py --quick    # no timing (Tables 3–4), for the tests

- Table 1 / Table 2: the catalog's carpet scraper and 3-RRR read back (lengths from the
  rods' inertia, 2|c| for a uniform rod; the platform's side from its vertices; masses).
- Figs. 3–6: the paper's cuts (joints 8, 9, 10; 6, 7), subsystems and J block patterns.
- Fig. 7 (carpet scraper) and Fig. 8 (3-RRR): (a) free simulation from Table 2 (θ̇1 =
  4.7124 rad/s; the 3-RRR at rest), SSLM against the dense augmented solve (our
  stand-in for RecurDyn), RK45 (ode45) at 1e-8, projection; (b–c) forced simulation with
  the inverse-dynamics torque (5 s, as Table 2's footnote), the deviation from the
  desired angles, replayed open loop and with a light PD (``benchmarks/bench_sslm.py``).
- Tables 3–4 (not with --quick): λ time SSLM / SLM per call, ``bench_sslm.per_call``.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Stage, key, parse, plt, save

import loopdyn as ld
from loopdyn import topology as T
from loopdyn.examples.paper_mechanisms import CARPET_SCRAPER_THETA1_DOT, THREE_RRR_THETA

# Table 1 (m, kg); the 3-RRR's platform #3 is a triangle of side 0.4 m
TABLE1 = {
    "carpet_scraper": {
        1: (0.038, 1.5), 2: (0.1152, 3), 3: (0.2304, 5), 4: (0.3346, 4.2), 5: (0.239, 3),
        6: (0.8365, 10.5), 7: (0.239, 3),
    },
    "three_rrr": {1: (0.4, 3), 2: (0.6, 4), 3: (0.4, 8), 4: (0.6, 4), 5: (0.6, 4), 6: (0.4, 3),
                  7: (0.4, 3)},
}  # fmt: skip
PAPER_T4 = {"carpet_scraper": 0.2205 / 0.3045, "three_rrr": 0.1575 / 0.2055}
T_RUN = 5.0  # Table 3 (b, c) and Table 2's footnote: 5 s


def link_lengths(model):
    """Lengths of the links (m): 2|c| of a uniform rod (c from the spatial inertia at the
    body origin, whose upper-right block is m [c]×); the 3-RRR platform's side."""
    out = {}
    for b in range(model.nbodies):
        I = model.inertia[b]
        m = I[3, 3]
        c = np.array([I[2, 4], I[0, 5], I[1, 3]]) / m
        out[b + 1] = 2.0 * np.linalg.norm(c)
    if model.name == "three_rrr":
        P = [ld.frame_placement(model, model.q0, f)[1] for f in ("link3", "link4", "link5")]
        out[3] = float(np.linalg.norm(P[1] - P[0]))
    return out


def tables(results):
    for name in ("carpet_scraper", "three_rrr"):
        model = ld.examples.get(name)
        L = link_lengths(model)
        print(f"Table 1, {name}: link  length (paper)  mass (paper)")
        dl = dm = 0.0
        for k, (lp, mp) in TABLE1[name].items():
            print(f"   #{k}  {L[k]:.4f} ({lp})  {model.masses[k - 1]:.2f} ({mp})")
            dl = max(dl, abs(L[k] - lp))
            dm = max(dm, abs(model.masses[k - 1] - mp))
        key(f"{name}_table1_length_error", dl)
        key(f"{name}_table1_mass_error", dm)
    rrr = ld.examples.three_rrr()
    key("three_rrr_table2_angle_error",
        float(np.abs(rrr.q0[rrr.actuated] - np.array(THREE_RRR_THETA)).max()))  # fmt: skip
    key("carpet_scraper_table2_rate", CARPET_SCRAPER_THETA1_DOT)
    # Figs. 3–6: the paper's cuts and subsystems (chosen automatically as well)
    for name, sizes in (("carpet_scraper", (1, 2, 4)), ("three_rrr", (5, 1, 1))):
        model = ld.examples.get(name)
        topo = T.topology(model)
        got = tuple(len(s.bodies) for s in topo.subsystems)
        auto = T.choose_cuts(T.mechanism_graph(model))
        print(f"{name}: subsystems {got} (paper {sizes}); automatic cuts {sorted(auto.cuts)}")
        print(topo.block_pattern())
        key(f"{name}_subsystem_sizes_match", got == sizes)


def desired(model, motion, ts):
    return np.array([motion(t)[0] for t in ts])


def figure(name, results, out):
    """Fig. 7 (carpet scraper) or Fig. 8 (3-RRR): free run; forced run and its deviation."""
    from bench_sslm import PD_GAINS, inverse_dynamics_torque

    model = ld.examples.get(name)
    act = model.actuated
    v0 = np.zeros(model.nv)
    if name == "carpet_scraper":
        v0[act] = CARPET_SCRAPER_THETA1_DOT
    v0 = ld.complete_velocity(model, model.q0, v0)
    ts = np.arange(0.0, T_RUN + 1e-9, 0.01)
    kw = dict(integrator="RK45", stabilization="projection", rtol=1e-8, atol=1e-8, t_eval=ts)
    free = {m: ld.simulate(model, model.q0, v0, T_RUN, method=m, **kw)
            for m in ("sslm", "augmented")}  # fmt: skip
    dq = float(np.abs(free["sslm"].q - free["augmented"].q).max())
    E = free["sslm"].energy
    key(f"{name}_free_sslm_vs_augmented", dq)
    key(f"{name}_free_energy_drift_rel", float(np.abs(E - E[0]).max() / np.abs(E).max()))
    # forced: the inverse-dynamics torque along the desired motion (cubic spline in t)
    spline, motion = inverse_dynamics_torque(model, T_RUN)
    kp, kd = PD_GAINS[name]
    vf = np.zeros(model.nv)
    vf[act] = motion(0.0)[1]
    vf = ld.complete_velocity(model, model.q0, vf)
    runs = {}
    for label, ctl in (
        ("open loop", lambda t, q, v: spline(t)),
        (f"PD {kp:g}/{kd:g}",
         lambda t, q, v: spline(t) + kp * (motion(t)[0] - q[act]) + kd * (motion(t)[1] - v[act])),
    ):  # fmt: skip
        tr = ld.simulate(model, model.q0, vf, T_RUN, tau=ctl, method="sslm", **kw)
        dev = np.abs(tr.q[:, act] - desired(model, motion, tr.t)).max(axis=1)
        runs[label] = (tr, dev)
    dev_ol, dev_pd = runs["open loop"][1], runs[f"PD {kp:g}/{kd:g}"][1]
    bad = np.flatnonzero(dev_ol > 1e-2)
    key(f"{name}_forced_open_loop_deviation_1s", float(dev_ol[ts <= 1.0].max()))
    key(f"{name}_forced_open_loop_exceeds_0.01rad_at",
        float(ts[bad[0]]) if bad.size else float("nan"))  # fmt: skip
    key(f"{name}_forced_pd_max_deviation", float(dev_pd.max()))
    # plot
    fig_no = 7 if name == "carpet_scraper" else 8
    p = plt()
    fig, ax = p.subplots(1, 3, figsize=(15, 4))
    tr = free["sslm"]
    for i in act:
        ax[0].plot(tr.t, tr.q[:, i], label=f"{model.joint_names[i]} SSLM")
        ax[0].plot(free["augmented"].t, free["augmented"].q[:, i], "k:", lw=1)
    ax[0].set(xlabel="t (s)", ylabel="rad", title=f"Fig. {fig_no}(a): free simulation "
              "(dotted: augmented)")  # fmt: skip
    ax[0].legend(fontsize=7)
    des = desired(model, motion, ts)
    for k, i in enumerate(act):
        ax[1].plot(ts, des[:, k], "k--", lw=1.5, label="desired" if k == 0 else None)
        for label, (trf, _) in runs.items():
            ax[1].plot(trf.t, trf.q[:, i], label=f"{model.joint_names[i]} {label}")
    lo, hi = des.min() - 0.5, des.max() + 0.5
    ax[1].set(xlabel="t (s)", ylabel="rad", ylim=(lo, hi),
              title=f"Fig. {fig_no}(b): forced simulation, actuated joints")  # fmt: skip
    ax[1].legend(fontsize=7)
    for label, (trf, dev) in runs.items():
        ax[2].semilogy(trf.t, np.maximum(dev, 1e-16), label=label)
    ax[2].set(xlabel="t (s)", ylabel="max |θ - θ_desired| (rad)",
              title=f"Fig. {fig_no}(c): deviation from the desired angles")  # fmt: skip
    ax[2].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    save(fig, out, f"sslm_fig{fig_no}_{name}.png")


def timings():
    """Table 4's λ ratio SSLM / SLM per call (bench_sslm.per_call; timing, not asserted)."""
    from bench_sslm import per_call

    for name in ("carpet_scraper", "three_rrr"):
        r = per_call(ld.examples.get(name), 5, 0.05)
        a, b = r["lam_ns"]
        print(f"Table 4, {name}: λ SLM {a:.0f} ns, SSLM {b:.0f} ns, ratio {b / a:.3f} "
              f"(paper {PAPER_T4[name]:.3f})")  # fmt: skip
        key(f"{name}_lambda_ratio", b / a)


def main(argv=None):
    args = parse(__doc__, argv)
    results = {}
    with Stage("Tables 1-2, Figs. 3-6"):
        tables(results)
    for name in ("carpet_scraper", "three_rrr"):
        with Stage(f"Fig. {7 if name == 'carpet_scraper' else 8}: {name}"):
            figure(name, results, args.out)
    if not args.quick:
        with Stage("Tables 3-4 (timing): see also benchmarks/bench_sslm.py"):
            timings()


if __name__ == "__main__":
    main()
