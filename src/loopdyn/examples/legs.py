"""Legged-robot legs with closed-chain knees and ankles, as the field builds them.

Four left legs of our own design, after well-known robots (the geometry is ours, not
the robots'): ``cassie_leg`` (a knee motor and a passive tarsus held by an achilles
rod, a foot driven through a plantar rod), ``digit_leg`` (a parallel ankle: two motors
on the shin drive the foot's pitch and roll through two rods with ball ends),
``five_bar_leg`` (a Minitaur-like five-bar on a hip roll, its two lower links hinged
to one toe: a 6d weld between two revolute joints' frames) and ``kangaroo_leg``
(linear actuators in the thigh drive the knee and, through a bell crank at the knee
and a rod, the ankle: three coupled loops).  A fifth, ``wl16_leg`` (after the WL-16
biped), is a 6-UPS parallel mechanism: six linear actuators between pelvis and foot.

Each leg is described once, in world coordinates of its **reference pose** (the zero
of every joint, loops closed; x forward, y left, z up, gravity −z; the pelvis is the
ground): the joint points and axes, the links' masses and inertias, the closure frames.
From that one description come

- the catalog model (``ld.examples.get("cassie_leg")``), built with ``ModelBuilder``;
- the parallel-robot community's files: a plain URDF of the spanning tree and a YAML
  file of its closures, motors and joint overrides (``write_files(name, folder)``;
  ``tests/data/legs`` holds them, and ``ld.load("cassie_leg.yaml")`` reads them back
  into the same model).

Frames: every link frame sits at its joint (URDF's convention) with the world's axes
at the reference pose, except the Kangaroo leg's ``heel_pin`` and ``foot_heel``,
pitched by 0.3 rad (a weld between turned frames).  Uniform rods are solid cylinders
(mass m, length L, radius r: m r²/2 about the axis, m(3r² + L²)/12 across), boxes are
solid boxes about their centre, small pins solid spheres (2/5 m r²).

Closures: ``closures="minimal"`` (default) keeps each closure's independent rows, as
``ld.load`` does (a ball closing a planar loop keeps its 2 in-plane rows; the five-bar's
weld its 2 in-plane translations and the rotation about y); ``closures="as_file"`` keeps
the file's 6d / 3d rows, dependent ones included (the rank logic of every method
handles them).  ``q0``: the reference pose, assembled.

Points (m) and masses (kg) of each leg are in its factory's docstring.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.model import ModelBuilder, Prismatic, Revolute, Spherical, Universal

_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _num(x):
    """A number as the files write it (12 significant digits): the catalog uses the same
    values, so that files and catalog describe the same model."""
    return float(f"{float(x):.12g}")


def _rot_y(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


# ---------------------------------------------------------------------------- shapes
def _cyl(mass, p0, p1, radius):
    """(mass, com, inertia about com, world axes) of a solid cylinder from p0 to p1."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    d = p1 - p0
    L = float(np.linalg.norm(d))
    u = d / L
    ax = 0.5 * mass * radius**2
    tr = mass * (3 * radius**2 + L**2) / 12.0
    I = tr * (np.eye(3) - np.outer(u, u)) + ax * np.outer(u, u)
    return mass, 0.5 * (p0 + p1), I


def _box(mass, center, size):
    a, b, c = size
    I = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * mass / 12.0
    return mass, np.asarray(center, float), I


def _ball(mass, center, radius):
    return mass, np.asarray(center, float), np.eye(3) * 0.4 * mass * radius**2


# ---------------------------------------------------------------------------- description
@dataclass
class Link:
    """A link: its parts' (mass, com, inertia) in world coordinates at the reference pose;
    ``pitch``: its frame turned about y by that angle (rad) from the world's axes."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    pitch: float = 0.0


@dataclass
class Joint:
    """A tree joint at world ``point`` (the child link's frame origin); ``axis`` in world
    coordinates (revolute, prismatic); ``override``: the YAML's joint_type, if any."""

    name: str
    kind: str
    parent: str
    child: str
    point: tuple
    axis: tuple | None = None
    override: str | None = None


@dataclass
class Frame:
    """A closure frame: a massless link on a fixed joint in the URDF, a frame in loopdyn."""

    name: str
    link: str
    point: tuple
    pitch: float | None = None


@dataclass
class Leg:
    name: str
    description: str
    root: str
    links: list
    joints: list
    frames: list
    loops: list  # (name_a, name_b, "6d" | "3d")
    motors: list
    limits: dict = field(default_factory=dict)

    def link(self, name):
        return next(L for L in self.links if L.name == name)


def _link(name, part, pitch=0.0):
    m, c, I = part
    return Link(name, m, np.asarray(c, float), np.asarray(I, float), pitch)


def _cassie():
    H0, H1, H2 = (0.0, 0.09, 0.0), (0.0, 0.09, -0.07), (0.0, 0.12, -0.09)
    K, A, T = (0.06, 0.12, -0.40), (-0.10, 0.12, -0.82), (0.08, 0.12, -1.22)
    R0, Hl = (-0.05, 0.16, -0.12), (-0.15, 0.15, -0.79)
    C0, C1, P1 = (-0.06, 0.10, -0.88), (-0.11, 0.10, -0.88), (0.03, 0.10, -1.20)
    links = [
        _link("pelvis", _box(10.0, (0.0, 0.0, 0.05), (0.2, 0.3, 0.15))),
        _link("hip_roll_link", _box(1.5, (-0.02, 0.09, -0.03), (0.12, 0.08, 0.08))),
        _link("hip_yaw_link", _box(1.2, (0.0, 0.10, -0.08), (0.08, 0.08, 0.10))),
        _link("thigh", _cyl(3.0, H2, K, 0.04)),
        _link("shin", _cyl(0.8, K, A, 0.025)),
        _link("tarsus", _cyl(0.6, A, T, 0.02)),
        _link("achilles_rod", _cyl(0.12, R0, Hl, 0.008)),
        _link("foot_crank", _cyl(0.08, C0, C1, 0.01)),
        _link("plantar_rod", _cyl(0.08, C1, P1, 0.006)),
        _link("foot", _box(0.25, (0.10, 0.12, -1.24), (0.16, 0.04, 0.02))),
    ]
    joints = [
        Joint("hip_roll", "revolute", "pelvis", "hip_roll_link", H0, _X),
        Joint("hip_yaw", "revolute", "hip_roll_link", "hip_yaw_link", H1, _Z),
        Joint("hip_pitch", "revolute", "hip_yaw_link", "thigh", H2, _Y),
        Joint("knee", "revolute", "thigh", "shin", K, _Y),
        Joint("ankle", "revolute", "shin", "tarsus", A, _Y),
        Joint("achilles", "revolute", "thigh", "achilles_rod", R0, _Y, "UJOINT_XY"),
        Joint("toe_motor", "revolute", "tarsus", "foot_crank", C0, _Y),
        Joint("plantar", "revolute", "foot_crank", "plantar_rod", C1, _Y),
        Joint("toe", "revolute", "tarsus", "foot", T, _Y),
    ]
    frames = [
        Frame("achilles_end", "achilles_rod", Hl),
        Frame("heel", "tarsus", Hl),
        Frame("plantar_end", "plantar_rod", P1),
        Frame("foot_plantar", "foot", P1),
    ]
    loops = [("achilles_end", "heel", "3d"), ("plantar_end", "foot_plantar", "3d")]
    motors = ["hip_roll", "hip_yaw", "hip_pitch", "knee", "toe_motor"]
    return Leg("cassie_leg", "Cassie-like leg: achilles rod and plantar rod loops", "pelvis",
               links, joints, frames, loops, motors)  # fmt: skip


def _digit():
    H0, H1, H2 = (0.0, 0.10, 0.0), (0.0, 0.10, -0.06), (0.0, 0.12, -0.10)
    K, A = (0.05, 0.12, -0.45), (-0.05, 0.12, -0.85)
    M = {"a": (-0.01, 0.15, -0.52), "b": (-0.01, 0.09, -0.52)}
    C = {"a": (-0.07, 0.15, -0.52), "b": (-0.07, 0.09, -0.52)}
    F = {"a": (-0.10, 0.15, -0.87), "b": (-0.10, 0.09, -0.87)}
    links = [
        _link("pelvis", _box(10.0, (0.0, 0.0, 0.05), (0.2, 0.3, 0.15))),
        _link("hip_roll_link", _box(1.5, (0.0, 0.10, -0.03), (0.10, 0.08, 0.08))),
        _link("hip_yaw_link", _box(1.2, (0.0, 0.11, -0.08), (0.08, 0.08, 0.08))),
        _link("thigh", _cyl(3.5, H2, K, 0.04)),
        _link("shin", _cyl(1.0, K, A, 0.03)),
        _link("foot", _box(0.4, (-0.02, 0.12, -0.89), (0.20, 0.08, 0.03))),
    ]
    joints = [
        Joint("hip_roll", "revolute", "pelvis", "hip_roll_link", H0, _X),
        Joint("hip_yaw", "revolute", "hip_roll_link", "hip_yaw_link", H1, _Z),
        Joint("hip_pitch", "revolute", "hip_yaw_link", "thigh", H2, _Y),
        Joint("knee", "revolute", "thigh", "shin", K, _Y),
        Joint("ankle", "revolute", "shin", "foot", A, _Y, "UJOINT_XY"),
    ]
    frames = []
    for s in ("a", "b"):
        links += [
            _link(f"toe_{s}_crank", _cyl(0.05, M[s], C[s], 0.008)),
            _link(f"toe_{s}_rod", _cyl(0.06, C[s], F[s], 0.015)),
        ]
        joints += [
            Joint(f"toe_{s}_motor", "revolute", "shin", f"toe_{s}_crank", M[s], _Y),
            Joint(
                f"toe_{s}_rod_top",
                "revolute",
                f"toe_{s}_crank",
                f"toe_{s}_rod",
                C[s],
                _Y,
                "SPHERICAL",
            ),
        ]
        frames += [
            Frame(f"toe_{s}_rod_end", f"toe_{s}_rod", F[s]),
            Frame(f"foot_{s}", "foot", F[s]),
        ]
    loops = [("toe_a_rod_end", "foot_a", "3d"), ("toe_b_rod_end", "foot_b", "3d")]
    motors = ["hip_roll", "hip_yaw", "hip_pitch", "knee", "toe_a_motor", "toe_b_motor"]
    return Leg("digit_leg", "Digit-like leg: parallel ankle of two rods with ball ends", "pelvis",
               links, joints, frames, loops, motors)  # fmt: skip


def _five_bar():
    H0, Mf, Mr = (0.0, 0.08, 0.0), (0.0, 0.11, -0.06), (0.0, 0.05, -0.06)
    Ef, Er, T = (0.09, 0.11, -0.18), (-0.09, 0.05, -0.18), (0.0, 0.08, -0.40)
    links = [
        _link("base", _box(5.0, (0.0, 0.0, 0.05), (0.2, 0.2, 0.1))),
        _link("hip", _box(1.0, (0.0, 0.08, -0.04), (0.08, 0.10, 0.08))),
        _link("upper_front", _cyl(0.2, Mf, Ef, 0.012)),
        _link("upper_rear", _cyl(0.2, Mr, Er, 0.012)),
        _link("lower_front", _cyl(0.12, Ef, T, 0.01)),
        _link("lower_rear", _cyl(0.12, Er, T, 0.01)),
        _link("toe", _ball(0.06, T, 0.025)),
        _link("toe_cap", _ball(0.02, T, 0.02)),
    ]
    joints = [
        Joint("hip_roll", "revolute", "base", "hip", H0, _X),
        Joint("motor_front", "revolute", "hip", "upper_front", Mf, _Y),
        Joint("knee_front", "revolute", "upper_front", "lower_front", Ef, _Y),
        Joint("toe_a", "revolute", "lower_front", "toe", T, _Y),
        Joint("motor_rear", "revolute", "hip", "upper_rear", Mr, _Y),
        Joint("knee_rear", "revolute", "upper_rear", "lower_rear", Er, _Y),
        Joint("toe_b", "revolute", "lower_rear", "toe_cap", T, _Y),
    ]
    loops = [("toe_a", "toe_b", "6d")]
    motors = ["hip_roll", "motor_front", "motor_rear"]
    return Leg("five_bar_leg", "five-bar leg: two hip motors, a toe welded between two hinges",
               "base", links, joints, [], loops, motors)  # fmt: skip


def _unit(a, b):
    d = np.subtract(b, a)
    return tuple(d / np.linalg.norm(d))


def _mid(a, b, t):
    return tuple(np.add(a, t * np.subtract(b, a)))


def _kangaroo():
    H0, H1, H2 = (0.0, 0.10, 0.0), (0.0, 0.10, -0.06), (0.0, 0.12, -0.10)
    K, A = (0.08, 0.12, -0.48), (-0.04, 0.12, -0.88)
    K0, Lk = (-0.04, 0.09, -0.14), (0.03, 0.09, -0.46)
    A0, Kb = (-0.05, 0.15, -0.16), (0.08, 0.15, -0.48)
    B1, B2 = (0.02, 0.15, -0.45), (0.03, 0.15, -0.51)
    Hh = (-0.10, 0.15, -0.85)
    dk, da = _unit(K0, Lk), _unit(A0, B1)
    links = [
        _link("pelvis", _box(10.0, (0.0, 0.0, 0.05), (0.2, 0.3, 0.15))),
        _link("hip_roll_link", _box(1.5, (0.0, 0.10, -0.03), (0.10, 0.10, 0.08))),
        _link("hip_yaw_link", _box(1.0, (0.0, 0.11, -0.08), (0.08, 0.08, 0.06))),
        _link("thigh", _cyl(3.0, H2, K, 0.04)),
        _link("shin", _cyl(0.8, K, A, 0.025)),
        _link("knee_cylinder", _cyl(0.4, K0, _mid(K0, Lk, 0.6), 0.02)),
        _link("knee_piston", _cyl(0.2, _mid(K0, Lk, 0.4), Lk, 0.01)),
        _link("ankle_cylinder", _cyl(0.4, A0, _mid(A0, B1, 0.6), 0.02)),
        _link("ankle_piston", _cyl(0.2, _mid(A0, B1, 0.4), B1, 0.01)),
        _link("bellcrank", _box(0.15, (0.05, 0.15, -0.48), (0.08, 0.02, 0.08))),
        _link("ankle_rod", _cyl(0.1, B2, Hh, 0.008)),
        _link("heel_pin", _ball(0.03, Hh, 0.015), pitch=0.3),
        _link("foot", _box(0.5, (0.0, 0.12, -0.91), (0.22, 0.08, 0.03))),
    ]
    joints = [
        Joint("hip_roll", "revolute", "pelvis", "hip_roll_link", H0, _X),
        Joint("hip_yaw", "revolute", "hip_roll_link", "hip_yaw_link", H1, _Z, "FIXED"),
        Joint("hip_pitch", "revolute", "hip_yaw_link", "thigh", H2, _Y),
        Joint("knee", "revolute", "thigh", "shin", K, _Y),
        Joint("ankle", "revolute", "shin", "foot", A, _Y),
        Joint("knee_cylinder_hinge", "revolute", "thigh", "knee_cylinder", K0, _Y),
        Joint("knee_motor", "prismatic", "knee_cylinder", "knee_piston", K0, dk),
        Joint("ankle_cylinder_hinge", "revolute", "thigh", "ankle_cylinder", A0, _Y),
        Joint("ankle_motor", "prismatic", "ankle_cylinder", "ankle_piston", A0, da),
        Joint("bellcrank_hinge", "revolute", "thigh", "bellcrank", Kb, _Y),
        Joint("ankle_rod_hinge", "revolute", "bellcrank", "ankle_rod", B2, _Y),
        Joint("heel_joint", "revolute", "ankle_rod", "heel_pin", Hh, _Y),
    ]
    frames = [
        Frame("knee_piston_end", "knee_piston", Lk),
        Frame("knee_lever", "shin", Lk),
        Frame("ankle_piston_end", "ankle_piston", B1),
        Frame("bellcrank_in", "bellcrank", B1),
        Frame("foot_heel", "foot", Hh, pitch=0.3),
    ]
    loops = [
        ("knee_piston_end", "knee_lever", "3d"),
        ("ankle_piston_end", "bellcrank_in", "3d"),
        ("heel_joint", "foot_heel", "6d"),
    ]
    motors = ["hip_roll", "hip_pitch", "knee_motor", "ankle_motor"]
    return Leg("kangaroo_leg", "Kangaroo-like leg: linear actuators, three coupled loops",
               "pelvis", links, joints, frames, loops, motors,
               limits={"knee_motor": (-0.08, 0.08), "ankle_motor": (-0.08, 0.08)})  # fmt: skip


def _wl16_points():
    """WL-16-like leg: (pelvis points B_i, foot points F_i), i = 1..6, at the reference
    pose.  Pelvis points in pairs at 120° ± 20° (k = 0, 1, 2) on a circle of radius 0.12 m
    about (0, 0.10, 0); foot points in pairs at 120° k + 60° ± 25° on a circle of radius
    0.08 m about (0, 0.10, −0.70): each actuator leans to the neighbouring pair, as in a
    Gough–Stewart platform."""
    c0, c1 = np.array([0.0, 0.10, 0.0]), np.array([0.0, 0.10, -0.70])
    B, F = [], []
    for k in range(3):
        for sgn in (-1.0, 1.0):
            a = np.radians(120.0 * k + 20.0 * sgn)
            b = np.radians(120.0 * k + 60.0 - 25.0 * sgn)
            B.append(tuple(_num(x) for x in c0 + 0.12 * np.array([np.cos(a), np.sin(a), 0.0])))
            F.append(tuple(_num(x) for x in c1 + 0.08 * np.array([np.cos(b), np.sin(b), 0.0])))
    return B, F


def _wl16():
    B, F = _wl16_points()
    links = [
        _link("pelvis", _box(10.0, (0.0, 0.0, 0.05), (0.2, 0.3, 0.15))),
        _link("foot", _box(1.5, (0.0, 0.10, -0.72), (0.24, 0.16, 0.03))),
    ]
    joints, frames, loops = [], [], []
    for i in range(1, 7):
        b, f = B[i - 1], F[i - 1]
        links += [
            _link(f"cylinder_{i}", _cyl(0.5, b, _mid(b, f, 0.6), 0.025)),
            _link(f"piston_{i}", _cyl(0.3, _mid(b, f, 0.4), f, 0.012)),
        ]
        joints += [
            Joint(f"hip_u_{i}", "revolute", "pelvis", f"cylinder_{i}", b, _X, "UJOINT_XY"),
            Joint(f"actuator_{i}", "prismatic", f"cylinder_{i}", f"piston_{i}", b, _unit(b, f)),
        ]
        if i == 1:  # the spanning tree carries the foot on the first actuator's ball
            joints.append(Joint("ankle_ball_1", "revolute", "piston_1", "foot", f, _Y,
                                "SPHERICAL"))  # fmt: skip
        else:
            frames += [Frame(f"piston_{i}_end", f"piston_{i}", f), Frame(f"foot_{i}", "foot", f)]
            loops.append((f"piston_{i}_end", f"foot_{i}", "3d"))
    motors = [f"actuator_{i}" for i in range(1, 7)]
    limits = {m: (-0.08, 0.08) for m in motors}
    return Leg("wl16_leg", "WL-16-like leg: a 6-UPS Stewart platform between pelvis and foot",
               "pelvis", links, joints, frames, loops, motors, limits=limits)  # fmt: skip


LEGS = {"cassie_leg": _cassie, "digit_leg": _digit, "five_bar_leg": _five_bar,
        "kangaroo_leg": _kangaroo, "wl16_leg": _wl16}  # fmt: skip


# ---------------------------------------------------------------------------- local data
def _placements(leg):
    """Each link's frame: (world origin, world rotation) at the reference pose."""
    out = {leg.root: (np.zeros(3), np.eye(3))}
    for j in leg.joints:
        out[j.child] = (np.asarray(j.point, float), _rot_y(leg.link(j.child).pitch))
    return out


def _local(leg):
    """Everything in the local numbers the files hold (12 significant digits)."""
    place = _placements(leg)
    pitch = {L.name: L.pitch for L in leg.links}
    links = {}
    for L in leg.links:
        p, R = place[L.name]
        com = [_num(x) for x in R.T @ (L.com - p)]
        I = R.T @ L.inertia @ R
        I = 0.5 * (I + I.T)
        links[L.name] = (_num(L.mass), com, [[_num(x) for x in row] for row in I])
    joints = []
    for j in leg.joints:
        pp, Rp = place[j.parent]
        pc, Rc = place[j.child]
        xyz = [_num(x) for x in Rp.T @ (pc - pp)]
        rpy = [0.0, _num(pitch[j.child] - pitch[j.parent]), 0.0]
        axis = None if j.axis is None else [_num(x) for x in Rc.T @ np.asarray(j.axis, float)]
        joints.append((j, xyz, rpy, axis))
    frames = []
    for f in leg.frames:
        p, R = place[f.link]
        fp = pitch[f.link] if f.pitch is None else f.pitch
        xyz = [_num(x) for x in R.T @ (np.asarray(f.point, float) - p)]
        frames.append((f, xyz, [0.0, _num(fp - pitch[f.link]), 0.0]))
    return links, joints, frames


# ---------------------------------------------------------------------------- the model
def build(name, closures="minimal"):
    """The catalog model of leg ``name`` (see the module docstring)."""
    from loopdyn.analysis.assembly import assemble
    from loopdyn.errors import ModelError
    from loopdyn.io._geometry import combine_inertias, rpy_matrix

    if closures not in ("minimal", "as_file"):
        raise ModelError(f"{name}: closures must be 'minimal' or 'as_file', got {closures!r}")
    leg = LEGS[name]()
    links, joints, frames = _local(leg)
    # links merged into their parent by a FIXED override: (body, pose in the body)
    body_of = {leg.root: ("ground", np.eye(4))}
    for j, xyz, rpy, _ in joints:
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = rpy_matrix(rpy), xyz
        if j.override == "FIXED":
            b, T = body_of[j.parent]
            body_of[j.child] = (b, T @ X)
        else:
            body_of[j.child] = (j.child, np.eye(4))
    parts = {}
    for lname, (m, c, I) in links.items():
        b, T = body_of[lname]
        R, p = T[:3, :3], T[:3, 3]
        parts.setdefault(b, []).append((m, R @ np.asarray(c) + p, R @ np.asarray(I) @ R.T))
    B = ModelBuilder(name, gravity=(0.0, 0.0, -9.81))
    for j, xyz, rpy, axis in joints:
        if j.override == "FIXED":
            continue
        pb, T = body_of[j.parent]
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = rpy_matrix(rpy), xyz
        P = T @ X
        if j.override == "SPHERICAL":
            joint = Spherical()
        elif j.override == "UJOINT_XY":
            joint = Universal("x", "y")
        elif j.kind == "prismatic":
            joint = Prismatic(axis)
        else:
            joint = Revolute(axis)
        m, c, I = combine_inertias(parts[j.child])
        B.add_body(j.child, pb, joint, xyz=P[:3, 3], rotation=P[:3, :3], mass=m, com=c,
                   inertia=I, joint_name=j.name, actuated=j.name in leg.motors)  # fmt: skip
    for lname, (b, T) in body_of.items():  # merged links stay frames, as ld.load keeps them
        if b != lname:
            B.add_frame(lname, b, xyz=T[:3, 3], rotation=T[:3, :3])
    frame_pose = {}
    for f, xyz, rpy in frames:
        b, T = body_of[f.link]
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = rpy_matrix(rpy), xyz
        P = T @ X
        B.add_frame(f.name, b, xyz=P[:3, 3], rotation=P[:3, :3])
        frame_pose[f.name] = (b, P)
    for j in leg.joints:  # a joint's name: its child link's frame
        frame_pose[j.name] = body_of[j.child]
    specs = []
    for a, b_, t in leg.loops:
        cname = f"{a}C{b_}"
        (ba, Pa), (bb, Pb) = frame_pose[a], frame_pose[b_]
        B.add_frame(f"{cname}_A", ba, xyz=Pa[:3, 3], rotation=Pa[:3, :3])
        B.add_frame(f"{cname}_B", bb, xyz=Pb[:3, 3], rotation=Pb[:3, :3])
        specs.append((cname, "weld" if t == "6d" else "ball"))
    if closures == "minimal":
        from loopdyn.io._graph import _structural_reductions

        full = _with_closures(B, specs, {})
        full.q0 = assemble(full, full.neutral())
        over = _structural_reductions(full)
    else:
        over = {}
    model = _with_closures(B, specs, over)
    return assembled(model, model.neutral(), leg.description)


def _with_closures(builder, specs, over):
    import copy

    B = copy.deepcopy(builder)
    for cname, kind in specs:
        o = over.get(cname)
        if o is None:
            B.add_closure(cname, f"{cname}_A", f"{cname}_B", kind)
        elif o["kind"] is not None:
            B.add_closure(cname, f"{cname}_A", f"{cname}_B", o["kind"], **o["kw"])
    return B.build()


_CLOSURES = ("text", "'minimal' (independent rows, as ld.load) or 'as_file' (6d/3d rows)")


@parameters(closures=_CLOSURES)
def cassie_leg(closures="minimal"):
    """Cassie-like leg (fixed pelvis), 5 DOF, 5 motors.

    Joints (reference pose, m): ``hip_roll`` (x) at (0, 0.09, 0), ``hip_yaw`` (z) at
    (0, 0.09, −0.07), ``hip_pitch`` (y) at (0, 0.12, −0.09) carrying the ``thigh`` (3 kg,
    to the knee), ``knee`` (y, motor) at (0.06, 0.12, −0.40) carrying the ``shin``
    (0.8 kg), ``ankle`` (y, passive) at (−0.10, 0.12, −0.82) carrying the ``tarsus``
    (0.6 kg), ``toe`` (y, passive) at (0.08, 0.12, −1.22) carrying the ``foot`` (0.25 kg).
    Achilles loop: a rod (0.12 kg) on a universal joint (``achilles``, a URDF revolute
    overridden ``UJOINT_XY``) at (−0.05, 0.16, −0.12) on the thigh, its end closed by a
    ball (3d) on the tarsus' heel at (−0.15, 0.15, −0.79): it holds the tarsus.  Plantar
    loop: a crank (``toe_motor``, y, motor) at (−0.06, 0.10, −0.88) on the tarsus, tip
    (−0.11, 0.10, −0.88), a plantar rod (hinged, y) closed by a ball on the foot at
    (0.03, 0.10, −1.20): the toe motor drives the foot.  Motors: hip_roll, hip_yaw,
    hip_pitch, knee, toe_motor.
    """
    return build("cassie_leg", closures)


@parameters(closures=_CLOSURES)
def digit_leg(closures="minimal"):
    """Digit-like leg (fixed pelvis) with a parallel ankle: 8 DOF, 6 motors.

    ``hip_roll`` (x) at (0, 0.10, 0), ``hip_yaw`` (z) at (0, 0.10, −0.06), ``hip_pitch``
    (y) at (0, 0.12, −0.10) (``thigh`` 3.5 kg), ``knee`` (y, motor) at (0.05, 0.12, −0.45)
    (``shin`` 1 kg), ``ankle`` at (−0.05, 0.12, −0.85): a URDF revolute overridden
    ``UJOINT_XY`` (roll, then pitch) carrying the ``foot`` (0.4 kg).  Two ankle motors on
    the shin, ``toe_a_motor`` at (−0.01, 0.15, −0.52) and ``toe_b_motor`` at
    (−0.01, 0.09, −0.52) (y), turn 60 mm cranks pointing back; from each crank tip a rod
    (0.06 kg, a tube of radius 15 mm) on a ball joint (``toe_?_rod_top``, a URDF revolute
    overridden ``SPHERICAL``) reaches the foot at (−0.10, 0.15, −0.87) and
    (−0.10, 0.09, −0.87), closed there by balls (3d).  Together the motors set the
    foot's pitch, against each other its roll; each rod also spins freely about its own
    axis (2 passive DOF, as on the robot).  Motors: hip_roll, hip_yaw, hip_pitch, knee,
    toe_a_motor, toe_b_motor.
    """
    return build("digit_leg", closures)


@parameters(closures=_CLOSURES)
def five_bar_leg(closures="minimal"):
    """Minitaur-like five-bar leg on a hip roll: 4 DOF, 3 motors.

    ``hip_roll`` (x, motor) at (0, 0.08, 0) carries the ``hip`` (1 kg) with two coaxial
    motors (y): ``motor_front`` at (0, 0.11, −0.06) and ``motor_rear`` at
    (0, 0.05, −0.06), 0.15 m upper links (0.2 kg) to the knees at (0.09, 0.11, −0.18) and
    (−0.09, 0.05, −0.18) (``knee_front``, ``knee_rear``, y), lower links (0.12 kg) to the
    toe point (0, 0.08, −0.40).  There each lower link ends in a hinge (``toe_a``,
    ``toe_b``, y): ``toe`` (a 0.06 kg ball) on the front one, ``toe_cap`` (0.02 kg) on the
    rear one, and the closure welds the two hinges' frames (6d between the joints
    ``toe_a`` and ``toe_b``).  The loop moves in planes y = const, so the weld's
    y-translation and x-, z-rotation rows are zero at every pose (3 dependent rows: the
    ``as_file`` model keeps them); the toe spins freely about y (1 passive DOF).  Motors:
    hip_roll, motor_front, motor_rear.
    """
    return build("five_bar_leg", closures)


@parameters(closures=_CLOSURES)
def kangaroo_leg(closures="minimal"):
    """Kangaroo-like leg driven by linear actuators in the thigh: 4 DOF, 4 motors.

    ``hip_roll`` (x, motor) at (0, 0.10, 0); ``hip_yaw`` (z) at (0, 0.10, −0.06), locked by
    a ``FIXED`` override; ``hip_pitch`` (y, motor) at (0, 0.12, −0.10) (``thigh`` 3 kg),
    ``knee`` (y, passive) at (0.08, 0.12, −0.48) (``shin`` 0.8 kg), ``ankle`` (y, passive)
    at (−0.04, 0.12, −0.88) (``foot`` 0.5 kg).  Knee loop: a cylinder hinged on the thigh
    at (−0.04, 0.09, −0.14), its piston (``knee_motor``, prismatic) closed by a ball on a
    shin lever at (0.03, 0.09, −0.46).  Ankle loops: a cylinder hinged at
    (−0.05, 0.15, −0.16), its piston (``ankle_motor``) closed by a ball on a bell crank
    hinged on the thigh at the knee axis, (0.08, 0.15, −0.48), at (0.02, 0.15, −0.45); a
    rod hinged on the bell crank at (0.03, 0.15, −0.51) reaches the heel at
    (−0.10, 0.15, −0.85), where it ends in a hinge (``heel_joint``) welded (6d) to the
    foot: the joint's frame and the foot's ``foot_heel`` frame, both pitched by 0.3 rad.
    The three loops share the shin and the bell crank.  Motors: hip_roll, hip_pitch,
    knee_motor, ankle_motor (strokes ±80 mm).
    """
    return build("kangaroo_leg", closures)


@parameters(closures=_CLOSURES)
def wl16_leg(closures="minimal"):
    """WL-16-like leg (fixed pelvis): the foot on six linear actuators, 6 DOF, 6 motors.

    After Waseda's WL-16 biped, whose legs are 6-DOF parallel mechanisms (the geometry is
    ours).  Six actuators between the pelvis and the foot (1.5 kg, a 0.24 × 0.16 × 0.03 m
    box centred at (0, 0.10, −0.72)): actuator i is a cylinder (0.5 kg) on a universal
    joint ``hip_u_i`` (a URDF revolute overridden ``UJOINT_XY``: x, then y) at its pelvis
    point B_i, and a piston (0.3 kg) on a prismatic joint ``actuator_i`` (motor, along
    B_i → F_i, strokes ±80 mm) whose end meets the foot at F_i in a ball joint.  Pelvis
    points: pairs at 120° k ± 20° (k = 0, 1, 2) on a circle of radius 0.12 m about
    (0, 0.10, 0); foot points: pairs at 120° k + 60° ∓ 25° on a circle of radius 0.08 m
    about (0, 0.10, −0.70) (``_wl16_points``): a 6-UPS Gough–Stewart platform hanging
    below the hip.  The spanning tree carries the foot on actuator 1's ball
    (``ankle_ball_1``, a revolute overridden ``SPHERICAL``); the five other actuators are
    closed on the foot by balls (3d), 15 rows on 21 coordinates.  Motors: actuator_1 …
    actuator_6.
    """
    return build("wl16_leg", closures)


# ---------------------------------------------------------------------------- the files
def _fmt(v):
    return " ".join(f"{x:.12g}" for x in v)


def _urdf_elements(leg, prefix="", root=None, dy=0.0):
    """The URDF lines of ``leg``'s links, joints and frame links, every name prefixed
    ``prefix``; with ``root`` the leg hangs from that link (its own root link is not
    written) and its hips (the joints on the root) are moved ``dy`` m along y."""
    links, joints, frames = _local(leg)

    def nm(n):
        return root if root is not None and n == leg.root else prefix + n

    out = []
    for lname, (m, c, I) in links.items():
        if root is not None and lname == leg.root:
            continue
        out += [
            f'  <link name="{nm(lname)}">',
            "    <inertial>",
            f'      <origin xyz="{_fmt(c)}" rpy="0 0 0"/>',
            f'      <mass value="{m:.12g}"/>',
            f'      <inertia ixx="{I[0][0]:.12g}" ixy="{I[0][1]:.12g}" ixz="{I[0][2]:.12g}" '
            f'iyy="{I[1][1]:.12g}" iyz="{I[1][2]:.12g}" izz="{I[2][2]:.12g}"/>',
            "    </inertial>",
            "  </link>",
        ]
    for j, xyz, rpy, axis in joints:
        lo, hi = leg.limits.get(j.name, (-3.14, 3.14))
        if j.parent == leg.root:
            xyz = [xyz[0], xyz[1] + dy, xyz[2]]
        out += [
            f'  <joint name="{prefix}{j.name}" type="{j.kind}">',
            f'    <parent link="{nm(j.parent)}"/>',
            f'    <child link="{nm(j.child)}"/>',
            f'    <origin xyz="{_fmt(xyz)}" rpy="{_fmt(rpy)}"/>',
            f'    <axis xyz="{_fmt(axis)}"/>',
            f'    <limit lower="{lo}" upper="{hi}" effort="200" velocity="20"/>',
            "  </joint>",
        ]
    for f, xyz, rpy in frames:
        out += [
            f'  <link name="{prefix}{f.name}"/>',
            f'  <joint name="{prefix}{f.name}_fixed" type="fixed">',
            f'    <parent link="{nm(f.link)}"/>',
            f'    <child link="{prefix}{f.name}"/>',
            f'    <origin xyz="{_fmt(xyz)}" rpy="{_fmt(rpy)}"/>',
            "  </joint>",
        ]
    return out


def urdf_text(name):
    """The URDF of leg ``name``'s spanning tree (the community's convention)."""
    leg = LEGS[name]()
    out = [
        '<?xml version="1.0"?>',
        f"<!-- {leg.description}.  Written by loopdyn.examples.legs.write_files:",
        f"     the geometry is documented in loopdyn.examples.legs.{name}; the loop",
        f"     closures, motors and joint overrides are in {name}.yaml. -->",
        f'<robot name="{name}">',
        *_urdf_elements(leg),
        "</robot>",
    ]
    return "\n".join(out) + "\n"


def yaml_text(name):
    """The YAML file of leg ``name``'s closures, motors and overrides."""
    leg = LEGS[name]()

    def lst(xs):
        return "[" + ", ".join(f"'{x}'" for x in xs) + "]"

    over = [j for j in leg.joints if j.override]
    out = [
        f"# {leg.description}: loop closures of {name}.urdf",
        "# (the parallel-robot community's convention; see loopdyn.io.loops)",
        "closed_loop: [" + ", ".join(lst(p[:2]) for p in leg.loops) + "]",
        "type: " + lst(p[2] for p in leg.loops),
        "name_mot: " + lst(leg.motors),
    ]
    if over:
        out += ["joint_name: " + lst(j.name for j in over),
                "joint_type: " + lst(j.override for j in over)]  # fmt: skip
    return "\n".join(out) + "\n"


def robot_texts(name, legs, spacing=0.25):
    """URDF and YAML texts of a robot ``name`` whose pelvis carries the ``legs`` (leg names
    of ``LEGS``, repeats allowed) side by side: leg k's links, joints, frames and motors
    are prefixed ``l<k>_``, its hip placed ``k · spacing`` m along −y from the first.
    Load with ``floating_base=True`` for a floating pelvis (the root link ``pelvis``, a
    box of 10 kg).  A Digit-like biped is ``robot_texts("biped", ["digit_leg"] * 2)``;
    eight legs of the four kinds make a model of 72 joints for load-time benchmarks."""
    pelvis = _box(10.0, (0.0, -0.5 * spacing * (len(legs) - 1), 0.1),
                  (0.2, spacing * len(legs), 0.15))  # fmt: skip
    m, c, I = pelvis
    lines = [
        '<?xml version="1.0"?>',
        f"<!-- {name}: a pelvis carrying {', '.join(legs)}; written by",
        "     loopdyn.examples.legs.robot_texts (geometry: the legs' factories). -->",
        f'<robot name="{name}">',
        '  <link name="pelvis">',
        "    <inertial>",
        f'      <origin xyz="{_fmt(c)}" rpy="0 0 0"/>',
        f'      <mass value="{m:.12g}"/>',
        f'      <inertia ixx="{I[0][0]:.12g}" ixy="0" ixz="0" iyy="{I[1][1]:.12g}" iyz="0" '
        f'izz="{I[2][2]:.12g}"/>',
        "    </inertial>",
        "  </link>",
    ]
    closed, types, motors, over_names, over_types = [], [], [], [], []
    for k, lname in enumerate(legs):
        leg = LEGS[lname]()
        pre = f"l{k}_"
        lines += _urdf_elements(leg, pre, "pelvis", -k * spacing)
        for a, b, t in leg.loops:
            closed.append((pre + a, pre + b))
            types.append(t)
        motors += [pre + mname for mname in leg.motors]
        for j in leg.joints:
            if j.override:
                over_names.append(pre + j.name)
                over_types.append(j.override)
    lines.append("</robot>")

    def lst(xs):
        return "[" + ", ".join(f"'{x}'" for x in xs) + "]"

    yaml = [
        f"# {name}: loop closures of {name}.urdf (parallel-robot convention)",
        "closed_loop: [" + ", ".join(lst(p) for p in closed) + "]",
        "type: " + lst(types),
        "name_mot: " + lst(motors),
    ]
    if over_names:
        yaml += ["joint_name: " + lst(over_names), "joint_type: " + lst(over_types)]
    return "\n".join(lines) + "\n", "\n".join(yaml) + "\n"


def write_robot_files(name, legs, folder, spacing=0.25):
    """Write ``<name>.urdf`` and ``<name>.yaml`` of :func:`robot_texts` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    urdf, yaml = robot_texts(name, legs, spacing)
    (folder / f"{name}.urdf").write_text(urdf, encoding="utf-8")
    (folder / f"{name}.yaml").write_text(yaml, encoding="utf-8")
    return folder / f"{name}.urdf", folder / f"{name}.yaml"


def write_files(name, folder):
    """Write ``<name>.urdf`` and ``<name>.yaml`` of leg ``name`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.urdf").write_text(urdf_text(name), encoding="utf-8")
    (folder / f"{name}.yaml").write_text(yaml_text(name), encoding="utf-8")
    return folder / f"{name}.urdf", folder / f"{name}.yaml"


__all__ = [
    "LEGS",
    "build",
    "cassie_leg",
    "digit_leg",
    "five_bar_leg",
    "kangaroo_leg",
    "robot_texts",
    "urdf_text",
    "wl16_leg",
    "write_files",
    "write_robot_files",
    "yaml_text",
]
