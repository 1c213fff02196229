"""Articulated-body forward dynamics of the spanning tree, O(n) (RBDA Table 7.1).

Performance notes: the kernel indexes ``Data``'s arrays directly (an array view
costs two atomic reference-count updates in numba), skips the exact-zero block of
``S`` (revolute, universal and spherical joints are purely angular, prismatic
purely linear), has a scalar path for 1-DOF joints, and updates only the upper
triangle of the symmetric articulated inertia.  For spherical (S = [1; 0]) and
free (S = 1) joints the parts of Ia that are exactly zero are set, not computed,
as Pinocchio does.  Skipping exact zeros changes no rounding; the symmetric
update and the exact zeros change results at the rounding level only.
"""

from numba import njit

from loopdyn.kernels.spatial import (
    force_to_parent_at,
    inertia_to_parent_add,
    mat6_vec_at,
    motion_to_child_at,
)
from loopdyn.kinematics.frames import body_pose, body_velocity, s_block
from loopdyn.model.joints import FREE, SPHERICAL

# rows of Data.vec6 and Data.mat6
_V, _A, _C, _PA, _U6, _T1 = 0, 1, 2, 3, 4, 8
_IA, _U, _DINV, _TM = 0, 1, 2, 3


@njit(cache=True, inline="always")
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


@njit(cache=True)
def aba_kernel(topo, jgeom, inertia, gravity, q, v, tau, fext, Xrel, S, vec6, mat6, tmp33, qdd):
    """q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) by the articulated-body algorithm.

    In: ``q`` (nq), ``v``, ``tau`` (nv); ``fext`` (nb, 6) wrenches ``[n; f]`` on each
    body in the body frame about its origin (shape (0, 6) for none); gravity (3,)
    in the world frame.  Out: ``qdd`` (nv).  Returns -1 on success, else the index
    of the body whose articulated inertia Sᵀ IA S is singular.  Body-frame
    ``Data`` rows left behind: velocity ``V``, acceleration ``A``, bias ``C``.
    """
    nb = topo.shape[0]
    has_f = fext.shape[0] > 0
    # pass 1, root to leaves: kinematics, IA_i = I_i, pA_i = v ×f I v - fext
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        body_velocity(i, topo, v, Xrel, S, vec6)
        for r in range(6):
            for c in range(6):
                mat6[i, _IA, r, c] = inertia[i, r, c]
        v0, v1, v2 = vec6[i, _V, 0], vec6[i, _V, 1], vec6[i, _V, 2]
        v3, v4, v5 = vec6[i, _V, 3], vec6[i, _V, 4], vec6[i, _V, 5]
        # h = I v ; pA = v ×f h - fext
        h0, h1, h2, h3, h4, h5 = mat6_vec_at(inertia, i, v0, v1, v2, v3, v4, v5)
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
        vec6[i, _PA, 0] = p0
        vec6[i, _PA, 1] = p1
        vec6[i, _PA, 2] = p2
        vec6[i, _PA, 3] = p3
        vec6[i, _PA, 4] = p4
        vec6[i, _PA, 5] = p5
    # pass 2, leaves to root: U = IA S, D = Sᵀ U, u = τ - Sᵀ pA, project onto the parent
    for i in range(nb - 1, -1, -1):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        jt = topo[i, 1]
        lam = topo[i, 0]
        b0, bn = s_block(jt)
        if nvj == 1:
            # scalar joint: U = IA s, D = sᵀ U, u = τ - sᵀ pA
            d = 0.0
            u = tau[iv]
            for r in range(6):
                s = 0.0
                for c in range(b0, b0 + bn):
                    s += mat6[i, _IA, r, c] * S[i, c, 0]
                mat6[i, _U, r, 0] = s
            for c in range(b0, b0 + bn):
                d += S[i, c, 0] * mat6[i, _U, c, 0]
                u -= S[i, c, 0] * vec6[i, _PA, c]
            if not d > 0.0:
                return i
            dinv = 1.0 / d
            mat6[i, _DINV, 0, 0] = dinv
            vec6[i, _U6, 0] = u
            if lam >= 0:
                # Ia = IA - U D⁻¹ Uᵀ ; pa = pA + U D⁻¹ u   (eqs. 7.34-7.35)
                for r in range(6):
                    w = mat6[i, _U, r, 0] * dinv
                    vec6[i, _PA, r] += w * u
                    for c in range(r, 6):
                        mat6[i, _IA, r, c] -= w * mat6[i, _U, c, 0]
        else:
            if jt == SPHERICAL or jt == FREE:
                # S = [1; 0] or 1: U is a copy of IA's first nvj columns
                for r in range(6):
                    for k in range(nvj):
                        mat6[i, _U, r, k] = mat6[i, _IA, r, k]
                for k in range(nvj):
                    vec6[i, _U6, k] = tau[iv + k] - vec6[i, _PA, k]
                    for kk in range(nvj):
                        mat6[i, _DINV, k, kk] = mat6[i, _IA, k, kk]
            else:
                for k in range(nvj):
                    for r in range(6):
                        s = 0.0
                        for c in range(b0, b0 + bn):
                            s += mat6[i, _IA, r, c] * S[i, c, k]
                        mat6[i, _U, r, k] = s
                    s = tau[iv + k]
                    for c in range(b0, b0 + bn):
                        s -= S[i, c, k] * vec6[i, _PA, c]
                    vec6[i, _U6, k] = s
                for k in range(nvj):
                    for kk in range(nvj):
                        s = 0.0
                        for c in range(b0, b0 + bn):
                            s += S[i, c, k] * mat6[i, _U, c, kk]
                        mat6[i, _DINV, k, kk] = s
            if nvj == 6:
                ok = invert_spd_inplace(mat6[i, _DINV], 6)
            elif nvj == 3:
                ok = invert_spd_inplace(mat6[i, _DINV], 3)
            else:
                ok = invert_spd_inplace(mat6[i, _DINV], nvj)
            if not ok:
                return i
            if lam >= 0 and jt == FREE:
                # S = 1: W = U D⁻¹ = 1 and Ia = IA - W Uᵀ = 0 exactly; pa = pA + u
                # (as Pinocchio's free-flyer); only pa reaches the parent
                for r in range(6):
                    vec6[i, _PA, r] += vec6[i, _U6, r]
                _force_to_parent_add(Xrel, i, vec6, lam)
                continue
            if lam >= 0 and jt == SPHERICAL:
                # S = [1; 0]: W = U D⁻¹ = [1; Wb] with Wb = IA[3:, :3] D⁻¹, so Ia = IA - W Uᵀ
                # is zero but for its lower-right block IA[3:, 3:] - Wb IA[:3, 3:]
                for r in range(3):
                    for k in range(3):
                        s = 0.0
                        for kk in range(3):
                            s += mat6[i, _U, 3 + r, kk] * mat6[i, _DINV, kk, k]
                        mat6[i, _TM, 3 + r, k] = s
                for r in range(3):
                    vec6[i, _PA, r] += vec6[i, _U6, r]
                    s = 0.0
                    for k in range(3):
                        s += mat6[i, _TM, 3 + r, k] * vec6[i, _U6, k]
                    vec6[i, _PA, 3 + r] += s
                    for c in range(r, 3):
                        s = 0.0
                        for k in range(3):
                            s += mat6[i, _TM, 3 + r, k] * mat6[i, _U, 3 + c, k]
                        mat6[i, _IA, 3 + r, 3 + c] -= s
                    for c in range(r, 6):
                        mat6[i, _IA, r, c] = 0.0
            elif lam >= 0:
                # W = U D⁻¹ ; Ia = IA - W Uᵀ ; pa = pA + W u   (eqs. 7.34-7.35)
                for r in range(6):
                    for k in range(nvj):
                        s = 0.0
                        for kk in range(nvj):
                            s += mat6[i, _U, r, kk] * mat6[i, _DINV, kk, k]
                        mat6[i, _TM, r, k] = s
                for r in range(6):
                    s = 0.0
                    for k in range(nvj):
                        s += mat6[i, _TM, r, k] * vec6[i, _U6, k]
                    vec6[i, _PA, r] += s
                    for c in range(r, 6):
                        s = 0.0
                        for k in range(nvj):
                            s += mat6[i, _TM, r, k] * mat6[i, _U, c, k]
                        mat6[i, _IA, r, c] -= s
        if lam >= 0:
            # symmetric Ia from its upper triangle; pa += Ia c; add both to the parent
            for r in range(1, 6):
                for c in range(r):
                    mat6[i, _IA, r, c] = mat6[i, _IA, c, r]
            c0, c1, c2 = vec6[i, _C, 0], vec6[i, _C, 1], vec6[i, _C, 2]
            c3, c4, c5 = vec6[i, _C, 3], vec6[i, _C, 4], vec6[i, _C, 5]
            for r in range(6):
                vec6[i, _PA, r] += (
                    mat6[i, _IA, r, 0] * c0
                    + mat6[i, _IA, r, 1] * c1
                    + mat6[i, _IA, r, 2] * c2
                    + mat6[i, _IA, r, 3] * c3
                    + mat6[i, _IA, r, 4] * c4
                    + mat6[i, _IA, r, 5] * c5
                )
            inertia_to_parent_add(
                Xrel[i, :3], Xrel[i, 3], mat6[i, _IA], mat6[lam, _IA], mat6[i, _TM]
            )
            _force_to_parent_add(Xrel, i, vec6, lam)
    # pass 3, root to leaves: a' = iXλ a_λ + c, q̈ = D⁻¹ (u - Uᵀ a'), a = a' + S q̈
    for i in range(nb):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        lam = topo[i, 0]
        if lam >= 0:
            m0, m1, m2 = vec6[lam, _A, 0], vec6[lam, _A, 1], vec6[lam, _A, 2]
            m3, m4, m5 = vec6[lam, _A, 3], vec6[lam, _A, 4], vec6[lam, _A, 5]
        else:
            m0 = m1 = m2 = 0.0
            m3, m4, m5 = -gravity[0], -gravity[1], -gravity[2]
        a = motion_to_child_at(Xrel, i, m0, m1, m2, m3, m4, m5)
        for r in range(6):
            vec6[i, _A, r] = a[r] + vec6[i, _C, r]
        if nvj == 1:
            s = vec6[i, _U6, 0]
            for r in range(6):
                s -= mat6[i, _U, r, 0] * vec6[i, _A, r]
            x = mat6[i, _DINV, 0, 0] * s
            qdd[iv] = x
            b0, bn = s_block(topo[i, 1])
            for r in range(b0, b0 + bn):
                vec6[i, _A, r] += S[i, r, 0] * x
        elif nvj > 1:
            for k in range(nvj):
                s = vec6[i, _U6, k]
                for r in range(6):
                    s -= mat6[i, _U, r, k] * vec6[i, _A, r]
                vec6[i, _T1, k] = s
            for k in range(nvj):
                s = 0.0
                for kk in range(nvj):
                    s += mat6[i, _DINV, k, kk] * vec6[i, _T1, kk]
                qdd[iv + k] = s
            b0, bn = s_block(topo[i, 1])
            for r in range(b0, b0 + bn):
                s = 0.0
                for k in range(nvj):
                    s += S[i, r, k] * qdd[iv + k]
                vec6[i, _A, r] += s
    return -1


@njit(cache=True, inline="always")
def _force_to_parent_add(Xrel, i, vec6, lam):
    """pA_λ += iXλᵀ pa_i."""
    f = force_to_parent_at(
        Xrel, i, vec6[i, _PA, 0], vec6[i, _PA, 1], vec6[i, _PA, 2],
        vec6[i, _PA, 3], vec6[i, _PA, 4], vec6[i, _PA, 5],
    )  # fmt: skip
    for r in range(6):
        vec6[lam, _PA, r] += f[r]


@njit(cache=True)
def aba_resolve(topo, Xrel, S, vec6, mat6, fext, qdd):
    """q̈ = M⁻¹ Σ Jᵀ fext: the accelerations due to body wrenches alone, O(n).

    Reuses the factorisation ``aba_kernel`` left in ``mat6`` (U = IA S and
    D⁻¹ = (Sᵀ IA S)⁻¹ per joint) and the poses ``Xrel``, for one more right-hand
    side with zero τ, zero velocity and no gravity: the articulated-body force
    pass (RBDA eqs. 7.34–7.35 with pA = -fext) inward, then the acceleration
    pass outward from a fixed ground.  ``fext`` (nb, 6): body-frame wrenches
    ``[n; f]`` about the body origins.  Overwrites the ``PA``, ``U6``, ``A`` and
    ``T1`` rows of ``vec6``.  Anderson & Critchley's ζ columns (their eqs.
    (15)–(17) inward with the cut-joint loads, (25), (28)–(29) outward).
    """
    nb = topo.shape[0]
    for i in range(nb):
        for r in range(6):
            vec6[i, _PA, r] = -fext[i, r]
    for i in range(nb - 1, -1, -1):
        nvj = topo[i, 5]
        lam = topo[i, 0]
        # u = -Sᵀ pA ; pa = pA + U D⁻¹ u
        for k in range(nvj):
            s = 0.0
            for c in range(6):
                s -= S[i, c, k] * vec6[i, _PA, c]
            vec6[i, _T1, k] = s
        for k in range(nvj):
            s = 0.0
            for kk in range(nvj):
                s += mat6[i, _DINV, k, kk] * vec6[i, _T1, kk]
            vec6[i, _U6, k] = s  # D⁻¹ u
        if lam >= 0:
            for r in range(6):
                s = vec6[i, _PA, r]
                for k in range(nvj):
                    s += mat6[i, _U, r, k] * vec6[i, _U6, k]
                vec6[i, _PA, r] = s
            _force_to_parent_add(Xrel, i, vec6, lam)
    for i in range(nb):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        lam = topo[i, 0]
        if lam >= 0:
            a = motion_to_child_at(
                Xrel, i, vec6[lam, _A, 0], vec6[lam, _A, 1], vec6[lam, _A, 2],
                vec6[lam, _A, 3], vec6[lam, _A, 4], vec6[lam, _A, 5],
            )  # fmt: skip
            for r in range(6):
                vec6[i, _A, r] = a[r]
        else:
            for r in range(6):
                vec6[i, _A, r] = 0.0
        # q̈ = D⁻¹ u - D⁻¹ Uᵀ a' ; a = a' + S q̈
        for k in range(nvj):
            s = 0.0
            for r in range(6):
                s += mat6[i, _U, r, k] * vec6[i, _A, r]
            vec6[i, _T1, k] = s
        for k in range(nvj):
            s = vec6[i, _U6, k]
            for kk in range(nvj):
                s -= mat6[i, _DINV, k, kk] * vec6[i, _T1, kk]
            qdd[iv + k] = s
        for r in range(6):
            s = 0.0
            for k in range(nvj):
                s += S[i, r, k] * qdd[iv + k]
            vec6[i, _A, r] += s
