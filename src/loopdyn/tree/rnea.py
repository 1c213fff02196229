"""Recursive Newton-Euler inverse dynamics of the spanning tree (RBDA Table 5.1)."""

from numba import njit

from loopdyn.kinematics import body_pose, body_velocity
from loopdyn.spatial import crf_mul_add, force_to_parent_add, mat6_vec, motion_to_child

# rows of Data.vec6
_V, _A, _C, _F, _T1, _T2 = 0, 1, 2, 3, 8, 9


@njit(cache=True)
def rnea_kernel(topo, jgeom, inertia, gravity, q, v, qdd, fext, Xrel, S, vec6, tmp33, tau):
    """τ = M(q) q̈ + h(q, q̇) - Σ Jᵀ fext.

    In: ``q`` (nq), ``v`` and ``qdd`` (nv), ``fext`` (nb, 6) external wrenches
    ``[n; f]`` on each body, body frame, about the body origin (or shape (0, 6)
    for none); ``gravity`` (3,) in the world frame.  Out: ``tau`` (nv).
    The root acceleration is -g (gravity as a fictitious base acceleration).
    """
    nb = topo.shape[0]
    has_f = fext.shape[0] > 0
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        body_velocity(i, topo, v, Xrel, S, vec6)
        lam = topo[i, 0]
        iv = topo[i, 3]
        X = Xrel[i]
        a = vec6[i, _A]
        # a_i = iXλ a_λ + S q̈ + c_i
        if lam >= 0:
            motion_to_child(X[:3], X[3], vec6[lam, _A], a)
        else:
            g = vec6[i, _T2]
            g[0] = g[1] = g[2] = 0.0
            g[3], g[4], g[5] = -gravity[0], -gravity[1], -gravity[2]
            motion_to_child(X[:3], X[3], g, a)
        Si = S[i]
        for r in range(6):
            s = vec6[i, _C, r]
            for k in range(topo[i, 5]):
                s += Si[r, k] * qdd[iv + k]
            a[r] += s
        # f_i = I a + v ×f (I v) - fext
        f = vec6[i, _F]
        Iv = vec6[i, _T1]
        mat6_vec(inertia[i], a, f)
        mat6_vec(inertia[i], vec6[i, _V], Iv)
        crf_mul_add(vec6[i, _V], Iv, f)
        if has_f:
            for r in range(6):
                f[r] -= fext[i, r]
    for i in range(nb - 1, -1, -1):
        iv = topo[i, 3]
        f = vec6[i, _F]
        for k in range(topo[i, 5]):
            s = 0.0
            for r in range(6):
                s += S[i, r, k] * f[r]
            tau[iv + k] = s
        lam = topo[i, 0]
        if lam >= 0:
            force_to_parent_add(Xrel[i, :3], Xrel[i, 3], f, vec6[lam, _F])
