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
Φ̈1 = T Φ̈2 + 2 Ṫ Φ̇2 + T̈ Φ2, and at a consistent state (Φ2 = Φ̇2 = 0, Φ̈2 = 0 at the
solution) ∂Φ̈1/∂q = T ∂Φ̈2/∂q + 2 Ṫ ∂Φ̇2/∂q + T̈ J2: the forms give the same
derivatives iff Ṫ = T̈ = 0 there.  The hinge's swing Φ = h(c) g (h = θ/sin θ,
``ROT_HINGE``) and the log map Φ = e·log(R_Aᵀ R_B) (``ROT_LOG``, on closures that lock
the relative rotation: φ = 0) are T(θ²) times dot-product forms, and θ² is stationary
to second order on the manifold (θ = θ̇ = 0), so their derivatives at a consistent
state are exactly those of the dot-product rows (the hinge's b_A·a_B, c_A·a_B; the log
row's e·vee(R - Rᵀ)/2 = ½ Σ_i (e × i_A)·i_B): that is what is used for them, and such a
state is required (``AssemblyError`` otherwise).  A ``ROT_LOG`` row of a closure that
leaves the relative rotation free (a generic closure with one rotation axis in 3D:
there θ̇ ≠ 0 and T̈ = -θ̇²/3 ≠ 0) is refused with a ``ModelError``.  Translation,
dot-product and coupling rows are differentiated exactly at any state.

Compiled (numba): one entry, ``derivatives_entry``, runs the kinematics, the mass
matrix, the tangent recursions of ``loopdyn.derivatives.tree``, the rows' tangents
(``row_tangents``) and the KKT solve (``kkt_solve``: LU with partial pivoting of the
scaled matrix, all 3 nv right-hand sides at once, ``linalg.lu_solve_rows``) on a
Data of the model (its dense blocks) and the derivatives' own workspace buffer,
without allocation; a status says when it stopped (singular KKT matrix, a state off
the manifold), and only a finished call's numbers are returned.
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
from loopdyn.errors import AssemblyError, ModelError, SingularityError
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
from loopdyn.model.closures import COUPLING, ROT_DOT, ROT_LOG, TRANSLATION
from loopdyn.tree.crba import crba_from_poses
from loopdyn.validation import configuration, model_arg, vector

# a state is on the manifold for the hinge / log rows' derivatives (module doc) when
# |Φ| <= MANIFOLD_TOL · max(1, model size) and |J v| <= MANIFOLD_TOL · |J| max(|v|, 1):
# the rows' dropped terms are O(|Φ|, |Φ̇|), i.e. relative errors of that order
MANIFOLD_TOL = 1e-7
# 1 / (estimated condition of the KKT matrix) below which (D2) is singular
KKT_RCOND = 1e-14
# the spread of the in-order elimination's pivots (``kkt_solve``) beyond which it is
# done again with partial pivoting
NOPIV_RATIO = 1e-10
# statuses of derivatives_entry besides kernels.checks' STATE_* (> 0: 1 / cond, done)
SINGULAR = -1.0
NONFINITE_OUTPUT = -2.0
OFF_MANIFOLD = -6.0
FD_FAILED = -7.0


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


@njit(cache=True)
def _row_terms(m, d, w, row, k, ga, gb):
    """The world vectors of row ``row``'s terms into ``w.trm[j]`` (u, u̇, w, ẇ, ṗ_B) and
    its wrench ξ and ξ̇ into ``w.W[0]``, ``w.W[1]``; returns (number of terms, their
    scale s, translation?).  A translation row is one term (u; p_B), a dot-product row
    (``ROT_DOT``, ``ROT_HINGE``) one s u_A·w_B, a ``ROT_LOG`` row three (module doc)."""
    kind, form = m.row_int[row, 1], m.row_int[row, 2]
    RA, RB, pB = d.cw[k, 0:3], d.cw[k, 4:7], d.cw[k, 7]
    V, trm, xi, xid = w.V, w.trm, w.W[0], w.W[1]
    wa, wb = V[ga], V[gb]
    is_t = kind == TRANSLATION
    u0, w0 = m.row_vec[row, 0], m.row_vec[row, 1]
    nt, s = 1, 1.0
    e0, e1, e2 = cr3(w0, u0)  # a log row's axis e = w × u
    if not is_t and form == ROT_LOG:
        nt, s = 3, 0.5
    for r in range(6):
        xi[r] = 0.0
        xid[r] = 0.0
    for j in range(nt):
        if nt == 3:
            a, b = _axis(j, e0, e1, e2)
        else:
            a, b = (u0[0], u0[1], u0[2]), (w0[0], w0[1], w0[2])
        t = trm[j]
        for r in range(3):
            t[0, r] = RA[r, 0] * a[0] + RA[r, 1] * a[1] + RA[r, 2] * a[2]  # u = R_A u0
            t[2, r] = RB[r, 0] * b[0] + RB[r, 1] * b[1] + RB[r, 2] * b[2]  # w = R_B w0
        ud = cr3(wa, t[0])
        wd = cr3(wb, t[2])
        for r in range(3):
            t[1, r] = ud[r]
            t[3, r] = wd[r]
        if is_t:
            # ξ = [p_B × u; u], ξ̇ = [ṗ_B × u + p_B × u̇; u̇], ṗ_B = v_b + ω_b × p_B
            x = cr3(wb, pB)
            for r in range(3):
                t[4, r] = wb[3 + r] + x[r]
            pu = cr3(pB, t[0])
            a1 = cr3(t[4], t[0])
            a2 = cr3(pB, ud)
            for r in range(3):
                xi[r] += pu[r]
                xi[3 + r] += t[0, r]
                xid[r] += a1[r] + a2[r]
                xid[3 + r] += ud[r]
        else:
            # ξ = s [w × u; 0], ξ̇ = s [ẇ × u + w × u̇; 0]
            a1 = cr3(t[2], t[0])
            a2 = cr3(wd, t[0])
            a3 = cr3(t[2], ud)
            for r in range(3):
                xi[r] += s * a1[r]
                xid[r] += s * (a2[r] + a3[r])
    return nt, s, is_t


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
def row_tangents(m, d, w, mu, B):
    """For the kept rows t (``d.rows[:r]``), from ``world_tangents``: ``w.Jk[t]`` (J's
    row), B[n + t, :n] = ∂Φ̈/∂q and B[n + t, n:2n] = ∂Φ̈/∂v at fixed (v, q̈) by (D3),
    ``w.hq[t]`` = ∂(J v)/∂q at fixed v; the rows' forces μ as world wrenches
    ξ μ on body b (-ξ μ on a) subtracted from ``w.F`` and their q-derivatives at fixed
    μ from ``w.dFq`` (a coupling row's force is a constant joint force: none)."""
    nb, n, r = m.nb, m.nv, d.nrows
    V, A, eta, dVq, dAq, dVv, dAv = w.V, w.A, w.eta, w.dVq, w.dAq, w.dVv, w.dAv
    mark = w.mark
    xi, xid = w.W[0], w.W[1]
    dxi, dxq, dxv = w.ds[0], w.ds[1], w.ds[2]
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
        for dd in range(n):
            B[n + t, dd] = 0.0
            B[n + t, n + dd] = 0.0
            w.hq[t, dd] = 0.0
            w.Jk[t, dd] = 0.0
        if kind == COUPLING:
            w.Jk[t, m.row_int[row, 3]] += 1.0
            w.Jk[t, m.row_int[row, 2]] -= m.row_vec[row, 0, 0]
            continue
        a, b = m.cl_body[k, 0], m.cl_body[k, 1]
        ga = nb if a < 0 else a
        gb = nb if b < 0 else b
        nt, s, is_t = _row_terms(m, d, w, row, k, ga, gb)
        pB, wa, wb = d.cw[k, 7], V[ga], V[gb]
        dV = (
            V[gb, 0] - V[ga, 0],
            V[gb, 1] - V[ga, 1],
            V[gb, 2] - V[ga, 2],
            V[gb, 3] - V[ga, 3],
            V[gb, 4] - V[ga, 4],
            V[gb, 5] - V[ga, 5],
        )
        dA = (
            A[gb, 0] - A[ga, 0],
            A[gb, 1] - A[ga, 1],
            A[gb, 2] - A[ga, 2],
            A[gb, 3] - A[ga, 3],
            A[gb, 4] - A[ga, 4],
            A[gb, 5] - A[ga, 5],
        )
        mt = mu[t]
        # the directions moving a (bit 1) or b (bit 2); a body a direction does not move
        # reads the ground's zero tangents (index nb)
        _mark_directions(w, ga, gb, n)
        for dd in range(n):
            if mark[dd] == 0:
                continue
            ta = ga if mark[dd] & 1 else nb
            tb = gb if mark[dd] & 2 else nb
            ea, eb = eta[ta, dd], eta[tb, dd]
            for x in range(6):
                dxi[x] = 0.0
                dxq[x] = 0.0
                dxv[x] = 0.0
            for j in range(nt):
                tm = w.trm[j]
                u, ud = tm[0], tm[1]
                du = cr3(ea, u)
                x1 = cr3(dVq[ta, dd], u)
                x2 = cr3(wa, du)
                dudq = (x1[0] + x2[0], x1[1] + x2[1], x1[2] + x2[2])
                dudv = cr3(dVv[ta, dd], u)
                if is_t:
                    pd = tm[4]
                    x1 = cr3(eb, pB)
                    dp = (eb[3] + x1[0], eb[4] + x1[1], eb[5] + x1[2])
                    x1 = cr3(dVq[tb, dd], pB)
                    x2 = cr3(wb, dp)
                    dpdq = (
                        dVq[tb, dd, 3] + x1[0] + x2[0],
                        dVq[tb, dd, 4] + x1[1] + x2[1],
                        dVq[tb, dd, 5] + x1[2] + x2[2],
                    )
                    x1 = cr3(dVv[tb, dd], pB)
                    dpdv = (dVv[tb, dd, 3] + x1[0], dVv[tb, dd, 4] + x1[1], dVv[tb, dd, 5] + x1[2])
                    y1, y2 = cr3(dp, u), cr3(pB, du)
                    z1, z2, z3, z4 = cr3(dpdq, u), cr3(pd, du), cr3(dp, ud), cr3(pB, dudq)
                    v1, v2 = cr3(dpdv, u), cr3(pB, dudv)
                    for x in range(3):
                        dxi[x] += y1[x] + y2[x]
                        dxi[3 + x] += du[x]
                        dxq[x] += z1[x] + z2[x] + z3[x] + z4[x]
                        dxq[3 + x] += dudq[x]
                        dxv[x] += v1[x] + v2[x]
                        dxv[3 + x] += dudv[x]
                else:
                    wv, wd = tm[2], tm[3]
                    dw = cr3(eb, wv)
                    x1 = cr3(dVq[tb, dd], wv)
                    x2 = cr3(wb, dw)
                    dwdq = (x1[0] + x2[0], x1[1] + x2[1], x1[2] + x2[2])
                    dwdv = cr3(dVv[tb, dd], wv)
                    y1, y2 = cr3(dw, u), cr3(wv, du)
                    z1, z2, z3, z4 = cr3(dwdq, u), cr3(wd, du), cr3(dw, ud), cr3(wv, dudq)
                    v1, v2 = cr3(dwdv, u), cr3(wv, dudv)
                    for x in range(3):
                        dxi[x] += s * (y1[x] + y2[x])
                        dxq[x] += s * (z1[x] + z2[x] + z3[x] + z4[x])
                        dxv[x] += s * (v1[x] + v2[x])
            # (D3): Φ̈ = ξᵀ ΔA + ξ̇ᵀ ΔV differentiated; J = ξᵀ Δη; ∂(J v)/∂q = ∂(ξᵀ ΔV)/∂q
            B[n + t, dd] = (
                dot6(dxi, dA)
                + (dot6(dAq[tb, dd], xi) - dot6(dAq[ta, dd], xi))
                + dot6(dxq, dV)
                + (dot6(dVq[tb, dd], xid) - dot6(dVq[ta, dd], xid))
            )
            B[n + t, n + dd] = (
                (dot6(dAv[tb, dd], xi) - dot6(dAv[ta, dd], xi))
                + dot6(dxv, dV)
                + (dot6(dVv[tb, dd], xid) - dot6(dVv[ta, dd], xid))
            )
            w.hq[t, dd] = dot6(dxi, dV) + (dot6(dVq[tb, dd], xi) - dot6(dVq[ta, dd], xi))
            w.Jk[t, dd] = dot6(eb, xi) - dot6(ea, xi)
            if b >= 0:
                add6(w.dFq[b, dd], -mt, dxi)
            if a >= 0:
                add6(w.dFq[a, dd], mt, dxi)
        if b >= 0:
            add6(w.F[b], -mt, xi)
        if a >= 0:
            add6(w.F[a], mt, xi)


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
def _augmented_factors(m, d, w):
    """1 / the estimated condition of the augmented kernel's KKT matrix
    K' = [M, (S J_k)ᵀ; S J_k, 0] (eq. (10), rows scaled by S, its scales recomputed into
    ``w.sc`` by its rule) from its LU factors in ``d.K``, where they are usable for (D2):
    factored in order (``d.piv`` the identity, so the factors are the in-order ones and
    keep the graph's sparsity) with a pivot spread within ``NOPIV_RATIO``; else 0."""
    n, r = m.nv, d.nrows
    k = n + r
    umin, umax = 1e300, 0.0
    for i in range(k):
        if d.piv[i] != i:
            return 0.0
        umin = min(umin, abs(d.K[i, i]))
        umax = max(umax, abs(d.K[i, i]))
    if not umin > NOPIV_RATIO * umax:
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
            _solve_inorder(d.K, k, n, B)
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
    pivoted = False
    for i in range(k):
        pivoted = pivoted or w.piv[i] != i
    if pivoted:
        lu_solve_rows(w.K, k, w.piv, B)
    else:
        _solve_inorder(w.K, k, n, B)
    for t in range(r):
        for c in range(nc):
            B[n + t, c] *= w.sc[t]
    for i in range(k):
        if not all_finite(B[i]):
            return NONFINITE_OUTPUT
    return rc


@njit(cache=True)
def off_manifold(m, d, w, v, size):
    """True where Φ or J v exceed ``MANIFOLD_TOL`` (module doc) at the state in ``d``
    (``d.Phi``, ``d.J`` of every row); their sizes into ``w.diag[0:2]``."""
    ephi, ev, jmax, vmax = 0.0, 0.0, 1e-300, 1.0
    for j in range(m.nv):
        vmax = max(vmax, abs(v[j]))
    for rr in range(m.nr):
        ephi = max(ephi, abs(d.Phi[rr]))
        x = 0.0
        for j in range(m.nv):
            x += d.J[rr, j] * v[j]
            jmax = max(jmax, abs(d.J[rr, j]))
        ev = max(ev, abs(x))
    w.diag[0], w.diag[1] = ephi, ev
    return ephi > MANIFOLD_TOL * size or ev > MANIFOLD_TOL * jmax * vmax


# derivatives_entry's modes
GIVEN, GIVEN_SOLVE, AUGMENTED_SOLVE = 0, 1, 2


@entry
def derivatives_entry(ctx, wb, q, v, tau, qdd, mu, size, mode, B):
    """The derivatives at (q, v, q̈) with the multipliers ``mu`` of the rows ``d.rows``
    (r of them) into ``B`` ((nv + r) × 3 nv).  ``mode``: ``GIVEN``, q̈ and μ given,
    B = [∂E1/∂q, ∂E1/∂v, M] over [∂E2/∂q, ∂E2/∂v, J_k] (D1); ``GIVEN_SOLVE``, q̈ and μ
    given, B = [∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ] over [∂μ/∂q, ∂μ/∂v, ∂μ/∂τ] (D2);
    ``AUGMENTED_SOLVE``: q̈ and μ first computed into ``qdd`` and ``mu`` by the augmented
    method's kernel at τ (``augmented_kernel``, on the same rows: the numbers of
    ``ld.forward_dynamics(method="augmented")``), whose kinematics, J and M are then
    reused, then as ``GIVEN_SOLVE``.  ``size`` > 0: check that the state is on the
    manifold at that model size (``off_manifold``).  Returns > 0 (solving: 1 / the KKT
    matrix's estimated condition), or a status < 0 (``FD_FAILED``: the augmented kernel
    refused the state; the caller takes the checked path)."""
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
    if size > 0.0 and off_manifold(m, d, w, v, size):
        return OFF_MANIFOLD
    world_tangents(m, d, w, v, as_input(qdd))
    inertial_forces(m, w)
    row_tangents(m, d, w, mu, B)
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
    types.float64,
    types.int64,
    OUT2,
)


# ---------------------------------------------------------------- Python side
class _Work:
    """A model's derivative workspace: a dense ``Data`` (its own: the rows it uses are
    the derivatives'), the tangents' buffer, and what the model's rows need: the model
    size, per row whether its derivative needs a consistent state (hinge / log rows)
    and the message of a log row that cannot be differentiated (``_log_refusal``)."""

    def __init__(self, model):
        self.data = model.create_data().ensure_dense()
        self.buf, self.views = allocate_workspace(model.nbodies, model.nv, model.m)
        self.size = max(1.0, float(np.abs(model.jgeom[:, 3]).max(initial=0.0)))
        ri = np.asarray(model.row_int)
        kinds, forms = ri[:, 1], ri[:, 2]
        self.needs = (kinds != TRANSLATION) & (kinds != COUPLING) & (forms != ROT_DOT)
        self.refusal = [_log_refusal(model, r) for r in range(model.m)]
        self.all_rows = np.arange(model.m, dtype=np.int64)
        self.rows = self.all_rows
        self.all_size = self._size(self.all_rows)
        self.entry = ENTRY.compile()
        self.zeros = np.zeros(model.nv)
        # the fast path (augmented inside the entry, every row) is taken once the checked
        # path saw ld.forward_dynamics keep every row (``forward_dynamics_derivatives``)
        self.fast = False

    def _size(self, rows):
        for r in rows:
            if self.refusal[r]:
                raise ModelError(self.refusal[r])
        return self.size if bool(np.any(self.needs[rows])) else 0.0

    def use(self, rows):
        """Make ``rows`` the kept rows; returns the manifold check's size (0: none)."""
        if rows is not self.rows:
            if not np.array_equal(rows, self.rows):
                self.data.set_rows(rows)
            self.rows = rows
        return self.all_size if rows is self.all_rows else self._size(rows)


_NO_MU = np.zeros(0)
_NO_ROWS = np.zeros(0, dtype=np.int64)


def _work(model):
    """The model's derivative workspace, cached on it as the methods cache their plans
    (``model._sslm_topology``, ``model._denoc_layout``)."""
    wk = getattr(model, "_derivative_work", None)
    if wk is None:
        wk = model._derivative_work = _Work(model)
    return wk


def _log_refusal(model, r):
    """The ``ModelError`` message for row r if it is a log row of a closure that leaves
    its frames free to turn (module doc: three rotation rows, or a planar model's one,
    lock the relative rotation), else ''."""
    ri = np.asarray(model.row_int)
    if ri[r, 1] == TRANSLATION or ri[r, 2] != ROT_LOG:
        return ""
    k = ri[r, 0]
    rot = np.flatnonzero((ri[:, 0] == k) & (ri[:, 1] != TRANSLATION))
    if rot.size == 3 or model.planar:
        return ""
    return (
        f"{model.name}: closure {model.closures[k]!r} leaves its frames free to turn "
        f"({rot.size} rotation row of the log map in 3D): the derivatives of such rows are "
        "not implemented (a generic closure with one rotation axis)"
    )


def _run(model, wk, q, v, qdd, rows, mu, solve, check=True):
    """``derivatives_entry`` on the rows ``rows`` with q̈ and multipliers ``mu`` given:
    B, or the error its status names."""
    n = model.nv
    size = wk.use(rows)
    if not check:
        size = 0.0
    B = np.empty((n + rows.size, 3 * n))
    qdd = np.ascontiguousarray(qdd, dtype=float)
    mu = np.ascontiguousarray(mu, dtype=float)
    mode = GIVEN_SOLVE if solve else GIVEN
    st = wk.entry(wk.data.ctx, wk.buf, q, v, wk.zeros, qdd, mu, size, mode, B)
    if st > 0.0:
        return B
    diag = wk.views["diag"]
    if st == OFF_MANIFOLD:
        raise AssemblyError(
            f"{model.name}: derivatives of its hinge / log closure rows need a consistent state "
            f"(|Φ| = {diag[0]:.3g}, |J v| = {diag[1]:.3g}); use ld.assemble and "
            "ld.complete_velocity"
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

    @classmethod
    def _from_buffers(cls, qdd, lam, B, rows):
        """The compiled path's result: q̈, λ (= μ, every row kept) and B, its matrices
        views of B made when read (``_Block``)."""
        obj = cls.__new__(cls)
        obj.__dict__ = {"qdd": qdd, "lam": lam, "rows": rows, "mu": lam, "_buf": (qdd, lam, B)}
        return obj

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
    :class:`SingularityError` at a singular configuration (KKT matrix singular),
    :class:`AssemblyError` off the manifold where the model's hinge / log rows need a
    consistent state, :class:`ModelError` for log rows of a closure free to turn.
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
        wk.use(rows)  # the log rows' refusal first, as the kernel's checks
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


def _fast(model, wk, q, v, tau, tangent, out=None):
    """``forward_dynamics_derivatives`` in one compiled call (``AUGMENTED_SOLVE``, every
    row kept), or None where the entry refuses the inputs or the state (the checked path
    then answers or explains).  ``out`` with buffers of this path: written in place."""
    n, m = model.nv, model.m
    if out is not None and out._buf is not None and out._buf[2].shape == (n + m, 3 * n):
        qdd, lam, B = out._buf
        if wk.rows is not wk.all_rows:
            wk.use(wk.all_rows)
        try:
            st = wk.entry(
                wk.data.ctx, wk.buf, q, v, wk.zeros if tau is None else tau, qdd, lam,
                wk.all_size, AUGMENTED_SOLVE, B,
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
    qdd, lam = _empty(n), _empty(m)
    B = _empty((n + m, 3 * n))
    if wk.rows is not wk.all_rows:
        wk.use(wk.all_rows)
    try:
        st = wk.entry(
            wk.data.ctx, wk.buf, q, v, wk.zeros if tau is None else tau, qdd, lam,
            wk.all_size, AUGMENTED_SOLVE, B,
        )  # fmt: skip
    except TypeError:  # not real numbers: the checked path explains
        return None
    if not st > 0.0:
        return None
    res = ForwardDynamicsDerivatives._from_buffers(qdd, lam, B, wk.all_rows)
    if tangent:
        _project(model, q, res, wk, True)
    return res if out is None else _copy_into(out, res)


_empty = np.empty


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
        _run(model, wk, q, y, np.zeros(n), rows, np.zeros(m), False, check=False)
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
