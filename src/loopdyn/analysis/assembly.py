"""Consistent states: positions by Newton's method on Φ(q) = 0, velocities from J v = 0.

Generalized coordinate partitioning (``partition``) picks dependent coordinates as
the pivot columns of a column-pivoted QR of J; the rest are independent.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import AssemblyError
from loopdyn.kinematics.closures import constraint_jacobian, constraints, rank_tolerance
from loopdyn.kinematics.configuration import integrate
from loopdyn.validation import configuration, scalar, vector

# restarts of ``assemble`` when Newton + Levenberg–Marquardt end in a local minimum of
# |Φ|² away from a solution: the free coordinates of the guess moved uniformly by up to
# these radii (rad or m), in turn, from a fixed seed (the result is reproducible).  On the
# 10 000 mechanisms of the seed-11 census, every such guess (0.1 rad from a solution) closed
# within 4 restarts.
RESTARTS = 12
RESTART_RADII = (0.05, 0.1, 0.2)


@dataclass(frozen=True)
class Partition:
    """Independent / dependent coordinates (indices into v) and the condition number of J_dep."""

    independent: np.ndarray
    dependent: np.ndarray
    condition: float


def partition(model, q, data=None):
    """Choose independent coordinates automatically (generalized coordinate partitioning).

    Column-pivoted QR of J(q): the first rank(J) pivot columns are the dependent
    coordinates (the best-conditioned square block J_dep), the others independent.
    rank(J) is ``ld.constraint_rank``'s (``rank_tolerance``).  With a tolerance of its own
    (10 max(m, nv) ε on the QR's diagonal), at a state 3.6e-13 off the manifold, where a
    swapped duplicate closure's rows are independent to that order (σ_11 = 5.7e-13 =
    1e-13 σ_max), it found one dependent coordinate more than the independent rows, and a
    simulation's re-partitioning stopped there.
    """
    J = constraint_jacobian(model, q, data)
    if model.m == 0:
        return Partition(np.arange(model.nv), np.zeros(0, dtype=np.int64), 1.0)
    import scipy.linalg as sla  # lazily: scipy.linalg costs ~0.15 s at import

    _, _, piv = sla.qr(J, mode="economic", pivoting=True)
    sv_all = np.linalg.svd(J, compute_uv=False)
    rank = int(np.sum(sv_all > rank_tolerance(J.shape, sv_all)))
    dep = np.sort(piv[:rank])
    ind = np.sort(piv[rank:])
    sv = np.linalg.svd(J[:, dep], compute_uv=False)
    cond = float(sv[0] / sv[rank - 1]) if rank else 1.0
    return Partition(ind.astype(np.int64), dep.astype(np.int64), cond)


def _free_columns(model, fixed):
    fixed = model.actuated if fixed is None else np.asarray(fixed, dtype=np.int64).reshape(-1)
    if np.any((fixed < 0) | (fixed >= model.nv)):
        raise ValueError(f"{model.name}: fixed indices must lie in 0..{model.nv - 1}, got {fixed}")
    mask = np.ones(model.nv, dtype=bool)
    mask[fixed] = False
    return np.flatnonzero(mask), fixed


def _worst_closure(model, Phi):
    j = int(np.argmax(np.abs(Phi)))
    k = int(model.row_int[j, 0])
    return model.closures[k], float(np.linalg.norm(Phi[model.closure_rows[k]]))


def assemble(model, q_guess, fixed=None, tol=1e-12, max_iter=50, data=None):
    """Positions satisfying every closure, keeping the ``fixed`` coordinates.

    ``fixed``: indices into v of coordinates held at their guessed values
    (default: ``model.actuated``; pass ``[]`` to move every coordinate).  Newton's
    method with a minimum-norm step (redundant closures are fine) and a
    backtracking line search; where it stalls (far from a solution, or near a
    singular configuration), a trust-region Levenberg–Marquardt solve of
    min |Φ|² over the free coordinates (``scipy.optimize.least_squares``), then
    Newton again; if that ends in a local minimum of |Φ|² (a residual that no step
    reduces), up to ``RESTARTS`` restarts from the guess with the free coordinates
    moved by up to 0.05, 0.1 or 0.2 (seeded: reproducible), keeping the best.
    Converged when ``max |Φ| <= tol``, or when Newton can reduce it no further and
    it is below 100 ``tol`` (the rounding floor of the geometry).
    Raises :class:`AssemblyError` naming the closure with the largest residual and
    by how much it stays open when the closures cannot be satisfied near this guess.
    """
    q = configuration(model, q_guess).copy()
    tol = scalar(tol, "tol", model, positive=True)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"{model.name}: max_iter must be a positive integer, got {max_iter!r}")
    if model.m == 0:
        return q
    free, fixed = _free_columns(model, fixed)
    q, err, Phi = _solve(model, q, free, tol, max_iter, data)
    if err > 100.0 * tol and free.size:
        # a local minimum of |Φ|² (often a singular configuration of the loops): restarts
        # from the guess moved by up to RESTART_RADII on the free coordinates, seeded
        rng = np.random.default_rng(0)
        q_start = configuration(model, q_guess)
        for k in range(RESTARTS):
            dv = np.zeros(model.nv)
            dv[free] = rng.uniform(-1.0, 1.0, free.size) * RESTART_RADII[k % len(RESTART_RADII)]
            q_try, err_try, Phi_try = _solve(
                model, integrate(model, q_start, dv), free, tol, max_iter, data
            )
            if err_try < err:
                q, err, Phi = q_try, err_try, Phi_try
            if err <= 100.0 * tol:
                break
    if err <= 100.0 * tol:
        return q
    name, res = _worst_closure(model, Phi)
    held = ", ".join(str(i) for i in fixed) or "none"
    raise AssemblyError(
        f"{model.name}: closure {name!r} stays open by {res:.3g} (max |Φ| = {err:.3g}, "
        f"tolerance {tol:.3g}) with coordinates [{held}] held fixed, after Newton, "
        f"Levenberg–Marquardt and {RESTARTS if free.size else 0} restarts within "
        f"{max(RESTART_RADII)} of the guess; the loop may not close "
        "for these values: change the fixed coordinates or the guess"
    )


def _solve(model, q, free, tol, max_iter, data):
    """Newton, then (if it stalls) Levenberg–Marquardt and Newton again: (q, max |Φ|, Φ)."""
    q, err, Phi = _newton(model, q, free, tol, max_iter, data)
    if err > tol:
        q = _levenberg_marquardt(model, q, free, tol, data)
        q, err, Phi = _newton(model, q, free, tol, max_iter, data)
    return q, err, Phi


def _newton(model, q, free, tol, max_iter, data):
    """Newton's method with minimum-norm steps and backtracking: (q, max |Φ|, Φ); stops
    at ``tol`` or when a step no longer reduces the residual."""
    Phi, J, _ = constraints(model, q, data=data)
    err = np.abs(Phi).max()
    for _ in range(max_iter):
        if err <= tol:
            break
        dv = np.zeros(model.nv)
        dv[free] = -np.linalg.lstsq(J[:, free], Phi, rcond=None)[0]
        step = 1.0
        while step > 1e-4:
            q_try = integrate(model, q, dv, step)
            Phi_try, J_try, _ = constraints(model, q_try, data=data)
            err_try = np.abs(Phi_try).max()
            if err_try < err or err_try <= tol:
                break
            step *= 0.5
        else:
            break
        q, Phi, J, err = q_try, Phi_try, J_try, err_try
    return q, err, Phi


def _levenberg_marquardt(model, q0, free, tol, data):
    """min |Φ(q0 ⊕ x)|² over the free coordinates x by scipy's trust-region LM."""
    from scipy.optimize import least_squares

    def at(x):
        dv = np.zeros(model.nv)
        dv[free] = x
        return integrate(model, q0, dv)

    def fun(x):
        return constraints(model, at(x), data=data)[0]

    def jac(x):
        return constraints(model, at(x), data=data)[1][:, free]

    try:
        sol = least_squares(fun, np.zeros(free.size), jac=jac, method="lm", xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200 * (free.size + 1))  # fmt: skip
    except ValueError:  # fewer residuals than free coordinates: 'lm' needs m >= n
        sol = least_squares(fun, np.zeros(free.size), jac=jac, method="trf", xtol=1e-15,
                            ftol=1e-15, gtol=1e-15, max_nfev=200 * (free.size + 1))  # fmt: skip
    return at(sol.x)


def complete_velocity(model, q, v_guess, fixed=None, data=None):
    """Velocities with J(q) v = 0 keeping ``v[fixed]`` (default: the actuated ones).

    The other components are the minimum-norm correction of ``v_guess``; raises
    :class:`AssemblyError` if the fixed velocities are incompatible with the
    closures (e.g. two actuators of one loop given inconsistent rates).
    """
    v = vector(v_guess, model.nv, "v", model).copy()
    if model.m == 0 or model.nv == 0:  # nothing to complete (nothing moves: J v = 0)
        return v
    free, fixed = _free_columns(model, fixed)
    J = constraint_jacobian(model, q, data)
    rhs = -J @ v
    dv = np.linalg.lstsq(J[:, free], rhs, rcond=None)[0]
    v[free] += dv
    res = np.abs(J @ v).max()
    scale = max(1.0, np.abs(v).max()) * max(1.0, np.abs(J).max())
    if res > 1e-9 * scale:
        raise AssemblyError(
            f"{model.name}: velocities of coordinates {list(fixed)} violate the closures "
            f"(residual {res:.3g}); they cannot all be prescribed independently"
        )
    return v
