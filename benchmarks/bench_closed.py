"""Closed-loop forward dynamics: loopdyn against Pinocchio and MuJoCo, in one process.

Run from the repository root::

    python benchmarks/bench_closed.py            # four-bar table + ladder scaling
    python benchmarks/bench_closed.py --quick    # fewer repeats, L up to 64

1. Four-bar: per-call time and accuracy of ``ld.forward_dynamics`` (augmented,
   slm, recursive_lambda) next to ``pin.constraintDynamics`` (ProximalSettings accuracy 1e-12,
   mu 1e-8, up to 20 iterations) and ``mujoco.mj_forward`` (soft constraints,
   default and stiff ``solref``).  Accuracy: max |q̈ - q̈_exact| / max |q̈_exact|
   where q̈_exact is the augmented solution verified by J q̈ = γ.
2. ``spatial_ladder(L)``, L = 1 … 128: per-call time of augmented, slm, recursive_lambda and
   Pinocchio, with log-log slopes over L >= 8 (the dense methods' baseline that
   RCR and constraint embedding must beat).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from bench_tree import per_call_us
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)


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
    # Pinocchio's fast path: StdVec containers (a Python list is converted at every call)
    cds = ex.constraint_datas()
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
    ex, make = _pin(model)
    pin_call = make(q, v, tau)
    mjs = [
        MujocoExport(model),
        MujocoExport(model, solref=(-1e6, -2e3), solimp=(0.9999, 0.9999, 0.001, 0.5, 2)),
    ]
    for mj in mjs:
        mj.data.qpos[:], mj.data.qvel[:], mj.data.qfrc_applied[:] = q, v, tau
    fns = [lambda m=m: ld.forward_dynamics(model, q, v, tau, method=m) for m in _METHODS]
    fns += [pin_call] + [lambda mj=mj: mujoco.mj_forward(mj.model, mj.data) for mj in mjs]
    t = per_call_us(fns, repeat, min_time)  # timed in alternation
    nm = len(_METHODS)
    t_pin = t[nm]
    rows = [
        (
            f"loopdyn {m}",
            t[k],
            np.abs(ld.forward_dynamics(model, q, v, tau, method=m).qdd - exact).max() / scale,
        )
        for k, m in enumerate(_METHODS)
    ]
    rows.append(
        ("pin.constraintDynamics", t_pin, np.abs(ex.v_from(pin_call()) - exact).max() / scale)
    )
    for k, label in enumerate(("default", "stiff solref/solimp")):
        err = np.abs(mjs[k].forward(q, v, tau) - exact).max() / scale
        rows.append((f"mujoco.mj_forward ({label})", t[nm + 1 + k], err))
    print(f"{'four_bar':<34}{'µs/call':>10}{'ratio to pin':>14}{'rel. error':>12}")
    for name, t, err in rows:
        print(f"{name:<34}{t:>10.2f}{t / t_pin:>14.2f}{err:>12.1e}")
    print()


_METHODS = ("augmented", "slm", "recursive_lambda")


def ladder_scaling(Ls, repeat, min_time):
    short = {"augmented": "aug", "slm": "slm", "recursive_lambda": "rλ"}
    head = ["spatial_ladder L", "n", "m", *(f"{short[m]} µs" for m in _METHODS), "pin µs"]
    head += [f"{short[m]}/pin" for m in _METHODS]
    widths = [18, 5, 5, *([10] * (len(_METHODS) + 1)), *([8] * len(_METHODS))]
    print(
        f"{head[0]:<18}" + "".join(f"{h:>{w}}" for h, w in zip(head[1:], widths[1:], strict=True))
    )
    times = {k: [] for k in (*_METHODS, "pin")}
    for L in Ls:
        model = ld.examples.spatial_ladder(L)
        q, v, tau = _state(model)
        _, make = _pin(model)
        fns = [
            lambda m=m, model=model, q=q, v=v, tau=tau: ld.forward_dynamics(
                model, q, v, tau, method=m
            )
            for m in _METHODS
        ]
        t = per_call_us([*fns, make(q, v, tau)], repeat, min_time)
        row = dict(zip((*_METHODS, "pin"), t, strict=True))
        for k in times:
            times[k].append(row[k])
        cells = (model.nv, model.m, *(f"{row[k]:.1f}" for k in times))
        ratios = tuple(f"{row[m] / row['pin']:.2f}" for m in _METHODS)
        print(
            f"{L:<18}"
            + "".join(f"{c:>{w}}" for c, w in zip((*cells, *ratios), widths[1:], strict=True))
        )
    Ls = np.asarray(Ls, dtype=float)
    sel = Ls >= 8
    if sel.sum() >= 2:
        slopes = {
            k: np.polyfit(np.log(Ls[sel]), np.log(np.asarray(t)[sel]), 1)[0]
            for k, t in times.items()
        }
        print("log-log slope over L >= 8: " + ", ".join(f"{k} {s:.2f}" for k, s in slopes.items()))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer repeats, L up to 64")
    args = ap.parse_args(argv)
    repeat, min_time = (3, 0.05) if args.quick else (7, 0.2)
    four_bar_table(repeat, min_time)
    Ls = [1, 2, 4, 8, 16, 32, 64] + ([] if args.quick else [128])
    ladder_scaling(Ls, repeat, min_time)


if __name__ == "__main__":
    main()
