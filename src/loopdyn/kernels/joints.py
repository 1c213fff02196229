"""Joint kinematics, body by body: the pose of a body in its parent, its motion subspace
S, its velocity and its velocity-product acceleration (RBDA Sec. 4.4, Table 4.1).

The joint table is in ``loopdyn.model.joints``.  Body quantities are in the body
frame (the joint's child frame).  Kernels on the ``(m, d)`` handles
(``loopdyn.kernels.views``), one body ``i`` per call.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.numba_internals import unliteral
from loopdyn.kernels.spatial import motion_to_child_at
from loopdyn.model.joints import FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL


@njit(cache=True)
def rodrigues(x, y, z, theta):
    """R = exp(θ [axis]×) for a unit axis, as a row-major 9-tuple."""
    c = np.cos(theta)
    s = np.sin(theta)
    t = 1.0 - c
    return (
        t * x * x + c,
        t * x * y - s * z,
        t * x * z + s * y,
        t * x * y + s * z,
        t * y * y + c,
        t * y * z - s * x,
        t * x * z - s * y,
        t * y * z + s * x,
        t * z * z + c,
    )


@njit(cache=True)
def quaternion_rotation(q, k):
    """Rotation of the quaternion ``q[k:k+4]`` (w, x, y, z), normalised on the fly."""
    w, x, y, z = q[k], q[k + 1], q[k + 2], q[k + 3]
    s = 2.0 / (w * w + x * x + y * y + z * z)
    return (
        1.0 - s * (y * y + z * z),
        s * (x * y - w * z),
        s * (x * z + w * y),
        s * (x * y + w * z),
        1.0 - s * (x * x + z * z),
        s * (y * z - w * x),
        s * (x * z - w * y),
        s * (y * z + w * x),
        1.0 - s * (x * x + y * y),
    )


@njit(cache=True, inline="always")
def s_block(jtype):
    """``(first row, number of rows)`` of the part of S that may be non-zero.

    ``(0, 3)``: angular only (revolute, universal, spherical); ``(3, 3)``: linear
    only (prismatic); ``(0, 6)`` otherwise (free).
    """
    if jtype == REVOLUTE or jtype == UNIVERSAL or jtype == SPHERICAL:
        return 0, 3
    if jtype == PRISMATIC:
        return 3, 3
    return 0, 6


@njit(cache=True, inline="always")
def s_dot(S, j, jt, k, f0, f1, f2, f3, f4, f5):
    """Column k of body j's motion subspace (joint type ``jt``) times the force
    ``f``: S_kᵀ f, over the rows of S that may be non-zero only (``s_block``), so the
    same sum as the full product (a product with an exact zero of S adds nothing).
    Spherical and free joints (S = [1; 0], S = 1): f's k-th entry, no product."""
    if jt == SPHERICAL or jt == FREE:
        return (f0, f1, f2, f3, f4, f5)[k]
    if jt == PRISMATIC:
        return S[j, 3, k] * f3 + S[j, 4, k] * f4 + S[j, 5, k] * f5
    return S[j, 0, k] * f0 + S[j, 1, k] * f1 + S[j, 2, k] * f2


@njit(cache=True)
def joint_pose(m, d, i, q):
    """``d.Xrel[i]``: the pose of body i in its parent; ``d.S[i]``: its motion subspace.

    X = X_tree X_J(q): R = R_tree R_J, p = p_tree + R_tree p_J (parent frame).
    """
    topo, jgeom, Xrel, S = m.topo, m.jgeom, d.Xrel, d.S
    jt = topo[i, 1]
    iq = topo[i, 2]
    pj0 = pj1 = pj2 = 0.0
    if jt == REVOLUTE:
        R = rodrigues(jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2], q[iq])
        for r in range(3):
            S[i, r, 0] = jgeom[i, 4, r]
            S[i, 3 + r, 0] = 0.0
    elif jt == UNIVERSAL:
        # R = R1(θ1) R2(θ2); ω_body = R2ᵀ a1 θ̇1 + a2 θ̇2
        A = rodrigues(jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2], q[iq])
        B = rodrigues(jgeom[i, 5, 0], jgeom[i, 5, 1], jgeom[i, 5, 2], q[iq + 1])
        R = (
            A[0] * B[0] + A[1] * B[3] + A[2] * B[6],
            A[0] * B[1] + A[1] * B[4] + A[2] * B[7],
            A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
            A[3] * B[0] + A[4] * B[3] + A[5] * B[6],
            A[3] * B[1] + A[4] * B[4] + A[5] * B[7],
            A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
            A[6] * B[0] + A[7] * B[3] + A[8] * B[6],
            A[6] * B[1] + A[7] * B[4] + A[8] * B[7],
            A[6] * B[2] + A[7] * B[5] + A[8] * B[8],
        )
        a0, a1, a2 = jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2]
        S[i, 0, 0] = B[0] * a0 + B[3] * a1 + B[6] * a2
        S[i, 1, 0] = B[1] * a0 + B[4] * a1 + B[7] * a2
        S[i, 2, 0] = B[2] * a0 + B[5] * a1 + B[8] * a2
        for r in range(3):
            S[i, r, 1] = jgeom[i, 5, r]
            S[i, 3 + r, 0] = 0.0
            S[i, 3 + r, 1] = 0.0
    elif jt == PRISMATIC:
        R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
        s = q[iq]
        pj0, pj1, pj2 = jgeom[i, 4, 0] * s, jgeom[i, 4, 1] * s, jgeom[i, 4, 2] * s
        for r in range(3):
            S[i, r, 0] = 0.0
            S[i, 3 + r, 0] = jgeom[i, 4, r]
    elif jt == SPHERICAL:
        R = quaternion_rotation(q, iq)
        for r in range(6):
            for c in range(3):
                S[i, r, c] = 1.0 if r == c else 0.0
    elif jt == FREE:
        pj0, pj1, pj2 = q[iq], q[iq + 1], q[iq + 2]
        R = quaternion_rotation(q, iq + 3)
        for r in range(6):
            for c in range(6):
                S[i, r, c] = 1.0 if r == c else 0.0
    else:  # FIXED
        R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    for r in range(3):
        t0, t1, t2 = jgeom[i, r, 0], jgeom[i, r, 1], jgeom[i, r, 2]
        Xrel[i, r, 0] = t0 * R[0] + t1 * R[3] + t2 * R[6]
        Xrel[i, r, 1] = t0 * R[1] + t1 * R[4] + t2 * R[7]
        Xrel[i, r, 2] = t0 * R[2] + t1 * R[5] + t2 * R[8]
        Xrel[i, 3, r] = jgeom[i, 3, r] + t0 * pj0 + t1 * pj1 + t2 * pj2


@njit(cache=True, inline="always")  # a call of joint_velocity in each caller's loop
def body_velocity(m, d, i, v):
    """``d.V[i]`` = iXλ V_λ + S q̇ and ``d.C[i]`` = V ×m (S q̇) + Ṡ q̇ (body frame).

    Requires ``joint_pose`` for body i and ``V`` for its parent.
    """
    joint_velocity(m, d, i, v, d.V, d.C, unliteral(-1))


# compiled once and called (not inline="always"): body_velocity (inlined into the
# velocity passes, so one call per body as before) and the closures' relative motions
# each held a copy, ~2 s of a cold start's compilation; only fk_kernel, the pass every
# method starts with, inlines it (``joint_velocity_inline``)
@njit(cache=True)
def joint_velocity(m, d, i, v, V, C, root):
    """``V[i]`` = iXλ V_λ + S q̇ and ``C[i]`` = V ×m (S q̇) + Ṡ q̇ (body frame), with
    V_λ = 0 where λ is body ``root`` or the ground: body i's motion relative to
    ``root`` (-1: the absolute motion, ``body_velocity``)."""
    joint_velocity_inline(m, d, i, v, V, C, root)


# fk_kernel's body loop inlines it: the call per body cost ~17 ns of the four-bar's
# ~60 (its array arguments pass through memory); the velocity pass of fk went
# 105 -> 55 ns for the four-bar's three bodies
@njit(cache=True, inline="always")
def joint_velocity_inline(m, d, i, v, V, C, root):
    """``joint_velocity`` for the one loop that inlines it (``fk_kernel``)."""
    topo, Xrel, S = m.topo, d.Xrel, d.S
    lam = topo[i, 0]
    iv = topo[i, 3]
    nvj = topo[i, 5]
    jt = topo[i, 1]
    # vJ = S q̇, the exact zeros of S skipped (the same sums: a product with S's zero
    # entries adds nothing): S = [1; 0] for a spherical joint, one angular column for a
    # revolute one
    j0 = j1 = j2 = j3 = j4 = j5 = 0.0
    if jt == SPHERICAL:
        j0, j1, j2 = v[iv], v[iv + 1], v[iv + 2]
    elif jt == REVOLUTE:
        x = v[iv]
        j0, j1, j2 = S[i, 0, 0] * x, S[i, 1, 0] * x, S[i, 2, 0] * x
    else:
        for k in range(nvj):
            x = v[iv + k]
            j0 += S[i, 0, k] * x
            j1 += S[i, 1, k] * x
            j2 += S[i, 2, k] * x
            j3 += S[i, 3, k] * x
            j4 += S[i, 4, k] * x
            j5 += S[i, 5, k] * x
    if lam >= 0 and lam != root:
        m0, m1, m2, m3, m4, m5 = motion_to_child_at(
            Xrel, i, V[lam, 0], V[lam, 1], V[lam, 2], V[lam, 3], V[lam, 4], V[lam, 5]
        )
        w0, w1, w2, w3, w4, w5 = m0 + j0, m1 + j1, m2 + j2, m3 + j3, m4 + j4, m5 + j5
    else:
        w0, w1, w2, w3, w4, w5 = j0, j1, j2, j3, j4, j5
    V[i, 0] = w0
    V[i, 1] = w1
    V[i, 2] = w2
    V[i, 3] = w3
    V[i, 4] = w4
    V[i, 5] = w5
    # cJ = Ṡ q̇: non-zero only for the universal joint (a1 rotates with θ2)
    c0 = c1 = c2 = 0.0
    if jt == UNIVERSAL:
        d12 = v[iv] * v[iv + 1]
        c0 = (S[i, 1, 0] * S[i, 2, 1] - S[i, 2, 0] * S[i, 1, 1]) * d12
        c1 = (S[i, 2, 0] * S[i, 0, 1] - S[i, 0, 0] * S[i, 2, 1]) * d12
        c2 = (S[i, 0, 0] * S[i, 1, 1] - S[i, 1, 0] * S[i, 0, 1]) * d12
    # C = V ×m vJ + cJ
    C[i, 0] = (w1 * j2 - w2 * j1) + c0
    C[i, 1] = (w2 * j0 - w0 * j2) + c1
    C[i, 2] = (w0 * j1 - w1 * j0) + c2
    C[i, 3] = w1 * j5 - w2 * j4 + w4 * j2 - w5 * j1
    C[i, 4] = w2 * j3 - w0 * j5 + w5 * j0 - w3 * j2
    C[i, 5] = w0 * j4 - w1 * j3 + w3 * j1 - w4 * j0


@njit(cache=True, inline="always")
def world_pose(m, d, i):
    """``d.Xw[i]`` = Xw[λ] Xrel[i]: the pose of body i in the world."""
    Xrel, Xw = d.Xrel, d.Xw
    lam = m.topo[i, 0]
    if lam < 0:
        for r in range(4):
            for c in range(3):
                Xw[i, r, c] = Xrel[i, r, c]
        return
    for r in range(3):
        a0, a1, a2 = Xw[lam, r, 0], Xw[lam, r, 1], Xw[lam, r, 2]
        for c in range(3):
            Xw[i, r, c] = a0 * Xrel[i, 0, c] + a1 * Xrel[i, 1, c] + a2 * Xrel[i, 2, c]
        Xw[i, 3, r] = Xw[lam, 3, r] + a0 * Xrel[i, 3, 0] + a1 * Xrel[i, 3, 1] + a2 * Xrel[i, 3, 2]
