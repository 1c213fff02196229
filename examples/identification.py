"""Identify the base inertial parameters of the five-bar from its motor torques.

    python examples/identification.py            # 20 s of excitation, 2001 samples
    python examples/identification.py --quick    # 6 s, 601 samples
    python examples/identification.py --noise 0.05 --seed 3

1. Simulate Saha & Schiehlen's five-bar (``ld.examples.five_bar``) driven by its two
   motors: a PD controller tracking a multi-sine around the initial pose (the
   excitation), ``ld.simulate``.
2. "Measure" the motor torques at the output times and add Gaussian noise (``--noise``
   times each motor's RMS torque).
3. The base parameters (``ld.base_parameters``): the combinations of the 40 inertial
   parameters that the motor torques determine, β = K π.
4. Least squares on the base regressor stacked over the trajectory,
   Y_b(q, q̇, q̈) β = u, then the true and estimated β side by side.

The states (q, q̇, q̈) are the simulation's own; on a real machine they come from the
encoders, q̈ from filtered differentiation.  Without noise the estimate is exact to the
simulation's tolerance; the printed "relative error" lines are |β̂ - β| / |β|.
"""

import argparse
import time

import numpy as np

import loopdyn as ld
from loopdyn.analysis.regressor import stacked_regressor


def excitation(model, amplitude=0.35, kp=300.0, kd=40.0):
    """A PD controller on the actuated angles tracking θ0 + a sum of sines (the
    reference's frequencies are incommensurate so the motion does not repeat)."""
    act = model.actuated
    th0 = np.array(model.q0)[act]
    freqs = np.array([[0.23, 0.61, 1.07], [0.31, 0.73, 1.19]])  # Hz, one row per motor
    phases = np.array([[0.0, 1.3, 2.1], [0.7, 2.6, 0.4]])
    weights = np.array([1.0, 0.5, 0.25]) / 1.75

    def reference(t):
        w = 2 * np.pi * freqs
        th = th0 + amplitude * (weights * np.sin(w * t + phases)).sum(axis=1)
        dth = amplitude * (weights * w * np.cos(w * t + phases)).sum(axis=1)
        return th, dth

    def tau(t, q, v):
        th, dth = reference(t)
        return kp * (th - q[act]) + kd * (dth - v[act])

    return tau


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 s of excitation (a test)")
    ap.add_argument("--t-end", type=float, default=None, help="excitation length (s)")
    ap.add_argument("--noise", type=float, default=0.02, help="noise / RMS torque")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t_end = args.t_end or (6.0 if args.quick else 20.0)
    n = int(100 * t_end) + 1

    model = ld.examples.five_bar()
    start = time.perf_counter()
    traj = ld.simulate(model, model.q0, None, t_end, excitation(model), t_eval=n)
    sim_s = time.perf_counter() - start
    act = model.actuated
    u = traj.tau[:, act]  # the motor torques applied (N m)
    rng = np.random.default_rng(args.seed)
    sigma = args.noise * np.sqrt((u**2).mean(axis=0))
    u_meas = u + sigma * rng.normal(size=u.shape)

    # the identifiable combinations, from random states of the mechanism
    base = ld.base_parameters(model)
    beta = base.values(ld.inertial_parameters(model))
    # the base regressor over the trajectory: one row per motor and sample
    start = time.perf_counter()
    states = list(zip(traj.q, traj.v, traj.qdd, strict=True))
    Wb = base.regressor(stacked_regressor(model, states))
    reg_s = time.perf_counter() - start
    exact = np.linalg.lstsq(Wb, u.reshape(-1), rcond=None)[0]
    est = np.linalg.lstsq(Wb, u_meas.reshape(-1), rcond=None)[0]

    sv = np.linalg.svd(Wb / np.linalg.norm(Wb, axis=0), compute_uv=False)
    gap = f"QR gap {base.gap[0]:.2g} / {base.gap[1]:.2g}"
    print(f"five-bar: {model.nbodies} bodies, {10 * model.nbodies} inertial parameters, "
          f"{base.rank} base parameters ({gap})")  # fmt: skip
    print(f"simulated {t_end:g} s ({len(traj.t)} samples) in {sim_s:.1f} s; regressor "
          f"stacked ({Wb.shape[0]} x {Wb.shape[1]}) in {reg_s:.2f} s, "
          f"condition {sv[0] / sv[-1]:.3g} (normalised columns)")  # fmt: skip
    print(f"torque noise: {args.noise:g} x RMS = {np.round(sigma, 3)} N m\n")
    width = max(len(s) for s in base.describe(digits=3))
    print(f"{'base parameter (SI units)':<{width}} {'true':>9} {'estimated':>10} {'error':>9}")
    for name, b, e in zip(base.describe(digits=3), beta, est, strict=True):
        print(f"{name:<{width}} {b:9.5f} {e:10.5f} {e - b:9.1e}")
    print()
    print(f"relative error without noise |β̂ - β| / |β| = "
          f"{np.linalg.norm(exact - beta) / np.linalg.norm(beta):.3e}")  # fmt: skip
    print(f"relative error with noise    |β̂ - β| / |β| = "
          f"{np.linalg.norm(est - beta) / np.linalg.norm(beta):.3e}")  # fmt: skip
    pred = (Wb @ est).reshape(u.shape)
    print(f"torque prediction RMS error: {np.sqrt(((pred - u) ** 2).mean(axis=0)).round(4)} N m")


if __name__ == "__main__":
    main()
