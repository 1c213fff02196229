"""The "standard O(n)" constraint treatment of Anderson & Critchley, eqs. (13)–(32).

The accelerations of the cut tree split into a part free of the closure loads and
a part linear in them (their eq. (13)):

    q̈ = η + ζ λ                                        (13)

η is the tree's forward dynamics with the closures ignored (ABA, their eqs.
(14)–(15), (24), (26)–(27)); column a of ζ is the tree's response to the loads of
closure row a alone, carried inward through the articulated-body quantities (their
(15)–(17)), then outward (their (25), (28)–(29)), O(n) per row
(``loopdyn.tree.aba.aba_resolve``).  The paper applies the unit load as body wrenches
at the cut joint; here it enters as its generalized force Jᵀe_a, J's row a (joint
forces on the loop's joints), the very J of (31): placed as wrenches from the world
poses, a lever small against the bodies' distance from the origin loses its digits
(a ball closure 2.2e-13 m off a universal joint's centre: rows of 2.2e-13 and 7e-18,
q̈ 7.5e-2 off without an error), and Jᵀ would no longer be the transpose of J.
Substituting (13) into the acceleration-level constraints J q̈ = γ (their (31))
gives the m × m system

    [J ζ] λ = γ - J η                                   (32)

solved here by Cholesky (J ζ = J M⁻¹ Jᵀ is symmetric positive definite for
independent rows), then q̈ from (13).  Cost O(n + nm + nm² + m³) (their §2.6).

J ζ has the square of J's conditioning, so when its Cholesky pivot ratio is below
``REFINE_RATIO`` (or the articulated-body pivots' below ``REFINE_ABA_RATIO``: ABA
itself loses accuracy on extreme mass ratios) the answer is refined: the residual of
the equations of motion (RNEA and Jᵀλ, ``common.kkt_residual``) and of J q̈ = γ is solved again
by (13) and (32) with the factors already in hand, O(n + nm) a step, until the
correction is at rounding level.
"""

from numba import njit

from loopdyn.kernels.linalg import cholesky_inplace, cholesky_solve
from loopdyn.kernels.numba_internals import as_input, unliteral
from loopdyn.kinematics.closures import bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import (
    DIAG_REFINED,
    INACCURATE,
    MAX_REFINE,
    PIVOT_TOL,
    REFINE_ABA_RATIO,
    REFINE_GO_ON,
    REFINE_RATIO,
    SINGULAR,
    STALL_TOL,
    aba_pivot_ratio,
    accept,
    checked_handles,
    kkt_residual,
    max_abs,
    method_entry,
    subtract_rows,
    take_correction,
)
from loopdyn.tree.aba import aba_from_kinematics, aba_resolve


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def recursive_lambda_kernel(m, d, q, v, tau, qdd, lam):
    """λ on the independent rows ``d.rows`` by eq. (32), q̈ by eq. (13).

    Workspace: ζ's columns in ``d.Y`` (nv × r), J ζ in ``d.Sm``.  Returns J ζ's
    Cholesky pivot ratio (> 0) or a status < 0.
    """
    r = d.nrows
    nv = m.nv
    rows, J, zeta, JZ = d.rows, d.J, d.Y, d.Sm
    # kinematics, closure rows J and γ = -J̇q̇ (and the levers d.lev of the cut-joint loads)
    fk_kernel(m, d, q, v)
    bias_accelerations(m, d)
    closure_terms(m, d, q, v, unliteral(True), unliteral(True))
    # η: the tree without its closures (13); leaves the articulated-body factors in d
    if aba_from_kinematics(m, d, unliteral(0), m.nb, tau, as_input(d.fext[:0]), qdd) >= 0:
        return SINGULAR
    eta = max_abs(qdd)
    # ζ column a: the response to a unit load on row a (15)–(17), (25), (28)–(29), its
    # generalized force Jᵀe_a = J's row a itself (see the module docstring)
    d.fext[:, :] = 0.0
    for a in range(r):
        aba_resolve(m, d, d.fext, J[rows[a]], zeta[:, a])
    # [J ζ] λ = γ - J η (32); J ζ = J M⁻¹ Jᵀ is symmetric: its lower triangle is used
    for a in range(r):
        ra = rows[a]
        for b in range(a + 1):
            s = 0.0
            for j in range(nv):
                s += J[ra, j] * zeta[j, b]
            JZ[a, b] = s
            JZ[b, a] = s
        s = d.gamma[ra]
        for j in range(nv):
            s -= J[ra, j] * qdd[j]
        lam[a] = s
    ratio = cholesky_inplace(JZ, r)
    if not ratio > PIVOT_TOL:
        d.diag[0] = ratio
        return SINGULAR
    cholesky_solve(JZ, r, lam)
    add_columns(zeta, nv, r, lam, qdd)  # q̈ = η + ζ λ (13)
    d.diag[DIAG_REFINED] = 0.0
    if ratio < REFINE_RATIO or aba_pivot_ratio(m, d) < REFINE_ABA_RATIO:
        if refine(m, d, tau, qdd, lam, r, max(eta, max_abs(qdd))) < 0:
            return INACCURATE
    return accept(m, d, ratio, qdd, lam, r, eta)


@njit(cache=True)
def add_columns(Z, n, r, x, y):
    """y[:n] += Z[:n, :r] x[:r]: eq. (13), q̈ = η + ζ λ, with ζ's columns in ``Z``."""
    for j in range(n):
        s = y[j]
        for a in range(r):
            s += Z[j, a] * x[a]
        y[j] = s


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, tau, qdd, lam, r, scale):
    """Iterative refinement of (q̈, λ) with the factors of the solve: for the residuals
    r1 = τ + Jᵀλ - M q̈ - h and r2 = γ - J q̈, δη = M⁻¹ r1 by one more articulated-body
    pass, [J ζ] δλ = r2 - J δη (32), δq̈ = δη + ζ δλ (13).  Returns the steps taken, or
    -1 if the corrections grow (the solve cannot be trusted)."""
    nv, rows, J, zeta, JZ = m.nv, d.rows, d.J, d.Y, d.Sm
    r1, dq, dl = d.phi, d.K[:nv, 0], d.rhs[:r]  # free in this method
    prev = 0.0
    for step in range(MAX_REFINE):
        kkt_residual(m, d, tau, qdd, lam, r, r1, dl)
        d.fext[:, :] = 0.0
        aba_resolve(m, d, d.fext, r1, dq)
        subtract_rows(J, rows, r, nv, dq, dl)  # r2 - J δη
        cholesky_solve(JZ, r, dl)
        add_columns(zeta, nv, r, dl, dq)  # δq̈ = δη + ζ δλ (13)
        code, prev = take_correction(d, step, prev, scale, nv, r, dq, dl, qdd, lam, STALL_TOL)
        if code != REFINE_GO_ON:
            return code
    return MAX_REFINE


def recursive_lambda_entry(ctx, q, v, tau, qdd, lam):
    """``recursive_lambda_kernel`` on a Data's buffer, inputs checked."""
    m, d, st = checked_handles(ctx, q, v, tau)
    return st if st < 0.0 else recursive_lambda_kernel(m, d, q, v, tau, qdd, lam)


ENTRY = method_entry(recursive_lambda_entry)
