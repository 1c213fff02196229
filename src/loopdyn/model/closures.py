"""Loop closures (cut joints) and their constraint rows.

A closure joins frame A (on body a, or the ground) to frame B (on body b).  In the
assembled mechanism the two frames coincide: same origin, and the same
orientation for every closure that constrains rotation.  Each closure contributes
rows of two kinds, all with an exact position-level residual Φ whose time
derivative is J v:

- translation row, unit ``u`` fixed in A:  Φ = u_A · (p_B - p_A);
  J v = u_A · (v_B - v_A(p_B)), the relative velocity of B's origin with respect
  to the point of body a that coincides with it.  Its multiplier is the force
  along u_A applied to body b at B's origin (and its opposite to body a).
- rotation row about a unit ``a`` fixed in A: J v = n · (ω_B - ω_A), n a world
  vector equal to a_A where the frames are aligned; its multiplier is the moment
  about n applied to body b (opposite on a).  The residual depends on what the
  closure's rotation rows constrain together (``rotation_form``), so that it
  vanishes on the closed configurations only (a single dot product per axis also
  vanishes at a half-turn: a weld open by π would read 0):

  - ``ROT_LOG`` (weld, prismatic, generic axes other than two, every planar
    rotation row): Φ = a · φ with φ = log(R_Aᵀ R_B) the rotation vector of B
    relative to A (A axes, |φ| <= π), so |Φ| of the rows is the angle between
    the frames; n = R_A K(φ)ᵀ a with K = J_l⁻¹(φ), the inverse left Jacobian of
    SO(3) (φ̇ = K R_Aᵀ (ω_B - ω_A)).
  - ``ROT_HINGE`` (revolute, two generic axes; hinge axis a, b ⟂ a): the swing
    of the axis, Φ = θ/sin θ · (b_A · a_B) with θ the angle between a_A and a_B
    (|Φ| of the two rows is θ; π where the axis is reversed).
  - ``ROT_DOT`` (universal): Φ = c_A · b_B, zero exactly where a universal joint
    about c (in A) and b (in B) closes; |Φ| = sin of the angle by
    which b_B is off the plane ⟂ c_A.

| kind        | 3D rows                               | planar rows (x–y plane)   |
|-------------|---------------------------------------|---------------------------|
| ball        | 3 translations                        | (use revolute)            |
| revolute    | 3 translations, 2 rotations ⟂ axis    | 2 translations (axis z)   |
| universal   | 3 translations, 1 rotation ⟂ both axes| —                         |
| prismatic   | 2 translations ⟂ axis, 3 rotations    | 1 translation ⟂ axis, rotation z |
| weld        | 3 translations, 3 rotations           | 2 translations, rotation z|
| generic     | user-given ``rotation_axes`` and ``translation_axes`` (A frame) |   |

Two generic rotation axes leave a hinge about their cross product (rows as the
revolute's, exact at finite angles).  Axes default to z (revolute), x
(prismatic), x of A then y of B (universal: the constrained rotation is about
axis1 × axis2, with Φ = -(axis1_A · axis2_B)).

A *coupling* (``ModelBuilder.add_coupling``: gears, belts, differentials, URDF
mimic joints) relates two 1-DOF joints a and b of the tree: one row
Φ = q_b - r q_a - offset, J = e_b - r e_a, γ = 0.  Its multiplier λ is a pair of
joint forces: +λ on joint b, -r λ on joint a (Jᵀ λ).
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.model.joints import _axis

KINDS = ("ball", "revolute", "universal", "prismatic", "weld", "generic")
TRANSLATION, ROTATION, COUPLING = 0, 1, 2
# the residual form of a closure's rotation rows (``row_int[r, 2]``, see the module doc):
# ROT_DOT one dot product (a universal's row: its zero set is the universal's), ROT_HINGE
# the swing of a hinge's axis, ROT_LOG components of the relative rotation's log map
ROT_DOT, ROT_HINGE, ROT_LOG = 0, 1, 2


def rotation_form(kind, n_rot):
    """The residual form of the rotation rows of a closure of ``kind`` with ``n_rot`` of
    them: a universal's one row is a dot product, two rows are a hinge's
    (``_hinge_rows``), every other row a component of the relative rotation's log map
    (the angle about the row's axis: a planar model's rotation row, a weld reduced to
    the one rotation a planar loop has, ``ld.load``'s minimal closures)."""
    if kind == "universal":
        return ROT_DOT
    if n_rot == 2:
        return ROT_HINGE
    return ROT_LOG


def _triad(a, reverse=False):
    """(b, c) completing the unit vector a to a right-handed orthonormal triad (a, b, c):
    b ∝ a × t, t the x axis (the y axis where a is near x), c = a × b.  ``reverse``:
    b ∝ t × a instead, so that (b, c, a) is right-handed (the file readers' planar
    axes, ``io._geometry.perpendicular_pair``); the same vectors negated, but for the
    signs of zeros, which the readers keep as they always were."""
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    b = np.cross(t, a) if reverse else np.cross(a, t)
    b /= np.linalg.norm(b)
    c = np.cross(a, b)
    return b, c


def _rotation_row(a):
    """(u in A, w in B) of a rotation row about unit a: Φ = u_A·w_B, n = w_B × u_A ≈ a."""
    b, c = _triad(a)
    return c, b


def _hinge_rows(a):
    """(u in A, w in B) of the two rotation rows of a hinge about the unit axis a:
    Φ = b_A · a_B and c_A · a_B (b, c ⟂ a).  They vanish for every rotation about a
    (a_B stays along a_A), not only to first order; n = a_B × b_A and a_B × c_A span
    the rotations about the two perpendiculars."""
    b, c = _triad(a)
    return [(b, a), (c, a)]


@dataclass(frozen=True)
class ClosureSpec:
    """A closure as declared in ``ModelBuilder.add_closure``."""

    name: str
    frame_a: str
    frame_b: str
    kind: str
    axis: object = None
    axis2: object = None
    rotation_axes: tuple = ()
    translation_axes: tuple = ()

    def rows(self, planar):
        """List of (row kind, u, w) in frame coordinates (w unused for translations)."""
        what = f"closure {self.name!r}"
        zero = np.zeros(3)
        ex, ey, ez = np.eye(3)
        rows = []

        def trans(u):
            rows.append((TRANSLATION, np.asarray(u, float), zero))

        def rot(a):
            u, w = _rotation_row(np.asarray(a, float))
            rows.append((ROTATION, u, w))

        k = self.kind
        if planar:
            if k == "revolute":
                if self.axis is not None and not np.allclose(_axis(self.axis, what), ez):
                    raise ModelError(f"{what}: a planar revolute closure must have axis z")
                trans(ex), trans(ey)
            elif k == "prismatic":
                a = _axis(self.axis if self.axis is not None else "x", what)
                if abs(a[2]) > 1e-12:
                    raise ModelError(
                        f"{what}: a planar prismatic closure needs an axis in the x–y plane"
                    )
                trans(np.cross(ez, a)), rot(ez)
            elif k == "weld":
                trans(ex), trans(ey), rot(ez)
            elif k == "generic":
                self._generic(trans, rot, rows, what)
            else:
                raise ModelError(
                    f"{what}: kind {k!r} has no planar counterpart; use revolute, prismatic, "
                    "weld or generic (or build the model with planar=False)"
                )
            return rows
        if k == "ball":
            trans(ex), trans(ey), trans(ez)
        elif k == "revolute":
            a = _axis(self.axis if self.axis is not None else "z", what)
            trans(ex), trans(ey), trans(ez)
            for u, w in _hinge_rows(a):
                rows.append((ROTATION, u, w))
        elif k == "universal":
            a1 = _axis(self.axis if self.axis is not None else "x", what)
            a2 = _axis(self.axis2 if self.axis2 is not None else "y", what)
            if abs(a1 @ a2) > 1e-9:
                raise ModelError(f"{what}: universal closure axes must be orthogonal")
            trans(ex), trans(ey), trans(ez)
            rows.append((ROTATION, -a1, a2))  # Φ = -(a1_A · a2_B), n = a2_B × (-a1_A) = a1 × a2
        elif k == "prismatic":
            a = _axis(self.axis if self.axis is not None else "x", what)
            for d in _triad(a):
                trans(d)
            rot(ex), rot(ey), rot(ez)
        elif k == "weld":
            trans(ex), trans(ey), trans(ez), rot(ex), rot(ey), rot(ez)
        elif k == "generic":
            self._generic(trans, rot, rows, what)
        else:
            raise ModelError(f"{what}: unknown kind {k!r}; use one of {', '.join(KINDS)}")
        return rows

    def _generic(self, trans, rot, rows, what):
        if not self.rotation_axes and not self.translation_axes:
            raise ModelError(
                f"{what}: a generic closure needs rotation_axes and/or translation_axes"
            )
        for a in self.translation_axes:
            trans(_axis(a, what))
        axes = [_axis(a, what) for a in self.rotation_axes]
        if len(axes) == 2:
            # rotation left free about a = r1 × r2: a hinge, exact at finite angles
            free = np.cross(axes[0], axes[1])
            if np.linalg.norm(free) < 1e-9:
                raise ModelError(f"{what}: the two rotation_axes are parallel")
            free /= np.linalg.norm(free)
            for u, w in _hinge_rows(free):
                rows.append((ROTATION, u, w))
            return
        for a in axes:
            rot(a)


@dataclass(frozen=True)
class CouplingSpec:
    """A coupling as declared in ``ModelBuilder.add_coupling``: q_b = ratio q_a + offset."""

    name: str
    joint_a: str
    joint_b: str
    ratio: float
    offset: float = 0.0
    kind = "coupling"
