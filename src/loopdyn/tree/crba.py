"""Composite-rigid-body algorithm for the joint-space inertia matrix (RBDA Table 6.2).

Composite inertias are moved with the rigid-body transform (10 parameters,
``spatial.rigid_inertia_to_parent_add``); the force F = Ic S_k is kept in
registers while it walks up the tree; the exact-zero block of ``S`` is skipped.
"""

from numba import njit

from loopdyn.kernels.joints import joint_pose, s_block
from loopdyn.kernels.numba_internals import unliteral
from loopdyn.kernels.spatial import force_to_parent_at, rigid_inertia_to_parent_add


@njit(cache=True)
def crba_kernel(m, d, q, M):
    """Fill ``M`` (nv × nv) with the mass matrix M(q).

    Block (i, j) is non-zero only when j is an ancestor of i (or i itself); only
    those blocks are visited, so the cost is O(n·depth) and M's zeros are exact.
    Left in ``d``: ``Xrel``, ``S`` and the composite inertias in ``IA``.
    """
    for i in range(m.nb):
        joint_pose(m, d, i, q)
    crba_from_poses(m, d, M)


@njit(cache=True)
def crba_from_poses(m, d, M):
    """``crba_kernel`` when ``Xrel`` and ``S`` are already in ``d``."""
    composite_inertias(m, d)
    M[:, :] = 0.0
    # unliteral: the constants would compile a second crba_columns (sslm calls it with
    # variables)
    crba_columns(m, d, unliteral(0), m.nb, unliteral(0), M)


@njit(cache=True)
def composite_inertias(m, d):
    """The composite inertias Ic_i (body i and its descendants, in body i's frame) into
    ``d.IA``, leaves first, from the poses ``Xrel`` in ``d``."""
    topo, inertia, Xrel, Ic = m.topo, m.inertia, d.Xrel, d.IA
    for i in range(m.nb):
        for r in range(6):
            for c in range(6):
                Ic[i, r, c] = inertia[i, r, c]
    for i in range(m.nb - 1, -1, -1):
        lam = topo[i, 0]
        if lam >= 0:
            rigid_inertia_to_parent_add(Xrel[i, :3], Xrel[i, 3], Ic[i], Ic[lam])


@njit(cache=True)
def crba_columns(m, d, b0, b1, v0, M):
    """The columns of bodies ``b0 .. b1-1`` of the mass matrix, from the composite
    inertias in ``d.IA``: M[iv - v0 + k, jv - v0 + kk] for each coordinate k of body i
    and kk of i itself or an ancestor j (its entries only; the rest of ``M`` is left
    as it is).  The whole matrix for b0, b1, v0 = 0, nb, 0; one subtree's block (a
    subsystem, its coordinates from ``v0`` on) for its body range."""
    topo, Xrel, S, Ic = m.topo, d.Xrel, d.S, d.IA
    for i in range(b0, b1):
        iv = topo[i, 3] - v0
        nvj = topo[i, 5]
        s0, sn = s_block(topo[i, 1])
        for k in range(nvj):
            # F = Ic S_k
            f0 = f1 = f2 = f3 = f4 = f5 = 0.0
            for c in range(s0, s0 + sn):
                s = S[i, c, k]
                f0 += Ic[i, 0, c] * s
                f1 += Ic[i, 1, c] * s
                f2 += Ic[i, 2, c] * s
                f3 += Ic[i, 3, c] * s
                f4 += Ic[i, 4, c] * s
                f5 += Ic[i, 5, c] * s
            F = (f0, f1, f2, f3, f4, f5)
            # diagonal block: upper triangle, mirrored, so M is exactly symmetric
            for kk in range(k, nvj):
                s = 0.0
                for r in range(s0, s0 + sn):
                    s += S[i, r, kk] * F[r]
                M[iv + k, iv + kk] = s
                M[iv + kk, iv + k] = s
            # off-diagonal blocks: F moved up to each ancestor j, M_ij = S_jᵀ F
            j = i
            while topo[j, 0] >= 0:
                F = force_to_parent_at(Xrel, j, F[0], F[1], F[2], F[3], F[4], F[5])
                j = topo[j, 0]
                jv = topo[j, 3] - v0
                c0, cn = s_block(topo[j, 1])
                for kk in range(topo[j, 5]):
                    s = 0.0
                    for r in range(c0, c0 + cn):
                        s += S[j, r, kk] * F[r]
                    M[iv + k, jv + kk] = s
                    M[jv + kk, iv + k] = s
