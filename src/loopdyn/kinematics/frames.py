"""Forward kinematics of the spanning tree: body and frame poses, velocities, Jacobians.

Frames: body quantities are in the body frame (the joint's child frame); world
quantities in the ground frame.  A 6×nv *world* Jacobian maps v to the frame's
angular velocity and the linear velocity of the frame origin, both in world axes
(Pinocchio's ``LOCAL_WORLD_ALIGNED``); a *local* Jacobian expresses the same
twist in the frame's own axes (Pinocchio's ``LOCAL``).
"""

import numpy as np
from numba import njit

from loopdyn.kernels.spatial import motion_to_child_at
from loopdyn.model.joints import (
    FREE,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    UNIVERSAL,
)

LOCAL, WORLD = 0, 1
_REFERENCES = {"local": LOCAL, "world": WORLD, "local_world_aligned": WORLD}

# Performance: the per-body kernels below index the Data arrays directly.  Taking a
# view (``Xrel[i]``, ``S[i]``) costs two atomic reference-count updates in numba,
# and a call with view arguments more, which used to be half the time of a pass.
# The joint formulas (the table in ``loopdyn.model.joints``) live in ``body_pose``
# and ``body_velocity``, one branch per joint type.


@njit(cache=True, inline="always")
def _rodrigues(x, y, z, theta):
    """Rodrigues: R = exp(θ [axis]×) for a unit axis, as a row-major 9-tuple."""
    c = np.cos(theta)
    s = np.sin(theta)
    t = 1.0 - c
    return (
        t * x * x + c,
        t * x * y - s * z,
        t * x * z + s * y,
        t * x * y + s * z,
        t * y * y + c,
        t * y * z - s * x,
        t * x * z - s * y,
        t * y * z + s * x,
        t * z * z + c,
    )


@njit(cache=True, inline="always")
def _quat_rot(q, k):
    """Rotation of the quaternion ``q[k:k+4]`` (w, x, y, z), normalised on the fly."""
    w, x, y, z = q[k], q[k + 1], q[k + 2], q[k + 3]
    n2 = w * w + x * x + y * y + z * z
    s = 2.0 / n2
    return (
        1.0 - s * (y * y + z * z),
        s * (x * y - w * z),
        s * (x * z + w * y),
        s * (x * y + w * z),
        1.0 - s * (x * x + z * z),
        s * (y * z - w * x),
        s * (x * z - w * y),
        s * (y * z + w * x),
        1.0 - s * (x * x + y * y),
    )


@njit(cache=True, inline="always")
def s_block(jtype):
    """``(first row, number of rows)`` of the block of S that may be non-zero.

    ``(0, 3)``: angular only (revolute, universal, spherical); ``(3, 3)``: linear
    only (prismatic); ``(0, 6)`` otherwise (free, and any future joint type).
    """
    if jtype == REVOLUTE or jtype == UNIVERSAL or jtype == SPHERICAL:
        return 0, 3
    if jtype == PRISMATIC:
        return 3, 3
    return 0, 6


@njit(cache=True, inline="always")
def body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33):
    """Pose of body i in its parent (``Xrel[i]``) and its motion subspace ``S[i]``.

    Also writes the joint translation p_j to ``vec6[i, 6]``.
    """
    jt = topo[i, 1]
    iq = topo[i, 2]
    pj0 = pj1 = pj2 = 0.0
    if jt == REVOLUTE:
        R = _rodrigues(jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2], q[iq])
        for r in range(3):
            S[i, r, 0] = jgeom[i, 4, r]
            S[i, 3 + r, 0] = 0.0
    elif jt == UNIVERSAL:
        # R = R1(θ1) R2(θ2); ω_body = R2ᵀ a1 θ̇1 + a2 θ̇2
        A = _rodrigues(jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2], q[iq])
        B = _rodrigues(jgeom[i, 5, 0], jgeom[i, 5, 1], jgeom[i, 5, 2], q[iq + 1])
        R = (
            A[0] * B[0] + A[1] * B[3] + A[2] * B[6],
            A[0] * B[1] + A[1] * B[4] + A[2] * B[7],
            A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
            A[3] * B[0] + A[4] * B[3] + A[5] * B[6],
            A[3] * B[1] + A[4] * B[4] + A[5] * B[7],
            A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
            A[6] * B[0] + A[7] * B[3] + A[8] * B[6],
            A[6] * B[1] + A[7] * B[4] + A[8] * B[7],
            A[6] * B[2] + A[7] * B[5] + A[8] * B[8],
        )
        a0, a1, a2 = jgeom[i, 4, 0], jgeom[i, 4, 1], jgeom[i, 4, 2]
        S[i, 0, 0] = B[0] * a0 + B[3] * a1 + B[6] * a2
        S[i, 1, 0] = B[1] * a0 + B[4] * a1 + B[7] * a2
        S[i, 2, 0] = B[2] * a0 + B[5] * a1 + B[8] * a2
        for r in range(3):
            S[i, r, 1] = jgeom[i, 5, r]
            S[i, 3 + r, 0] = 0.0
            S[i, 3 + r, 1] = 0.0
    elif jt == PRISMATIC:
        R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
        d = q[iq]
        pj0, pj1, pj2 = jgeom[i, 4, 0] * d, jgeom[i, 4, 1] * d, jgeom[i, 4, 2] * d
        for r in range(3):
            S[i, r, 0] = 0.0
            S[i, 3 + r, 0] = jgeom[i, 4, r]
    elif jt == SPHERICAL:
        R = _quat_rot(q, iq)
        for r in range(6):
            for c in range(3):
                S[i, r, c] = 1.0 if r == c else 0.0
    elif jt == FREE:
        pj0, pj1, pj2 = q[iq], q[iq + 1], q[iq + 2]
        R = _quat_rot(q, iq + 3)
        for r in range(6):
            for c in range(6):
                S[i, r, c] = 1.0 if r == c else 0.0
    else:  # FIXED
        R = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    vec6[i, 6, 0] = pj0
    vec6[i, 6, 1] = pj1
    vec6[i, 6, 2] = pj2
    # R = R_tree R_j ; p = p_tree + R_tree p_j
    for r in range(3):
        t0, t1, t2 = jgeom[i, r, 0], jgeom[i, r, 1], jgeom[i, r, 2]
        Xrel[i, r, 0] = t0 * R[0] + t1 * R[3] + t2 * R[6]
        Xrel[i, r, 1] = t0 * R[1] + t1 * R[4] + t2 * R[7]
        Xrel[i, r, 2] = t0 * R[2] + t1 * R[5] + t2 * R[8]
        Xrel[i, 3, r] = jgeom[i, 3, r] + t0 * pj0 + t1 * pj1 + t2 * pj2


@njit(cache=True, inline="always")
def body_velocity(i, topo, v, Xrel, S, vec6):
    """Body i's spatial velocity V = iXλ V_λ + S q̇ and C = V ×m (S q̇) + Ṡq̇ (body frame).

    Rows of ``vec6[i]`` written: 0 ``V``, 2 ``C``, 5 ``CJ`` = Ṡq̇, 7 ``VJ`` = S q̇.
    """
    lam = topo[i, 0]
    iv = topo[i, 3]
    nvj = topo[i, 5]
    jt = topo[i, 1]
    # vJ = S q̇
    for r in range(6):
        s = 0.0
        for k in range(nvj):
            s += S[i, r, k] * v[iv + k]
        vec6[i, 7, r] = s
    j0, j1, j2 = vec6[i, 7, 0], vec6[i, 7, 1], vec6[i, 7, 2]
    j3, j4, j5 = vec6[i, 7, 3], vec6[i, 7, 4], vec6[i, 7, 5]
    if lam >= 0:
        m = motion_to_child_at(
            Xrel, i, vec6[lam, 0, 0], vec6[lam, 0, 1], vec6[lam, 0, 2],
            vec6[lam, 0, 3], vec6[lam, 0, 4], vec6[lam, 0, 5],
        )  # fmt: skip
        w0, w1, w2 = m[0] + j0, m[1] + j1, m[2] + j2
        w3, w4, w5 = m[3] + j3, m[4] + j4, m[5] + j5
    else:
        w0, w1, w2, w3, w4, w5 = j0, j1, j2, j3, j4, j5
    vec6[i, 0, 0] = w0
    vec6[i, 0, 1] = w1
    vec6[i, 0, 2] = w2
    vec6[i, 0, 3] = w3
    vec6[i, 0, 4] = w4
    vec6[i, 0, 5] = w5
    # cJ = Ṡ q̇ (non-zero only for the universal joint)
    c0 = c1 = c2 = c3 = c4 = c5 = 0.0
    if jt == UNIVERSAL:
        d1 = v[iv]
        d2 = v[iv + 1]
        c0 = (S[i, 1, 0] * S[i, 2, 1] - S[i, 2, 0] * S[i, 1, 1]) * d1 * d2
        c1 = (S[i, 2, 0] * S[i, 0, 1] - S[i, 0, 0] * S[i, 2, 1]) * d1 * d2
        c2 = (S[i, 0, 0] * S[i, 1, 1] - S[i, 1, 0] * S[i, 0, 1]) * d1 * d2
    vec6[i, 5, 0] = c0
    vec6[i, 5, 1] = c1
    vec6[i, 5, 2] = c2
    vec6[i, 5, 3] = c3
    vec6[i, 5, 4] = c4
    vec6[i, 5, 5] = c5
    # C = V ×m vJ + cJ
    vec6[i, 2, 0] = (w1 * j2 - w2 * j1) + c0
    vec6[i, 2, 1] = (w2 * j0 - w0 * j2) + c1
    vec6[i, 2, 2] = (w0 * j1 - w1 * j0) + c2
    vec6[i, 2, 3] = (w1 * j5 - w2 * j4 + w4 * j2 - w5 * j1) + c3
    vec6[i, 2, 4] = (w2 * j3 - w0 * j5 + w5 * j0 - w3 * j2) + c4
    vec6[i, 2, 5] = (w0 * j4 - w1 * j3 + w3 * j1 - w4 * j0) + c5


@njit(cache=True)
def fk_kernel(topo, jgeom, q, v, Xrel, Xw, S, vec6, tmp33):
    """Poses (relative and world) of every body; velocities too when ``v.size > 0``."""
    nb = topo.shape[0]
    with_v = v.size > 0
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        lam = topo[i, 0]
        if lam >= 0:
            for r in range(3):
                for c in range(3):
                    Xw[i, r, c] = (
                        Xw[lam, r, 0] * Xrel[i, 0, c]
                        + Xw[lam, r, 1] * Xrel[i, 1, c]
                        + Xw[lam, r, 2] * Xrel[i, 2, c]
                    )
            for r in range(3):
                Xw[i, 3, r] = (
                    Xw[lam, 3, r]
                    + Xw[lam, r, 0] * Xrel[i, 3, 0]
                    + Xw[lam, r, 1] * Xrel[i, 3, 1]
                    + Xw[lam, r, 2] * Xrel[i, 3, 2]
                )
        else:
            for r in range(4):
                for c in range(3):
                    Xw[i, r, c] = Xrel[i, r, c]
        if with_v:
            body_velocity(i, topo, v, Xrel, S, vec6)


@njit(cache=True)
def frame_world_pose(b, fX, Xw, out):
    """World pose of a frame with placement ``fX`` (4×3) on body ``b`` (-1: ground)."""
    if b < 0:
        out[:] = fX
        return
    R = Xw[b, :3]
    for r in range(3):
        for c in range(3):
            out[r, c] = R[r, 0] * fX[0, c] + R[r, 1] * fX[1, c] + R[r, 2] * fX[2, c]
        out[3, r] = Xw[b, 3, r] + R[r, 0] * fX[3, 0] + R[r, 1] * fX[3, 1] + R[r, 2] * fX[3, 2]


@njit(cache=True)
def point_jacobian_kernel(topo, Xw, S, b, point, J):
    """World Jacobian (6×nv, [ω; v_point], world axes) of a point fixed to body ``b``.

    ``point`` is in world coordinates; ``J`` is zeroed and filled for the joints on
    the path from the ground to ``b``.  Requires ``fk_kernel`` poses.
    """
    J[:, :] = 0.0
    j = b
    while j >= 0:
        iv = topo[j, 3]
        R = Xw[j, :3]
        o = Xw[j, 3]
        for k in range(topo[j, 5]):
            # column k of S_j in world axes, at the body origin
            w0 = R[0, 0] * S[j, 0, k] + R[0, 1] * S[j, 1, k] + R[0, 2] * S[j, 2, k]
            w1 = R[1, 0] * S[j, 0, k] + R[1, 1] * S[j, 1, k] + R[1, 2] * S[j, 2, k]
            w2 = R[2, 0] * S[j, 0, k] + R[2, 1] * S[j, 1, k] + R[2, 2] * S[j, 2, k]
            u0 = R[0, 0] * S[j, 3, k] + R[0, 1] * S[j, 4, k] + R[0, 2] * S[j, 5, k]
            u1 = R[1, 0] * S[j, 3, k] + R[1, 1] * S[j, 4, k] + R[1, 2] * S[j, 5, k]
            u2 = R[2, 0] * S[j, 3, k] + R[2, 1] * S[j, 4, k] + R[2, 2] * S[j, 5, k]
            # shift the linear part to the point: u + ω × (point - o)
            d0, d1, d2 = point[0] - o[0], point[1] - o[1], point[2] - o[2]
            J[0, iv + k] = w0
            J[1, iv + k] = w1
            J[2, iv + k] = w2
            J[3, iv + k] = u0 + w1 * d2 - w2 * d1
            J[4, iv + k] = u1 + w2 * d0 - w0 * d2
            J[5, iv + k] = u2 + w0 * d1 - w1 * d0
        j = topo[j, 0]


# --------------------------------------------------------------------------- API
def forward_kinematics(model, q, v=None, data=None):
    """Compute body poses (and velocities if ``v`` is given) into ``data``; return it.

    ``data.Xw[i]`` is body i's world pose (``[:3]`` rotation, ``[3]`` origin);
    ``data.vec6[i, 0]`` its spatial velocity ``[ω; v_origin]`` in the body frame.
    """
    from loopdyn.validation import configuration, vector

    d = model.data if data is None else data
    q = configuration(model, q)
    v = np.empty(0) if v is None else vector(v, model.nv, "v", model)
    fk_kernel(model.topo, model.jgeom, q, v, d.Xrel, d.Xw, d.S, d.vec6, d.tmp33)
    return d


def _frame_target(model, frame):
    """(body index, 4×3 placement) of a frame name/index or a body name."""
    if isinstance(frame, str) and frame not in model._frame_index and frame in model._body_index:
        X = np.zeros((4, 3))
        X[:3] = np.eye(3)
        return model._body_index[frame], X
    k = model.frame_index(frame)
    return int(model.frame_body[k]), model.frame_X[k]


def frame_placement(model, q, frame, data=None):
    """World pose ``(R, p)`` of a frame (or of a body's frame, by body name)."""
    d = forward_kinematics(model, q, data=data)
    b, X = _frame_target(model, frame)
    out = np.empty((4, 3))
    frame_world_pose(b, X, d.Xw, out)
    return out[:3].copy(), out[3].copy()


def frame_jacobian(model, q, frame, reference="world", data=None):
    """6×nv Jacobian of a frame: ``[ω; v_origin] = J v``.

    ``reference="world"`` (alias ``"local_world_aligned"``): both parts in world
    axes, linear velocity of the frame origin.  ``"local"``: the same twist in the
    frame's own axes.
    """
    if reference not in _REFERENCES:
        raise ValueError(f"reference must be one of {sorted(_REFERENCES)}, got {reference!r}")
    d = forward_kinematics(model, q, data=data)
    b, X = _frame_target(model, frame)
    pose = np.empty((4, 3))
    frame_world_pose(b, X, d.Xw, pose)
    J = np.zeros((6, model.nv))
    if b >= 0:
        point_jacobian_kernel(model.topo, d.Xw, d.S, b, pose[3], J)
    if _REFERENCES[reference] == LOCAL:
        R = pose[:3]
        J[:3] = R.T @ J[:3]
        J[3:] = R.T @ J[3:]
    return J
