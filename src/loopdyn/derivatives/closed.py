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

Every non-coupling row has a world "row wrench" ξ_r (6, about the world origin) with
Φ̇_r = ξ_rᵀ (V_b - V_a) (V: world spatial velocities), so

    Φ̈_r = ξ_rᵀ (A_b - A_a) + ξ̇_rᵀ (V_b - V_a)                                    (D3)

and its derivatives follow from those of ξ, ξ̇ and of the body motions
(``tree.world_tangents``).  Translation row (u fixed in frame A, p_B frame B's origin):
ξ = [p_B × u; u].  Dot-product row Φ = u_A·w_B: ξ = [w × u; 0].

Row forms.  Off the constraint manifold (a q perturbation at fixed v is not a
consistent state) ∂Φ̈/∂q depends on the form of the residual: for Φ1 = T(q) Φ2,
Φ̈1 = T Φ̈2 + 2 Ṫ Φ̇2 + T̈ Φ2, so each row is differentiated in its own form.  The
hinge's swing Φ = h(c) g (``ROT_HINGE``: g = b_A·a_B or c_A·a_B, c = a_A·a_B) and the
log map Φ = e·log(R_Aᵀ R_B) = h(c) g (``ROT_LOG``: g = e·vee(R - Rᵀ)/2
= ½ Σ_i (e × i_A)·i_B, c = (tr R - 1)/2 = ½ Σ_i i_A·i_B - ½) are h = θ/sin θ of a
dot-product quantity c = cos θ times a dot-product form: (D5), (D6) of
``_rotation_row`` chain the dot products' tangents through h and its first three
derivatives (exact at any state, on or off the manifold, for every closure; a
half-turn, where h and the rows' Jacobian are undefined, is a ``SingularityError``).
Translation, dot-product and coupling rows are their own forms.

Compiled (numba): one entry, ``derivatives_entry``, runs the kinematics, the mass
matrix, the tangent recursions of ``loopdyn.derivatives.tree``, the rows' tangents
(``row_tangents``) and the KKT solve (``kkt_solve``: LU with partial pivoting of the
scaled matrix, all 3 nv right-hand sides at once, ``linalg.lu_solve_rows``) on a
Data of the model (its dense blocks) and the derivatives' own workspace buffer,
without allocation; a status says when it stopped (singular KKT matrix, a rotation
row at a half-turn), and only a finished call's numbers are returned.
"""

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, types

from loopdyn.derivatives.tree import (
    add6,
    allocate_workspace,
    dot6,
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
from loopdyn.kinematics.closures import (
    FLIP_SIN,
    _horner,
    _swing_scale,
    constraint_kernel,
    evaluate,
)
from loopdyn.methods.augmented import augmented_kernel, kkt_norm
from loopdyn.methods.dynamics import forward_dynamics
from loopdyn.model.closures import COUPLING, ROT_DOT, ROT_HINGE, ROT_LOG, TRANSLATION
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
# h'''(c) of ``_swing_derivatives``: Taylor coefficients in t = θ² (sympy, highest
# first; truncation below 1e-16 relative at θ = 0.2)
_HPPP = (
    -183251335936 / 33737606008981875,
    -9832699264 / 322279795963125,
    -2571298304 / 15880453714125,
    -1156352 / 1442235375,
    -1197824 / 328930875,
    -70016 / 4729725,
    -35072 / 675675,
    -512 / 3465,
    -32 / 105,
    -12 / 35,
)


# ---------------------------------------------------------------- compiled kernels
@njit(cache=True, inline="always")
def cr3(a, b):
    """a × b of the first three entries of a and b (array rows or tuples)."""
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


@njit(cache=True, inline="always")
def _axis(j, e0, e1, e2):
    """(e × i_j, i_j): the j-th term u, w of a log row of axis e (module doc)."""
    if j == 0:
        return (0.0, e2, -e1), (1.0, 0.0, 0.0)
    if j == 1:
        return (-e2, 0.0, e0), (0.0, 1.0, 0.0)
    return (e1, -e0, 0.0), (0.0, 0.0, 1.0)


@njit(cache=True, inline="always")
def _velp(y, p):
    """The velocity at point p of the twist y (world): y_v + y_ω × p; for a translation
    row's wrench ξ = [p × u; u], ξ·y = u·_velp(y, p)."""
    x = cr3(y, p)
    return (y[3] + x[0], y[4] + x[1], y[5] + x[2])


@njit(cache=True, inline="always")
def _dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True, inline="always")
def _sum3(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True, inline="always")
def _dif6(x, y):
    return (x[0] - y[0], x[1] - y[1], x[2] - y[2], x[3] - y[3], x[4] - y[4], x[5] - y[5])


@njit(cache=True)
def _mark_directions(w, ga, gb, n):
    """``w.mark[dd]``: bit 1 if direction dd moves body ga, bit 2 if it moves gb (the
    directions of each body's supporting coordinates ``w.sup``; the ground is index nb
    and has none); 0 for a direction that moves neither."""
    mark, sup = w.mark, w.sup
    for dd in range(n):
        mark[dd] = 0
    for kk in range(w.nsup[ga]):
        mark[sup[ga, kk]] |= 1
    for kk in range(w.nsup[gb]):
        mark[sup[gb, kk]] |= 2


@njit(cache=True)
def _translation_group(m, d, w, mu, B, t0, g):
    """``row_tangents`` for the g (<= 3) consecutive kept translation rows t0.. of one
    closure (a ball's three, a weld's or prismatic's translation rows), sharing the work.

    Row j is Φ̇_j = ξ_jᵀ ΔV, ξ_j = [p_B × u_j; u_j], u_j = R_A u0_j: every term of (D3)
    and of its derivatives in ``row_tangents`` is linear in u_j and in the vectors u̇_j =
    ω_a × u_j, ∂u_j = η_a × u_j, ∂_q u̇_j, ∂_v u̇_j made from it, so with the identities
    (x × u)·c = u·(c × x) and ξ·y = u·(y_v + y_ω × p_B) each output is u_j·g for one
    3-vector g per closure and direction (ΔV = V_b - V_a, ΔA, and ω_a = V_a[:3]):

        J_j       = u·vp(Δη)
        ∂(Jv)/∂q  = u·(ΔV_ω × ∂p + vp(ΔV) × η_a,ω + vp(Δ∂_qV))
        ∂Φ̈/∂v    = u·(vp(Δ∂_vA) + ΔV_ω × ∂_v ṗ + vp(ΔV) × ∂_vV_a,ω
                       + Δ∂_vV_ω × ṗ + vp(Δ∂_vV) × ω_a)
        ∂Φ̈/∂q    = u·(ΔA_ω × ∂p + vp(ΔA) × η_a,ω + vp(Δ∂_qA) + ΔV_ω × ∂_q ṗ
                       + (ΔV_ω × ṗ) × η_a,ω + (ΔV_ω × ∂p) × ω_a + vp(ΔV) × ∂_qV_a,ω
                       + (vp(ΔV) × ω_a) × η_a,ω + Δ∂_qV_ω × ṗ + vp(Δ∂_qV) × ω_a)

    (vp(y) = y_v + y_ω × p_B, p = p_B, ṗ = v_b + ω_b × p_B and its tangents ∂p, ∂_q ṗ,
    ∂_v ṗ; Δ of a tangent: body b's minus body a's); the rows' forces are linear in u
    too: Σ_j μ_j ξ_j = ξ(Σ_j μ_j u_j)."""
    nb, n = m.nb, m.nv
    V, A, eta, dVq, dAq, dVv, dAv = w.V, w.A, w.eta, w.dVq, w.dAq, w.dVv, w.dAv
    mark, trm = w.mark, w.trm
    k = m.row_int[d.rows[t0], 0]
    a, b = m.cl_body[k, 0], m.cl_body[k, 1]
    ga = nb if a < 0 else a
    gb = nb if b < 0 else b
    RA, pB = d.cw[k, 0:3], d.cw[k, 7]
    wa, wb = V[ga], V[gb]
    um0, um1, um2 = 0.0, 0.0, 0.0
    for j in range(g):
        t = t0 + j
        u0 = m.row_vec[d.rows[t], 0]
        for x in range(3):
            trm[j, 0, x] = RA[x, 0] * u0[0] + RA[x, 1] * u0[1] + RA[x, 2] * u0[2]
        um0 += mu[t] * trm[j, 0, 0]
        um1 += mu[t] * trm[j, 0, 1]
        um2 += mu[t] * trm[j, 0, 2]
        for dd in range(n):
            B[n + t, dd] = 0.0
            B[n + t, n + dd] = 0.0
            w.hq[t, dd] = 0.0
            w.Jk[t, dd] = 0.0
    um = (um0, um1, um2)
    pd = _velp(wb, pB)  # ṗ_B = v_b + ω_b × p_B
    dV = _dif6(V[gb], V[ga])
    dA = _dif6(A[gb], A[ga])
    c0 = _velp(dV, pB)
    cA = _velp(dA, pB)
    _mark_directions(w, ga, gb, n)
    for dd in range(n):
        if mark[dd] == 0:
            continue
        ta = ga if mark[dd] & 1 else nb
        tb = gb if mark[dd] & 2 else nb
        ea, eb = eta[ta, dd], eta[tb, dd]
        Qa, Pa = dVq[ta, dd], dVv[ta, dd]
        # the point's tangents ∂p, ∂_q ṗ, ∂_v ṗ
        dp = _velp(eb, pB)
        dpdq = _sum3(_velp(dVq[tb, dd], pB), cr3(wb, dp))
        dpdv = _velp(dVv[tb, dd], pB)
        dVqr = _dif6(dVq[tb, dd], Qa)
        dVvr = _dif6(dVv[tb, dd], Pa)
        vq = _velp(dVqr, pB)
        vv = _velp(dVvr, pB)
        gJ = _velp(_dif6(eb, ea), pB)
        gh = _sum3(_sum3(cr3(dV, dp), cr3(c0, ea)), vq)
        gv = _sum3(
            _sum3(_velp(_dif6(dAv[tb, dd], dAv[ta, dd]), pB), cr3(dV, dpdv)),
            _sum3(_sum3(cr3(c0, Pa), cr3(dVvr, pd)), cr3(vv, wa)),
        )
        x1 = _sum3(_sum3(cr3(dA, dp), cr3(cA, ea)), _velp(_dif6(dAq[tb, dd], dAq[ta, dd]), pB))
        x2 = _sum3(_sum3(cr3(dV, dpdq), cr3(cr3(dV, pd), ea)), cr3(cr3(dV, dp), wa))
        x3 = _sum3(_sum3(cr3(c0, Qa), cr3(cr3(c0, wa), ea)), _sum3(cr3(dVqr, pd), cr3(vq, wa)))
        gq = _sum3(_sum3(x1, x2), x3)
        for j in range(g):
            u = trm[j, 0]
            t = t0 + j
            B[n + t, dd] = _dot3(u, gq)
            B[n + t, n + dd] = _dot3(u, gv)
            w.hq[t, dd] = _dot3(u, gh)
            w.Jk[t, dd] = _dot3(u, gJ)
        # ∂ξ(u_μ)/∂q = [∂p × u_μ + p_B × ∂u_μ; ∂u_μ], ∂u_μ = η_a,ω × u_μ
        du = cr3(ea, um)
        y = _sum3(cr3(dp, um), cr3(pB, du))
        dxi = (y[0], y[1], y[2], du[0], du[1], du[2])
        if b >= 0:
            add6(w.dFq[b, dd], -1.0, dxi)
        if a >= 0:
            add6(w.dFq[a, dd], 1.0, dxi)
    y = cr3(pB, um)
    xi = (y[0], y[1], y[2], um[0], um[1], um[2])
    if b >= 0:
        add6(w.F[b], -1.0, xi)
    if a >= 0:
        add6(w.F[a], 1.0, xi)


@njit(cache=True)
def _dot_quantity(m, d, w, row, k, ga, gb, which, xi, xid, J, H, Q, V, X):
    """A dot-product quantity x = x0 + s Σ_j u_j·w_j (u_j = R_A u0_j, w_j = R_B w0_j) of
    closure k and its tangents (D3): ξ, ξ̇ into ``xi``, ``xid`` (ξ = s Σ_j [w_j × u_j; 0],
    ẋ = ξᵀ ΔV); for every direction dd, J[dd] = ∂x/∂q, H[dd] = ∂ẋ/∂q (fixed v),
    Q[dd] = ∂ẍ/∂q (fixed v, q̈), V[dd] = ∂ẍ/∂v and X[dd] = ∂ξ/∂q (0 where the direction
    moves neither body).  ``which``: 0 the row's own dot products (one, u_A·w_B; three
    for a ``ROT_LOG`` row, g = e·vee(R - Rᵀ)/2 = ½ Σ_i (e × i_A)·i_B); 1 a hinge's
    c = cos θ = a_A·a_B (a = the row's w); 2 a log row's c = cos θ = (tr R - 1)/2
    = ½ Σ_i i_A·i_B - ½ (R = R_Aᵀ R_B).  Returns (x, ẋ, ẍ)."""
    nb, n = m.nb, m.nv
    Vw, Aw, eta, dVq, dAq, dVv, dAv = w.V, w.A, w.eta, w.dVq, w.dAq, w.dVv, w.dAv
    mark, trm = w.mark, w.trm
    dxq, dxv = w.ds[1], w.ds[2]
    RA, RB = d.cw[k, 0:3], d.cw[k, 4:7]
    wa, wb = Vw[ga], Vw[gb]
    u0, w0 = m.row_vec[row, 0], m.row_vec[row, 1]
    e0, e1, e2 = cr3(w0, u0)  # a log row's axis e = w × u
    nt, s, x = 1, 1.0, 0.0
    if which == 2 or (which == 0 and m.row_int[row, 2] == ROT_LOG):
        nt, s = 3, 0.5
    if which == 2:
        x = -0.5
    for r in range(6):
        xi[r] = 0.0
        xid[r] = 0.0
    for j in range(nt):
        if which == 1:
            p, c = (w0[0], w0[1], w0[2]), (w0[0], w0[1], w0[2])
        elif nt == 1:
            p, c = (u0[0], u0[1], u0[2]), (w0[0], w0[1], w0[2])
        else:
            p, c = _axis(j, e0, e1, e2)
            if which == 2:
                p = c
        t = trm[j]
        for r in range(3):
            t[0, r] = RA[r, 0] * p[0] + RA[r, 1] * p[1] + RA[r, 2] * p[2]  # u = R_A u0
            t[2, r] = RB[r, 0] * c[0] + RB[r, 1] * c[1] + RB[r, 2] * c[2]  # w = R_B w0
        ud = cr3(wa, t[0])
        wd = cr3(wb, t[2])
        for r in range(3):
            t[1, r] = ud[r]
            t[3, r] = wd[r]
        x += s * _dot3(t[0], t[2])
        # ξ = s [w × u; 0], ξ̇ = s [ẇ × u + w × u̇; 0]
        a1 = cr3(t[2], t[0])
        a2 = cr3(wd, t[0])
        a3 = cr3(t[2], ud)
        for r in range(3):
            xi[r] += s * a1[r]
            xid[r] += s * (a2[r] + a3[r])
    dV = _dif6(Vw[gb], Vw[ga])
    dA = _dif6(Aw[gb], Aw[ga])
    xd = dot6(xi, dV)
    xdd = dot6(xi, dA) + dot6(xid, dV)
    _mark_directions(w, ga, gb, n)
    for dd in range(n):
        for r in range(6):
            X[dd, r] = 0.0
        if mark[dd] == 0:
            J[dd] = 0.0
            H[dd] = 0.0
            Q[dd] = 0.0
            V[dd] = 0.0
            continue
        ta = ga if mark[dd] & 1 else nb
        tb = gb if mark[dd] & 2 else nb
        ea, eb = eta[ta, dd], eta[tb, dd]
        for r in range(6):
            dxq[r] = 0.0
            dxv[r] = 0.0
        for j in range(nt):
            tm = trm[j]
            u, ud, wv, wd = tm[0], tm[1], tm[2], tm[3]
            du = cr3(ea, u)
            dudq = _sum3(cr3(dVq[ta, dd], u), cr3(wa, du))
            dudv = cr3(dVv[ta, dd], u)
            dw = cr3(eb, wv)
            dwdq = _sum3(cr3(dVq[tb, dd], wv), cr3(wb, dw))
            dwdv = cr3(dVv[tb, dd], wv)
            y = _sum3(cr3(dw, u), cr3(wv, du))
            z = _sum3(_sum3(cr3(dwdq, u), cr3(wd, du)), _sum3(cr3(dw, ud), cr3(wv, dudq)))
            z2 = _sum3(cr3(dwdv, u), cr3(wv, dudv))
            for r in range(3):
                X[dd, r] += s * y[r]
                dxq[r] += s * z[r]
                dxv[r] += s * z2[r]
        dxi = X[dd]
        # (D3): ẍ = ξᵀ ΔA + ξ̇ᵀ ΔV differentiated; J = ξᵀ Δη; ∂ẋ/∂q = ∂(ξᵀ ΔV)/∂q
        Q[dd] = (
            dot6(dxi, dA)
            + (dot6(dAq[tb, dd], xi) - dot6(dAq[ta, dd], xi))
            + dot6(dxq, dV)
            + (dot6(dVq[tb, dd], xid) - dot6(dVq[ta, dd], xid))
        )
        V[dd] = (
            (dot6(dAv[tb, dd], xi) - dot6(dAv[ta, dd], xi))
            + dot6(dxv, dV)
            + (dot6(dVv[tb, dd], xid) - dot6(dVv[ta, dd], xid))
        )
        H[dd] = dot6(dxi, dV) + (dot6(dVq[tb, dd], xi) - dot6(dVq[ta, dd], xi))
        J[dd] = dot6(eb, xi) - dot6(ea, xi)
    return x, xd, xdd


@njit(cache=True)
def _swing_derivatives(rho, c):
    """h(c) = θ/sin θ (c = cos θ, ρ = sin θ >= 0) and its derivatives h', h'', h''' in c:
    ``kinematics.closures._swing_scale``'s h, h', h'' and h''' = (5 c h'' + 4 h')/ρ²
    (ρ² h' = h c - 1 differentiated twice more), its series in θ² below 0.2 rad."""
    h, hp, hpp = _swing_scale(rho, c)
    th = np.arctan2(rho, c)
    if th < 0.2:
        return h, hp, hpp, _horner(_HPPP, th * th)
    return h, hp, hpp, (5.0 * c * hpp + 4.0 * hp) / (rho * rho)


@njit(cache=True, inline="always")
def _rotate(R, p):
    """R p of a 3 × 3 block R (array rows) and a 3-vector p."""
    return (
        R[0, 0] * p[0] + R[0, 1] * p[1] + R[0, 2] * p[2],
        R[1, 0] * p[0] + R[1, 1] * p[1] + R[1, 2] * p[2],
        R[2, 0] * p[0] + R[2, 1] * p[1] + R[2, 2] * p[2],
    )


@njit(cache=True)
def _rotation_row(m, d, w, mu, B, t, row, k, ga, gb):
    """``row_tangents`` for rotation row t (``ROT_DOT``, ``ROT_HINGE``, ``ROT_LOG``),
    exact at any state.  A ``ROT_DOT`` row is its dot product g; the swing and log rows
    are Φ = h(c) g with h = θ/sin θ of the angle θ between the hinge's axes (c = a_A·a_B)
    or between the frames (c = (tr R - 1)/2), g their dot-product forms (``_dot_quantity``;
    module doc):

        Φ̇ = h' ċ g + h ġ,   Φ̈ = h'' ċ² g + h' c̈ g + 2 h' ċ ġ + h g̈                 (D5)

    and with J_x = ∂x/∂q, H_x = ∂ẋ/∂q, Q_x = ∂ẍ/∂q, V_x = ∂ẍ/∂v of x = c, g (∂ẋ/∂v = J_x,
    ∂h⁽ʲ⁾/∂q = h⁽ʲ⁺¹⁾ J_c):

        J     = h' g J_c + h J_g
        ∂Φ̇/∂q = h'' ċ g J_c + h' (g H_c + ċ J_g + ġ J_c) + h H_g
        ∂Φ̈/∂q = (h⁽³⁾ ċ² g + h'' c̈ g + 2 h'' ċ ġ + h' g̈) J_c + h'' (2 ċ g H_c + ċ² J_g)
                + h' (g Q_c + c̈ J_g + 2 ġ H_c + 2 ċ H_g) + h Q_g
        ∂Φ̈/∂v = (2 h'' ċ g + 2 h' ġ) J_c + h' (g V_c + 2 ċ J_g) + h V_g             (D6)

    the row's wrench ξ = h' g ξ_c + h ξ_g and ∂ξ/∂q = (h'' g J_c + h' J_g) ξ_c
    + h' g ∂ξ_c + h' J_c ξ_g + h ∂ξ_g.  Returns False where the swing or the relative
    rotation is a half-turn to within ``FLIP_SIN`` (there h and the rows' Jacobian
    are undefined), True otherwise."""
    n = m.nv
    a, b = m.cl_body[k, 0], m.cl_body[k, 1]
    xi, xid = w.W[0], w.W[1]
    Jg, Hg, Qg, Vg, Xg = w.Jk[t], w.hq[t], B[n + t, :n], B[n + t, n : 2 * n], w.rx[0]
    g, gd, gdd = _dot_quantity(m, d, w, row, k, ga, gb, 0, xi, xid, Jg, Hg, Qg, Vg, Xg)
    form = m.row_int[row, 2]
    if form != ROT_DOT:
        which = 1 if form == ROT_HINGE else 2
        xc, rq, Xc = w.W[2], w.rq, w.rx[1]
        c, cd, cdd = _dot_quantity(
            m, d, w, row, k, ga, gb, which, xc, w.W[3], rq[0], rq[1], rq[2], rq[3], Xc
        )
        # ρ = sin θ: |a_A × a_B| (hinge), |vee(R - Rᵀ)/2| = |½ Σ_i i_A × i_B| (log)
        RA, RB = d.cw[k, 0:3], d.cw[k, 4:7]
        if which == 1:
            w0 = m.row_vec[row, 1]
            x = cr3(_rotate(RA, w0), _rotate(RB, w0))
        else:
            x = (0.0, 0.0, 0.0)
            for i in range(3):
                x = _sum3(x, cr3((RA[0, i], RA[1, i], RA[2, i]), (RB[0, i], RB[1, i], RB[2, i])))
            x = (0.5 * x[0], 0.5 * x[1], 0.5 * x[2])
        rho = math.sqrt(_dot3(x, x))
        if c < 0.0 and rho < FLIP_SIN:
            return False
        h0, h1, h2, h3 = _swing_derivatives(rho, c)
        kc = h3 * cd * cd * g + h2 * cdd * g + 2.0 * h2 * cd * gd + h1 * gdd
        for dd in range(n):
            if w.mark[dd] == 0:
                continue
            jc, hc, qc, vc = rq[0, dd], rq[1, dd], rq[2, dd], rq[3, dd]
            jg, hg, qg, vg = Jg[dd], Hg[dd], Qg[dd], Vg[dd]
            Jg[dd] = h1 * g * jc + h0 * jg
            Hg[dd] = h2 * cd * g * jc + h1 * (g * hc + cd * jg + gd * jc) + h0 * hg
            Qg[dd] = (
                kc * jc
                + h2 * (2.0 * cd * g * hc + cd * cd * jg)
                + h1 * (g * qc + cdd * jg + 2.0 * gd * hc + 2.0 * cd * hg)
                + h0 * qg
            )
            Vg[dd] = (2.0 * h2 * cd * g + 2.0 * h1 * gd) * jc + h1 * (g * vc + 2.0 * cd * jg)
            Vg[dd] += h0 * vg
            f1, f2, f3 = h2 * g * jc + h1 * jg, h1 * g, h1 * jc
            for r in range(6):
                Xg[dd, r] = f1 * xc[r] + f2 * Xc[dd, r] + f3 * xi[r] + h0 * Xg[dd, r]
        for r in range(6):
            xi[r] = h1 * g * xc[r] + h0 * xi[r]
    mt = mu[t]
    for dd in range(n):
        if w.mark[dd] == 0:
            continue
        if b >= 0:
            add6(w.dFq[b, dd], -mt, Xg[dd])
        if a >= 0:
            add6(w.dFq[a, dd], mt, Xg[dd])
    if b >= 0:
        add6(w.F[b], -mt, xi)
    if a >= 0:
        add6(w.F[a], mt, xi)
    return True


@njit(cache=True)
def row_tangents(m, d, w, mu, B):
    """For the kept rows t (``d.rows[:r]``), from ``world_tangents``: ``w.Jk[t]`` (J's
    row), B[n + t, :n] = ∂Φ̈/∂q and B[n + t, n:2n] = ∂Φ̈/∂v at fixed (v, q̈) by (D3),
    ``w.hq[t]`` = ∂(J v)/∂q at fixed v; the rows' forces μ as world wrenches
    ξ μ on body b (-ξ μ on a) subtracted from ``w.F`` and their q-derivatives at fixed
    μ from ``w.dFq`` (a coupling row's force is a constant joint force: none).  Returns
    False where a rotation row has no derivative (``_rotation_row``)."""
    nb, n, r = m.nb, m.nv, d.nrows
    t = -1
    while t + 1 < r:
        t += 1
        row = d.rows[t]
        k, kind = m.row_int[row, 0], m.row_int[row, 1]
        if kind == TRANSLATION:
            # a closure's consecutive translation rows together (``_translation_group``)
            g = 1
            while g < 3 and t + g < r:
                nxt = d.rows[t + g]
                if m.row_int[nxt, 0] != k or m.row_int[nxt, 1] != TRANSLATION:
                    break
                g += 1
            _translation_group(m, d, w, mu, B, t, g)
            t += g - 1
            continue
        if kind == COUPLING:
            for dd in range(n):
                B[n + t, dd] = 0.0
                B[n + t, n + dd] = 0.0
                w.hq[t, dd] = 0.0
                w.Jk[t, dd] = 0.0
            w.Jk[t, m.row_int[row, 3]] += 1.0
            w.Jk[t, m.row_int[row, 2]] -= m.row_vec[row, 0, 0]
            continue
        a, b = m.cl_body[k, 0], m.cl_body[k, 1]
        ga = nb if a < 0 else a
        gb = nb if b < 0 else b
        if not _rotation_row(m, d, w, mu, B, t, row, k, ga, gb):
            return False
    return True


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
    0..j only."""
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
    in ``d.K`` serve where they are in-order factors (``_augmented_factors``): K' [x; y]
    = [b1; S b2] gives x = ∂q̈ and μ = -S y (K' is the KKT matrix with the multipliers'
    columns scaled by -S), so the matrix is not built nor factored again."""
    n, r = m.nv, d.nrows
    k = n + r
    nc = B.shape[1]
    for i in range(k):
        for c in range(2 * n):
            B[i, c] = -B[i, c]
        for c in range(n):
            B[i, 2 * n + c] = 1.0 if i == c else 0.0
    if reuse:
        rc = _augmented_factors(m, d, w)
        if rc > KKT_RCOND:
            w.diag[2] = rc
            for t in range(r):
                for c in range(nc):
                    B[n + t, c] *= w.sc[t]
            _solve(d.K, k, n, d.piv, B)
            for t in range(r):
                for c in range(nc):
                    B[n + t, c] *= -w.sc[t]
            for i in range(k):
                if not all_finite(B[i]):
                    return NONFINITE_OUTPUT
            return rc
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
    w.diag[2] = rc
    if not rc > KKT_RCOND:
        return SINGULAR
    for t in range(r):
        for c in range(nc):
            B[n + t, c] *= w.sc[t]
    _solve(w.K, k, n, w.piv, B)
    for t in range(r):
        for c in range(nc):
            B[n + t, c] *= w.sc[t]
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
        if out is None:
            # the fast path's default call, inline (``_fast``): three arrays, one entry
            # call, the result: its matrices views of B made when read (``_Block``)
            qdd, lam, B = _empty(wk.n), _empty(wk.m), _empty(wk.shape)
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
                res = _new(ForwardDynamicsDerivatives)
                res.__dict__ = {
                    "qdd": qdd, "lam": lam, "rows": wk.all_rows, "mu": lam,
                    "_buf": (qdd, lam, B),
                }  # fmt: skip
                if tangent:
                    _project(model, q, res, wk, True)
                return res
        else:
            res = _fast(model, wk, q, v, tau, tangent, out)
            if res is not None:
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


def _fast(model, wk, q, v, tau, tangent, out):
    """``forward_dynamics_derivatives(..., out=out)`` in one compiled call
    (``AUGMENTED_SOLVE``, every row kept) into the buffers of ``out`` (a result of this
    path), or None where ``out`` has none or the entry refuses the inputs or the state
    (the checked path then answers or explains)."""
    buf = out._buf
    if buf is None or buf[2].shape != wk.shape:
        return None
    qdd, lam, B = buf
    if wk.rows is not wk.all_rows:
        wk.use(wk.all_rows)
    try:
        st = wk.entry(
            wk.ctx, wk.buf, q, v, wk.zeros if tau is None else tau, qdd, lam,
            AUGMENTED_SOLVE, B,
        )  # fmt: skip
    except TypeError:
        return None
    if not st > 0.0:
        return None
    out.rows, out.mu, out.method = wk.all_rows, lam, "augmented"
    if tangent:
        _project(model, q, out, wk, True)
    else:  # nothing of an earlier call's projection stays on out
        out.independent = out.dependent = out.G = out.dqdd_dy = out.dqdd_dydot = None
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
