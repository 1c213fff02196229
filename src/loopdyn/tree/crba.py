"""Composite-rigid-body algorithm for the joint-space inertia matrix (RBDA Table 6.2).

The kernel indexes ``Data``'s arrays directly, moves composite inertias with the
rigid-body transform (10 parameters, ``spatial.rigid_inertia_to_parent_add``),
keeps the force F = Ic S_k in registers while it walks up the tree, and skips
the exact-zero block of ``S``.
"""

from numba import njit

from loopdyn.kernels.spatial import force_to_parent_at, rigid_inertia_to_parent_add
from loopdyn.kinematics.frames import body_pose, s_block

_IA = 0
_T1 = 8  # scratch row of Data.vec6


@njit(cache=True)
def crba_kernel(topo, jgeom, inertia, q, Xrel, S, vec6, mat6, tmp33, M):
    """Fill ``M`` (nv × nv) with the mass matrix M(q).

    Composite inertias ``Ic`` (body frame) are accumulated leaf to root; block
    (i, j) is nonzero only when j is an ancestor of i (or i itself), and only those
    blocks are visited, so the cost is O(n·depth) and M's zeros are exact.
    ``mat6[:, 0]`` is left holding the composite inertias.
    """
    for i in range(topo.shape[0]):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
    crba_from_poses(topo, inertia, Xrel, S, vec6, mat6, M)


@njit(cache=True)
def crba_from_poses(topo, inertia, Xrel, S, vec6, mat6, M):
    """``crba_kernel`` when the poses ``Xrel`` and ``S`` are already in the workspace."""
    nb = topo.shape[0]
    for i in range(nb):
        for r in range(6):
            for c in range(6):
                mat6[i, _IA, r, c] = inertia[i, r, c]
    M[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        lam = topo[i, 0]
        if lam >= 0:
            rigid_inertia_to_parent_add(Xrel[i, :3], Xrel[i, 3], mat6[i, _IA], mat6[lam, _IA])
    for i in range(nb):
        iv = topo[i, 3]
        nvj = topo[i, 5]
        b0, bn = s_block(topo[i, 1])
        for k in range(nvj):
            # F = Ic S_k
            for r in range(6):
                s = 0.0
                for c in range(b0, b0 + bn):
                    s += mat6[i, _IA, r, c] * S[i, c, k]
                vec6[i, _T1, r] = s
            F = (
                vec6[i, _T1, 0], vec6[i, _T1, 1], vec6[i, _T1, 2],
                vec6[i, _T1, 3], vec6[i, _T1, 4], vec6[i, _T1, 5],
            )  # fmt: skip
            # diagonal block: upper triangle, mirrored, so M is exactly symmetric
            for kk in range(k, nvj):
                s = 0.0
                for r in range(b0, b0 + bn):
                    s += S[i, r, kk] * F[r]
                M[iv + k, iv + kk] = s
                M[iv + kk, iv + k] = s
            # off-diagonal blocks: F moved up to each ancestor j, M_ij = S_jᵀ F
            j = i
            while topo[j, 0] >= 0:
                F = force_to_parent_at(Xrel, j, F[0], F[1], F[2], F[3], F[4], F[5])
                j = topo[j, 0]
                jv = topo[j, 3]
                c0, cn = s_block(topo[j, 1])
                for kk in range(topo[j, 5]):
                    s = 0.0
                    for r in range(c0, c0 + cn):
                        s += S[j, r, kk] * F[r]
                    M[iv + k, jv + kk] = s
                    M[jv + kk, iv + k] = s
