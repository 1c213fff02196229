"""System-level Lagrange multipliers (SLM), eqs. (11)–(12) of the reduced-order paper.

    λ = Ĩ⁻¹ (γ - J M⁻¹ φ),   Ĩ = J M⁻¹ Jᵀ           (12)
    q̈ = M⁻¹ (φ + Jᵀ λ)                              (11)

M is factored once (Cholesky, the "inversion of I" the paper counts as O(n³));
Ĩ from Y = L⁻¹ Jᵀ as Ĩ = Yᵀ Y.  Then q̈ = M⁻¹ φ + L⁻ᵀ (Y λ) by (11) with the factor
in hand (λ "treated as external forces ... using any algorithm for tree-type
systems", as the paper puts it): one triangular solve, O(n² + nm), where a second
recursion over the tree (ABA) cost more than it on every model of the catalog.

Ĩ has the square of J's conditioning, so when a pivot ratio is below
``REFINE_RATIO`` the answer is refined: the residual of the equations of motion (RNEA
and Jᵀλ, ``common.kkt_residual``) and of J q̈ = γ is solved again by (11)–(12) with the factors
already in hand, O(n² + nm) a step, until the correction is at rounding level.
"""

from numba import njit

from loopdyn.kernels.linalg import backward_subst_t, cholesky_inplace, cholesky_solve, forward_subst
from loopdyn.kernels.numba_internals import unliteral
from loopdyn.methods.common import (
    DIAG_REFINED,
    INACCURATE,
    MAX_REFINE,
    PIVOT_TOL,
    REFINE_GO_ON,
    REFINE_RATIO,
    SINGULAR,
    STALL_TOL,
    accept,
    checked_handles,
    kkt_residual,
    max_abs,
    method_entry,
    subtract_rows,
    system_terms,
    take_correction,
)


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def slm_kernel(m, d, q, v, tau, qdd, lam):
    """λ on the independent rows ``d.rows`` by eq. (12), q̈ by eq. (11).

    Returns the smaller Cholesky pivot ratio of M and Ĩ (> 0) or a status < 0.
    """
    r = d.nrows
    system_terms(m, d, q, v, tau, unliteral(True))
    ratio = slm_multipliers(d.M, d.J, d.phi, d.gamma, d.rows, d.Y, d.Sm, d.x, lam)
    if not ratio > PIVOT_TOL:
        d.diag[0] = ratio
        return SINGULAR
    eta = max_abs(d.x)  # |M⁻¹ φ|∞, the unconstrained accelerations
    slm_accelerations(m, d, lam, r, qdd)
    d.diag[DIAG_REFINED] = 0.0
    if ratio < REFINE_RATIO and refine(m, d, tau, qdd, lam, r, max(eta, max_abs(qdd))) < 0:
        return INACCURATE
    return accept(m, d, ratio, qdd, lam, r, eta)


@njit(cache=True, inline="always")  # one call site (its kernel): no library of its own
def slm_accelerations(m, d, lam, r, qdd):
    """q̈ = M⁻¹ φ + M⁻¹ Jᵀ λ = x + L⁻ᵀ (Y λ) (eq. 11) with M's Cholesky factor in hand
    (``slm_multipliers``: L in ``d.M``, Y, x = M⁻¹ φ), λ the first ``r`` entries of
    ``lam``."""
    n, Y = m.nv, d.Y
    for j in range(n):
        s = 0.0
        for a in range(r):
            s += Y[j, a] * lam[a]
        qdd[j] = s
    backward_subst_t(d.M, n, qdd)
    for j in range(n):
        qdd[j] += d.x[j]


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, tau, qdd, lam, r, scale):
    """Iterative refinement of (q̈, λ) with the factors of the solve (L of M in ``d.M``,
    Y = L⁻¹ Jᵀ, Ĩ's in ``d.Sm``): for the residuals r1 = τ + Jᵀλ - M q̈ - h and
    r2 = γ - J q̈, δη = M⁻¹ r1, Ĩ δλ = r2 - J δη (12), δq̈ = δη + L⁻ᵀ Y δλ (11).
    Returns the steps taken, or -1 if the corrections grow."""
    n, rows, J, M, Y, Sm = m.nv, d.rows, d.J, d.M, d.Y, d.Sm
    r1, dq, dl = d.phi, d.x, d.rhs[:r]  # free once q̈ is computed
    prev = 0.0
    for step in range(MAX_REFINE):
        kkt_residual(m, d, tau, qdd, lam, r, r1, dl)
        for j in range(n):
            dq[j] = r1[j]
        cholesky_solve(M, n, dq)
        subtract_rows(J, rows, r, n, dq, dl)  # r2 - J δη
        cholesky_solve(Sm, r, dl)
        for j in range(n):
            s = 0.0
            for a in range(r):
                s += Y[j, a] * dl[a]
            r1[j] = s
        backward_subst_t(M, n, r1)
        for j in range(n):
            dq[j] += r1[j]
        code, prev = take_correction(d, step, prev, scale, n, r, dq, dl, qdd, lam, STALL_TOL)
        if code != REFINE_GO_ON:
            return code
    return MAX_REFINE


@njit(cache=True)
def slm_multipliers(M, J, phi, gamma, rows, Y, Sm, x, lam):
    """λ on ``rows`` by eq. (12) from M (factored in place), J, φ and γ.

    Cholesky M = L Lᵀ, Y = L⁻¹ Jᵀ, x = M⁻¹ φ, Ĩ = Yᵀ Y, λ = Ĩ⁻¹ (γ - J x).
    Returns the smaller pivot ratio of the two factorisations (0: singular).
    """
    n = phi.shape[0]
    r = rows.shape[0]
    ratio_m = cholesky_inplace(M, n)
    if ratio_m == 0.0:
        return 0.0
    # Y = L⁻¹ Jᵀ (columns), x = M⁻¹ φ
    for a in range(r):
        ra = rows[a]
        for j in range(n):
            Y[j, a] = J[ra, j]
        forward_subst(M, n, Y[:, a])
    for i in range(n):
        x[i] = phi[i]
    cholesky_solve(M, n, x)
    # Ĩ = Yᵀ Y ; rhs = γ - J x
    for a in range(r):
        for b in range(a + 1):
            s = 0.0
            for j in range(n):
                s += Y[j, a] * Y[j, b]
            Sm[a, b] = s
            Sm[b, a] = s
        ra = rows[a]
        s = gamma[ra]
        for j in range(n):
            s -= J[ra, j] * x[j]
        lam[a] = s
    ratio = cholesky_inplace(Sm, r)
    if not ratio > PIVOT_TOL:
        return ratio
    cholesky_solve(Sm, r, lam)
    return min(ratio, ratio_m)


def slm_entry(ctx, q, v, tau, qdd, lam):
    """``slm_kernel`` on a Data's buffer, inputs checked."""
    m, d, st = checked_handles(ctx, q, v, tau)
    return st if st < 0.0 else slm_kernel(m, d, q, v, tau, qdd, lam)


ENTRY = method_entry(slm_entry)
