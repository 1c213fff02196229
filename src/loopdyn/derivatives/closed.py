"""Analytic derivatives of closed-loop forward and inverse dynamics.

Forward dynamics (``augmented``, eq. (10) of the reduced-order paper) solves, on the
independent closure rows k (``res.dropped`` removed, the methods' rank logic),

    E1 = RNEA(q, v, q̈) - J_kᵀ μ - τ = 0,      E2 = J_k q̈ - γ_k = Φ̈_k(q, v, q̈) = 0   (D1)

and implicit differentiation with the KKT factors gives, for x = q, v (tangent
directions, q ⊕ δ = ``ld.integrate``) and τ:

    [ M    -J_kᵀ ] [ ∂q̈/∂x ]     [ ∂E1/∂x ]            ∂E1/∂τ = -I,  ∂E2/∂τ = 0    (D2)
    [ J_k   0    ] [ ∂μ/∂x  ] = - [ ∂E2/∂x ],

∂E1/∂q being the RNEA derivative with the closure forces as world wrenches
f_b = Σ_r ξ_r μ_r on body b (-f_b on a) held at fixed μ but moving with q
(``tree.force_tangents_backward`` after ``row_tangents``), and ∂E2/∂q, ∂E2/∂v the
derivatives of the acceleration rows at fixed (v, q̈).

The rows' tangents (the row wrenches ξ, (D3), the row forms, (D5)-(D6)) are in
``loopdyn.derivatives.rows``.

Compiled (numba): one entry, ``derivatives_entry``, runs the kinematics, the mass
matrix, the tangent recursions of ``loopdyn.derivatives.tree``, the rows' tangents
(``rows.row_tangents``) and the KKT solve (``kkt_solve``: the augmented kernel's
factors where usable, else an in-order LU of the scaled matrix, partial pivoting where
that one is poor; all 3 nv right-hand sides at once) on a Data of the model (its dense
blocks) and the derivatives' own workspace buffer, without allocation; a status says
when it stopped (singular KKT matrix, a rotation row at a half-turn), and only a
finished call's numbers are returned.

Files: the rows' tangents are ``rows.py`` and the tree's recursions ``tree.py``; this
module (~750 lines) keeps the KKT system, its compiled entry and the Python API
(results, the checked path, the tangent-space projection, inverse dynamics), which
share the workspace and the statuses.
"""

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, types

from loopdyn.derivatives.rows import row_tangents
from loopdyn.derivatives.tree import (
    allocate_workspace,
    force_tangents_backward,
    inertial_forces,
    tangent_views,
    world_tangents,
)
from loopdyn.errors import AssemblyError, SingularityError
from loopdyn.kernels.checks import STATE_OK, all_finite, raise_status, state_status
from loopdyn.kernels.linalg import (
    lu_inplace,
    lu_inverse_norm,
    lu_nopivot_inplace,
    lu_solve_rows,
)
from loopdyn.kernels.numba_internals import BUF, IN, OUT, OUT2, Entry, as_input, entry, unliteral
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import constraint_kernel, evaluate
from loopdyn.methods.augmented import augmented_kernel, kkt_norm
from loopdyn.methods.dynamics import forward_dynamics
from loopdyn.tree.crba import crba_from_poses
from loopdyn.validation import configuration, model_arg, vector

# 1 / (estimated condition of the KKT matrix) below which (D2) is singular
KKT_RCOND = 1e-14
# the spread of the in-order elimination's pivots (``kkt_solve``) beyond which it is
# done again with partial pivoting
NOPIV_RATIO = 1e-10
# the augmented kernel's LU factors with row exchanges are reused for (D2) up to this
# size of the KKT system (``_augmented_factors``)
PIVOTED_REUSE = 16
# statuses of derivatives_entry besides kernels.checks' STATE_* (> 0: 1 / cond, done)
SINGULAR = -1.0
NONFINITE_OUTPUT = -2.0
FD_FAILED = -7.0
HALF_TURN = -8.0  # a swing or log row at a half-turn (``_rotation_row``)


# ---------------------------------------------------------------- compiled kernels
@njit(cache=True)
def _kkt_matrix(m, d, w):
    """w.K (leading n + r block) = [M, -J_kᵀ S; S J_k, 0] with J_k's rows scaled by powers
    of two S (``w.sc``; exact: the augmented method's scaling); returns ‖K‖₁."""
    n, r = m.nv, d.nrows
    K, M, Jk, sc = w.K, w.M, w.Jk, w.sc
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j]
    for t in range(r):
        jm = 0.0
        for j in range(n):
            jm = max(jm, abs(Jk[t, j]))
        s = math.ldexp(1.0, -max(math.frexp(jm)[1], -1000))
        sc[t] = s
        for j in range(n):
            K[n + t, j] = s * Jk[t, j]
            K[j, n + t] = -s * Jk[t, j]
        for j in range(r):
            K[n + t, n + j] = 0.0
    knorm = 0.0
    for j in range(n + r):
        x = 0.0
        for i in range(n + r):
            x += abs(K[i, j])
        knorm = max(knorm, x)
    return knorm


@njit(cache=True)
def _factor_rcond(w, k, knorm, pivoting):
    """LU of w.K's leading k block (``lu_nopivot_inplace`` or, with ``pivoting``,
    ``lu_inplace``) and 1 / its estimated condition ‖K‖₁ ‖U⁻¹‖₁ (0 for a zero pivot)."""
    ratio = lu_inplace(w.K, k, w.piv) if pivoting else lu_nopivot_inplace(w.K, k, w.piv)
    if not ratio > 0.0:
        return 0.0
    return 1.0 / (knorm * lu_inverse_norm(w.K, k, w.kw)) if k > 0 else 1.0


@njit(cache=True)
def _solve_inorder(K, k, n, B):
    """B ← K⁻¹ B for in-order LU factors of K (no row exchanges: unit lower L, U in K),
    B = [-∂E/∂q, -∂E/∂v, [I; 0]] (k × 3n) of (D2): ``linalg.lu_solve_rows``'s row updates
    (the factors' zeros skipped) where the forward pass also skips the τ block's zeros:
    L⁻¹ [I; 0] is lower triangular in its first n rows, so row j < n holds τ columns
    0..j only.  (Not ``lu_solve_rows`` itself: the column bound ``cend`` is this
    right-hand side's structure, which the generic solve cannot know; skipping those
    zeros took 0.1-0.3 of the four-bar's and the ladders' solves, commit 584ca11.)"""
    nc = B.shape[1]
    for i in range(k):
        for j in range(i):
            f = K[i, j]
            if f != 0.0:
                cend = 2 * n + j + 1 if j < n else nc
                for c in range(cend):
                    B[i, c] -= f * B[j, c]
    for i in range(k - 1, -1, -1):
        for j in range(i + 1, k):
            f = K[i, j]
            if f != 0.0:
                for c in range(nc):
                    B[i, c] -= f * B[j, c]
        dg = K[i, i]
        for c in range(nc):
            B[i, c] = B[i, c] / dg


@njit(cache=True)
def _solve(K, k, n, piv, B):
    """B ← K⁻¹ B from LU factors of K with pivots ``piv``: ``_solve_inorder`` where there
    were no row exchanges, else ``linalg.lu_solve_rows``."""
    for i in range(k):
        if piv[i] != i:
            lu_solve_rows(K, k, piv, B)
            return
    _solve_inorder(K, k, n, B)


@njit(cache=True)
def _augmented_factors(m, d, w):
    """1 / the estimated condition of the augmented kernel's KKT matrix
    K' = [M, (S J_k)ᵀ; S J_k, 0] (eq. (10), rows scaled by S, its scales recomputed into
    ``w.sc`` by its rule) from its LU factors in ``d.K``, where they are usable for (D2),
    else 0: factored in order (``d.piv`` the identity, so the factors are the in-order
    ones and keep the graph's sparsity) with a pivot spread within ``NOPIV_RATIO``, or
    with row exchanges on a system of at most ``PIVOTED_REUSE`` rows (the four-bar's
    5: there the fill of partial pivoting costs less than a second factorization)."""
    n, r = m.nv, d.nrows
    k = n + r
    umin, umax = 1e300, 0.0
    pivoted = False
    for i in range(k):
        pivoted = pivoted or d.piv[i] != i
        umin = min(umin, abs(d.K[i, i]))
        umax = max(umax, abs(d.K[i, i]))
    if pivoted and k > PIVOTED_REUSE:
        return 0.0
    if not pivoted and not umin > NOPIV_RATIO * umax:
        return 0.0
    for a in range(r):
        jm = 0.0
        for j in range(n):
            jm = max(jm, abs(d.J[d.rows[a], j]))
        w.sc[a] = math.ldexp(1.0, -max(math.frexp(jm)[1], -1000))
    if k == 0:
        return 1.0
    return 1.0 / (kkt_norm(m, d, w.sc) * lu_inverse_norm(d.K, k, w.kw))


@njit(cache=True)
def kkt_solve(m, d, w, B, reuse):
    """(D2): B ← [M, -J_kᵀ; J_k, 0]⁻¹ B, the right-hand sides -[∂E/∂q, ∂E/∂v] already in
    B's first 2 nv columns, [I; 0] (τ) put in the last nv; rows scaled (``_kkt_matrix``)
    and the multipliers' rows of the solution scaled back.

    Factored in order, q first, without row exchanges (``lu_nopivot_inplace``: M's
    pivots, then those of -J M⁻¹ Jᵀ; the factors keep the sparsity of the mechanism's
    graph, O(nv²) for the whole solve on a ladder, where partial pivoting filled them);
    where that elimination's pivots spread beyond ``NOPIV_RATIO`` or its condition
    estimate is below ``KKT_RCOND``, again with partial pivoting (``lu_inplace``), whose
    estimate decides.  All 3 nv right-hand sides at once (``lu_solve_rows``).  Returns
    1 / (the estimated condition of the scaled matrix), or ``SINGULAR`` if it is below
    ``KKT_RCOND``.

    ``reuse`` (after the augmented kernel): its factors of K' = [M, (S J_k)ᵀ; S J_k, 0]
    in ``d.K`` serve where they are in-order factors, or pivoted ones of a small system
    (``_augmented_factors``): K' [x; y]
    = [b1; S b2] gives x = ∂q̈ and μ = -S y (K' is the KKT matrix with the multipliers'
    columns scaled by -S), so the matrix is not built nor factored again."""
    n, r = m.nv, d.nrows
    k = n + r
    for i in range(k):
        for c in range(2 * n):
            B[i, c] = -B[i, c]
        for c in range(n):
            B[i, 2 * n + c] = 1.0 if i == c else 0.0
    if reuse:
        rc = _augmented_factors(m, d, w)
        if rc > KKT_RCOND:
            return _scaled_solve(m, d, w, d.K, d.piv, B, rc, -1.0)
    knorm = _kkt_matrix(m, d, w)
    rc = _factor_rcond(w, k, knorm, unliteral(False))
    # the no-pivot pivots' spread bounds the growth of the elimination's factors
    umin, umax = 1e300, 0.0
    for i in range(k):
        umin = min(umin, abs(w.K[i, i]))
        umax = max(umax, abs(w.K[i, i]))
    if not (rc > KKT_RCOND and umin > NOPIV_RATIO * umax):
        _kkt_matrix(m, d, w)
        rc = _factor_rcond(w, k, knorm, unliteral(True))
    if not rc > KKT_RCOND:
        w.diag[2] = rc
        return SINGULAR
    return _scaled_solve(m, d, w, w.K, w.piv, B, rc, 1.0)


@njit(cache=True)
def _scaled_solve(m, d, w, K, piv, B, rc, sign):
    """``kkt_solve``'s solve with factors K, ``piv`` of the KKT matrix with its rows
    (and, ``sign`` -1, the multipliers' columns: the augmented kernel's K') scaled by
    S = ``w.sc``: B's multiplier rows scaled by S, solved (``_solve``), scaled back by
    ``sign`` S.  Returns ``rc`` (into ``w.diag[2]``) or ``NONFINITE_OUTPUT``."""
    n, r = m.nv, d.nrows
    k, nc = n + r, B.shape[1]
    w.diag[2] = rc
    for t in range(r):
        for c in range(nc):
            B[n + t, c] *= w.sc[t]
    _solve(K, k, n, piv, B)
    for t in range(r):
        for c in range(nc):
            B[n + t, c] *= sign * w.sc[t]
    for i in range(k):
        if not all_finite(B[i]):
            return NONFINITE_OUTPUT
    return rc


# derivatives_entry's modes
GIVEN, GIVEN_SOLVE, AUGMENTED_SOLVE = 0, 1, 2


@entry
def derivatives_entry(ctx, wb, q, v, tau, qdd, mu, mode, B):
    """The derivatives at (q, v, q̈) with the multipliers ``mu`` of the rows ``d.rows``
    (r of them) into ``B`` ((nv + r) × 3 nv).  ``mode``: ``GIVEN``, q̈ and μ given,
    B = [∂E1/∂q, ∂E1/∂v, M] over [∂E2/∂q, ∂E2/∂v, J_k] (D1); ``GIVEN_SOLVE``, q̈ and μ
    given, B = [∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ] over [∂μ/∂q, ∂μ/∂v, ∂μ/∂τ] (D2);
    ``AUGMENTED_SOLVE``: q̈ and μ first computed into ``qdd`` and ``mu`` by the augmented
    method's kernel at τ (``augmented_kernel``, on the same rows: the numbers of
    ``ld.forward_dynamics(method="augmented")``), whose kinematics, J and M are then
    reused, then as ``GIVEN_SOLVE``.  Returns > 0 (solving: 1 / the KKT matrix's
    estimated condition), or a status < 0 (``FD_FAILED``: the augmented kernel refused
    the state, the caller takes the checked path; ``HALF_TURN``: a swing or log row at a
    half-turn)."""
    m, d = handles(ctx)
    n = m.nv
    st = state_status(m, q, v, tau, n, n)
    if st != STATE_OK:
        return float(st)
    if qdd.shape[0] != n or mu.shape[0] != d.nrows:
        return float(-4)
    if B.shape[0] != n + d.nrows or B.shape[1] != 3 * n:
        return float(-4)
    w = tangent_views(wb, m.nb, n, m.nr)
    if mode == AUGMENTED_SOLVE:
        if not augmented_kernel(m, d, q, v, tau, qdd, mu) > 0.0:
            return FD_FAILED
        for i in range(n):
            for j in range(n):
                w.M[i, j] = d.M[i, j]
    else:
        if not (all_finite(qdd) and all_finite(mu)):
            return float(-3)
        constraint_kernel(m, d, q, v[:0], unliteral(True))
        crba_from_poses(m, d, w.M)
    world_tangents(m, d, w, v, as_input(qdd))
    inertial_forces(m, w)
    if not row_tangents(m, d, w, mu, B):
        return HALF_TURN
    force_tangents_backward(m, w, B)
    if mode != GIVEN:
        return kkt_solve(m, d, w, B, mode == AUGMENTED_SOLVE)
    for i in range(n):
        for j in range(n):
            B[i, 2 * n + j] = w.M[i, j]
    for t in range(d.nrows):
        for j in range(n):
            B[n + t, 2 * n + j] = w.Jk[t, j]
    return 1.0


ENTRY = Entry(
    derivatives_entry,
    types.float64,
    BUF,
    BUF,
    IN,
    IN,
    IN,
    OUT,
    OUT,
    types.int64,
    OUT2,
)


# ---------------------------------------------------------------- Python side
class _Work:
    """A model's derivative workspace: a dense ``Data`` (its own: the rows it uses are
    the derivatives'), the tangents' buffer and the entry."""

    def __init__(self, model):
        self.data = model.create_data().ensure_dense()
        self.buf, self.views = allocate_workspace(model.nbodies, model.nv, model.m)
        self.all_rows = np.arange(model.m, dtype=np.int64)
        self.rows = self.all_rows
        self.entry = ENTRY.compile()
        self.zeros = np.zeros(model.nv)
        # the fast path (augmented inside the entry, every row) is taken once the checked
        # path saw ld.forward_dynamics keep every row (``forward_dynamics_derivatives``)
        self.fast = False
        # what the fast path reads at every call, looked up once
        self.ctx = self.data.ctx
        self.n, self.m = model.nv, model.m
        self.shape = (model.nv + model.m, 3 * model.nv)

    def use(self, rows):
        """Make ``rows`` the kept rows."""
        if rows is not self.rows:
            if not np.array_equal(rows, self.rows):
                self.data.set_rows(rows)
            self.rows = rows


_NO_MU = np.zeros(0)
_NO_ROWS = np.zeros(0, dtype=np.int64)


def _work(model):
    """The model's derivative workspace, cached on it as the methods cache their plans
    (``model._sslm_topology``, ``model._denoc_layout``)."""
    wk = getattr(model, "_derivative_work", None)
    if wk is None:
        wk = model._derivative_work = _Work(model)
    return wk


def _run(model, wk, q, v, qdd, rows, mu, solve):
    """``derivatives_entry`` on the rows ``rows`` with q̈ and multipliers ``mu`` given:
    B, or the error its status names."""
    n = model.nv
    wk.use(rows)
    B = np.empty((n + rows.size, 3 * n))
    qdd = np.ascontiguousarray(qdd, dtype=float)
    mu = np.ascontiguousarray(mu, dtype=float)
    mode = GIVEN_SOLVE if solve else GIVEN
    st = wk.entry(wk.data.ctx, wk.buf, q, v, wk.zeros, qdd, mu, mode, B)
    if st > 0.0:
        return B
    diag = wk.views["diag"]
    if st == HALF_TURN:
        raise SingularityError(
            f"{model.name}: a closure's hinge axes or frames are turned by a half-turn here, "
            "where its rotation rows have no derivative"
        )
    if st == SINGULAR:
        if rows.size == 0:
            raise SingularityError(f"{model.name}: the mass matrix is singular here")
        raise SingularityError(
            f"{model.name}: the KKT matrix [M -Jᵀ; J 0] is singular here (1/cond = "
            f"{diag[2]:.2g}): a singular configuration of the mechanism, the derivatives do "
            "not exist"
        )
    if st == NONFINITE_OUTPUT:
        raise SingularityError(f"{model.name}: the derivatives are not finite here")
    raise_status(model, int(st), "q, v, the accelerations or multipliers")
    raise ValueError(f"{model.name}: the derivatives' inputs have wrong shapes")  # pragma: no cover


def _check_constant_rank(model, q, rank):
    """``SingularityError`` where the closure rows' rank drops at q only (a dead point, a
    change point), not on the manifold around it: there q̈ is not differentiable.  Rows
    that are redundant everywhere (duplicate closures, implied rows) keep their rank at
    a nearby consistent configuration (the independent coordinates moved by 1e-3,
    seeded, the loops closed again)."""
    from loopdyn.analysis.assembly import assemble, partition
    from loopdyn.kinematics.closures import constraint_rank
    from loopdyn.kinematics.configuration import integrate

    ind = partition(model, q).independent
    step = np.zeros(model.nv)
    step[ind] = np.random.default_rng(0).uniform(-1e-3, 1e-3, ind.size)
    try:
        q1 = assemble(model, integrate(model, q, step), fixed=list(ind))
    except AssemblyError:
        q1 = None
    if q1 is None or constraint_rank(model, q1).rank != rank:
        raise SingularityError(
            f"{model.name}: the closure Jacobian has rank {rank} here and not at the "
            "configurations around it: a singular configuration, the derivatives do not exist"
        )


class _Block:
    """A result's matrix: the view of its buffer B ((nv + r) × 3 nv) at block (``top``:
    the q̈ rows, else the multipliers'; column block ``c`` of q, v, τ), made at the first
    access and then kept in the instance (a non-data descriptor)."""

    def __init__(self, top, c):
        self.top, self.c = top, c

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        B = obj._buf[2]
        n = B.shape[1] // 3
        c0, c1 = self.c * n, (self.c + 1) * n
        x = B[:n, c0:c1] if self.top else B[n:, c0:c1]
        obj.__dict__[self.name] = x
        return x


class ForwardDynamicsDerivatives:
    """Derivatives of ``ld.forward_dynamics`` at (q, v, τ).

    ``qdd`` (nv), ``lam`` (m, as ``forward_dynamics``: minimum-norm over every row);
    ``dqdd_dq``, ``dqdd_dv``, ``dqdd_dtau`` (nv × nv): tangent-space derivatives
    (column j: the direction q ⊕ e_j of ``ld.integrate``, v + e_j, τ + e_j) at fixed
    other arguments; ``dlam_dq``, ``dlam_dv``, ``dlam_dtau`` (m × nv) those of the
    multipliers of the independent rows ``rows`` (the rows the solve kept; a dropped
    redundant row's multiplier is held at 0 and its row of these matrices is 0:
    where rows are dropped λ's split between dependent rows is not differentiable);
    ``mu`` those multipliers (λ on ``rows``).  The six matrices are views of one
    buffer, new at every call (on the compiled path each view is made at its first
    access: a result costs no view it is not asked for).

    The projection on the closures' tangent space, what a reduced-coordinate
    optimiser wants: with ``independent`` the independent coordinates y (indices
    into v, ``ld.partition``), ``dependent`` the others, and ``G`` (nv × f) the
    velocity map v = G(q) ẏ (G[independent] = I, J G = 0), the state (y, ẏ) fixes a
    consistent (q, v); ``dqdd_dy`` (nv × f) = (∂q̈/∂q + ∂q̈/∂v Dv) G is the derivative
    of q̈ along the constraint manifold when y moves at fixed ẏ (Dv = ∂v/∂q at fixed
    ẏ: J Dv = -∂(J v)/∂q, Dv[independent] = 0), ``dqdd_dydot`` = ∂q̈/∂v G.  These do
    not depend on the form of the closure rows (module doc).  None for a tree.

    ``method``: the method whose q̈ and λ were differentiated (``res.method`` of
    ``ld.forward_dynamics``: the one asked for, or ``augmented`` where it fell back)."""

    method = "augmented"
    dqdd_dq, dqdd_dv, dqdd_dtau = _Block(True, 0), _Block(True, 1), _Block(True, 2)
    dlam_dq, dlam_dv, dlam_dtau = _Block(False, 0), _Block(False, 1), _Block(False, 2)
    independent = dependent = G = dqdd_dy = dqdd_dydot = None
    # (qdd, lam, B) of the compiled path: the buffers a call with out=self writes again
    _buf = None

    def __init__(
        self, qdd, lam, dqdd_dq, dqdd_dv, dqdd_dtau, dlam_dq, dlam_dv, dlam_dtau, rows, mu,
        independent=None, dependent=None, G=None, dqdd_dy=None, dqdd_dydot=None, _buf=None,
    ):  # fmt: skip
        self.__dict__.update(
            qdd=qdd, lam=lam, dqdd_dq=dqdd_dq, dqdd_dv=dqdd_dv, dqdd_dtau=dqdd_dtau,
            dlam_dq=dlam_dq, dlam_dv=dlam_dv, dlam_dtau=dlam_dtau, rows=rows, mu=mu,
            independent=independent, dependent=dependent, G=G, dqdd_dy=dqdd_dy,
            dqdd_dydot=dqdd_dydot, _buf=_buf,
        )  # fmt: skip

    def __repr__(self):
        return (
            f"ForwardDynamicsDerivatives(nv={self.qdd.size}, rows={self.rows.size}, "
            f"tangent={self.G is not None})"
        )


def _state(model, q, v, x, xname):
    model_arg(model)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    x = np.zeros(model.nv) if x is None else vector(x, model.nv, xname, model)
    return q, v, x


def forward_dynamics_derivatives(model, q, v, tau=None, method="augmented", tangent=True, out=None):
    """Analytic derivatives of closed-loop forward dynamics, (D1)-(D3) of the module
    doc; :class:`ForwardDynamicsDerivatives`.  ``method``: the forward-dynamics method
    that gives q̈ and λ (all agree; the derivatives are of the unique q̈).  Raises
    :class:`SingularityError` at a singular configuration (KKT matrix singular, a
    hinge or a frame turned by a half-turn).
    ``tangent=False`` skips the tangent-space projection.  Not thread-safe (one
    workspace per model, as the model's default ``Data``).

    The inputs are checked by ``ld.forward_dynamics`` (called first: its fast path
    takes what its checked path would accept, and that one explains the rest) and
    converted once by the compiled entry's own conversions.

    ``out``: a result of an earlier call on the same model, overwritten in place and
    returned (no allocation, no new object: the cheapest repeated call; its arrays are
    valid until the next call with it)."""
    wk = getattr(model, "_derivative_work", None)
    if wk is not None and wk.fast and method == "augmented":
        # the fast path: one compiled call (``AUGMENTED_SOLVE``, every row kept) into
        # three new arrays, or into the buffers of ``out`` where it holds this path's
        if out is None:
            qdd, lam, B = _empty(wk.n), _empty(wk.m), _empty(wk.shape)
        elif out._buf is not None and out._buf[2].shape == wk.shape:
            qdd, lam, B = out._buf
        else:
            qdd = None
        if qdd is not None:
            if wk.rows is not wk.all_rows:
                wk.use(wk.all_rows)
            try:
                st = wk.entry(
                    wk.ctx, wk.buf, q, v, wk.zeros if tau is None else tau, qdd, lam,
                    AUGMENTED_SOLVE, B,
                )  # fmt: skip
            except TypeError:  # not real numbers: the checked path explains
                st = 0.0
            if st > 0.0:
                if out is None:  # its matrices are views of B made when read (``_Block``)
                    res = _new(ForwardDynamicsDerivatives)
                    res.__dict__ = {
                        "qdd": qdd, "lam": lam, "rows": wk.all_rows, "mu": lam,
                        "_buf": (qdd, lam, B),
                    }  # fmt: skip
                else:
                    res = out
                    res.rows, res.mu, res.method = wk.all_rows, lam, "augmented"
                    res.independent = res.dependent = res.G = None
                    res.dqdd_dy = res.dqdd_dydot = None
                if tangent:
                    _project(model, q, res, wk, True)
                return res
    res = _checked(model, wk, q, v, tau, method, tangent)
    if out is None:
        return res
    return _copy_into(out, res)


def _copy_into(out, res):
    """``res`` written into the arrays of ``out`` (same model), which is returned."""
    for name in ("qdd", "lam", "dqdd_dq", "dqdd_dv", "dqdd_dtau", "dlam_dq", "dlam_dv",
                 "dlam_dtau"):  # fmt: skip
        a, b = getattr(out, name), getattr(res, name)
        if a is None and b is None:  # a tree's lam
            continue
        if a is None or b is None or a.shape != b.shape:
            raise ValueError("out= must be the result of an earlier call on the same model")
        a[...] = b
    for name in ("rows", "mu", "independent", "dependent", "G", "dqdd_dy", "dqdd_dydot",
                 "method"):  # fmt: skip
        setattr(out, name, getattr(res, name))
    return out


def _checked(model, wk, q, v, tau, method, tangent):
    """``forward_dynamics_derivatives`` through ``ld.forward_dynamics`` (every method,
    dropped rows, its checks and errors)."""
    res = forward_dynamics(model, q, v, tau, method=method)
    qdd = res.qdd
    if wk is None:
        wk = _work(model)
    n, m = model.nv, model.m
    if m == 0:
        B = _run(model, wk, q, v, qdd, _NO_ROWS, _NO_MU, True)
        e = np.zeros((0, n))
        tree = ForwardDynamicsDerivatives(
            qdd, None, B[:, :n], B[:, n : 2 * n], B[:, 2 * n :], e, e, e, _NO_ROWS, _NO_MU
        )
        tree.method = res.method
        return tree
    dropped = res.dropped
    lam = res.lam
    if dropped.size:
        q = configuration(model, q)
        rows = np.setdiff1d(wk.all_rows, dropped)
        wk.use(rows)
        Jall = evaluate(model, q, None, True, wk.data).J[:m]
        mu = np.linalg.lstsq(Jall[rows].T, Jall.T @ lam, rcond=None)[0]
    else:
        rows, mu = wk.all_rows, lam
    B = _run(model, wk, q, v, qdd, rows, mu, True)
    if dropped.size:
        _check_constant_rank(model, q, rows.size)
        dl = np.zeros((m, 3 * n))
        dl[rows] = B[n:]
    else:
        dl = B[n:]
    # the fast path's q̈ is ld.forward_dynamics' while it keeps every row (the model's
    # Data caches its rank detection): from now on, until it drops some
    wk.fast = method == "augmented" and not dropped.size and res.method == "augmented"
    out = ForwardDynamicsDerivatives(
        qdd, lam, B[:n, :n], B[:n, n : 2 * n], B[:n, 2 * n :],
        dl[:, :n], dl[:, n : 2 * n], dl[:, 2 * n :], rows, mu,
    )  # fmt: skip
    out.method = res.method
    if tangent:
        _project(model, q, out, wk, dropped.size == 0)
    return out


_empty = np.empty
_new = object.__new__


def _project(model, q, out, wk, full_rank):
    """The tangent-space projection of ``ForwardDynamicsDerivatives`` (its docstring):
    G[dep] = -J_d⁻¹ J_i, (Dv G)[dep] = -J_d⁻¹ (hq G) (hq = ∂(J v)/∂q); then
    dqdd_dy = ∂q̈/∂q G + ∂q̈/∂v (Dv G), O(nv² f).

    The partition is ``ld.partition``'s: the first rank(J) pivots of a column-pivoted QR
    of J(q).  Where no row is dropped, rank(J) = m (the rows the solve kept: J with
    rank below m makes its KKT matrix singular at the rank tolerance or the forward
    dynamics drops rows) and J is the one the kernel just evaluated (``wk.data.J``), so
    the QR is all that is left to do; otherwise ``ld.partition`` itself."""
    import scipy.linalg as sla

    from loopdyn.analysis.assembly import partition

    r = out.rows.size
    Jk, hq = wk.views["Jk"][:r], wk.views["hq"][:r]
    n = model.nv
    if full_rank:
        piv = sla.qr(wk.data.J[: model.m], mode="r", pivoting=True, check_finite=False)[1]
        mask = np.ones(n, dtype=bool)
        mask[piv[:r]] = False
        ind = np.flatnonzero(mask)
        dep = np.flatnonzero(~mask)
    else:
        part = partition(model, q)
        ind, dep = part.independent, part.dependent
    f = ind.size
    G = np.zeros((n, f))
    G[ind, np.arange(f)] = 1.0
    DvG = np.zeros((n, f))
    if dep.size:
        Jd = Jk[:, dep]
        if Jd.shape[0] != Jd.shape[1]:
            raise SingularityError(
                f"{model.name}: {Jd.shape[0]} independent closure rows against {dep.size} "
                "dependent coordinates: the partition does not match the rank here"
            )
        G[dep] = -np.linalg.solve(Jd, Jk[:, ind])
        DvG[dep] = -np.linalg.solve(Jd, hq @ G)
    out.independent, out.dependent, out.G = ind, dep, G
    out.dqdd_dy = out.dqdd_dq @ G + out.dqdd_dv @ DvG
    out.dqdd_dydot = out.dqdd_dv @ G


def rnea_derivatives(model, q, v, qdd, fext=None):
    """(∂τ/∂q, ∂τ/∂v, ∂τ/∂q̈ = M) (nv × nv) of the tree's inverse dynamics
    τ = RNEA(q, v, q̈) (closures ignored), tangent-space columns (module doc of
    ``loopdyn.derivatives.tree``).  ``fext``: None."""
    q, v, qdd = _state(model, q, v, qdd, "qdd")
    n = model.nv
    B = _run(model, _work(model), q, v, qdd, _NO_ROWS, _NO_MU, False)
    return B[:, :n], B[:, n : 2 * n], B[:, 2 * n :]


def aba_derivatives(model, q, v, tau):
    """(∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ = M⁻¹) (nv × nv) of the tree's forward dynamics
    (closures ignored): q̈ = ABA(q, v, τ), ∂q̈/∂x = -M⁻¹ ∂RNEA/∂x at q̈."""
    from loopdyn.tree.algorithms import aba

    q, v, tau = _state(model, q, v, tau, "tau")
    n = model.nv
    qdd = aba(model, q, v, tau)
    B = _run(model, _work(model), q, v, qdd, _NO_ROWS, _NO_MU, True)
    return B[:, :n], B[:, n : 2 * n], B[:, 2 * n :]


@dataclass
class InverseDynamicsDerivatives:
    """Derivatives of ``ld.inverse_dynamics`` (generic: ``[B Jᵀ][u; λ] = RNEA(q, v, q̈)``,
    the minimum-norm solution where not unique): ``tau`` (nv), ``lam`` (m) and
    ``dtau_dq``, ``dtau_dv``, ``dtau_dqdd`` (nv × nv, non-zero rows at the actuated
    coordinates), ``dlam_dq``, ``dlam_dv``, ``dlam_dqdd`` (m × nv); tangent columns."""

    tau: np.ndarray
    lam: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    dtau_dqdd: np.ndarray
    dlam_dq: np.ndarray
    dlam_dv: np.ndarray
    dlam_dqdd: np.ndarray


def inverse_dynamics_derivatives(model, q, v, qdd, actuated=None):
    """Analytic derivatives of ``ld.inverse_dynamics(model, q, v, qdd, actuated)``.

    With A = [B Jᵀ] (nv × (na + m)), b = RNEA(q, v, q̈) and x = [u; λ] = A⁺ b (the exact
    solution, or the minimum-norm one when over-actuated; b in the range of A):

        dx = A⁺ (db - dA x) + (I - A⁺A) dAᵀ (A Aᵀ)⁺ b                            (D4)

    (the derivative of the pseudo-inverse at constant rank), where db - dA x =
    ∂/∂q [RNEA - Jᵀλ] at fixed λ (the closure forces as world wrenches) and
    dAᵀ y = [0; ∂(J y)/∂q] for y = (A Aᵀ)⁺ b (the kernel's ∂(J v)/∂q at v = y).
    For v and q̈ dA = 0.
    """
    from loopdyn.analysis.inverse import _indices, inverse_dynamics
    from loopdyn.tree.algorithms import rnea

    q, v, qdd = _state(model, q, v, qdd, "qdd")
    act = model.actuated if actuated is None else _indices(model, actuated)
    res = inverse_dynamics(model, q, v, qdd, actuated=act)
    n, m, na = model.nv, model.m, act.size
    lam = res.lam
    wk = _work(model)
    rows = wk.all_rows
    mu = np.ascontiguousarray(lam, dtype=float) if m else _NO_MU
    B = _run(model, wk, q, v, qdd, rows, mu, False)
    dtq, dtv, M = B[:n, :n], B[:n, n : 2 * n], B[:n, 2 * n :]
    A = np.zeros((n, na + m))
    A[act, np.arange(na)] = 1.0
    A[:, na:] = B[n:, 2 * n :].T
    Ap = np.linalg.pinv(A, rcond=1e-10)
    dxq = Ap @ dtq
    if m:
        y = np.linalg.pinv(A @ A.T, rcond=1e-10) @ rnea(model, q, v, qdd)
        _run(model, wk, q, y, np.zeros(n), rows, np.zeros(m), False)
        dAty = np.zeros((na + m, n))
        dAty[na:] = wk.views["hq"][:m]
        dxq += (np.eye(na + m) - Ap @ A) @ dAty
    dxv = Ap @ dtv
    dxa = Ap @ M

    def tau_rows(x):
        out = np.zeros((n, n))
        out[act] = x[:na]
        return out

    return InverseDynamicsDerivatives(
        res.tau, lam, tau_rows(dxq), tau_rows(dxv), tau_rows(dxa), dxq[na:], dxv[na:], dxa[na:]
    )
