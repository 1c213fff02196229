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

The generic solve is compiled (``generic_inverse``, shared with
``ld.inverse_dynamics_batch``); a state it refuses (inputs that fail the entry's
checks, a motion off the closures, actuators that cannot produce it) is redone by
the checked NumPy path below, which raises the error that says why.
"""

import math
from dataclasses import dataclass

import numpy as np
from numba import types
from numba.extending import register_jitable

from loopdyn.errors import ActuationError
from loopdyn.kernels.linalg import min_norm_lstsq
from loopdyn.kernels.numba_internals import BUF, IN, OUT, Entry, block, entry, unliteral
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import constraint_entry, constraints
from loopdyn.tree import _DONE, rnea, rnea0_entry
from loopdyn.validation import configuration, scalar, vector, workspace


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

# generic_inverse's statuses
OK, REFUSED, BAD_INPUT = 0.0, -1.0, -2.0


@register_jitable  # Python here, compiled in the batch's loop
def work_size(nv, k):
    """Float64 items of ``generic_inverse``'s buffer ``w`` for nv coordinates and k =
    na + m unknowns: 4 results, then the scratch."""
    return 4 + 2 * nv * k + 2 * nv + 4 * k


@entry
def generic_inverse(ctx, q, v, qdd, act, tol, closure_tol, want_rank, tau, lam, w):
    """The generic closed-loop inverse dynamics of one state on a dense Data's buffer
    ``ctx`` (J of every closure row).

    b = rnea(q, v, q̈) = M q̈ + h; the closure checks max|J v| <= closure_tol |J|
    max(|v|, 1) and max|J q̈ - γ| <= closure_tol (|J| max(|q̈|, 1) + |γ|) (max norms);
    then [B Jᵀ] [u; λ] = b by least squares, the minimum-norm solution with numpy's
    default cut-off (``kernels.linalg.min_norm_lstsq``: numpy's ``lstsq`` to rounding),
    and the residual test |A x - b|₂ <= tol · max(1, |b|₂).  ``act``: the actuated
    coordinates (indices into v).  Out, written for status ``OK`` only: ``tau`` (nv,
    u at ``act``, zero elsewhere), ``lam`` (m), and ``w[:4]`` = (|A x - b|₂,
    max(1, |b|₂), max(|J v|∞, |J q̈ - γ|∞), rank J if ``want_rank``, with the same
    cut-off); ``w``: ``work_size(nv, na + m)`` float64, the rest scratch (nothing is
    allocated).
    Returns ``OK``, ``REFUSED`` (the motion violates the closures or the actuators
    cannot produce it) or ``BAD_INPUT`` (the inputs failed rnea's checks).
    """
    m, d = handles(ctx)
    nv, nm, na = m.nv, m.nr, act.shape[0]
    k = na + nm
    out = block(w, 0, 4)
    A, F = block(w, 4, (nv, k)), block(w, 4 + nv * k, (nv, k))  # A, and its factors
    o = 4 + 2 * nv * k
    B, b, x, lsq = (
        block(w, o, (nv, 1)),
        block(w, o + nv, nv),
        block(w, o + 2 * nv, k),
        (block(w, o + 2 * nv + k, 3 * k)),
    )
    if rnea0_entry(ctx, q, v, qdd, b) != _DONE:
        return BAD_INPUT
    for j in range(nv):
        for c in range(k):
            A[j, c] = 0.0
    for c in range(na):
        A[act[c], c] = 1.0
    cerr = 0.0
    if nm:
        constraint_entry(ctx, q, v, unliteral(True))  # the same inputs rnea accepted
        jm = ev = ea = gm = 0.0
        vm = am = 1.0  # max(|v|∞, 1), max(|q̈|∞, 1)
        for j in range(nv):
            vm = max(vm, abs(v[j]))
            am = max(am, abs(qdd[j]))
        for r in range(nm):
            sv = sa = 0.0
            for j in range(nv):
                A[j, na + r] = d.J[r, j]
                sv += d.J[r, j] * v[j]
                sa += d.J[r, j] * qdd[j]
                jm = max(jm, abs(d.J[r, j]))
            ev = max(ev, abs(sv))
            ea = max(ea, abs(sa - d.gamma[r]))
            gm = max(gm, abs(d.gamma[r]))
        if not (ev <= closure_tol * jm * vm and ea <= closure_tol * (jm * am + gm)):
            return REFUSED
        cerr = max(ev, ea)
    for c in range(k):
        x[c] = 0.0  # nothing moves (nv = 0): no equation, the minimum-norm λ is 0
    if nv:
        for j in range(nv):
            B[j, 0] = b[j]
            for c in range(k):
                F[j, c] = A[j, c]
        min_norm_lstsq(F, B, x, lsq)
    res = bb = 0.0
    for j in range(nv):
        t = -b[j]
        for c in range(k):
            t += A[j, c] * x[c]
        res += t * t
        bb += b[j] * b[j]
    res, scale = np.sqrt(res), max(1.0, np.sqrt(bb))
    if not res <= tol * scale:
        return REFUSED
    for j in range(nv):
        tau[j] = 0.0
    for c in range(na):
        tau[act[c]] = x[c]
    for r in range(nm):
        lam[r] = x[na + r]
    out[0], out[1], out[2] = res, scale, cerr
    if want_rank:
        rank = 0
        if nm and nv:
            JT = block(w, 4 + nv * k, (nv, nm))  # Jᵀ, over the factors (x is read out)
            for j in range(nv):
                for r in range(nm):
                    JT[j, r] = A[j, na + r]
            rank = min_norm_lstsq(JT, block(w, o, (nv, 0)), x, lsq)  # no right-hand side
        out[3] = rank
    return OK


_ACT = types.Array(types.int64, 1, "C", readonly=True)  # model.actuated, _indices
GENERIC = Entry(generic_inverse, types.float64, BUF, IN, IN, IN, _ACT, types.float64,
                types.float64, types.boolean, OUT, OUT, OUT)  # fmt: skip
_INF = math.inf
_empty = np.empty


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
    actuators cannot produce it (relative residual above ``tol``).  Both methods run
    compiled on the inputs as given (lists, read-only, strided, float32 included);
    inputs or a motion they refuse are checked here, which names the culprit.
    """
    if method == "generic":
        res = _generic(model, q, v, qdd, actuated, tol, closure_tol, data)
        if res is not None:
            return res
    elif method == "denoc" and _tolerances(tol, closure_tol):
        return _denoc(model, q, v, qdd, actuated, tol, data)  # its entry checks the inputs
    elif method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    qdd = vector(qdd, model.nv, "qdd", model)
    tol = scalar(tol, "tol", model, positive=True)
    closure_tol = scalar(closure_tol, "closure_tol", model, positive=True)
    if method == "denoc":
        return _denoc(model, q, v, qdd, actuated, tol, data)
    act = model.actuated if actuated is None else _indices(model, actuated)
    return generic_checked(model, q, v, qdd, act, tol, closure_tol, data)


def generic_checked(model, q, v, qdd, act, tol, closure_tol, data=None):
    """The generic solve in NumPy on checked inputs (``inverse_dynamics``' validation):
    the compiled ``generic_inverse``'s equations, raising the ``ActuationError`` that
    says which test a refused motion fails."""
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


def _tolerances(tol, closure_tol):
    """True if both tolerances are positive finite floats (what ``scalar`` would pass)."""
    return (
        type(tol) is float
        and 0.0 < tol < _INF
        and (type(closure_tol) is float and 0.0 < closure_tol < _INF)
    )


def _generic(model, q, v, qdd, actuated, tol, closure_tol, data):
    """The compiled generic solve (``generic_inverse``), or None where the checked path
    must decide (inputs it refuses, a motion it refuses, tolerances that are not
    positive finite floats)."""
    if not _tolerances(tol, closure_tol):
        return None
    act = model.actuated if actuated is None else _indices(model, actuated)
    d = workspace(model, data)
    ctx = d.ensure_dense().ctx if model.m else d.ctx
    nv = model.nv
    tau, lam = _empty(nv), _empty(model.m)
    w = d.__dict__.get("inverse_work")  # the solve's results and scratch, kept on the Data
    size = work_size(nv, act.size + model.m)
    if w is None or w.size < size:
        w = d.inverse_work = np.empty(size)
    try:  # lists, ints, float32 are converted by the entry itself (numba_internals.Entry)
        st = GENERIC.call(ctx, q, v, qdd, act, tol, closure_tol, True, tau, lam, w)
    except TypeError:  # not real numbers: the checked path explains
        return None
    if st != OK:
        return None
    u = tau[act]
    over = u.size > nv - int(w[3])  # more actuators than degrees of freedom
    return InverseDynamicsResult(tau, u, lam, float(w[0]), over, float(w[2]))


def _indices(model, actuated):
    """``actuated`` as unique indices into v (ValueError naming it otherwise)."""
    try:
        a = np.asarray(actuated).reshape(-1)
    except (TypeError, ValueError):
        a = None
    if a is None or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{model.name}: actuated must be indices into v, got {actuated!r}")
    a = np.array(a, dtype=np.int64)  # a C-contiguous copy, read-only (the entries' type)
    if np.any((a < 0) | (a >= model.nv)) or np.unique(a).size != a.size:
        raise ValueError(
            f"{model.name}: actuated must be distinct indices in 0..{model.nv - 1}, got "
            f"{a.tolist()}"
        )
    a.flags.writeable = False
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


def _denoc(model, q, v, qdd, actuated, tol, data):
    """``inverse_dynamics(..., method="denoc")``: IDA-1..3 and the multipliers, O(n).
    ``q``, ``v``, ``qdd`` as given (``denoc.inverse_terms`` checks them)."""
    from loopdyn.methods import denoc

    act = model.actuated
    given = act if actuated is None else _indices(model, actuated)
    if given is not act and not np.array_equal(given, act):
        raise ValueError(
            f"{model.name}: method='denoc' drives the model's own actuated coordinates "
            f"{act.tolist()}, got actuated={given.tolist()}; use method='generic'"
        )
    tau, lam, res, b2, cerr = denoc.inverse_terms(model, q, v, qdd, data=data)
    scale = max(1.0, b2)
    _check(model, act, res, scale, cerr, tol)
    return InverseDynamicsResult(tau, tau[act], lam, res, False, cerr)  # a copy
