"""Consistent states: positions by Newton's method on Φ(q) = 0, velocities from J v = 0.

Generalized coordinate partitioning (``partition``) picks dependent coordinates as
the pivot columns of a column-pivoted QR of J; the rest are independent.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import AssemblyError
from loopdyn.kinematics.closures import constraint_jacobian, constraints
from loopdyn.kinematics.configuration import integrate
from loopdyn.validation import configuration, vector


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
    """
    J = constraint_jacobian(model, q, data)
    if model.m == 0:
        return Partition(np.arange(model.nv), np.zeros(0, dtype=np.int64), 1.0)
    import scipy.linalg as sla  # lazily: scipy.linalg costs ~0.15 s at import

    _, R, piv = sla.qr(J, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    tol = max(J.shape) * np.finfo(float).eps * max(d[0], 1.0) * 10 if d.size else 0.0
    rank = int(np.sum(d > tol))
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
    backtracking line search; converged when ``max |Φ| <= tol``.  Raises
    :class:`AssemblyError` naming the closure with the largest residual when the
    closures cannot be satisfied from this guess.
    """
    q = configuration(model, q_guess).copy()
    if model.m == 0:
        return q
    free, fixed = _free_columns(model, fixed)
    Phi, J, _ = constraints(model, q, data=data)
    err = np.abs(Phi).max()
    for _ in range(max_iter):
        if err <= tol:
            return q
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
    if err <= tol:
        return q
    name, res = _worst_closure(model, Phi)
    held = ", ".join(str(i) for i in fixed) or "none"
    raise AssemblyError(
        f"{model.name}: cannot assemble closure {name!r} (residual {res:.3g}, max |Φ| = {err:.3g}) "
        f"with coordinates [{held}] held fixed; the loop may not close for these values: "
        "change the fixed coordinates or the guess"
    )


def complete_velocity(model, q, v_guess, fixed=None, data=None):
    """Velocities with J(q) v = 0 keeping ``v[fixed]`` (default: the actuated ones).

    The other components are the minimum-norm correction of ``v_guess``; raises
    :class:`AssemblyError` if the fixed velocities are incompatible with the
    closures (e.g. two actuators of one loop given inconsistent rates).
    """
    v = vector(v_guess, model.nv, "v", model).copy()
    if model.m == 0:
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
