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

``method="denoc"``: Saha & Schiehlen's recursive inverse dynamics IDA-1..3 for the
parallel mechanisms of ``ld.parallel_structure`` (O(n), no dense matrix): the
actuator forces from the actuated accelerations, the multipliers from the wrenches
the legs transmit through their cut joints (``loopdyn.methods.denoc.inverse_terms``),
and the same residual test on the equations of motion with the given q̈.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ActuationError
from loopdyn.kinematics.closures import constraints
from loopdyn.tree import rnea
from loopdyn.validation import configuration, scalar, vector


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


METHODS = ("generic", "denoc")


def inverse_dynamics(
    model, q, v, qdd, actuated=None, tol=1e-8, closure_tol=1e-6, data=None, method="generic"
):
    """Actuator forces and closure multipliers producing ``qdd`` at (q, v).

    ``actuated``: indices into v of the driven coordinates (default
    ``model.actuated``).  ``method``: ``"generic"`` (the least-squares solve of
    ``[B Jᵀ] [u; λ] = M q̈ + h`` above, any model) or ``"denoc"`` (parallel mechanisms of
    ``ld.parallel_structure`` with their own actuators, ``ModelError`` otherwise;
    its closure check is its own, on each leg).  Raises :class:`ActuationError` when
    the motion violates
    the closures (J q̇ = 0 or J q̈ = γ off by more than ``closure_tol`` relative to
    |J| max(|q̇|, 1) and |J| max(|q̈|, 1) + |γ|: states from an integrator or a
    controller's estimate pass, a motion off the mechanism does not) or the
    actuators cannot produce it (relative residual above ``tol``).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    qdd = vector(qdd, model.nv, "qdd", model)
    tol = scalar(tol, "tol", model, positive=True)
    closure_tol = scalar(closure_tol, "closure_tol", model, positive=True)
    act = model.actuated if actuated is None else _indices(model, actuated)
    if method == "denoc":
        return _denoc(model, q, v, qdd, act, tol, data)
    b = rnea(model, q, v, qdd, data=data)
    na = act.size
    if model.m:
        _, J, gamma = constraints(model, q, v, data=data)
        jmax = float(np.abs(J).max(initial=0.0))
        ev = float(np.abs(J @ v).max())
        ea = float(np.abs(J @ qdd - gamma).max())
        cerr = max(ev, ea)
        if ev > closure_tol * jmax * max(np.abs(v).max(initial=0.0), 1.0):
            raise ActuationError(
                f"{model.name}: the velocity v violates the closures (max |J v| = {ev:.3g}); "
                "give a consistent velocity (ld.complete_velocity)"
            )
        amax = max(np.abs(qdd).max(initial=0.0), 1.0)
        if ea > closure_tol * (jmax * amax + np.abs(gamma).max()):
            raise ActuationError(
                f"{model.name}: the acceleration qdd violates the closures (max |J qdd - γ| = "
                f"{ea:.3g}); give a consistent acceleration "
                "(loopdyn.analysis.motion.consistent_acceleration)"
            )
    else:
        J = np.zeros((0, model.nv))
        cerr = 0.0
    A = np.zeros((model.nv, na + model.m))
    A[act, np.arange(na)] = 1.0
    A[:, na:] = J.T
    x, *_ = np.linalg.lstsq(A, b, rcond=None)
    res = float(np.linalg.norm(A @ x - b))
    scale = max(1.0, float(np.linalg.norm(b)))
    rank_J = np.linalg.matrix_rank(J) if J.size else 0
    dof = model.nv - rank_J
    over = na > dof
    _check(model, act, res, scale, cerr, tol)
    tau = np.zeros(model.nv)
    tau[act] = x[:na]
    return InverseDynamicsResult(tau, x[:na].copy(), x[na:].copy(), res, over, cerr)


def _indices(model, actuated):
    """``actuated`` as unique indices into v (ValueError naming it otherwise)."""
    try:
        a = np.asarray(actuated).reshape(-1)
    except (TypeError, ValueError):
        a = None
    if a is None or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{model.name}: actuated must be indices into v, got {actuated!r}")
    a = a.astype(np.int64)
    if np.any((a < 0) | (a >= model.nv)) or np.unique(a).size != a.size:
        raise ValueError(
            f"{model.name}: actuated must be distinct indices in 0..{model.nv - 1}, got "
            f"{a.tolist()}"
        )
    return a


def _check(model, act, res, scale, cerr, tol):
    """Raise :class:`ActuationError` if the residual ``res`` exceeds ``tol · scale``."""
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


def _denoc(model, q, v, qdd, act, tol, data):
    """``inverse_dynamics(..., method="denoc")``: IDA-1..3 and the multipliers, O(n)."""
    from loopdyn.methods import denoc

    if not np.array_equal(act, model.actuated):
        raise ValueError(
            f"{model.name}: method='denoc' drives the model's own actuated coordinates "
            f"{model.actuated.tolist()}, got actuated={act.tolist()}; use method='generic'"
        )
    tau, lam, res, b2, cerr = denoc.inverse_terms(model, q, v, qdd, data=data)
    scale = max(1.0, b2)
    _check(model, act, res, scale, cerr, tol)
    return InverseDynamicsResult(tau, tau[act].copy(), lam, res, False, cerr)
