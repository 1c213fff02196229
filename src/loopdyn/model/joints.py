"""Joint types of the spanning tree and their compiled kinematics.

Each body hangs from its parent by one joint.  The joint frame is placed in the
parent body's frame by a fixed pose; the body frame is the joint frame moved by
the joint motion ``(R_j(q), p_j(q))``.  Motion subspaces ``S`` are expressed in
the body frame, so ``v_body = iXλ v_parent + S q̇``.

| type      | nq | nv | q                              | v (body frame)          |
|-----------|----|----|--------------------------------|-------------------------|
| revolute  | 1  | 1  | angle about ``axis``           | rate                    |
| prismatic | 1  | 1  | displacement along ``axis``    | rate                    |
| fixed     | 0  | 0  |                                |                         |
| universal | 2  | 2  | angles about ``axis1``, then the rotated ``axis2`` | rates |
| spherical | 4  | 3  | unit quaternion (w, x, y, z)   | angular velocity ω      |
| free      | 7  | 6  | position (parent frame), quaternion (w, x, y, z) | [ω; v_origin] |

Quaternions need not be exactly unit: kernels normalise them on the fly and never
modify ``q``; a zero quaternion is rejected with ``ValueError`` at the API edge.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from loopdyn.spatial import quat_to_rot, rot_axis_angle

REVOLUTE, PRISMATIC, FIXED, UNIVERSAL, SPHERICAL, FREE = range(6)
JOINT_NQ = (1, 1, 0, 2, 4, 7)
JOINT_NV = (1, 1, 0, 2, 3, 6)
JOINT_NAMES = ("revolute", "prismatic", "fixed", "universal", "spherical", "free")

_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


def _axis(value, what):
    from loopdyn.errors import ModelError

    if isinstance(value, str):
        key = value.lower().lstrip("+")
        sign = -1.0 if key.startswith("-") else 1.0
        key = key.lstrip("-")
        if key not in _AXES:
            raise ModelError(f"{what}: unknown axis {value!r}; use 'x', 'y', 'z' or a 3-vector")
        return sign * np.array(_AXES[key])
    a = np.asarray(value, dtype=float).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ModelError(f"{what}: axis must be a finite 3-vector, got {value!r}")
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise ModelError(f"{what}: zero joint axis; give a non-zero direction")
    return a / n


@dataclass(frozen=True)
class Joint:
    """Base of the joint descriptions passed to ``ModelBuilder.add_body``."""

    kind = -1

    def axes(self, what):
        return np.zeros(3), np.zeros(3)


@dataclass(frozen=True)
class Revolute(Joint):
    """Rotation about ``axis`` (joint frame), one coordinate: the angle in rad."""

    axis: object = "z"
    kind = REVOLUTE

    def axes(self, what):
        return _axis(self.axis, what), np.zeros(3)


@dataclass(frozen=True)
class Prismatic(Joint):
    """Translation along ``axis`` (joint frame), one coordinate: the displacement in m."""

    axis: object = "x"
    kind = PRISMATIC

    def axes(self, what):
        return _axis(self.axis, what), np.zeros(3)


@dataclass(frozen=True)
class Fixed(Joint):
    """Rigid attachment, no coordinates."""

    kind = FIXED


@dataclass(frozen=True)
class Universal(Joint):
    """Rotation about ``axis1`` then about ``axis2`` (carried by the first rotation).

    The axes intersect at the joint origin and must not be parallel.
    """

    axis1: object = "x"
    axis2: object = "y"
    kind = UNIVERSAL

    def axes(self, what):
        from loopdyn.errors import ModelError

        a1, a2 = _axis(self.axis1, what), _axis(self.axis2, what)
        if np.linalg.norm(np.cross(a1, a2)) < 1e-9:
            raise ModelError(f"{what}: universal joint axes are parallel; give two distinct axes")
        return a1, a2


@dataclass(frozen=True)
class Spherical(Joint):
    """Ball joint: unit quaternion (w, x, y, z), angular velocity in the body frame."""

    kind = SPHERICAL


@dataclass(frozen=True)
class Free(Joint):
    """Floating base: position in the parent frame and quaternion; v = [ω; v_origin] (body)."""

    kind = FREE


@njit(cache=True)
def joint_motion(jtype, axis, axis2, q, iq, R, p, S, tmp):
    """Joint pose ``(R, p)`` of the body frame in the joint frame and ``S`` (body frame).

    ``S`` is a (6, 6) buffer; only its first ``nv`` columns are written.  ``tmp`` is a
    (2, 3, 3) scratch buffer.
    """
    for r in range(3):
        p[r] = 0.0
    if jtype == REVOLUTE:
        rot_axis_angle(axis, q[iq], R)
        for r in range(3):
            S[r, 0] = axis[r]
            S[3 + r, 0] = 0.0
    elif jtype == PRISMATIC:
        for r in range(3):
            for c in range(3):
                R[r, c] = 1.0 if r == c else 0.0
            p[r] = axis[r] * q[iq]
            S[r, 0] = 0.0
            S[3 + r, 0] = axis[r]
    elif jtype == FIXED:
        for r in range(3):
            for c in range(3):
                R[r, c] = 1.0 if r == c else 0.0
    elif jtype == UNIVERSAL:
        # R = R1(θ1) R2(θ2); ω_body = R2ᵀ a1 θ̇1 + a2 θ̇2
        R1 = tmp[0]
        R2 = tmp[1]
        rot_axis_angle(axis, q[iq], R1)
        rot_axis_angle(axis2, q[iq + 1], R2)
        for r in range(3):
            for c in range(3):
                R[r, c] = R1[r, 0] * R2[0, c] + R1[r, 1] * R2[1, c] + R1[r, 2] * R2[2, c]
        for r in range(3):
            S[r, 0] = R2[0, r] * axis[0] + R2[1, r] * axis[1] + R2[2, r] * axis[2]
            S[r, 1] = axis2[r]
            S[3 + r, 0] = 0.0
            S[3 + r, 1] = 0.0
    elif jtype == SPHERICAL:
        quat_to_rot(q, iq, R)
        for r in range(6):
            for c in range(3):
                S[r, c] = 1.0 if r == c else 0.0
    else:  # FREE
        for r in range(3):
            p[r] = q[iq + r]
        quat_to_rot(q, iq + 3, R)
        for r in range(6):
            for c in range(6):
                S[r, c] = 1.0 if r == c else 0.0


@njit(cache=True, inline="always")
def joint_bias(jtype, S, v, iv, cJ):
    """cJ = Ṡ q̇ in the body frame (non-zero only for the universal joint).

    For the universal joint, d/dt(R2ᵀ a1) θ̇1 = (R2ᵀ a1 θ̇1) × (a2 θ̇2).
    """
    for r in range(6):
        cJ[r] = 0.0
    if jtype == UNIVERSAL:
        d1 = v[iv]
        d2 = v[iv + 1]
        cJ[0] = (S[1, 0] * S[2, 1] - S[2, 0] * S[1, 1]) * d1 * d2
        cJ[1] = (S[2, 0] * S[0, 1] - S[0, 0] * S[2, 1]) * d1 * d2
        cJ[2] = (S[0, 0] * S[1, 1] - S[1, 0] * S[0, 1]) * d1 * d2
