"""Forward kinematics of the spanning tree: body and frame poses, velocities, Jacobians.

Frames: body quantities are in the body frame (the joint's child frame); world
quantities in the ground frame.  A 6×nv *world* Jacobian maps v to the frame's
angular velocity and the linear velocity of the frame origin, both in world axes
(Pinocchio's ``LOCAL_WORLD_ALIGNED``); a *local* Jacobian expresses the same
twist in the frame's own axes (Pinocchio's ``LOCAL``).
"""

import numpy as np
from numba import njit, types

from loopdyn.kernels.checks import STATE_OK, raise_status, state_status
from loopdyn.kernels.joints import joint_pose, joint_velocity_inline, world_pose
from loopdyn.kernels.numba_internals import BUF, IN, Entry, entry, unliteral
from loopdyn.kernels.views import handles
from loopdyn.validation import configuration, vector, workspace

LOCAL, WORLD = 0, 1
_NO_V = np.zeros(0)
_REFERENCES = {"local": LOCAL, "world": WORLD, "local_world_aligned": WORLD}


@njit(cache=True)
def fk_kernel(m, d, q, v):
    """Poses of every body (``Xrel`` in the parent, ``Xw`` in the world) and ``S``;
    velocities ``V`` and velocity products ``C`` too when ``v.size > 0``."""
    with_v = v.shape[0] > 0
    for i in range(m.nb):
        joint_pose(m, d, i, q)
        world_pose(m, d, i)
        if with_v:
            joint_velocity_inline(m, d, i, v, d.V, d.C, unliteral(-1))


@entry
def fk_entry(ctx, q, v):
    """``fk_kernel`` on a Data's buffer; 0 or a ``STATE_*`` status (``kernels.checks``)."""
    m, d = handles(ctx)
    st = state_status(m, q, v, v[:0], m.nv if v.shape[0] > 0 else 0, unliteral(0))
    if st == STATE_OK:
        fk_kernel(m, d, q, v)
    return st


FK = Entry(fk_entry, types.int64, BUF, IN, IN)


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
    ``data.V[i]`` its spatial velocity ``[ω; v_origin]`` in the body frame.
    """
    d = workspace(model, data)
    q = configuration(model, q)
    v = _NO_V if v is None else vector(v, model.nv, "v", model)
    raise_status(model, FK.call(d.ctx, q, v), "q or v")
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
        point_jacobian_kernel(d.topo, d.Xw, d.S, b, pose[3], J)
    if _REFERENCES[reference] == LOCAL:
        R = pose[:3]
        J[:3] = R.T @ J[:3]
        J[3:] = R.T @ J[3:]
    return J
