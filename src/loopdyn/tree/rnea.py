"""Recursive Newton-Euler inverse dynamics of the spanning tree (RBDA Table 5.1).

The kernel indexes ``Data``'s arrays directly and keeps 6-vectors in registers
(tuples), with the same operations in the same order as the textbook recursion.
"""

from numba import njit

from loopdyn.kernels.spatial import force_to_parent_at, mat6_vec_at, motion_to_child_at
from loopdyn.kinematics.frames import body_pose, body_velocity

# rows of Data.vec6
_V, _A, _C, _F = 0, 1, 2, 3


@njit(cache=True)
def rnea_kernel(topo, jgeom, inertia, gravity, q, v, qdd, fext, Xrel, S, vec6, tmp33, tau):
    """τ = M(q) q̈ + h(q, q̇) - Σ Jᵀ fext.

    In: ``q`` (nq), ``v`` and ``qdd`` (nv), ``fext`` (nb, 6) external wrenches
    ``[n; f]`` on each body, body frame, about the body origin (or shape (0, 6)
    for none); ``gravity`` (3,) in the world frame.  Out: ``tau`` (nv).
    The root acceleration is -g (gravity as a fictitious base acceleration).
    Body-frame ``Data`` rows left behind: velocity ``V``, acceleration ``A``,
    bias ``C``, and ``F`` the wrench transmitted by each joint.
    """
    nb = topo.shape[0]
    has_f = fext.shape[0] > 0
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        body_velocity(i, topo, v, Xrel, S, vec6)
        _forward_body(i, topo, inertia, gravity, qdd, fext, has_f, Xrel, S, vec6)
    _backward(topo, Xrel, S, vec6, tau)


@njit(cache=True)
def rnea_from_kinematics(topo, inertia, gravity, qdd, fext, Xrel, S, vec6, tau):
    """``rnea_kernel`` when poses, S, velocities and C are already in the workspace
    (``loopdyn.kinematics.frames.fk_kernel``): the multiplier methods share one kinematics pass."""
    has_f = fext.shape[0] > 0
    for i in range(topo.shape[0]):
        _forward_body(i, topo, inertia, gravity, qdd, fext, has_f, Xrel, S, vec6)
    _backward(topo, Xrel, S, vec6, tau)


@njit(cache=True, inline="always")
def _forward_body(i, topo, inertia, gravity, qdd, fext, has_f, Xrel, S, vec6):
    """Root-to-leaf step for body i: a_i = iXλ a_λ + c_i + S q̈, f_i = I a + v ×f I v - fext."""
    lam = topo[i, 0]
    iv = topo[i, 3]
    nvj = topo[i, 5]
    # a_i = iXλ a_λ + (c_i + S q̈)
    if lam >= 0:
        m = motion_to_child_at(
            Xrel, i, vec6[lam, _A, 0], vec6[lam, _A, 1], vec6[lam, _A, 2],
            vec6[lam, _A, 3], vec6[lam, _A, 4], vec6[lam, _A, 5],
        )  # fmt: skip
    else:
        m = motion_to_child_at(Xrel, i, 0.0, 0.0, 0.0, -gravity[0], -gravity[1], -gravity[2])
    for r in range(6):
        s = vec6[i, _C, r]
        for k in range(nvj):
            s += S[i, r, k] * qdd[iv + k]
        vec6[i, _A, r] = m[r] + s
    # f_i = I a + v ×f (I v) - fext
    a0, a1, a2 = vec6[i, _A, 0], vec6[i, _A, 1], vec6[i, _A, 2]
    a3, a4, a5 = vec6[i, _A, 3], vec6[i, _A, 4], vec6[i, _A, 5]
    w0, w1, w2 = vec6[i, _V, 0], vec6[i, _V, 1], vec6[i, _V, 2]
    w3, w4, w5 = vec6[i, _V, 3], vec6[i, _V, 4], vec6[i, _V, 5]
    f = mat6_vec_at(inertia, i, a0, a1, a2, a3, a4, a5)
    h0, h1, h2, h3, h4, h5 = mat6_vec_at(inertia, i, w0, w1, w2, w3, w4, w5)
    f0 = f[0] + (w1 * h2 - w2 * h1 + w4 * h5 - w5 * h4)
    f1 = f[1] + (w2 * h0 - w0 * h2 + w5 * h3 - w3 * h5)
    f2 = f[2] + (w0 * h1 - w1 * h0 + w3 * h4 - w4 * h3)
    f3 = f[3] + (w1 * h5 - w2 * h4)
    f4 = f[4] + (w2 * h3 - w0 * h5)
    f5 = f[5] + (w0 * h4 - w1 * h3)
    if has_f:
        f0 -= fext[i, 0]
        f1 -= fext[i, 1]
        f2 -= fext[i, 2]
        f3 -= fext[i, 3]
        f4 -= fext[i, 4]
        f5 -= fext[i, 5]
    vec6[i, _F, 0] = f0
    vec6[i, _F, 1] = f1
    vec6[i, _F, 2] = f2
    vec6[i, _F, 3] = f3
    vec6[i, _F, 4] = f4
    vec6[i, _F, 5] = f5


@njit(cache=True, inline="always")
def _backward(topo, Xrel, S, vec6, tau):
    """Leaf-to-root pass: τ_i = Sᵀ f_i, f_λ += iXλᵀ f_i."""
    nb = topo.shape[0]
    for i in range(nb - 1, -1, -1):
        iv = topo[i, 3]
        for k in range(topo[i, 5]):
            s = 0.0
            for r in range(6):
                s += S[i, r, k] * vec6[i, _F, r]
            tau[iv + k] = s
        lam = topo[i, 0]
        if lam >= 0:
            g = force_to_parent_at(
                Xrel, i, vec6[i, _F, 0], vec6[i, _F, 1], vec6[i, _F, 2],
                vec6[i, _F, 3], vec6[i, _F, 4], vec6[i, _F, 5],
            )  # fmt: skip
            for r in range(6):
                vec6[lam, _F, r] += g[r]
