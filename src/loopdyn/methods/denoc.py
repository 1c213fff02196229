"""Saha & Schiehlen's recursive minimal-order dynamics of parallel mechanisms (DeNOC).

Paper: ``../shared/papers/saha-schiehlen-recursive-closed-loop-denoc.txt``.  The class
of mechanisms (a fixed base, one platform, legs of 1-DOF joints with at most one
actuated joint each, DOF = number of actuated joints) is detected by
``loopdyn.topology.parallel.parallel_structure``; ``docs/denoc.md`` explains the
algorithm with the paper's equation numbers.  Registered as
``ld.forward_dynamics(..., method="denoc")`` (``bind``) and
``ld.inverse_dynamics(..., method="denoc")`` (``inverse_terms``).

Conventions.  Every twist ``t = [ω; v]`` and wrench ``w = [n; f]`` below is in world
axes about the platform point E (the platform's centre of mass, the world origin
when all legs close on the ground), frozen at the current instant: the paper's
``A_{e,i} t_i`` and ``A_{i,e}ᵀ w_i``.  In these coordinates the twist propagation
matrices of (7b) are identities, ``p_i`` of the paper becomes the unit joint twist
``s_i = A_{e,i} p_i`` (9b) and accelerations are spatial accelerations about the
fixed point, so that

    t_i = t_{i-1} + s_i θ̇_i,     ṫ_i = ṫ_{i-1} + s_i θ̈_i + ṡ_i θ̇_i          (7a)

with ``ṡ_i = t_X ×m s_i``, X the body the axis is fixed in.  Each leg is a list of
1-DOF "columns" (``parallel.Column``; a universal joint is two, a spherical joint or
ball closure three), ordered from the base to the platform, signed along the leg.

Kernels (numba, ``(m, d, pb, ...)``: the model and data handles of the ``Data`` and
the method's plan buffer ``pb``, see ``DenocPlan``; no allocation; the paper's steps):

- ``joint_twists``:   s_i of every column (7b), (9b)
- ``projections``:    p̃_i and δ_i of every leg, from the platform end (10)–(12); the
                      projectors Φ_i are applied in product form (``apply_phi``)
- ``platform_jacobian``: Φ = Σ Φ_2 (14a), its Cholesky factor and J (14b)
- ``leg_rates``:      unactuated rates (11b)/(12b) (and accelerations), leg by leg
- ``joint_biases``:   ṡ_i θ̇_i and the leg sums ξ
- ``body_inertias``/``body_wrenches``: M_i about E, w_i = M_i(ṫ_i - g) + t_i ×* M_i t_i (18a)
- ``backward_pass``:  IDA-1/2 (21)–(23) and, for forward dynamics, FDA-1/2 (28)–(33)
- ``generalized_inertia``: FDA-2/3: the GIM I = Nᵀ M N (30)–(34)
- ``transmitted_wrenches``, ``fit_multipliers``: the closure multipliers λ from the
  wrench each leg transmits through its cut joint (not in the paper, see below), and
- ``loop_product``, ``loop_check``: J x and the acceptance check J q̈ = γ, loop by loop,
  both in ``denoc_multipliers``
- ``denoc_kernel`` (forward dynamics), ``denoc_inverse_kernel`` (inverse dynamics).

Layout.  This module is the algorithm, in the paper's order, and its public calls
(``bind``, ``run``, ``inverse``, ``complete_rates``, ``inverse_terms``, the inspection
classes); its plumbing is beside it: ``denoc_plan`` (tolerances and status codes, the
plan buffer ``pb`` and its tables, the error messages) and ``denoc_multipliers`` (λ and
the acceptance checks).  It stays above 1,000 lines because the paper's steps are
unrolled over 6-vectors (``backward_pass``, ``leg_rates``: the small products in
registers, not in loops over arrays, set DeNOC's per-call time) and its public calls
share its entries.

λ.  DeNOC eliminates the multipliers; they are recovered afterwards, in O(columns):
along leg l the wrench T_j a joint transmits (base side on platform side) is
T_j = W_{≥j} + T_end, W_{≥j} the sum of the Newton–Euler wrenches (18a) of the leg's
bodies beyond joint j, and every column satisfies s_iᵀ T = τ_i (the applied joint
force, 0 on a cut joint).  With the leg's orthogonal p̃_i this fixes T_end on the
span of the leg's columns by one backward sweep (the same recursion as IDA-1);
the rest of T_end lies in the range of P_l = Φ_2 - ĝĝᵀ (ĝ = Φ_2 s_k normalised),
the wrenches the leg carries without any joint working, and follows from the
platform's balance w_e = Σ_l T_end⁽ˡ⁾: (Σ_l P_l) y = w_e - Σ_l T0⁽ˡ⁾, μ_l = P_l y.
The wrench through the leg's cut joint T_g = T_end + W_{>g} is then Σ_r λ_r ζ_r
(ζ_r the row's unit wrench about E), a least-squares fit over the closure's (≤ 6)
rows, exact when the rows are independent (a self-stress would be a dependence of
the rows); with dropped (redundant) rows the equations of motion
M q̈ + h = τ + Jᵀλ are checked by two RNEA passes before λ is returned.
"""

from functools import partial

import numpy as np
from numba import njit, types

from loopdyn.kernels.checks import all_finite
from loopdyn.kernels.linalg import (
    cholesky_inverse_trace6,
    cholesky_scaled,
    cholesky_solve_rows6,
    cholesky_solve_scaled,
)
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    Entry,
    as_input,
    entry,
    unliteral,
)
from loopdyn.kernels.spatial import rigid_inertia_to_parent_add
from loopdyn.kinematics.closures import bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import (
    BAD_INPUT,
    INACCURATE,
    NONFINITE_INPUT,
    NONFINITE_OUTPUT,
    SINGULAR,
    checked_handles,
    max_abs,
    method_entry,
)
from loopdyn.methods.denoc_multipliers import (
    force_residual,
    loop_check,
    loop_product,
    multipliers,
    row_wrenches,
    velocity_estimate,
)
from loopdyn.methods.denoc_plan import (
    _A0S,
    _AC,
    _AE,
    _AFTER,
    _ARATE,
    _B,
    _B2,
    _BADCOL,
    _BSLOT,
    _C0,
    _C1,
    _CAX,
    _CERR,
    _CLOSED,
    _COL,
    _DC,
    _DG,
    _DINV,
    _DMIN,
    _E,
    _G0,
    _G1,
    _GG,
    _IG,
    _IGG,
    _INFO,
    _IV,
    _JR,
    _JT,
    _JX,
    _K,
    _L7,
    _LC,
    _LCOND,
    _LEG,
    _LG,
    _MS,
    _OBJ,
    _PHI,
    _PP,
    _PT,
    _R7,
    _RATE,
    _RES2,
    _RESINF,
    _RM,
    _ROT,
    _S,
    _SIDE,
    _SIGN,
    _SLOT,
    _SLOTCOL,
    _SUB,
    _SW,
    _T1,
    _TE,
    _TH,
    _THDD,
    _TW,
    _TYPE,
    _UA,
    _VEC,
    _VEST,
    _WBAR,
    _WHY,
    _WS,
    _XI,
    _XJ,
    _XX,
    _Y,
    CHECK_TOL,
    DELTA_TOL,
    FORCE_TOL,
    GIM_TOL,
    PHI_TOL,
    PIVOT_TOL,
    VELOCITY_TOL,
    WHY_FORCES,
    WHY_GIM,
    WHY_LAMBDA,
    WHY_LEG,
    WHY_PHI,
    WHY_VELOCITY,
    _explain,
    _f1,
    _f2,
    _f3,
    _head,
    _i1,
    _i2,
    _sym_add,
    _sym_store,
    _trace6,
    apply_phi,
    layout,
    leg_wrench_sweep,
    plan_for,
)
from loopdyn.topology.parallel import ON_BASE, ON_PLATFORM
from loopdyn.validation import configuration, vector, workspace


# --------------------------------------------------------------------------- kinematics
@njit(cache=True)
def joint_twists(m, d, pb):
    """Unit joint twists s_i = A_{e,i} p_i (eqs. 7b, 9b) of every column, signed along its leg.

    From the world poses ``d.Xw`` and body-frame motion subspaces ``d.S`` of the
    tree (``fk_kernel``), the closure frames ``m.cl_X`` and the columns' closure
    axes ``cax``, about the platform point E (``vec[_E]``).  Out: ``s`` (C, 6),
    ``[ω; v_E]`` in world axes.
    """
    col, cax, s = _i2(pb, _COL, 11), _f2(pb, _CAX, 3), _f2(pb, _S, 6)
    E = _f2(pb, _VEC, 6)[_E]
    Xw, S, cl_body, cl_X = d.Xw, d.S, m.cl_body, m.cl_X
    for c in range(col.shape[0]):
        if col[c, _TYPE] == 0:
            # tree joint: column `sub` of body b's S, rotated to world axes, moved to E
            b, a = col[c, _OBJ], col[c, _SUB]
            w0 = Xw[b, 0, 0] * S[b, 0, a] + Xw[b, 0, 1] * S[b, 1, a] + Xw[b, 0, 2] * S[b, 2, a]
            w1 = Xw[b, 1, 0] * S[b, 0, a] + Xw[b, 1, 1] * S[b, 1, a] + Xw[b, 1, 2] * S[b, 2, a]
            w2 = Xw[b, 2, 0] * S[b, 0, a] + Xw[b, 2, 1] * S[b, 1, a] + Xw[b, 2, 2] * S[b, 2, a]
            u0 = Xw[b, 0, 0] * S[b, 3, a] + Xw[b, 0, 1] * S[b, 4, a] + Xw[b, 0, 2] * S[b, 5, a]
            u1 = Xw[b, 1, 0] * S[b, 3, a] + Xw[b, 1, 1] * S[b, 4, a] + Xw[b, 1, 2] * S[b, 5, a]
            u2 = Xw[b, 2, 0] * S[b, 3, a] + Xw[b, 2, 1] * S[b, 4, a] + Xw[b, 2, 2] * S[b, 5, a]
            d0, d1, d2 = E[0] - Xw[b, 3, 0], E[1] - Xw[b, 3, 1], E[2] - Xw[b, 3, 2]
        else:
            # closure axis fixed in frame A or B: world direction a through the frame origin
            k, side = col[c, _OBJ], col[c, _SIDE]
            bb = cl_body[k, side]
            X = cl_X[k, side]
            x0, x1, x2 = cax[c, 0], cax[c, 1], cax[c, 2]
            # direction in the body frame (the frame's rotation), then in world axes
            f0 = X[0, 0] * x0 + X[0, 1] * x1 + X[0, 2] * x2
            f1 = X[1, 0] * x0 + X[1, 1] * x1 + X[1, 2] * x2
            f2 = X[2, 0] * x0 + X[2, 1] * x1 + X[2, 2] * x2
            o0, o1, o2 = X[3, 0], X[3, 1], X[3, 2]
            if bb >= 0:
                a0 = Xw[bb, 0, 0] * f0 + Xw[bb, 0, 1] * f1 + Xw[bb, 0, 2] * f2
                a1 = Xw[bb, 1, 0] * f0 + Xw[bb, 1, 1] * f1 + Xw[bb, 1, 2] * f2
                a2 = Xw[bb, 2, 0] * f0 + Xw[bb, 2, 1] * f1 + Xw[bb, 2, 2] * f2
                p0 = Xw[bb, 3, 0] + Xw[bb, 0, 0] * o0 + Xw[bb, 0, 1] * o1 + Xw[bb, 0, 2] * o2
                p1 = Xw[bb, 3, 1] + Xw[bb, 1, 0] * o0 + Xw[bb, 1, 1] * o1 + Xw[bb, 1, 2] * o2
                p2 = Xw[bb, 3, 2] + Xw[bb, 2, 0] * o0 + Xw[bb, 2, 1] * o1 + Xw[bb, 2, 2] * o2
            else:
                a0, a1, a2, p0, p1, p2 = f0, f1, f2, o0, o1, o2
            if col[c, _ROT] == 1:
                w0, w1, w2, u0, u1, u2 = a0, a1, a2, 0.0, 0.0, 0.0
            else:
                w0, w1, w2, u0, u1, u2 = 0.0, 0.0, 0.0, a0, a1, a2
            d0, d1, d2 = E[0] - p0, E[1] - p1, E[2] - p2
        g = float(col[c, _SIGN])
        s[c, 0] = g * w0
        s[c, 1] = g * w1
        s[c, 2] = g * w2
        # v_E = v_o + ω × (E - o)
        s[c, 3] = g * (u0 + w1 * d2 - w2 * d1)
        s[c, 4] = g * (u1 + w2 * d0 - w0 * d2)
        s[c, 5] = g * (u2 + w0 * d1 - w1 * d0)


@njit(cache=True)
def projections(pb):
    """p̃_i and δ_i of every leg, eqs. (9b)–(12d).

    Per leg, from the platform end (i = m, …, 1), skipping the actuated joint k:
    p̃_i = Φ_{i+1} s_i (11c, 12c), δ_i = p̃_iᵀ p̃_i, where Φ_{i+1} = Φ_{i+2} -
    p̃_{i+1} p̃_{i+1}ᵀ/δ_{i+1} (11d, 12d), Φ_{m+1} = 1: Gram–Schmidt on the leg's
    unactuated twists.  Each Φ_i is thus the orthogonal projector onto the complement
    of the unactuated twists s_i … s_m (eq. 10b: Φ_iᵀ Φ_i = Φ_i Φ_iᵀ = Φ_i) and the
    product of the factors (1 - p̃_j p̃_jᵀ/δ_j), j ≥ i; it is applied in that form
    (``apply_phi``) and never stored (``DenocKinematics.projectors`` rebuilds it).
    The paper shifts the index of Φ by one below k (Φ_{i+2} in (12)); here the
    product simply skips k.  Out: ``pt`` (C, 6), ``dinv`` (C): 1/δ_i.  Returns -1, or the
    first column whose δ_i is below ``DELTA_TOL`` ‖s_i‖²: the leg's unactuated joints
    are dependent (a singularity of the leg).  The smallest δ_i/‖s_i‖² goes to
    ``info[_DMIN]`` (1.0 without unactuated joints).
    """
    leg, s, pt, dinv = _i2(pb, _LEG, 10), _f2(pb, _S, 6), _f2(pb, _PT, 6), _f1(pb, _DINV)
    info = _f1(pb, _INFO)
    dmin = 1.0
    for l in range(leg.shape[0]):
        c0, c1, k = leg[l, _C0], leg[l, _C1], leg[l, _K]
        for i in range(c1 - 1, c0 - 1, -1):
            if i == k:
                continue
            ss = 0.0
            for r in range(6):
                pt[i, r] = s[i, r]
                ss += s[i, r] * s[i, r]
            x = pt[i]
            apply_phi(c0, c1, k, i + 1, pt, dinv, x)
            dd = 0.0
            for r in range(6):
                dd += pt[i, r] * pt[i, r]
            if dd < 1e-2 * ss:
                # strong cancellation: project once more, so that p̃_i stays orthogonal
                # to the later p̃_j ("twice is enough")
                apply_phi(c0, c1, k, i + 1, pt, dinv, x)
                dd = 0.0
                for r in range(6):
                    dd += pt[i, r] * pt[i, r]
            if not dd > DELTA_TOL * ss:
                info[_DMIN] = dd / ss if ss > 0.0 else 0.0
                return i
            dmin = min(dmin, dd / ss)
            dinv[i] = 1.0 / dd
    info[_DMIN] = dmin
    return -1


@njit(cache=True)
def platform_jacobian(pb):
    """Φ = Σ_l Φ_2⁽ˡ⁾ (eq. 14a), its Cholesky factor ``Lc`` and J = Φ⁻¹ [Φ_2 s_k]⁽ˡ⁾ (14b).

    ``JT`` (n, 6) holds Jᵀ: row a is J's column of actuated leg a; ``g`` (L, 6) keeps
    each leg's Φ_2 s_k (for the multipliers).

    Φ_2⁽ˡ⁾ = 1 - Σ_i p̃_i p̃_iᵀ/δ_i over the leg's unactuated joints (13a); for a leg
    of five unactuated joints and an actuated one (rank-one Φ_2) Φ_2 = g gᵀ/gᵀg with
    g = Φ_2 s_k, one outer product instead of five.  Legs closing on
    the ground (``leg[l, _CLOSED]``) have t_e = 0 and no part in Φ; their columns of J
    are zero, as are those of the legs without actuator.  Returns 1 / (tr Φ · tr Φ⁻¹),
    an estimate of 1 / cond₂(Φ) within a factor 36 from below (1.0 when no leg reaches
    a platform; 0.0: singular or not above ``PHI_TOL``, where J would carry up to
    eps · cond(Φ) of error along the motion).
    """
    leg, s, pt, dinv = _i2(pb, _LEG, 10), _f2(pb, _S, 6), _f2(pb, _PT, 6), _f1(pb, _DINV)
    Phi, Lc, JT, G = _f2(pb, _PHI, 6), _f2(pb, _LC, 6), _f2(pb, _JT, 6), _f2(pb, _GG, 6)
    dc, ig = _f1(pb, _DC), _f1(pb, _IGG)
    L = leg.shape[0]
    n = JT.shape[0]
    for a in range(n):
        for r in range(6):
            JT[a, r] = 0.0
    U = (0.0,) * 21  # Φ's upper triangle, row by row
    npl = 0
    for l in range(L):
        ig[l] = 0.0
        if leg[l, _CLOSED] == 1:
            continue
        npl += 1
        c0, c1, k = leg[l, _C0], leg[l, _C1], leg[l, _K]
        rank1 = False
        if k >= 0:
            # g = Φ_2 s_k (the numerator of 14b)
            x = G[l]
            ss = 0.0
            for r in range(6):
                x[r] = s[k, r]
                ss += x[r] * x[r]
            apply_phi(c0, c1, k, c0, pt, dinv, x)
            if c1 - c0 == 6:
                # five unactuated joints: Φ_2 projects onto a line, Φ_2 = g gᵀ/gᵀg
                # (the leg's reciprocal wrench, e.g. the force along a Stewart leg)
                gg = 0.0
                for r in range(6):
                    gg += x[r] * x[r]
                if gg > DELTA_TOL * ss:
                    rank1 = True
                    ig[l] = 1.0 / gg
                    U = _sym_add(U, ig[l], x[0], x[1], x[2], x[3], x[4], x[5])
        if not rank1:
            # Φ_2 = 1 - Σ_i p̃_i p̃_iᵀ/δ_i (13a)
            U = (
                U[0] + 1.0, U[1], U[2], U[3], U[4], U[5], U[6] + 1.0, U[7], U[8], U[9], U[10],
                U[11] + 1.0, U[12], U[13], U[14], U[15] + 1.0, U[16], U[17], U[18] + 1.0,
                U[19], U[20] + 1.0,
            )  # fmt: skip
            for i in range(c0, c1):
                if i == k:
                    continue
                U = _sym_add(
                    U, -dinv[i], pt[i, 0], pt[i, 1], pt[i, 2], pt[i, 3], pt[i, 4], pt[i, 5]
                )
    _sym_store(Phi, U)
    if npl == 0:
        return 1.0
    for r in range(6):
        for c in range(6):
            Lc[r, c] = Phi[r, c]
    if not cholesky_scaled(Lc, unliteral(6), dc) > 0.0:
        return 0.0
    ratio = 1.0 / (_trace6(Phi) * cholesky_inverse_trace6(Lc, dc, _f2(pb, _XX, 6)))
    if not ratio > PHI_TOL:
        return 0.0
    for l in range(n):
        if leg[l, _K] < 0 or leg[l, _CLOSED] == 1:
            continue  # a zero row of Jᵀ stays zero
        for r in range(6):
            JT[l, r] = G[l, r]
    cholesky_solve_rows6(Lc, dc, JT, n)
    return ratio


@njit(cache=True)
def leg_rates(pb, th, acc):
    """Joint rates (or accelerations) of every leg, eqs. (11b) and (12b), base to platform.

    ``th`` (n): the actuated joints' rates (accelerations), in leg order.  The target
    of leg l is t_e (``acc`` False) or ṫ_e - ξ⁽ˡ⁾ (``acc`` True), with t_e = 0 for a
    leg closing on the ground.  For i ≠ k: θ_i = p̃_iᵀ (target - Σ_{j<i} s_j θ_j -
    [i < k] s_k θ_k) / δ_i, the paper's (11b) for i > k and (12b), with
    t'_e = t_e - s_k θ̇_k (12a), for i < k, evaluated as θ_i = r_iᵀ (target, θ_k) with
    the maps of ``rate_maps`` (no chain through the earlier rates).  Out (``acc``
    False): ``rate`` (C) and
    ``tw`` (C, 6), the twist Σ_{j<=i} s_j θ̇_j of the body after column i; (``acc``
    True): ``arate`` and ``ac``, its spatial acceleration Σ_{j<=i} (s_j θ̈_j + b_j),
    ``b`` (C, 6) the columns' ṡ_j θ̇_j.
    """
    leg, s, rm = _i2(pb, _LEG, 10), _f2(pb, _S, 6), _f2(pb, _RM, 7)
    b, xi, vec = _f2(pb, _B, 6), _f2(pb, _XI, 6), _f2(pb, _VEC, 6)
    if acc:
        rate, cum, te = _f1(pb, _ARATE), _f2(pb, _AC, 6), vec[_AE]
    else:
        rate, cum, te = _f1(pb, _RATE), _f2(pb, _TW, 6), vec[_TE]
    n = th.shape[0]
    for l in range(leg.shape[0]):
        c0, c1 = leg[l, _C0], leg[l, _C1]
        th_k = th[l] if l < n else 0.0
        if leg[l, _CLOSED] == 1:
            e0 = e1 = e2 = e3 = e4 = e5 = 0.0
        else:
            e0, e1, e2, e3, e4, e5 = te[0], te[1], te[2], te[3], te[4], te[5]
        if acc:
            e0 -= xi[l, 0]
            e1 -= xi[l, 1]
            e2 -= xi[l, 2]
            e3 -= xi[l, 3]
            e4 -= xi[l, 4]
            e5 -= xi[l, 5]
        a0 = a1 = a2 = a3 = a4 = a5 = 0.0  # Σ s_j θ_j
        g0 = g1 = g2 = g3 = g4 = g5 = 0.0  # Σ b_j (accelerations)
        for i in range(c0, c1):
            # θ_i = r_iᵀ (target, θ_k) (``rate_maps``)
            r = (
                rm[i, 0] * e0 + rm[i, 1] * e1 + rm[i, 2] * e2 + rm[i, 3] * e3 + rm[i, 4] * e4
                + rm[i, 5] * e5 + rm[i, 6] * th_k
            )  # fmt: skip
            rate[i] = r
            a0 += s[i, 0] * r
            a1 += s[i, 1] * r
            a2 += s[i, 2] * r
            a3 += s[i, 3] * r
            a4 += s[i, 4] * r
            a5 += s[i, 5] * r
            if acc:
                g0 += b[i, 0]
                g1 += b[i, 1]
                g2 += b[i, 2]
                g3 += b[i, 3]
                g4 += b[i, 4]
                g5 += b[i, 5]
            cum[i, 0] = a0 + g0
            cum[i, 1] = a1 + g1
            cum[i, 2] = a2 + g2
            cum[i, 3] = a3 + g3
            cum[i, 4] = a4 + g4
            cum[i, 5] = a5 + g5


@njit(cache=True)
def joint_biases(pb):
    """b_i = ṡ_i θ̇_i = (t_X ×m s_i) θ̇_i for every column, and ξ = Σ_i b_i per leg.

    The axis of column i is fixed in body X: the body before its joint along the
    leg (twist ``tw`` of the column before the joint, 0 at the base) or the one
    after it (``tw`` of the joint's last column); the motion cross product is
    [ω; v] ×m [ω'; v'] = [ω × ω'; ω × v' + v × ω'].  ``xi`` (L, 6): each leg's
    ṫ_e when all its θ̈ vanish, the term the paper folds into "the time
    derivatives of (7a), (8) with necessary algebraic manipulation" (Sec. VI.A).
    """
    leg, col, s, tw = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6), _f2(pb, _TW, 6)
    rate, b, xi = _f1(pb, _RATE), _f2(pb, _B, 6), _f2(pb, _XI, 6)
    for l in range(leg.shape[0]):
        c0, c1 = leg[l, _C0], leg[l, _C1]
        for r in range(6):
            xi[l, r] = 0.0
        for i in range(c0, c1):
            if col[i, _AFTER] == 1:
                j = col[i, _G1]
            else:
                j = col[i, _G0] - 1
            if j >= c0:
                t0, t1, t2, t3, t4, t5 = tw[j, 0], tw[j, 1], tw[j, 2], tw[j, 3], tw[j, 4], tw[j, 5]
            else:
                t0 = t1 = t2 = t3 = t4 = t5 = 0.0
            x0, x1, x2, x3, x4, x5 = s[i, 0], s[i, 1], s[i, 2], s[i, 3], s[i, 4], s[i, 5]
            r = rate[i]
            b[i, 0] = (t1 * x2 - t2 * x1) * r
            b[i, 1] = (t2 * x0 - t0 * x2) * r
            b[i, 2] = (t0 * x1 - t1 * x0) * r
            b[i, 3] = (t1 * x5 - t2 * x4 + t4 * x2 - t5 * x1) * r
            b[i, 4] = (t2 * x3 - t0 * x5 + t5 * x0 - t3 * x2) * r
            b[i, 5] = (t0 * x4 - t1 * x3 + t3 * x1 - t4 * x0) * r
            for c in range(6):
                xi[l, c] += b[i, c]


@njit(cache=True, inline="always")  # small, over a large subtree (docs/architecture.md)
def denoc_rates(m, d, pb, v):
    """Projections, J and all joint rates from the actuated ones (eqs. 7–14).

    Needs the tree's poses and S in ``d`` (``fk_kernel``); reads only the actuated
    entries of ``v``.  Leaves in the plan: E (``vec[_E, :3]``), s, p̃, δ, Φ, J, the
    column rates ``rate``, twists ``tw``, biases ``b`` and ξ, t_e (``vec[_TE]``),
    θ̇ (``th``).  Returns the pivot ratio of Φ, or 0.0 with the reason in ``info``
    (a dependent unactuated joint of a leg, column in ``info[_BADCOL]``; Φ singular).
    """
    h = _head(pb)
    leg, col = _i2(pb, _LEG, 10), _i2(pb, _COL, 11)
    vec, info, th, JT = _f2(pb, _VEC, 6), _f1(pb, _INFO), _f1(pb, _TH), _f2(pb, _JT, 6)
    # E: the platform's centre of mass (the world origin without platform)
    E = vec[_E]
    pbody = h[4]
    if pbody >= 0:
        I6 = m.inertia[pbody]
        X = d.Xw[pbody]
        mass = I6[3, 3]
        c0, c1, c2 = I6[2, 4] / mass, I6[0, 5] / mass, I6[1, 3] / mass
        for r in range(3):
            E[r] = X[3, r] + X[r, 0] * c0 + X[r, 1] * c1 + X[r, 2] * c2
    else:
        for r in range(3):
            E[r] = 0.0
    joint_twists(m, d, pb)
    bad = projections(pb)
    if bad >= 0:
        info[_BADCOL] = bad
        info[_WHY] = WHY_LEG
        return 0.0
    ratio = platform_jacobian(pb)
    if not ratio > 0.0:
        info[_WHY] = WHY_PHI
        return 0.0
    rate_maps(pb)
    # θ̇ and t_e = J θ̇ (14b)
    n = th.shape[0]
    for a in range(n):
        th[a] = v[col[leg[a, _K], _IV]] if leg[a, _K] >= 0 else 0.0
    te = vec[_TE]
    for r in range(6):
        x = 0.0
        for a in range(n):
            x += JT[a, r] * th[a]
        te[r] = x
    # unactuated rates (11b), (12b), leg by leg
    leg_rates(pb, th, unliteral(False))
    joint_biases(pb)
    return ratio


@njit(cache=True)
def denoc_accelerations(pb, thdd, first):
    """ṫ_e and every column's θ̈ and body acceleration ``ac`` from the actuated θ̈.

    The time derivative of (7a) along each leg gives Σ_i s_i θ̈_i = ṫ_e - ξ, so the
    same projections apply: Φ ṫ_e = Σ_l Φ_2⁽ˡ⁾ (s_k θ̈_k + ξ⁽ˡ⁾) (the derivative of
    14a), ṫ_e = J θ̈ + Φ⁻¹ Σ_l Φ_2⁽ˡ⁾ ξ⁽ˡ⁾, then (11b)/(12b) with target ṫ_e - ξ.
    ``first``: compute Φ⁻¹ Σ_l Φ_2⁽ˡ⁾ ξ⁽ˡ⁾ (kept in ``vec[_Y]``), else reuse it.
    """
    leg, pt, dinv = _i2(pb, _LEG, 10), _f2(pb, _PT, 6), _f1(pb, _DINV)
    vec, xi, JT, Lc = _f2(pb, _VEC, 6), _f2(pb, _XI, 6), _f2(pb, _JT, 6), _f2(pb, _LC, 6)
    G, ig = _f2(pb, _GG, 6), _f1(pb, _IGG)
    n = thdd.shape[0]
    ae = vec[_AE]
    y = vec[_Y]
    if first:
        y[:] = 0.0
        any_platform = False
        z = vec[_T1]
        for l in range(leg.shape[0]):
            if leg[l, _CLOSED] == 0:
                any_platform = True
                if ig[l] > 0.0:
                    # rank-one Φ_2 = g gᵀ/gᵀg (``platform_jacobian``)
                    c = (
                        G[l, 0] * xi[l, 0] + G[l, 1] * xi[l, 1] + G[l, 2] * xi[l, 2]
                        + G[l, 3] * xi[l, 3] + G[l, 4] * xi[l, 4] + G[l, 5] * xi[l, 5]
                    ) * ig[l]  # fmt: skip
                    for r in range(6):
                        y[r] += c * G[l, r]
                    continue
                for r in range(6):
                    z[r] = xi[l, r]
                apply_phi(leg[l, _C0], leg[l, _C1], leg[l, _K], leg[l, _C0], pt, dinv, z)
                for r in range(6):
                    y[r] += z[r]
        if any_platform:
            cholesky_solve_scaled(Lc, unliteral(6), _f1(pb, _DC), y)
    for r in range(6):
        x = y[r]
        for a in range(n):
            x += JT[a, r] * thdd[a]
        ae[r] = x
    leg_rates(pb, thdd, unliteral(True))


# --------------------------------------------------------------------------- dynamics
@njit(cache=True)
def body_inertias(m, d, pb):
    """M_i of eq. (2) of every leg body and of the platform, about E in world axes.

    ``bslot`` (nb): slot of each body (``ON_BASE``: skipped, ``ON_PLATFORM``: the last
    slot); bodies welded together share a slot and their inertias add.
    """
    bslot, Ms, vec = _i1(pb, _BSLOT), _f3(pb, _MS, 6, 6), _f2(pb, _VEC, 6)
    E, p = vec[_E], vec[_T1]
    Xw, inertia = d.Xw, m.inertia
    NS = Ms.shape[0] - 1
    for sl in range(NS + 1):
        for r in range(6):
            for c in range(6):
                Ms[sl, r, c] = 0.0
    for i in range(bslot.shape[0]):
        sl = bslot[i]
        if sl == ON_BASE:
            continue
        if sl == ON_PLATFORM:
            sl = NS
        for r in range(3):
            p[r] = Xw[i, 3, r] - E[r]
        rigid_inertia_to_parent_add(Xw[i, :3], p, inertia[i], Ms[sl])


@njit(cache=True, inline="always")
def _wrench(M, t, a, gravity, out):
    """out = M (a - g) + t ×* (M t): the Newton–Euler wrench of eq. (18a) about E.

    Gravity enters as an acceleration of the base (the paper's Sec. IV, after [15]);
    the force cross product is [ω; v] ×* [n; f] = [ω × n + v × f; ω × f].
    """
    a3, a4, a5 = a[3] - gravity[0], a[4] - gravity[1], a[5] - gravity[2]
    t0, t1, t2, t3, t4, t5 = t[0], t[1], t[2], t[3], t[4], t[5]
    n0 = M[0, 0] * t0 + M[0, 1] * t1 + M[0, 2] * t2 + M[0, 3] * t3 + M[0, 4] * t4 + M[0, 5] * t5
    n1 = M[1, 0] * t0 + M[1, 1] * t1 + M[1, 2] * t2 + M[1, 3] * t3 + M[1, 4] * t4 + M[1, 5] * t5
    n2 = M[2, 0] * t0 + M[2, 1] * t1 + M[2, 2] * t2 + M[2, 3] * t3 + M[2, 4] * t4 + M[2, 5] * t5
    f0 = M[3, 0] * t0 + M[3, 1] * t1 + M[3, 2] * t2 + M[3, 3] * t3 + M[3, 4] * t4 + M[3, 5] * t5
    f1 = M[4, 0] * t0 + M[4, 1] * t1 + M[4, 2] * t2 + M[4, 3] * t3 + M[4, 4] * t4 + M[4, 5] * t5
    f2 = M[5, 0] * t0 + M[5, 1] * t1 + M[5, 2] * t2 + M[5, 3] * t3 + M[5, 4] * t4 + M[5, 5] * t5
    for r in range(6):
        out[r] = (
            M[r, 0] * a[0] + M[r, 1] * a[1] + M[r, 2] * a[2] + M[r, 3] * a3 + M[r, 4] * a4
            + M[r, 5] * a5
        )  # fmt: skip
    out[0] += t1 * n2 - t2 * n1 + t4 * f2 - t5 * f1
    out[1] += t2 * n0 - t0 * n2 + t5 * f0 - t3 * f2
    out[2] += t0 * n1 - t1 * n0 + t3 * f1 - t4 * f0
    out[3] += t1 * f2 - t2 * f1
    out[4] += t2 * f0 - t0 * f2
    out[5] += t0 * f1 - t1 * f0


@njit(cache=True)
def body_wrenches(m, pb):
    """w_i = M_i (ṫ_i - g) + t_i ×* M_i t_i (eq. 18a) of every leg body and of the platform.

    ``slotcol`` (NS): the column after which each leg body sits, whose ``tw`` and ``ac``
    are the body's twist and acceleration; the platform (last slot) has t_e, ṫ_e.
    The accelerations used are kept in ``a0`` (NS + 1, 6) for ``update_wrenches``.
    """
    slotcol, Ms, ws = _i1(pb, _SLOTCOL), _f3(pb, _MS, 6, 6), _f2(pb, _WS, 6)
    tw, ac, vec, a0 = _f2(pb, _TW, 6), _f2(pb, _AC, 6), _f2(pb, _VEC, 6), _f2(pb, _A0S, 6)
    gravity = m.gravity
    NS = slotcol.shape[0]
    for sl in range(NS):
        c = slotcol[sl]
        _wrench(Ms[sl], tw[c], ac[c], gravity, ws[sl])
        for r in range(6):
            a0[sl, r] = ac[c, r]
    _wrench(Ms[NS], vec[_TE], vec[_AE], gravity, ws[NS])
    for r in range(6):
        a0[NS, r] = vec[_AE, r]


@njit(cache=True)
def update_wrenches(pb):
    """w_i += M_i (ṫ_i - ṫ_i⁰): the wrenches (18a) at new accelerations of the same
    twists, ṫ_i⁰ the accelerations of the last ``body_wrenches`` (the velocity term
    t_i ×* M_i t_i does not change)."""
    slotcol, Ms, ws = _i1(pb, _SLOTCOL), _f3(pb, _MS, 6, 6), _f2(pb, _WS, 6)
    ac, vec, a0 = _f2(pb, _AC, 6), _f2(pb, _VEC, 6), _f2(pb, _A0S, 6)
    NS = slotcol.shape[0]
    for sl in range(NS + 1):
        a = vec[_AE] if sl == NS else ac[slotcol[sl]]
        d0, d1, d2 = a[0] - a0[sl, 0], a[1] - a0[sl, 1], a[2] - a0[sl, 2]
        d3, d4, d5 = a[3] - a0[sl, 3], a[4] - a0[sl, 4], a[5] - a0[sl, 5]
        M = Ms[sl]
        for r in range(6):
            ws[sl, r] += (
                M[r, 0] * d0 + M[r, 1] * d1 + M[r, 2] * d2 + M[r, 3] * d3 + M[r, 4] * d4
                + M[r, 5] * d5
            )  # fmt: skip


@njit(cache=True)
def rate_maps(pb):
    """r_i (7) of every column: the joint rate as a linear map of the leg's y = (t_e, θ̇_k),
    θ̇_i = r_iᵀ y, eqs. (11b)/(12b) (the same map takes (ṫ_e - ξ, θ̈_k) to θ̈_i).

    From the base end of each leg: r_k = e_7 at the actuated column and, for the others,
    r_i = ρ_i - Σ_{j<i} (p̃_iᵀ s_j / δ_i) r_j with ρ_i = (p̃_i, -[i < k] p̃_iᵀ s_k) / δ_i
    (the rows of the paper's N_c N_d restricted to one leg, 15a–15e).  Out: ``rm`` (C, 7).
    Cost O(m²) per leg of m ≤ 7 columns.
    """
    leg, s, pt, dinv, rm = (
        _i2(pb, _LEG, 10), _f2(pb, _S, 6), _f2(pb, _PT, 6), _f1(pb, _DINV), _f2(pb, _RM, 7)
    )  # fmt: skip
    for l in range(leg.shape[0]):
        c0, c1, k = leg[l, _C0], leg[l, _C1], leg[l, _K]
        for i in range(c0, c1):
            if i == k:
                for r in range(6):
                    rm[i, r] = 0.0
                rm[i, 6] = 1.0
                continue
            inv = dinv[i]
            p0, p1, p2, p3, p4, p5 = pt[i, 0], pt[i, 1], pt[i, 2], pt[i, 3], pt[i, 4], pt[i, 5]
            x0, x1, x2, x3, x4, x5 = p0 * inv, p1 * inv, p2 * inv, p3 * inv, p4 * inv, p5 * inv
            x6 = 0.0
            if i < k:
                x6 = -(
                    p0 * s[k, 0] + p1 * s[k, 1] + p2 * s[k, 2] + p3 * s[k, 3] + p4 * s[k, 4]
                    + p5 * s[k, 5]
                ) * inv  # fmt: skip
            for j in range(c0, i):
                c = (
                    p0 * s[j, 0] + p1 * s[j, 1] + p2 * s[j, 2] + p3 * s[j, 3] + p4 * s[j, 4]
                    + p5 * s[j, 5]
                ) * inv  # fmt: skip
                x0 -= c * rm[j, 0]
                x1 -= c * rm[j, 1]
                x2 -= c * rm[j, 2]
                x3 -= c * rm[j, 3]
                x4 -= c * rm[j, 4]
                x5 -= c * rm[j, 5]
                x6 -= c * rm[j, 6]
            rm[i, 0], rm[i, 1], rm[i, 2], rm[i, 3] = x0, x1, x2, x3
            rm[i, 4], rm[i, 5], rm[i, 6] = x4, x5, x6


@njit(cache=True)
def backward_pass(pb, tau, want_gim):
    """IDA-1/2 (eqs. 20–23) and, if ``want_gim``, FDA-1/2 (eqs. 27–33), leg by leg.

    Each leg's joint rates are linear in y = (t_e, θ̇_k) (7 numbers): θ̇_i = r_iᵀ y
    (``rate_maps``), so the leg's bodies have twists t_i = Σ_{j<=i} s_j r_jᵀ y (15a–e).

    IDA-1/2 (21)–(23): the leg's generalized force on y, by virtual power,
    l7 = Σ_i r_i f_i with f_i = s_iᵀ W_{≥i} - τ_i, W_{≥i} the sum of the wrenches
    (18a) of the leg's bodies beyond joint i (the paper's w̃_i propagated with
    Ψ_{i+1}ᵀ gives the same l7; τ_i the joint force ``tau`` applied to coordinate i).
    The first six entries act on the platform, the last on θ_k.

    FDA-1/2 (28)–(33): the leg's kinetic energy (×2) is yᵀ R y with
    R = Σ_{i,j} r_i H_ij r_jᵀ, H_ij = s_iᵀ M̂_{max(i,j)} s_j the leg's joint-space
    inertia and M̂_i = Σ_{bodies beyond i} M the composite inertia (FDA-1; all twists
    about E in world axes, so the composite is a plain sum).  Swept from the platform
    end with F_i = M̂_i s_i: R += r_i uᵀ + u r_iᵀ, u = Σ_{j<i} r_j s_jᵀF_i + r_i s_iᵀF_i/2;
    columns beyond the last massive body (M̂ = 0) cost nothing.  ``R7[l]`` = R =
    [[X⁽ˡ⁾, Y⁽ˡ⁾], [Y⁽ˡ⁾ᵀ, Z⁽ˡ⁾]] (X, Y of eqs. 31–32).  Scratch: ``P`` (6, 6) holds M̂.
    Cost O(m²) per leg (m ≤ 7 columns) plus O(bodies).
    """
    leg, col, s, rm = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6), _f2(pb, _RM, 7)
    sw, Ms, l7, R7, P = (
        _f1(pb, _SW), _f3(pb, _MS, 6, 6), _f2(pb, _L7, 7), _f3(pb, _R7, 7, 7), _f2(pb, _PP, 6)
    )  # fmt: skip
    leg_wrench_sweep(pb)  # s_iᵀ W_{≥i} of every column
    for l in range(leg.shape[0]):
        c0, c1 = leg[l, _C0], leg[l, _C1]
        g0 = g1 = g2 = g3 = g4 = g5 = g6 = 0.0  # l7
        started = False  # a leg body met (M̂ is zero before)
        if want_gim:
            for r in range(7):
                for c in range(r, 7):
                    R7[l, r, c] = 0.0
        for i in range(c1 - 1, c0 - 1, -1):
            sl = col[i, _SLOT]
            s0, s1, s2, s3, s4, s5 = s[i, 0], s[i, 1], s[i, 2], s[i, 3], s[i, 4], s[i, 5]
            f = sw[i]  # s_iᵀ W_{≥i}
            if col[i, _IV] >= 0:
                f -= tau[col[i, _IV]]
            g0 += rm[i, 0] * f
            g1 += rm[i, 1] * f
            g2 += rm[i, 2] * f
            g3 += rm[i, 3] * f
            g4 += rm[i, 4] * f
            g5 += rm[i, 5] * f
            g6 += rm[i, 6] * f
            if not want_gim:
                continue
            if sl >= 0:
                if started:
                    for r in range(6):
                        for c in range(r, 6):
                            P[r, c] += Ms[sl, r, c]
                else:
                    for r in range(6):
                        for c in range(r, 6):
                            P[r, c] = Ms[sl, r, c]
                started = True
            if not started:
                continue
            # F = M̂_i s_i (M̂ symmetric, upper triangle in P)
            F0 = (
                P[0, 0] * s0
                + P[0, 1] * s1
                + P[0, 2] * s2
                + P[0, 3] * s3
                + P[0, 4] * s4
                + P[0, 5] * s5
            )
            F1 = (
                P[0, 1] * s0
                + P[1, 1] * s1
                + P[1, 2] * s2
                + P[1, 3] * s3
                + P[1, 4] * s4
                + P[1, 5] * s5
            )
            F2 = (
                P[0, 2] * s0
                + P[1, 2] * s1
                + P[2, 2] * s2
                + P[2, 3] * s3
                + P[2, 4] * s4
                + P[2, 5] * s5
            )
            F3 = (
                P[0, 3] * s0
                + P[1, 3] * s1
                + P[2, 3] * s2
                + P[3, 3] * s3
                + P[3, 4] * s4
                + P[3, 5] * s5
            )
            F4 = (
                P[0, 4] * s0
                + P[1, 4] * s1
                + P[2, 4] * s2
                + P[3, 4] * s3
                + P[4, 4] * s4
                + P[4, 5] * s5
            )
            F5 = (
                P[0, 5] * s0
                + P[1, 5] * s1
                + P[2, 5] * s2
                + P[3, 5] * s3
                + P[4, 5] * s4
                + P[5, 5] * s5
            )
            h = 0.5 * (s0 * F0 + s1 * F1 + s2 * F2 + s3 * F3 + s4 * F4 + s5 * F5)
            u0, u1, u2, u3 = rm[i, 0] * h, rm[i, 1] * h, rm[i, 2] * h, rm[i, 3] * h
            u4, u5, u6 = rm[i, 4] * h, rm[i, 5] * h, rm[i, 6] * h
            for j in range(c0, i):
                h = (
                    s[j, 0] * F0 + s[j, 1] * F1 + s[j, 2] * F2 + s[j, 3] * F3 + s[j, 4] * F4
                    + s[j, 5] * F5
                )  # fmt: skip
                u0 += rm[j, 0] * h
                u1 += rm[j, 1] * h
                u2 += rm[j, 2] * h
                u3 += rm[j, 3] * h
                u4 += rm[j, 4] * h
                u5 += rm[j, 5] * h
                u6 += rm[j, 6] * h
            # R += r_i uᵀ + u r_iᵀ (upper triangle)
            x = rm[i]
            u = (u0, u1, u2, u3, u4, u5, u6)
            for r in range(7):
                xr, ur = x[r], u[r]
                for c in range(r, 7):
                    R7[l, r, c] += xr * u[c] + ur * x[c]
        l7[l, 0], l7[l, 1], l7[l, 2], l7[l, 3] = g0, g1, g2, g3
        l7[l, 4], l7[l, 5], l7[l, 6] = g4, g5, g6
        if want_gim:
            for r in range(7):
                for c in range(r):
                    R7[l, r, c] = R7[l, c, r]


@njit(cache=True, inline="always")  # small, over a large subtree (docs/architecture.md)
def denoc_inverse_dynamics(m, d, pb, tau, want_gim):
    """IDA-1..3 (eqs. 20–24) at the accelerations left by ``denoc_accelerations``.

    ``thdd`` of the plan is overwritten by the generalized forces
    r_a = Nᵀ w - (applied ``tau``) = l7_a[6] + J_aᵀ w̄, w̄ = w_e + Σ_l g⁽ˡ⁾ (IDA-2's
    w̄_k of eq. 22, reduced by p_kᵀ as in IDA-3, eq. 24).  With ``want_gim`` the
    legs' R⁽ˡ⁾ of FDA-1/2 are formed in the same backward pass.
    """
    body_inertias(m, d, pb)
    body_wrenches(m, pb)
    backward_pass(pb, tau, want_gim)
    leg, ws, l7, JT = _i2(pb, _LEG, 10), _f2(pb, _WS, 6), _f2(pb, _L7, 7), _f2(pb, _JT, 6)
    vec, thdd = _f2(pb, _VEC, 6), _f1(pb, _THDD)
    NS = ws.shape[0] - 1
    wbar = vec[_WBAR]
    for r in range(6):
        wbar[r] = ws[NS, r]
    for l in range(leg.shape[0]):
        if leg[l, _CLOSED] == 0:
            for r in range(6):
                wbar[r] += l7[l, r]
    for a in range(thdd.shape[0]):
        x = l7[a, 6]
        for r in range(6):
            x += JT[a, r] * wbar[r]
        thdd[a] = x


@njit(cache=True)
def generalized_inertia(pb):
    """FDA-2/3 (eqs. 29–34): the n×n GIM I = Nᵀ M N in the actuated rates, into ``Ig``.

    With t_e = J θ̇ (14b) and each leg's kinetic energy yᵀ R⁽ˡ⁾ y/2 in y = (t_e,
    θ̇_k): X = M_e + Σ_l X⁽ˡ⁾ (31), and I_ab = J_aᵀ X J_b + J_aᵀ Y⁽ᵇ⁾ + Y⁽ᵃ⁾ᵀ J_b +
    δ_ab Z⁽ᵃ⁾ (30), the paper's M̄_ab reduced by p_k⁽ᵃ⁾ᵀ · p_k⁽ᵇ⁾ (34).  Legs closing
    on the ground contribute Z only: their t_e is 0, so neither their X⁽ˡ⁾ nor their
    Y⁽ˡ⁾ (the first six entries of R⁽ˡ⁾'s last column, a coupling with a platform
    twist the leg does not have) enters.  Scratch: ``X`` (6, 6), ``XJ`` (n, 6):
    (X J_b + Y⁽ᵇ⁾)ᵀ.
    """
    leg, JT, R7, Ms = _i2(pb, _LEG, 10), _f2(pb, _JT, 6), _f3(pb, _R7, 7, 7), _f3(pb, _MS, 6, 6)
    X, XJ, Ig = _f2(pb, _XX, 6), _f2(pb, _XJ, 6), _f2(pb, _IG, JT.shape[0])
    Me = Ms[Ms.shape[0] - 1]
    n = Ig.shape[0]
    for r in range(6):
        for c in range(6):
            X[r, c] = Me[r, c]
    for l in range(leg.shape[0]):
        if leg[l, _CLOSED] == 0:
            for r in range(6):
                for c in range(6):
                    X[r, c] += R7[l, r, c]
    for b in range(n):
        open_b = leg[b, _CLOSED] == 0
        for r in range(6):
            x = R7[b, r, 6] if open_b else 0.0
            for c in range(6):
                x += X[r, c] * JT[b, c]
            XJ[b, r] = x
    for a in range(n):
        open_a = leg[a, _CLOSED] == 0
        for b in range(a + 1):
            x = 0.0
            for r in range(6):
                x += JT[a, r] * XJ[b, r]
                if open_a:
                    x += R7[a, r, 6] * JT[b, r]
            if a == b:
                x += R7[a, 6, 6]
            Ig[a, b] = x
            Ig[b, a] = x


# ------------------------------------------------------------------------ algorithms
@njit(cache=True, inline="always")  # small, over a large subtree (docs/architecture.md)
def _kinematics(m, d, pb, q, v):
    """Tree kinematics with velocities, the closures' frames, row vectors and γ
    (``closure_terms`` without the dense J), then DeNOC's rates and the row wrenches.
    Returns Φ's pivot ratio or 0.0 (``info`` says why)."""
    fk_kernel(m, d, q, v)
    bias_accelerations(m, d)
    closure_terms(m, d, q, v, unliteral(True), unliteral(False))
    ratio = denoc_rates(m, d, pb, v)
    if ratio > 0.0:
        row_wrenches(m, d, pb)
    return ratio


@njit(cache=True, inline="always")  # one call site (its kernel): no library of its own
def actuated_solve(pb, qdd):
    """I θ̈ = -(C θ̇ + g - τ) (eq. 25) by Cholesky of the GIM (``generalized_inertia``),
    the right-hand side in ``thdd`` as the inverse dynamics left it; then every column's
    θ̈ (``denoc_accelerations``), written to ``qdd`` (tree coordinates).  Returns ρ_I, the
    smallest ratio of a Cholesky pivot L_jj² to its diagonal entry I_jj (1/ρ_I estimates
    the condition number of I with its coordinates scaled to a unit diagonal; 0.0: not
    positive definite); not above ``GIM_TOL``: ill-conditioned, ``qdd`` unwritten."""
    col, thdd, arate = _i2(pb, _COL, 11), _f1(pb, _THDD), _f1(pb, _ARATE)
    n = thdd.shape[0]
    Ig, Lg, dg = _f2(pb, _IG, n), _f2(pb, _LG, n), _f1(pb, _DG)
    for a in range(n):
        for c in range(n):
            Lg[a, c] = Ig[a, c]
    gratio = cholesky_scaled(Lg, n, dg)
    if not gratio > GIM_TOL:
        return gratio
    for a in range(n):
        thdd[a] = -thdd[a]
    cholesky_solve_scaled(Lg, n, dg, thdd)
    denoc_accelerations(pb, thdd, unliteral(False))
    for i in range(col.shape[0]):
        iv = col[i, _IV]
        if iv >= 0:
            qdd[iv] = arate[i]
    return gratio


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def denoc_kernel(m, d, pb, q, v, tau, qdd, lam):
    """Forward dynamics: q̈ (every tree coordinate) and λ (``d.rows`` order) from (q, v, τ).

    1. kinematics and all rates from θ̇ = v[actuated] (``denoc_rates``);
    2. C θ̇ + gravity - τ by the inverse dynamics with θ̈ = 0, together with the legs'
       FDA-1/2 reductions (``denoc_inverse_dynamics``);
    3. the GIM I (``generalized_inertia``) and I θ̈ = τ - C θ̇ (eq. 25, Cholesky);
    4. θ̈ of every joint from θ̈ (``denoc_accelerations``), written to q̈;
    5. λ from the legs' transmitted wrenches, then the acceptance check on the loops.
    Returns the smallest pivot ratio (> 0) or a status < 0 (``methods.common``).
    """
    info = _f1(pb, _INFO)
    info[_WHY] = 0.0
    ratio = _kinematics(m, d, pb, q, v)
    if not ratio > 0.0:
        return SINGULAR
    vest = velocity_estimate(pb, v)
    info[_VEST] = vest
    if not vest <= VELOCITY_TOL:
        info[_WHY] = WHY_VELOCITY
        return INACCURATE
    thdd, arate = _f1(pb, _THDD), _f1(pb, _ARATE)
    thdd[:] = 0.0
    denoc_accelerations(pb, thdd, unliteral(True))
    ascale = max_abs(arate)  # the velocity-product accelerations q̈ combines with N θ̈
    denoc_inverse_dynamics(m, d, pb, tau, unliteral(True))
    generalized_inertia(pb)
    gratio = actuated_solve(pb, qdd)
    if not gratio > GIM_TOL:
        info[_WHY] = WHY_GIM
        return SINGULAR
    # λ from the transmitted wrenches at these accelerations
    update_wrenches(pb)
    lratio = multipliers(pb, tau, lam)
    if not lratio > PIVOT_TOL:
        info[_WHY] = WHY_LAMBDA
        return SINGULAR
    quality = min(ratio, gratio, lratio, info[_DMIN])  # > 0: each was tested above
    st = loop_check(m, d, pb, quality, qdd, lam, ascale)
    if st > 0.0 and (d.nrows < m.nr or min(quality, info[_LCOND]) < CHECK_TOL):
        # redundant rows were dropped (the fit is exact only if the kept rows carry the
        # transmitted wrenches), or a leg, a fit or a solve is poorly conditioned:
        # check the equations of motion with λ
        scale = force_residual(m, d, pb, as_input(qdd), tau, lam)
        if not info[_RESINF] <= FORCE_TOL * scale:
            info[_WHY] = WHY_FORCES
            return INACCURATE
    return st


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def denoc_inverse_kernel(m, d, pb, q, v, qdd, tau, lam):
    """Inverse dynamics: joint forces ``tau`` (nv, non-zero on the actuated coordinates)
    producing the actuated accelerations ``qdd[actuated]`` at (q, v) (IDA-1..3), and the
    closure multipliers ``lam`` of that motion.  Writes to ``info`` the residual of the
    equations of motion with the given ``qdd`` (``force_residual``) and the largest
    violation of J v = 0 and J q̈ = γ (``_CERR``).  Returns a pivot ratio or a status."""
    ratio = _kinematics(m, d, pb, q, v)
    if not ratio > 0.0:
        return SINGULAR
    leg, col = _i2(pb, _LEG, 10), _i2(pb, _COL, 11)
    thdd, ua, info = _f1(pb, _THDD), _f1(pb, _UA), _f1(pb, _INFO)
    jx, jr = _f1(pb, _JX), _f1(pb, _JR)
    n = thdd.shape[0]
    for a in range(n):
        ua[a] = qdd[col[leg[a, _K], _IV]]
    denoc_accelerations(pb, ua, unliteral(True))
    denoc_inverse_dynamics(m, d, pb, as_input(d.zeros), unliteral(False))
    tau[:] = 0.0
    for a in range(n):
        tau[col[leg[a, _K], _IV]] = thdd[a]
    lratio = multipliers(pb, as_input(tau), lam)
    if not lratio > PIVOT_TOL:
        info[_WHY] = WHY_LAMBDA
        return SINGULAR
    # how well the given motion satisfies the closures, then the equations of motion
    r = d.nrows
    cerr = 0.0
    loop_product(pb, v, jx, jr)
    for a in range(r):
        cerr = max(cerr, abs(jx[a]))
    loop_product(pb, qdd, jx, jr)
    for a in range(r):
        cerr = max(cerr, abs(jx[a] - d.gamma[d.rows[a]]))
    info[_CERR] = cerr
    force_residual(m, d, pb, qdd, as_input(tau), lam)
    if not (all_finite(tau) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    return min(ratio, lratio)


# ------------------------------------------------------------------- entries
def denoc_entry(ctx, pbuf, q, v, tau, qdd, lam):
    """``denoc_kernel`` on a Data's buffer and the plan's buffer, inputs checked."""
    m, d, st = checked_handles(ctx, q, v, tau)
    return st if st < 0.0 else denoc_kernel(m, d, pbuf, q, v, tau, qdd, lam)


def inverse_entry(ctx, pbuf, q, v, qdd, tau, lam):
    """``denoc_inverse_kernel`` on a Data's buffer and the plan's buffer, inputs checked."""
    m, d, st = checked_handles(ctx, q, v, qdd)
    return st if st < 0.0 else denoc_inverse_kernel(m, d, pbuf, q, v, qdd, tau, lam)


@entry
def rates_entry(ctx, pbuf, q, v):
    """Positions and ``denoc_rates`` (kinematics only), inputs checked."""
    m, d, st = checked_handles(ctx, q, v, v)
    if st < 0.0:
        return st
    fk_kernel(m, d, q, v[:0])
    return denoc_rates(m, d, pbuf, v)


ENTRY = method_entry(denoc_entry, planned=True)
INVERSE = method_entry(inverse_entry, planned=True)
RATES = Entry(rates_entry, types.float64, BUF, BUF, IN, IN)


def bind(model, d):
    """The ``ld.forward_dynamics`` call of DeNOC on ``d``: ``(q, v, tau, qdd, lam) -> status``.

    Raises :class:`loopdyn.ModelError` if the model is not a parallel mechanism of the
    DeNOC class (``ld.parallel_structure`` names the failing assumption and the
    methods that apply)."""
    return partial(ENTRY.callable(), d.ctx, plan_for(model, d).buf)


def _inputs(model, data, q, v, x, what):
    d = workspace(model, data)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    x = d.zeros if x is None else vector(x, model.nv, what, model)
    return d, q, v, x


def run(model, q, v, tau=None, data=None):
    """DeNOC forward dynamics in minimal coordinates, without fallback: q̈ (nv).

    ``ld.forward_dynamics(model, q, v, tau, method="denoc")`` is the registered call
    (it also returns λ, and falls back to the augmented solve where DeNOC cannot
    solve the given state); ``run`` is the paper's minimal-order method: only the
    actuated entries of ``v`` are read (the others are completed by eqs. 11b/12b,
    ``complete_rates``), and :class:`loopdyn.SingularityError` is raised at DeNOC's
    own singularities (a dependent leg, Φ of eq. (14a) singular), e.g. to stop a
    minimal-coordinate integration there.  Out: q̈ of every tree coordinate.
    Raises :class:`loopdyn.ModelError` if the model is not in the DeNOC class.
    """
    d, q, v, tau = _inputs(model, data, q, v, tau, "tau")
    v = complete_rates(model, q, v, data=d)
    plan = plan_for(model, d)
    qdd = np.empty(model.nv)
    lam = np.empty(model.m)
    status = ENTRY.callable()(d.ctx, plan.buf, q, v, tau, qdd, lam)
    if not status > 0.0:
        _explain(model, plan, status)
    return qdd


def inverse(model, q, v, qdd, data=None):
    """DeNOC inverse dynamics in minimal coordinates, IDA-1..3: the actuator forces (in
    ``model.actuated`` order) producing the actuated accelerations ``qdd[actuated]`` at
    the actuated rates ``v[actuated]``; the other entries of ``v`` and ``qdd`` are not
    read (they follow from the closures).  ``ld.inverse_dynamics(..., method="denoc")``
    is the registered call on a full motion (multipliers and residual too)."""
    d, q, v, qdd = _inputs(model, data, q, v, qdd, "qdd")
    plan = plan_for(model, d)
    tau = np.empty(model.nv)
    lam = np.zeros(model.m)
    status = INVERSE.callable()(d.ctx, plan.buf, q, v, qdd, tau, lam)
    if not status > 0.0:
        _explain(model, plan, status, "q, v or qdd")
    return tau[model.actuated]


def complete_rates(model, q, v, data=None):
    """Every joint rate from the actuated ones, eqs. (11b)/(12b): ``v`` (nv) with its
    unactuated entries replaced."""
    d, q, v, _ = _inputs(model, data, q, v, None, "")
    plan = plan_for(model, d)
    status = RATES.callable()(d.ctx, plan.buf, q, v)
    if not status > 0.0:
        _explain(model, plan, SINGULAR if status == 0.0 else status, "q or v")
    iv = plan.layout.col[:, _IV]
    tree = iv >= 0
    out = np.array(v)
    out[iv[tree]] = plan.views["rate"][tree]
    return out


_INVERSE_KEY = ("denoc", "inverse")  # inverse_terms' plan in Data.bound


def inverse_terms(model, q, v, qdd, data=None):
    """DeNOC inverse dynamics (IDA-1..3) for ``ld.inverse_dynamics(..., method="denoc")``.

    In: ``q`` (nq), ``v`` and ``qdd`` (nv); the actuated entries of ``qdd`` determine
    the motion (the others follow from the closures).  Out: ``(tau, lam, residual,
    scale, constraint_error)``: ``tau`` (nv, the actuator forces on ``model.actuated``,
    zero elsewhere), ``lam`` (m, the multipliers of the motion, row by row; with
    redundant rows the minimum-norm ones, as ``ld.forward_dynamics``), ``residual`` =
    |M q̈ + h - τ - Jᵀλ|₂ with the given ``qdd``, ``scale`` = |M q̈ + h|₂,
    ``constraint_error`` = the largest violation of J v = 0 and J q̈ = γ by (v, qdd).
    """
    d = workspace(model, data)
    plan = d.bound.get(_INVERSE_KEY)  # emptied with d.bound when the rows change
    if plan is None:
        layout(model)  # ModelError first if DeNOC does not apply
        if d.rank_info is None:
            # the independent rows, as ld.forward_dynamics detects them
            from loopdyn.kinematics.closures import constraint_rank

            d.rank_info = constraint_rank(model, q, data=d)
            d.set_rows(d.rank_info.independent)
            d.bound.clear()
        plan = d.bound[_INVERSE_KEY] = plan_for(model, d)
    tau = np.empty(model.nv)
    lam = np.zeros(model.m)
    try:  # the entry checks its inputs and converts lists, ints, float32 (Entry)
        status = INVERSE.call(d.ctx, plan.buf, q, v, qdd, tau, lam)
    except TypeError:
        status = BAD_INPUT
    if status == NONFINITE_INPUT or status == BAD_INPUT:
        # the ValueError that names the argument, or the call on the checked inputs
        _, q, v, qdd = _inputs(model, d, q, v, qdd, "qdd")
        status = INVERSE.call(d.ctx, plan.buf, q, v, qdd, tau, lam)
    if not status > 0.0:
        _explain(model, plan, status, "q, v or qdd")
    r = plan.rows.size
    if r < model.m:
        # minimum-norm multipliers over all rows with the same generalized force Jᵀλ
        from loopdyn.kinematics.closures import constraint_jacobian

        J = constraint_jacobian(model, q)
        lam = np.linalg.lstsq(J.T, J[plan.rows].T @ lam[:r], rcond=None)[0]
    info = plan.views["info"]
    return tau, lam, float(info[_RES2]), float(info[_B2]), float(info[_CERR])


class DenocKinematics:
    """The DeNOC kinematics of eqs. (7)–(14) at one state, as the compiled kernel left them.

    ``E`` (3,): the platform point; per leg l (lists): ``s[l]`` (m_l, 6) the unit
    joint twists A_{e,i} p_i (9b) about E in world axes, ``ptilde[l]`` (m_l, 6) and
    ``delta[l]`` (m_l,) the p̃_i and δ_i of (11c)/(12c) (zero at the actuated
    joint), ``rates[l]`` (m_l,) every joint's rate (11b)/(12b); ``Phi2`` (L, 6, 6)
    each leg's Φ_2 (13a), ``Phi`` (6, 6) their sum (14a), ``J`` (6, n) the Jacobian
    of (14b), ``te`` (6,) the platform twist J θ̇.  ``layout``: the
    :class:`DenocLayout` (``layout.ps.legs[l].columns`` names the joints).
    """

    def __init__(self, plan):
        lay = plan.layout
        views = plan.views
        self.layout = lay
        cut = [slice(int(a), int(b)) for a, b in lay.legs[:, :2]]
        self.E = views["vec"][_E, :3].copy()
        self.s = [views["s"][c].copy() for c in cut]
        self.ptilde = [views["pt"][c].copy() for c in cut]
        dinv = views["dinv"]
        self.delta = [np.divide(1.0, dinv[c], out=np.zeros(c.stop - c.start), where=dinv[c] != 0)
                      for c in cut]  # fmt: skip
        self.rates = [views["rate"][c].copy() for c in cut]
        for lg, p, dl in zip(lay.ps.legs, self.ptilde, self.delta, strict=True):
            if lg.k_column is not None:
                p[lg.k_column] = 0.0
                dl[lg.k_column] = 0.0
        self.Phi2 = np.array([self.projectors(l)[0] for l in range(lay.L)]).reshape(lay.L, 6, 6)
        self.Phi = views["Phi"].copy()
        self.J = views["JT"].T.copy()
        self.te = views["vec"][_TE].copy()

    def projectors(self, leg):
        """Φ_i of leg ``leg`` rebuilt from the kernel's p̃_i, δ_i by (11d)/(12d): an array
        (m + 1, 6, 6) whose entry i removes the unactuated twists of columns i … m-1
        (entry m: the identity Φ_{m+1}; entry 0: Φ_2 of eq. 13a)."""
        p, dl = self.ptilde[leg], self.delta[leg]
        m = p.shape[0]
        out = np.empty((m + 1, 6, 6))
        out[m] = np.eye(6)
        for i in range(m - 1, -1, -1):
            out[i] = out[i + 1] - (np.outer(p[i], p[i]) / dl[i] if dl[i] > 0.0 else 0.0)
        return out


def kinematics(model, q, v=None, data=None):
    """:class:`DenocKinematics` of ``model`` at ``q`` (and the actuated rates of ``v``)."""
    d, q, v, _ = _inputs(model, data, q, np.zeros(model.nv) if v is None else v, None, "")
    plan = plan_for(model, d)
    status = RATES.callable()(d.ctx, plan.buf, q, v)
    if not status > 0.0:
        _explain(model, plan, SINGULAR if status == 0.0 else status, "q or v")
    return DenocKinematics(plan)


def generalized_inertia_matrix(model, q, data=None):
    """The n×n GIM I = Nᵀ M N of eq. (26) in the actuated rates, by FDA-1..3 (eqs. 27–34)."""
    d, q, z, _ = _inputs(model, data, q, np.zeros(model.nv), None, "")
    plan = plan_for(model, d)
    status = ENTRY.callable()(d.ctx, plan.buf, q, z, z, np.empty(model.nv), np.empty(model.m))
    if status == SINGULAR and plan.views["info"][_WHY] in (WHY_LEG, WHY_PHI):
        _explain(model, plan, status, "q")  # (an ill-conditioned I is formed: returned)
    return plan.views["Ig"].copy()


class DenocMatrices:
    """Dense DeNOC matrices of eqs. (15)–(17) (teaching and tests; O((Σm)²) memory).

    Bodies are the leg columns in order (the body after each 1-DOF joint; the bodies
    between the axes of a universal or spherical joint are massless), all twists in
    world axes about E (so A_{i,i-1} = 1 and p_i = s_i).  With C columns and n
    actuated legs: ``Nl`` (6C, 6C) = (1 - A)⁻¹ (17b) with the blocks
    Ã_{i,i-1} = Ψ_i (16e, 15f); ``Nc`` (6C, 6n) (16c): row block i of leg l is 1
    at the actuated joint, β_i (Σ_a Ā_ek⁽ᵃ⁾ - [i < k] 1⁽ˡ⁾) otherwise, with
    β_i = s_i p̃_iᵀ/δ_i (the factor of (15a)–(15e)) and Ā_ek⁽ᵃ⁾ = Φ⁻¹ Φ_2⁽ᵃ⁾ (16e)
    (no Ā term for legs closing on the ground, whose t_e is 0); ``Nd`` (6n, n) =
    diag(s_k⁽ᵃ⁾) (16c); ``N`` = Nl Nc Nd, so that t = N θ̇ (17a) stacks the twist after
    every column.  ``M`` (6C, 6C): the bodies' mass matrices about E (the platform's
    on the last column of the first leg that reaches it).  ``Phi[l]`` (m_l + 1, 6, 6):
    the projectors of leg l as in :meth:`DenocKinematics.projectors`; ``s``, ``E``.
    """

    def __init__(self, model, q):
        from loopdyn.kinematics.frames import forward_kinematics
        from loopdyn.topology.parallel import leg_twists

        st = layout(model)
        ps = st.ps
        q = configuration(model, q)
        s, E = leg_twists(model, ps, q)
        legs = ps.legs
        C, n = st.C, ps.n
        c0 = np.cumsum([0] + [len(g.columns) for g in legs])
        self.s, self.E = s, E
        # projections (10)–(12), in numpy
        self.Phi, pt, dl = [], [], []
        Phi2 = []
        for g, S in zip(legs, s, strict=True):
            m = len(g.columns)
            P = np.empty((m + 1, 6, 6))
            P[m] = np.eye(6)
            p = np.zeros((m, 6))
            dd = np.zeros(m)
            for i in range(m - 1, -1, -1):
                if i == g.k_column:
                    P[i] = P[i + 1]
                    continue
                p[i] = P[i + 1] @ S[i]
                dd[i] = p[i] @ p[i]
                P[i] = P[i + 1] - np.outer(p[i], p[i]) / dd[i]
            self.Phi.append(P)
            pt.append(p)
            dl.append(dd)
            Phi2.append(P[0])
        Phi = sum((P2 for g, P2 in zip(legs, Phi2, strict=True) if not g.closes_on_base),
                  np.zeros((6, 6)))  # fmt: skip
        Abar = [
            np.linalg.solve(Phi, P2) if not g.closes_on_base else np.zeros((6, 6))
            for g, P2 in zip(legs, Phi2, strict=True)
        ]
        A = np.zeros((6 * C, 6 * C))
        Nc = np.zeros((6 * C, 6 * n))
        Nd = np.zeros((6 * n, n))
        for l, g in enumerate(legs):
            k = g.k_column
            if k is not None:
                Nd[6 * l : 6 * l + 6, l] = s[l][k]
            for i in range(len(g.columns)):
                r = 6 * (c0[l] + i)
                if i == k:
                    Nc[r : r + 6, 6 * l : 6 * l + 6] = np.eye(6)
                    Psi = np.eye(6)
                else:
                    beta = np.outer(s[l][i], pt[l][i]) / dl[l][i]
                    for a in range(n):
                        Nc[r : r + 6, 6 * a : 6 * a + 6] = beta @ Abar[a]
                    if k is not None and i < k:
                        Nc[r : r + 6, 6 * l : 6 * l + 6] -= beta
                    Psi = np.eye(6) - beta
                if i > 0:
                    A[r : r + 6, r - 6 : r] = Psi
        self.Nl = np.linalg.inv(np.eye(6 * C) - A)
        self.Nc, self.Nd = Nc, Nd
        self.N = self.Nl @ Nc @ Nd
        # mass matrices about E, world axes
        d = forward_kinematics(model, q, data=model.create_data())
        M = np.zeros((6 * C, 6 * C))
        first_platform_leg = next((l for l, g in enumerate(legs) if not g.closes_on_base), None)
        for b in range(model.nbodies):
            sl = int(ps.body_slot[b])
            if sl == ON_BASE:
                continue
            if sl == ON_PLATFORM:
                col = c0[first_platform_leg] + len(legs[first_platform_leg].columns) - 1
            else:
                col = int(np.flatnonzero(st.slot_after == sl)[0])
            R, o = d.Xw[b, :3], d.Xw[b, 3]
            X = np.zeros((6, 6))  # motion transform from E (world axes) to the body frame
            X[:3, :3] = R.T
            X[3:, 3:] = R.T
            X[3:, :3] = -R.T @ _skew(o - E)
            M[6 * col : 6 * col + 6, 6 * col : 6 * col + 6] += X.T @ model.inertia[b] @ X
        self.M = M


def _skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def denoc_matrices(model, q):
    """The dense DeNOC matrices N_l, N_c, N_d (eqs. 15–17) at ``q``: :class:`DenocMatrices`."""
    return DenocMatrices(model, q)
