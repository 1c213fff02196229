"""Inverse-dynamics regressors and base inertial parameters (identification).

Each body's 10 inertial parameters, in its body frame, ordered as Pinocchio's
``Inertia.toDynamicParameters``::

    π_i = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]

with c the centre of mass and I the rotational inertia *about the body origin*
(I = I_c + m ([c]×)ᵀ[c]×, the upper-left block of ``model.inertia[i]``); π stacks
them body by body (10 nb).  The body wrench of the Newton–Euler recursion,
f_i = I_i A_i + V_i ×* I_i V_i (A_i including the fictitious base acceleration -g),
is linear in π_i (Atkeson, An & Hollerbach 1986):

    f_i = Y_i(V_i, A_i) π_i                         (1)  Y_i: 6 × 10, body frame

and each joint force sums the wrenches of the bodies it carries,
τ_j = S_jᵀ Σ_{i ⪰ j} jX_iᵀ f_i, so the tree's inverse dynamics is

    rnea(q, q̇, q̈) = Y(q, q̇, q̈) π                   (2)  Y: nv × 10 nb

(``joint_torque_regressor``; Pinocchio's ``computeJointTorqueRegressor`` on the same
tree).  For a closed-loop mechanism the actuator forces u and the closure multipliers
λ solve [B Jᵀ] [u; λ] = rnea(q, q̇, q̈) (``loopdyn.analysis.inverse``), whose
minimum-norm solution is [u; λ] = [B Jᵀ]⁺ Y π, linear in π again:

    u = Y_a π,  λ = Y_λ π,  [Y_a; Y_λ] = [B Jᵀ]⁺ Y      (3)

(``closed_loop_regressor``; exact when [B Jᵀ] has full row rank; otherwise the motion
is producible only by the π with (1 - A A⁺) Y π = 0, the ``residual`` rows).

Base parameters (Gautier & Khalil 1990; Gautier 1991, the numerical QR method): the
columns of regressors stacked over many states W (N × 10 nb) are linearly dependent
(parameters that never move a measured force, combinations that always appear
together).  A QR factorization with column pivoting of W with unit-norm columns,
W D⁻¹ P = Q R, gives the rank r (|R_kk| > ``tol`` |R_00|); with P = [P1 P2] the first
r (independent) and the other columns, W P2 = W P1 K with K = D1⁻¹ R11⁻¹ R12 D2, so

    W π = W P1 (P1ᵀπ + K P2ᵀπ) = W_b β,   β = P1ᵀπ + K P2ᵀπ      (4)

β are the base parameters (the identifiable combinations), W_b = W P1 the base
regressor (``BaseParameters``).
"""

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit, types
from numba.extending import register_jitable

from loopdyn.analysis.inverse import (
    _ACT,
    BAD_INPUT,
    OK,
    _indices,
    _Undetermined,
    generic_inverse,
    non_unique_message,
    work_size,
)
from loopdyn.errors import ActuationError, AssemblyError, ModelError, NonUniqueWarning
from loopdyn.kernels.checks import STATE_BAD, STATE_OK, raise_status, state_status
from loopdyn.kernels.joints import body_velocity, joint_pose
from loopdyn.kernels.linalg import min_norm_lstsq, qr_lstsq
from loopdyn.kernels.numba_internals import BUF, IN, OUT, OUT2, Entry, as_input, block, entry
from loopdyn.kernels.spatial import force_to_parent_at
from loopdyn.kernels.views import handles
from loopdyn.model.model import Model, _check_inertia
from loopdyn.tree.algorithms import _data_ctx
from loopdyn.tree.rnea import forward_body
from loopdyn.validation import configuration, model_arg, scalar, vector, workspace

PARAMETERS = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
"""The names of a body's 10 inertial parameters, in Pinocchio's order."""

BASE_TOL = 1e-8
"""``base_parameters``' default rank cut-off: |R_kk| <= BASE_TOL |R_00| of the pivoted QR of
the column-normalised stacked regressor counts as a dependent column.  Structural
dependencies sit at rounding (~1e-15 relative); the gap to the smallest identifiable
combination is reported (``BaseParameters.gap``)."""

_DONE = -1
_empty = np.empty


# --------------------------------------------------------------------------- kernels
@njit(cache=True, inline="always")
def _inertia_times(p, x):
    """I x of the spatial inertia with parameters p = (m, h, Ī00, Ī01, Ī11, Ī02, Ī12, Ī22)
    (h = m c, Ī about the origin): [Ī ω + h × u; m u + ω × h] for x = [ω; u]."""
    m, hx, hy, hz, b00, b01, b11, b02, b12, b22 = p
    a0, a1, a2, a3, a4, a5 = x[0], x[1], x[2], x[3], x[4], x[5]
    return (
        b00 * a0 + b01 * a1 + b02 * a2 - hz * a4 + hy * a5,
        b01 * a0 + b11 * a1 + b12 * a2 + hz * a3 - hx * a5,
        b02 * a0 + b12 * a1 + b22 * a2 - hy * a3 + hx * a4,
        m * a3 + hz * a1 - hy * a2,
        m * a4 - hz * a0 + hx * a2,
        m * a5 + hy * a0 - hx * a1,
    )


@njit(cache=True)
def body_regressor_column(V, A, i, p):
    """Column p of Y_i (eq. 1): the wrench f = I A + V ×* (I V) (body frame, about the
    body origin, ``[n; f]``) of a body whose inertial parameters are the unit vector e_p,
    at body i's velocity ``V[i]`` and acceleration ``A[i]``.  A 6-tuple.

    I [ω; u] = [Ī ω + h × u; m u + ω × h] (h = m c, Ī about the origin), and
    [ω; u] ×* [n; f] = [ω × n + u × f; ω × f]: ``rnea.forward_body``'s formulas."""
    m = 1.0 if p == 0 else 0.0
    hx, hy, hz = 1.0 if p == 1 else 0.0, 1.0 if p == 2 else 0.0, 1.0 if p == 3 else 0.0
    b00, b01, b11 = 1.0 if p == 4 else 0.0, 1.0 if p == 5 else 0.0, 1.0 if p == 6 else 0.0
    b02, b12, b22 = 1.0 if p == 7 else 0.0, 1.0 if p == 8 else 0.0, 1.0 if p == 9 else 0.0
    w0, w1, w2, w3, w4, w5 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
    inertia = (m, hx, hy, hz, b00, b01, b11, b02, b12, b22)
    f0, f1, f2, f3, f4, f5 = _inertia_times(inertia, A[i])  # I a
    k0, k1, k2, k3, k4, k5 = _inertia_times(inertia, V[i])  # k = I v
    # + v ×* k
    return (
        f0 + (w1 * k2 - w2 * k1 + w4 * k5 - w5 * k4),
        f1 + (w2 * k0 - w0 * k2 + w5 * k3 - w3 * k5),
        f2 + (w0 * k1 - w1 * k0 + w3 * k4 - w4 * k3),
        f3 + (w1 * k5 - w2 * k4),
        f4 + (w2 * k3 - w0 * k5),
        f5 + (w0 * k4 - w1 * k3),
    )


@njit(cache=True)
def regressor_kernel(m, d, q, v, qdd, Y):
    """Y (nv × 10 nb, eq. 2) with rnea(q, q̇, q̈) = Y π.

    The forward pass is rnea's (``d.Xrel``, ``d.S``, body-frame ``d.V``, ``d.A`` with
    -g as the root acceleration); then each column, body i's unit wrench (eq. 1), is
    carried from body i to the root: τ_j = S_jᵀ f, f <- jXλᵀ f."""
    topo, Xrel, S = m.topo, d.Xrel, d.S
    nofext = as_input(d.fext[:0])
    for i in range(m.nb):
        joint_pose(m, d, i, q)
        body_velocity(m, d, i, v)
        forward_body(m, d, i, qdd, nofext)
    for j in range(Y.shape[0]):
        for c in range(Y.shape[1]):
            Y[j, c] = 0.0
    for i in range(m.nb):
        for p in range(10):
            c = 10 * i + p
            f0, f1, f2, f3, f4, f5 = body_regressor_column(d.V, d.A, i, p)
            j = i
            while j >= 0:
                iv = topo[j, 3]
                for k in range(topo[j, 5]):
                    Y[iv + k, c] = (
                        S[j, 0, k] * f0 + S[j, 1, k] * f1 + S[j, 2, k] * f2
                        + S[j, 3, k] * f3 + S[j, 4, k] * f4 + S[j, 5, k] * f5
                    )  # fmt: skip
                lam = topo[j, 0]
                if lam >= 0:  # to the parent's origin and frame: jXλᵀ f
                    f0, f1, f2, f3, f4, f5 = force_to_parent_at(Xrel, j, f0, f1, f2, f3, f4, f5)
                j = lam


@entry
def regressor_entry(ctx, q, v, qdd, Y):
    """``regressor_kernel`` on a Data's buffer: -1 or a ``STATE_*`` status."""
    m, d = handles(ctx)
    st = state_status(m, q, v, qdd, m.nv, m.nv)
    if st != STATE_OK or Y.shape[0] != m.nv or Y.shape[1] != 10 * m.nb:
        return STATE_BAD if st == STATE_OK else st
    regressor_kernel(m, d, q, v, qdd, Y)
    return _DONE


REGRESSOR = Entry(regressor_entry, types.int64, BUF, IN, IN, IN, OUT2)


@entry
def closed_regressor_entry(ctx, q, v, qdd, act, closure_tol, Yt, X, R, w):
    """Eq. (3) compiled, on a dense Data's buffer ``ctx``: ``generic_inverse`` (the closure
    check of ``ld.inverse_dynamics`` at ``closure_tol``, A = [B Jᵀ] and its numerical rank,
    rank J; its results in ``w[:5]``, A in ``w[5 : 5 + nv k]``), the tree regressor into
    ``Yt`` (nv × p, ``regressor_kernel``), X = A⁺ Yt into ``X`` (k × p, k = na + m) and
    the residual Yt - A X into ``R`` (nv × p).  A of full column rank (rank A = k, the
    pivoted QR's cut-off of ``min_norm_lstsq``, numpy's): one Householder QR for every
    column (``qr_lstsq``); otherwise the minimum-norm solve column by column
    (``min_norm_lstsq``, as ``ld.inverse_dynamics``).  ``w``: ``regressor_work_size``
    float64 (nothing is allocated).  Returns ``OK``, ``REFUSED`` (the motion violates the
    closures) or ``BAD_INPUT`` (inputs or shapes refused)."""
    m, d = handles(ctx)
    nv, na = m.nv, act.shape[0]
    k, p = na + m.nr, Yt.shape[1]
    if not (Yt.shape[0] == nv and p == 10 * m.nb and X.shape[0] == k and X.shape[1] == p):
        return BAD_INPUT
    if R.shape[0] != nv or R.shape[1] != p or w.shape[0] < regressor_work_size(nv, k, p):
        return BAD_INPUT
    ws = work_size(nv, k)
    st = generic_inverse(ctx, q, v, qdd, act, math.inf, closure_tol, True,
                         block(w, ws, nv), block(w, ws + nv, m.nr), block(w, 0, ws))  # fmt: skip
    if st != OK:
        return st
    regressor_kernel(m, d, q, v, qdd, Yt)
    A = block(w, 5, (nv, k))
    o = ws + nv + m.nr
    F = block(w, o, (nv, k))
    o += nv * k
    done = False
    if int(w[4]) == k and nv:  # full column rank (k <= nv): one QR, every column
        C = block(w, o, (nv, p))
        for i in range(nv):
            for j in range(k):
                F[i, j] = A[i, j]
            for c in range(p):
                C[i, c] = Yt[i, c]
        if qr_lstsq(F, C) > 0.0:
            for j in range(k):
                for c in range(p):
                    X[j, c] = C[j, c]
            done = True
    if not done:
        B1, x, lsq = block(w, o, (nv, 1)), block(w, o + nv, k), block(w, o + nv + k, 3 * k)
        for c in range(p):
            for i in range(nv):
                for j in range(k):
                    F[i, j] = A[i, j]
                B1[i, 0] = Yt[i, c]
            for j in range(k):
                x[j] = 0.0
            if nv:
                min_norm_lstsq(F, B1, x, lsq)
            for j in range(k):
                X[j, c] = x[j]
    for i in range(nv):
        for c in range(p):
            t = Yt[i, c]
            for j in range(k):
                t -= A[i, j] * X[j, c]
            R[i, c] = t
    return OK


@register_jitable  # Python here, compiled in the entry's check
def regressor_work_size(nv, k, p):
    """Float64 items of ``closed_regressor_entry``'s scratch ``w``."""
    return work_size(nv, k) + nv + k + nv * k + max(nv * p, nv + 4 * k)


CLOSED = Entry(closed_regressor_entry, types.float64, BUF, IN, IN, IN, _ACT, types.float64,
               OUT2, OUT2, OUT2, OUT)  # fmt: skip


# --------------------------------------------------------------------------- parameters
def inertial_parameters(model):
    """π (10 nb,): each body's [m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] (body frame, inertia
    about the body origin; Pinocchio's ``toDynamicParameters`` order), read from the
    model's spatial inertias."""
    I6 = model_arg(model).inertia
    out = np.empty((model.nbodies, 10))
    out[:, 0] = I6[:, 3, 3]
    out[:, 1], out[:, 2], out[:, 3] = I6[:, 2, 4], I6[:, 0, 5], I6[:, 1, 3]  # m [c]× block
    out[:, 4], out[:, 5], out[:, 6] = I6[:, 0, 0], I6[:, 0, 1], I6[:, 1, 1]
    out[:, 7], out[:, 8], out[:, 9] = I6[:, 0, 2], I6[:, 1, 2], I6[:, 2, 2]
    return out.reshape(-1)


def parameter_names(model):
    """``"body.m"``, ``"body.mcx"``, ... for the 10 nb entries of π."""
    return [f"{b}.{p}" for b in model_arg(model).body_names for p in PARAMETERS]


def with_inertial_parameters(model, pi):
    """A copy of ``model`` whose bodies carry the inertial parameters ``pi`` (10 nb,
    ``inertial_parameters``' layout), everything else (joints, frames, closures,
    actuators, ``q0``) unchanged.  Each body is checked as ``ModelBuilder.add_body``
    checks it: :class:`ModelError` naming the body for a mass that is not positive, an
    inertia about the centre of mass I - m([c]×)ᵀ[c]× that is not positive definite, or
    (for a physical body) moments that violate the triangle inequality."""
    model_arg(model)
    pi = vector(pi, 10 * model.nbodies, "pi", model)
    bodies, frames = model._specs
    new = []
    for i, b in enumerate(bodies):
        p = pi[10 * i : 10 * i + 10]
        mass = p[0]
        if not mass > 0.0:
            raise ModelError(f"{model.name}: body {b.name!r}: mass must be positive, got {mass}")
        com = p[1:4] / mass
        Io = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
        Ic = Io - mass * (np.dot(com, com) * np.eye(3) - np.outer(com, com))
        mass, com, Ic = _check_inertia(b.name, mass, com, Ic, b.physical)
        new.append(replace(b, mass=mass, com=com, inertia=Ic))
    out = Model(model.name, new, frames, model.gravity, model.planar, model._closure_specs)
    out.q0, out.description = model.q0, model.description
    for k, x in model.__dict__.items():  # set after the build (metadata)
        if not k.startswith("_") and k not in out.__dict__:
            out.__dict__[k] = x
    return out


# --------------------------------------------------------------------------- regressors
def joint_torque_regressor(model, q, v, qdd, data=None):
    """The tree's inverse-dynamics regressor Y (nv × 10 nb, eq. 2): ``ld.rnea(model, q,
    v, qdd)`` = Y @ ``inertial_parameters(model)`` for every parameter vector.

    Columns 10 i .. 10 i + 9 belong to body i, in ``PARAMETERS`` order (Pinocchio's),
    each the joint forces of a body with unit parameter p in its body frame; gravity
    enters as the base acceleration -g.  Closures are ignored (the spanning tree's
    joint forces); for the actuator forces of a closed loop see
    ``closed_loop_regressor``.  Compiled (``regressor_entry``); inputs as ``ld.rnea``
    takes them."""
    try:
        Y = _empty((model.nv, 10 * model.nbodies))
        ctx = model._ctx if data is None else _data_ctx(model, data)
        if ctx is None:
            ctx = workspace(model, data).ctx
        if REGRESSOR.call(ctx, q, v, qdd, Y) == _DONE:
            return Y
    except (TypeError, AttributeError):  # not real numbers, not a model: explained below
        pass
    d = workspace(model, data)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    qdd = vector(qdd, model.nv, "qdd", model)
    Y = np.empty((model.nv, 10 * model.nbodies))
    raise_status(model, REGRESSOR.call(d.ctx, q, v, qdd, Y), "q, v or qdd")
    return Y


@dataclass
class ClosedLoopRegressor:
    """The regressors of a closed-loop mechanism at one state (eq. 3), p = 10 nb columns.

    ``Y`` (na × p): the actuator forces u = Y π (the entries ``ld.inverse_dynamics``
    returns as ``u`` for a model with parameters π); ``Y_lam`` (m × p): the multipliers
    λ = Y_lam π; ``Y_tree`` (nv × p): the tree regressor (``joint_torque_regressor``);
    ``residual`` (nv × p): (1 - A A⁺) Y_tree, A = [B Jᵀ], zero when the actuators can
    produce any motion (A of full row rank); otherwise only parameters with
    ``residual @ π`` = 0 produce the given motion.  ``actuated``: the actuated
    coordinates (indices into v), the rows of ``Y``.  Uniqueness as in
    ``InverseDynamicsResult``: ``rank`` = rank A, ``nullity``, ``unique`` (u and λ),
    ``tau_unique`` (u), ``over_actuated``; where u is not unique, ``Y`` gives the
    minimum-norm answer, the same as ``ld.inverse_dynamics``."""

    Y: np.ndarray
    Y_lam: np.ndarray
    Y_tree: np.ndarray
    residual: np.ndarray
    actuated: np.ndarray
    rank: int
    nullity: int
    unique: bool
    tau_unique: bool
    over_actuated: bool
    _A: np.ndarray = field(default=None, repr=False)


def closed_loop_regressor(model, q, v, qdd, actuated=None, closure_tol=1e-6, data=None):
    """The actuator-force regressor of a closed-loop mechanism at (q, q̇, q̈) (eq. 3).

    ``[B Jᵀ] [u; λ] = Y_tree π`` (``ld.inverse_dynamics``' equations) solved for all 10 nb
    parameter directions at once, by the same minimum-norm least squares (numpy's
    default cut-off): u = ``Y`` π reproduces ``ld.inverse_dynamics(model', q, v,
    qdd).u`` for a model' = ``with_inertial_parameters(model, π)``, also when the
    actuation is not unique (the minimum-norm answer; a :class:`NonUniqueWarning` as
    there).  ``actuated``: indices into v (default ``model.actuated``).  The motion must
    satisfy the closures (J q̇ = 0, J q̈ = γ within ``closure_tol``, relative as in
    ``ld.inverse_dynamics``), else :class:`ActuationError`.  Returns a
    :class:`ClosedLoopRegressor`.

    Compiled (``closed_regressor_entry``) on the inputs as given; what it refuses (bad
    inputs, a motion off the closures) goes through the NumPy path below, which names
    the culprit."""
    model_arg(model)
    closure_tol = scalar(closure_tol, "closure_tol", model, positive=True)
    act = model.actuated if actuated is None else _indices(model, actuated)
    out = _compiled_regressor(model, q, v, qdd, act, closure_tol, data)
    if out is None:
        out = _numpy_regressor(model, q, v, qdd, act, closure_tol, data)
    if not out.tau_unique:
        null = _Undetermined(model, act, out._A, out.rank)
        msg = non_unique_message(model, act.size, out.rank, out.over_actuated, null)
        warnings.warn(msg, NonUniqueWarning, stacklevel=2)
    return out


def _flags(model, na, k, rank, rank_j):
    """(unique, tau_unique, over_actuated) of ``ClosedLoopRegressor`` (as
    ``ld.inverse_dynamics``' result)."""
    unique = rank >= k
    return bool(unique), bool(unique or rank - rank_j >= na), bool(na > model.nv - rank_j)


def _compiled_regressor(model, q, v, qdd, act, closure_tol, data):
    """``closed_loop_regressor`` in one compiled call, or None where the entry refuses
    the inputs or the motion."""
    nv, na = model.nv, act.size
    k, p = na + model.m, 10 * model.nbodies
    d = workspace(model, data)
    ctx = d.ensure_dense().ctx if model.m else d.ctx
    size = regressor_work_size(nv, k, p)
    w = d.__dict__.get("regressor_work")  # scratch, kept on the Data
    if w is None or w.size < size:
        w = d.regressor_work = np.empty(size)
    Yt, X, R = _empty((nv, p)), _empty((k, p)), _empty((nv, p))
    try:
        st = CLOSED.call(ctx, q, v, qdd, act, closure_tol, Yt, X, R, w)
    except TypeError:  # not real numbers: the NumPy path explains
        return None
    if st != OK:
        return None
    rank, rank_j = int(w[4]), int(w[3])
    A = w[5 : 5 + nv * k].reshape(nv, k).copy()
    return ClosedLoopRegressor(X[:na], X[na:], Yt, R, act, rank, k - rank,
                               *_flags(model, na, k, rank, rank_j), A)  # fmt: skip


def _numpy_regressor(model, q, v, qdd, act, closure_tol, data):
    """``closed_loop_regressor`` with NumPy's ``lstsq``: the checks and their errors."""
    from loopdyn.kinematics.closures import constraints

    Yt = joint_torque_regressor(model, q, v, qdd, data=data)  # checks q, v, qdd
    q, v, qdd = (np.asarray(x, dtype=np.float64) for x in (q, v, qdd))
    na, nv, p = act.size, model.nv, Yt.shape[1]
    if model.m:
        _, J, gamma = constraints(model, q, v, data=data)
        _check_motion(model, J, gamma, v, qdd, closure_tol)
    else:
        J = np.zeros((0, nv))
    k = na + model.m
    A = np.zeros((nv, k))
    A[act, np.arange(na)] = 1.0
    A[:, na:] = J.T
    if nv and k:
        X, _, rank, _ = np.linalg.lstsq(A, Yt, rcond=None)
    else:
        X, rank = np.zeros((k, p)), 0
    residual = Yt - A @ X
    # A of full column rank: J's rows (among its columns) are independent
    rank_j = model.m if rank == k else (int(np.linalg.matrix_rank(J)) if J.size else 0)
    return ClosedLoopRegressor(X[:na], X[na:], Yt, residual, act, int(rank), k - int(rank),
                               *_flags(model, na, k, int(rank), rank_j), A)  # fmt: skip


def _check_motion(model, J, gamma, v, qdd, closure_tol):
    """``ld.inverse_dynamics``' closure test: ActuationError if J q̇ or J q̈ - γ exceed
    ``closure_tol`` relative to |J| max(|q̇|, 1) and |J| max(|q̈|, 1) + |γ| (max norms)."""
    jmax = float(np.abs(J).max(initial=0.0))
    ev = float(np.abs(J @ v).max(initial=0.0))
    ea = float(np.abs(J @ qdd - gamma).max(initial=0.0))
    if ev > closure_tol * jmax * max(np.abs(v).max(initial=0.0), 1.0):
        raise ActuationError(
            f"{model.name}: the velocity v violates the closures (max |J v| = {ev:.3g}); "
            "give a consistent velocity (ld.complete_velocity)"
        )
    amax = max(np.abs(qdd).max(initial=0.0), 1.0)
    if ea > closure_tol * (jmax * amax + np.abs(gamma).max(initial=0.0)):
        raise ActuationError(
            f"{model.name}: the acceleration qdd violates the closures (max |J qdd - γ| = "
            f"{ea:.3g}); give a consistent acceleration "
            "(loopdyn.analysis.motion.consistent_acceleration)"
        )


# --------------------------------------------------------------------------- base parameters
def random_states(model, n, seed=0, spread=0.5, data=None):
    """``n`` random consistent states (q, q̇, q̈) near ``model.q0``, on its assembly
    branch: the independent coordinates (``ld.partition`` at q0) moved by up to
    ``spread`` (rad or m) and the rest assembled in two steps of continuation; a step
    that fails, or lands more than ``BRANCH_JUMP`` (rad or m) from its guess (another
    assembly branch: a mechanism stays on one), is retried with half the move.  Random
    independent rates are completed by ``ld.complete_velocity``, random independent
    accelerations by ``consistent_acceleration``.  Seeded: reproducible."""
    from loopdyn.analysis.assembly import assemble, complete_velocity, partition
    from loopdyn.analysis.motion import consistent_acceleration
    from loopdyn.kinematics.configuration import difference, integrate

    model_arg(model)
    rng = np.random.default_rng(seed)
    q0 = np.array(model.q0, dtype=float)
    if model.m:
        q0 = assemble(model, q0, fixed=[], data=data)
    ind = partition(model, q0, data=data).independent

    def reached(dq):
        q = q0
        for _ in range(2):  # continuation: half the move, then the rest
            guess = integrate(model, q, 0.5 * dq)
            q = assemble(model, guess, fixed=ind, data=data) if model.m else guess
            if np.abs(difference(model, guess, q)).max(initial=0.0) > BRANCH_JUMP:
                raise AssemblyError(f"{model.name}: assembly jumped to another branch")
        return q

    out = []
    for _ in range(int(n)):
        dq = np.zeros(model.nv)
        dq[ind] = rng.uniform(-spread, spread, ind.size)
        q = q0
        for _ in range(6):
            try:
                q = reached(dq)
                break
            except AssemblyError:
                dq *= 0.5
        v = np.zeros(model.nv)
        v[ind] = rng.normal(size=ind.size)
        v = complete_velocity(model, q, v, fixed=ind, data=data)
        qdd = consistent_acceleration(model, q, v, rng.normal(size=ind.size), ind, data=data)
        out.append((q, v, qdd))
    return out


BRANCH_JUMP = 1.0
"""``random_states``: an assembly step that moves a coordinate further than this from
its guess has left the branch of ``model.q0`` (rad or m)."""


@dataclass
class BaseParameters:
    """The identifiable combinations of the inertial parameters (eq. 4).

    ``rank`` r; ``independent`` (r,) and ``dependent`` (10 nb - r,): indices into π of
    the base regressor's columns and of the others; ``K`` (r × 10 nb): β = K π, the
    base parameters (K[:, independent] = 1, K[:, dependent] the regrouping
    coefficients); ``tol``: the cut-off used; ``gap``: (|R_{r-1}|, |R_r|) / |R_00|, the
    smallest kept and the largest dropped diagonal of the pivoted QR (a clean rank has
    them orders of magnitude apart); ``rows``: rows of the stacked regressor; ``names``:
    ``parameter_names`` of π.  ``regressor(Y)`` = Y[..., independent] is the base
    regressor of any full regressor (Y π = regressor(Y) β); ``values(pi)`` = K π."""

    rank: int
    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray
    tol: float
    gap: tuple
    rows: int
    names: list

    def regressor(self, Y):
        """The base regressor Y[..., independent] of a regressor Y (... × 10 nb)."""
        return np.asarray(Y)[..., self.independent]

    def values(self, pi):
        """β = K π (r,): the base parameters of the inertial parameters ``pi``."""
        return self.K @ np.asarray(pi, dtype=float)

    def describe(self, digits=4, cut=1e-10):
        """One string per base parameter: ``"b.Izz + 0.36 c.m - ..."`` (coefficients
        below ``cut`` relative to the largest of the row left out)."""
        out = []
        for row in self.K:
            big = np.abs(row).max(initial=0.0)
            terms = []
            for j in np.flatnonzero(np.abs(row) > cut * big):
                c = row[j]
                name = self.names[j]
                if abs(c - 1.0) <= 1e-12:
                    terms.append(("+", name))
                elif abs(c + 1.0) <= 1e-12:
                    terms.append(("-", name))
                else:
                    terms.append(("-" if c < 0 else "+", f"{abs(c):.{digits}g} {name}"))
            s = " ".join(f"{sg} {t}" for sg, t in terms)
            out.append(s[2:] if s.startswith("+ ") else s)
        return out


def stacked_regressor(model, states, *, tree=False, actuated=None, data=None):
    """The regressors of ``states`` (iterable of (q, q̇, q̈)) stacked row-wise: the
    actuator-force regressor ``closed_loop_regressor(...).Y`` (na rows per state), or
    the tree regressor ``joint_torque_regressor`` (nv rows) if ``tree``."""
    blocks = []
    for q, v, qdd in states:
        if tree:
            blocks.append(joint_torque_regressor(model, q, v, qdd, data=data))
        else:
            blocks.append(closed_loop_regressor(model, q, v, qdd, actuated, data=data).Y)
    if not blocks:
        return np.zeros((0, 10 * model.nbodies))
    return np.vstack(blocks)


def base_parameters(model, states=None, *, n_states=None, tree=False, actuated=None,
                    tol=BASE_TOL, columns="model", seed=0, data=None):  # fmt: skip
    """The base inertial parameters of ``model`` (eq. 4): a :class:`BaseParameters`.

    The regressor (``closed_loop_regressor``'s actuator rows, or the tree's with
    ``tree=True``: every joint force measured) is stacked over ``states`` (iterable of
    consistent (q, q̇, q̈); default ``n_states`` states of ``random_states(model,
    n_states, seed)``, enough for twice as many rows as parameters), its columns
    normalised (unit 2-norm; a column of norm <= ``tol`` times the largest is zero,
    rounding that normalising would blow up, and dependent outright), and factorized by
    ``scipy.linalg.qr`` with column pivoting.  Rank r: the diagonal entries |R_kk| >
    ``tol`` |R_00| (= ``tol``: unit columns).  The rank is a property of the mechanism
    and of the measured forces for states that excite it (generic random ones do); a
    trajectory that excites less gives fewer.

    Which r columns carry the base parameters (``independent``): ``columns="pivoted"``,
    the QR's pivots (the best-conditioned base regressor); ``columns="model"``
    (default), the first r independent ones in the order bodies by model index and,
    within a body, ``Ixx .. Izz``, ``mcx .. mcz``, ``m`` (a column is kept when its
    distance to the span of the kept ones, by Gram–Schmidt, exceeds ``tol``): the
    parameters of bodies nearer the root absorb those of their descendants, the
    classical regrouping (the five-bar's Izz of a proximal link + a² m of its distal
    link).  Where that selection does not reach rank r (a borderline column), the
    pivots are used."""
    import scipy.linalg as sla

    model_arg(model)
    tol = scalar(tol, "tol", model, positive=True)
    if columns not in ("model", "pivoted"):
        raise ValueError(f"columns must be 'model' or 'pivoted', got {columns!r}")
    p = 10 * model.nbodies
    if states is None:
        na = model.nv if tree else (model.actuated.size if actuated is None else np.size(actuated))
        n_states = n_states or max(10, -(-2 * p // max(na, 1)))
        states = random_states(model, n_states, seed=seed, data=data)
    W = stacked_regressor(model, states, tree=tree, actuated=actuated, data=data)
    norms = np.sqrt((W * W).sum(axis=0))
    big = norms.max(initial=0.0)
    live = norms > tol * big if big > 0 else np.zeros(p, dtype=bool)  # else rounding
    D = np.where(live, norms, 1.0)
    Ws = np.where(live, W / D, 0.0)
    if W.shape[0]:
        _, R, piv = sla.qr(Ws, mode="economic", pivoting=True)
        diag = np.abs(np.diag(R))
    else:
        R, piv, diag = np.zeros((0, p)), np.arange(p), np.zeros(0)
    r0 = diag[0] if diag.size else 0.0
    small = np.flatnonzero(diag <= tol * r0) if r0 > 0 else np.zeros(1, dtype=np.int64)
    rank = int(small[0]) if small.size else int(diag.size)
    ind = piv[:rank]
    if columns == "model" and rank:
        ind = _first_independent(Ws, live, rank, tol)
    dep = np.setdiff1d(np.arange(p), ind)
    K = np.zeros((rank, p))
    K[np.arange(rank), ind] = 1.0
    if rank:
        # W_s[:, dep] = W_s[:, ind] K_s (exactly, up to rounding: dep is in the span);
        # unscaled W[:, dep] = W[:, ind] D_ind⁻¹ K_s D_dep
        Ks = np.linalg.lstsq(Ws[:, ind], Ws[:, dep], rcond=None)[0]
        K[:, dep] = Ks / D[ind][:, None] * D[dep][None, :]
    kept = diag[rank - 1] / r0 if rank else 0.0
    dropped = diag[rank] / r0 if rank < diag.size and r0 > 0 else 0.0
    return BaseParameters(rank, np.array(ind), dep, K, tol, (float(kept), float(dropped)),
                          int(W.shape[0]), parameter_names(model))  # fmt: skip


# within a body, the order in which ``columns="model"`` prefers its parameters
_PREFERENCE = (4, 5, 6, 7, 8, 9, 1, 2, 3, 0)


def _first_independent(Ws, live, rank, tol):
    """Indices (ascending) of the first ``rank`` columns of ``Ws`` (unit or zero
    columns) that are independent, in the order bodies then ``_PREFERENCE``: a column
    is kept if its component orthogonal to the kept ones (classical Gram–Schmidt,
    twice) is longer than ``tol``.  The pivoted QR's own columns if that falls short
    of ``rank``."""
    n, p = Ws.shape
    basis = np.zeros((n, rank))
    kept = []
    for body in range(p // 10):
        for k in _PREFERENCE:
            c = 10 * body + k
            if not live[c] or len(kept) == rank:
                continue
            x = Ws[:, c].copy()
            for _ in range(2):
                x -= basis[:, : len(kept)] @ (basis[:, : len(kept)].T @ x)
            norm = float(np.linalg.norm(x))
            if norm > tol:
                basis[:, len(kept)] = x / norm
                kept.append(c)
    if len(kept) < rank:
        import scipy.linalg as sla

        return np.sort(sla.qr(Ws, mode="r", pivoting=True)[1][:rank])
    return np.sort(np.array(kept, dtype=np.int64))
