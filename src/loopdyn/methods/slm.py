"""System-level Lagrange multipliers (SLM), eqs. (11)–(12) of the reduced-order paper.

    λ = Ĩ⁻¹ (γ - J M⁻¹ φ),   Ĩ = J M⁻¹ Jᵀ           (12)
    q̈ = M⁻¹ (φ + Jᵀ λ)                              (11)

M is factored once (Cholesky, the "inversion of I" the paper counts as O(n³));
Ĩ from Y = L⁻¹ Jᵀ as Ĩ = Yᵀ Y.  Then q̈ comes from the O(n) articulated-body
algorithm with λ applied as external wrenches on the cut bodies (and joint forces
for couplings), as the paper prescribes ("treated as external forces ... using any
algorithm for tree-type systems").
"""

from numba import njit, types

from loopdyn.kernels.linalg import backward_subst_t, cholesky_inplace, cholesky_solve, forward_subst
from loopdyn.kernels.numba_internals import BUF, IN, OUT, Entry, as_input, entry, unliteral
from loopdyn.kernels.views import handles
from loopdyn.methods.common import (
    PIVOT_TOL,
    SINGULAR,
    accept,
    closure_loads,
    input_status,
    max_abs,
    system_terms,
)
from loopdyn.tree.aba import aba_from_kinematics


@njit(cache=True)
def slm_kernel(m, d, q, v, tau, qdd, lam):
    """λ on the independent rows ``d.rows`` by eq. (12), q̈ by ABA (eq. 11).

    Returns the smaller Cholesky pivot ratio of M and Ĩ (> 0) or a status < 0.
    """
    r = d.nrows
    system_terms(m, d, q, v, tau, unliteral(True))
    ratio = slm_multipliers(d.M, d.J, d.phi, d.gamma, d.rows, d.Y, d.Sm, d.x, lam)
    if not ratio > PIVOT_TOL:
        d.diag[0] = ratio
        return SINGULAR
    eta = max_abs(d.x)  # |M⁻¹ φ|∞, the unconstrained accelerations
    # q̈ by the O(n) tree algorithm with λ as external loads (eq. 11)
    closure_loads(m, d, d.rows, lam, d.fext, d.tauc)
    for i in range(m.nv):
        d.x[i] = tau[i] + d.tauc[i]
    if aba_from_kinematics(m, d, unliteral(0), m.nb, as_input(d.x), as_input(d.fext), qdd) >= 0:
        return SINGULAR
    return accept(m, d, ratio, qdd, lam, r, eta)


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
    forward_subst(Sm, r, lam)
    backward_subst_t(Sm, r, lam)
    return min(ratio, ratio_m)


@entry
def slm_entry(ctx, q, v, tau, qdd, lam):
    """``slm_kernel`` on a Data's buffer, inputs checked."""
    m, d = handles(ctx)
    st = input_status(m, q, v, tau)
    if st < 0.0:
        return st
    return slm_kernel(m, d, q, v, tau, qdd, lam)


ENTRY = Entry(slm_entry, types.float64, BUF, IN, IN, IN, OUT, OUT)
