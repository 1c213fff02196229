"""Jain's constraint embedding (aggregation): Sec. 5 examples and Sec. 7.3's cost of one large
aggregated body, with ``method="embedding"``.

    python examples/papers/jain_paper.py            # figure in docs/img/papers/ (~1 min)
    python examples/papers/jain_paper.py --quick    # smaller sizes, for the tests

The paper has no numerical experiment: Figs. 1–9 are graphs and mechanism sketches, the
equations of Secs. 5–8 were lost in our copy's extraction.  Reproduced here:

- Sec. 5.1 (Figs. 6–7), geared links: ``geared_chain(N)``, each motor and its driven link
  one aggregated body, X = [ratio; 1] constant (checked: X_𝒮 at two configurations).
- Secs. 5.2–5.3 (Figs. 8–9), the four-bar with a terminal and an internal cut:
  ``four_bar_cut(cut=...)``: one aggregated body of 3 links, k = 1, one base body (terminal)
  or two (internal: the forest of two sub-trees, E_𝒮 with two entries).
- Sec. 7.3: "the computational cost of the AB algorithm is no longer linear ... quadratic
  in the total degrees of freedom in the aggregation sub-graph, and cubic in the number of
  independent ones"; small loops "coupled in mesh-like structures" make one large
  aggregated body.  ``planar_ladder(L)``: L loops sharing posts → one aggregated body of
  2L + 1 links, r = 2L rows, k = 1; against ``four_bar_chain(N)``: N aggregated bodies of
  3 links.  Time per call (median, alternated) of ``embedding``, ``ld.aba`` and the
  multiplier/coordinate-reduction methods the paper advises for such meshes (``sslm``,
  ``rcr``), and an analytic operation count (``op_count``).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Stage, key, parse, plt, save
from rcr_paper import C_ABA

import loopdyn as ld


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    q = np.array(model.q0)
    return q, ld.complete_velocity(model, q, v), rng.normal(size=model.nv)


def exact(model):
    """max |q̈_embedding - q̈_augmented| / max |q̈| at one state; and the method used."""
    q, v, tau = state(model)
    a = ld.forward_dynamics(model, q, v, tau, method="embedding")
    b = ld.forward_dynamics(model, q, v, tau, method="augmented")
    return float(np.abs(a.qdd - b.qdd).max() / max(1.0, np.abs(b.qdd).max())), a.method


def section5():
    worst, native = 0.0, True
    # Sec. 5.1: geared links; X = [ratio; 1] constant: the coupled coordinates' velocities
    model = ld.examples.geared_chain(3)
    agg = ld.aggregation(model)
    print(agg)
    Xs = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        q = ld.assemble(model, rng.normal(size=model.nq))
        _, J, _ = ld.constraints(model, q, np.zeros(model.nv))
        Xs.append(np.linalg.svd(J)[2][J.shape[0] :].T)  # null space of J
    P = [X @ np.linalg.pinv(X) for X in Xs]  # projector onto the null space
    key("jain_5_1_X_constant", float(np.abs(P[0] - P[1]).max()))
    e, m = exact(model)
    worst, native = max(worst, e), native and m == "embedding"
    # Secs. 5.2-5.3: the four-bar, terminal and internal cuts
    for cut in ("terminal", "internal"):
        model = ld.examples.four_bar_cut(cut=cut)
        agg = ld.aggregation(model)
        print(agg)
        (S,) = agg.bodies
        key(f"jain_5_{2 if cut == 'terminal' else 3}_base_bodies", len(S.base_bodies))
        key(f"jain_5_{2 if cut == 'terminal' else 3}_members_k",
            [len(S.bodies), len(S.independent)])  # fmt: skip
        e, m = exact(model)
        worst, native = max(worst, e), native and m == "embedding"
    key("jain_5_embedding_vs_augmented", worst)
    key("jain_5_native", native)


def op_count(model):
    """Leading-order flops of one ``embedding`` call (analytic, from ``ld.aggregation``):
    C_ABA per ordinary degree of freedom; per aggregated body (B members, n_𝒮 coordinates,
    r rows, k independent): J_𝒮 12 r n_𝒮, its partition (LU with pivoting of the r × n_𝒮
    block) 2 r² n_𝒮, Y1 and X_𝒮 (2/3) r³ + 2 r² k, the member sweeps B (6k · 30 + 6k²),
    D⁻¹ k³/3 (docs/embedding.md, "Cost"), and the members' own articulated-body work,
    C_ABA per coordinate.  Dense sizes: an upper bound where the kernel skips zeros."""
    agg = ld.aggregation(model)
    inside = sum(len(S.coordinates) for S in agg.bodies)
    c = C_ABA * (model.nv - inside)
    for S in agg.bodies:
        B, ns, r, k = len(S.bodies), len(S.coordinates), len(S.rows), len(S.independent)
        c += 12 * r * ns + 2 * r * r * ns + 2 / 3 * r**3 + 2 * r * r * k
        c += B * (6 * k * 30 + 6 * k * k) + k**3 / 3 + C_ABA * ns
    return c


def section73(out, Ls, repeat, min_time):
    from bench_embedding import alternate

    fams = {
        "planar_ladder": ld.examples.planar_ladder,
        "four_bar_chain": ld.examples.four_bar_chain,
    }
    methods = ("embedding", "sslm", "rcr")
    res = {}
    for fam, make in fams.items():
        rows = []
        for L in Ls:
            model = make(L)
            q, v, tau = state(model)
            agg = ld.aggregation(model)
            big = max(len(S.bodies) for S in agg.bodies)
            ds = [model.create_data() for _ in range(len(methods) + 1)]
            for mth, d in zip(methods, ds, strict=False):
                r = ld.forward_dynamics(model, q, v, tau, method=mth, data=d)
                assert r.method == mth, (fam, L, mth, r.method)
            args = (model, q, v, tau)
            fns = [lambda a=args, m=m, d=d: ld.forward_dynamics(*a, method=m, data=d)
                   for m, d in zip(methods, ds, strict=False)]  # fmt: skip
            fns.append(lambda a=args, d=ds[-1]: ld.aba(*a, data=d))
            t = [x[1] for x in alternate(fns, repeat, min_time)]
            rows.append((L, model.nv, big, *t, op_count(model), C_ABA * model.nv))
            print(f"  {fam}({L}): n = {model.nv}, largest aggregated body {big} links; "
                  + ", ".join(f"{m} {x:.1f}" for m, x in zip((*methods, "aba"), t, strict=True))
                  + f" µs; count {rows[-1][-2] / 1e3:.1f} kflop", flush=True)  # fmt: skip
        R = np.array(rows, float)
        sel = R[:, 0] >= 4
        for col, name in ((3, "time_embedding"), (4, "time_sslm"), (5, "time_rcr"),
                          (6, "time_aba"), (7, "count_embedding")):  # fmt: skip
            s = float(np.polyfit(np.log(R[sel, 1]), np.log(R[sel, col]), 1)[0])
            key(f"jain_7_3_{fam}_slope_{name}", s)
        res[fam] = R
    P = plt()
    fig, ax = P.subplots(1, 2, figsize=(12, 4.2))
    for fam, R in res.items():
        ls = "-" if fam == "planar_ladder" else "--"
        for col, name in ((3, "embedding"), (4, "sslm"), (5, "rcr"), (6, "ld.aba")):
            ax[0].loglog(R[:, 1], R[:, col], ls, marker="o", ms=3, label=f"{fam}: {name}")
        ax[1].loglog(R[:, 1], R[:, 7], ls, marker="o", ms=3, label=f"{fam}: embedding")
        ax[1].loglog(R[:, 1], R[:, 8], ls, color="0.6", label=f"{fam}: ABA, C_ABA n")
    title = "Sec. 7.3: one growing aggregate (ladder) vs many small ones (chain)"
    ax[0].set(xlabel="n (coordinates)", ylabel="µs per call (median)", title=title)
    ax[1].set(xlabel="n (coordinates)", ylabel="flops per call (analytic)",
              title="Sec. 7.3: operation count of embedding")  # fmt: skip
    for a in ax:
        a.legend(fontsize=6)
        a.grid(alpha=0.3, which="both")
    save(fig, out, "jain_sec7_3_aggregate_cost.png")


def main(argv=None):
    args = parse(__doc__, argv)
    with Stage("Sec. 5: geared links, four-bar terminal / internal cut"):
        section5()
    with Stage("Sec. 7.3: cost of one large aggregated body"):
        Ls = (1, 2, 4, 8, 16, 32) if args.quick else (1, 2, 4, 8, 16, 32, 64, 128)
        section73(args.out, Ls, 3 if args.quick else 7, 0.01 if args.quick else 0.05)


if __name__ == "__main__":
    main()
