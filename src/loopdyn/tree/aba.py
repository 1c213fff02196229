"""Articulated-body forward dynamics of the spanning tree, O(n) (RBDA Table 7.1).

Performance notes: the kernel indexes the workspace arrays directly, skips the exact-zero block of
``S`` (revolute, universal and spherical joints are purely angular, prismatic
purely linear), has a scalar path for 1-DOF joints, and updates only the upper
triangle of the symmetric articulated inertia.  For spherical (S = [1; 0]) and
free (S = 1) joints the parts of Ia that are exactly zero are set, not computed,
as Pinocchio does; their 3×3 (and the universal joint's 2×2) Sᵀ IA S is inverted
by an unrolled LDLᵀ (``invert_spd3``).  Skipping exact zeros changes no rounding; the
symmetric update, the exact zeros and the unrolled inverses change results at the
rounding level only.
"""

from numba import njit

from loopdyn.kernels.joints import body_velocity, joint_pose, s_block
from loopdyn.kernels.numba_internals import unliteral
from loopdyn.kernels.spatial import (
    force_to_parent_at,
    inertia_to_parent_add,
    motion_to_child_at,
    rigid_inertia_times_at,
)
from loopdyn.model.joints import FREE, SPHERICAL


@njit(cache=True)
def invert_spd_inplace(A, n):
    """Gauss-Jordan inverse of the leading n×n block of A, in place (A SPD, no pivoting).

    Returns False if a pivot is not positive (A singular or indefinite).
    """
    for k in range(n):
        piv = A[k, k]
        if not piv > 0.0:
            return False
        inv = 1.0 / piv
        A[k, k] = 1.0
        for j in range(n):
            A[k, j] *= inv
        for i in range(n):
            if i != k:
                f = A[i, k]
                A[i, k] = 0.0
                for j in range(n):
                    A[i, j] -= f * A[k, j]
    return True


@njit(cache=True, inline="always")
def invert_spd3(D, i):
    """D[i, :3, :3] ← its inverse, for a symmetric positive definite 3×3 block (lower
    triangle read), unrolled: D = L P Lᵀ (L unit lower, P = diag(p0, p1, p2)), then
    D⁻¹ = L⁻ᵀ P⁻¹ L⁻¹ (three divisions, no square root).  Returns False if a pivot is
    not positive (the pivots of ``invert_spd_inplace``'s elimination)."""
    d00, d10, d20 = D[i, 0, 0], D[i, 1, 0], D[i, 2, 0]
    d11, d21, d22 = D[i, 1, 1], D[i, 2, 1], D[i, 2, 2]
    if not d00 > 0.0:
        return False
    i0 = 1.0 / d00
    l10, l20 = d10 * i0, d20 * i0
    p1 = d11 - l10 * d10
    if not p1 > 0.0:
        return False
    i1 = 1.0 / p1
    e21 = d21 - l20 * d10  # p1 l21
    l21 = e21 * i1
    p2 = d22 - l20 * d20 - l21 * e21
    if not p2 > 0.0:
        return False
    i2 = 1.0 / p2
    # L⁻¹ = [[1, 0, 0], [n10, 1, 0], [n20, n21, 1]]
    n10, n21 = -l10, -l21
    n20 = l21 * l10 - l20
    x01 = n10 * i1 + n20 * n21 * i2
    x02 = n20 * i2
    x12 = n21 * i2
    D[i, 0, 0] = i0 + n10 * n10 * i1 + n20 * n20 * i2
    D[i, 0, 1] = x01
    D[i, 1, 0] = x01
    D[i, 0, 2] = x02
    D[i, 2, 0] = x02
    D[i, 1, 1] = i1 + n21 * n21 * i2
    D[i, 1, 2] = x12
    D[i, 2, 1] = x12
    D[i, 2, 2] = i2
    return True


@njit(cache=True, inline="always")
def invert_spd2(D, i):
    """``invert_spd3`` for a 2×2 block (universal joints)."""
    d00, d10, d11 = D[i, 0, 0], D[i, 1, 0], D[i, 1, 1]
    if not d00 > 0.0:
        return False
    i0 = 1.0 / d00
    l10 = d10 * i0
    p1 = d11 - l10 * d10
    if not p1 > 0.0:
        return False
    i1 = 1.0 / p1
    x01 = -l10 * i1
    D[i, 0, 0] = i0 + l10 * l10 * i1
    D[i, 0, 1] = x01
    D[i, 1, 0] = x01
    D[i, 1, 1] = i1
    return True


@njit(cache=True)
def aba_kernel(m, d, q, v, tau, fext, qdd):
    """q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) by the articulated-body algorithm.

    In: ``q`` (nq), ``v``, ``tau`` (nv); ``fext`` (nb, 6) wrenches ``[n; f]`` on each
    body in the body frame about its origin (shape (0, 6) for none); gravity (3,)
    in the world frame.  Out: ``qdd`` (nv).  Returns -1 on success, else the index
    of the body whose articulated inertia Sᵀ IA S is singular.  Body-frame
    quantities left in ``d``: velocity ``V``, acceleration ``A``, bias ``C``, and the
    factors ``U`` = IA S, ``Dinv`` = (Sᵀ IA S)⁻¹ that ``aba_resolve`` reuses.
    """
    return aba_bodies(m, d, unliteral(0), m.nb, q, v, tau, fext, qdd)


@njit(cache=True)
def aba_bodies(m, d, b0, b1, q, v, tau, fext, qdd):
    """``aba_kernel`` on bodies b0..b1-1 only, a set of whole trees hanging from the ground
    (an SSLM subsystem): only their entries of ``qdd`` and of the workspace are written."""
    for i in range(b0, b1):
        joint_pose(m, d, i, q)
        body_velocity(m, d, i, v)
    return aba_from_kinematics(m, d, b0, b1, tau, fext, qdd)


@njit(cache=True)
def aba_from_kinematics(m, d, b0, b1, tau, fext, qdd):
    """``aba_bodies`` when the poses, S, velocities V and velocity products C of the
    bodies are already in ``d`` (``kinematics.frames.fk_kernel``): the methods that
    ran the kinematics for their closure terms reuse them."""
    topo, inertia, gravity = m.topo, m.inertia, m.gravity
    Xrel, S, V, A, C, pA, u = d.Xrel, d.S, d.V, d.A, d.C, d.pA, d.u
    IA, U, Dinv, TM, T1 = d.IA, d.U, d.Dinv, d.TM, d.T1
    has_f = fext.shape[0] > 0
    # pass 1, root to leaves: IA_i = I_i, pA_i = v ×f I v - fext
    for i in range(b0, b1):
        for r in range(6):
            for c in range(6):
                IA[i, r, c] = inertia[i, r, c]
        v0, v1, v2 = V[i, 0], V[i, 1], V[i, 2]
        v3, v4, v5 = V[i, 3], V[i, 4], V[i, 5]
        # h = I v ; pA = v ×f h - fext
        h0, h1, h2, h3, h4, h5 = rigid_inertia_times_at(inertia, i, v0, v1, v2, v3, v4, v5)
        p0 = v1 * h2 - v2 * h1 + v4 * h5 - v5 * h4
        p1 = v2 * h0 - v0 * h2 + v5 * h3 - v3 * h5
        p2 = v0 * h1 - v1 * h0 + v3 * h4 - v4 * h3
        p3 = v1 * h5 - v2 * h4
        p4 = v2 * h3 - v0 * h5
        p5 = v0 * h4 - v1 * h3
        if has_f:
            p0 -= fext[i, 0]
            p1 -= fext[i, 1]
            p2 -= fext[i, 2]
            p3 -= fext[i, 3]
            p4 -= fext[i, 4]
            p5 -= fext[i, 5]
        pA[i, 0] = p0
        pA[i, 1] = p1
        pA[i, 2] = p2
        pA[i, 3] = p3
        pA[i, 4] = p4
        pA[i, 5] = p5
    # pass 2, leaves to root: U = IA S, D = Sᵀ U, u = τ - Sᵀ pA, project onto the parent
    for i in range(b1 - 1, b0 - 1, -1):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        jt = topo[i, 1]
        lam = topo[i, 0]
        s0, sn = s_block(jt)
        if nvj == 1:
            # scalar joint: U = IA s, D = sᵀ U, u = τ - sᵀ pA
            Di = 0.0
            ui = tau[iv]
            for r in range(6):
                s = 0.0
                for c in range(s0, s0 + sn):
                    s += IA[i, r, c] * S[i, c, 0]
                U[i, r, 0] = s
            for c in range(s0, s0 + sn):
                Di += S[i, c, 0] * U[i, c, 0]
                ui -= S[i, c, 0] * pA[i, c]
            if not Di > 0.0:
                return i
            dinv = 1.0 / Di
            Dinv[i, 0, 0] = dinv
            u[i, 0] = ui
            if lam >= 0:
                # Ia = IA - U D⁻¹ Uᵀ ; pa = pA + U D⁻¹ u   (eqs. 7.34-7.35)
                for r in range(6):
                    w = U[i, r, 0] * dinv
                    pA[i, r] += w * ui
                    for c in range(r, 6):
                        IA[i, r, c] -= w * U[i, c, 0]
        else:
            if jt == SPHERICAL or jt == FREE:
                # S = [1; 0] or 1: U is a copy of IA's first nvj columns
                for r in range(6):
                    for k in range(nvj):
                        U[i, r, k] = IA[i, r, k]
                for k in range(nvj):
                    u[i, k] = tau[iv + k] - pA[i, k]
                    for kk in range(nvj):
                        Dinv[i, k, kk] = IA[i, k, kk]
            else:
                for k in range(nvj):
                    for r in range(6):
                        s = 0.0
                        for c in range(s0, s0 + sn):
                            s += IA[i, r, c] * S[i, c, k]
                        U[i, r, k] = s
                    s = tau[iv + k]
                    for c in range(s0, s0 + sn):
                        s -= S[i, c, k] * pA[i, c]
                    u[i, k] = s
                for k in range(nvj):
                    for kk in range(nvj):
                        s = 0.0
                        for c in range(s0, s0 + sn):
                            s += S[i, c, k] * U[i, c, kk]
                        Dinv[i, k, kk] = s
            if nvj == 3:  # spherical: unrolled, as the 2×2 of a universal joint
                if not invert_spd3(Dinv, i):
                    return i
            elif nvj == 2:
                if not invert_spd2(Dinv, i):
                    return i
            elif not invert_spd_inplace(Dinv[i], nvj):
                return i
            if lam >= 0 and jt == FREE:
                # S = 1: W = U D⁻¹ = 1 and Ia = IA - W Uᵀ = 0 exactly; pa = pA + u
                # (as Pinocchio's free-flyer); only pa reaches the parent
                for r in range(6):
                    pA[i, r] += u[i, r]
                _force_to_parent_add(Xrel, i, pA, lam)
                continue
            if lam >= 0 and jt == SPHERICAL:
                # S = [1; 0]: W = U D⁻¹ = [1; Wb] with Wb = IA[3:, :3] D⁻¹, so Ia = IA - W Uᵀ
                # is zero but for its lower-right block IA[3:, 3:] - Wb IA[:3, 3:]
                for r in range(3):
                    for k in range(3):
                        s = 0.0
                        for kk in range(3):
                            s += U[i, 3 + r, kk] * Dinv[i, kk, k]
                        TM[i, 3 + r, k] = s
                for r in range(3):
                    pA[i, r] += u[i, r]
                    s = 0.0
                    for k in range(3):
                        s += TM[i, 3 + r, k] * u[i, k]
                    pA[i, 3 + r] += s
                    for c in range(r, 3):
                        s = 0.0
                        for k in range(3):
                            s += TM[i, 3 + r, k] * U[i, 3 + c, k]
                        IA[i, 3 + r, 3 + c] -= s
                    for c in range(r, 6):
                        IA[i, r, c] = 0.0
            elif lam >= 0:
                # W = U D⁻¹ ; Ia = IA - W Uᵀ ; pa = pA + W u   (eqs. 7.34-7.35)
                for r in range(6):
                    for k in range(nvj):
                        s = 0.0
                        for kk in range(nvj):
                            s += U[i, r, kk] * Dinv[i, kk, k]
                        TM[i, r, k] = s
                for r in range(6):
                    s = 0.0
                    for k in range(nvj):
                        s += TM[i, r, k] * u[i, k]
                    pA[i, r] += s
                    for c in range(r, 6):
                        s = 0.0
                        for k in range(nvj):
                            s += TM[i, r, k] * U[i, c, k]
                        IA[i, r, c] -= s
        if lam >= 0:
            # symmetric Ia from its upper triangle; pa += Ia c; add both to the parent
            for r in range(1, 6):
                for c in range(r):
                    IA[i, r, c] = IA[i, c, r]
            c0, c1, c2 = C[i, 0], C[i, 1], C[i, 2]
            c3, c4, c5 = C[i, 3], C[i, 4], C[i, 5]
            for r in range(6):
                pA[i, r] += (
                    IA[i, r, 0] * c0
                    + IA[i, r, 1] * c1
                    + IA[i, r, 2] * c2
                    + IA[i, r, 3] * c3
                    + IA[i, r, 4] * c4
                    + IA[i, r, 5] * c5
                )
            inertia_to_parent_add(Xrel[i, :3], Xrel[i, 3], IA[i], IA[lam], TM[i])
            _force_to_parent_add(Xrel, i, pA, lam)
    # pass 3, root to leaves: a' = iXλ a_λ + c, q̈ = D⁻¹ (u - Uᵀ a'), a = a' + S q̈
    for i in range(b0, b1):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        lam = topo[i, 0]
        if lam >= 0:
            m0, m1, m2 = A[lam, 0], A[lam, 1], A[lam, 2]
            m3, m4, m5 = A[lam, 3], A[lam, 4], A[lam, 5]
        else:
            m0 = m1 = m2 = 0.0
            m3, m4, m5 = -gravity[0], -gravity[1], -gravity[2]
        a = motion_to_child_at(Xrel, i, m0, m1, m2, m3, m4, m5)
        for r in range(6):
            A[i, r] = a[r] + C[i, r]
        if nvj == 1:
            s = u[i, 0]
            for r in range(6):
                s -= U[i, r, 0] * A[i, r]
            x = Dinv[i, 0, 0] * s
            qdd[iv] = x
            s0, sn = s_block(topo[i, 1])
            for r in range(s0, s0 + sn):
                A[i, r] += S[i, r, 0] * x
        elif nvj > 1:
            for k in range(nvj):
                s = u[i, k]
                for r in range(6):
                    s -= U[i, r, k] * A[i, r]
                T1[i, k] = s
            for k in range(nvj):
                s = 0.0
                for kk in range(nvj):
                    s += Dinv[i, k, kk] * T1[i, kk]
                qdd[iv + k] = s
            s0, sn = s_block(topo[i, 1])
            for r in range(s0, s0 + sn):
                s = 0.0
                for k in range(nvj):
                    s += S[i, r, k] * qdd[iv + k]
                A[i, r] += s
    return -1


@njit(cache=True)
def _force_to_parent_add(Xrel, i, pA, lam):
    """pA_λ += iXλᵀ pa_i."""
    f = force_to_parent_at(
        Xrel, i, pA[i, 0], pA[i, 1], pA[i, 2],
        pA[i, 3], pA[i, 4], pA[i, 5],
    )  # fmt: skip
    for r in range(6):
        pA[lam, r] += f[r]


@njit(cache=True)
def aba_resolve(m, d, fext, tl, qdd):
    """q̈ = M⁻¹ (tl + Σ Jᵀ fext): the accelerations due to loads alone, O(n).

    Reuses the factorisation ``aba_kernel`` left in ``d`` (``U`` = IA S and
    ``Dinv`` = (Sᵀ IA S)⁻¹ per joint) and the poses ``Xrel``, for one more
    right-hand side with zero velocity and no gravity: the articulated-body force
    pass (RBDA eqs. 7.34–7.35 with pA = -fext, u = tl - Sᵀ pA) inward, then the
    acceleration pass outward from a fixed ground.  ``fext`` (nb, 6): body-frame
    wrenches ``[n; f]`` about the body origins; ``tl`` (nv): joint forces (size 0:
    none).  Overwrites ``pA``, ``u``, ``A`` and ``T1``.  Anderson & Critchley's ζ
    columns (their eqs. (15)–(17) inward with the cut-joint loads, (25), (28)–(29)
    outward).
    """
    nb = m.nb
    topo, Xrel, S = m.topo, d.Xrel, d.S
    A, pA, u, T1, U, Dinv = d.A, d.pA, d.u, d.T1, d.U, d.Dinv
    has_tl = tl.shape[0] > 0
    for i in range(nb):
        for r in range(6):
            pA[i, r] = -fext[i, r]
    for i in range(nb - 1, -1, -1):
        nvj = topo[i, 5]
        lam = topo[i, 0]
        iv = topo[i, 3]
        # u = tl - Sᵀ pA ; pa = pA + U D⁻¹ u
        for k in range(nvj):
            s = tl[iv + k] if has_tl else 0.0
            for c in range(6):
                s -= S[i, c, k] * pA[i, c]
            T1[i, k] = s
        for k in range(nvj):
            s = 0.0
            for kk in range(nvj):
                s += Dinv[i, k, kk] * T1[i, kk]
            u[i, k] = s  # D⁻¹ u
        if lam >= 0:
            for r in range(6):
                s = pA[i, r]
                for k in range(nvj):
                    s += U[i, r, k] * u[i, k]
                pA[i, r] = s
            _force_to_parent_add(Xrel, i, pA, lam)
    for i in range(nb):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        lam = topo[i, 0]
        if lam >= 0:
            a = motion_to_child_at(
                Xrel, i, A[lam, 0], A[lam, 1], A[lam, 2], A[lam, 3], A[lam, 4], A[lam, 5]
            )
            for r in range(6):
                A[i, r] = a[r]
        else:
            for r in range(6):
                A[i, r] = 0.0
        # q̈ = D⁻¹ u - D⁻¹ Uᵀ a' ; a = a' + S q̈
        for k in range(nvj):
            s = 0.0
            for r in range(6):
                s += U[i, r, k] * A[i, r]
            T1[i, k] = s
        for k in range(nvj):
            s = u[i, k]
            for kk in range(nvj):
                s -= Dinv[i, k, kk] * T1[i, kk]
            qdd[iv + k] = s
        for r in range(6):
            s = 0.0
            for k in range(nvj):
                s += S[i, r, k] * qdd[iv + k]
            A[i, r] += s
