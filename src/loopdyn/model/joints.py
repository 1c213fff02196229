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
class _OneAxis(Joint):
    """Base of the joints of one coordinate along the unit ``axis`` of the subclass."""

    def axes(self, what):
        return _axis(self.axis, what), np.zeros(3)


@dataclass(frozen=True)
class Revolute(_OneAxis):
    """Rotation about ``axis`` (joint frame), one coordinate: the angle in rad."""

    axis: object = "z"
    kind = REVOLUTE


@dataclass(frozen=True)
class Prismatic(_OneAxis):
    """Translation along ``axis`` (joint frame), one coordinate: the displacement in m."""

    axis: object = "x"
    kind = PRISMATIC


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
