"""DeNOC's closure multipliers λ and its acceptance checks (not in the paper).

DeNOC eliminates the multipliers; ``loopdyn.methods.denoc``'s kernels recover them from
the wrench each leg transmits through its cut joint (the derivation is in that module's
docstring, "λ."), with the kernels below: the row wrenches ζ (``row_wrenches``), the
transmitted wrenches and the platform's balance (``transmitted_wrenches``), the
least-squares fits (``fit_multipliers``, ``cut_multipliers``, chosen by
``multipliers``), J x loop by loop (``loop_product``), the acceptance check J q̈ = γ
(``loop_check``), the equations of motion with λ (``force_residual``) and the
velocity estimate of the forward kernel (``velocity_estimate``).  Kernels on
``(m, d, pb)`` as in ``denoc`` (``DenocPlan``'s buffer ``pb``).
"""

import numpy as np
from numba import njit

from loopdyn.kernels.checks import all_finite
from loopdyn.kernels.linalg import (
    cholesky_scaled,
    cholesky_semidefinite_solve6,
    cholesky_solve_scaled,
)
from loopdyn.kernels.numba_internals import (
    as_input,
)
from loopdyn.methods.common import (
    NONFINITE_OUTPUT,
    check_verdict,
    closure_loads,
    max_abs,
)
from loopdyn.methods.denoc_plan import (
    _A0,
    _B2,
    _BK,
    _C0,
    _C1,
    _CL,
    _CLOSED,
    _COL,
    _CW_PB,
    _DINV,
    _DZ,
    _E,
    _GG,
    _INFO,
    _IV,
    _JR,
    _JX,
    _K,
    _LCOND,
    _LEG,
    _P,
    _PHI,
    _PP,
    _PT,
    _RATE,
    _RES2,
    _RESINF,
    _RM,
    _S,
    _SIG,
    _SW,
    _T1,
    _T2,
    _TT,
    _VEC,
    _WC,
    _WS,
    _XX,
    _ZR,
    CHECK_TOL,
    DELTA_TOL,
    NULL_TOL,
    PIVOT_TOL,
    _f1,
    _f2,
    _head,
    _i2,
    apply_phi,
    leg_wrench_sweep,
)
from loopdyn.model.closures import TRANSLATION
from loopdyn.tree.rnea import rnea_from_kinematics


# ------------------------------------------------------------------ closure multipliers
@njit(cache=True)
def row_wrenches(m, d, pb):
    """ζ_a (r, 6): the unit wrench about E, world axes, of independent row a on body B.

    A translation row's multiplier is a force along u (world) at B's origin p_B:
    ζ = [(p_B - E) × u; u]; a rotation row's a moment about n: ζ = [n; 0]
    (``loopdyn.kinematics.closures``).  Row a's velocity constraint is ζ_aᵀ(t_B - t_A).
    Needs ``closure_terms`` (``d.rw``, ``d.cw``) and E.
    """
    zr, E = _f2(pb, _ZR, 6), _f2(pb, _VEC, 6)[_E]
    rows, rw, cw, row_int = d.rows, d.rw, d.cw, m.row_int
    for a in range(rows.shape[0]):
        ra = rows[a]
        if row_int[ra, 1] == TRANSLATION:
            u = rw[ra, 0]
            P = cw[row_int[ra, 0], _CW_PB]
            d0, d1, d2 = P[0] - E[0], P[1] - E[1], P[2] - E[2]
            zr[a, 0] = d1 * u[2] - d2 * u[1]
            zr[a, 1] = d2 * u[0] - d0 * u[2]
            zr[a, 2] = d0 * u[1] - d1 * u[0]
            zr[a, 3] = u[0]
            zr[a, 4] = u[1]
            zr[a, 5] = u[2]
        else:
            nw = rw[ra, 2]
            for c in range(3):
                zr[a, c] = nw[c]
                zr[a, 3 + c] = 0.0


@njit(cache=True)
def transmitted_wrenches(pb, tau):
    """T[l]: the wrench leg l transmits through its cut joint (base side on platform side,
    about E), from the body wrenches ``ws`` of the current accelerations and the joint
    forces ``tau`` (nv).  See the module docstring: per leg the backward sweep gives
    T0 on the span of the leg's columns (c_i = b_i - s_iᵀA, A += p̃_i c_i/δ_i with
    b_i = τ_i - s_iᵀW_{≥i}; the actuated column by β = (b_k - s_kᵀA)/|g|², g = Φ_2 s_k);
    the platform's balance fixes the part in range(P_l).  Returns the smallest
    |g|²/|s_k|² of the actuated legs reaching the platform (1.0 if none): small, the
    actuated twist nearly lies in the span of the leg's others (a serial singularity),
    where the part of T_end along g is poorly determined; at most ``DELTA_TOL``, g is
    dropped and that part is left to the platform's balance."""
    h = _head(pb)
    leg, col, s, pt = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6), _f2(pb, _PT, 6)
    dinv, ws, G, T = _f1(pb, _DINV), _f2(pb, _WS, 6), _f2(pb, _GG, 6), _f2(pb, _TT, 6)
    Wc, bk, vec, Phi, A6 = (
        _f2(pb, _WC, 6), _f1(pb, _BK), _f2(pb, _VEC, 6), _f2(pb, _PHI, 6), _f2(pb, _PP, 6)
    )  # fmt: skip
    L = leg.shape[0]
    gmin = 1.0
    leg_wrench_sweep(pb)  # s_iᵀ W_{≥i} of every column into sw, W_{≥g} into Wc
    sw = _f1(pb, _SW)
    # Σ_l P_l ≠ 0 only if a leg reaching the platform has fewer than six independent
    # columns (P_l projects onto the wrenches its columns do not span)
    need = False
    for l in range(L):
        c0, c1, k = leg[l, _C0], leg[l, _C1], leg[l, _K]
        if leg[l, _CLOSED] == 0 and (c1 - c0 < 6 or k < 0):
            need = True
        a0 = a1 = a2 = a3 = a4 = a5 = 0.0  # A = Σ p̃_j c_j / δ_j
        for i in range(c1 - 1, c0 - 1, -1):
            iv = col[i, _IV]
            bi = tau[iv] if iv >= 0 else 0.0
            bi -= sw[i]  # s_iᵀ W_{≥i}
            if i == k:
                bk[l] = bi
                continue
            ci = (
                bi
                - (
                    s[i, 0] * a0 + s[i, 1] * a1 + s[i, 2] * a2 + s[i, 3] * a3 + s[i, 4] * a4
                    + s[i, 5] * a5
                )
            ) * dinv[i]  # fmt: skip
            a0 += pt[i, 0] * ci
            a1 += pt[i, 1] * ci
            a2 += pt[i, 2] * ci
            a3 += pt[i, 3] * ci
            a4 += pt[i, 4] * ci
            a5 += pt[i, 5] * ci
        T[l, 0], T[l, 1], T[l, 2], T[l, 3], T[l, 4], T[l, 5] = a0, a1, a2, a3, a4, a5
        if k >= 0 and leg[l, _CLOSED] == 0:
            gg = 0.0
            sa = 0.0
            for r in range(6):
                gg += G[l, r] * G[l, r]
                sa += s[k, r] * T[l, r]
            ss = 0.0
            for r in range(6):
                ss += s[k, r] * s[k, r]
            gmin = min(gmin, gg / ss)
            if gg > DELTA_TOL * ss:
                beta = (bk[l] - sa) / gg
                for r in range(6):
                    T[l, r] += beta * G[l, r]
            else:
                G[l, :] = 0.0  # the actuated twist lies in the span of the others
                need = True
    if h[4] >= 0 and need:
        # the platform: Σ_l T_end⁽ˡ⁾ = w_e; (Σ_l P_l) y = w_e - Σ_l T0⁽ˡ⁾, μ_l = P_l y
        NS = ws.shape[0] - 1
        y = vec[_T1]
        for r in range(6):
            y[r] = ws[NS, r]
            for c in range(6):
                A6[r, c] = Phi[r, c]
        for l in range(L):
            if leg[l, _CLOSED] == 1:
                continue
            for r in range(6):
                y[r] -= T[l, r]
            gg = _gnorm2(G, l) if leg[l, _K] >= 0 else 0.0
            if gg > 0.0:
                igg = 1.0 / gg
                for r in range(6):
                    a = G[l, r] * igg
                    for c in range(6):
                        A6[r, c] -= a * G[l, c]
        cholesky_semidefinite_solve6(A6, y, _f1(pb, _DZ), NULL_TOL)
        z = vec[_T2]
        for l in range(L):
            if leg[l, _CLOSED] == 1 or leg[l, _CL] < 0:
                continue
            for r in range(6):
                z[r] = y[r]
            k = leg[l, _K]
            apply_phi(leg[l, _C0], leg[l, _C1], k, leg[l, _C0], pt, dinv, z)
            if k >= 0:
                gg = _gnorm2(G, l)
                if gg > 0.0:
                    gy = 0.0
                    for r in range(6):
                        gy += G[l, r] * y[r]
                    gy /= gg
                    for r in range(6):
                        z[r] -= G[l, r] * gy
            for r in range(6):
                T[l, r] += z[r]
    # the wrench through the cut joint: T_g = T_end + W_{>g}
    for l in range(L):
        if leg[l, _CL] >= 0:
            for r in range(6):
                T[l, r] += Wc[l, r]
    return gmin


@njit(cache=True, inline="always")
def _gnorm2(G, l):
    return (
        G[l, 0] * G[l, 0] + G[l, 1] * G[l, 1] + G[l, 2] * G[l, 2] + G[l, 3] * G[l, 3]
        + G[l, 4] * G[l, 4] + G[l, 5] * G[l, 5]
    )  # fmt: skip


@njit(cache=True, inline="always")  # small, two call sites
def _solve_rows(N, p, dz, rhs, lam, a0):
    """λ of a closure's ``p`` rows from their normal equations N λ = rhs (N's lower
    triangle; ``fit_multipliers``, ``cut_multipliers``): Cholesky (``cholesky_scaled``,
    scratch ``dz``) and its solve into lam[a0 : a0 + p].  Returns the pivot ratio, or
    0.0 with ``lam`` unwritten at or below ``PIVOT_TOL``."""
    rt = cholesky_scaled(N, p, dz)
    if not rt > PIVOT_TOL:
        return 0.0
    cholesky_solve_scaled(N, p, dz, rhs)
    for i in range(p):
        lam[a0 + i] = rhs[i]
    return rt


@njit(cache=True)
def fit_multipliers(pb, lam):
    """λ of each closure's independent rows from its transmitted wrench: Σ_r λ_r ζ_r = σ T_g
    (σ = +1 when the leg crosses the closure from frame A to frame B), least squares
    over the closure's p ≤ 6 rows (Cholesky of ZᵀZ).  Returns the smallest pivot ratio
    (1.0 without rows; 0.0: a closure's row wrenches are dependent)."""
    leg, zr, T = _i2(pb, _LEG, 10), _f2(pb, _ZR, 6), _f2(pb, _TT, 6)
    N, rhs, dz = _f2(pb, _XX, 6), _f2(pb, _VEC, 6)[_T1], _f1(pb, _DZ)
    ratio = 1.0
    for l in range(leg.shape[0]):
        a0, p = leg[l, _A0], leg[l, _P]
        if p == 0:
            continue
        sig = float(leg[l, _SIG])
        for i in range(p):
            x = 0.0
            for r in range(6):
                x += zr[a0 + i, r] * T[l, r]
            rhs[i] = sig * x
            for j in range(i + 1):
                x = 0.0
                for r in range(6):
                    x += zr[a0 + i, r] * zr[a0 + j, r]
                N[i, j] = x
        rt = _solve_rows(N, p, dz, rhs, lam, a0)
        if rt == 0.0:
            return 0.0
        ratio = min(ratio, rt)
    return ratio


@njit(cache=True)
def cut_multipliers(pb, tau, lam):
    """λ of each closure's independent rows from the joint forces of its leg's tree
    columns alone (the plans whose every cut leg has at least as many tree columns as
    rows, ``_head(pb)[7]``: the Stewart platform, the planar mechanisms).

    Every column of leg l satisfies s_iᵀ T_i = τ_i with T_i = T_g + W_{≥i} - W_{>g}
    (module docstring: T_g the wrench through the cut joint, W the leg's body wrenches),
    and T_g = σ Σ_r λ_r ζ_r, so each tree column gives one equation
    σ s_iᵀ Z λ = τ_i - s_iᵀ (W_{≥i} - W_{>g}); λ is their least-squares solution
    (Cholesky of AᵀA, exact when the leg's block of J has full column rank) — no
    platform balance and no fit of T_g.  Returns the smallest pivot ratio (0.0: a
    block is rank deficient at this configuration: use the general
    ``transmitted_wrenches`` and ``fit_multipliers``).
    """
    leg, col, s, zr = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6), _f2(pb, _ZR, 6)
    Wc, sw = _f2(pb, _WC, 6), _f1(pb, _SW)
    N, rhs, dz, a = _f2(pb, _XX, 6), _f2(pb, _VEC, 6)[_T1], _f1(pb, _DZ), _f2(pb, _VEC, 6)[_T2]
    ratio = 1.0
    leg_wrench_sweep(pb)  # s_iᵀ W_{≥i} of every column into sw, W_{≥g} into Wc
    for l in range(leg.shape[0]):
        a0, p = leg[l, _A0], leg[l, _P]
        if p == 0:
            continue
        c0, c1 = leg[l, _C0], leg[l, _C1]
        sig = float(leg[l, _SIG])
        for r in range(p):
            rhs[r] = 0.0
            for c in range(r + 1):
                N[r, c] = 0.0
        for i in range(c0, c1):
            iv = col[i, _IV]
            if iv < 0:
                continue
            b = (
                tau[iv] - sw[i] + s[i, 0] * Wc[l, 0] + s[i, 1] * Wc[l, 1] + s[i, 2] * Wc[l, 2]
                + s[i, 3] * Wc[l, 3] + s[i, 4] * Wc[l, 4] + s[i, 5] * Wc[l, 5]
            )  # fmt: skip
            for r in range(p):
                z = zr[a0 + r]
                a[r] = sig * (
                    s[i, 0] * z[0] + s[i, 1] * z[1] + s[i, 2] * z[2] + s[i, 3] * z[3]
                    + s[i, 4] * z[4] + s[i, 5] * z[5]
                )  # fmt: skip
            for r in range(p):
                rhs[r] += a[r] * b
                for c in range(r + 1):
                    N[r, c] += a[r] * a[c]
        rt = _solve_rows(N, p, dz, rhs, lam, a0)
        if rt == 0.0:
            return 0.0
        ratio = min(ratio, rt)
    return ratio


@njit(cache=True, inline="always")  # small, over a large subtree (docs/architecture.md)
def multipliers(pb, tau, lam):
    """λ from the body wrenches ``ws`` at the final accelerations and the joint forces
    ``tau``: ``cut_multipliers`` where the plan allows it and the legs' blocks are
    regular, else ``transmitted_wrenches`` and ``fit_multipliers``.  Returns the
    smallest pivot ratio (0.0: the row wrenches are dependent).  ``info[_LCOND]``: a
    measure of the conditioning of the recovery, the direct fit's pivot ratio where it
    was not kept and the smallest |g|²/|s_k|² of ``transmitted_wrenches`` (1.0 if
    neither); below ``CHECK_TOL`` the kernel checks the equations of motion with λ."""
    info = _f1(pb, _INFO)
    info[_LCOND] = 1.0
    ratio = 1.0
    if _head(pb)[7] == 1:
        ratio = cut_multipliers(pb, tau, lam)
        # its normal equations square the conditioning of the legs' blocks: below
        # CHECK_TOL the general fit, whose own pivots are those of the closures' rows
        if ratio > CHECK_TOL:
            return ratio
    info[_LCOND] = min(ratio, transmitted_wrenches(pb, tau))
    return fit_multipliers(pb, lam)


@njit(cache=True)
def loop_product(pb, x, out, jr):
    """out[a] = J_a x for every independent row a, and jr[a] = |J_a|∞, loop by loop.

    Row a of closure k on leg l: J_a x = σ ζ_aᵀ (Σ_{hanger columns} s_c x_c -
    Σ_{tree columns of leg l} s_c x_c) (the twist of the platform side minus that of
    the base side of the cut joint; no hanger term for a leg closing on the ground),
    the entries of J on the loop's coordinates only.
    """
    h = _head(pb)
    leg, col, s, zr = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6), _f2(pb, _ZR, 6)
    hg = h[5]
    for l in range(leg.shape[0]):
        a0, p = leg[l, _A0], leg[l, _P]
        sig = float(leg[l, _SIG])
        up = leg[l, _CLOSED] == 0 and hg >= 0
        for a in range(a0, a0 + p):
            z0, z1, z2, z3, z4, z5 = zr[a, 0], zr[a, 1], zr[a, 2], zr[a, 3], zr[a, 4], zr[a, 5]
            acc = 0.0
            jm = 0.0
            if up:
                for c in range(leg[hg, _C0], leg[hg, _C1]):
                    val = (
                        z0 * s[c, 0] + z1 * s[c, 1] + z2 * s[c, 2] + z3 * s[c, 3]
                        + z4 * s[c, 4] + z5 * s[c, 5]
                    )  # fmt: skip
                    acc += val * x[col[c, _IV]]
                    jm = max(jm, abs(val))
            for c in range(leg[l, _C0], leg[l, _C1]):
                iv = col[c, _IV]
                if iv < 0:
                    continue
                val = (
                    z0 * s[c, 0] + z1 * s[c, 1] + z2 * s[c, 2] + z3 * s[c, 3] + z4 * s[c, 4]
                    + z5 * s[c, 5]
                )  # fmt: skip
                acc -= val * x[iv]
                jm = max(jm, abs(val))
            out[a] = sig * acc
            jr[a] = jm


@njit(cache=True)
def loop_check(m, d, pb, quality, qdd, lam, ascale):
    """``methods.common.accept`` on the loops' rows: ``quality`` if q̈ and λ are finite and
    |J q̈ - γ|∞ <= RESIDUAL_TOL (|J|∞ max(|q̈|∞, a) + |γ|∞) over the independent rows,
    J q̈ by ``loop_product`` (no dense J); else ``NONFINITE_OUTPUT`` or ``INACCURATE``."""
    r = d.nrows
    if not (all_finite(qdd) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    jx, jr = _f1(pb, _JX), _f1(pb, _JR)
    loop_product(pb, as_input(qdd), jx, jr)
    qmax = max(ascale, max_abs(qdd))
    res = 0.0
    scale = 0.0
    gamma, rows = d.gamma, d.rows
    for a in range(r):
        g = gamma[rows[a]]
        res = max(res, abs(jx[a] - g))
        scale = max(scale, jr[a] * qmax + abs(g))
    return check_verdict(d, quality, res, scale, qmax)


@njit(cache=True)
def force_residual(m, d, pb, qdd, tau, lam):
    """The equations of motion with the multipliers: M q̈ + h - τ - Jᵀλ, by two RNEA passes
    (without and with the closure loads of λ, ``methods.common.closure_loads``).

    Needs the tree's velocities (``fk_kernel`` with v); overwrites ``d.A``.  Writes to
    ``info``: the residual's 2-norm and ∞-norm and the 2-norm of M q̈ + h; returns
    the ∞-norm scale |M q̈ + h|∞ + |Jᵀλ|∞ + |τ|∞.
    """
    info, x, tauc = _f1(pb, _INFO), d.x, d.tauc
    n = m.nv
    fx = as_input(d.fext)
    rnea_from_kinematics(m, d, qdd, as_input(d.fext[:0]), x)
    b2 = 0.0
    bmax = 0.0
    for j in range(n):
        b2 += x[j] * x[j]
        bmax = max(bmax, abs(x[j]))
    # Jᵀλ = (M q̈ + h) - rnea(q̈, closure loads) + couplings' joint forces
    for j in range(n):
        d.phi[j] = x[j]
    closure_loads(m, d, d.rows, lam, d.fext, tauc)
    rnea_from_kinematics(m, d, qdd, fx, x)
    r2 = 0.0
    rinf = 0.0
    jmax = 0.0
    tmax = 0.0
    for j in range(n):
        jl = d.phi[j] - x[j] + tauc[j]
        e = d.phi[j] - tau[j] - jl
        r2 += e * e
        rinf = max(rinf, abs(e))
        jmax = max(jmax, abs(jl))
        tmax = max(tmax, abs(tau[j]))
    info[_RES2] = r2**0.5
    info[_RESINF] = rinf
    info[_B2] = b2**0.5
    return bmax + jmax + tmax


@njit(cache=True)
def velocity_estimate(pb, v):
    """How far q̈ may move, relative to the acceleration scale, because DeNOC works with
    the rates it completes from the actuated ones (``rate``, eqs. 11b/12b) instead of the
    given ``v``: 2 |r|₁ max_i |rate_i - v_i| / |v|∞ over the tree columns, |r|₁ the
    largest 1-norm of a rate map (``rm``).  The velocity products ṡ_i θ̇_i move by
    ~2 |t| |s_i| Δθ̇, the accelerations by up to |r|₁ times that (11b/12b with target
    ṫ_e - ξ), against a scale of at least |v|².  0.0 for a consistent v (to rounding
    where the rate maps are small); the bound is pessimistic (25× on a parallelogram
    1e-5 rad from flat, where the dense answer moves by 2.4e-7 with v's rounding)."""
    col, rate, rm = _i2(pb, _COL, 11), _f1(pb, _RATE), _f2(pb, _RM, 7)
    dv = 0.0
    rmax = 0.0
    for i in range(col.shape[0]):
        a = 0.0
        for r in range(7):
            a += abs(rm[i, r])
        rmax = max(rmax, a)
        iv = col[i, _IV]
        if iv >= 0:
            dv = max(dv, abs(rate[i] - v[iv]))
    if dv == 0.0:
        return 0.0
    vmax = max_abs(v)
    return 2.0 * rmax * dv / vmax if vmax > 0.0 else np.inf
