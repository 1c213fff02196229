"""Closed-loop forward dynamics: loopdyn against Pinocchio and MuJoCo, in one process.

Run from the repository root::

    python benchmarks/bench_closed.py            # four-bar table + ladder scaling
    python benchmarks/bench_closed.py --quick    # fewer repeats, L up to 64

1. Four-bar: per-call time and accuracy of ``ld.forward_dynamics`` (augmented,
   slm) next to ``pin.constraintDynamics`` (ProximalSettings accuracy 1e-12,
   mu 1e-8, up to 20 iterations) and ``mujoco.mj_forward`` (soft constraints,
   default and stiff ``solref``).  Accuracy: max |q̈ - q̈_exact| / max |q̈_exact|
   where q̈_exact is the augmented solution verified by J q̈ = γ.
2. ``spatial_ladder(L)``, L = 1 … 128: per-call time of augmented, slm and
   Pinocchio, with log-log slopes over L >= 8 (the dense methods' baseline that
   RCR and constraint embedding must beat).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_tree import per_call_us  # noqa: E402

import loopdyn as ld  # noqa: E402


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, model.q0, v)
    tau = np.zeros(model.nv)
    tau[model.actuated] = rng.normal(size=model.actuated.size)
    return np.array(model.q0), v, tau


def _pin(model):
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    ex = PinocchioExport(model)
    pd = ex.model.createData()
    cds = [c.createData() for c in ex.constraints]
    pin.initConstraintDynamics(ex.model, pd, ex.constraints, cds)
    prox = pin.ProximalSettings(1e-12, 1e-8, 20)

    def make(q, v, tau):
        qp, vp, tp = ex.q(q), ex.v(v), ex.v(tau)
        return lambda: pin.constraintDynamics(ex.model, pd, qp, vp, tp, ex.constraints, cds, prox)

    return ex, make


def four_bar_table(repeat, min_time):
    import mujoco

    from loopdyn.interop.mujoco import MujocoExport

    model = ld.examples.four_bar()
    q, v, tau = _state(model)
    exact = ld.forward_dynamics(model, q, v, tau).qdd
    _, J, gamma = ld.constraints(model, q, v)
    print(f"four_bar: |J q̈ - γ| of the reference = {np.abs(J @ exact - gamma).max():.1e}")
    scale = np.abs(exact).max()
    rows = []
    for method in ("augmented", "slm"):
        t = per_call_us(lambda m=method: ld.forward_dynamics(model, q, v, tau, method=m), repeat, min_time)
        err = np.abs(ld.forward_dynamics(model, q, v, tau, method=method).qdd - exact).max() / scale
        rows.append((f"loopdyn {method}", t, err))
    ex, make = _pin(model)
    call = make(q, v, tau)
    t_pin = per_call_us(call, repeat, min_time)
    rows.append(("pin.constraintDynamics", t_pin, np.abs(ex.v_from(call()) - exact).max() / scale))
    for label, kw in (("default", {}), ("stiff solref", {"solref": (-1e6, -2e3)})):
        mj = MujocoExport(model, **kw)
        mj.data.qpos[:], mj.data.qvel[:], mj.data.qfrc_applied[:] = q, v, tau
        t = per_call_us(lambda mj=mj: mujoco.mj_forward(mj.model, mj.data), repeat, min_time)
        rows.append((f"mujoco.mj_forward ({label})", t, np.abs(mj.forward(q, v, tau) - exact).max() / scale))
    print(f"{'four_bar':<34}{'µs/call':>10}{'ratio to pin':>14}{'rel. error':>12}")
    for name, t, err in rows:
        print(f"{name:<34}{t:>10.2f}{t / t_pin:>14.2f}{err:>12.1e}")
    print()


def ladder_scaling(Ls, repeat, min_time):
    print(f"{'spatial_ladder L':<18}{'n':>5}{'m':>5}{'augmented µs':>14}{'slm µs':>10}{'pin µs':>10}"
          f"{'aug/pin':>9}{'slm/pin':>9}")  # fmt: skip
    times = {"augmented": [], "slm": [], "pin": []}
    for L in Ls:
        model = ld.examples.spatial_ladder(L)
        q, v, tau = _state(model)
        row = {}
        for method in ("augmented", "slm"):
            row[method] = per_call_us(
                lambda m=method: ld.forward_dynamics(model, q, v, tau, method=m), repeat, min_time
            )
        _, make = _pin(model)
        row["pin"] = per_call_us(make(q, v, tau), repeat, min_time)
        for k in times:
            times[k].append(row[k])
        print(f"{L:<18}{model.nv:>5}{model.m:>5}{row['augmented']:>14.1f}{row['slm']:>10.1f}"
              f"{row['pin']:>10.1f}{row['augmented'] / row['pin']:>9.2f}{row['slm'] / row['pin']:>9.2f}")  # fmt: skip
    Ls = np.asarray(Ls, dtype=float)
    sel = Ls >= 8
    if sel.sum() >= 2:
        slopes = {k: np.polyfit(np.log(Ls[sel]), np.log(np.asarray(t)[sel]), 1)[0] for k, t in times.items()}
        print("log-log slope over L >= 8: " + ", ".join(f"{k} {s:.2f}" for k, s in slopes.items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, L up to 64")
    args = ap.parse_args(argv)
    repeat, min_time = (3, 0.05) if args.quick else (7, 0.2)
    four_bar_table(repeat, min_time)
    Ls = [1, 2, 4, 8, 16, 32, 64] + ([] if args.quick else [128])
    ladder_scaling(Ls, repeat, min_time)


if __name__ == "__main__":
    main()
