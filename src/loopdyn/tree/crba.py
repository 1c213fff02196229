"""Composite-rigid-body algorithm for the joint-space inertia matrix (RBDA Table 6.2).

Composite inertias are moved with the rigid-body transform (10 parameters,
``spatial.rigid_inertia_to_parent_add``); the force F = Ic S_k is kept in
registers while it walks up the tree; the exact-zero block of ``S`` is skipped.
"""

from numba import njit

from loopdyn.kernels.joints import joint_pose, s_block, s_dot
from loopdyn.kernels.numba_internals import unliteral
from loopdyn.kernels.spatial import force_to_parent_at, rigid_inertia_to_parent_add
from loopdyn.model.joints import FREE, SPHERICAL


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
    subsystem, its coordinates from ``v0`` on) for its body range.

    Spherical and free joints (S = [1; 0], S = 1): F = Ic S_k is column k of Ic, and
    their columns walk up the tree three at a time (one pass over the ancestors' poses
    for three independent forces); every S_jᵀ F skips S's exact zeros
    (``joints.s_dot``).  The same sums as the full products."""
    topo, Xrel, S, Ic = m.topo, d.Xrel, d.S, d.IA
    for i in range(b0, b1):
        iv = topo[i, 3] - v0
        nvj = topo[i, 5]
        jt = topo[i, 1]
        if jt == SPHERICAL or jt == FREE:
            for k in range(0, nvj, 3):
                _unit_columns3(m, d, i, k, iv, v0, M)
            continue
        s0, sn = s_block(jt)
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
            # diagonal block: upper triangle, mirrored, so M is exactly symmetric
            for kk in range(k, nvj):
                x = s_dot(S, i, jt, kk, f0, f1, f2, f3, f4, f5)
                M[iv + k, iv + kk] = x
                M[iv + kk, iv + k] = x
            # off-diagonal blocks: F moved up to each ancestor j, M_ij = S_jᵀ F
            j = i
            while topo[j, 0] >= 0:
                f0, f1, f2, f3, f4, f5 = force_to_parent_at(Xrel, j, f0, f1, f2, f3, f4, f5)
                j = topo[j, 0]
                jv = topo[j, 3] - v0
                tj = topo[j, 1]
                for kk in range(topo[j, 5]):
                    x = s_dot(S, j, tj, kk, f0, f1, f2, f3, f4, f5)
                    M[iv + k, jv + kk] = x
                    M[jv + kk, iv + k] = x


@njit(cache=True)
def _unit_columns3(m, d, i, k, iv, v0, M):
    """``crba_columns`` for columns k, k+1, k+2 of a joint with a unit S (spherical,
    free): F = Ic[:, k..k+2], the diagonal block from Ic, and the three forces moved up
    together."""
    topo, Xrel, S, Ic = m.topo, d.Xrel, d.S, d.IA
    nvj = topo[i, 5]
    for a in range(k, nvj):
        for b in range(k, k + 3):
            if b <= a:
                M[iv + b, iv + a] = Ic[i, a, b]
                M[iv + a, iv + b] = Ic[i, a, b]
    a0, a1, a2, a3, a4, a5 = (
        Ic[i, 0, k],
        Ic[i, 1, k],
        Ic[i, 2, k],
        Ic[i, 3, k],
        Ic[i, 4, k],
        Ic[i, 5, k],
    )
    b0, b1, b2, b3, b4, b5 = (
        Ic[i, 0, k + 1], Ic[i, 1, k + 1], Ic[i, 2, k + 1],
        Ic[i, 3, k + 1], Ic[i, 4, k + 1], Ic[i, 5, k + 1],
    )  # fmt: skip
    c0, c1, c2, c3, c4, c5 = (
        Ic[i, 0, k + 2], Ic[i, 1, k + 2], Ic[i, 2, k + 2],
        Ic[i, 3, k + 2], Ic[i, 4, k + 2], Ic[i, 5, k + 2],
    )  # fmt: skip
    j = i
    while topo[j, 0] >= 0:
        a0, a1, a2, a3, a4, a5 = force_to_parent_at(Xrel, j, a0, a1, a2, a3, a4, a5)
        b0, b1, b2, b3, b4, b5 = force_to_parent_at(Xrel, j, b0, b1, b2, b3, b4, b5)
        c0, c1, c2, c3, c4, c5 = force_to_parent_at(Xrel, j, c0, c1, c2, c3, c4, c5)
        j = topo[j, 0]
        jv = topo[j, 3] - v0
        tj = topo[j, 1]
        for kk in range(topo[j, 5]):
            x = s_dot(S, j, tj, kk, a0, a1, a2, a3, a4, a5)
            M[iv + k, jv + kk] = x
            M[jv + kk, iv + k] = x
            x = s_dot(S, j, tj, kk, b0, b1, b2, b3, b4, b5)
            M[iv + k + 1, jv + kk] = x
            M[jv + kk, iv + k + 1] = x
            x = s_dot(S, j, tj, kk, c0, c1, c2, c3, c4, c5)
            M[iv + k + 2, jv + kk] = x
            M[jv + kk, iv + k + 2] = x
