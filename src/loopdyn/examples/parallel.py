"""Spatial parallel manipulators of the catalog: the Gough–Stewart platform and the Delta robot.

Both are in the class of Saha & Schiehlen's DeNOC method (one moving platform carried
by legs with one actuated joint each, ``ld.parallel_structure``); the geometry is
ours and documented in each docstring.  Gravity is along -z (9.81 m/s²).  The
platform hangs in the spanning tree from leg 1; the other legs are closed at the
platform by closures.  Both models are assembled exactly at ``q0`` (all joint
angles of the home pose are zero but the actuated ones).
"""

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.shapes import rod
from loopdyn.model import Fixed, ModelBuilder, Prismatic, Revolute, Spherical, Universal

G_SPATIAL = (0.0, 0.0, -9.81)

# Gough–Stewart platform (m, kg)
STEWART_BASE_RADIUS = 1.2
STEWART_PLATFORM_RADIUS = 0.8
STEWART_HEIGHT = 1.0
# angles (deg) of the base and platform joints: pairs 24° apart on the base, 30° apart on
# the platform, the platform's pairs turned by 60°
STEWART_BASE_ANGLES = (-12.0, 12.0, 108.0, 132.0, 228.0, 252.0)
STEWART_PLATFORM_ANGLES = (-45.0, 45.0, 75.0, 165.0, 195.0, 285.0)


def _u(deg):
    a = np.deg2rad(deg)
    return np.array([np.cos(a), np.sin(a), 0.0])


def _link(b, name, parent, joint, segments, mass, length, axis="x", **kw):
    """Add a uniform rod link (``rod``) as ``segments`` rigidly joined pieces.

    The first piece carries the joint and keeps the link's name; pieces 2, 3, … are
    ``{name}_{j}``, fixed to the previous one.  Mass and centre of mass are those of
    the whole rod, and so is its inertia about the transverse axes (the axial moment,
    ``ROD_AXIAL`` m ℓ², scales with the piece length).  Returns the last piece.
    """
    sign = -1.0 if axis.startswith("-") else 1.0
    piece = length / segments
    b.add_body(name, parent, joint, **kw, **rod(mass / segments, piece, axis))
    last = name
    for j in range(1, segments):
        nxt = f"{name}_{j + 1}"
        b.add_body(nxt, last, Fixed(), xyz=(sign * piece, 0.0, 0.0),
                   **rod(mass / segments, piece, axis))  # fmt: skip
        last = nxt
    return last


def _frame_along(d):
    """Rotation whose x axis is the unit vector d, y horizontal (⟂ z and d), z = x × y."""
    x = d / np.linalg.norm(d)
    y = np.cross([0.0, 0.0, 1.0], x)
    y /= np.linalg.norm(y)
    return np.column_stack([x, y, np.cross(x, y)])


def stewart_geometry(height=STEWART_HEIGHT):
    """Base joints B (6, 3), platform joints P (6, 3) at the home pose, world frame.

    The platform centre sits ``height`` above the base centre, axes parallel to the
    world's; leg i joins B[i] to P[i].
    """
    B = np.array([STEWART_BASE_RADIUS * _u(a) for a in STEWART_BASE_ANGLES])
    P = np.array([STEWART_PLATFORM_RADIUS * _u(a) for a in STEWART_PLATFORM_ANGLES])
    P[:, 2] = height
    return B, P


@parameters(
    height=("m", "platform height above the base at q0"),
    segments=("count", "rigid pieces per cylinder and piston"),
)
def stewart(height=STEWART_HEIGHT, segments=1):
    """A 6-UPS Gough–Stewart platform in the flight-simulator arrangement (6 DOF).

    Base: six universal joints on a circle of radius 1.2 m, in pairs 24° apart centred
    at 0°, 120°, 240° (``STEWART_BASE_ANGLES``).  Platform: six spherical joints on a
    circle of radius 0.8 m, in pairs 30° apart centred at 60°, 180°, 300°, so that each
    leg runs from a base pair to the neighbouring platform pair (the zig-zag of the
    usual motion simulator).  Home pose: platform ``height`` = 1 m above the base,
    level (leg length 1.21 m).

    Each leg: a cylinder (10 kg, uniform rod of 0.9 m from the universal joint) on a
    universal joint whose first axis is horizontal and ⟂ to the leg, the second ⟂ to
    both; a piston (5 kg, rod of 0.9 m ending at the spherical joint) on an actuated
    prismatic joint along the leg, whose coordinate is the leg length (joint centre
    to joint centre).  Platform with payload: 100 kg, a uniform disc of radius 0.8 m
    (Ixx = Iyy = m r²/4, Izz = m r²/2) centred between its joints.

    Tree: cylinders on the ground, pistons on the cylinders, the platform on piston 1
    by a spherical joint (frame at that joint, axes parallel to the world's at
    ``q0``); legs 2–6 close at the platform with ball closures ``S2``…``S6``.  Joints
    ``U1``…``U6``, ``P1``…``P6`` (actuated), ``S1``; bodies ``cylinder1``…,
    ``piston1``…, ``platform``.  ``q0``: the home pose.

    ``segments`` > 1 builds every cylinder and piston from that many rigidly joined
    pieces (fixed joints; same mass distribution): legs of 2·segments bodies and
    the same mechanism, the long-leg family of ``benchmarks/bench_denoc.py``.
    """
    B, P = stewart_geometry(height)
    b = ModelBuilder("stewart" if segments == 1 else f"stewart_{segments}", gravity=G_SPATIAL)
    q0 = []
    R = []
    for i in range(6):
        d = P[i] - B[i]
        L = float(np.linalg.norm(d))
        R.append(_frame_along(d))
        _link(
            b, f"cylinder{i + 1}", "ground", Universal("y", "z"), segments, 10.0, 0.9,
            xyz=B[i], rotation=R[i], joint_name=f"U{i + 1}",
        )  # fmt: skip
        _link(
            b, f"piston{i + 1}", f"cylinder{i + 1}", Prismatic("x"), segments, 5.0, 0.9, "-x",
            joint_name=f"P{i + 1}", actuated=True,
        )  # fmt: skip
        q0 += [0.0, 0.0, L]  # (fixed joints have no coordinates)
        if i == 0:
            r = STEWART_PLATFORM_RADIUS
            centre = np.array([0.0, 0.0, height])
            b.add_body(
                "platform", "piston1", Spherical(), rotation=R[0].T, joint_name="S1", mass=100.0,
                com=centre - P[0], inertia=100.0 * r * r * np.array([0.25, 0.25, 0.5]),
            )  # fmt: skip
            q0 += [1.0, 0.0, 0.0, 0.0]
    for i in range(1, 6):
        b.add_frame(f"S{i + 1}_on_piston{i + 1}", f"piston{i + 1}")
        b.add_frame(f"S{i + 1}_on_platform", "platform", xyz=P[i] - P[0])
        b.add_closure(f"S{i + 1}", f"S{i + 1}_on_piston{i + 1}", f"S{i + 1}_on_platform", "ball")
    model = b.build()
    return assembled(
        model, np.array(q0), "6-UPS Gough-Stewart platform (flight-simulator geometry)"
    )


# Delta robot (m, kg)
DELTA_BASE_RADIUS = 0.2
DELTA_PLATFORM_RADIUS = 0.05
DELTA_ARM = 0.35
DELTA_FOREARM = 0.8
DELTA_HOME = (0.0, 0.0, -0.8)


def delta_arm_angle(p, leg):
    """Actuated angle θ of leg 0, 1, 2 (arm below the horizontal for θ > 0) placing the
    platform centre at ``p``: the elbow-out solution of |C - E(θ)| = forearm length."""
    phi = 120.0 * leg
    u, z = _u(phi), np.array([0.0, 0.0, 1.0])
    D = np.asarray(p, float) + DELTA_PLATFORM_RADIUS * u - DELTA_BASE_RADIUS * u
    A, Bc = D @ u, -(D @ z)
    K = (D @ D + DELTA_ARM**2 - DELTA_FOREARM**2) / (2.0 * DELTA_ARM)
    rho = np.hypot(A, Bc)
    if abs(K) > rho:
        raise ValueError(f"delta: platform position {p} is out of reach")
    return float(np.arctan2(Bc, A) - np.arccos(K / rho))


@parameters(
    home=("-", "platform centre at q0: x, y, z in m"),
    segments=("count", "rigid pieces per arm and forearm"),
)
def delta(home=DELTA_HOME, segments=1):
    """A Clavel Delta robot: 3 legs of an actuated revolute arm and a forearm; 3 DOF.

    Base: the arms' hinges on a circle of radius 0.2 m at 0°, 120°, 240°, hinge axes
    horizontal and tangent; arms 0.35 m, 1 kg (uniform rods); forearms 0.8 m, 0.3 kg
    (the two rods of a parallelogram together, as one uniform rod); platform 0.8 kg
    (tool and payload; a disc of radius 0.05 m), its three attachment points on a
    circle of radius 0.05 m at the legs' angles.  Arm angles θ are measured from the
    horizontal, positive downward.  Home pose: the platform centre at ``home`` =
    (0, 0, -0.8) m, θ ≈ 25.4°.

    **The parallelograms** are modelled by their kinematic equivalent, not as rods with
    spherical ends nor as real loops: one rigid forearm per leg, joined to the arm
    and to the platform by universal joints whose axes are the hinge direction (the
    parallelogram's bars: axis 1 at the elbow, fixed in the arm; axis 2 at the
    platform, fixed in the platform) and the forearm's normal to the plane of the
    parallelogram (fixed in the forearm).  As with the real parallelogram the bars
    stay parallel to the hinge, so the platform only translates; rods with spherical
    ends would add an idle spin per rod and let the platform tilt, and the real loops
    (two ball-jointed rods per leg) would put a loop inside each leg, outside the
    paper's class.  Each leg is R–U–U; DOF = 3.

    Tree: arms on the ground (joints ``R1``…``R3``, actuated), forearms on the arms
    (``E1``…``E3``), the platform on forearm 1 (``W1``, frame at its attachment
    point, axes parallel to the world's at ``q0``); legs 2 and 3 close at the
    platform with universal closures ``W2``, ``W3``.  ``q0``: the home pose.
    ``segments``: every arm and forearm made of that many rigidly joined pieces, as
    in :func:`stewart`.
    """
    home = np.asarray(home, float)
    z = np.array([0.0, 0.0, 1.0])
    b = ModelBuilder("delta" if segments == 1 else f"delta_{segments}", gravity=G_SPATIAL)
    q0 = []
    C0 = None
    for leg in range(3):
        phi = 120.0 * leg
        u = _u(phi)
        a = np.cross(z, u)  # hinge axis, tangent
        th = delta_arm_angle(home, leg)
        Rz = np.column_stack([u, a, z])
        R_arm = Rz @ np.array(
            [[np.cos(th), 0.0, np.sin(th)], [0.0, 1.0, 0.0], [-np.sin(th), 0.0, np.cos(th)]]
        )
        E = DELTA_BASE_RADIUS * u + R_arm @ np.array([DELTA_ARM, 0.0, 0.0])
        C = home + DELTA_PLATFORM_RADIUS * u
        d = (C - E) / np.linalg.norm(C - E)
        y = a - (a @ d) * d
        y /= np.linalg.norm(y)
        R_fore = np.column_stack([d, y, np.cross(d, y)])  # forearm frame at q0 (world)
        R_je = R_arm.T @ R_fore  # elbow joint frame in the arm frame
        _link(
            b, f"arm{leg + 1}", "ground", Revolute("y"), segments, 1.0, DELTA_ARM,
            xyz=DELTA_BASE_RADIUS * u, rotation=Rz, joint_name=f"R{leg + 1}", actuated=True,
        )  # fmt: skip
        _link(
            b, f"forearm{leg + 1}", f"arm{leg + 1}", Universal(R_je.T @ [0.0, 1.0, 0.0], "z"),
            segments, 0.3, DELTA_FOREARM, xyz=(DELTA_ARM, 0.0, 0.0), rotation=R_je,
            joint_name=f"E{leg + 1}",
        )  # fmt: skip
        q0 += [th, 0.0, 0.0]
        if leg == 0:
            C0 = C
            r = DELTA_PLATFORM_RADIUS
            b.add_body(
                "platform", "forearm1", Universal(R_fore[:, 2], a), xyz=(DELTA_FOREARM, 0, 0),
                rotation=R_fore.T, joint_name="W1", mass=0.8, com=home - C,
                inertia=0.8 * r * r * np.array([0.25, 0.25, 0.5]),
            )  # fmt: skip
            q0 += [0.0, 0.0]
        else:
            b.add_frame(f"W{leg + 1}_on_forearm{leg + 1}", f"forearm{leg + 1}",
                        xyz=(DELTA_FOREARM, 0.0, 0.0))  # fmt: skip
            b.add_frame(f"W{leg + 1}_on_platform", "platform", xyz=C - C0)
            b.add_closure(
                f"W{leg + 1}", f"W{leg + 1}_on_forearm{leg + 1}", f"W{leg + 1}_on_platform",
                "universal", axis="z", axis2=a,
            )  # fmt: skip
    model = b.build()
    return assembled(
        model, np.array(q0), "Clavel Delta robot (parallelograms as universal-universal forearms)"
    )


__all__ = ["delta", "delta_arm_angle", "stewart", "stewart_geometry"]
