"""Small rigid-transform helpers for the file readers (4×4 homogeneous matrices)."""

import numpy as np

from loopdyn.model.closures import _triad


def rpy_matrix(rpy):
    """Rotation of roll-pitch-yaw angles (fixed axes x, y, z): R = Rz(y) Ry(p) Rx(r).

    The convention of URDF ``<origin rpy>`` and SDFormat ``<pose>``.
    """
    r, p, y = (float(x) for x in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_rpy(R):
    """Roll-pitch-yaw angles of a rotation, the inverse of :func:`rpy_matrix` (at
    pitch ±π/2, where roll and yaw share one axis, roll carries the whole turn)."""
    R = np.asarray(R, dtype=float)
    p = float(np.arctan2(-R[2, 0], np.hypot(R[0, 0], R[1, 0])))
    if np.hypot(R[0, 0], R[1, 0]) > 1e-12:
        r = float(np.arctan2(R[2, 1], R[2, 2]))
        y = float(np.arctan2(R[1, 0], R[0, 0]))
    else:  # gimbal lock: R = Rz(y) Ry(±π/2) Rx(r) depends on r ∓ y only
        r = float(np.arctan2(-R[1, 2], R[1, 1]))
        y = 0.0
    return np.array([r, p, y])


def quat_matrix(q):
    """Rotation of a quaternion (w, x, y, z) (normalised here)."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def transform(R=None, p=None):
    """4×4 homogeneous transform from a rotation and a translation."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def pose(xyz, rpy):
    """4×4 transform of a translation ``xyz`` and roll-pitch-yaw angles ``rpy``."""
    return transform(rpy_matrix(rpy), xyz)


def inv(T):
    """Inverse of a rigid transform."""
    R, p = T[:3, :3], T[:3, 3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ p
    return out


def orthonormalize(R):
    """The nearest rotation to ``R`` (polar decomposition), for rounded file data."""
    U, _, Vt = np.linalg.svd(R)
    Q = U @ Vt
    if np.linalg.det(Q) < 0:
        U[:, -1] *= -1
        Q = U @ Vt
    return Q


def unit(v):
    """``v`` / |v|, or None for a zero or non-finite vector."""
    v = np.asarray(v, dtype=float)
    n = np.linalg.norm(v)
    if not np.isfinite(n) or n < 1e-12:
        return None
    return v / n


def perpendicular_pair(n):
    """Unit vectors (u, w) with (u, w, n) right-handed orthonormal."""
    return _triad(n, reverse=True)


def combine_inertias(parts):
    """Total (mass, com, inertia about com) of rigid parts in one frame.

    ``parts``: iterable of (mass, com (3,), inertia about its own com (3, 3)), all
    in the same frame.  Parallel-axis theorem: I_C = Σ Iᵢ + mᵢ(|dᵢ|² 1 − dᵢ dᵢᵀ),
    dᵢ = cᵢ − C.  A total mass of zero returns (0, 0, Σ Iᵢ).
    """
    parts = list(parts)
    m = sum(p[0] for p in parts)
    I = np.zeros((3, 3))
    if m <= 0.0:
        for _, _, Ii in parts:
            I += Ii
        return 0.0, np.zeros(3), I
    c = sum(p[0] * np.asarray(p[1]) for p in parts) / m
    for mi, ci, Ii in parts:
        d = np.asarray(ci) - c
        I += Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return float(m), c, 0.5 * (I + I.T)
