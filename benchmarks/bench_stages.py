"""Where a method's kernel spends its time: stage by stage, inside compiled code.

Run from the repository root::

    python benchmarks/bench_stages.py slm four_bar five_bar
    python benchmarks/bench_stages.py denoc five_bar stewart

Each method's kernel is replayed by a compiled function that stops after stage k
(``stop``) and runs N times in a compiled loop, so no Python dispatch is counted;
a stage's cost is the difference of the cumulative times of stopping after it and
before it (minimum over alternated rounds).  The stages are the kernel's own calls
in its own order (``methods.slm.slm_kernel``, ``methods.denoc.denoc_kernel``); the
last row is the whole kernel less the entry's dispatch.  The replay's q̈ is checked
against ``ld.forward_dynamics``.  Timings are wall-clock: run on a quiet machine.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from bench_denoc import _state
from loopdyn.kernels import tiers
from loopdyn.kernels.numba_internals import as_input, unliteral
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods import denoc as D
from loopdyn.methods import slm as S
from loopdyn.methods.common import accept, input_status, max_abs
from loopdyn.tree.crba import crba_from_poses
from loopdyn.tree.rnea import rnea_from_kinematics

tiers.set_policy("compiled")  # time the compiled tier (first calls compile)

SLM_STAGES = (
    "input checks", "forward kinematics", "RNEA (h)", "bias accelerations",
    "closure terms (J, γ)", "CRBA (M)", "λ (eq. 12)", "q̈ (eq. 11)", "acceptance check",
)  # fmt: skip
DENOC_STAGES = (
    "input checks", "forward kinematics", "bias accelerations", "closure terms (rows, γ)",
    "rates (7-14)", "row wrenches", "accelerations at θ̈ = 0", "inverse dynamics (C θ̇)",
    "GIM (30-34)", "solve, accelerations", "update wrenches", "λ", "loop check",
)  # fmt: skip


@njit
def _slm(ctx, q, v, tau, qdd, lam, stop, N):
    acc = 0.0
    for _ in range(N):
        m, d = handles(ctx)
        acc += input_status(m, q, v, tau)
        if stop == 0:
            continue
        fk_kernel(m, d, q, v)
        if stop == 1:
            continue
        rnea_from_kinematics(m, d, as_input(d.zeros), as_input(d.fext[:0]), d.phi)
        for i in range(m.nv):
            d.phi[i] = tau[i] - d.phi[i]
        if stop == 2:
            continue
        bias_accelerations(m, d)
        if stop == 3:
            continue
        closure_terms(m, d, q, v, unliteral(True), unliteral(True))
        if stop == 4:
            continue
        crba_from_poses(m, d, d.M)
        if stop == 5:
            continue
        r = d.nrows
        ratio = S.slm_multipliers(d.M, d.J, d.phi, d.gamma, d.rows, d.Y, d.Sm, d.x, lam)
        if stop == 6:
            continue
        eta = max_abs(d.x)
        S.slm_accelerations(m, d, lam, r, qdd)
        if stop == 7:
            continue
        acc += accept(m, d, ratio, qdd, lam, r, eta)
    return acc


@njit
def _denoc(ctx, pb, q, v, tau, qdd, lam, stop, N):
    acc = 0.0
    for _ in range(N):
        m, d = handles(ctx)
        acc += input_status(m, q, v, tau)
        if stop == 0:
            continue
        fk_kernel(m, d, q, v)
        if stop == 1:
            continue
        bias_accelerations(m, d)
        if stop == 2:
            continue
        closure_terms(m, d, q, v, unliteral(True), unliteral(False))
        if stop == 3:
            continue
        ratio = D.denoc_rates(m, d, pb, v)
        if stop == 4:
            continue
        D.row_wrenches(m, d, pb)
        if stop == 5:
            continue
        thdd, arate = D._f1(pb, D._THDD), D._f1(pb, D._ARATE)
        thdd[:] = 0.0
        D.denoc_accelerations(pb, thdd, unliteral(True))
        ascale = max_abs(arate)
        if stop == 6:
            continue
        D.denoc_inverse_dynamics(m, d, pb, tau, unliteral(True))
        if stop == 7:
            continue
        D.generalized_inertia(pb)
        if stop == 8:
            continue
        gratio = D.actuated_solve(pb, qdd)
        if stop == 9:
            continue
        D.update_wrenches(pb)
        if stop == 10:
            continue
        lratio = D.multipliers(pb, tau, lam)
        if stop == 11:
            continue
        acc += D.loop_check(m, d, pb, min(ratio, gratio, lratio), qdd, lam, ascale)
    return acc


def stages(method, name, rounds, n):
    model = ld.examples.get(name)
    q, v, tau = _state(model)
    ref = ld.forward_dynamics(model, q, v, tau, method=method)
    ctx = model._data.ctx
    qdd, lam = np.empty(model.nv), np.empty(model.m)
    if method == "slm":
        labels = SLM_STAGES

        def run(stop, count):
            _slm(ctx, q, v, tau, qdd, lam, stop, count)
    else:
        labels = DENOC_STAGES
        pb = D.plan_for(model, model._data).buf

        def run(stop, count):
            _denoc(ctx, pb, q, v, tau, qdd, lam, stop, count)

    k = len(labels)
    for s in range(k):
        run(s, 10)  # compile
    best = [np.inf] * k
    for _ in range(rounds):
        for s in range(k):
            t0 = time.perf_counter()
            run(s, n)
            best[s] = min(best[s], (time.perf_counter() - t0) / n * 1e9)
    err = np.abs(qdd - ref.qdd).max() / max(np.abs(ref.qdd).max(), 1e-300)
    print(f"{method} on {name} (nbodies {model.nbodies}, nv {model.nv}, m {model.m}); "
          f"q̈ of the replay vs ld.forward_dynamics {err:.1e}")  # fmt: skip
    prev = 0.0
    for label, t in zip(labels, best, strict=True):
        print(f"  {label:<26}{max(t - prev, 0.0):8.0f} ns   (cumulative {t:7.0f})")
        prev = t
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("method", choices=("slm", "denoc"))
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000, help="calls per timing")
    a = ap.parse_args()
    for name in a.models:
        stages(a.method, name, a.rounds, a.n)


if __name__ == "__main__":
    main()
