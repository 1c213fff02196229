"""Constraint kinematics of the loop closures: Φ(q), J(q) (m × nv) and γ = -J̇ q̇.

Rows are those of ``loopdyn.model.closures`` (translation and rotation rows, world
vectors u_w = R_A u, w_w = R_B w, n = w_w × u_w; coupling rows between two joints):

    translation:  Φ = u_w·(p_B - p_A),       J v = u_w·(v_B - v_A(p_B))
    rotation:     Φ = u_w·w_w,               J v = n·(ω_B - ω_A)
    coupling:     Φ = q_b - r q_a - offset,  J v = v_b - r v_a,  γ = 0

and γ = -d/dt(J v) at q̈ = 0, from the velocity-product accelerations of the
bodies (no gravity).  Everything is in world axes.  The point of body a
coinciding with B's origin is used for body a's velocity and acceleration.

Levers.  Every row's entries, loads and point motions use the levers p_B - o_j
from B's origin to the origins of the bodies j on the paths of a and b
(``closure_levers``, kept in ``d.lev[k, j]`` for every method, on the loop's own
paths and its root only), and Φ uses
p_B - p_A.  They are summed from the model's local offsets (the frames' and the
joints' placements, rotated) along the loop from its root, the nearest common
ancestor of a and b, not taken as differences of world positions: a lever of
1e-13 m on a body 0.5 m from the world origin keeps its digits (as a difference
of world positions it would keep three), so J, γ and Jᵀλ are those of the model
as written to its last digit, at any distance from the origin.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit, types

from loopdyn.kernels.checks import STATE_OK, raise_status, state_status
from loopdyn.kernels.joints import joint_velocity
from loopdyn.kernels.numba_internals import BUF, IN, Entry, entry, unliteral
from loopdyn.kernels.spatial import motion_to_child_at
from loopdyn.kernels.views import handles
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.model.closures import COUPLING, ROT_DOT, ROT_HINGE, ROTATION, TRANSLATION
from loopdyn.validation import configuration, model_arg, vector, workspace

# rows of the closure workspace cw (nc, 16, 3): frame A's rotation (3 rows) and
# p_B - p_A, frame B's rotation and origin p_B, then the motions (ω, v, α, a) of
# body a's point at B's origin and of B's origin on body b (world axes)
_DP, _PB = 3, 7


@njit(cache=True, inline="always")  # in bias_accelerations' loop: no call per body
def _bias_step(m, d, i, A, C, root):
    """``A[i]`` = iXλ A[λ] + C[i] (body frame), A[λ] = 0 where λ is body ``root`` or
    the ground."""
    lam = m.topo[i, 0]
    if lam >= 0 and lam != root:
        a = motion_to_child_at(
            d.Xrel, i, A[lam, 0], A[lam, 1], A[lam, 2], A[lam, 3], A[lam, 4], A[lam, 5]
        )
        for r in range(6):
            A[i, r] = a[r] + C[i, r]
    else:
        for r in range(6):
            A[i, r] = C[i, r]


@njit(cache=True)
def bias_accelerations(m, d):
    """``A[i]``: body accelerations at q̈ = 0 without gravity, a_i = iXλ a_λ + c_i (body
    frame), from ``Xrel`` and ``C`` (``fk_kernel`` with velocities)."""
    for i in range(m.nb):
        _bias_step(m, d, i, d.A, d.C, -1)


@njit(cache=True, inline="always")
def _point_motion(b, lever, Xw, V, A, out):
    """World ω, v, α, a (classical) of the point of body b at ``lever`` = P - o_b
    (world axes) from its origin into ``out`` rows 0–3 (ground, b < 0: zeros)."""
    for r in range(4):
        for c in range(3):
            out[r, c] = 0.0
    if b < 0:
        return
    R = Xw[b, :3]
    # r = Rᵀ (P - o), body coordinates
    d0, d1, d2 = lever[0], lever[1], lever[2]
    r0 = R[0, 0] * d0 + R[1, 0] * d1 + R[2, 0] * d2
    r1 = R[0, 1] * d0 + R[1, 1] * d1 + R[2, 1] * d2
    r2 = R[0, 2] * d0 + R[1, 2] * d1 + R[2, 2] * d2
    w0, w1, w2 = V[b, 0], V[b, 1], V[b, 2]
    vp0 = V[b, 3] + w1 * r2 - w2 * r1
    vp1 = V[b, 4] + w2 * r0 - w0 * r2
    vp2 = V[b, 5] + w0 * r1 - w1 * r0
    al0, al1, al2 = A[b, 0], A[b, 1], A[b, 2]
    # a_P = a_s + α × r + ω × v_P (body coordinates)
    ap0 = A[b, 3] + al1 * r2 - al2 * r1 + w1 * vp2 - w2 * vp1
    ap1 = A[b, 4] + al2 * r0 - al0 * r2 + w2 * vp0 - w0 * vp2
    ap2 = A[b, 5] + al0 * r1 - al1 * r0 + w0 * vp1 - w1 * vp0
    for k in range(3):
        out[0, k] = R[k, 0] * w0 + R[k, 1] * w1 + R[k, 2] * w2
        out[1, k] = R[k, 0] * vp0 + R[k, 1] * vp1 + R[k, 2] * vp2
        out[2, k] = R[k, 0] * al0 + R[k, 1] * al1 + R[k, 2] * al2
        out[3, k] = R[k, 0] * ap0 + R[k, 1] * ap1 + R[k, 2] * ap2


@njit(cache=True, inline="always")
def _common_ancestor(topo, a, b):
    """The nearest common ancestor of bodies a and b (-1: the ground); parents are
    numbered before their children."""
    while a != b:
        if a > b:
            a = topo[a, 0]
        else:
            b = topo[b, 0]
    return a


@njit(cache=True, inline="always")
def _up(Xw, Xrel, p, j, L0, L1, L2):
    """(L0, L1, L2) + o_j - o_p: body j's origin in its parent p (-1: the ground),
    rotated to world axes."""
    t = Xrel[j, 3]
    if p < 0:
        return L0 + t[0], L1 + t[1], L2 + t[2]
    return (
        L0 + Xw[p, 0, 0] * t[0] + Xw[p, 0, 1] * t[1] + Xw[p, 0, 2] * t[2],
        L1 + Xw[p, 1, 0] * t[0] + Xw[p, 1, 1] * t[1] + Xw[p, 1, 2] * t[2],
        L2 + Xw[p, 2, 0] * t[0] + Xw[p, 2, 1] * t[1] + Xw[p, 2, 2] * t[2],
    )


@njit(cache=True)
def _side_levers(m, d, k, side, c):
    """Frame A's (side 0) or B's (side 1) origin p of closure k from the origins o_j of
    the bodies j on its path up to the loop's root c (excluded): ``d.lev[k, j]`` =
    p - o_j, summed from the frame's and the joints' placements; returns the last sum
    and the origin it is measured from: (p - o_c, 0) for a body root (c >= 0), and for
    the ground (c < 0) (p - o_r, o_r) with r the path's root body and o_r its placement
    in the world; (0, p) for a frame on the ground."""
    topo, Xw, Xrel, lev = m.topo, d.Xw, d.Xrel, d.lev[k]
    b = m.cl_body[k, side]
    x = m.cl_X[k, side, 3]
    if b < 0:
        return 0.0, 0.0, 0.0, x[0], x[1], x[2]
    L0 = Xw[b, 0, 0] * x[0] + Xw[b, 0, 1] * x[1] + Xw[b, 0, 2] * x[2]
    L1 = Xw[b, 1, 0] * x[0] + Xw[b, 1, 1] * x[1] + Xw[b, 1, 2] * x[2]
    L2 = Xw[b, 2, 0] * x[0] + Xw[b, 2, 1] * x[1] + Xw[b, 2, 2] * x[2]
    j = b
    while j != c:
        lev[j, 0], lev[j, 1], lev[j, 2] = L0, L1, L2
        p = topo[j, 0]
        if p < 0:
            t = Xrel[j, 3]
            return L0, L1, L2, t[0], t[1], t[2]
        L0, L1, L2 = _up(Xw, Xrel, p, j, L0, L1, L2)
        j = p
    return L0, L1, L2, 0.0, 0.0, 0.0


@njit(cache=True)
def closure_levers(m, d, k, c):
    """``d.lev[k, j]`` = p_B - o_j (world axes) for every body j on the paths from
    closure k's bodies a and b up to the loop's root c, c included (the other entries
    of ``d.lev[k]`` are not written); returns p_B - p_A.  ``c``: the loop's root,
    ``_common_ancestor`` of a and b.  O(loop path), independent of c's depth.

    Summed from local offsets (frames' and joints' placements rotated by the
    body poses, ``Xrel`` and ``Xw``), from each frame up to the loop's root c (the
    nearest common ancestor of a and b): p_B - o_c and p_A - o_c, their difference
    p_B - p_A, then p_B - o_j = (p_A - o_j) + (p_B - p_A) on a's side and the sum
    continued above c.  Where the loop closes through the ground, p_B - p_A =
    (p_B - o_rb) - (p_A - o_ra) + (o_rb - o_ra), the last term the difference of the
    two root bodies' world placements (the model's own numbers).  Each lever is exact
    to the rounding of the loop's own offsets, wherever the loop is in the world.
    """
    topo, lev = m.topo, d.lev[k]
    a = m.cl_body[k, 0]
    # unliteral: one compiled _side_levers for both sides, not one per constant
    B0, B1, B2, ob0, ob1, ob2 = _side_levers(m, d, k, unliteral(1), c)
    A0, A1, A2, oa0, oa1, oa2 = _side_levers(m, d, k, unliteral(0), c)  # p_A - o_j for now
    D0 = (B0 - A0) + (ob0 - oa0)  # p_B - p_A
    D1 = (B1 - A1) + (ob1 - oa1)
    D2 = (B2 - A2) + (ob2 - oa2)
    j = a
    while j != c and j >= 0:
        lev[j, 0] += D0
        lev[j, 1] += D1
        lev[j, 2] += D2
        j = topo[j, 0]
    # the root: p_B - o_c (a closure body may be c itself: a loop closed on an ancestor).
    # Not above c: there both sides' columns cancel, and a walk to the ground per loop
    # was O(depth), O(N²) per call on a chain of N loops (issue 41)
    if c >= 0:
        lev[c, 0], lev[c, 1], lev[c, 2] = B0, B1, B2
    return D0, D1, D2


@njit(cache=True)
def _relative_motions(m, d, b, c, v):
    """``d.Vr[j]``, ``d.Ar[j]``: velocity and acceleration at q̈ = 0 relative to body
    c (body frames) of the bodies j on the path from c (excluded) down to b.

    A closure's Φ depends only on its loop's joints (the rows are invariant to a
    motion of the loop's root c), so γ = -J̇q̇ is that of the same state with every
    joint at and above c at rest: computed from these relative motions it holds no
    round-off of c's own motion (a spinning, translating root 0.5 m off the origin
    left 1e-16 in γ, against rows of 1e-17 where a lever is that small)."""
    path, topo, Vr, Cr, Ar = d.path, m.topo, d.Vr, d.Cr, d.Ar
    n = 0
    j = b
    while j != c:
        path[n] = j
        n += 1
        j = topo[j, 0]
    for t in range(n - 1, -1, -1):
        i = path[t]
        joint_velocity(m, d, i, v, Vr, Cr, c)
        _bias_step(m, d, i, Ar, Cr, c)


@njit(cache=True)
def _add_jacobian_rows(m, d, k, b, c, sign, r0, r1):
    """J[r0:r1] += sign · (rows r0:r1 of closure k) · (world point Jacobian of body b at
    p_B) on the bodies from b up to the loop's root c (excluded), with the levers
    p_B - o_j of ``d.lev[k]`` (``closure_levers``).  Above c both sides of a loop carry
    the same columns, which cancel exactly: those entries stay the 0 J starts from."""
    topo, Xw, S, row_int, rw, J, lev = m.topo, d.Xw, d.S, m.row_int, d.rw, d.J, d.lev[k]
    j = b
    while j != c and j >= 0:
        iv = topo[j, 3]
        d0, d1, d2 = lev[j, 0], lev[j, 1], lev[j, 2]
        for k in range(topo[j, 5]):
            s0, s1, s2, s3, s4, s5 = (
                S[j, 0, k],
                S[j, 1, k],
                S[j, 2, k],
                S[j, 3, k],
                S[j, 4, k],
                S[j, 5, k],
            )
            w0 = Xw[j, 0, 0] * s0 + Xw[j, 0, 1] * s1 + Xw[j, 0, 2] * s2
            w1 = Xw[j, 1, 0] * s0 + Xw[j, 1, 1] * s1 + Xw[j, 1, 2] * s2
            w2 = Xw[j, 2, 0] * s0 + Xw[j, 2, 1] * s1 + Xw[j, 2, 2] * s2
            u0 = Xw[j, 0, 0] * s3 + Xw[j, 0, 1] * s4 + Xw[j, 0, 2] * s5
            u1 = Xw[j, 1, 0] * s3 + Xw[j, 1, 1] * s4 + Xw[j, 1, 2] * s5
            u2 = Xw[j, 2, 0] * s3 + Xw[j, 2, 1] * s4 + Xw[j, 2, 2] * s5
            v0 = u0 + w1 * d2 - w2 * d1
            v1 = u1 + w2 * d0 - w0 * d2
            v2 = u2 + w0 * d1 - w1 * d0
            for rr in range(r0, r1):
                if row_int[rr, 1] == TRANSLATION:
                    val = rw[rr, 0, 0] * v0 + rw[rr, 0, 1] * v1 + rw[rr, 0, 2] * v2
                else:
                    val = rw[rr, 2, 0] * w0 + rw[rr, 2, 1] * w1 + rw[rr, 2, 2] * w2
                J[rr, iv + k] += sign * val
        j = topo[j, 0]


@njit(cache=True, inline="always")
def _dot_row_rate(uw, ww, nw, wA, wB, alA, alB):
    """d/dt [n·(ω_B - ω_A)] at q̈ = 0 of the row Φ = u_A·w_B (n = w × u, world axes),
    with ṅ = (ω_B × w) × u + w × (ω_A × u): the row's -γ."""
    bw0 = wB[1] * ww[2] - wB[2] * ww[1]
    bw1 = wB[2] * ww[0] - wB[0] * ww[2]
    bw2 = wB[0] * ww[1] - wB[1] * ww[0]
    au0 = wA[1] * uw[2] - wA[2] * uw[1]
    au1 = wA[2] * uw[0] - wA[0] * uw[2]
    au2 = wA[0] * uw[1] - wA[1] * uw[0]
    nd0 = bw1 * uw[2] - bw2 * uw[1] + ww[1] * au2 - ww[2] * au1
    nd1 = bw2 * uw[0] - bw0 * uw[2] + ww[2] * au0 - ww[0] * au2
    nd2 = bw0 * uw[1] - bw1 * uw[0] + ww[0] * au1 - ww[1] * au0
    g = nd0 * (wB[0] - wA[0]) + nd1 * (wB[1] - wA[1]) + nd2 * (wB[2] - wA[2])
    return g + nw[0] * (alB[0] - alA[0]) + nw[1] * (alB[1] - alA[1]) + nw[2] * (alB[2] - alA[2])


# a hinge whose axis is reversed to within this sine (|a_A × a_B|) reads its swing π:
# there the swing's direction, and with it its Jacobian (~1/sin), is undefined
FLIP_SIN = 1e-8


# Taylor coefficients in t = θ² (sympy), highest first: h = θ/sin θ, dh/dc and d²h/dc² in
# c = cos θ (radius of convergence π), β(θ) of J_l⁻¹ and β'(θ)/θ (radius 2π)
_H = (1414477 / 653837184000, 73 / 3421440, 127 / 604800, 31 / 15120, 7 / 360, 1 / 6, 1.0)
_HP = (-4 / 200475, -2764 / 19348875, -2 / 2079, -4 / 675, -2 / 63, -2 / 15, -1 / 3)
_HPP = (
    121835513 / 926269344000,
    3325549 / 4540536000,
    187619 / 50450400,
    1153 / 69300,
    13 / 210,
    6 / 35,
    4 / 15,
)
_BETA = (
    1 / 74724249600,
    691 / 1307674368000,
    1 / 47900160,
    1 / 1209600,
    1 / 30240,
    1 / 720,
    1 / 12,
)
_DBETA = (
    3617 / 762187345920000,
    1 / 6227020800,
    691 / 130767436800,
    1 / 5987520,
    1 / 201600,
    1 / 7560,
    1 / 360,
)


@njit(cache=True, inline="always")
def _horner(coefs, t):
    s = 0.0
    for c in coefs:
        s = s * t + c
    return s


@njit(cache=True)
def _swing_scale(rho, c):
    """h = θ/sin θ and its derivatives dh/dc, d²h/dc² in c = cos θ, for the angle θ =
    atan2(ρ, c) between a hinge's axes (ρ = sin θ); the series in θ² below 0.2 rad
    (truncation < 1e-17), where the closed forms h' = (h c - 1)/ρ², h'' = (3 c h' + h)/ρ²
    cancel."""
    th = np.arctan2(rho, c)
    if th < 0.2:
        t = th * th
        return _horner(_H, t), _horner(_HP, t), _horner(_HPP, t)
    s2 = rho * rho
    h = th / rho
    hp = (h * c - 1.0) / s2
    return h, hp, (3.0 * c * hp + h) / s2


@njit(cache=True)
def _log_beta(th):
    """β(θ) = 1/θ² - cot(θ/2)/(2θ) of the inverse left Jacobian of SO(3),
    J_l⁻¹(φ) = I - [φ]/2 + β [φ]², and β'(θ)/θ; the series below 0.5 rad (β is analytic
    up to 2π, finite at π)."""
    t = th * th
    if th < 0.5:
        return _horner(_BETA, t), _horner(_DBETA, t)
    sh, ch = np.sin(0.5 * th), np.cos(0.5 * th)
    cot = ch / sh
    b = 1.0 / t - cot / (2.0 * th)
    # β' = -2/θ³ + (2 cot(θ/2) + θ / sin²(θ/2)) / (4 θ²)
    db = -2.0 / (t * th) + (2.0 * cot + th / (sh * sh)) / (4.0 * t)
    return b, db / th


@njit(cache=True, inline="always")
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True)
def _log_rows(m, d, k, r0, r1, with_v):
    """``ROT_LOG`` rows r0..r1-1 of closure k: Φ = e·φ, φ = log(R_Aᵀ R_B) (A axes,
    e = w × u the row's axis), n = R_A K(φ)ᵀ e and γ = -e·(K̇ ω + K R_Aᵀ(Δα - ω_A ×
    Δω)) with ω = R_Aᵀ Δω, K = J_l⁻¹(φ) = I - [φ]/2 + β [φ]² (so that φ̇ = K ω) and
    K̇ ω = -φ̇ × ω/2 + β (φ̇ × (φ × ω) + φ × (φ̇ × ω)) + β̇ φ × (φ × ω)."""
    cw, rw, row_vec = d.cw, d.rw, m.row_vec
    RA, RB = cw[k, 0:3], cw[k, 4:7]  # world axes of frames A and B (columns)
    # R = R_Aᵀ R_B: B's axes in A
    R00 = RA[0, 0] * RB[0, 0] + RA[1, 0] * RB[1, 0] + RA[2, 0] * RB[2, 0]
    R01 = RA[0, 0] * RB[0, 1] + RA[1, 0] * RB[1, 1] + RA[2, 0] * RB[2, 1]
    R02 = RA[0, 0] * RB[0, 2] + RA[1, 0] * RB[1, 2] + RA[2, 0] * RB[2, 2]
    R10 = RA[0, 1] * RB[0, 0] + RA[1, 1] * RB[1, 0] + RA[2, 1] * RB[2, 0]
    R11 = RA[0, 1] * RB[0, 1] + RA[1, 1] * RB[1, 1] + RA[2, 1] * RB[2, 1]
    R12 = RA[0, 1] * RB[0, 2] + RA[1, 1] * RB[1, 2] + RA[2, 1] * RB[2, 2]
    R20 = RA[0, 2] * RB[0, 0] + RA[1, 2] * RB[1, 0] + RA[2, 2] * RB[2, 0]
    R21 = RA[0, 2] * RB[0, 1] + RA[1, 2] * RB[1, 1] + RA[2, 2] * RB[2, 1]
    R22 = RA[0, 2] * RB[0, 2] + RA[1, 2] * RB[1, 2] + RA[2, 2] * RB[2, 2]
    # φ = log R: θ = atan2(|v|, (tr R - 1)/2) with v = vee(R - Rᵀ)/2 = sin θ · axis
    v0, v1, v2 = 0.5 * (R21 - R12), 0.5 * (R02 - R20), 0.5 * (R10 - R01)
    s = np.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    c = 0.5 * (R00 + R11 + R22 - 1.0)
    th = np.arctan2(s, c)
    if c > 0.0:
        f = th / s if s > 0.0 else 1.0
        p0, p1, p2 = f * v0, f * v1, f * v2
    else:
        # θ >= π/2: the axis from the symmetric part (R + Rᵀ)/2 - c I = (1 - c) a aᵀ,
        # its largest diagonal entry first; the sign of v (arbitrary at θ = π)
        oc = 1.0 - c
        B00, B11, B22 = R00 - c, R11 - c, R22 - c
        if B00 >= B11 and B00 >= B22:
            a0 = np.sqrt(B00 / oc)
            a1, a2 = 0.5 * (R01 + R10) / (oc * a0), 0.5 * (R02 + R20) / (oc * a0)
        elif B11 >= B22:
            a1 = np.sqrt(B11 / oc)
            a0, a2 = 0.5 * (R01 + R10) / (oc * a1), 0.5 * (R12 + R21) / (oc * a1)
        else:
            a2 = np.sqrt(B22 / oc)
            a0, a1 = 0.5 * (R02 + R20) / (oc * a2), 0.5 * (R12 + R21) / (oc * a2)
        na = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        sg = th / na if a0 * v0 + a1 * v1 + a2 * v2 >= 0.0 else -th / na
        p0, p1, p2 = sg * a0, sg * a1, sg * a2
    beta, dbeta = _log_beta(th)
    if with_v:
        wA, alA, wB, alB = cw[k, 8], cw[k, 10], cw[k, 12], cw[k, 14]
        dw0, dw1, dw2 = wB[0] - wA[0], wB[1] - wA[1], wB[2] - wA[2]
        # ω = R_Aᵀ Δω and x = R_Aᵀ (Δα - ω_A × Δω), A axes
        c0, c1, c2 = _cross(wA[0], wA[1], wA[2], dw0, dw1, dw2)
        y0, y1, y2 = alB[0] - alA[0] - c0, alB[1] - alA[1] - c1, alB[2] - alA[2] - c2
        o0 = RA[0, 0] * dw0 + RA[1, 0] * dw1 + RA[2, 0] * dw2
        o1 = RA[0, 1] * dw0 + RA[1, 1] * dw1 + RA[2, 1] * dw2
        o2 = RA[0, 2] * dw0 + RA[1, 2] * dw1 + RA[2, 2] * dw2
        x0 = RA[0, 0] * y0 + RA[1, 0] * y1 + RA[2, 0] * y2
        x1 = RA[0, 1] * y0 + RA[1, 1] * y1 + RA[2, 1] * y2
        x2 = RA[0, 2] * y0 + RA[1, 2] * y1 + RA[2, 2] * y2
        # φ̇ = K ω
        f0, f1, f2 = _cross(p0, p1, p2, o0, o1, o2)  # φ × ω
        g0, g1, g2 = _cross(p0, p1, p2, f0, f1, f2)  # φ × (φ × ω)
        pd0 = o0 - 0.5 * f0 + beta * g0
        pd1 = o1 - 0.5 * f1 + beta * g1
        pd2 = o2 - 0.5 * f2 + beta * g2
        # K̇ ω + K x
        e0, e1, e2 = _cross(pd0, pd1, pd2, o0, o1, o2)  # φ̇ × ω
        h0, h1, h2 = _cross(pd0, pd1, pd2, f0, f1, f2)  # φ̇ × (φ × ω)
        k0, k1, k2 = _cross(p0, p1, p2, e0, e1, e2)  # φ × (φ̇ × ω)
        bd = dbeta * (p0 * pd0 + p1 * pd1 + p2 * pd2)
        fx0, fx1, fx2 = _cross(p0, p1, p2, x0, x1, x2)
        gx0, gx1, gx2 = _cross(p0, p1, p2, fx0, fx1, fx2)
        z0 = -0.5 * e0 + beta * (h0 + k0) + bd * g0 + x0 - 0.5 * fx0 + beta * gx0
        z1 = -0.5 * e1 + beta * (h1 + k1) + bd * g1 + x1 - 0.5 * fx1 + beta * gx1
        z2 = -0.5 * e2 + beta * (h2 + k2) + bd * g2 + x2 - 0.5 * fx2 + beta * gx2
    for rr in range(r0, r1):
        u, w = row_vec[rr, 0], row_vec[rr, 1]
        a0, a1, a2 = _cross(w[0], w[1], w[2], u[0], u[1], u[2])  # the row's axis e
        d.Phi[rr] = a0 * p0 + a1 * p1 + a2 * p2
        # Kᵀ e = e + φ × e / 2 + β φ × (φ × e), then to world axes
        f0, f1, f2 = _cross(p0, p1, p2, a0, a1, a2)
        g0, g1, g2 = _cross(p0, p1, p2, f0, f1, f2)
        n0, n1, n2 = a0 + 0.5 * f0 + beta * g0, a1 + 0.5 * f1 + beta * g1, a2 + 0.5 * f2 + beta * g2
        nw = rw[rr, 2]
        for r in range(3):
            nw[r] = RA[r, 0] * n0 + RA[r, 1] * n1 + RA[r, 2] * n2
        if with_v:
            d.gamma[rr] = -(a0 * z0 + a1 * z1 + a2 * z2)


@njit(cache=True)
def _hinge_rows(m, d, k, r0, with_v):
    """``ROT_HINGE`` rows r0, r0+1 of closure k (u = b, c ⟂ the hinge axis a = w): from
    their dot products g = b_A·a_B, c_A·a_B, Φ = h(c) g with c = a_A·a_B and h = θ/sin θ
    (the swing of the axis, |Φ| = θ); n = h n_g + h' g n_c (n_c = a_B × a_A, ċ = n_c·Δω)
    and γ = h γ_g + h' g γ_c - h'' ċ² g - 2 h' ċ ġ.  Where the axis is reversed to
    ``FLIP_SIN``, the swing reads π and its undefined Jacobian is replaced by -n_g (the
    one of a swing in the plane of the two axes)."""
    cw, rw, row_vec = d.cw, d.rw, m.row_vec
    RA = cw[k, 0:3]
    a = row_vec[r0, 1]
    aA0 = RA[0, 0] * a[0] + RA[0, 1] * a[1] + RA[0, 2] * a[2]
    aA1 = RA[1, 0] * a[0] + RA[1, 1] * a[1] + RA[1, 2] * a[2]
    aA2 = RA[2, 0] * a[0] + RA[2, 1] * a[1] + RA[2, 2] * a[2]
    aB = rw[r0, 1]
    c = aA0 * aB[0] + aA1 * aB[1] + aA2 * aB[2]
    g1, g2 = d.Phi[r0], d.Phi[r0 + 1]
    rho = np.sqrt(g1 * g1 + g2 * g2)
    if c < 0.0 and rho < FLIP_SIN:
        if rho > 0.0:
            h = np.arctan2(rho, c) / rho
            d.Phi[r0], d.Phi[r0 + 1] = h * g1, h * g2
        else:
            d.Phi[r0], d.Phi[r0 + 1] = np.pi, 0.0
        for rr in range(r0, r0 + 2):
            for r in range(3):
                rw[rr, 2, r] = -rw[rr, 2, r]
            if with_v:
                d.gamma[rr] = -d.gamma[rr]
        return
    h, hp, hpp = _swing_scale(rho, c)
    nc0, nc1, nc2 = _cross(aB[0], aB[1], aB[2], aA0, aA1, aA2)
    if with_v:
        wA, alA, wB, alB = cw[k, 8], cw[k, 10], cw[k, 12], cw[k, 14]
        dw0, dw1, dw2 = wB[0] - wA[0], wB[1] - wA[1], wB[2] - wA[2]
        cdot = nc0 * dw0 + nc1 * dw1 + nc2 * dw2
        # γ_c of the dot-product row a_A·a_B, through the rows' shared formula
        gc = -_dot_row_rate((aA0, aA1, aA2), aB, (nc0, nc1, nc2), wA, wB, alA, alB)
    for t in range(2):
        rr = r0 + t
        g = g1 if t == 0 else g2
        nw = rw[rr, 2]
        if with_v:
            gdot = nw[0] * dw0 + nw[1] * dw1 + nw[2] * dw2
            d.gamma[rr] = (
                h * d.gamma[rr] + hp * g * gc - hpp * cdot * cdot * g - 2.0 * hp * cdot * gdot
            )
        nw[0] = h * nw[0] + hp * g * nc0
        nw[1] = h * nw[1] + hp * g * nc1
        nw[2] = h * nw[2] + hp * g * nc2
        d.Phi[rr] = h * g


@njit(cache=True)
def _rotation_residuals(m, d, with_v):
    """The rotation rows of ``ROT_HINGE`` and ``ROT_LOG`` form (``row_int[r, 2]``): Φ, n
    (``d.rw[r, 2]``) and γ from those ``closure_terms`` left as dot products."""
    row_int = m.row_int
    rr = 0
    while rr < m.nr:
        form = row_int[rr, 2]
        if row_int[rr, 1] != ROTATION or form == ROT_DOT:
            rr += 1
            continue
        k = row_int[rr, 0]
        r1 = rr
        while r1 < m.nr and row_int[r1, 0] == k and row_int[r1, 1] == ROTATION:
            r1 += 1
        if form == ROT_HINGE:
            _hinge_rows(m, d, k, rr, with_v)
        else:
            _log_rows(m, d, k, rr, r1, with_v)
        rr = r1


@njit(cache=True)
def closure_terms(m, d, q, v, with_v, want_J):
    """Φ, J (if ``want_J``) and γ (if ``with_v``) into ``d`` from the body poses,
    velocities and bias accelerations already there (``fk_kernel`` and, with
    velocities, ``bias_accelerations``).  ``q`` feeds the coupling rows, ``v`` the
    motions relative to a loop's root body (``_relative_motions``)."""
    cw, rw, Xw = d.cw, d.rw, d.Xw
    row_int, row_vec = m.row_int, m.row_vec
    # frame poses: R_A, p_A, R_B, p_B (world), and the motions at B's origin
    for k in range(m.nc):
        for side in range(2):
            b = m.cl_body[k, side]
            base = 4 * side
            if b < 0:
                for r in range(3):
                    for c in range(3):
                        cw[k, base + r, c] = m.cl_X[k, side, r, c]
                    cw[k, base + 3, r] = m.cl_X[k, side, 3, r]
            else:
                for r in range(3):
                    a0, a1, a2 = Xw[b, r, 0], Xw[b, r, 1], Xw[b, r, 2]
                    for c in range(3):
                        cw[k, base + r, c] = (
                            a0 * m.cl_X[k, side, 0, c]
                            + a1 * m.cl_X[k, side, 1, c]
                            + a2 * m.cl_X[k, side, 2, c]
                        )
                    cw[k, base + 3, r] = (
                        Xw[b, 3, r]
                        + a0 * m.cl_X[k, side, 3, 0]
                        + a1 * m.cl_X[k, side, 3, 1]
                        + a2 * m.cl_X[k, side, 3, 2]
                    )
        a, b = m.cl_body[k, 0], m.cl_body[k, 1]
        c = _common_ancestor(m.topo, a, b)
        cw[k, _DP, 0], cw[k, _DP, 1], cw[k, _DP, 2] = closure_levers(m, d, k, c)
        if with_v:
            # motions at p_B: absolute for a loop through the ground, else relative to
            # its root c (a side whose body is c itself is at rest)
            V, A = d.V, d.A
            if c >= 0:
                V, A = d.Vr, d.Ar
                _relative_motions(m, d, a, c, v)
                _relative_motions(m, d, b, c, v)
            lev = d.lev[k]
            _point_motion(a if a != c else -1, lev[max(a, 0)], Xw, V, A, cw[k, 8:12])
            _point_motion(b if b != c else -1, lev[max(b, 0)], Xw, V, A, cw[k, 12:16])
    # world row vectors, residuals and biases
    for rr in range(m.nr):
        k = row_int[rr, 0]
        kind = row_int[rr, 1]
        if kind == COUPLING:
            # Φ = q_b - r q_a - offset; J v = v_b - r v_a is exact, so γ = 0
            d.Phi[rr] = (
                q[row_int[rr, 5]] - row_vec[rr, 0, 0] * q[row_int[rr, 4]] - row_vec[rr, 0, 1]
            )
            if with_v:
                d.gamma[rr] = 0.0
            continue
        uw, ww, nw = rw[rr, 0], rw[rr, 1], rw[rr, 2]
        for r in range(3):
            uw[r] = (
                cw[k, r, 0] * row_vec[rr, 0, 0]
                + cw[k, r, 1] * row_vec[rr, 0, 1]
                + cw[k, r, 2] * row_vec[rr, 0, 2]
            )
            ww[r] = (
                cw[k, 4 + r, 0] * row_vec[rr, 1, 0]
                + cw[k, 4 + r, 1] * row_vec[rr, 1, 1]
                + cw[k, 4 + r, 2] * row_vec[rr, 1, 2]
            )
        nw[0] = ww[1] * uw[2] - ww[2] * uw[1]
        nw[1] = ww[2] * uw[0] - ww[0] * uw[2]
        nw[2] = ww[0] * uw[1] - ww[1] * uw[0]
        if kind == TRANSLATION:
            d.Phi[rr] = uw[0] * cw[k, _DP, 0] + uw[1] * cw[k, _DP, 1] + uw[2] * cw[k, _DP, 2]
        else:
            d.Phi[rr] = uw[0] * ww[0] + uw[1] * ww[1] + uw[2] * ww[2]
        if not with_v:
            continue
        # motions: A's point (ω, v, α, a) rows 8..11 ; B's origin rows 12..15
        wA, vA, alA, aA = cw[k, 8], cw[k, 9], cw[k, 10], cw[k, 11]
        wB, vB, alB, aB = cw[k, 12], cw[k, 13], cw[k, 14], cw[k, 15]
        if kind == TRANSLATION:
            # d/dt [u·(v_B - v_A)] = (ω_A × u)·dv + u·(a_B - a_A - ω_A × dv)
            dv0, dv1, dv2 = vB[0] - vA[0], vB[1] - vA[1], vB[2] - vA[2]
            cu0 = wA[1] * uw[2] - wA[2] * uw[1]
            cu1 = wA[2] * uw[0] - wA[0] * uw[2]
            cu2 = wA[0] * uw[1] - wA[1] * uw[0]
            cd0 = wA[1] * dv2 - wA[2] * dv1
            cd1 = wA[2] * dv0 - wA[0] * dv2
            cd2 = wA[0] * dv1 - wA[1] * dv0
            g = cu0 * dv0 + cu1 * dv1 + cu2 * dv2
            g += (
                uw[0] * (aB[0] - aA[0] - cd0)
                + uw[1] * (aB[1] - aA[1] - cd1)
                + uw[2] * (aB[2] - aA[2] - cd2)
            )
        else:
            g = _dot_row_rate(uw, ww, nw, wA, wB, alA, alB)
        d.gamma[rr] = -g
    # rotation rows whose residual is more than one dot product (the hinge's swing, the
    # log map): Φ, n and γ of those rows, from the dot products above
    _rotation_residuals(m, d, with_v)
    if want_J:
        J = d.J
        J[:, :] = 0.0
        r0 = unliteral(0)  # not Literal[int](0): one compiled _add_jacobian_rows, not two
        while r0 < m.nr:
            k = row_int[r0, 0]
            r1 = r0
            while r1 < m.nr and row_int[r1, 0] == k:
                r1 += 1
            if row_int[r0, 1] == COUPLING:
                for rr in range(r0, r1):
                    J[rr, row_int[rr, 3]] += 1.0
                    J[rr, row_int[rr, 2]] -= row_vec[rr, 0, 0]
            else:
                a, b = m.cl_body[k, 0], m.cl_body[k, 1]
                c = _common_ancestor(m.topo, a, b)
                _add_jacobian_rows(m, d, k, b, c, 1.0, r0, r1)
                _add_jacobian_rows(m, d, k, a, c, -1.0, r0, r1)
            r0 = r1


@njit(cache=True, inline="always")
def constraint_kernel(m, d, q, v, want_J):
    """Kinematics, then Φ, J (if ``want_J``) and γ (if ``v.size > 0``) into ``d``."""
    with_v = v.shape[0] > 0
    fk_kernel(m, d, q, v)
    if with_v:
        bias_accelerations(m, d)
    closure_terms(m, d, q, v, with_v, want_J)


@entry
def constraint_entry(ctx, q, v, want_J):
    """``constraint_kernel`` on a Data's buffer; 0 or a ``STATE_*`` status."""
    m, d = handles(ctx)
    st = state_status(m, q, v, v[:0], m.nv if v.shape[0] > 0 else 0, unliteral(0))
    if st == STATE_OK:
        constraint_kernel(m, d, q, v, want_J)
    return st


CONSTRAINTS = Entry(constraint_entry, types.int64, BUF, IN, IN, types.boolean)
_NO_V = np.zeros(0)


def evaluate(model, q, v=None, want_J=True, data=None):
    """Compute Φ (and J if ``want_J``, and γ if ``v`` is given) into ``data``; return it.

    The results are ``data.Phi`` (m), ``data.J`` (m × nv), ``data.gamma`` (m); the
    frame poses and world row vectors stay in ``data.cw`` and ``data.rw``.
    """
    d = workspace(model, data)
    if want_J:
        d.ensure_dense()
    q = configuration(model, q)
    v = _NO_V if v is None else vector(v, model.nv, "v", model)
    raise_status(model, CONSTRAINTS.call(d.ctx, q, v, bool(want_J)), "q or v")
    return d


def closure_residual(model, q, data=None):
    """Φ(q) (m,): the position residual of every closure row (m or -, see module doc)."""
    return evaluate(model, q, None, False, data).Phi.copy()


def constraint_jacobian(model, q, data=None):
    """J(q) (m × nv) with J v = dΦ/dt."""
    return evaluate(model, q, None, True, data).J.copy()


def constraint_bias(model, q, v, data=None):
    """γ = -J̇(q, v) v (m,), so that consistent accelerations satisfy J q̈ = γ."""
    return evaluate(model, q, v, False, data).gamma.copy()


def constraints(model, q, v=None, data=None):
    """(Φ, J, γ) in one pass; γ is None when ``v`` is None."""
    w = evaluate(model, q, v, True, data)
    return w.Phi.copy(), w.J.copy(), (None if v is None else w.gamma.copy())


@dataclass(frozen=True)
class RankInfo:
    """Rank of J at a configuration and the rows kept as an independent set.

    ``independent`` and ``dropped`` index the m rows; ``singular_values`` of J;
    ``condition`` = σ_max / σ_rank of the independent rows.
    """

    rank: int
    independent: np.ndarray
    dropped: np.ndarray
    singular_values: np.ndarray
    condition: float


# singular values of J below RANK_FLOOR σ_max count as dependent rows, as those below
# 10 max(m, nv) ε σ_max (J's rounding) do: kept, such a row makes cond(J) > 1e11, and
# the methods' float64 solves, which square it (J M⁻¹ Jᵀ, the KKT pivots), fail there
# (hypothesis seeds 20261152 at 7.7e-13 and 9.9e-13, 20261184 and 20261188 at 5.1e-12
# and 3.8e-12); dropped, it must hold at its own scale (``methods.dynamics._broken_rows``)
# or the state is called singular
RANK_FLOOR = 1e-11
# ... and singular values below the smallest normal float (2.2e-308) are dependent too
ABS_FLOOR = float(np.finfo(float).tiny)


def rank_tolerance(shape, sv):
    """``constraint_rank``'s default tolerance for a J of ``shape`` with singular values
    ``sv`` (descending): max(10 · max(shape) · ε, ``RANK_FLOOR``) · σ_max, and no less than
    ``ABS_FLOOR``.  Every rank decision on closure rows uses it (``ld.partition`` too):
    two tolerances disagree at states a hair off the constraint manifold, where the rows
    of redundant closures are independent to the order of |Φ|."""
    smax = sv[0] if len(sv) else 0.0
    # and none below the normal range: a row of subnormal entries (a ball closure
    # 2.2e-313 m off a hinge's axis, hypothesis seed 20261160) has lost significant
    # bits, and no power of two brings it to 1 without overflowing its multiplier
    return max(max(10.0 * max(shape) * np.finfo(float).eps, RANK_FLOOR) * smax, ABS_FLOOR)


def constraint_rank(model, q, tol=None, data=None):
    """Numerical rank of J(q) by pivoted QR of Jᵀ, and an independent row set.

    The rank counts the singular values of J above ``tol``, by default
    max(10 · max(m, nv) · ε, ``RANK_FLOOR``) · σ_max: relative to J's own scale (rows
    mix lengths and angles, columns metres and radians, so no absolute threshold fits
    every model), with the usual factor of the matrix size for the rounding of the
    rows, no smaller than 1e-11 of the largest, nor than the smallest normal float
    (``ABS_FLOOR``: subnormal rows are dependent).  Rows
    are then chosen greedily by the QR's pivoting (the most independent first) and
    returned sorted.
    """
    import scipy.linalg as sla

    if tol is not None:
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            tol = -1.0
        if not (np.isfinite(tol) and tol >= 0.0):
            raise ValueError(f"{model.name}: tol must be a finite number >= 0, got {tol!r}")
    J = constraint_jacobian(model, q, data)
    if model.m == 0:
        e = np.zeros(0, dtype=np.int64)
        return RankInfo(0, e, e, np.zeros(0), 1.0)
    sv = np.linalg.svd(J, compute_uv=False)
    rank = int(np.sum(sv > (rank_tolerance(J.shape, sv) if tol is None else tol)))
    _, _, piv = sla.qr(J.T, mode="economic", pivoting=True)
    keep = np.sort(piv[:rank])
    drop = np.sort(piv[rank:])
    cond = float(sv[0] / sv[rank - 1]) if rank > 0 else np.inf
    return RankInfo(rank, keep.astype(np.int64), drop.astype(np.int64), sv, cond)


def degrees_of_freedom(model, q=None, data=None):
    """The mobility nv - rank J(q) at ``q`` (default ``model.q0``); nv for a tree."""
    if model_arg(model).m == 0:
        return model.nv
    return model.nv - constraint_rank(model, model.q0 if q is None else q, data=data).rank
