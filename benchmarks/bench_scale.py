"""Work at scale (issue 16): batch throughput against a Python loop of Pinocchio's
``constraintDynamics`` (StdVec containers, ProximalSettings 1e-12), and the compiled
simulation loop against the Python loop and MuJoCo.  One process, A/B alternated
rounds: median and min-max of the times and of the per-round ratios.

Free fall: the four-bar (``ld.examples.four_bar(theta1=pi/2)``, as bench_simulate.py)
for 5 s from rest, 501 outputs, projection; loopdyn's compiled loop with DOP853 (the
default integrator) and RK45 at rtol = atol = 1e-10, its Python loop (DOP853), and
MuJoCo RK4 at dt = 1e-4 on the same model (``loopdyn.interop.mujoco.MujocoExport``,
constraint solver tolerance 1e-12), its answer checked: energy drift max |E(t) - E(0)|,
closure gap and max |q - q_ref| at the 501 outputs (and over the first 0.5 s) against
loopdyn at rtol = 1e-13.
The free-fall times are the process's CPU time with ``--cpu-time`` (single-threaded
runs on a shared machine), else wall time; the batches are always wall time (they
run on every thread).

    PYTHONPATH=src python benchmarks/bench_scale.py [--rounds 5] [--n 10000] [--cpu-time]
    PYTHONPATH=src python benchmarks/bench_scale.py --cold augmented   # compile time
    PYTHONPATH=src python benchmarks/bench_scale.py --simulation       # batched / partitioning /
                                                                       # every kind of model
    PYTHONPATH=src python benchmarks/bench_scale.py --batches          # the batches only
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from bench_closed import _pin
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)


def _states(model, n, seed=0):
    """n consistent states (actuated coordinates perturbed) and random actuator forces."""
    rng = np.random.default_rng(seed)
    Q = np.empty((n, model.nq))
    V = np.empty((n, model.nv))
    TAU = np.zeros((n, model.nv))
    base = [ld.assemble(model, model.q0 + 0.05 * k * (np.arange(model.nq) == 0)) for k in range(8)]
    for i in range(n):
        Q[i] = base[i % 8]
        v = np.zeros(model.nv)
        v[model.actuated] = rng.normal(size=model.actuated.size)
        V[i] = ld.complete_velocity(model, Q[i], v)
        TAU[i, model.actuated] = rng.normal(size=model.actuated.size)
    return Q, V, TAU


def _alternate(fns, rounds, clock=time.perf_counter, cpu=None):
    """{name: per-round times (rounds,)}: each round calls every function once; with a
    dict ``cpu``, also the process's CPU times of every call into it."""
    times = {k: [] for k in fns}
    if cpu is not None:
        cpu.update({k: [] for k in fns})
    for _ in range(rounds):
        for k, f in fns.items():
            c = time.process_time()
            t = clock()
            f()
            times[k].append(clock() - t)
            if cpu is not None:
                cpu[k].append(time.process_time() - c)
    if cpu is not None:
        cpu.update({k: np.array(v) for k, v in cpu.items()})
    return {k: np.array(v) for k, v in times.items()}


def _spread(x, scale=1.0, fmt="{:.2f}"):
    """'median (min–max)' of x * scale."""
    x = np.asarray(x) * scale
    return f"{fmt.format(np.median(x))} ({fmt.format(x.min())}–{fmt.format(x.max())})"


def _layer():
    """numba's threading layer (after a first parallel run), else 'none started'."""
    try:
        return numba.threading_layer()
    except ValueError:
        return "none started"


def batch(name, model, n, rounds, method):
    Q, V, TAU = _states(model, n)
    ex, make = _pin(model)
    calls = [make(Q[i], V[i], TAU[i]) for i in range(n)]
    res = ld.forward_dynamics_batch(model, Q, V, TAU, method=method)  # compile, check
    err = max(
        np.abs(ex.v_from(calls[i]()) - res.qdd[i]).max() for i in range(0, n, max(1, n // 50))
    )

    def pin_loop():
        for c in calls:
            c()

    t = _alternate(
        {
            "loopdyn batch": lambda: ld.forward_dynamics_batch(model, Q, V, TAU, method=method),
            "batch 1 thread": lambda: ld.forward_dynamics_batch(
                model, Q, V, TAU, method=method, threads=1
            ),
            "pin loop": pin_loop,
        },
        rounds,
        cpu=(cpu := {}),
    )
    print(
        f"\n{name}: {n} states, method {method}, {numba.get_num_threads()} threads "
        f"({_layer()}), max |q̈ - pin| = {err:.1e}"
    )
    for k, v in t.items():
        print(
            f"  {k:14s} wall {_spread(v, 1e6 / n, '{:.3f}')} µs/state, "
            f"CPU (all threads) {_spread(cpu[k], 1e6 / n, '{:.3f}')} µs/state"
        )
    for k in ("loopdyn batch", "batch 1 thread"):
        print(f"  throughput ratio {k} / pin loop (wall): {_spread(t['pin loop'] / t[k])}x")
    r = cpu["pin loop"] / cpu["batch 1 thread"]
    print(f"  CPU-time ratio pin loop / batch 1 thread: {_spread(r)}x")


def _energy_gap(model, Q, V):
    E = np.array([ld.total_energy(model, q, v) for q, v in zip(Q, V, strict=True)])
    gap = max(np.abs(ld.closure_residual(model, q)).max() for q in Q)
    return float(np.abs(E - E[0]).max()), float(gap)


def _mujoco(model, t_end, dt, nout):
    """MuJoCo RK4 at ``dt`` from (q0, 0): a function running it, returning (Q, V) at the
    ``nout`` output times."""
    import mujoco

    from loopdyn.interop.mujoco import MujocoExport

    ex = MujocoExport(model, timestep=dt, integrator="RK4")
    m, d = ex.model, ex.data
    m.opt.tolerance = 1e-12
    n = round(t_end / dt)
    every = round(t_end / (nout - 1) / dt)

    def run():
        mujoco.mj_resetData(m, d)
        d.qpos[:] = model.q0
        d.qvel[:] = 0.0
        Q, V = [d.qpos.copy()], [d.qvel.copy()]
        for k in range(1, n + 1):
            mujoco.mj_step(m, d)
            if k % every == 0:
                Q.append(d.qpos.copy())
                V.append(d.qvel.copy())
        return np.array(Q), np.array(V)

    return run


def free_fall(rounds, rtol, clock):
    model = ld.examples.four_bar(theta1=np.pi / 2)
    t_end, nout, dt = 5.0, 501, 1e-4
    kw = dict(t_end=t_end, t_eval=nout, rtol=rtol, atol=rtol)
    ref = ld.simulate(model, t_end=t_end, t_eval=nout, rtol=1e-13, atol=1e-13, compiled=False)
    runs = {
        "compiled DOP853": lambda: ld.simulate(model, compiled=True, **kw),
        "compiled RK45": lambda: ld.simulate(model, compiled=True, integrator="RK45", **kw),
        "python DOP853": lambda: ld.simulate(model, compiled=False, **kw),
    }
    mj = _mujoco(model, t_end, dt, nout)
    acc = {}
    for k, f in runs.items():
        tr = f()  # compile / load the caches, and the answer
        dE, gap = _energy_gap(model, tr.q, tr.v)
        early = np.abs(tr.q[:51] - ref.q[:51]).max()
        acc[k] = (dE, gap, np.abs(tr.q - ref.q).max(), early, f"{tr.stats['steps']} steps")
    Q, V = mj()
    dq, early = np.abs(Q - ref.q).max(), np.abs(Q[:51] - ref.q[:51]).max()
    acc[f"mujoco RK4 dt={dt:g}"] = (*_energy_gap(model, Q, V), dq, early, "")
    runs[f"mujoco RK4 dt={dt:g}"] = mj
    t = _alternate(runs, rounds, clock)
    unit = "CPU" if clock is time.process_time else "wall"
    print(
        f"\nfour_bar(θ1 = 90°) free fall {t_end:g} s, rtol = atol = {rtol:g}, projection, "
        f"{nout} outputs; {unit} ms, median (min–max) of {rounds} alternated rounds"
    )
    for k, v in t.items():
        dE, gap, dq, early, steps = acc[k]
        print(
            f"  {k:20s} {_spread(v, 1e3)} ms, max |dE| = {dE:.1e} J, max |Φ| = {gap:.1e}, "
            f"max |q - q_ref| = {dq:.1e} (t <= 0.5 s: {early:.1e}) {steps}"
        )
    fast = t["compiled DOP853"]
    for k in list(t)[1:]:
        print(
            f"  {k} / compiled DOP853: time {_spread(t[k] / fast)}x, "
            f"energy error {acc[k][0] / acc['compiled DOP853'][0]:.1e}x"
        )


def sim_batch(rounds, n):
    """``ld.simulate_batch`` of n four-bar free falls (θ1 from 30° to 150°, 2 s, DOP853,
    rtol 1e-10, projection) on every core against a loop of ``ld.simulate`` (each call
    already in the compiled loop) and the batch on one thread; wall time."""
    model = ld.examples.four_bar()
    Q = np.tile(model.q0, (n, 1))
    Q[:, 0] = np.deg2rad(np.linspace(30, 150, n))
    kw = dict(t_eval=101, rtol=1e-10, atol=1e-10)
    runs = {
        "simulate_batch": lambda: ld.simulate_batch(model, Q, None, 2.0, **kw),
        "simulate_batch 1 thread": lambda: ld.simulate_batch(model, Q, None, 2.0, threads=1, **kw),
        "loop of ld.simulate": lambda: [ld.simulate(model, q, None, 2.0, **kw) for q in Q],
    }
    out = {k: f() for k, f in runs.items()}  # compile / load, and the answers
    gap = max(
        np.abs(a.q - b.q).max()
        for a, b in zip(out["simulate_batch"], out["loop of ld.simulate"], strict=True)
    )
    t = _alternate(runs, rounds)
    print(
        f"\nsimulate_batch: {n} four-bar free falls of 2 s (DOP853, rtol 1e-10, projection), "
        f"{len(os.sched_getaffinity(0))} usable cores; max |q_batch - q_loop| = {gap:.1e}; "
        f"wall ms, median (min–max) of {rounds} alternated rounds"
    )
    for k, v in t.items():
        print(f"  {k:24s} {_spread(v, 1e3)} ms")
    for k in ("simulate_batch", "simulate_batch 1 thread"):
        print(f"  loop of ld.simulate / {k}: {_spread(t['loop of ld.simulate'] / t[k])}x")


def partitioning(rounds, clock):
    """stabilization='partitioning' in the compiled loop against the Python loop: free
    falls of the five-bar (denoc; repartitions), 3-RRR (rcr) and carpet scraper (rcr)."""
    cases = [
        ("five_bar", "denoc", ld.examples.five_bar()),
        ("three_rrr", "rcr", ld.examples.three_rrr()),
        ("carpet_scraper", "rcr", ld.examples.carpet_scraper()),
    ]
    unit = "CPU" if clock is time.process_time else "wall"
    print(f"\npartitioning, 3 s free fall, DOP853 rtol 1e-8; {unit} ms, median (min–max)")
    for name, method, model in cases:
        kw = dict(method=method, stabilization="partitioning", t_eval=301)
        runs = {
            "compiled": lambda m=model, kw=kw: ld.simulate(m, None, None, 3.0, compiled=True, **kw),
            "python": lambda m=model, kw=kw: ld.simulate(m, None, None, 3.0, compiled=False, **kw),
        }
        a, b = runs["compiled"](), runs["python"]()
        t = _alternate(runs, rounds, clock)
        print(
            f"  {name} ({method}): compiled {_spread(t['compiled'], 1e3)} ms, Python loop "
            f"{_spread(t['python'], 1e3)} ms, ratio {_spread(t['python'] / t['compiled'])}x; "
            f"{a.stats['steps']} / {b.stats['steps']} steps, {len(a.stats['repartitions'])} / "
            f"{len(b.stats['repartitions'])} repartitions, max |Φ| {a.residual_position.max():.1e}"
        )


def model_kinds(rounds, clock):
    """The compiled loop on every kind of model against the Python loop: ld.simulate's
    defaults (DOP853, projection), 1 s from the model's q0: a parallel platform with
    spherical joints (chart q = q_a ⊕ δ), a tree with free and spherical joints, the
    6-DOF arm (a tree: the ABA) and a planar loop closed by a spatial hinge (5 rows of
    rank 2: the dropped rows checked at every evaluation)."""
    cases = [
        ("stewart (spherical joints)", ld.examples.stewart(), None),
        ("random_tree(8, 0) (free)", ld.examples.random_tree(8, 0), 1),
        ("serial_arm (tree)", ld.examples.serial_arm(), 1),
        ("closed_knee_leg (redundant)", ld.examples.closed_knee_leg(), None),
    ]
    unit = "CPU" if clock is time.process_time else "wall"
    print(f"\nevery kind of model, 1 s, DOP853 defaults; {unit} ms, median (min–max)")
    for name, model, seed in cases:
        v = None if seed is None else np.random.default_rng(seed).normal(size=model.nv)
        runs = {
            c: (lambda m=model, v=v, c=c: ld.simulate(m, m.q0, v, 1.0, compiled=c))
            for c in (True, False)
        }
        a, b = runs[True](), runs[False]()
        assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"], name
        t = _alternate({"compiled": runs[True], "python": runs[False]}, rounds, clock)
        print(
            f"  {name}: compiled {_spread(t['compiled'], 1e3)} ms, Python loop "
            f"{_spread(t['python'], 1e3)} ms, ratio {_spread(t['python'] / t['compiled'])}x; "
            f"{a.stats['steps']} steps both, max |q - q_python| {np.abs(a.q - b.q).max():.1e}"
        )


def cold(method):
    """A fresh process on an empty numba cache: the CPU time of its first batch of
    ``method`` (after a first single call) and of the whole process (import included)."""
    code = (
        "import time, numpy as np, loopdyn as ld; m = ld.examples.four_bar(); "
        f"ld.forward_dynamics(m, m.q0, np.zeros(3), method={method!r}); "
        "t = time.process_time(); "
        f"ld.forward_dynamics_batch(m, np.tile(m.q0, (100, 1)), method={method!r}); "
        "print(time.process_time() - t, time.process_time())"
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    batch_s, total_s = map(float, out.stdout.split())
    print(
        f"\ncold {method} (empty NUMBA_CACHE_DIR): first batch {batch_s:.1f} s CPU, "
        f"whole process (import, first call, first batch) {total_s:.1f} s CPU"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--cpu-time", action="store_true", help="free fall: the CPU time")
    p.add_argument("--cold", metavar="METHOD", help="only: a cold first batch of METHOD")
    p.add_argument("--simulation", action="store_true", help="only: simulate_batch, partitioning")
    p.add_argument("--batches", action="store_true", help="only: the batches")
    a = p.parse_args()
    if a.cold:
        cold(a.cold)
        sys.exit()
    clock = time.process_time if a.cpu_time else time.perf_counter
    if not a.batches:
        sim_batch(a.rounds, 64)
        partitioning(a.rounds, clock)
        model_kinds(a.rounds, clock)
        if a.simulation:
            sys.exit()
        free_fall(a.rounds, 1e-10, clock)
    batch("four_bar", ld.examples.four_bar(), a.n, a.rounds, "augmented")
    # slm: the fastest method on the four-bar (single calls: bench_core.py)
    batch("four_bar", ld.examples.four_bar(), a.n, a.rounds, "slm")
    # rcr: the fastest method on the ladder (single calls: rcr 25 µs, sslm 32, embedding 56,
    # augmented 262, recursive_lambda 365, slm 391)
    batch("spatial_ladder(32)", ld.examples.spatial_ladder(32), a.n, a.rounds, "rcr")
