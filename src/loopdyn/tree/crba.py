"""Composite-rigid-body algorithm for the joint-space inertia matrix (RBDA Table 6.2)."""

from numba import njit

from loopdyn.kinematics import body_pose
from loopdyn.spatial import force_to_parent_add, inertia_to_parent_add

_T1, _T2 = 8, 9
_IA, _TM = 0, 3


@njit(cache=True)
def crba_kernel(topo, jgeom, inertia, q, Xrel, S, vec6, mat6, tmp33, M):
    """Fill ``M`` (nv × nv) with the mass matrix M(q).

    Composite inertias ``Ic`` (body frame) are accumulated leaf to root; block
    (i, j) is nonzero only when j is an ancestor of i (or i itself), and only those
    blocks are visited, so the cost is O(n·depth) and M's zeros are exact.
    """
    nb = topo.shape[0]
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        mat6[i, _IA, :, :] = inertia[i]
    M[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        lam = topo[i, 0]
        if lam >= 0:
            inertia_to_parent_add(
                Xrel[i, :3], Xrel[i, 3], mat6[i, _IA], mat6[lam, _IA], mat6[i, _TM]
            )
    for i in range(nb):
        iv = topo[i, 3]
        Ic = mat6[i, _IA]
        for k in range(topo[i, 5]):
            F = vec6[i, _T1]
            G = vec6[i, _T2]
            # F = Ic S_k
            for r in range(6):
                s = 0.0
                for c in range(6):
                    s += Ic[r, c] * S[i, c, k]
                F[r] = s
            # diagonal block: upper triangle, mirrored, so M is exactly symmetric
            for kk in range(k, topo[i, 5]):
                s = 0.0
                for r in range(6):
                    s += S[i, r, kk] * F[r]
                M[iv + k, iv + kk] = s
                M[iv + kk, iv + k] = s
            j = i
            while topo[j, 0] >= 0:
                for r in range(6):
                    G[r] = 0.0
                force_to_parent_add(Xrel[j, :3], Xrel[j, 3], F, G)
                for r in range(6):
                    F[r] = G[r]
                j = topo[j, 0]
                jv = topo[j, 3]
                for kk in range(topo[j, 5]):
                    s = 0.0
                    for r in range(6):
                        s += S[j, r, kk] * F[r]
                    M[iv + k, jv + kk] = s
                    M[jv + kk, iv + k] = s
