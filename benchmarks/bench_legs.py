"""Legs with closed-chain knees and ankles, as their users load them: loopdyn against
``pin.constraintDynamics``, and the load time.

Run from the repository root::

    python benchmarks/bench_legs.py              # 21 rounds (~1 min with a warm cache)
    python benchmarks/bench_legs.py --quick      # 7 rounds
    python benchmarks/bench_legs.py --cpu-time   # process CPU time (a shared machine)
    python benchmarks/bench_legs.py --no-load    # part 1 only (the per-call times)

The four legs of ``tests/data/legs`` (``loopdyn.examples.legs``), each read from its
URDF + YAML files by ``ld.load`` (default: the independent rows of each closure).

1. Per forward-dynamics call at a consistent random state: every method of loopdyn and
   ``pin.constraintDynamics`` on the model that the parallel-robot community's loader
   builds from the same two files (``loopdyn.interop.pinocchio.ConventionModel``: joint
   overrides, ``CONTACT_6D`` / ``CONTACT_3D`` LOCAL between the named frames), with
   Pinocchio's fast ``StdVec_RigidConstraintModel`` / ``...Data`` containers and
   ``ProximalSettings(1e-12, 1e-8, 20)``.  All functions alternate within each round
   (``benchmarks/timing.py``); reported: the median µs per call of each, and the ratio of
   the fastest loopdyn method to Pinocchio, median and min–max over the rounds.  Every
   answer is checked first: each method against ``augmented`` (1e-10) and Pinocchio's
   (1e-9), entry by entry relative to max(1, |q̈ᵢ|).
   On a machine shared with other jobs, use ``--cpu-time``: the wall clock counts the
   time this process waits for a core (at a load of 8 on 2 cores, SSLM's digit_leg call,
   4.2 µs of compiled work, read 10-14 µs per call).
2. ``ld.load(yaml)`` with a warm numba cache: in a new process (import excluded: the
   first load, which loads the compiled kernels), and repeated in one process.
"""

import argparse
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from loopdyn.kernels import tiers
from timing import alternate, fmt_ratio, median_us, ratio, use_cpu_time

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "legs"
LEGS = ("cassie_leg", "digit_leg", "five_bar_leg", "kangaroo_leg", "wl16_leg")
METHODS = ("augmented", "slm", "sslm", "recursive_lambda", "embedding", "rcr")


def _state(model, seed=0):
    """A consistent random state: motors moved from q0 (0.2 rad, 10 mm), the rest assembled."""
    rng = np.random.default_rng(seed)
    step = np.zeros(model.nv)
    for j in model.joint_names:
        sl = model.v_slice(j)
        if sl.start in set(model.actuated):
            prismatic = model.joint_types[model.joint_index(j)] == "prismatic"
            step[sl] = rng.uniform(-1, 1) * (0.01 if prismatic else 0.2)
    q = ld.assemble(model, ld.integrate(model, model.q0, step, 1.0))
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
    return q, v, rng.normal(size=model.nv)


def _close(a, b, tol):
    return bool(np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))))


def forward(rounds):
    import pinocchio as pin

    from loopdyn.interop.pinocchio import ConventionModel

    print("\n1. forward dynamics per call (µs), loopdyn vs pin.constraintDynamics (StdVec)")
    for name in LEGS:
        urdf, yml = DATA / f"{name}.urdf", DATA / f"{name}.yaml"
        model = ld.load(yml)
        q, v, tau = _state(model)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
        cm = ConventionModel(urdf, yml)
        pd = cm.model.createData()
        cms, cds = cm.constraints, cm.constraint_datas()
        pin.initConstraintDynamics(cm.model, pd, cms, cds)
        prox = pin.ProximalSettings(1e-12, 1e-8, 20)
        qp, vp, tp = cm.q(model, q), cm.v(model, v), cm.v(model, tau)

        def pin_call(cm=cm, pd=pd, qp=qp, vp=vp, tp=tp, cms=cms, cds=cds, prox=prox):
            return pin.constraintDynamics(cm.model, pd, qp, vp, tp, cms, cds, prox)

        assert _close(cm.v_from(model, pin_call()), ref, 1e-9), name
        d = model.create_data()
        fns = []
        for m in METHODS:
            fd = partial(ld.forward_dynamics, model, q, v, tau, method=m, data=d)
            res = fd()
            assert res.method == m and _close(res.qdd, ref, 1e-10), (name, m, res.method)
            fns.append(fd)
        t = alternate([pin_call, *fns], rounds)
        meds = [median_us(t, k) for k in range(1, len(METHODS) + 1)]
        best = int(np.argmin(meds)) + 1
        print(
            f"   {name:<13} nv {model.nv:2d} rows {model.m:2d}  pin {median_us(t, 0):6.2f}   "
            + "  ".join(f"{m} {x:6.2f}" for m, x in zip(METHODS, meds, strict=True))
        )
        print(f"   {'':<13} fastest: {METHODS[best - 1]}, /pin {fmt_ratio(ratio(t, best, 0))}")


_LOAD = """
import sys, time
import loopdyn as ld
t0 = time.perf_counter()
ld.load(sys.argv[1])
t1 = time.perf_counter()
for _ in range(5):
    ld.load(sys.argv[1])
print(f"{t1 - t0:.3f} {(time.perf_counter() - t1) / 5:.3f}")
"""


def load_time(repeats):
    print("\n2. ld.load(yaml), warm numba cache: first load in a new process, then repeated")
    # the legs, then whole robots of them (tests/data/legs, legs.robot_texts): a Digit-like
    # biped and eight legs of the four kinds (73 bodies, 42 closure rows)
    for name in [*LEGS, "biped_digit", "eight_legs"]:
        first, again = [], []
        for _ in range(repeats):
            out = subprocess.run(
                [sys.executable, "-c", _LOAD, str(DATA / f"{name}.yaml")],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            first.append(float(out[0]))
            again.append(float(out[1]))
        print(
            f"   {name:<13} first {np.median(first):5.3f} s ({min(first):.3f}–{max(first):.3f})"
            f"   repeated {np.median(again):5.3f} s ({min(again):.3f}–{max(again):.3f})"
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cpu-time", action="store_true", help="time CPU, not wall (shared machine)")
    p.add_argument("--no-load", action="store_true", help="skip part 2 (the load times)")
    a = p.parse_args()
    if a.cpu_time:
        use_cpu_time()
    print(f"clock: {'process CPU time' if a.cpu_time else 'wall'}")
    forward(7 if a.quick else 21)
    if not a.no_load:
        load_time(3 if a.quick else 5)


if __name__ == "__main__":
    main()
