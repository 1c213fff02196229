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

Uniqueness.  With r = rank [B Jᵀ] (the numerical rank the solve itself used) and
k = na + m unknowns, the answer is unique iff r = k (``unique``); otherwise every
[u; λ] + z, z in the null space of [B Jᵀ] (dimension ``nullity`` = k - r), produces the
same motion and the minimum-norm one is returned.  The actuator forces alone are
unique iff no null vector moves u, i.e. iff r = na + rank J (``tau_unique``): redundant
closure rows (rank J < m) leave λ undetermined (Jᵀλ is still unique) but not u.  So
``unique`` = ``tau_unique`` and rank J = m, and ``over_actuated`` (na > nv - rank J,
more actuators than degrees of freedom: na + rank J > nv >= r) implies not
``tau_unique``; u can also be non-unique without over-actuation when the actuators are
dependent at the state (two actuated coordinates tied by a closure, a singular
configuration) and the motion needs no force along what they cannot drive.  A
non-unique u warns (:class:`loopdyn.NonUniqueWarning`, naming the undetermined
actuators and closures); a non-unique λ alone does not (the flags and
``undetermined_closures`` say it), as ``ld.forward_dynamics`` returns the minimum-norm
multipliers of redundant rows silently.

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
import warnings
from dataclasses import dataclass, field

import numpy as np
from numba import types
from numba.extending import register_jitable

from loopdyn.errors import ActuationError, NonUniqueWarning
from loopdyn.kernels.linalg import min_norm_lstsq
from loopdyn.kernels.numba_internals import BUF, IN, OUT, Entry, block, entry, unliteral
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import constraint_entry, constraint_jacobian, constraints
from loopdyn.tree import _DONE, rnea, rnea0_entry
from loopdyn.validation import configuration, model_arg, scalar, vector, workspace


@dataclass
class InverseDynamicsResult:
    """``tau`` (nv, non-zero only at ``model.actuated``), ``u`` (the actuated entries),
    ``lam`` (m, multipliers as in ``ForwardDynamicsResult``), ``residual`` (norm of
    the unexplained generalized force), ``over_actuated`` (more actuators than degrees
    of freedom, na > nv - rank J) and ``constraint_error`` (max violation of J q̇ = 0
    and J q̈ = γ by the given motion).

    Uniqueness of the answer (the module docstring derives it): ``rank`` = rank
    [B Jᵀ], ``nullity`` = na + m - ``rank`` (the dimension of the undetermined part),
    ``unique`` (``nullity`` == 0: u and λ both unique), ``tau_unique`` (u and ``tau``
    unique, even where λ is not: rank [B Jᵀ] = na + rank J).  ``over_actuated``
    implies not ``tau_unique``; ``unique`` implies ``tau_unique``.  When not
    ``unique`` the answer is the minimum-norm one, and ``undetermined_actuators`` /
    ``undetermined_closures`` name what the null space of [B Jᵀ] moves (computed on
    first access)."""

    tau: np.ndarray
    u: np.ndarray
    lam: np.ndarray
    residual: float
    over_actuated: bool
    constraint_error: float
    unique: bool
    tau_unique: bool
    rank: int
    nullity: int
    _null: object = field(default=None, repr=False, compare=False)  # an _Undetermined

    @property
    def undetermined_actuators(self):
        """Indices into v of the actuated coordinates whose force is not unique (empty
        when ``tau_unique``)."""
        return self._null.get()[0] if self._null is not None else np.zeros(0, np.int64)

    @property
    def undetermined_closures(self):
        """Names of the closures whose multipliers are not unique (empty when
        ``unique``)."""
        return self._null.get()[1] if self._null is not None else ()


# a share of an unknown in the null space of [B Jᵀ] above this is not negligible
NULL_TOL = 1e-8


class _Undetermined:
    """What the null space of A = [B Jᵀ] moves, computed on first use (an SVD; only
    for a rank-deficient A): ``matrix`` is A (nv × (na + m)) or a function returning it,
    ``rank`` the rank the solve used."""

    __slots__ = ("_got", "act", "matrix", "model", "rank")

    def __init__(self, model, act, matrix, rank):
        self.model, self.act, self.matrix, self.rank = model, act, matrix, rank
        self._got = None

    def get(self):
        """(actuated coordinates, closure names) with a share > ``NULL_TOL`` in the null
        space: the rows of an orthonormal null basis N (k × (k - r), the right singular
        vectors past the rank) of non-negligible norm, |N[c, :]| being how far unknown c
        moves along unit null vectors."""
        if self._got is None:
            A = self.matrix() if callable(self.matrix) else self.matrix
            k = A.shape[1]
            Vt = np.linalg.svd(A)[2] if A.shape[0] else np.eye(k)
            share = np.sqrt((Vt[self.rank :] ** 2).sum(axis=0))
            free = share > NULL_TOL
            na, model = self.act.size, self.model
            rows = np.flatnonzero(free[na:])
            closures = sorted({int(c) for c in model.row_int[rows, 0]})
            self._got = (self.act[free[:na]], tuple(model.closures[c] for c in closures))
        return self._got


METHODS = ("generic", "denoc")

# generic_inverse's statuses
OK, REFUSED, BAD_INPUT = 0.0, -1.0, -2.0


@register_jitable  # Python here, compiled in the batch's loop
def work_size(nv, k):
    """Float64 items of ``generic_inverse``'s buffer ``w`` for nv coordinates and k =
    na + m unknowns: 5 results, then the scratch."""
    return 5 + 2 * nv * k + 2 * nv + 4 * k


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
    u at ``act``, zero elsewhere), ``lam`` (m), and ``w[:5]`` = (|A x - b|₂,
    max(1, |b|₂), max(|J v|∞, |J q̈ - γ|∞), rank J, rank A): rank A the solve's own
    numerical rank (A = [B Jᵀ], its pivoted QR), rank J by a second pivoted QR with the
    same cut-off if ``want_rank`` or A is rank deficient, else m (A's columns, J's rows
    among them, are independent); A itself stays in ``w[5 : 5 + nv (na + m)]`` (nv ×
    (na + m), C order) for the null-space analysis of a deficient A.  ``w``:
    ``work_size(nv, na + m)`` float64, the rest scratch (nothing is allocated).
    Returns ``OK``, ``REFUSED`` (the motion violates the closures or the actuators
    cannot produce it) or ``BAD_INPUT`` (the inputs failed rnea's checks).
    """
    m, d = handles(ctx)
    nv, nm, na = m.nv, m.nr, act.shape[0]
    k = na + nm
    out = block(w, 0, 5)
    A, F = block(w, 5, (nv, k)), block(w, 5 + nv * k, (nv, k))  # A, and its factors
    o = 5 + 2 * nv * k
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
    rank_a = 0
    if nv:
        for j in range(nv):
            B[j, 0] = b[j]
            for c in range(k):
                F[j, c] = A[j, c]
        rank_a = min_norm_lstsq(F, B, x, lsq)
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
    out[0], out[1], out[2], out[4] = res, scale, cerr, rank_a
    rank = nm  # A of full column rank: J's rows are independent
    if want_rank or rank_a < k:
        rank = 0
        if nm and nv:
            JT = block(w, 5 + nv * k, (nv, nm))  # Jᵀ, over the factors (x is read out)
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

    The result says whether the answer is unique (``unique``, ``tau_unique``,
    ``rank``, ``nullity``; see :class:`InverseDynamicsResult`); where the actuator
    forces are not (over-actuated, or dependent actuators), a
    :class:`loopdyn.NonUniqueWarning` names the undetermined actuators and closures
    and the minimum-norm answer is returned.  Closure rows that are redundant with
    each other (λ not unique, u unique) do not warn.  ``method="denoc"`` drives as
    many independent actuators as degrees of freedom: its u is unique, its λ unique
    unless closure rows were dropped as redundant.
    """
    model_arg(model)
    if method == "generic":
        res = _generic(model, q, v, qdd, actuated, tol, closure_tol, data)
        if res is not None:
            return res if res.tau_unique else _warned(model, res)
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
    return _warned(model, generic_checked(model, q, v, qdd, act, tol, closure_tol, data))


def _warned(model, res):
    """``res``, after a :class:`NonUniqueWarning` if its actuator forces are not unique
    (pointing at the caller of ``inverse_dynamics``)."""
    if not res.tau_unique:
        msg = non_unique_message(model, res.u.size, res.rank, res.over_actuated, res._null)
        warnings.warn(msg, NonUniqueWarning, stacklevel=3)
    return res


def non_unique_message(model, na, rank, over, null, where=""):
    """The :class:`NonUniqueWarning` text: ``na`` actuators, ``rank`` = rank [B Jᵀ],
    ``over`` the over-actuation flag, ``null`` the ``_Undetermined`` of [B Jᵀ];
    ``where``: e.g. " at state 3"."""
    act, closures = null.get()
    k = na + model.m
    parts = []
    if act.size:
        names = [f"{j} ({_coordinate(model, j)})" for j in act.tolist()]
        parts.append("actuators at coordinates " + _listed(names))
    if closures:
        parts.append("closures " + _listed([repr(c) for c in closures]))
    why = (
        "over-actuated: more actuators than degrees of freedom"
        if over
        else "the actuators are dependent at this configuration"
    )
    return (
        f"{model.name}: the actuator forces are not unique{where} ({why}): [B Jᵀ] has rank "
        f"{rank} for {k} unknowns ({na} actuator forces, {k - na} multipliers), "
        f"{k - rank} undetermined direction(s) moving the {'; '.join(parts)}. The "
        "answer returned is the minimum-norm one (least |u|² + |λ|²)"
    )


def _listed(items, most=12):
    """``items`` joined by commas, the ones past ``most`` counted."""
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def _coordinate(model, j):
    """The joint name of coordinate ``j`` of v (``name[i]`` for a multi-DOF joint)."""
    t = model.topo
    for i in range(model.nbodies):
        if t[i, 3] <= j < t[i, 3] + t[i, 5]:
            name = model.joint_names[i]
            return name if t[i, 5] == 1 else f"{name}[{j - t[i, 3]}]"
    return "?"


def matrix_at(model, q, act):
    """A function returning [B Jᵀ] at ``q`` (a copy of it: evaluated later)."""
    q = np.array(q, dtype=np.float64)

    def matrix():
        A = np.zeros((model.nv, act.size + model.m))
        A[act, np.arange(act.size)] = 1.0
        A[:, act.size :] = constraint_jacobian(model, configuration(model, q)).T
        return A

    return matrix


def _result(tau, u, lam, res, over, cerr, rank_a, rank_j, null):
    """``InverseDynamicsResult`` with the uniqueness flags from rank A = rank [B Jᵀ]
    and rank J (na + m unknowns; ``null``: the ``_Undetermined`` of a deficient A)."""
    na, k = u.size, u.size + lam.size
    unique = rank_a >= k
    tau_unique = unique or rank_a - rank_j >= na  # no null vector moves u
    return InverseDynamicsResult(
        tau, u, lam, res, over, cerr, unique, tau_unique, rank_a, k - rank_a,
        None if unique else null,
    )  # fmt: skip


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
    x, _, rank_a, _ = np.linalg.lstsq(A, b, rcond=None)
    res = float(np.linalg.norm(A @ x - b))
    scale = max(1.0, float(np.linalg.norm(b)))
    rank_J = np.linalg.matrix_rank(J) if J.size else 0
    dof = model.nv - rank_J
    over = na > dof
    _check(model, act, res, scale, cerr, tol)
    tau = np.zeros(model.nv)
    tau[act] = x[:na]
    null = _Undetermined(model, act, A, int(rank_a))
    return _result(tau, x[:na].copy(), x[na:].copy(), res, over, cerr, int(rank_a), rank_J, null)


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
    rank_a, rank_j, k = int(w[4]), int(w[3]), act.size + model.m
    over = u.size > nv - rank_j  # more actuators than degrees of freedom
    if rank_a == k:  # unique (_result's flags, without its call)
        return InverseDynamicsResult(tau, u, lam, float(w[0]), over, float(w[2]), True, True, k, 0)
    # rare: keep A (the buffer is the next call's) for the null space
    null = _Undetermined(model, act, w[5 : 5 + nv * k].reshape(nv, k).copy(), rank_a)
    return _result(tau, u, lam, float(w[0]), over, float(w[2]), rank_a, rank_j, null)


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
    # IDA-1..3 succeeded: as many actuators as degrees of freedom, each leg's passive
    # rates solved from its actuated one, so u is unique: rank [B Jᵀ] = na + rank J,
    # rank J the rows DeNOC kept (its row detection, ld.forward_dynamics')
    rank_j = workspace(model, data).nrows if model.m else 0
    null = None
    if rank_j < model.m:  # redundant rows: λ is not unique (rare; J on demand)
        null = _Undetermined(model, act, matrix_at(model, q, act), act.size + rank_j)
    return _result(tau, tau[act], lam, res, False, cerr, act.size + rank_j, rank_j, null)
