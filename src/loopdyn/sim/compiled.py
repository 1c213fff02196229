"""The simulation loop inside compiled code: ``ld.simulate(..., compiled=...)``.

For τ None, constant or a ``@numba.njit`` controller ``τ(t, q, v)`` (called at every
stage at the stage's time), the fixed-step ``"RK4"`` and the adaptive Dormand–Prince
pairs ``"RK45"`` (5(4), quartic dense output) and ``"DOP853"`` (Hairer's 8(5,3), dense
output of order 7; ``loopdyn.sim.dop853``) — scipy's coefficients, step-size control,
initial step and dense output at the requested times, so the very steps of scipy's
solvers — run entirely in one numba function, with every stabilisation of
``loopdyn.sim.simulate``: ``"none"``, ``"baumgarte"`` (the correction
M⁻¹Jᵀ(J M⁻¹ Jᵀ)⁻¹c added to the method's q̈), ``"projection"`` (Newton with
minimum-norm steps onto Φ = 0, then v onto J v = 0, after every step and at every
output) and ``"partitioning"`` (the independent coordinates integrated, the dependent
ones by Newton at every evaluation; repartitions and retries as the Python loop, with
``ld.partition`` called in numba's object mode at the steps that repartition), and its
singularity monitor (``System.mobility_crossed``: the sign of det [J; N_refᵀ]).  Every
right-hand side is the method's own compiled entry (the one ``ld.forward_dynamics``
binds, ``Data.bound``), called at its native address, as is the controller's small
adapter (``controller_address``): one loop is compiled for every method and every
controller (~15 s on an empty numba cache, once per machine), and a new
controller compiles only itself.  The outputs (τ, q̈, λ, closure residuals, energy) are
evaluated in the same function.

Configuration space as the Python loop's (``loopdyn.sim.charts``): y = (q, v) where
every joint is Euclidean; with spherical or free joints y = (δ, v), q = qa ⊕ δ
(``ld.integrate``) in a chart re-anchored at every accepted step, δ̇ = J_r(δ)⁻¹ v, and
the projection's Newton steps taken on the manifold.  Trees (no closure) run the ABA
(``dynamics.tree_entry``).

A solve the method cannot finish (singular, inaccurate) is redone by the dense ``augmented``
entry, ``ld.forward_dynamics``'s fallback (``_solve``).
Redundant closures: the method solves on the independent rows detected at the start, and
every evaluation checks the dropped ones (``dynamics.dropped_rows_hold``, the test of
``ld.forward_dynamics``, at half its tolerance).  Anything the compiled loop cannot finish
(a failed solve, a dropped row that does not hold, a singularity, max_steps, a
non-finite state or τ) makes it hand back to the Python loop, which then produces the
documented result or error; so the compiled loop changes speed, never outcomes beyond
the integrator tolerance.
Every ``POLL_STEPS`` accepted steps the loop calls back into Python (``_report``, in
numba's object mode, ~1 µs): the ``progress`` callback of ``ld.simulate``, and Ctrl-C,
which a run on the main thread turns into a flag while it lasts (``_Poll``) so that it
stops at the last accepted step and raises ``SimulationInterrupted`` with the motion so
far, as the Python loop does.

Why one module of ~1,400 lines: it is one numba function (``loop``, ~360 lines: every
integrator, stabilisation, monitor and output of the loop inside one compiled frame, so
that a run never returns to Python between steps) with the helpers it inlines or calls,
and its Python driver (``run``), which packs the loop's arguments and unpacks its
outputs and so changes whenever the loop does; ``sim.dop853`` holds the DOP853
coefficients.
"""

import itertools
import signal
import threading
import time

import numpy as np
from numba import njit, objmode, types
from numba.core.errors import TypingError
from numba.extending import is_jitted, overload

from loopdyn.errors import LoopdynError, SimulationInterrupted
from loopdyn.kernels import tiers
from loopdyn.kernels.linalg import cholesky_inplace, cholesky_solve
from loopdyn.kernels.numba_internals import (
    CONTROLLER,
    DROPPED_CHECK,
    DROPPED_LAMBDA,
    address_of,
    as_input,
    call_check_at,
    call_controller_at,
    call_lambda_at,
    counted,
    entry,
    unliteral,
)
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import closure_terms, constraint_entry, constraint_rank
from loopdyn.kinematics.configuration import integrate_kernel
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods import dynamics
from loopdyn.methods.common import BAD_INPUT, NONFINITE_INPUT
from loopdyn.methods.dynamics import method_call
from loopdyn.model.data import Data
from loopdyn.sim import dop853
from loopdyn.sim.charts import chart_rate_kernel
from loopdyn.sim.partitioning import partition_kernel
from loopdyn.sim.stabilization import System, evaluate_trajectory, tau_function
from loopdyn.sim.trajectory import Trajectory
from loopdyn.tree.crba import crba_kernel

INTEGRATORS = ("RK4", "RK45", "DOP853")
STABILIZATIONS = ("none", "baumgarte", "projection", "partitioning")
MOBILITY_TOL = 1e-8  # as loopdyn.sim.stabilization
MAX_REPARTITIONS = 1000  # more: the Python loop runs
STATE_FAILED = -1e9  # _rhs: the dependent coordinates could not be recovered (partitioning)
# outcomes of the loop
(
    DONE, FAILED_SOLVE, NOT_FINITE, SINGULAR, MAX_STEPS, NO_PROJECTION, STEP_TOO_SMALL,
    REPARTITION, STOPPED,
) = range(9)  # fmt: skip
DROPPED_BROKEN = -7.0  # _rhs: a dropped (redundant) closure row does not hold: the Python loop
POLL_STEPS = 16  # accepted steps between two calls back into Python (progress, Ctrl-C)

# Dormand–Prince 8(5,3) (scipy.integrate.DOP853)
_DA, _DB, _DE3, _DE5, _DD = dop853.A, dop853.B, dop853.E3, dop853.E5, dop853.D
# Dormand–Prince 5(4) (scipy.integrate.RK45)
_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])  # stage times, then the new point
_DC = dop853.C
_A = np.array(
    [
        [0.0, 0, 0, 0, 0],
        [1 / 5, 0, 0, 0, 0],
        [3 / 40, 9 / 40, 0, 0, 0],
        [44 / 45, -56 / 15, 32 / 9, 0, 0],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    ]
)
_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
_E = np.array([-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
_P = np.array(
    [
        [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
        [0, 0, 0, 0],
        [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
        [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
        [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
        [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
        [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
    ]
)


def _expand(u, out, act):
    """τ (nv) into ``out`` from a controller's value ``u``: nv entries, one per actuated
    coordinate ``act``, or a number when one coordinate is actuated (compiled code only;
    ``stabilization.tau_function``'s rule).  False if the shape is wrong or not finite."""
    raise TypeError("_expand is called from compiled code")


@overload(_expand)
def _expand_impl(u, out, act):
    if isinstance(u, types.Number):

        def scalar(u, out, act):
            if act.shape[0] != 1:
                return False
            out[:] = 0.0
            out[act[0]] = u
            return np.isfinite(out[act[0]])

        return scalar
    if isinstance(u, types.Array) and u.ndim == 1:

        def vector(u, out, act):
            n = out.shape[0]
            if u.shape[0] == n:
                for i in range(n):
                    out[i] = u[i]
            elif u.shape[0] == act.shape[0]:
                out[:] = 0.0
                for i in range(act.shape[0]):
                    out[act[i]] = u[i]
            else:
                return False
            for i in range(n):
                if not np.isfinite(out[i]):
                    return False
            return True

        return vector
    return None


@njit(cache=True)
def _put(dst, src):
    """dst[:] = src for vectors of equal length (a plain loop: numba's slice assignment
    compiles a shape check with its error message, ~0.4 s per call site)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


def controller_address(ctl):
    """The address (``numba_internals.address_of``) of ``ctl``'s adapter
    ``(t, q, v, out, act) -> _expand(ctl(t, q, v), out, act)``, compiled for
    ``CONTROLLER`` once per controller (its own small code: the loop is compiled once
    for every controller and calls it at that address).  The adapter is kept on the
    controller (freed with it).  Raises numba's ``TypingError`` if ``ctl`` cannot be
    compiled for (float, vector, vector)."""
    hit = getattr(ctl, "_loopdyn_adapter", None)
    if hit is None:

        @njit(nogil=True)
        def adapter(t, q, v, out, act):
            return _expand(ctl(t, q, v), out, act)

        adapter.compile(CONTROLLER)
        hit = ctl._loopdyn_adapter = (adapter, address_of(adapter, CONTROLLER))
    return hit[1]


@njit(cache=True)
def _tau(ctl, tau, act, t, q, v, u):
    """τ at (t, q, v) into ``u``: the constant ``tau`` when ``ctl`` is 0, else the
    compiled controller at the address ``ctl`` (``controller_address``)."""
    if ctl == 0:
        for i in range(u.shape[0]):
            u[i] = tau[i]
        return True
    return call_controller_at(ctl, t, q, v, u, act)


@counted
def _baumgarte(ctx, q, v, gains, qdd, lam):
    """Add the Baumgarte terms of J q̈ = γ - 2α J v - β² Φ (``System.baumgarte``) to the
    method's q̈ and λ: Δq̈ = M⁻¹Jᵀ S⁻¹ c, Δλ = S⁻¹ c, S = J M⁻¹ Jᵀ, c = -2α J v - β² Φ,
    on the independent rows."""
    m, d = handles(ctx)
    n, r = m.nv, d.nrows
    if r == 0:  # every row vacuous (rank 0): no correction
        return
    constraint_entry(ctx, as_input(q), as_input(q[:0]), True)
    JrT = np.empty((n, r))
    c = np.empty(r)
    for a in range(r):
        row = d.rows[a]
        s = 0.0
        for j in range(n):
            JrT[j, a] = d.J[row, j]
            s += d.J[row, j] * v[j]
        c[a] = -2.0 * gains[0] * s - gains[1] * gains[1] * d.Phi[row]
    M = np.empty((n, n))
    crba_kernel(m, d, as_input(q), M)
    if cholesky_inplace(M, n) == 0.0:
        raise np.linalg.LinAlgError("Baumgarte: the mass matrix is singular")
    X = np.empty((n, r))
    col = np.empty(n)
    for a in range(r):
        for i in range(n):
            col[i] = JrT[i, a]
        cholesky_solve(M, n, col)
        for i in range(n):
            X[i, a] = col[i]
    Sc = np.empty((r, r))  # S = J M⁻¹ Jᵀ
    for a in range(r):
        for b in range(r):
            s = 0.0
            for i in range(n):
                s += JrT[i, a] * X[i, b]
            Sc[a, b] = s
    if cholesky_inplace(Sc, r) == 0.0:
        raise np.linalg.LinAlgError("Baumgarte: J M⁻¹ Jᵀ is singular")
    dl = c
    cholesky_solve(Sc, r, dl)
    for i in range(n):
        s = 0.0
        for a in range(r):
            s += X[i, a] * dl[a]
        qdd[i] += s
    for a in range(r):
        lam[d.rows[a]] += dl[a]


@counted
def _dependent(ctx, P, y):
    """``System._dependent``: the full state (P's ``q``, ``v``) from the independent
    (δ_i, v_i) = y — Newton on Φ = 0 for δ_d from the last solution moved to first order,
    δ_d ≈ δ_d⁰ + G (δ_i - δ_i⁰) with G = -J_d⁻¹ J_i, then v_d = G v_i
    (``partition_kernel``); δ is q itself, or (a model with quaternions) the chart
    coordinates around the anchor P's ``qa`` (q = qa ⊕ δ, the last δ in ``dg``).  False
    where J_d is singular or Newton does not converge."""
    m, d = handles(ctx)
    ind, dep, rows, q, v, G, ps, qa, qs, dg, _ = P
    chart = ps[7] == 1.0
    ni = ind.shape[0]
    x = dg.copy() if chart else q.copy()
    if ps[0] == 1.0:  # G of the last solution
        for a in range(dep.shape[0]):
            s = 0.0
            for b in range(ni):
                s += G[a, b] * (y[b] - x[ind[b]])
            x[dep[a]] += s
    for b in range(ni):
        x[ind[b]] = y[b]
        v[ind[b]] = y[ni + b]
    if dep.shape[0] == 0:  # every row vacuous (rank 0): every coordinate independent
        if chart:
            _put(dg, x)
            integrate_kernel(m.topo, qa, x, 1.0, q)
        else:
            _put(q, x)
        return True
    tol = ps[1]
    last = np.inf
    for _ in range(25):
        if chart:  # the Python loop's q = chart.q(δ): q before the last Newton step
            integrate_kernel(m.topo, qa, x, 1.0, qs)
            constraint_entry(ctx, as_input(qs), as_input(x[:0]), True)
        else:
            constraint_entry(ctx, as_input(x), as_input(x[:0]), True)
        err, ratio = partition_kernel(d.J, d.Phi, rows, ind, dep, x, v, G, tol)
        if ratio < 1e-14:
            return False
        if err <= tol or (err >= 0.5 * last and err <= 1e3 * tol):
            if chart:
                _put(dg, x)
                _put(q, qs)
            else:
                _put(q, x)
            ps[0] = 1.0
            return True
        last = err
    return False


@njit(cache=True, inline="always")  # returns views: built with the caller's flag
def _state(ctx, S, y):
    """(ok, q, v): the full state of the ODE state y = (δ, v) — q = δ itself, or
    q = qa ⊕ δ in the chart around the anchor qa (a model with quaternions; into P's
    ``qs``), or (partitioning) the dependent coordinates recovered by ``_dependent``."""
    P = S[6]
    n = P[4].shape[0]
    if P[6][2] == 1.0:
        ok = _dependent(ctx, P, y)
        return ok, P[3], P[4]
    if P[6][7] == 1.0:
        m, _ = handles(ctx)
        integrate_kernel(m.topo, P[7], y[:n], 1.0, P[8])
        return True, P[8], y[n:]
    return True, y[:n], y[n:]


@njit(cache=True, inline="always")  # returns views: built with the caller's flag
def _accepted(P, y):
    """(q, v) of the accepted state y: P's (partitioning: recovered at the step's end),
    (anchor, v) once the chart is re-anchored there, or y itself."""
    n = P[4].shape[0]
    if P[6][2] == 1.0:
        return P[3], P[4]
    if P[6][7] == 1.0:
        return P[7], y[n:]
    return y[:n], y[n:]


@njit(cache=True, inline="always")  # the method call of _rhs and _record
def _solve(fn, S, q, v, u, qdd, lam):
    """q̈ and λ of the method ``fn`` at (q, v, τ = u), as ``ld.forward_dynamics`` answers:
    where the method's solve fails (singular, inaccurate, not finite) the dense
    ``augmented`` fallback ``RD[2]`` (its entry on the same workspace; none when the
    method is augmented), and the dropped rows ``RD[0]`` of redundant closures checked
    (``dynamics.dropped_rows_hold`` at the address ``RD[3]``, compiled only for a model
    with dropped rows).  The quality > 0, the method's status, or ``DROPPED_BROKEN``.
    Each answer of the fallback is counted in ``P[6][8]`` (``run`` warns and reports it)."""
    ctx, pb, RD = S[0], S[1], S[7]
    qi, vi, ui = as_input(q), as_input(v), as_input(u)
    st = method_call(fn, ctx, pb, qi, vi, ui, qdd, lam)
    if not st > 0.0 and st != NONFINITE_INPUT and st != BAD_INPUT and RD[2][0] != 0:
        failed = st
        st = method_call(RD[2], ctx, pb, qi, vi, ui, qdd, lam)
        if st > 0.0:
            ps = S[6][6]
            ps[8] += 1.0
            if ps[9] == 0.0:
                ps[9] = failed  # the method's status at its first refusal
    if st > 0.0 and RD[0].shape[0]:
        if not call_check_at(RD[3], ctx, RD[0], RD[1], qi, vi, as_input(qdd)):
            return DROPPED_BROKEN
    return st


@entry
def _rhs(fn, S, t, y, f, qdd, lam, u):
    """f = (δ̇, q̈(q, v, τ(t, q, v))) of y = (δ, v), or of y = (δ_i, v_i) when
    partitioning (then f = (δ̇_i, q̈_i)), for the system ``S`` (see ``loop``); δ̇ = v, or
    J_r(δ)⁻¹ v in a chart (``charts.chart_rate_kernel``); the
    method's status (not > 0: failed, ``STATE_FAILED`` where the dependent coordinates
    cannot be recovered, 0 where the controller's τ is unusable).  Compiled as an entry,
    without reference counting (``numba_internals.entry``): it allocates nothing, and
    with counting every array of ``S`` and every view cost atomic updates at each stage
    (~0.2 µs of the four-bar's 1.8 µs a stage); ``_baumgarte``, ``_dependent`` and
    ``dynamics.dropped_rows_hold``, which allocate, are ``counted``."""
    ctx, _, ctl, tau, act, gains, P, _ = S
    ok, q, v = _state(ctx, S, y)
    if not ok:
        return STATE_FAILED
    if not _tau(ctl, tau, act, t, q, v, u):
        return 0.0
    st = _solve(fn, S, q, v, u, qdd, lam)
    if st > 0.0 and gains[2] == 1.0:
        _baumgarte(ctx, q, v, gains, qdd, lam)
    ind = P[0]
    chart = P[6][7] == 1.0
    n = u.shape[0]
    if P[6][2] == 1.0:
        ni = ind.shape[0]
        rate = v
        if chart:
            rate = P[10]
            chart_rate_kernel(handles(ctx)[0].topo, P[9], v, rate)
        for b in range(ni):
            f[b] = rate[ind[b]]
            f[ni + b] = qdd[ind[b]]
    else:
        if chart:
            chart_rate_kernel(handles(ctx)[0].topo, y[:n], v, f[:n])
        else:
            for i in range(n):
                f[i] = v[i]
        for i in range(n):
            f[n + i] = qdd[i]
    return st


@njit(cache=True)
def _pinv(ctx):
    """Jᵀ(J Jᵀ)⁻¹ of the independent rows of the J in ``ctx`` (the Moore–Penrose inverse)."""
    m, d = handles(ctx)
    n, r = m.nv, d.nrows
    A = np.empty((r, r))
    for a in range(r):
        for b in range(r):
            s = 0.0
            for j in range(n):
                s += d.J[d.rows[a], j] * d.J[d.rows[b], j]
            A[a, b] = s
    if cholesky_inplace(A, r) == 0.0:
        raise np.linalg.LinAlgError("projection: J Jᵀ is singular")
    P = np.empty((n, r))
    x = np.empty(r)
    for i in range(n):  # row i of Jᵀ (J Jᵀ)⁻¹ = (J Jᵀ)⁻¹ J[:, i]
        for a in range(r):
            x[a] = d.J[d.rows[a], i]
        cholesky_solve(A, r, x)
        for a in range(r):
            P[i, a] = x[a]
    return P


@njit(cache=True)
def _project(ctx, q, v, tol, chart):
    """``System.project`` with threshold 0, in place: q onto Φ = 0 (Newton,
    minimum-norm steps Δq = -Jᵀ(J Jᵀ)⁻¹Φ on the independent rows, the factor kept while
    it converges; q ⊕ (-Δq) where q holds quaternions, ``chart``), then
    v -= Jᵀ(J Jᵀ)⁻¹ J v at the projected q.  Returns 1 if (q, v) moved, 0 if not, -1 if
    Newton did not converge."""
    m, d = handles(ctx)
    n, r = m.nv, d.nrows
    dq = np.empty(n)
    if r == 0:  # every row vacuous (rank 0): nothing to project onto
        return 0
    q0 = q.copy()
    moved = 0
    last = np.inf
    P = np.empty((n, r))
    have = False
    converged = False
    for _ in range(20):
        constraint_entry(ctx, as_input(q), as_input(q[:0]), True)
        err = 0.0
        for k in range(m.nr):
            err = max(err, abs(d.Phi[k]))
        if err <= tol or (err >= 0.5 * last and err <= 1e3 * tol):
            converged = True
            break
        if not have or err > 0.1 * last:
            P = _pinv(ctx)
            have = True
        last = err
        for i in range(n):
            s = 0.0
            for a in range(r):
                s += P[i, a] * d.Phi[d.rows[a]]
            dq[i] = -s
        if chart:
            _put(q0, q)
            integrate_kernel(m.topo, q0, dq, 1.0, q)
        else:
            for i in range(n):
                q[i] += dq[i]
        moved = 1
    if not converged:
        return -1
    Jv = np.zeros(r)
    vmax = 1.0
    for i in range(n):
        vmax = max(vmax, abs(v[i]))
    big = 0.0
    for a in range(r):
        for j in range(n):
            Jv[a] += d.J[d.rows[a], j] * v[j]
        big = max(big, abs(Jv[a]))
    if big > tol * vmax:
        P = _pinv(ctx)
        for i in range(n):
            s = 0.0
            for a in range(r):
                s += P[i, a] * Jv[a]
            v[i] -= s
        moved = 1
    return moved


@njit(cache=True)
def _frame(ctx, q, Nref, rows):
    """``System._mobility_frame``: (ok, N, sign det [J; Nᵀ], sign det [J; N_refᵀ], how
    much worse the watched ``rows`` are conditioned than J) at q; with redundant rows ok
    is J's conditioning (every row), as there."""
    m, d = handles(ctx)
    n, r = m.nv, rows.shape[0]
    constraint_entry(ctx, as_input(q), as_input(q[:0]), True)
    Jr = np.empty((r, n))
    for a in range(r):
        for j in range(n):
            Jr[a, j] = d.J[rows[a], j]
    if r:
        _, sv, Vt = np.linalg.svd(Jr)
        own = sv[r - 1] / sv[0] if sv[0] > 0 else 0.0
    else:  # every row vacuous (rank 0): N = I (numpy's svd of a 0 × n matrix)
        Vt, own = np.eye(n), 1.0
    ratio = own
    if r and m.nr > r:  # redundant rows: the closures' conditioning is J's
        s = np.linalg.svd(np.ascontiguousarray(d.J[: m.nr]), False)[1]
        ratio = s[r - 1] / s[0] if s[0] > 0 else 0.0
    worse = own / max(ratio, np.finfo(np.float64).tiny)
    N = np.ascontiguousarray(Vt[r:].T)
    K = np.empty((n, n))
    for a in range(n):
        for j in range(n):
            K[a, j] = Jr[a, j] if a < r else N[j, a - r]
    sign = np.linalg.slogdet(K)[0]
    for a in range(r, n):
        for j in range(n):
            K[a, j] = Nref[j, a - r]
    ref = np.linalg.slogdet(K)[0]
    return ratio >= MOBILITY_TOL, N, sign, ref, worse


@njit(cache=True, inline="always")  # two call sites, both inlined into the loop
def _stages(fn, S, t, y, h, K, W, A, C, first, stop):
    """The Runge–Kutta stages K[s] = f(t + C[s] h, y + h Σ_{j<s} A[s, j] K[j]) for
    s = first .. stop - 1 (K[:first] given), evaluated at the work vector ``W[0]``.
    The status of the last right-hand side (> 0), or of the one that failed."""
    ys, _, qdd, lam, u = W
    st = 1.0
    for s in range(first, stop):
        for i in range(y.shape[0]):
            acc = 0.0
            for j in range(s):
                acc += A[s, j] * K[j, i]
            ys[i] = y[i] + h * acc
        st = _rhs(fn, S, t + C[s] * h, ys, K[s], qdd, lam, u)
        if not st > 0.0:
            return st
    return st


@njit(cache=True, inline="always")  # one call site: no library of its own to optimise
def _rk_step(fn, S, t, y, h, K, W, A, B, C):
    """One explicit Runge–Kutta step of size h from (t, y) with K[0] = f(t, y) (scipy's
    ``rk_step``) for the tableau A, B, C of s = len(B) stages (DOP853: s = 12, RK45:
    s = 6; C[s] = 1, the new point): the stages K[1..s-1], the solution ``yd`` and
    K[s] = f(t + h, yd).  ``W``: the work arrays (ys, yd, qdd, lam, u).  The status of
    the last right-hand side (> 0), or of the one that failed."""
    _, yd, qdd, lam, u = W
    ns = B.shape[0]
    st = _stages(fn, S, t, y, h, K, W, A, C, 1, ns)
    if not st > 0.0:
        return st
    for i in range(y.shape[0]):
        acc = 0.0
        for j in range(ns):
            acc += B[j] * K[j, i]
        yd[i] = y[i] + h * acc
    return _rhs(fn, S, t + h, yd, K[ns], qdd, lam, u)


@njit(cache=True)
def _dop_error(K, h, y, yd, rtol, atol):
    """DOP853's error norm of the step (Hairer's 5th- and 3rd-order estimators combined,
    scipy's ``DOP853._estimate_error_norm``); scale atol + max(|y|, |yd|) rtol."""
    e5 = e3 = 0.0
    for i in range(y.shape[0]):
        sc = atol + max(abs(y[i]), abs(yd[i])) * rtol
        a = b = 0.0
        for j in range(13):
            a += K[j, i] * _DE5[j]
            b += K[j, i] * _DE3[j]
        e5 += (a / sc) ** 2
        e3 += (b / sc) ** 2
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * y.shape[0])


@njit(cache=True, inline="always")  # one call site
def _dop_dense(fn, S, t, y, h, K, F, W):
    """DOP853's dense output of the step (t, y) -> (t + h, yd) (scipy's
    ``_dense_output_impl``): the extra stages K[13..15], then the 7 rows of F.  1, or
    the status of the right-hand side that failed."""
    yd = W[1]
    st = _stages(fn, S, t, y, h, K, W, _DA, _DC, 13, 16)
    if not st > 0.0:
        return st
    for i in range(y.shape[0]):
        dy = yd[i] - y[i]
        F[0, i] = dy
        F[1, i] = h * K[0, i] - dy
        F[2, i] = 2.0 * dy - h * (K[12, i] + K[0, i])
        for r in range(4):
            acc = 0.0
            for j in range(16):
                acc += _DD[r, j] * K[j, i]
            F[3 + r, i] = h * acc
    return 1.0


@njit(cache=True)
def _dop_eval(F, y, x, out):
    """The dense output at x = (t - t_old) / h of the step from y (``Dop853DenseOutput``)."""
    for i in range(y.shape[0]):
        acc = 0.0
        for r in range(6, -1, -1):
            acc += F[r, i]
            acc *= x if (6 - r) % 2 == 0 else 1.0 - x
        out[i] = y[i] + acc


@njit(cache=True)
def _record(fn, S, k, t, q, v, O, u):
    """Output k at time t of the state (q, v): the state, τ, q̈ and λ of the method
    (with the Baumgarte terms in that mode), the closure residuals and T + V, into the
    outputs ``O = (Y, QDD, LAM, TAU, RP, RV, EN, COND, REP)``, Y's row (q, v)."""
    Y, QDD, LAM, TAU, RP, RV, EN, COND, _ = O
    ctx, _, ctl, tau, act, gains, _, RD = S
    m, d = handles(ctx)
    n, nq = m.nv, q.shape[0]
    for i in range(nq):
        Y[k, i] = q[i]
    for i in range(n):
        Y[k, nq + i] = v[i]
    st = 0.0
    if _tau(ctl, tau, act, t, q, v, u):
        st = max(_solve(fn, S, q, v, u, QDD[k], LAM[k]), 0.0)  # 0: the Python loop records it
        if st > 0.0 and RD[0].shape[0] and not call_lambda_at(RD[4], ctx, RD[0], LAM[k]):
            st = 0.0
        if st > 0.0 and gains[2] == 1.0:
            _baumgarte(ctx, q, v, gains, QDD[k], LAM[k])
    for i in range(n):
        TAU[k, i] = u[i] if st > 0.0 else np.nan
    COND[k] = 1.0 / st if st > 0.0 else np.inf
    if not st > 0.0:
        for i in range(n):
            QDD[k, i] = np.nan
        for a in range(LAM.shape[1]):
            LAM[k, a] = np.nan
    # one kinematics pass with velocities: Φ, J (no γ), and V, Xw for the energy
    fk_kernel(m, d, as_input(q), as_input(v))
    closure_terms(m, d, as_input(q), as_input(v), unliteral(False), unliteral(True))
    rp = rv = 0.0
    for a in range(m.nr):
        rp = max(rp, abs(d.Phi[a]))
        s = 0.0
        for j in range(n):
            s += d.J[a, j] * v[j]
        rv = max(rv, abs(s))
    RP[k], RV[k] = rp, rv
    # kinetic ½ Σ Vᵢᵀ Iᵢ Vᵢ (body frames) and potential -Σ mᵢ g·cᵢ (world)
    e = 0.0
    for b in range(m.nb):
        I = m.inertia[b]
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += I[r, c] * d.V[b, c]
            e += 0.5 * d.V[b, r] * s
        mass = I[3, 3]
        c0, c1, c2 = I[2, 4] / mass, I[0, 5] / mass, I[1, 3] / mass
        for j in range(3):
            R = d.Xw[b]
            w = R[3, j] + R[j, 0] * c0 + R[j, 1] * c1 + R[j, 2] * c2
            e -= mass * m.gravity[j] * w
    EN[k] = e


def _candidate(key, q):
    """The partition ``System.candidate`` chooses at q (``ld.partition``) for the run
    registered under ``key``: (independent, dependent, rows, cond(J_d)).  Called from
    the compiled loop in object mode, at a repartition check only."""
    ind, dep, rows, cond = _SYSTEMS[int(key)].candidate(np.array(q))
    return ind.astype(np.int64), dep.astype(np.int64), rows.astype(np.int64), float(cond)


def _independent_rows(key, q):
    """``ld.constraint_rank(model, q).independent`` for the run registered under ``key``
    (object mode, where the mobility monitor re-selects its rows)."""
    model = _MODELS[int(key)]
    rank = constraint_rank(model, np.array(q), data=model.create_data())
    return rank.independent.astype(np.int64)


@njit(cache=True)
def _reselect(key, q, watched):
    """``System.mobility_crossed``'s new watched rows: ld.constraint_rank's independent
    rows at q (``_independent_rows``, object mode) into ``watched`` if as many; True if
    taken."""
    with objmode(rows="int64[:]"):
        rows = _independent_rows(key, q)
    if rows.shape[0] != watched.shape[0]:
        return False
    for a in range(watched.shape[0]):
        watched[a] = rows[a]
    return True


_MODELS = {}  # key -> the model of a compiled run (see ``run``)
_SYSTEMS = {}  # key -> the System of a compiled run that partitions (see ``run``)
_POLLS = {}  # key -> the _Poll of a compiled run that calls back (see ``run``)
_KEYS = itertools.count(1)


class _Poll:
    """What a compiled run does when it calls back: ``progress(t, t_end)`` (or None),
    and whether Ctrl-C came (``interrupted``, set by the SIGINT handler ``arm``
    installs) or the callback raised (``error``)."""

    def __init__(self, progress, t_end):
        self.progress, self.t_end = progress, t_end
        self.interrupted, self.error, self._old = False, None, None

    def arm(self):
        """On the main thread, with Python's own SIGINT handler in place: replace it by
        one that only raises the flag (an exception raised inside numba's object-mode
        call would corrupt it; see ``disarm``).  True if armed."""
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False  # somebody else's handler: theirs to run
        self._old = signal.signal(signal.SIGINT, self._flag)
        return True

    def _flag(self, signum, frame):
        self.interrupted = True

    def disarm(self):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None


def _report(key, t):
    """The compiled loop's call back at time t: 1 to stop (Ctrl-C, or the progress
    callback raised: kept in the ``_Poll`` for ``run`` to raise), else 0."""
    p = _POLLS[int(key)]
    if p.progress is not None and not p.interrupted:
        try:
            p.progress(t, p.t_end)
        except KeyboardInterrupt:  # as Ctrl-C (the Python loop's behaviour)
            p.interrupted = True
        except BaseException as e:  # raised again by run, outside compiled code
            p.error = e
            return 1
    return 1 if p.interrupted else 0


@njit(cache=True)
def _checkpoint(P, q, v, key, t):
    """After an accepted step: its full state (q, v) into P[3], P[4] (partitioning
    keeps it there already), then ``_report`` in object mode; True to stop there."""
    _put(P[3], q)
    _put(P[4], v)
    with objmode(stop="int64"):
        stop = _report(key, t)
    return stop != 0


@njit(cache=True)
def _orientation(ctx, P, q):
    """(sign det J_d, κ(J_d)) at q for the partition in P (``System.orientation_at``,
    ``System.condition``; κ = σ_max(J_r) / σ_min(J_d), ``stabilization.partition_condition``)."""
    _, d = handles(ctx)
    dep, rows = P[1], P[2]
    constraint_entry(ctx, as_input(q), as_input(q[:0]), True)
    r, nv = rows.shape[0], d.J.shape[1]
    if r == 0:  # every row vacuous: nothing depends
        return 1.0, 1.0
    Jd = np.empty((r, r))
    Jr = np.empty((r, nv))
    for a in range(r):
        for b in range(r):
            Jd[a, b] = d.J[rows[a], dep[b]]
        for b in range(nv):
            Jr[a, b] = d.J[rows[a], b]
    sign = np.linalg.slogdet(Jd)[0]
    smin = np.linalg.svd(Jd, False)[1][r - 1]
    smax = np.linalg.svd(Jr, False)[1][0]
    return sign, (smax / smin if smin > 0.0 else np.inf)


@njit(cache=True)
def _repartition(ctx, P, q, cond, key, force):
    """``_Run.step``'s repartition at q where cond(J_d) > the threshold: ld.partition's
    choice (``_candidate``, object mode); taken if it differs and halves cond(J_d), or
    always if ``force`` (``System.set_partition`` after a singular step).  Returns 1 if
    a new partition was taken (P holds it, its orientation and no G), 0 if not (with
    ``force``: the same partition, P reset all the same), -1 if the choice changes the
    number of independent coordinates (the Python loop then runs)."""
    ind, dep, rows, ps = P[0], P[1], P[2], P[6]
    with objmode(ind2="int64[:]", dep2="int64[:]", rows2="int64[:]", new="float64"):
        ind2, dep2, rows2, new = _candidate(key, q)
    if ind2.shape[0] != ind.shape[0] or rows2.shape[0] != rows.shape[0]:
        return -1
    same = True
    for b in range(ind.shape[0]):
        same = same and ind2[b] == ind[b]
    if not force and (same or not new < 0.5 * cond):
        return 0
    _put(ind, ind2)
    _put(dep, dep2)
    _put(rows, rows2)
    ps[3] = _orientation(ctx, P, q)[0]
    ps[0] = 0.0  # System.state: the guess is q, no G
    return 0 if same else 1


@njit(cache=True, nogil=True)
def loop(fn, S, y0, t_out, opts, monitor, O, stats):
    """Integrate (q, v) from y0 = (q0, v0) (nq + nv) at t = 0 to t_out[-1] for the method ``fn =
    dynamics.method_pointer(method)``, a runtime value (one compiled loop for every
    method and controller; it releases the GIL), and the system
    ``S = (ctx, pb, ctl, tau, act, gains, P, RD)``: the method's workspace and plan
    buffers, the address of a compiled controller's adapter or 0 for the constant joint
    forces ``tau`` (nv), the actuated coordinates, (α, β, 1 if Baumgarte else 0), the
    partition and chart ``P = (ind, dep, rows, q, v, G, ps, qa, qs, dg, rate)`` (``ps``: G
    known, constraint tol, partitioning 0/1, sign det J_d, repartition cond (0: never),
    run key, repartitions recorded, chart 0/1; the chart's anchor ``qa``, a stage's q
    ``qs``, partitioning's last δ ``dg`` and its rate ``rate``), and the redundant rows
    ``RD = (dropped, model size, fallback, check, multipliers)``: every evaluation checks
    them (``dynamics.dropped_rows_hold`` at the address ``check``, the outputs' λ by
    ``dynamics.min_norm_multipliers`` at ``multipliers``; one that fails hands the run
    back to the Python loop, which re-detects the rank), and a failed solve is redone
    by the fallback (``augmented``'s ``method_pointer``; (0, 0): none), as
    ``ld.forward_dynamics`` (``_solve``).  The ODE state is
    y = (δ, v), or y = (δ_i, v_i) when partitioning, with q = δ, or, for a model with
    quaternions (chart 1), q = qa ⊕ δ in a chart re-anchored at every accepted step
    (``loopdyn.sim.charts``, as the Python loop).  Outputs
    at ``t_out`` into ``O = (Y, QDD, LAM, TAU, RP, RV, EN, COND, REP)``, Y (N, nq + nv), REP
    the repartitions (t, new independent coordinates).  ``opts``: integrator (0 RK4, 1
    RK45, 2 DOP853), dt, rtol, atol, max_step, projection (0/1), constraint tol,
    max_steps, call back (1: ``_checkpoint`` every ``POLL_STEPS`` steps, with the run
    key ps[5]; ``STOPPED`` if it says so).  ``stats``: steps, nfev, projections, outputs
    written, t reached, integrator restarts.  Returns ``DONE`` or why it stopped (the
    caller then runs the Python loop)."""
    ctx, P = S[0], S[6]
    m, d = handles(ctx)
    n = m.nv
    ind, ps, REP = P[0], P[6], O[8]
    reduced = ps[2] == 1.0
    chart = ps[7] == 1.0
    nq = P[3].shape[0]
    q0, v0 = y0[:nq], y0[nq:]
    ni = ind.shape[0]
    adaptive = opts[0] >= 1.0  # RK45 or DOP853
    dop = opts[0] == 2.0
    expo = -1.0 / 8.0 if dop else -1.0 / 5.0  # -1 / (error estimator order + 1)
    fsal = 12 if dop else 6  # the stage at the new point
    TA, TB, TC = (_DA, _DB, _DC) if dop else (_A, _B, _C)  # the tableau (one call site)
    dt, rtol, atol, max_step = opts[1], opts[2], opts[3], opts[4]
    project, tol, max_steps = opts[5] == 1.0, opts[6], opts[7]
    poll = opts[8] == 1.0
    t_end = t_out[-1]
    nout = t_out.shape[0]
    ny = 2 * ni if reduced else 2 * n
    y = np.empty(ny)
    if chart:  # System.state: the chart anchored at q0, δ = 0
        _put(P[7], q0)
        P[9][:] = 0.0
    if reduced:  # System.state: the guess is q0
        _put(P[3], q0)
        _put(P[4], v0)
        for b in range(ni):
            y[b] = 0.0 if chart else q0[ind[b]]
            y[ni + b] = v0[ind[b]]
    else:
        for i in range(n):
            y[i] = 0.0 if chart else q0[i]
            y[n + i] = v0[i]
    qdd = np.empty(n)
    lam = np.empty(max(m.nr, 1))
    K = np.zeros((16, ny))  # the stages (DOP853: with its 3 dense-output stages)
    F = np.empty((7, ny))  # DOP853's dense output of the step
    ys = np.empty(ny)
    yd = np.empty(ny)
    u = np.empty(n)  # τ of the current evaluation
    W = (ys, yd, qdd, lam, u)
    nfev = 0
    steps = 0
    nproj = 0
    k = 0
    t = 0.0
    if t_out[0] == 0.0:
        # k unliteral: numba types the constant k = 0 as Literal[int](0), which would
        # compile a second specialisation of _record (~1.5 s on an empty cache)
        _record(fn, S, unliteral(k), t, q0, v0, O, u)
        k = 1
    N = np.zeros((n, 0))
    sign = 0.0
    watched = np.empty(d.nrows, dtype=np.int64)  # System.monitor_rows: the start's rows
    for a in range(d.nrows):
        watched[a] = d.rows[a]
    if monitor:
        ok, N, sign, _, _ = _frame(ctx, q0, np.zeros((n, n - d.nrows)), watched)
        if not ok:
            return SINGULAR
    if not _rhs(fn, S, t, y, K[0], qdd, lam, u) > 0.0:
        return FAILED_SOLVE
    nfev += 1
    h_abs = dt
    if adaptive and ny == 0:
        # nothing to integrate (partitioning a mechanism with no independent coordinate):
        # scipy's solver steps to t_end at once (OdeSolver.step's empty solver), and every
        # output is the state its Newton recovers
        while k < nout:
            ok, qk, vk = _state(ctx, S, y)
            if not ok:
                return FAILED_SOLVE
            _record(fn, S, k, t_out[k], qk, vk, O, u)
            k += 1
        stats[0], stats[1], stats[2], stats[3], stats[4], stats[5] = 1, nfev, 0, k, t_end, 0
        return DONE
    if adaptive:  # scipy's select_initial_step, error estimator order 4 (RK45) or 7
        d0 = d1 = 0.0
        for i in range(ny):
            sc = atol + abs(y[i]) * rtol
            d0 += (y[i] / sc) ** 2
            d1 += (K[0, i] / sc) ** 2
        d0, d1 = np.sqrt(d0 / ny), np.sqrt(d1 / ny)
        h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        h0 = min(h0, t_end)
        for i in range(ny):
            ys[i] = y[i] + h0 * K[0, i]
        if not _rhs(fn, S, t + h0, ys, K[1], qdd, lam, u) > 0.0:
            return FAILED_SOLVE
        nfev += 1
        d2 = 0.0
        for i in range(ny):
            d2 += ((K[1, i] - K[0, i]) / (atol + abs(y[i]) * rtol)) ** 2
        d2 = np.sqrt(d2 / ny) / h0
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = max(1e-6, h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** -expo
        h_abs = min(100 * h0, h1, t_end, max_step)
    stop_k = 0  # RK4: the next stop among the output times and t_end
    qlast, vlast = q0.copy(), v0.copy()  # the last accepted state (partitioning)
    retried_at = -1.0
    restarts = 0
    cond = 0.0
    while t < t_end:
        if steps >= max_steps:
            stats[4] = t
            return MAX_STEPS
        t0, k0, h_fail = t, k, h_abs
        # a step; failed (partitioning): the dependent coordinates of a stage, an output
        # or the step's end cannot be recovered, or det J_d changed sign
        failed = False
        if adaptive:
            min_step = 10 * abs(np.nextafter(t, np.inf) - t)
            h_abs = min(max(h_abs, min_step), max_step)
            rejected = False
            while True:
                if h_abs < min_step:
                    stats[4] = t
                    return STEP_TOO_SMALL
                h = h_abs
                t_new = t + h
                if t_new > t_end:
                    t_new = t_end
                h = t_new - t
                h_abs = abs(h)
                st = _rk_step(fn, S, t, y, h, K, W, TA, TB, TC)
                if not st > 0.0:
                    if st == STATE_FAILED:
                        failed = True
                        break
                    return FAILED_SOLVE
                if dop:
                    nfev += 12
                    en = _dop_error(K, h, y, yd, rtol, atol)
                else:
                    nfev += 6
                    en = 0.0
                    for i in range(ny):
                        e = 0.0
                        for j in range(7):
                            e += K[j, i] * _E[j]
                        e *= h / (atol + max(abs(y[i]), abs(yd[i])) * rtol)
                        en += e * e
                    en = np.sqrt(en / ny)
                if en < 1.0:
                    factor = 10.0 if en == 0.0 else min(10.0, 0.9 * en**expo)
                    if rejected:
                        factor = min(1.0, factor)
                    h_abs *= factor
                    break
                h_abs *= max(0.2, 0.9 * en**expo)
                rejected = True
            # outputs strictly inside the step: the dense output of RK45 (quartic) or of
            # DOP853 (order 7, its 3 extra stages evaluated at the step's first output)
            dense = False
            while not failed and k < nout and t_out[k] < t_new:
                x = (t_out[k] - t) / h
                if dop:
                    if not dense:
                        st = _dop_dense(fn, S, t, y, h, K, F, W)
                        if not st > 0.0:
                            if st == STATE_FAILED:
                                failed = True
                                break
                            return FAILED_SOLVE
                        nfev += 3
                        dense = True
                    _dop_eval(F, y, x, ys)
                else:
                    for i in range(ny):
                        acc = 0.0
                        for j in range(7):
                            p = x
                            qj = 0.0
                            for c in range(4):
                                qj += _P[j, c] * p
                                p *= x
                            acc += K[j, i] * qj
                        ys[i] = y[i] + h * acc
                ok, qk, vk = _state(ctx, S, ys)
                if not ok:
                    failed = True
                    break
                if project and _project(ctx, qk, vk, tol, chart) < 0:
                    return NO_PROJECTION
                _record(fn, S, k, t_out[k], qk, vk, O, u)
                k += 1
            if not failed:
                for i in range(ny):  # first same as last
                    K[0, i] = K[fsal, i]
        else:  # classical RK4 whose steps end on the output times
            while t_out[stop_k] <= t:
                stop_k += 1
            stop = t_out[stop_k]
            h = dt
            if t + h >= stop - 1e-9 * h:
                h = stop - t
                t_new = stop
            else:
                t_new = t + h
            st = 1.0
            if steps > 0 or restarts > 0:
                st = _rhs(fn, S, t, y, K[0], qdd, lam, u)
            for s in range(1, 4):
                if not st > 0.0:
                    break
                c = 0.5 if s < 3 else 1.0
                for i in range(ny):
                    ys[i] = y[i] + c * h * K[s - 1, i]
                st = _rhs(fn, S, t + c * h, ys, K[s], qdd, lam, u)
            if not st > 0.0:
                if st != STATE_FAILED:
                    return FAILED_SOLVE
                failed = True
            else:
                nfev += 4 if steps > 0 or restarts > 0 else 3
                for i in range(ny):
                    yd[i] = y[i] + (h / 6.0) * (K[0, i] + 2.0 * K[1, i] + 2.0 * K[2, i] + K[3, i])
        if not failed:
            for i in range(ny):
                if not np.isfinite(yd[i]):
                    stats[4] = t
                    return NOT_FINITE
            _put(y, yd)
            t = t_new
            if not reduced:
                # the step's end (q, v); with projection onto the manifolds; in a chart
                # re-anchored there (δ = 0, δ̇ = v: the solver's state modified, its last
                # q̈ kept; System.state, as the Python loop after every step)
                _, qe, ve = _state(ctx, S, y)
                moved = _project(ctx, qe, ve, tol, chart) if project else 0
                if moved < 0:
                    return NO_PROJECTION
                nproj += moved
                if chart:
                    _put(P[7], qe)
                if moved or chart:
                    for i in range(n):
                        if chart:
                            y[i] = 0.0
                        K[0, i] = y[n + i]
            else:
                # the full state at the step's end; det J_d must keep its sign (else the
                # independent coordinates passed a fold of q_d(q_i))
                if not _dependent(ctx, P, y):
                    failed = True
                else:
                    orient, cond = _orientation(ctx, P, P[3])
                    failed = orient != ps[3]
                if chart and not failed:  # re-anchored at q: δ = 0, no G (System.state)
                    _put(P[7], P[3])
                    P[9][:] = 0.0
                    ps[0] = 0.0
                    for b in range(ni):
                        y[b] = 0.0
                        K[0, b] = y[ni + b]
                h_fail = h_abs
        if failed:
            # System: a new partition at the last accepted state and a fresh integrator
            # from there with a quarter of the step, once per state; else singular
            if not (reduced and ps[4] > 0.0 and retried_at != t0):
                stats[4] = t0
                return SINGULAR
            retried_at = t0
            t, k = t0, k0
            taken = _repartition(ctx, P, qlast, 0.0, ps[5], unliteral(True))
            if taken < 0 or (taken and ps[6] >= REP.shape[0]):
                stats[4] = t
                return REPARTITION
            if taken:
                _note_repartition(REP, ps, t, ind)
            _put(P[3], qlast)
            _put(P[4], vlast)
            if chart:
                _put(P[7], qlast)
                P[9][:] = 0.0
            for b in range(ni):
                y[b] = 0.0 if chart else qlast[ind[b]]
                y[ni + b] = vlast[ind[b]]
            restarts += 1
            if adaptive:
                if not _rhs(fn, S, t, y, K[0], qdd, lam, u) > 0.0:
                    return FAILED_SOLVE
                nfev += 1
                h_abs = min(0.25 * h_fail, t_end - t)
            stats[5] = restarts
            continue
        qe, ve = _accepted(P, y)
        if monitor:
            ok, N2, own, ref, worse = _frame(ctx, qe, N, watched)
            if not ok or ref != sign:
                stats[4] = t0
                return SINGULAR
            if worse < 0.5 and _reselect(ps[5], qe, watched):
                # System.mobility_crossed: the watched rows (of redundant closures) lost
                # rank where J did not; the next step is watched on the rows independent here
                ok, N2, own, _, _ = _frame(ctx, qe, N, watched)
            N, sign = N2, own
        restart = False
        if reduced and ps[4] > 0.0 and cond > ps[4]:
            taken = _repartition(ctx, P, P[3], cond, ps[5], unliteral(False))
            if taken < 0 or (taken and ps[6] >= REP.shape[0]):
                stats[4] = t
                return REPARTITION
            if taken:  # restart the integrator from the state in the new partition
                _note_repartition(REP, ps, t, ind)
                for b in range(ni):
                    y[b] = 0.0 if chart else P[3][ind[b]]
                    y[ni + b] = P[4][ind[b]]
                restart = True
                restarts += 1
        if reduced:
            _put(qlast, P[3])
            _put(vlast, P[4])
        steps += 1
        if k < nout and t_out[k] == t:
            _record(fn, S, k, t, qe, ve, O, u)
            k += 1
        if restart and adaptive:  # scipy's new solver: f at the state, the last step size
            if not _rhs(fn, S, t, y, K[0], qdd, lam, u) > 0.0:
                return FAILED_SOLVE
            nfev += 1
            h_abs = min(h_abs, t_end - t)
        stats[0], stats[1], stats[2], stats[3], stats[4] = steps, nfev, nproj, k, t
        stats[5] = restarts
        if poll and steps % POLL_STEPS == 0 and t < t_end:
            if _checkpoint(P, qe, ve, ps[5], t):
                return STOPPED
    stats[0], stats[1], stats[2], stats[3], stats[4] = steps, nfev, nproj, k, t
    stats[5] = restarts
    return DONE


@njit(cache=True)
def _note_repartition(REP, ps, t, ind):
    """Record a new partition (time, independent coordinates) in REP; ps[6] counts them."""
    r = int(ps[6])
    REP[r, 0] = t
    for b in range(ind.shape[0]):
        REP[r, 1 + b] = ind[b]
    ps[6] += 1.0


def ready():
    """Whether ``ld.simulate`` runs this loop when it applies (``loopdyn.kernels.tiers``):
    under the ``auto`` policy, once its machine code is on disk (else a background build
    is asked for, and the Python loop runs); always under ``compiled``; never under
    ``eager``."""
    return tiers.kernel(loop) is loop


def eligible(model, tau, integrator, stabilization):
    """None if the compiled loop applies, else the reason it does not (a string)."""
    if callable(tau) and not is_jitted(tau):
        return "tau is a Python controller (decorate it with @numba.njit to run compiled)"
    if integrator not in INTEGRATORS:
        return f"integrator {integrator!r} (compiled: {', '.join(INTEGRATORS)})"
    if stabilization not in STABILIZATIONS and model.m:
        return f"stabilization {stabilization!r} (compiled: {', '.join(STABILIZATIONS)})"
    return None


def run(model, q, v, tau, method, integrator, mode, a, monitor, max_steps, repartition=True,
        independent=None, progress=None):  # fmt: skip
    """The compiled loop from the consistent (q, v); a :class:`Trajectory` like
    ``ld.simulate``'s, or None when the compiled loop cannot finish (the caller then runs
    the Python loop).  ``tau``: None, a constant (nv or one per actuated coordinate) or
    a numba-compiled controller ``tau(t, q, v)``; ``a``: ``check_arguments``;
    ``repartition`` and ``independent``: ``ld.simulate``'s, for ``mode="partitioning"``;
    ``progress(t, t_end)``: called every ``POLL_STEPS`` steps and at the end.  On the main
    thread Ctrl-C stops the loop at its next call back: ``SimulationInterrupted`` with
    the outputs so far and the last accepted state (as the Python loop's).  Each call has
    its own workspaces: calls from several threads run in parallel (the loop releases the
    GIL; a repartition or a call back takes it)."""
    wall0 = time.perf_counter()
    nv, m = model.nv, model.m
    d = Data(model, dense=True)
    ctl = 0
    try:
        tau0 = tau_function(model, tau)(0.0, q, v)
        dynamics.forward_dynamics(model, q, v, tau0, method=method, data=d)
    except (LoopdynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None  # a singular start or a bad τ: the Python loop reports it
    if m == 0:  # a tree: every method is the ABA (ld.forward_dynamics binds none)
        fn, ctx, pb = dynamics.tree_binding(d)
    else:
        bound = d.bound.get(method)
        if bound is not None:
            call = bound[0]
        else:
            # ld.forward_dynamics keeps no fast path where its answer needs the dropped-row
            # check (redundant rows) or came from its fallback (the method failed at the
            # start): the loop binds the method on the rows detected at the start and
            # does the rest itself (_solve)
            try:
                call = dynamics.BINDERS[method](model, d)
            except (LoopdynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
                return None
        ctx, pb = dynamics.bound_buffers(call)
        fn = dynamics.method_pointer(method)
    t_out = a["t_out"]
    nout = t_out.size
    project = mode == "projection" and m > 0
    opts = np.array(
        [
            float(INTEGRATORS.index(integrator)), a["dt"] or 0.0, a["rtol"], a["atol"],
            a["max_step"], float(project), a["constraint_tol"], float(max_steps), 0.0,
        ]
    )  # fmt: skip
    gains = np.array([*a["gains"], float(mode == "baumgarte" and m > 0)])
    act = np.array(model.actuated, dtype=np.int64)  # writable: CONTROLLER's int64[::1]
    no = np.zeros(0, dtype=np.int64)
    key = next(_KEYS)
    nq = model.nq
    chart = float(model.has_quaternions)
    # ps[8]: evaluations the augmented fallback answered, ps[9]: the method's first refusal
    ps = np.array([0.0, a["constraint_tol"], 0.0, 0.0, 0.0, float(key), 0.0, chart, 0.0, 0.0])
    CH = (np.zeros(nq), np.zeros(nq), np.zeros(nv), np.zeros(nv))  # qa, qs, dg, rate
    P = (no, no.copy(), no.copy(), np.zeros(nq), np.zeros(nv), np.zeros((0, 0)), ps, *CH)
    if mode == "partitioning" and m > 0:
        # the initial partition as the Python loop chooses it, on a workspace of its own
        sy = System(
            model, method, None, mode, a["gains"], a["constraint_tol"], Data(model, dense=True),
            independent,
        )  # fmt: skip
        try:
            sy.start(q, v)
        except (LoopdynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
            return None
        _SYSTEMS[key] = sy
        ind, dep, rows = (np.array(x, dtype=np.int64) for x in (sy.ind, sy.dep, sy.rows))
        ps[2:5] = 1.0, sy.orientation, a["repartition_cond"] if repartition else 0.0
        G = np.empty((dep.size, ind.size))
        P = (ind, dep, rows, np.zeros(nq), np.zeros(nv), G, ps, *CH)
    if callable(tau):
        try:
            ctl = controller_address(tau)
        except TypingError:
            return None  # the Python loop calls it (and reports what it raises)
    # redundant closure rows: the ones the method drops, checked at every evaluation
    dropped = np.zeros(0, dtype=np.int64)
    if d.rank_info is not None:
        dropped = np.ascontiguousarray(d.rank_info.dropped, dtype=np.int64)
    # the dense fallback of a failed solve, as ld.forward_dynamics (DeNOC on the Delta near
    # its singular poses: J q̈ = γ inaccurate at 5 stages of 0.5 s, answered by augmented)
    fallback = dynamics.method_pointer("augmented") if m and method != "augmented" else (0, 0)
    check = multipliers = 0  # their addresses: compiled only where rows are dropped
    if dropped.size:
        for fn_, sig in ((dynamics.dropped_rows_hold, DROPPED_CHECK),
                         (dynamics.min_norm_multipliers, DROPPED_LAMBDA)):  # fmt: skip
            fn_.compile(sig)  # or loaded from the cache
        check = address_of(dynamics.dropped_rows_hold, DROPPED_CHECK)
        multipliers = address_of(dynamics.min_norm_multipliers, DROPPED_LAMBDA)
    RD = (dropped, float(dynamics.model_size(model)), fallback, check, multipliers)
    system = (ctx, pb, ctl, np.ascontiguousarray(tau0, dtype=float), act, gains, P, RD)
    O = (
        np.full((nout, nq + nv), np.nan),  # Y
        np.full((nout, nv), np.nan),  # QDD
        np.full((nout, max(m, 1)), np.nan),  # LAM
        np.full((nout, nv), np.nan),  # TAU
        *(np.zeros(nout) for _ in range(4)),  # RP, RV, EN, COND
        np.zeros((MAX_REPARTITIONS, 1 + P[0].size)),  # REP
    )
    stats = np.zeros(6)
    y0 = np.concatenate([q, v])
    poll = _POLLS[key] = _Poll(progress, float(t_out[-1]))
    _MODELS[key] = model
    opts[8] = float(poll.arm() or progress is not None)
    try:
        out = loop(fn, system, y0, t_out, opts, bool(monitor and m > 0), O, stats)
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None
    finally:
        poll.disarm()
        _SYSTEMS.pop(key, None)
        _POLLS.pop(key, None)
        _MODELS.pop(key, None)
    if poll.error is not None:
        raise poll.error
    if out == STOPPED or poll.interrupted:
        raise _interrupted(model, method, tau, mode, a, independent, integrator, O, stats, P, wall0)
    if out != DONE or not np.all(np.isfinite(O[7])):
        # an output whose method call failed (condition inf): the Python loop records
        # it through ld.forward_dynamics's rank re-detection and fallback instead
        return None
    Y, QDD, LAM, TAU, RP, RV, EN, COND, _ = O
    nst = _run_stats(stats, O[8], ps, wall0)
    if ps[8] > 0.0:  # as ld.forward_dynamics: a FallbackWarning once per model and method
        dynamics.warn_fallback(
            model, method, "augmented", ps[9],
            f"at {int(ps[8])} of {int(stats[1])} evaluations of the compiled simulation loop",
        )  # fmt: skip
    if progress is not None:
        progress(float(t_out[-1]), float(t_out[-1]))
    return Trajectory(
        t=t_out.copy(),
        q=Y[:, :nq].copy(),
        v=Y[:, nq:].copy(),
        qdd=QDD,
        lam=LAM[:, :m],
        tau=TAU,
        residual_position=RP,
        residual_velocity=RV,
        energy=EN,
        condition=COND,
        model_name=model.name,
        method=method,
        integrator=integrator,
        stabilization=mode,
        rtol=float(a["rtol"]),
        atol=float(a["atol"]),
        stats=nst,
        completed=True,
        message="completed",
        model=model,
    )


def _run_stats(stats, REP, ps, wall0):
    """``Trajectory.stats`` of a compiled run from the loop's ``stats`` array and its
    repartitions (the first ps[6] rows of REP)."""
    return dict(
        steps=int(stats[0]), nfev=int(stats[1]), projections=int(stats[2]),
        repartitions=[(float(r[0]), r[1:].astype(int).tolist()) for r in REP[: int(ps[6])]],
        restarts=int(stats[5]), wall_time=time.perf_counter() - wall0, compiled=True,
        fallbacks=int(ps[8]),
    )  # fmt: skip


def _interrupted(model, method, tau, mode, a, independent, integrator, O, stats, P, wall0):
    """``SimulationInterrupted`` for a compiled run stopped by Ctrl-C: the outputs it wrote,
    then the last accepted state (P[3], P[4] at time stats[4]) evaluated by the Python
    loop's ``evaluate_trajectory``, as ``_Run.fail`` does."""
    nq, m, k = model.nq, model.m, int(stats[3])
    t, q, v = float(stats[4]), P[3].copy(), P[4].copy()
    system = System(
        model, method, tau_function(model, tau), mode, a["gains"], a["constraint_tol"],
        Data(model, dense=True), independent,
    )  # fmt: skip
    cond = system.condition(q)
    message = (
        f"{model.name}: interrupted (Ctrl-C); stopped at t = {t:.6g} s "
        f"(condition number {cond:.3g})"
    )
    Y, QDD, LAM, TAU, RP, RV, EN, COND, REP = O
    st = _run_stats(stats, REP, P[6], wall0)
    t_out = a["t_out"]
    last = evaluate_trajectory(
        system, [t], [q], [v], st, integrator, a["rtol"], a["atol"], False, ""
    )
    extra = 1 if k == 0 or t > t_out[k - 1] else 0

    def rows(x, y):
        return np.concatenate([x[:k], y[:extra]])

    traj = Trajectory(
        t=rows(t_out, last.t), q=rows(Y[:, :nq], last.q), v=rows(Y[:, nq:], last.v),
        qdd=rows(QDD, last.qdd), lam=rows(LAM[:, :m], last.lam), tau=rows(TAU, last.tau),
        residual_position=rows(RP, last.residual_position),
        residual_velocity=rows(RV, last.residual_velocity), energy=rows(EN, last.energy),
        condition=rows(COND, last.condition), model_name=model.name, method=method,
        integrator=integrator, stabilization=mode, rtol=float(a["rtol"]),
        atol=float(a["atol"]), stats=st, completed=False, message=message, model=model,
    )  # fmt: skip
    return SimulationInterrupted(message, trajectory=traj, t=t, q=q, v=v, condition=cond)
