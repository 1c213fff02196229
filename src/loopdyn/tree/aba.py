"""Articulated-body forward dynamics of the spanning tree, O(n) (RBDA Table 7.1)."""

from numba import njit

from loopdyn.kinematics import body_pose, body_velocity
from loopdyn.spatial import (
    crf_mul_add,
    force_to_parent_add,
    inertia_to_parent_add,
    mat6_vec,
    motion_to_child,
)

# rows of Data.vec6 and Data.mat6
_V, _A, _C, _PA, _U6, _T1, _T2 = 0, 1, 2, 3, 4, 8, 9
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
    of the body whose articulated inertia Sᵀ IA S is singular.
    """
    nb = topo.shape[0]
    has_f = fext.shape[0] > 0
    # pass 1, root to leaves: kinematics, IA_i = I_i, pA_i = v ×f I v - fext
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        body_velocity(i, topo, v, Xrel, S, vec6)
        IA = mat6[i, _IA]
        IA[:, :] = inertia[i]
        pA = vec6[i, _PA]
        Iv = vec6[i, _T1]
        mat6_vec(IA, vec6[i, _V], Iv)
        for r in range(6):
            pA[r] = -fext[i, r] if has_f else 0.0
        crf_mul_add(vec6[i, _V], Iv, pA)
    # pass 2, leaves to root: U = IA S, D = Sᵀ U, u = τ - Sᵀ pA, project onto the parent
    for i in range(nb - 1, -1, -1):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        IA = mat6[i, _IA]
        pA = vec6[i, _PA]
        U = mat6[i, _U]
        Dinv = mat6[i, _DINV]
        u = vec6[i, _U6]
        Si = S[i]
        for k in range(nvj):
            for r in range(6):
                s = 0.0
                for c in range(6):
                    s += IA[r, c] * Si[c, k]
                U[r, k] = s
            s = tau[iv + k]
            for r in range(6):
                s -= Si[r, k] * pA[r]
            u[k] = s
        for k in range(nvj):
            for kk in range(nvj):
                s = 0.0
                for r in range(6):
                    s += Si[r, k] * U[r, kk]
                Dinv[k, kk] = s
        if not invert_spd_inplace(Dinv, nvj):
            return i
        lam = topo[i, 0]
        if lam >= 0:
            # W = U D⁻¹ ; Ia = IA - W Uᵀ ; pa = pA + Ia c + W u   (eqs. 7.34-7.35)
            W = mat6[i, _TM]
            for r in range(6):
                for k in range(nvj):
                    s = 0.0
                    for kk in range(nvj):
                        s += U[r, kk] * Dinv[kk, k]
                    W[r, k] = s
            for r in range(6):
                s = 0.0
                for k in range(nvj):
                    s += W[r, k] * u[k]
                pA[r] += s
                for c in range(6):
                    s = 0.0
                    for k in range(nvj):
                        s += W[r, k] * U[c, k]
                    IA[r, c] -= s
            c_i = vec6[i, _C]
            for r in range(6):
                s = 0.0
                for c in range(6):
                    s += IA[r, c] * c_i[c]
                pA[r] += s
            inertia_to_parent_add(Xrel[i, :3], Xrel[i, 3], IA, mat6[lam, _IA], W)
            force_to_parent_add(Xrel[i, :3], Xrel[i, 3], pA, vec6[lam, _PA])
    # pass 3, root to leaves: a' = iXλ a_λ + c, q̈ = D⁻¹ (u - Uᵀ a'), a = a' + S q̈
    for i in range(nb):
        nvj = topo[i, 5]
        iv = topo[i, 3]
        lam = topo[i, 0]
        X = Xrel[i]
        a = vec6[i, _A]
        if lam >= 0:
            motion_to_child(X[:3], X[3], vec6[lam, _A], a)
        else:
            g = vec6[i, _T2]
            g[0] = g[1] = g[2] = 0.0
            g[3], g[4], g[5] = -gravity[0], -gravity[1], -gravity[2]
            motion_to_child(X[:3], X[3], g, a)
        for r in range(6):
            a[r] += vec6[i, _C, r]
        U = mat6[i, _U]
        Dinv = mat6[i, _DINV]
        u = vec6[i, _U6]
        w = vec6[i, _T1]
        for k in range(nvj):
            s = u[k]
            for r in range(6):
                s -= U[r, k] * a[r]
            w[k] = s
        for k in range(nvj):
            s = 0.0
            for kk in range(nvj):
                s += Dinv[k, kk] * w[kk]
            qdd[iv + k] = s
        for r in range(6):
            s = 0.0
            for k in range(nvj):
                s += S[i, r, k] * qdd[iv + k]
            a[r] += s
    return -1
