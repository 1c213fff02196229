"""Forward kinematics of the spanning tree: body and frame poses, velocities, Jacobians.

Frames: body quantities are in the body frame (the joint's child frame); world
quantities in the ground frame.  A 6×nv *world* Jacobian maps v to the frame's
angular velocity and the linear velocity of the frame origin, both in world axes
(Pinocchio's ``LOCAL_WORLD_ALIGNED``); a *local* Jacobian expresses the same
twist in the frame's own axes (Pinocchio's ``LOCAL``).
"""

import numpy as np
from numba import njit

from loopdyn.model.joints import joint_bias, joint_motion
from loopdyn.spatial import crm_mul, matmul3, motion_to_child

LOCAL, WORLD = 0, 1
_REFERENCES = {"local": LOCAL, "world": WORLD, "local_world_aligned": WORLD}


@njit(cache=True, inline="always")
def body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33):
    """Pose of body i in its parent (``Xrel[i]``) and its motion subspace ``S[i]``."""
    Rj = tmp33[2]
    pj = vec6[i, 6]
    joint_motion(topo[i, 1], jgeom[i, 4], jgeom[i, 5], q, topo[i, 2], Rj, pj, S[i], tmp33)
    Rt = jgeom[i]
    X = Xrel[i]
    # R = R_tree R_j ; p = p_tree + R_tree p_j
    for r in range(3):
        for c in range(3):
            X[r, c] = Rt[r, 0] * Rj[0, c] + Rt[r, 1] * Rj[1, c] + Rt[r, 2] * Rj[2, c]
        X[3, r] = Rt[3, r] + Rt[r, 0] * pj[0] + Rt[r, 1] * pj[1] + Rt[r, 2] * pj[2]


@njit(cache=True, inline="always")
def body_velocity(i, topo, v, Xrel, S, vec6):
    """Body i's spatial velocity V = iXλ V_λ + S q̇ and C = V ×m (S q̇) + Ṡq̇ (body frame)."""
    lam = topo[i, 0]
    iv = topo[i, 3]
    nvj = topo[i, 5]
    X = Xrel[i]
    V = vec6[i, 0]
    C = vec6[i, 2]
    vJ = vec6[i, 7]
    Si = S[i]
    for r in range(6):
        s = 0.0
        for k in range(nvj):
            s += Si[r, k] * v[iv + k]
        vJ[r] = s
    if lam >= 0:
        motion_to_child(X[:3], X[3], vec6[lam, 0], V)
        for r in range(6):
            V[r] += vJ[r]
    else:
        for r in range(6):
            V[r] = vJ[r]
    cJ = vec6[i, 5]
    joint_bias(topo[i, 1], Si, v, iv, cJ)
    crm_mul(V, vJ, C)
    for r in range(6):
        C[r] += cJ[r]


@njit(cache=True)
def fk_kernel(topo, jgeom, q, v, Xrel, Xw, S, vec6, tmp33):
    """Poses (relative and world) of every body; velocities too when ``v.size > 0``."""
    nb = topo.shape[0]
    for i in range(nb):
        body_pose(i, topo, jgeom, q, Xrel, S, vec6, tmp33)
        lam = topo[i, 0]
        if lam >= 0:
            matmul3(Xw[lam, :3], Xrel[i, :3], Xw[i, :3])
            for r in range(3):
                Xw[i, 3, r] = (
                    Xw[lam, 3, r]
                    + Xw[lam, r, 0] * Xrel[i, 3, 0]
                    + Xw[lam, r, 1] * Xrel[i, 3, 1]
                    + Xw[lam, r, 2] * Xrel[i, 3, 2]
                )
        else:
            Xw[i] = Xrel[i]
        if v.size > 0:
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
