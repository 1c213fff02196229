"""The closure rows' tangents for the derivatives of closed-loop dynamics
(``loopdyn.derivatives.closed``, (D1)-(D2) there): J's rows, ∂(J v)/∂q, ∂Φ̈/∂q and
∂Φ̈/∂v at fixed (v, q̈), and the closure forces' q-derivatives, from the body motions'
tangents of ``loopdyn.derivatives.tree`` (compiled, on ``(m, d, w)``, nothing allocated).

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
"""

import math

import numpy as np
from numba import njit

from loopdyn.derivatives.tree import add6, dot6
from loopdyn.kinematics.closures import FLIP_SIN, _horner, _swing_scale
from loopdyn.model.closures import COUPLING, ROT_DOT, ROT_HINGE, ROT_LOG, TRANSLATION

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
