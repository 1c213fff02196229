"""The "system approach": q̈ and λ from one KKT solve, eq. (10) of the reduced-order paper.

    [ M   Jᵀ ] [ q̈ ]   [ φ ]
    [ J   0  ] [ -λ ] = [ γ ],     φ = τ - C q̇ - g,  γ = -J̇ q̇

solved densely by LU with partial pivoting on the independent rows of J.  This is
the oracle every other method is tested against.

The rows of J (and γ) enter K scaled by powers of two, s_a = 2^-e with
max_j |J_aj| = f 2^e, f in [0.5, 1) (exact in floating point), and λ = S μ is
recovered from the solution μ of the scaled system: a closure whose rows are tiny
(a ball joint 1e-17 m, or 1e-165 m, off its hinge axes: rows that are independent
but of that size) would otherwise give J M⁻¹ Jᵀ pivots below the tolerance, or
underflow, and a ``SingularityError`` where the scaled system is well conditioned.

When the LU pivot ratio is below ``REFINE_LU_RATIO`` (J M⁻¹ Jᵀ conditioned ~1e11 and
worse: the first solve may be off by ~1e-7 relative), or the estimate ‖K‖₁ ‖U⁻¹‖₁ of
K's condition is above ``REFINE_LU_COND`` (nearly dependent rows: K's condition goes
with σ_min(J)², which the pivots do not show), the answer is refined as SLM's.  The
estimate costs O((n + r)²) and is made only where one solve's error may exceed
``ONE_SOLVE_TOL``: eps |J||λ| / (σ_min(J) |q̈|), relative, with σ_min(J) (relative)
taken from the pivot ratio; the multipliers of nearly dependent rows are large (their
loads cancel), 1e8 against a load of 18 N in the case that showed it.  Refinement:
the residual of the equations of motion (RNEA and Jᵀλ, ``common.kkt_residual``) and of J q̈ = γ
is solved again with the LU factors already in ``d.K``, O((n + m)²) a step, until the
correction is at rounding level; corrections that grow return ``INACCURATE``.
"""

import math

from numba import njit

from loopdyn.kernels.linalg import lu_inplace, lu_inverse_norm, lu_solve
from loopdyn.kernels.numba_internals import unliteral
from loopdyn.methods.common import (
    DIAG_REFINED,
    EPS,
    FINAL_STALL_TOL,
    INACCURATE,
    MAX_REFINE,
    ONE_SOLVE_TOL,
    REFINE_GO_ON,
    REFINE_LU_COND,
    REFINE_LU_RATIO,
    SINGULAR,
    accept,
    checked_handles,
    kkt_residual,
    max_abs,
    method_entry,
    system_terms,
    take_correction,
)


@njit(cache=True, inline="always")
def augmented_kernel(m, d, q, v, tau, qdd, lam):
    """q̈ (nv) and λ on the independent rows ``d.rows`` by eq. (10).

    Returns the LU pivot ratio (> 0) or a status < 0 (``methods.common``).
    """
    n, r = m.nv, d.nrows
    K, rhs, rows = d.K, d.rhs, d.rows
    sc = d.lam  # the rows' scales s_a (free scratch here; read by ``refine``)
    system_terms(m, d, q, v, tau, unliteral(True))
    # the size of the accelerations the solve combines, ~ (|φ| + |J|·|λ|) / M_ii,min
    mmin = 1e300
    for i in range(n):
        mmin = min(mmin, d.M[i, i])
    fscale = max_abs(d.phi)
    for i in range(n):
        for j in range(n):
            K[i, j] = d.M[i, j]
        rhs[i] = d.phi[i]
    jmax = 0.0
    for a in range(r):
        ra = rows[a]
        jm = 0.0
        for j in range(n):
            jm = max(jm, abs(d.J[ra, j]))
        jmax = max(jmax, jm)
        # 1 for a zero or non-finite row; at most 2^1000 (a subnormal row: no overflow)
        s = math.ldexp(1.0, -max(math.frexp(jm)[1], -1000))
        sc[a] = s
        for j in range(n):
            K[n + a, j] = s * d.J[ra, j]
            K[j, n + a] = s * d.J[ra, j]
        for b in range(r):
            K[n + a, n + b] = 0.0
        rhs[n + a] = s * d.gamma[ra]
    ratio = lu_inplace(K, n + r, d.piv)
    # K's condition is at least ~1 / ratio and refinement contracts by ~eps·cond(K): below
    # EPS nothing can be refined; above it a small ratio is refined (below) and judged
    if not ratio > EPS:
        d.diag[0] = ratio
        return SINGULAR
    lu_solve(K, n + r, d.piv, rhs)
    for i in range(n):
        qdd[i] = rhs[i]
    for a in range(r):
        lam[a] = -rhs[n + a] * sc[a]  # λ = S μ
    ascale = (fscale + jmax * max_abs(lam[:r])) / mmin if mmin > 0.0 else 0.0
    qscale = max(max_abs(qdd), fscale / mmin) if mmin > 0.0 else 0.0
    d.diag[DIAG_REFINED] = 0.0
    # K's condition is estimated (O((n + r)²)) only where one solve's error may exceed
    # ONE_SOLVE_TOL: ~ eps |J||λ| / (σ_min(J) |q̈|), σ_min(J) shown (relative) by the ratio;
    # an estimate that overflows (inf, or NaN from inf - inf) counts as ill-conditioned
    if ratio < REFINE_LU_RATIO or (
        EPS * ascale > ONE_SOLVE_TOL * ratio * qscale
        and not kkt_norm(m, d, sc) * lu_inverse_norm(K, n + r, rhs) <= REFINE_LU_COND
    ):
        # corrections are judged against the size of q̈ and of the free accelerations
        # (as slm's and sslm's), not against ascale: with multipliers of 1e8 ascale is
        # 1e11, and a correction of 3e-5 counted as converged, leaving q̈ 1e-8 off
        # the accelerations any answer carries: velocity products and gravity; and a lower
        # bound of the free accelerations |M⁻¹φ|∞ >= |φ|∞ / ‖M‖∞ (|φ|∞ / min M_ii, in
        # qscale, is an upper bound: 2.7e6 against |M⁻¹φ|∞ <= 22.6, seed 20261153)
        mnorm = 0.0
        for i in range(n):
            t = 0.0
            for j in range(n):
                t += abs(d.M[i, j])
            mnorm = max(mnorm, t)
        floor = max(max_abs(v) ** 2, abs(m.gravity[0]), abs(m.gravity[1]), abs(m.gravity[2]))
        if mnorm > 0.0:
            floor = max(floor, fscale / mnorm)
        if refine(m, d, tau, qdd, lam, r, qscale, floor) < 0:
            return INACCURATE
    return accept(m, d, ratio, qdd, lam, r, ascale)


@njit(cache=True)
def kkt_norm(m, d, sc):
    """‖K‖₁ (= ‖K‖∞, K symmetric) of eq. (10) with the rows of J scaled by ``sc``, from
    ``d.M`` and ``d.J`` (``d.K`` holds the LU factors by then)."""
    n, r = m.nv, d.nrows
    knorm = 0.0
    for i in range(n):
        t = 0.0
        for j in range(n):
            t += abs(d.M[i, j])
        for a in range(r):
            t += sc[a] * abs(d.J[d.rows[a], i])
        knorm = max(knorm, t)
    for a in range(r):
        t = 0.0
        for j in range(n):
            t += abs(d.J[d.rows[a], j])
        knorm = max(knorm, sc[a] * t)
    return knorm


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, tau, qdd, lam, r, scale, floor):
    """Iterative refinement of (q̈, λ) with the LU factors of eq. (10) in ``d.K``/``d.piv``:
    for the residuals r1 = τ + Jᵀλ - M q̈ - h and r2 = γ - J q̈ (``kkt_residual``) the
    same system, rows scaled by ``d.lam`` (S), gives [δq̈; -δμ] for [r1; S r2] (the
    unknown is [q̈; -μ]), and δλ = S δμ.  Returns the steps taken, or -1 if the
    corrections grow.  Convergence (a correction at rounding level) is judged against
    ``scale``; corrections that stop shrinking, and an answer still converging after the
    last step (the error it leaves, |δ_last|²/|δ_prev|), are accepted only below
    ``FINAL_STALL_TOL`` of max(|q̈|∞, ``floor``): the free accelerations in ``scale``
    (|φ|/min M_ii) can exceed the true ones by orders of magnitude (hypothesis seed
    20261130: 2.7e5 against 33, corrections shrinking by 0.2 a step, q̈ left 1.35e-6 of
    the scale off, accepted; seed 20261153: 2.7e6 against 22.6, corrections of 4e-3 that
    did not shrink, q̈ 2.3e-4 off, accepted)."""
    n = m.nv
    rhs, sc = d.rhs, d.lam  # rhs: free once q̈ and λ are read out of it
    dq, dl = rhs[:n], rhs[n : n + r]
    prev = 0.0
    for step in range(MAX_REFINE):
        kkt_residual(m, d, tau, qdd, lam, r, dq, dl)
        for a in range(r):
            dl[a] *= sc[a]
        lu_solve(d.K, n + r, d.piv, rhs)
        for a in range(r):
            dl[a] = -dl[a] * sc[a]  # -δμ → δλ
        before = prev
        # stalls judged against the accelerations the answer surely carries (docstring)
        tight = max(max_abs(qdd), floor)
        stall = FINAL_STALL_TOL * min(1.0, tight / scale) if scale > 0.0 else FINAL_STALL_TOL
        code, prev = take_correction(d, step, prev, scale, n, r, dq, dl, qdd, lam, stall)
        if code == MAX_REFINE and step == MAX_REFINE - 1:
            if not prev * prev <= FINAL_STALL_TOL * tight * before:
                return -1
        if code != REFINE_GO_ON:
            return code
    return MAX_REFINE


def augmented_entry(ctx, q, v, tau, qdd, lam):
    """``augmented_kernel`` on a Data's buffer, inputs checked."""
    m, d, st = checked_handles(ctx, q, v, tau)
    return st if st < 0.0 else augmented_kernel(m, d, q, v, tau, qdd, lam)


ENTRY = method_entry(augmented_entry)
