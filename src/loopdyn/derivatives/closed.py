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

The compiled path's result is one block (``fast_entry``: q̈, μ, B and the tangent-space
projection's inputs), its arrays views made at the first read; the projection
(``projection_entry``, compiled, (P1)) is computed at the first read of one of its
fields, from that block.

Files: the rows' tangents are ``rows.py`` and the tree's recursions ``tree.py``; this
module (~1050 lines) keeps the KKT system, its compiled entries and the Python API
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
    lu_solve,
    lu_solve_rows,
)
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    INT_OUT,
    OUT,
    OUT2,
    Entry,
    as_input,
    entry,
    unliteral,
)
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


# projection_entry: two columns' remaining norms within this relative distance are a
# tie that rounding decides (the downdated norms are exact to ~sqrt(eps)), so the pivot
# is left to the QR ``ld.partition`` calls; and its status then
_TIE = 1e-6
TIE = -1.0

# xLAQP2's threshold for recomputing a downdated column norm: sqrt(eps), eps = 2⁻⁵³
_TOL3Z = math.sqrt(2.0**-53)

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


@njit(cache=True)
def block_size(n, r):
    """The size of ``fast_entry``'s block for nv = n and r rows."""
    return n + r + (n + r) * 3 * n + 3 * r * n


@entry
def fast_entry(ctx, wb, q, v, tau, blk):
    """``derivatives_entry`` in ``AUGMENTED_SOLVE`` mode on the rows ``d.rows`` (r of
    them) into one block ``blk`` (``block_size(nv, r)``, a result's only array):
    [q̈ (nv) | μ (r) | B ((nv + r) × 3 nv, row-major) | J_k | ∂(J_k v)/∂q | J_k (r × nv
    each)], the last three the tangent-space projection's inputs (``_projection``),
    copied so that the result does not depend on the workspace (a later call).  J_k
    twice: the first is the rows' tangent form of ``row_tangents`` (the projection's
    solves), the second ``d.J``'s (the constraint Jacobian, whose column-pivoted QR
    chooses the partition as ``ld.partition``).  Returns ``derivatives_entry``'s status."""
    m, d = handles(ctx)
    n, r = m.nv, d.nrows
    if blk.shape[0] != block_size(n, r):
        return float(-4)
    o = n + r
    nb = (n + r) * 3 * n
    B = blk[o : o + nb].reshape((n + r, 3 * n))
    st = derivatives_entry(ctx, wb, q, v, tau, blk[:n], blk[n:o], AUGMENTED_SOLVE, B)
    if not st > 0.0:
        return st
    w = tangent_views(wb, m.nb, n, m.nr)
    o += nb
    for t in range(r):
        rt = d.rows[t]
        for j in range(n):
            blk[o + t * n + j] = w.Jk[t, j]
            blk[o + (r + t) * n + j] = w.hq[t, j]
            blk[o + (2 * r + t) * n + j] = d.J[rt, j]
    return st


FAST = Entry(fast_entry, types.float64, BUF, BUF, IN, IN, IN, OUT)


@entry
def projection_entry(blk, n, r, choose, P, I):
    """The tangent-space projection (``ForwardDynamicsDerivatives``' docstring) from a
    block in ``fast_entry``'s layout (B's first 2 nv columns, J_k, hq = ∂(J_k v)/∂q and,
    where ``choose``, J): into P, G | dqdd_dy | dqdd_dydot (nv × f each, f = nv - r,
    row-major) then scratch; into I, the independent coordinates (f) | the dependent
    ones (r), both ascending, then scratch.

    The partition, where ``choose`` (else given in I): ``ld.partition``'s, the first r
    pivots of a column-pivoted QR of J (Businger-Golub: at each step the remaining
    column of largest norm, the first of equal ones, its norms downdated and recomputed
    where cancellation makes the downdate inaccurate, the rules of LAPACK's xLAQP2,
    which the geqp3 that ``ld.partition`` calls runs on these sizes).  Then, with J_d the
    dependent columns of J_k (LU with partial pivoting),

        G[ind] = I, G[dep] = -J_d⁻¹ J_k[:, ind];  (Dv G)[ind] = 0,
        (Dv G)[dep] = -J_d⁻¹ (hq G);  dqdd_dy = ∂q̈/∂q G + ∂q̈/∂v (Dv G),
        dqdd_dydot = ∂q̈/∂v G                                                    (P1)

    the products over the dependent columns only (G[ind] = I, (Dv G)[ind] = 0):
    O(r nv² + nv r f) with the QR.  Returns 1, 0 where J_d is singular, or ``TIE``
    where two candidate pivots' norms are within ``_TIE`` (symmetric mechanisms): there
    rounding decides, and the caller takes the pivots of ``ld.partition``'s QR."""
    f = n - r
    nf = n * f
    o = n + r
    w3 = 3 * n
    base = o + o * w3
    G = P[:nf].reshape((n, f))
    DY = P[nf : 2 * nf].reshape((n, f))
    DYD = P[2 * nf : 3 * nf].reshape((n, f))
    DvG = P[3 * nf : 4 * nf].reshape((n, f))  # scratch
    s0 = 4 * nf
    At = P[s0 : s0 + r * n].reshape((n, r))  # Jᵀ: J's columns contiguous
    vn1 = P[s0 + r * n : s0 + r * n + n]
    vn2 = P[s0 + r * n + n : s0 + r * n + 2 * n]
    s1 = s0 + r * n + 2 * n
    LU = P[s1 : s1 + r * r].reshape((r, r))
    x = P[s1 + r * r : s1 + r * r + r]
    ind, dep = I[:f], I[f:n]
    perm, piv = I[n : 2 * n], I[2 * n : 2 * n + r]
    if choose:
        for t in range(r):
            for j in range(n):
                At[j, t] = blk[base + (2 * r + t) * n + j]
        for j in range(n):
            perm[j] = j
            sq = 0.0
            for i in range(r):
                sq += At[j, i] * At[j, i]
            vn1[j] = vn2[j] = sq**0.5
        for k in range(r):
            c = k
            for j in range(k + 1, n):
                if vn1[j] > vn1[c]:
                    c = j
            for j in range(k, n):  # a near tie: LAPACK's rounding decides (the caller)
                if j != c and vn1[j] >= (1.0 - _TIE) * vn1[c]:
                    return TIE
            if c != k:
                for i in range(r):
                    At[k, i], At[c, i] = At[c, i], At[k, i]
                perm[k], perm[c] = perm[c], perm[k]
                vn1[c], vn2[c] = vn1[k], vn2[k]
            sq = 0.0
            for i in range(k, r):
                sq += At[k, i] * At[k, i]
            norm = sq**0.5
            if norm == 0.0:
                continue
            alpha = -norm if At[k, k] >= 0.0 else norm
            At[k, k] -= alpha
            vv = 2.0 * norm * (norm + abs(At[k, k] + alpha))
            for j in range(k + 1, n):
                t = 0.0
                for i in range(k, r):
                    t += At[k, i] * At[j, i]
                t *= 2.0 / vv
                for i in range(k, r):
                    At[j, i] -= t * At[k, i]
                # the remaining norm of column j (xLAQP2: downdated by R[k, j] = At[j, k],
                # recomputed where the downdate lost half the digits)
                if vn1[j] != 0.0:
                    tmp = max(1.0 - (abs(At[j, k]) / vn1[j]) ** 2, 0.0)
                    if tmp * (vn1[j] / vn2[j]) ** 2 <= _TOL3Z:
                        sq = 0.0
                        for i in range(k + 1, r):
                            sq += At[j, i] * At[j, i]
                        vn1[j] = vn2[j] = sq**0.5
                    else:
                        vn1[j] *= tmp**0.5
            At[k, k] = alpha
        for j in range(n):  # vn1 as the dependent flags
            vn1[j] = 0.0
        for k in range(r):
            vn1[perm[k]] = 1.0
        a = b = 0
        for j in range(n):
            if vn1[j] == 1.0:
                dep[b] = j
                b += 1
            else:
                ind[a] = j
                a += 1
    jk = base  # J_k[t, j] = blk[jk + t n + j], hq after it
    hq = base + r * n
    for t in range(r):
        for i in range(r):
            LU[t, i] = blk[jk + t * n + dep[i]]
    if r > 0 and not lu_inplace(LU, r, piv) > 0.0:
        return 0.0
    # G[dep] in DvG's first r rows (Gd, r × f), then (Dv G)[dep] in G's (Hd): the
    # products use G[ind] = I and (Dv G)[ind] = 0
    Gd, Hd = DvG[:r], G[:r]
    for a in range(f):
        ia = ind[a]
        for t in range(r):
            x[t] = blk[jk + t * n + ia]
        lu_solve(LU, r, piv, x)
        for i in range(r):
            Gd[i, a] = -x[i]
    for a in range(f):
        ia = ind[a]
        for t in range(r):
            row = hq + t * n
            z = blk[row + ia]
            for i in range(r):
                z += blk[row + dep[i]] * Gd[i, a]
            x[t] = z
        lu_solve(LU, r, piv, x)
        for i in range(r):
            Hd[i, a] = -x[i]
    for i in range(n):
        row = o + i * w3
        for a in range(f):
            zy = blk[row + ind[a]]
            zd = blk[row + n + ind[a]]
            for k in range(r):
                dk = dep[k]
                zy += blk[row + dk] * Gd[k, a] + blk[row + n + dk] * Hd[k, a]
                zd += blk[row + n + dk] * Gd[k, a]
            DY[i, a] = zy
            DYD[i, a] = zd
    # G itself (Hd, in its first rows, is done with): I in the independent rows, Gd in
    # the dependent ones
    for j in range(n):
        for a in range(f):
            G[j, a] = 0.0
    for a in range(f):
        G[ind[a], a] = 1.0
        for k in range(r):
            G[dep[k], a] = Gd[k, a]
    return 1.0


PROJECTION = Entry(
    projection_entry, types.float64, IN, types.int64, types.int64, types.int64, OUT, INT_OUT
)


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
        self.fast_entry = FAST.compile()
        self.size = block_size(model.nv, model.m)
        self.zeros = np.zeros(model.nv)
        # the fast path (augmented inside the entry, every row) is taken once the checked
        # path saw ld.forward_dynamics keep every row (``forward_dynamics_derivatives``)
        self.fast = False
        # what the fast path reads at every call, looked up once
        self.ctx = self.data.ctx
        self.n, self.m = model.nv, model.m

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


class _Lazy:
    """A result's array on the compiled path, made from its block ``_blk``
    (``fast_entry``'s layout) at the first access and then kept in the instance (a
    non-data descriptor: a result costs no view it is not asked for)."""

    def __init__(self, make):
        self.make = make

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        x = self.make(obj)
        obj.__dict__[self.name] = x
        return x


def _matrix(top, c):
    """The view of B's block (``top``: the q̈ rows, else the multipliers'; column block
    ``c`` of q, v, τ)."""

    def make(obj):
        n = obj._n
        B = obj._B
        return B[:n, c * n : (c + 1) * n] if top else B[n:, c * n : (c + 1) * n]

    return _Lazy(make)


def _solution(blk, n, r):
    """B ((n + r) × 3n) of ``fast_entry``'s block."""
    o = n + r
    return blk[o : o + o * 3 * n].reshape(o, 3 * n)


class _Projected:
    """A field of the tangent-space projection on the compiled path: None where the call
    had ``tangent=False``, else all five computed (``_projection``) from the block at the
    first access of one of them, from the copies of J_k, ∂(J_k v)/∂q and J the call
    left in it (no later call changes them; a call with ``out=`` drops what was
    computed from its previous numbers)."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        if not obj._tangent:
            return None
        obj.__dict__.update(_projection(obj._blk, obj._n, obj.rows.size))
        return obj.__dict__[self.name]


_PROJECTED = ("independent", "dependent", "G", "dqdd_dy", "dqdd_dydot")


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
    buffer, new at every call (on the compiled path the arrays, q̈ and λ too, are
    views of one block, each made at its first access: a result costs no view it is
    not asked for).

    The projection on the closures' tangent space, what a reduced-coordinate
    optimiser wants: with ``independent`` the independent coordinates y (indices
    into v, ``ld.partition``), ``dependent`` the others, and ``G`` (nv × f) the
    velocity map v = G(q) ẏ (G[independent] = I, J G = 0), the state (y, ẏ) fixes a
    consistent (q, v); ``dqdd_dy`` (nv × f) = (∂q̈/∂q + ∂q̈/∂v Dv) G is the derivative
    of q̈ along the constraint manifold when y moves at fixed ẏ (Dv = ∂v/∂q at fixed
    ẏ: J Dv = -∂(J v)/∂q, Dv[independent] = 0), ``dqdd_dydot`` = ∂q̈/∂v G.  These do
    not depend on the form of the closure rows (module doc).  None for a tree, or
    with ``tangent=False``.  On the compiled path they are computed at the first
    access of one of them (from copies of J and ∂(J v)/∂q the call keeps in the
    result's block: the same numbers as computed at the call).

    ``method``: the method whose q̈ and λ were differentiated (``res.method`` of
    ``ld.forward_dynamics``: the one asked for, or ``augmented`` where it fell back)."""

    method = "augmented"
    # the compiled path's lazy fields (the checked path sets them all in the instance)
    qdd = _Lazy(lambda o: o._blk[: o._n])
    lam = _Lazy(lambda o: o._blk[o._n : o._n + o.rows.size])
    mu = _Lazy(lambda o: o.lam)
    _B = _Lazy(lambda o: _solution(o._blk, o._n, o.rows.size))
    dqdd_dq, dqdd_dv, dqdd_dtau = _matrix(True, 0), _matrix(True, 1), _matrix(True, 2)
    dlam_dq, dlam_dv, dlam_dtau = _matrix(False, 0), _matrix(False, 1), _matrix(False, 2)
    independent, dependent, G = _Projected(), _Projected(), _Projected()
    dqdd_dy, dqdd_dydot = _Projected(), _Projected()
    # the compiled path's block (``fast_entry``), which a call with out=self writes again
    _blk = None
    _tangent = False

    def __init__(
        self, qdd, lam, dqdd_dq, dqdd_dv, dqdd_dtau, dlam_dq, dlam_dv, dlam_dtau, rows, mu,
        independent=None, dependent=None, G=None, dqdd_dy=None, dqdd_dydot=None,
    ):  # fmt: skip
        self.__dict__.update(
            qdd=qdd, lam=lam, dqdd_dq=dqdd_dq, dqdd_dv=dqdd_dv, dqdd_dtau=dqdd_dtau,
            dlam_dq=dlam_dq, dlam_dv=dlam_dv, dlam_dtau=dlam_dtau, rows=rows, mu=mu,
            independent=independent, dependent=dependent, G=G, dqdd_dy=dqdd_dy,
            dqdd_dydot=dqdd_dydot,
        )  # fmt: skip

    def __repr__(self):
        d = self.__dict__
        tangent = d["G"] is not None if "G" in d else self._tangent
        return (
            f"ForwardDynamicsDerivatives(nv={self.qdd.size}, rows={self.rows.size}, "
            f"tangent={tangent})"
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
        # the fast path: one compiled call (``fast_entry``, every row kept) into one new
        # block, or into the block of ``out`` where it holds this path's; the result's
        # arrays are views of it made when read, the projection computed when read
        # (``_Lazy``, ``_Projected``)
        if out is None:
            blk = _empty(wk.size)
        elif out._blk is not None and out._blk.size == wk.size:
            blk = out._blk
        else:
            blk = None
        if blk is not None:
            if wk.rows is not wk.all_rows:
                wk.use(wk.all_rows)
            try:
                st = wk.fast_entry(wk.ctx, wk.buf, q, v, wk.zeros if tau is None else tau, blk)
            except TypeError:  # not real numbers: the checked path explains
                st = 0.0
            if st > 0.0:
                if out is None:
                    res = _new(ForwardDynamicsDerivatives)
                    res.__dict__ = {
                        "rows": wk.all_rows, "_n": wk.n, "_blk": blk, "_tangent": tangent
                    }  # fmt: skip
                    return res
                d = out.__dict__  # its views of the block stay; what was set goes
                for name in _RESET:
                    d.pop(name, None)
                d["rows"], d["_tangent"] = wk.all_rows, tangent
                return out
    res = _checked(model, wk, q, v, tau, method, tangent)
    if out is None:
        return res
    return _copy_into(out, res)


# what a fast call with ``out=`` drops from its instance: the projection, and what the
# checked path set there (``_copy_into``) in place of the lazy fields
_RESET = (*_PROJECTED, "mu", "method")


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
    """The tangent-space projection of the checked path's result ``out``, set in it:
    ``_projection`` on a block in ``fast_entry``'s layout made of its ∂q̈/∂q, ∂q̈/∂v and
    the kernel's J_k, ∂(J_k v)/∂q and J in the workspace.  Where rows are dropped the
    partition is ``ld.partition`` itself."""
    r, n = out.rows.size, model.nv
    o = n + r
    blk = np.zeros(block_size(n, r))
    B = _solution(blk, n, r)
    B[:n, :n], B[:n, n : 2 * n] = out.dqdd_dq, out.dqdd_dv
    base = o + o * 3 * n
    blk[base : base + r * n] = wk.views["Jk"][:r].ravel()
    blk[base + r * n : base + 2 * r * n] = wk.views["hq"][:r].ravel()
    blk[base + 2 * r * n :] = wk.data.J[out.rows].ravel()
    part = None
    if not full_rank:
        from loopdyn.analysis.assembly import partition

        part = partition(model, q)
    out.__dict__.update(_projection(blk, n, r, part, model.name))


def _projection(blk, n, r, part=None, name="the model"):
    """The five fields of the tangent-space projection (``projection_entry``, (P1)) of
    a block in ``fast_entry``'s layout, new arrays; ``part``: a given ``ld.partition``
    (else the pivoted QR of the block's J chooses it, as ``ld.partition`` does where no
    row is dropped: rank(J) = r, since J with rank below r makes the KKT matrix singular
    at the rank tolerance or the forward dynamics drops rows)."""
    f = n - r
    nv_f = n * f
    # P: 4 nv f + r nv + 2 nv + r² + r floats, ix: 2 nv + r ints (``projection_entry``)
    P, ix = _empty(4 * nv_f + r * n + 2 * n + r * r + r), _empty(2 * n + r, dtype=np.int64)
    if part is not None:
        if part.dependent.size != r:
            raise SingularityError(
                f"{name}: {r} independent closure rows against {part.dependent.size} "
                "dependent coordinates: the partition does not match the rank here"
            )
        ix[:f], ix[f:n] = part.independent, part.dependent
    st = PROJECTION.compile()(blk, n, r, int(part is None), P, ix)
    if st == TIE:  # the pivots of ld.partition's QR (SciPy's geqp3), on the same J
        import scipy.linalg as sla  # lazily: scipy.linalg costs ~0.15 s at import

        o = n + r + (n + r) * 3 * n + 2 * r * n
        J = blk[o : o + r * n].reshape(r, n)
        piv = sla.qr(J, mode="r", pivoting=True, check_finite=False)[1]
        ix[f:n] = np.sort(piv[:r])
        ix[:f] = np.sort(piv[r:])
        st = PROJECTION.compile()(blk, n, r, 0, P, ix)
    if not st > 0.0:
        raise SingularityError(
            f"{name}: the dependent coordinates' columns of the closure Jacobian are "
            "singular here: the tangent-space projection does not exist"
        )
    Q = P[: 3 * nv_f].reshape(3, n, f)
    return {
        "independent": ix[:f], "dependent": ix[f:n], "G": Q[0], "dqdd_dy": Q[1],
        "dqdd_dydot": Q[2],
    }  # fmt: skip


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
