"""Closed-loop forward dynamics: ``ld.forward_dynamics(model, q, v, tau, method=...)``.

Every method returns q̈ for every tree coordinate so that methods can be compared
number for number.  A result is returned only if the method's kernel finished and
its acceptance check passed (finite, J q̈ = γ on the independent rows to
``RESIDUAL_TOL``; ``methods.common.accept``); otherwise the closure rank is
re-detected and the method retried, then the dense ``augmented`` solve is tried
(the result then says ``method="augmented"``), and if that fails too a
``SingularityError`` reports the condition number of the configuration.

Redundant closures: the rank of J is detected (pivoted QR at the first call,
re-checked whenever a dropped row is violated or a solve fails), only an
independent set of rows enters the solve, and the reported multipliers are the
minimum-norm ones over all rows.

Speed: after the first call the method's entry is bound to the ``Data``
(``Data.bound``); a call then costs one compiled entry plus two small allocations.
"""

import warnings
from functools import partial

import numpy as np
from numba import njit, types

from loopdyn.errors import FallbackWarning, ModelError, SingularityError
from loopdyn.kernels.checks import STATE_OK, raise_status, state_status
from loopdyn.kernels.linalg import cholesky_inplace, cholesky_solve, qr_lstsq
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    INT_OUT,
    OUT,
    OUT2,
    Entry,
    as_input,
    call_at,
    call_at_planned,
    counted,
    entry,
    entry_pointer,
    unliteral,
)
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import (
    RankInfo,
    closure_terms,
    constraint_entry,
    constraint_kernel,
    constraint_rank,
    rank_tolerance,
)
from loopdyn.methods import augmented, denoc, embedding, rcr, recursive_lambda, slm, sslm
from loopdyn.methods.common import (
    BAD_INPUT,
    INACCURATE,
    NO_ROWS,
    NONFINITE_INPUT,
    NONFINITE_OUTPUT,
    RESIDUAL_TOL,
    SINGULAR,
    DependentRows,
    ForwardDynamicsResult,
    checked_handles,
    closure_loads,
    method_entry,
)
from loopdyn.tree import aba
from loopdyn.tree.aba import aba_kernel
from loopdyn.validation import configuration, model_arg, vector, workspace


def _bind_entry(module):
    """bind() of a dense method: its entry on ``d``'s buffer, with the dense blocks."""
    return lambda model, d: partial(module.ENTRY.callable(), d.ensure_dense().ctx)


# method name -> bind(model, data) -> call(q, v, tau, qdd, lam) -> quality > 0 or status < 0;
# Data.bound[method] = (call, nv, m, zeros, (method, m, no dropped rows), model): the fast path
BINDERS = {
    "augmented": _bind_entry(augmented),
    "slm": _bind_entry(slm),
    "sslm": sslm.bind,
    "recursive_lambda": _bind_entry(recursive_lambda),
    "embedding": embedding.bind,
    "denoc": denoc.bind,
    "rcr": rcr.bind,
}
METHODS = tuple(BINDERS)
# the methods for any closed-loop model; the others need a structure (``check_method``)
GENERAL_METHODS = ("augmented", "slm", "sslm", "recursive_lambda", "embedding")
# methods that start from all rows, without the dense rank detection (O(m n²) time, the
# dense J in memory): their kernels fail (SINGULAR) on dependent rows, and the runner
# then detects the independent rows and retries
SELF_RANKED = frozenset({"embedding", "denoc", "rcr"})
# methods whose q̈ is that of the velocity the independent rates determine (for an
# inconsistent v they fall back to augmented): simulate them with partitioning
MINIMAL_METHODS = ("denoc", "rcr")


def method_pointer(method):
    """``method``'s compiled entry as a runtime value for ``method_call``: (its native
    address, 1 if it takes the plan buffer ``pb`` after ``ctx`` else 0), from the
    entry's own signature (``entry_pointer``).  Compiles (or loads) the entry."""
    return entry_pointer(entry_of(method))


def bound_buffers(call):
    """(ctx, pb) of a bound call of ``Data.bound`` (``partial(entry, ctx[, pb])``): the
    buffers ``method_call`` takes; pb a placeholder for a method without a plan."""
    return call.args[0], call.args[1] if len(call.args) > 1 else _NO_PLAN


_NO_PLAN = np.zeros(1)


def tree_entry(ctx, q, v, tau, qdd, lam):
    """Forward dynamics of a tree (no closure: every method is the ABA) with a method
    entry's signature, for the compiled loops (``tree_binding``): q̈ into ``qdd``
    (``lam`` untouched), 1.0, or ``SINGULAR`` (an articulated inertia) or a status < 0."""
    m, d, st = checked_handles(ctx, q, v, tau)
    if st < 0.0:
        return st
    if aba_kernel(m, d, q, v, tau, as_input(d.fext[:0]), qdd) != -1:
        return SINGULAR
    for j in range(m.nv):
        if not np.isfinite(qdd[j]):
            return NONFINITE_OUTPUT
    return 1.0


TREE_ENTRY = method_entry(tree_entry)


def tree_binding(d):
    """(fn, ctx, pb) of ``tree_entry`` on the Data ``d`` of a tree: ``method_call``'s
    arguments where no method is bound (``forward_dynamics`` binds none for a tree)."""
    return entry_pointer(TREE_ENTRY), d.ctx, _NO_PLAN


@njit(cache=True)
def method_call(fn, ctx, pb, q, v, tau, qdd, lam):
    """The compiled entry ``fn = method_pointer(method)`` on workspace ``ctx`` and plan
    buffer ``pb`` (unused by the dense methods): q̈ into ``qdd``, λ into ``lam``; the
    quality > 0 or a status < 0, as the bound call of ``Data.bound``.  Compiled code
    only.  The method is a runtime value: a compiled loop calling this is compiled
    once for every method, without the method's kernels linked into it."""
    if fn[1]:
        return call_at_planned(fn[0], ctx, pb, q, v, tau, qdd, lam)
    return call_at(fn[0], ctx, q, v, tau, qdd, lam)


_MODULES = {
    "augmented": augmented,
    "slm": slm,
    "sslm": sslm,
    "recursive_lambda": recursive_lambda,
    "embedding": embedding,
    "denoc": denoc,
    "rcr": rcr,
}


def entry_of(method):
    """The compiled ``Entry`` of ``method`` (e.g. to ask whether it is cached)."""
    return _MODULES[method].ENTRY


def check_method(model, method, data=None):
    """``ValueError`` for an unknown ``method``, :class:`ModelError` naming why if it
    does not apply to ``model`` (``denoc`` outside parallel mechanisms); nothing is
    computed.  Every method applies to a tree (all are the ABA there)."""
    if method not in BINDERS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    if model.m and method not in GENERAL_METHODS:
        d = workspace(model, data)
        if method not in d.bound:
            try:
                BINDERS[method](model, d)
            except DependentRows:  # a SELF_RANKED plan given every row: detected at the call
                pass


def forward_dynamics(
    model, q, v, tau=None, method="augmented", data=None, independent=None, fallback=True
):
    """Accelerations and closure multipliers of a closed-loop model.

    In: a consistent state ``q`` (nq), ``v`` (nv) and joint forces ``tau`` (nv;
    None for zero).  ``method``: ``"augmented"`` (eq. 10, one KKT solve, refined
    iteratively where its LU pivots spread),
    ``"slm"`` (eqs. 11–12), ``"sslm"`` (subsystem-level multipliers),
    ``"recursive_lambda"`` (q̈ = η + ζλ, Anderson & Critchley's eqs. 13–32),
    ``"embedding"`` (Jain's constraint embedding: articulated-body dynamics on the
    aggregated tree, ``loopdyn.methods.embedding``) or ``"denoc"`` (Saha &
    Schiehlen's minimal-order recursion for parallel mechanisms; ``ModelError`` for
    other models, see ``ld.parallel_structure``).
    ``independent`` (``"rcr"`` only): its independent coordinates, joint names or
    indices into v (``loopdyn.methods.rcr.RcrPlan``; default the paper's choice); a
    choice that does not fit raises ``ValueError`` or a ``SingularityError`` naming
    the loop, an ill-conditioned one is re-selected at run time.
    ``fallback``: where the method cannot solve the state (its kernel refuses it twice,
    the rows re-detected between), True hands it to the dense ``augmented`` solve
    (``res.method`` then says ``"augmented"``); False raises a ``SingularityError``
    naming the method instead, so that an answer is always the asked method's own.
    Out: :class:`ForwardDynamicsResult` with ``qdd``, ``lam`` (see its docstring
    for their meaning and frames), ``rank``, ``dropped`` and ``condition``.
    Raises :class:`SingularityError` if no method can solve the configuration
    (M or J M⁻¹ Jᵀ singular: a singular configuration of the mechanism).
    """
    try:
        key = method if independent is None else (method, tuple(independent))
        call, nv, nr, zeros, info, owner = (model._data if data is None else data).bound[key]
    except (AttributeError, KeyError, TypeError):
        return _forward_dynamics(model, q, v, tau, method, data, independent, fallback)
    qdd = _empty(nv)
    lam = _empty(nr)
    try:  # lists, ints, float32 are converted by the entry itself (numba_internals.Entry)
        st = call(q, v, zeros if tau is None else tau, qdd, lam)
    except TypeError:  # not real numbers: the checked path explains
        return _forward_dynamics(model, q, v, tau, method, data, independent, fallback)
    if st > 0.0 and owner is model:  # the bound call is the method's own (info[0] == key)
        return ForwardDynamicsResult(qdd, lam, info, st)
    return _forward_dynamics(model, q, v, tau, method, data, independent, fallback)


_empty = np.empty


def _forward_dynamics(model, q, v, tau, method, data, independent=None, fallback=True):
    """The checked path: conversions, rank handling, retries, fallback, errors."""
    if method not in BINDERS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    if independent is not None and method != "rcr":
        raise ValueError(f"independent= chooses RCR's coordinates: method='rcr', not {method!r}")
    key = method if independent is None else (method, tuple(independent))
    d = workspace(model, data)
    fast = d.bound.get((_DROPPED_KEY, key))
    if fast is not None:
        res = _dropped_fast(model, d, fast, q, v, tau)
        if res is not None:
            return res
    nv = model.nv
    q = configuration(model, q)
    v = vector(v, nv, "v", model)
    tau = d.zeros if tau is None else vector(tau, nv, "tau", model)
    if model.m == 0:
        return ForwardDynamicsResult(aba(model, q, v, tau, data=d), None, (method, 0, NO_ROWS), 1.0)
    if nv == 0:  # nothing moves: every row is vacuous, the minimum-norm multipliers are 0
        rows = np.arange(model.m, dtype=np.int64)
        return ForwardDynamicsResult(np.zeros(0), np.zeros(model.m), (method, 0, rows), 1.0)
    info = d.rank_info
    if info is None:
        info = _all_rows(model) if method in SELF_RANKED else _redetect(model, q, d)
    used = method
    refused = st = 0.0  # the asked method's last status, for the fallback's warning
    for attempt in range(3):
        if attempt == 2:
            if method == "augmented":
                break
            if not fallback:
                break
            used = "augmented"  # the dense KKT solve as the stable fallback
            refused = st
        ukey, binder = (key, partial(rcr.bind, independent=independent)) if (
            used == method and independent is not None
        ) else (used, BINDERS[used])  # fmt: skip
        bound = d.bound.get(ukey)
        if bound is None:
            try:
                call = binder(model, d)
            except DependentRows:  # a SELF_RANKED method given every row
                info = _redetect(model, q, d)
                call = binder(model, d)
            tag = (used, model.m, NO_ROWS)
            bound = d.bound[ukey] = (call, nv, model.m, d.zeros, tag, model)
        call = bound[0]
        qdd = np.empty(nv)
        lam = np.empty(model.m)
        st = call(q, v, tau, qdd, lam)
        if st == NONFINITE_INPUT:
            raise ValueError(f"{model.name}: q, v or tau holds NaN or inf")
        if st == BAD_INPUT:  # pragma: no cover - the conversions above prevent it
            raise ValueError(f"{model.name}: q, v or tau has a wrong length or a zero quaternion")
        broken = (
            _broken_rows(d, info, q, v, tau, qdd) if st > 0.0 and info.dropped.size else NO_ROWS
        )
        if broken.size:
            st = INACCURATE
        if st > 0.0:
            break
        if attempt == 0:
            info = _redetect(model, q, d)
            if used == "rcr" and independent is None and st in (SINGULAR, INACCURATE):
                try:  # loops solved one by one that need each other: merged (rcr.replan)
                    rcr.replan(model, d, q, v, tau)
                except (DependentRows, ModelError):  # pragma: no cover - rows re-detected
                    pass
    if st == NONFINITE_OUTPUT:
        raise ValueError(
            f"{model.name}: the accelerations are not finite: the velocities "
            f"(|v|∞ = {np.abs(v).max():.3g}) or joint forces (|τ|∞ = {np.abs(tau).max():.3g}) "
            "are too large for floating point"
        )
    if not st > 0.0:
        if broken.size:
            msg = _broken_message(model, info, broken, method)
        else:
            msg = _singular_message(model, q, d, method, st, fallback)
        # the rank decision of a failed (often inconsistent) q must not outlive it: swapped
        # duplicate closures are independent off the constraint manifold only
        d.rank_info = None
        d.set_rows(np.arange(model.m, dtype=np.int64))
        d.bound.clear()
        if method == "rcr":  # the loop RCR could not solve, when one failed
            why = "the dense fallback failed too" if fallback else "fallback=False"
            rcr.explain(model, d, q, v, tau, independent, f"{why}: {msg}")
        raise SingularityError(msg)
    lam = lam[: info.rank]
    if info.dropped.size:
        # minimum-norm multipliers over all rows with the same generalized force Jᵀλ
        J = d.J
        lam = np.linalg.lstsq(J.T, J[info.independent].T @ lam, rcond=None)[0]
    tag = (used, info.rank, info.dropped)
    if used != method:
        _warn_fallback(model, method, used, refused)
    if info.dropped.size or used != method:
        bound = d.bound.pop(key, None)  # the fast path handles independent rows only
        if info.dropped.size and used != method:
            # nor may the fallback's binding serve a later call of ``used`` as its fast
            # path: it writes λ on the independent rows only, and the rest of a fast call's
            # λ would be memory from another call (cassie.sdf after sslm fell back)
            d.bound.pop(used, None)
        if info.dropped.size and used == method and bound is not None and d.dense:
            # the dropped rows' check and λ compiled (DROPPED), for the next calls
            rd = np.ascontiguousarray(info.dropped, dtype=np.int64)
            size = float(model_size(model))
            d.bound[(_DROPPED_KEY, key)] = (bound[0], rd, size, nv, model.m, tag)
    return ForwardDynamicsResult(qdd, lam, tag, st)


_DROPPED_KEY = "dropped rows"  # Data.bound[(_DROPPED_KEY, key)]: _dropped_fast's binding

_REFUSALS = {
    SINGULAR: "its factorisation found the system singular at this state (a pivot or "
    "block below its tolerance)",
    INACCURATE: "its answer missed the residual tolerance (the elimination lost accuracy)",
    NONFINITE_OUTPUT: "its answer was not finite",
}


def warn_fallback(model, method, used, st, where=None):
    """A :class:`FallbackWarning`, once per model and method: ``method`` refused a state
    (status ``st``) and ``used`` answered; ``where``: the compiled simulation loop's
    count of such evaluations (``sim.compiled.run``), None for one call."""
    warned = model.__dict__.setdefault("_fallback_warned", set())
    if method in warned:
        return
    warned.add(method)
    why = _REFUSALS.get(st, f"status {st:g}")
    if where is None:
        what = (f"could not solve a state ({why}, twice, the closure rank re-detected "
                f"between) and the dense {used!r} solve answered (res.method says so)")  # fmt: skip
    else:
        what = (f"could not solve some states ({why}) and the dense {used!r} solve "
                f"answered them, {where} (traj.stats['fallbacks'] counts them)")  # fmt: skip
    tail = "; fallback=False raises instead" if where is None else ""
    warnings.warn(
        f"{model.name}: method {method!r} {what}.  Shown once per model and method{tail}.",
        FallbackWarning,
        stacklevel=4,
    )


_warn_fallback = warn_fallback


def _dropped_fast(model, d, fast, q, v, tau):
    """A call on a model whose rows at the detected rank drop some (``Data.bound``'s
    ``(_DROPPED_KEY, key)``): the method's entry, then ``DROPPED`` (the dropped rows'
    test and the minimum-norm λ over every row, compiled); None where either refuses
    (the checked path then decides, as for any input it does not take)."""
    call, dropped, size, nv, m, tag = fast
    qdd, lam = _empty(nv), _empty(m)
    try:
        st = call(q, v, d.zeros if tau is None else tau, qdd, lam)
        if st > 0.0 and DROPPED.call(bound_buffers(call)[0], dropped, size, q, v, qdd, lam):
            return ForwardDynamicsResult(qdd, lam, tag, st)
    except TypeError:  # not real numbers
        pass
    return None


def _all_rows(model):
    """Every closure row taken as independent (before any detection)."""
    return RankInfo(model.m, np.arange(model.m, dtype=np.int64), NO_ROWS, np.zeros(0), np.nan)


def _redetect(model, q, d):
    """Re-detect the independent closure rows at q and hand them to the kernels."""
    info = d.rank_info = constraint_rank(model, q, data=d)
    d.set_rows(info.independent)
    d.bound.clear()  # plans depend on the rows
    return info


# the largest tolerance (relative to a dependent row's scale) granted to a state off
# the constraint manifold by the dropped-row check (``_broken_rows``)
OFF_MANIFOLD_MAX = 1e-4


def _broken_rows(d, info, q, v, tau, qdd):
    """The redundant (dropped) rows that do not satisfy J q̈ = γ to the accuracy the
    kept rows reach; empty if they all hold.

    A dropped row is a combination of the kept ones, J_d = C J_k (C by least squares),
    so an answer that satisfies the kept rows to their residuals r_k satisfies it to
    |C| |r_k|, plus what the dependence and the rounding leave: 20 RESIDUAL_TOL of
    the row's own scale, its |J_d|∞ times the accelerations the answer carries
    (max(|q̈|∞, |g|)), its |γ_d|, |C| |γ_k| and |v|∞² times the model's size (the
    velocity products γ is made of, whose rounding is all a vacuous row, J's row ~0,
    e.g. a ball closure on a hinge's own centre, has left).  What is left over is
    γ_d - C γ_k: the state is inconsistent there, no q̈ satisfies every row.  Off the
    constraint manifold (|Φ|, |J v| above rounding: a simulation's stage points) the
    dependence holds only to first order in those gaps, and so does the tolerance.

    The rows are judged each at its own scale (a vacuous row with γ_d = 0.01 passed
    next to dropped rows of 0.84, hypothesis seed 20261172), and not with the
    method's acceleration scale (``DIAG_ASCALE``, an upper bound of what the solve
    combined): augmented's (|φ| + |J||λ|)/min M_ii was 1.76e6 with a 1 g body against
    |q̈| ~ 27, and dropped rows of 0.40 violated by 0.0046 (γ_d - C γ_k) passed (seed
    20261172, second case); the kept rows' own residuals carry the solve's rounding.
    20 RESIDUAL_TOL (2e-9): the dense oracle calls a state consistent when its least-
    squares answer, which spreads an inconsistency γ_d - C γ_k over every row, leaves
    1e-9 of the scale; an answer that holds the kept rows leaves all of it on the dropped
    ones, a few times more.  At 1e-8, rows violated by 3.5e-9..5.5e-9 of their scale
    (γ_d ~ 1e-33 against C γ_k = -2.2e-5: the rows' dependence does not hold at second
    order) passed where the oracle finds 1.1e-9, no solution, and every method answered
    (hypothesis seed 20261178); at 1e-9 a row violated by 1.3e-9 (|γ_d - C γ_k| = 2.9e-9
    against |J_d| |g| = 2.2) was refused where the oracle finds the state consistent and
    well conditioned (seed 20261198).  Where a row still fails, the state's own
    least-squares residual decides (below)."""
    model = d.model
    J, gamma = d.J[: model.m], d.gamma
    Jk, gk = J[info.independent], gamma[info.independent]
    Jd, gd = J[info.dropped], gamma[info.dropped]
    Cs = np.linalg.lstsq(Jk.T, Jd.T, rcond=None)[0].T if info.rank else np.zeros((Jd.shape[0], 0))
    C = np.abs(Cs)
    res = np.abs(Jd @ qdd - gd)
    size = model_size(model)
    vmax = np.abs(v).max(initial=0.0)
    vv = vmax**2 * max(size, 1.0)
    acc = max(np.abs(qdd).max(initial=0.0), float(np.linalg.norm(model.gravity)))
    scale = np.abs(Jd).max(axis=1, initial=0.0) * acc + np.abs(gd) + C @ np.abs(gk) + vv
    # off the constraint manifold (an integrator's stage point) the rows are dependent
    # only to first order in the gaps: J_d - C J_k ~ |Φ| / length, γ_d - C γ_k ~
    # |J v| |v| / length (a swapped ball closure at |Φ| 7.7e-7, |J v| 4.5e-5: 4e-7 of
    # the row's scale); on it (|Φ|, |J v| at rounding) the check keeps its tolerance.
    # Up to OFF_MANIFOLD_MAX: a state far off it (a velocity with |J v| ~ |v|) whose
    # dependent rows fail by 4e-3 of their scale has no q̈ that satisfies them
    gap = np.abs(d.Phi[: model.m]).max(initial=0.0)
    if vmax > 0.0:
        gap += np.abs(J @ v).max(initial=0.0) / vmax
    off = min(10.0 * gap / max(min(size, 1.0), 1e-300), OFF_MANIFOLD_MAX)
    tol = C @ np.abs(Jk @ qdd - gk) + (RESIDUAL_TOL * 20 + off) * scale
    broken = info.dropped[~(res <= tol)]
    if broken.size:
        # the state's own inconsistency, measured as the dense oracle does: γ's part
        # outside the range of J (every row, least squares: the oracle's residual), each
        # row at the accelerations the state carries (the free ones, M⁻¹(τ - h), too).
        # Within 1e-9 of that, the answer may leave γ_d - C γ_k on the dropped rows, which
        # the oracle spreads over every row (hypothesis seed 20261198: 2.3e-9 of the
        # dropped row's own scale, one kept row of nine, the oracle's cond 1)
        free = np.abs(aba(model, q, v, tau, data=model.create_data())).max(initial=0.0)
        big = max(acc, free)
        sv = info.singular_values
        rc = rank_tolerance(J.shape, sv) / sv[0] if sv.size and sv[0] > 0.0 else None
        gall = gamma[: model.m]
        r_ls = np.abs(gall - J @ np.linalg.lstsq(J, gall, rcond=rc)[0])
        rows_scale = np.abs(J).max(axis=1, initial=0.0) * big + np.abs(gall) + vv
        if np.all(r_ls <= (RESIDUAL_TOL * 10 + off) * rows_scale):
            broken = info.dropped[~(res <= tol + np.abs(gd - Cs @ gk))]
    return broken


def model_size(model):
    """The model's length scale for ``_broken_rows``: its largest joint or closure offset."""
    return max(
        np.abs(model.jgeom[:, 3]).max(initial=0.0), np.abs(model.cl_X[:, :, 3]).max(initial=0.0)
    )


# a compiled caller's margin on ``_broken_rows``'s tolerance: a row within it of the
# limit is left to ``_broken_rows`` itself (the Python path), never passed by rounding
DROPPED_MARGIN = 0.5


@njit(cache=True)
def dependence(d, dropped):
    """C (r × nd) with J_d = Cᵀ J_k: the dropped rows ``dropped`` of ``d.J`` as
    combinations of the kept rows ``d.rows`` (least squares, Householder QR: the kept
    rows are independent, and numpy's lstsq compiled into the simulation loop cost ~5 s
    of its cold start).  A (0 × nd) array where the kept rows are rank deficient."""
    J, rows = d.J, d.rows
    n, r, nd = J.shape[1], d.nrows, dropped.shape[0]
    Jk = np.empty((n, r))
    Jd = np.empty((n, nd))
    for a in range(r):
        for j in range(n):
            Jk[j, a] = J[rows[a], j]
    for b in range(nd):
        for j in range(n):
            Jd[j, b] = J[dropped[b], j]
    if r and qr_lstsq(Jk, Jd) == 0.0:
        return np.zeros((0, nd))
    return Jd[:r].copy()


@counted
def min_norm_multipliers(ctx, dropped, lam):
    """λ over every closure row (row order) from the method's μ on the independent rows
    ``d.rows`` (lam[:r]): the minimum-norm multipliers with the same Jᵀλ = J_kᵀμ, as
    ``ld.forward_dynamics`` reports them.  With J_d = Cᵀ J_k (``dependence``) every
    answer has λ_k + C λ_d = μ; the least-norm one is λ_d = (CᵀC + I)⁻¹ Cᵀ μ,
    λ_k = μ - C λ_d (Cholesky of a matrix >= I).  J as ``dropped_rows_hold`` left it."""
    _, d = handles(ctx)
    r, nd = d.nrows, dropped.shape[0]
    C = dependence(d, dropped)
    if C.shape[0] != r:
        return False
    mu = lam[:r].copy()
    G = np.empty((nd, nd))
    ld = np.empty(nd)
    for b in range(nd):
        s = 0.0
        for a in range(r):
            s += C[a, b] * mu[a]
        ld[b] = s
        for c in range(nd):
            t = 1.0 if b == c else 0.0
            for a in range(r):
                t += C[a, b] * C[a, c]
            G[b, c] = t
    cholesky_inplace(G, nd)
    cholesky_solve(G, nd, ld)
    for a in range(r):
        s = mu[a]
        for b in range(nd):
            s -= C[a, b] * ld[b]
        lam[d.rows[a]] = s
    for b in range(nd):
        lam[dropped[b]] = ld[b]
    return True


@counted
def dropped_rows_hold(ctx, dropped, size, q, v, qdd):
    """``_broken_rows``'s test of the dropped rows in compiled code, for the compiled
    simulation loop: True if every row of ``dropped`` holds J q̈ = γ at (q, v) to
    ``DROPPED_MARGIN`` times ``_broken_rows``'s tolerance (the same terms: C by least
    squares, ``dependence``), |C| times the kept rows' residuals, 20 RESIDUAL_TOL of
    the row's scale and the allowance off the manifold).  False sends the caller to
    ``ld.forward_dynamics``'s checked path (its second test, re-detection, errors), so
    this test is never laxer than that one.  ``size``: ``model_size``.  Recomputes Φ,
    J and γ at (q, v) into ``ctx``'s workspace; kept rows: ``d.rows``."""
    m, d = handles(ctx)
    # the entry (compiled once, without reference counting, and shared with the loop's
    # other callers), not constraint_kernel: compiled again under this function's flags
    # it cost seconds of the loop's cold start
    constraint_entry(ctx, as_input(q), as_input(v), True)
    n, nr, rows = m.nv, m.nr, d.rows
    r, nd = rows.shape[0], dropped.shape[0]
    J, g = d.J, d.gamma
    C = dependence(d, dropped)
    if C.shape[0] != r:  # the kept rows lost rank here
        return False
    vmax = 0.0
    qmax = 0.0
    for j in range(n):
        vmax = max(vmax, abs(v[j]))
        qmax = max(qmax, abs(qdd[j]))
    grav = np.sqrt(m.gravity[0] ** 2 + m.gravity[1] ** 2 + m.gravity[2] ** 2)
    acc = max(qmax, grav)
    vv = vmax * vmax * max(size, 1.0)
    gap = 0.0
    jv = 0.0
    for i in range(nr):
        gap = max(gap, abs(d.Phi[i]))
        s = 0.0
        for j in range(n):
            s += J[i, j] * v[j]
        jv = max(jv, abs(s))
    if vmax > 0.0:
        gap += jv / vmax
    off = min(10.0 * gap / max(min(size, 1.0), 1e-300), OFF_MANIFOLD_MAX)
    kept = np.empty(r)  # |J_k q̈ - γ_k|
    for a in range(r):
        s = -g[rows[a]]
        for j in range(n):
            s += J[rows[a], j] * qdd[j]
        kept[a] = abs(s)
    for b in range(nd):
        i = dropped[b]
        res = -g[i]
        jmax = 0.0
        for j in range(n):
            res += J[i, j] * qdd[j]
            jmax = max(jmax, abs(J[i, j]))
        cg = cr = 0.0
        for a in range(r):
            cg += abs(C[a, b]) * abs(g[rows[a]])
            cr += abs(C[a, b]) * kept[a]
        scale = jmax * acc + abs(g[i]) + cg + vv
        tol = cr + (RESIDUAL_TOL * 20 + off) * scale
        if not abs(res) <= DROPPED_MARGIN * tol:
            return False
    return True


@counted
def dropped_entry(ctx, dropped, size, q, v, qdd, lam):
    """A model with dropped (redundant) rows after its method's entry: True, with the
    minimum-norm λ over every row in ``lam`` (``min_norm_multipliers``), if the dropped
    rows hold (``dropped_rows_hold``); False sends the single call to its checked path
    (``_broken_rows``, re-detection, errors), as the compiled simulation loop does."""
    if not dropped_rows_hold(ctx, dropped, size, q, v, qdd):
        return False
    return min_norm_multipliers(ctx, dropped, lam)


DROPPED = Entry(dropped_entry, types.boolean, BUF, INT_OUT, types.float64, IN, IN, IN, OUT)


def _broken_message(model, info, rows, method):
    """Why an answer on the independent rows was refused: it violates the dependent
    (dropped) ``rows``, named by their closures."""
    names = sorted({model.closures[k] for k in model.row_int[rows, 0]})
    return (
        f"{model.name}: the {method} answer on the {info.rank} independent closure rows "
        f"violates the rows of {', '.join(names)} that depend on them here (or lie below "
        "the floating-point range): the closures are (nearly) dependent at this "
        "configuration and the motion is not determined.  This is a singular configuration "
        "of the mechanism (a change of mobility); move away from it or change the closures."
    )


def _singular_message(model, q, d, method, st, fallback=True):
    """Why no method could solve: the condition of the configuration, measured densely."""
    from loopdyn.kinematics.closures import constraints
    from loopdyn.tree import crba

    M = crba(model, q)
    _, J, _ = constraints(model, q)
    ev = np.linalg.eigvalsh(M)
    if not ev[0] > 1e-14 * max(ev[-1], 1e-300):
        what = f"the mass matrix is singular (eigenvalues {ev[0]:.3g} … {ev[-1]:.3g})"
    else:
        L = np.linalg.cholesky(M)
        sv = np.linalg.svd(np.linalg.solve(L, J.T), compute_uv=False)
        rank = d.rank_info.rank if d.rank_info is not None else len(sv)
        cond = sv[0] / sv[rank - 1] if rank and sv[rank - 1] > 0 else np.inf
        what = (
            f"the closure rows are (nearly) dependent: condition of J M^-1/2 over the "
            f"{rank} independent rows {cond:.3g}"
        )
    reason = {NONFINITE_OUTPUT: "produced non-finite values", INACCURATE: "lost accuracy"}.get(
        st, "is singular"
    )
    if not fallback and method != "augmented":
        return (
            f"{model.name}: the {method} solve {reason} at this configuration and "
            f"fallback=False tried no other method; {what}.  If that is well conditioned, "
            f"the state is outside what {method} solves exactly here: call with "
            "fallback=True (the dense augmented solve answers, res.method says so) or "
            "another method."
        )
    return (
        f"{model.name}: the {method} solve {reason} at this configuration and the dense "
        f"fallback failed too; {what}.  This is a singular configuration of the mechanism "
        "(a change of mobility); move away from it or change the closures."
    )


# ------------------------------------------------------------------ closure loads
@entry
def loads_entry(ctx, q, rows, lam, fext, tauc):
    """Closure kinematics at q, then the loads of ``lam`` on ``rows`` (``closure_loads``)."""
    m, d = handles(ctx)
    st = state_status(m, q, q[:0], q[:0], unliteral(0), unliteral(0))
    if st == STATE_OK:
        constraint_kernel(m, d, q, q[:0], unliteral(False))
        closure_loads(m, d, rows, lam, fext, tauc)
    return st


LOADS = Entry(loads_entry, types.int64, BUF, IN, INT_OUT, OUT, OUT2, OUT)


def closure_loads_at(model, q, lam, data=None):
    """(fext (nb, 6), tau (nv)): the loads Jᵀ λ of multipliers ``lam`` (m,) at q.

    ``fext``: body wrenches ``[n; f]`` in each body's frame about its origin (frame
    closures); ``tau``: joint forces (coupling rows).  So
    ``rnea(q, v, qdd, fext) - tau`` ... see :func:`closure_wrenches`.
    """
    d = workspace(model, data)
    q = configuration(model, q)
    lam = np.ascontiguousarray(vector(lam, model.m, "lam", model))
    fext = np.zeros((model.nbodies, 6))
    tauc = np.zeros(model.nv)
    rows = np.arange(model.m, dtype=np.int64)
    raise_status(model, LOADS.call(d.ctx, q, rows, lam, fext, tauc), "q or lam")
    return fext, tauc


def closure_wrenches(model, q, lam, data=None):
    """Body wrenches (nb, 6) of closure multipliers ``lam`` (m,).

    Row-wise as in :class:`ForwardDynamicsResult`; each wrench ``[n; f]`` is in its
    body's frame about the body origin, the format of ``fext`` in ``ld.rnea`` /
    ``ld.aba``: so ``rnea(q, v, qdd, fext=closure_wrenches(q, lam))`` returns τ
    (for a model with couplings subtract their joint forces, ``closure_loads_at``).
    """
    return closure_loads_at(model, q, lam, data)[0]


def closure_forces(model, q, lam, data=None):
    """Per closure: ``{name: (force, moment)}`` on body B at frame B's origin, world frame.

    Body A receives the opposite force and moment (Newton's third law).  For a
    coupling: ``{name: (force on joint b, force on joint a)}`` (scalars, N or N·m).
    """
    from loopdyn.kinematics.closures import evaluate
    from loopdyn.model.closures import COUPLING, TRANSLATION

    lam = vector(lam, model_arg(model).m, "lam", model)
    d = evaluate(model, q, None, False, data)
    out = {}
    for k, name in enumerate(model.closures):
        sl = model.closure_rows[k]
        if model.row_int[sl.start, 1] == COUPLING:
            r = sl.start
            out[name] = (float(lam[r]), float(-model.row_vec[r, 0, 0] * lam[r]))
            continue
        f = np.zeros(3)
        mo = np.zeros(3)
        for r in range(sl.start, sl.stop):
            if model.row_int[r, 1] == TRANSLATION:
                f += lam[r] * d.rw[r, 0]
            else:
                mo += lam[r] * d.rw[r, 2]
        out[name] = (f, mo)
    return out


__all__ = [
    "GENERAL_METHODS",
    "METHODS",
    "check_method",
    "closure_forces",
    "closure_loads_at",
    "closure_wrenches",
    "forward_dynamics",
]
_unused = (closure_terms, OUT2)
