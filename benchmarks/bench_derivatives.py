"""Analytic derivatives of closed-loop forward dynamics against Pinocchio's.

Run from the repository root::

    python benchmarks/bench_derivatives.py            # four_bar, stewart, ladders (< 1 min)
    python benchmarks/bench_derivatives.py --quick    # fewer rounds
    python benchmarks/bench_derivatives.py --ladder 2 4 8 16 32   # other ladder sizes

Per model, timed in alternation within one process (``benchmarks/timing.py``):
``ld.forward_dynamics_derivatives(model, q, v, tau, tangent=False)`` (q̈, λ and their
derivatives in q, v, τ), the default call (``tangent=True``: the tangent-space
projection is computed at the first read of one of its fields), the default call with
``dqdd_dy`` read (the projection computed), the first with ``out=``, and Pinocchio's
``constraintDynamics`` followed by ``computeConstraintDynamicsDerivatives``
(``StdVec`` containers, ``ProximalSettings(1e-12, 1e-8, 20)``).  Ratios are ours over
Pinocchio's, median (min–max) over the rounds.  Pinocchio's q̈ and ∂q̈/∂τ are checked
against ours first (its ∂/∂q, ∂/∂v are of another constraint form, and disagree with
finite differences of its own constraintDynamics on loop closures: docs/derivatives.md).

Scaling: ``spatial_ladder(L)`` (nv = 3L + 2, m = 3L) for a few L, the same three timings;
the last column is ours over nv², the output's size (flat where the cost grows as the
output does).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import loopdyn as ld
from timing import alternate, fmt_ratio, median_us, ratio


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, model.q0, v)
    tau = rng.normal(size=model.nv)
    return np.array(model.q0), v, tau


def run(name, rounds, **kw):
    import pinocchio as pin

    model = ld.examples.get(name, **kw)
    q, v, tau = _state(model)
    from loopdyn.interop.pinocchio import PinocchioExport

    ex = PinocchioExport(model)
    pm, pd = ex.model, ex.model.createData()
    cms, cds = ex.constraints, ex.constraint_datas()  # the StdVec containers
    pin.initConstraintDynamics(pm, pd, cms, cds)
    settings = pin.ProximalSettings(1e-12, 1e-8, 20)
    qp, vp, tp = ex.q(q), ex.v(v), ex.v(tau)

    def pin_both():
        pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, settings)
        return pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, settings)

    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    pin_both()
    eq = np.abs(ex.v_from(pd.ddq) - d.qdd).max() / np.abs(d.qdd).max()
    et = np.abs(ex.matrix_from(pd.ddq_dtau) - d.dqdd_dtau).max() / np.abs(d.dqdd_dtau).max()
    title = name + "".join(f"({v})" for v in kw.values())
    print(f"\n{title} (nv={model.nv}, m={model.m}): Pinocchio vs ours: q̈ {eq:.1e}, ∂q̈/∂τ {et:.1e}")
    ours = lambda: ld.forward_dynamics_derivatives(model, q, v, tau, tangent=False)  # noqa: E731
    ours_t = lambda: ld.forward_dynamics_derivatives(model, q, v, tau)  # noqa: E731
    ours_y = lambda: ld.forward_dynamics_derivatives(model, q, v, tau).dqdd_dy  # noqa: E731
    buf = ld.forward_dynamics_derivatives(model, q, v, tau, tangent=False)
    fdd = ld.forward_dynamics_derivatives
    ours_out = lambda: fdd(model, q, v, tau, tangent=False, out=buf)  # noqa: E731
    t = alternate([pin_both, ours, ours_t, ours_y, ours_out], rounds, min_time=0.05)
    rows = (
        ("pin constraintDynamics + derivatives", None),
        ("ld tangent=False (q̈, λ, derivatives)", 1),
        ("ld default (tangent=True)", 2),
        ("ld default, ∂q̈/∂y read (projection)", 3),
        ("ld tangent=False, out= (block reused)", 4),
    )
    for k, (what, col) in enumerate(rows):
        r = "" if col is None else f"   ratio {fmt_ratio(ratio(t, col, 0))}"
        print(f"   {what:<40}{median_us(t, k):9.1f} µs{r}")
    return model.nv, median_us(t, 1), median_us(t, 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--ladder", type=int, nargs="*", default=[2, 4, 8, 16])
    p.add_argument("models", nargs="*", default=["four_bar", "stewart"])
    a = p.parse_args()
    rounds = 5 if a.quick else 11
    for name in a.models:
        run(name, rounds)
    rows = [(L, *run("spatial_ladder", rounds, L=L)) for L in a.ladder]
    if rows:
        print("\nspatial_ladder scaling (medians):")
        print("     L   nv   ld µs   pin µs   ld µs / nv²")
        for L, nv, ours, pin in rows:
            print(f"   {L:3d} {nv:4d} {ours:8.1f} {pin:8.1f}   {ours / nv**2:8.3f}")


if __name__ == "__main__":
    main()
