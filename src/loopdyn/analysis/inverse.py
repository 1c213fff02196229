"""Closed-loop inverse dynamics: actuator forces and closure forces for a given motion.

For a consistent (q, q̇, q̈) the equations of motion M q̈ + h = B u + Jᵀ λ (eq. 8
with τ = B u, B selecting the actuated coordinates) are solved for the actuator
forces u and the multipliers λ together:

    [B  Jᵀ] [u; λ] = M q̈ + h = rnea(q, q̇, q̈)

- exactly actuated (rank [B Jᵀ] = na + rank J): a unique solution;
- over-actuated (more actuators than degrees of freedom): the minimum-norm
  least-squares solution, with the residual reported;
- under-actuated or a singular configuration: if the residual is not ~0 the
  motion cannot be produced and :class:`ActuationError` is raised.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ActuationError
from loopdyn.kinematics.closures import constraints
from loopdyn.tree import rnea
from loopdyn.validation import configuration, vector


@dataclass
class InverseDynamicsResult:
    """``tau`` (nv, non-zero only at ``model.actuated``), ``u`` (the actuated entries),
    ``lam`` (m, multipliers as in ``ForwardDynamicsResult``), ``residual`` (norm of
    the unexplained generalized force), ``over_actuated`` and ``constraint_error``
    (max violation of J q̇ = 0 and J q̈ = γ by the given motion)."""

    tau: np.ndarray
    u: np.ndarray
    lam: np.ndarray
    residual: float
    over_actuated: bool
    constraint_error: float


def inverse_dynamics(model, q, v, qdd, actuated=None, tol=1e-8, data=None):
    """Actuator forces and closure multipliers producing ``qdd`` at (q, v).

    ``actuated``: indices into v of the driven coordinates (default
    ``model.actuated``).  Raises :class:`ActuationError` when the actuators cannot
    produce the motion (relative residual above ``tol``).
    """
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    qdd = vector(qdd, model.nv, "qdd", model)
    act = model.actuated if actuated is None else np.asarray(actuated, dtype=np.int64).reshape(-1)
    b = rnea(model, q, v, qdd, data=data)
    na = act.size
    if model.m:
        _, J, gamma = constraints(model, q, v, data=data)
        cerr = float(max(np.abs(J @ v).max(), np.abs(J @ qdd - gamma).max()))
    else:
        J = np.zeros((0, model.nv))
        cerr = 0.0
    A = np.zeros((model.nv, na + model.m))
    A[act, np.arange(na)] = 1.0
    A[:, na:] = J.T
    x, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = float(np.linalg.norm(A @ x - b))
    scale = max(1.0, float(np.linalg.norm(b)))
    rank_J = np.linalg.matrix_rank(J) if model.m else 0
    dof = model.nv - rank_J
    over = na > dof
    if res > tol * scale:
        names = [model.joint_names[i] for i in range(model.nbodies) if model.topo[i, 5] > 0]
        hint = (
            "the motion violates the closures"
            if cerr > 1e-6 * scale
            else (
                "the actuators do not span the mechanism's motion here (under-actuated or singular)"
            )
        )
        raise ActuationError(
            f"{model.name}: actuators at coordinates {act.tolist()} cannot produce this motion "
            f"(residual {res:.3g} of {scale:.3g}); {hint}. Joints: {', '.join(names)}"
        )
    tau = np.zeros(model.nv)
    tau[act] = x[:na]
    return InverseDynamicsResult(tau, x[:na].copy(), x[na:].copy(), res, over, cerr)
