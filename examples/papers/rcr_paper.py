"""Anderson & Critchley's experiments (Sec. 4) with ``method="rcr"``.

Run from the repository root::

    python examples/rcr_paper.py                 # four-bar over 1000 s, five-bar, ladders
    python examples/rcr_paper.py --t-end 100     # a shorter four-bar run

1. Figs. 5–6, the four-bar with fixed-step RK4 at 0.01 s and no stabilisation of the
   acceleration-level method: ``recursive_lambda`` (the "traditional O(n)" η + ζλ,
   every tree coordinate integrated) drifts off the constraint manifold, growing with
   time; ``rcr`` integrates the independent coordinate only (the loop embedded at the
   velocity level; ``stabilization="partitioning"`` recovers the dependent positions by
   a Newton solve seeded from the last step), so max |Φ| stays at the solver tolerance.
2. Figs. 7a/8, the redundant parallel five-bar (two actuated legs, 2 DOF): RCR's
   independent-coordinate trajectories next to the augmented (dense) solution.
3. Figs. 9–10, the three spatial ladders (``spatial_ladder``, ``hooke_ladder``,
   ``pendulum_ladder``): the independent coordinates (post 0's Hooke's joint) of
   ladders of L = 1, 2, 4, 8 loops under RCR, the pendulum ladders next to their
   equivalent 2-DOF pendulum, and Fig. 11's cost curve (``benchmarks/bench_rcr.py``
   measures it with the peers).
"""

import argparse
import time

import numpy as np

import loopdyn as ld


def four_bar_drift(t_end, points=None):
    """Fig. 6: max |Φ| over time for rcr (independent coordinates) and recursive_lambda
    (all coordinates, no stabilisation), RK4 at 0.01 s, at ``points`` output times
    (default: every 0.1 s, at most 1001; RK4's steps also end on the output times, so
    they must be multiples of 0.01 s apart).
    The drifting recursive_lambda run may leave the constraint manifold so far that the
    simulator's mobility monitor stops it (a ``SimulationSingularityError``): what it
    computed up to there is reported."""
    model = ld.examples.four_bar()
    points = points or int(min(1001, round(t_end / 0.1) + 1))
    out = {}
    for method, stab in (("rcr", "partitioning"), ("recursive_lambda", "none")):
        t0 = time.perf_counter()
        try:
            traj = ld.simulate(
                model, t_end=t_end, method=method, integrator="RK4", dt=0.01,
                stabilization=stab, t_eval=points,
            )  # fmt: skip
            note = "completed"
        except ld.SimulationSingularityError as e:
            traj = e.trajectory
            note = f"stopped at t = {e.t:.2f} s: {str(e).split(' (')[0]}"
        out[method] = traj
        res = traj.residual_position
        wall = time.perf_counter() - t0
        print(f"  {method:<17} ({stab:<12}) {wall:6.1f} s wall, {note}; "
              f"max |Φ| over {np.isfinite(res).sum()} outputs {np.nanmax(res):.2e}")  # fmt: skip
    a, b = out["rcr"], out["recursive_lambda"]
    print(f"  {'t (s)':>8} {'rcr max|Φ|':>14} {'rec_λ max|Φ|':>14}")
    for k in np.linspace(0, len(a.t) - 1, 11).astype(int):
        rb = b.residual_position[k] if k < len(b.t) else np.nan
        print(f"  {a.t[k]:8.1f} {a.residual_position[k]:14.3e} {rb:14.3e}")
    return out


def five_bar(t_end=1.0):
    """Fig. 8: the redundant five-bar's independent coordinates, rcr vs augmented."""
    model = ld.examples.five_bar()
    kw = dict(t_end=t_end, integrator="RK4", dt=0.005, t_eval=5)
    a = ld.simulate(model, method="rcr", stabilization="partitioning", **kw)
    b = ld.simulate(model, method="augmented", stabilization="projection", **kw)
    act = model.actuated
    print(f"  {'t (s)':>6}  rcr q[{act[0]}], q[{act[1]}]      augmented")
    for k in range(len(a.t)):
        print(f"  {a.t[k]:6.2f}  {a.q[k, act[0]]:+.9f} {a.q[k, act[1]]:+.9f}"
              f"   {b.q[k, act[0]]:+.9f} {b.q[k, act[1]]:+.9f}")  # fmt: skip
    print(f"  max |Δq| rcr vs augmented: {np.abs(a.q - b.q).max():.2e}")


def ladders(t_end=1.0):
    """Fig. 10: post (pendulum) 0's Hooke's-joint angles q1, q2 under RCR for the three
    Fig. 9 ladders of L = 1, 2, 4, 8 loops: ``spatial_ladder`` (n = 3L + 2, m = 3L) and
    ``hooke_ladder`` (n = 4L + 2, m = 4L) differ with L in mass and shape, so their
    trajectories differ; ``pendulum_ladder`` (n = 4L + 2, m = 4L) has its mass divided
    among the pendulums and moves like ``fig9_pendulum`` for every L, the paper's
    comparison with an equivalent 2-DOF spatial pendulum."""
    v0 = np.array([0.5, -0.3])
    kw = dict(t_end=t_end, t_eval=3, rtol=1e-10, atol=1e-10)
    ref = ld.simulate(ld.examples.fig9_pendulum(), np.array([0.3, -0.2]), v0, **kw)
    for factory in (ld.examples.spatial_ladder, ld.examples.hooke_ladder,
                    ld.examples.pendulum_ladder):  # fmt: skip
        for L in (1, 2, 4, 8):
            model = factory(L)
            q0 = np.array(model.q0)
            if factory is ld.examples.pendulum_ladder:  # tilted like the pendulum
                q0 = ld.assemble(model, np.tile([0.3, -0.2], model.nbodies))
            v = ld.complete_velocity(model, q0, np.concatenate([v0, np.zeros(model.nv - 2)]))
            traj = ld.simulate(model, q0, v, method="rcr", stabilization="partitioning", **kw)
            line = ", ".join(f"{t:.1f}: ({q[0]:+.4f}, {q[1]:+.4f})"
                             for t, q in zip(traj.t, traj.q, strict=True))  # fmt: skip
            extra = ""
            if factory is ld.examples.pendulum_ladder:
                extra = f"; vs fig9_pendulum {np.abs(traj.q[:, :2] - ref.q[:, :2]).max():.1e}"
            print(f"  {model.name:<18} n = {model.nv:3d}, m = {model.m:3d}; q1, q2 at t = "
                  f"{line}; max |Φ| {np.nanmax(traj.residual_position):.1e}{extra}")  # fmt: skip
    pairs = zip(ref.t, ref.q, strict=True)
    line = ", ".join(f"{t:.1f}: ({q[0]:+.4f}, {q[1]:+.4f})" for t, q in pairs)
    print(f"  {'fig9_pendulum':<18} n =   2, m =   0; q1, q2 at t = {line}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--t-end", type=float, default=1000.0, help="four-bar run (s)")
    args = ap.parse_args(argv)
    print(f"1. four-bar, RK4 dt = 0.01 s, {args.t_end:g} s (Figs. 5-6)")
    four_bar_drift(args.t_end)
    print("2. redundant five-bar (Figs. 7a, 8)")
    five_bar()
    print("3. spatial ladders (Figs. 9-10); cost curve: python benchmarks/bench_rcr.py")
    ladders()


if __name__ == "__main__":
    main()
