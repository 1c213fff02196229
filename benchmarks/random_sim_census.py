"""Simulation census: ``ld.simulate`` on random closed-loop mechanisms, judged by invariants.

Run from the repository root::

    python benchmarks/random_sim_census.py --n 300 --seed 1              # ~1 min per 300
    python benchmarks/random_sim_census.py --n 300 --seed 1 --show 36    # the code of case 36

Mechanism i is ``tests/mechanisms.random_mechanism((seed, i))`` (the forward-dynamics
census's generator: random trees with every joint type, satisfiable closures of every
kind, ~20 % deliberately redundant, masses over six decades) started at its consistent
state (q*, v*) with no joint forces, simulated for ``--t-end`` seconds with DOP853,
projection and rtol = atol = 1e-10 (``--integrator``, ``--stabilization``, ``--method``,
``--rtol`` change them; at 1e-8 a run of light bodies can drift 1e-4 of a small total
energy, the integrator's error, not a fault).  With no forces and no dissipation the energy
is conserved and the closures hold, so each run is counted as:

- ok: it completes, q and v finite, max |Φ| <= 1e-7 (1e-5 with Baumgarte or none, which
  do not project) and max |E - E0| <= 1e-5 of max |E|;
- named: ``SimulationSingularityError`` at a state the dense oracle of
  ``tests/mechanisms.py`` calls ill-conditioned or inconsistent (a singular configuration
  reached by the motion: the right answer);
- sing/well: ``SimulationSingularityError`` at a state the oracle calls well-conditioned
  (the run stopped where the motion goes on: a failure);
- phi / drift / nonfinite: completed but an invariant fails (a failure);
- other: any other exception (a failure), or a run slower than ``--slow`` seconds.

The last line also says how many runs completed in the compiled loop (``ld.simulate``'s
default; the rest ran the Python loop: a run the compiled loop handed back, or an
option it does not take).

The forward-dynamics census (``random_census.py``) checks one state per mechanism against
the oracle; this one checks what an integrator does between states: stage points off the
constraint manifold, projections, the rank of redundant closures along a motion.
"""

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import loopdyn as ld
import mechanisms as mx
from loopdyn.kernels import tiers

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

KINDS = ("ok", "named", "sing/well", "phi", "drift", "nonfinite", "other", "slow")


def run_one(mech, t_end, method, slow, **options):
    """(kind, wall seconds, detail) of one simulation of ``mech`` from (q*, v*), τ = 0;
    ``options`` for ``ld.simulate`` (stabilization, integrator)."""
    model = mech.model
    t0 = time.perf_counter()
    try:
        tr = ld.simulate(model, mech.q, mech.v, t_end=t_end, method=method, t_eval=31, **options)
    except ld.SimulationSingularityError as e:
        wall = time.perf_counter() - t0
        try:
            o = mx.dense_oracle(model, e.q, e.v, np.zeros(model.nv))
        except np.linalg.LinAlgError:  # M not positive definite there: a degenerate state
            return "named", wall, f"t = {e.t:.4g} (oracle: M singular): {str(e)[:160]}"
        kind = "sing/well" if o.well else "named"
        return kind, wall, f"t = {e.t:.4g} (oracle cond {o.cond:.2g}): {str(e)[:160]}"
    except Exception as e:  # classified, not hidden
        tb = traceback.format_exc(limit=-3).replace("\n", " | ")
        return "other", time.perf_counter() - t0, f"{type(e).__name__}: {e} {tb}"[:400]
    wall = time.perf_counter() - t0
    if not (np.isfinite(tr.q).all() and np.isfinite(tr.v).all()):
        return "nonfinite", wall, ""
    phi = float(np.max(tr.residual_position)) if model.m else 0.0
    phi_max = 1e-5 if options.get("stabilization") in ("baumgarte", "none") else 1e-7
    drift = float(np.abs(tr.energy_drift).max() / max(np.abs(tr.energy).max(), 1e-12))
    loop = "compiled" if tr.stats["compiled"] else "Python"
    detail = f"max |Φ| {phi:.2e}, energy drift {drift:.2e}, {tr.stats['steps']} steps ({loop} loop)"
    if phi > phi_max:
        return "phi", wall, detail
    if drift > 1e-5:
        return "drift", wall, detail
    if wall > slow:
        return "slow", wall, detail
    return "ok", wall, detail


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=300, help="number of mechanisms")
    p.add_argument("--seed", type=int, default=1, help="census seed (recorded)")
    p.add_argument("--t-end", type=float, default=0.3, help="simulated seconds per run")
    p.add_argument("--method", default="augmented")
    p.add_argument("--stabilization", default="projection")
    p.add_argument("--integrator", default="DOP853")
    p.add_argument("--rtol", type=float, default=1e-10, help="rtol = atol of the integrator")
    p.add_argument("--slow", type=float, default=30.0, help="seconds above which a run counts")
    p.add_argument(
        "--python-loop", action="store_true", help="compiled=False: every run in the Python loop"
    )
    p.add_argument("--show", type=int, default=None, help="print the code of case SHOW")
    a = p.parse_args()
    if a.show is not None:
        print(mx.random_mechanism((a.seed, a.show)).code())
        return
    # compile (or load) the loops first: the first run would count their compilation
    # (30 s on an empty numba cache) as a slow run
    try:
        ld.simulate(ld.examples.four_bar(), t_end=0.01, method=a.method,
                    integrator=a.integrator, stabilization=a.stabilization,
                    compiled=False if a.python_loop else None)  # fmt: skip
    except ld.LoopdynError:
        pass
    counts = dict.fromkeys(KINDS, 0)
    walls = []
    compiled = 0
    start = time.perf_counter()
    print(
        f"simulation census: N = {a.n}, seed = {a.seed}, t_end = {a.t_end} s, "
        f"method = {a.method}, {a.integrator}, {a.stabilization}, rtol = atol = {a.rtol:g}"
        f"{' (Python loop)' if a.python_loop else ''}; "
        f"loopdyn {ld.__version__}",
        flush=True,
    )
    for i in range(a.n):
        mech = mx.random_mechanism((a.seed, i))
        if mech.model.nv == 0:
            continue
        kind, wall, detail = run_one(
            mech, a.t_end, a.method, a.slow, stabilization=a.stabilization,
            integrator=a.integrator, rtol=a.rtol, atol=a.rtol,
            compiled=False if a.python_loop else None,
        )  # fmt: skip
        counts[kind] += 1
        walls.append(wall)
        compiled += detail.endswith("(compiled loop)")
        if kind != "ok":
            print(f"  case {i}: {kind} ({wall:.2f} s) {detail}", flush=True)
    bad = sum(counts[k] for k in KINDS if k not in ("ok", "named"))
    print(
        f"{len(walls)} runs in {time.perf_counter() - start:.0f} s (median {np.median(walls):.3f} "
        f"s, max {max(walls):.2f} s): "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f"; failures {bad}; {compiled} completed in the compiled loop"
    )


if __name__ == "__main__":
    main()
