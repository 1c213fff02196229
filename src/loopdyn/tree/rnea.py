"""Recursive Newton–Euler inverse dynamics of the spanning tree (RBDA Table 5.1).

Kernels on the ``(m, d)`` views (``loopdyn.kernels.views``); 6-vectors are kept in
registers (tuples), with the operations in the order of the textbook recursion.  The
products with the motion subspace skip its exact zeros (``joints.s_block``,
``joints.s_dot``): the same sums, and none at all for the unit S of spherical and free
joints.
"""

from numba import njit

from loopdyn.kernels.joints import body_velocity, joint_pose, s_block, s_dot
from loopdyn.kernels.spatial import force_to_parent_at, motion_to_child_at, rigid_inertia_times_at
from loopdyn.model.joints import FREE, SPHERICAL


@njit(cache=True)
def rnea_kernel(m, d, q, v, qdd, fext, tau):
    """τ = M(q) q̈ + h(q, q̇) - Σ Jᵀ fext.

    In: ``q`` (nq), ``v`` and ``qdd`` (nv), ``fext`` (nb, 6) external wrenches
    ``[n; f]`` on each body, body frame, about the body origin (shape (0, 6): none).
    Out: ``tau`` (nv).  The root acceleration is -g (gravity as a fictitious base
    acceleration).  Left in ``d``: ``Xrel``, ``S``, body-frame ``V``, ``A``, ``C``
    and ``F``, the wrench each joint transmits.
    """
    for i in range(m.nb):
        joint_pose(m, d, i, q)
        body_velocity(m, d, i, v)
        forward_body(m, d, i, qdd, fext)
    backward_pass(m, d, tau)


@njit(cache=True)
def rnea_from_kinematics(m, d, qdd, fext, tau):
    """``rnea_kernel`` when ``Xrel``, ``S``, ``V`` and ``C`` are already in ``d``
    (``loopdyn.kinematics.frames.fk_kernel``): the methods share one kinematics pass."""
    for i in range(m.nb):
        forward_body(m, d, i, qdd, fext)
    backward_pass(m, d, tau)


@njit(cache=True)
def forward_body(m, d, i, qdd, fext):
    """Root-to-leaf step for body i: a_i = iXλ a_λ + c_i + S q̈, f_i = I a + v ×f I v - fext."""
    topo, inertia, gravity = m.topo, m.inertia, m.gravity
    Xrel, S, V, A, C, F = d.Xrel, d.S, d.V, d.A, d.C, d.F
    lam = topo[i, 0]
    iv = topo[i, 3]
    if lam >= 0:
        a = motion_to_child_at(
            Xrel, i, A[lam, 0], A[lam, 1], A[lam, 2], A[lam, 3], A[lam, 4], A[lam, 5]
        )
    else:
        a = motion_to_child_at(Xrel, i, 0.0, 0.0, 0.0, -gravity[0], -gravity[1], -gravity[2])
    # a = iXλ a_λ + (c + S q̈), S q̈ over the rows of S that may be non-zero only (the
    # same sums); S = [1; 0] (spherical) or 1 (free): q̈ itself
    jt, nvj = topo[i, 1], topo[i, 5]
    s0, sn = s_block(jt)
    unit = jt == SPHERICAL or jt == FREE
    for r in range(6):
        s = C[i, r]
        if s0 <= r < s0 + sn:
            if unit:
                s += qdd[iv + r]
            else:
                for k in range(nvj):
                    s += S[i, r, k] * qdd[iv + k]
        A[i, r] = a[r] + s
    # f_i = I a + v ×f (I v) - fext
    a0, a1, a2, a3, a4, a5 = A[i, 0], A[i, 1], A[i, 2], A[i, 3], A[i, 4], A[i, 5]
    w0, w1, w2, w3, w4, w5 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
    f = rigid_inertia_times_at(inertia, i, a0, a1, a2, a3, a4, a5)
    h0, h1, h2, h3, h4, h5 = rigid_inertia_times_at(inertia, i, w0, w1, w2, w3, w4, w5)
    F[i, 0] = f[0] + (w1 * h2 - w2 * h1 + w4 * h5 - w5 * h4)
    F[i, 1] = f[1] + (w2 * h0 - w0 * h2 + w5 * h3 - w3 * h5)
    F[i, 2] = f[2] + (w0 * h1 - w1 * h0 + w3 * h4 - w4 * h3)
    F[i, 3] = f[3] + (w1 * h5 - w2 * h4)
    F[i, 4] = f[4] + (w2 * h3 - w0 * h5)
    F[i, 5] = f[5] + (w0 * h4 - w1 * h3)
    if fext.shape[0] > 0:
        for r in range(6):
            F[i, r] -= fext[i, r]


@njit(cache=True)
def backward_pass(m, d, tau):
    """Leaf-to-root pass: τ_i = Sᵀ f_i, f_λ += iXλᵀ f_i."""
    topo, Xrel, S, F = m.topo, d.Xrel, d.S, d.F
    for i in range(m.nb - 1, -1, -1):
        iv, jt = topo[i, 3], topo[i, 1]
        for k in range(topo[i, 5]):
            tau[iv + k] = s_dot(S, i, jt, k, F[i, 0], F[i, 1], F[i, 2], F[i, 3], F[i, 4], F[i, 5])
        lam = topo[i, 0]
        if lam >= 0:
            g = force_to_parent_at(Xrel, i, F[i, 0], F[i, 1], F[i, 2], F[i, 3], F[i, 4], F[i, 5])
            for r in range(6):
                F[lam, r] += g[r]
