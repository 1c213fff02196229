"""Multi-loop mechanisms of the reduced-order (SLM/SSLM) paper: carpet scraper, 3-RRR, excavator.

All three are planar (x–y plane, hinges along z, gravity -y), built from uniform
slender rods (``rod``) unless stated.  Joints carry the paper's joint numbers
(``"j1"`` …), bodies are named ``"link1"`` … (``"#1"`` … in the paper) except for
the excavator, whose bodies have descriptive names (``EXCAVATOR_BODIES`` maps the
paper's numbers to them).  The spanning tree of each model is the paper's cut:
its ground-attached trees are the paper's subsystems I, II, III in that order and
its closures are the cut joints, in the order of the paper's loops 1, 2, … — so
the loop–subsystem pattern of J is that of eqs. (26), (37) and (14).

The paper gives link lengths and masses (Table 1) and the initial actuated angles
(Table 2) but not the ground pivots and some offsets; the choices made here are
documented in each docstring and in ``docs/sslm.md``.
"""

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.planar import G_PLANAR, _angle, circle_intersection
from loopdyn.examples.shapes import rod
from loopdyn.model import ModelBuilder, Prismatic, Revolute

# Table 2 of the paper: initial crank rate of the carpet scraper (rad/s) and initial
# actuated angles of the 3-RRR (rad); both start from rest otherwise.
CARPET_SCRAPER_THETA1_DOT = 4.7124
THREE_RRR_THETA = (1.04, 4.1883, 5.7637)

# carpet scraper (Table 1 lengths, m; masses, kg) and the geometry chosen here
_CS_A = {1: 0.038, 2: 0.1152, 3: 0.2304, 4: 0.3346, 5: 0.239, 6: 0.8365, 7: 0.239}
_CS_M = {1: 1.5, 2: 3.0, 3: 5.0, 4: 4.2, 5: 3.0, 6: 10.5, 7: 3.0}
_CS_J1 = np.array([0.0, 0.0])  # crank pivot
_CS_J2 = np.array([-0.20, 0.0])  # pivot of link 2
_CS_J4 = np.array([-0.45, 0.05])  # pivot of link 4
_CS_A39 = 0.07  # joint 9 on the extension of link 3 beyond joint 3
_CS_A56 = 0.05  # joint 5 on link 4, a56 before joint 6 (link 4's tip)
_CS_A67 = 0.35  # joint 7 on link 6, a67 from joint 6


def _u(a):
    return np.array([np.cos(a), np.sin(a)])


def carpet_scraper_positions(theta1):
    """World positions (2D) of joints 1–10 of the carpet scraper at crank angle θ1.

    Branches: joint 3 above the line joint 2 – joint 8, joint 5 and joint 7 on the
    left of their dyads, as in ``carpet_scraper``.  Joints 9 and 10 coincide (App.
    A.1: both at distance a59 = a5 from joint 5).
    """
    a = _CS_A
    P = {1: _CS_J1, 2: _CS_J2, 4: _CS_J4}
    P[8] = _CS_J1 + a[1] * _u(theta1)
    P[3] = circle_intersection(P[2], a[2], P[8], a[3])
    P[9] = P[3] - _CS_A39 * (P[8] - P[3]) / a[3]
    r45 = a[4] - _CS_A56
    P[5] = circle_intersection(P[4], r45, P[9], a[5])
    P[6] = P[4] + a[4] * (P[5] - P[4]) / r45
    P[10] = P[9]
    P[7] = circle_intersection(P[6], _CS_A67, P[10], a[7])
    return P


@parameters(theta1=("rad", "crank angle"))
def carpet_scraper(theta1=0.0):
    """The industrial carpet scraping mechanism of Sec. 4.1 (7 links, 10 joints, 3 loops, 1 DOF).

    Links (Table 1): crank #1 (0.038 m, 1.5 kg), #2 (0.1152 m, 3 kg), #3 (0.2304 m,
    5 kg), #4 (0.3346 m, 4.2 kg), #5 (0.239 m, 3 kg), #6 (0.8365 m, 10.5 kg),
    #7 (0.239 m, 3 kg), uniform rods.  Joints: 1 ground–#1 (actuated crank),
    2 ground–#2, 3 #2–#3, 4 ground–#4, 5 #4–#5, 6 #4–#6, 7 #6–#7; the cut joints 8
    (#1–#3), 9 (#3–#5) and 10 (#5–#7) are the closures of loops 1: 1-2-3-8-1,
    2: 2-3-9-5-4-2 and 3: 5-6-7-10-5.  Subsystems: I = {#1}, II = {#2, #3},
    III = {#4, #5, #6, #7} (a tree: #5 and #6 both hang from #4), so
    J = [[J11, J12, O], [O, J22, J23], [O, O, J33]] (eq. 26).

    q = (θ1, …, θ7) of App. A.1: θ1, θ2, θ4 absolute, the others relative to the
    parent link; α3 = π + θ2 + θ3 (joint 3 carries the paper's π offset), the 2π
    offsets of α5, α6, α7 vanish modulo 2π.

    Geometry chosen here (the paper gives no pivots): joint 1 at the origin,
    joint 2 at (-0.20, 0), joint 4 at (-0.45, 0.05).  Links 1-2-3 and the ground
    form a crank-rocker (Grashof) four-bar; joint 9 sits on the extension of link 3
    beyond joint 3 at a39 = 0.07 m (massless lever; the rod #3 spans joints 3–8);
    joint 5 is a56 = 0.05 m below link 4's tip (joint 6); joints 9 and 10 coincide
    at link 5's tip (App. A.1); joint 7 is a67 = 0.35 m along link 6, which carries
    the scraper at its free end.  The transmission angles of the three dyads
    (at joints 3, 5 and 7) stay above 41°, 34° and 50° through a full crank turn.
    ``q0``: assembled at crank angle ``theta1``.
    """
    a, m = _CS_A, _CS_M
    b = ModelBuilder("carpet_scraper", gravity=G_PLANAR, planar=True)
    b.add_body("link1", "ground", Revolute("z"), joint_name="j1", actuated=True, **rod(m[1], a[1]))
    b.add_body(
        "link2", "ground", Revolute("z"), xyz=(*_CS_J2, 0), joint_name="j2", **rod(m[2], a[2])
    )
    b.add_body(
        "link3", "link2", Revolute("z"), xyz=(a[2], 0, 0), rpy=(0, 0, np.pi), joint_name="j3",
        **rod(m[3], a[3]),
    )  # fmt: skip
    b.add_body(
        "link4", "ground", Revolute("z"), xyz=(*_CS_J4, 0), joint_name="j4", **rod(m[4], a[4])
    )
    b.add_body(
        "link5", "link4", Revolute("z"), xyz=(a[4] - _CS_A56, 0, 0), joint_name="j5",
        **rod(m[5], a[5]),
    )  # fmt: skip
    b.add_body(
        "link6", "link4", Revolute("z"), xyz=(a[4], 0, 0), joint_name="j6", **rod(m[6], a[6])
    )
    b.add_body(
        "link7", "link6", Revolute("z"), xyz=(_CS_A67, 0, 0), joint_name="j7", **rod(m[7], a[7])
    )
    b.add_frame("j8_on_link1", "link1", xyz=(a[1], 0, 0))
    b.add_frame("j8_on_link3", "link3", xyz=(a[3], 0, 0))
    b.add_frame("j9_on_link3", "link3", xyz=(-_CS_A39, 0, 0))
    b.add_frame("j9_on_link5", "link5", xyz=(a[5], 0, 0))
    b.add_frame("j10_on_link5", "link5", xyz=(a[5], 0, 0))
    b.add_frame("j10_on_link7", "link7", xyz=(a[7], 0, 0))
    b.add_closure("j8", "j8_on_link1", "j8_on_link3", "revolute")
    b.add_closure("j9", "j9_on_link3", "j9_on_link5", "revolute")
    b.add_closure("j10", "j10_on_link5", "j10_on_link7", "revolute")
    P = carpet_scraper_positions(theta1)
    al2 = _angle(P[2], P[3])
    al3 = _angle(P[3], P[8])
    al4 = _angle(P[4], P[6])
    al5 = _angle(P[5], P[9])
    al6 = _angle(P[6], P[7])
    al7 = _angle(P[7], P[10])
    guess = np.array([theta1, al2, al3 - al2 - np.pi, al4, al5 - al4, al6 - al4, al7 - al6])
    guess[1:] = np.angle(np.exp(1j * guess[1:]))  # passive angles in (-π, π]
    model = b.build()
    return assembled(model, guess, "carpet scraping mechanism (reduced-order paper, Sec. 4.1)")


# 3-RRR (Table 1): proximal links #1, #6, #7 0.4 m, 3 kg; distal links #2, #4, #5 0.6 m,
# 4 kg; platform #3 side 0.4 m, 8 kg.  Base triangle chosen here (side 1.6 m, centred at
# the origin).
_RRR_L = 0.4
_RRR_M = 3.0
_RRR_LD = 0.6
_RRR_MD = 4.0
_RRR_SIDE = 0.4
_RRR_BASE_SIDE = 1.6


def _rrr_proximal(b, name, corner, joint_name):
    """A proximal 3-RRR link (#1, #6, #7): on an actuated revolute at a base ``corner``."""
    b.add_body(
        name, "ground", Revolute("z"), xyz=(*corner, 0), joint_name=joint_name, actuated=True,
        **rod(_RRR_M, _RRR_L),
    )  # fmt: skip


def three_rrr_base():
    """Ground pivots B1, B2, B3 (3, 2): an equilateral triangle of side 1.6 m about the origin.

    B_k = R (cos(240° + 120° k), sin(240° + 120° k)), R = 1.6/√3: B1 lower left,
    B2 on the +x axis, B3 upper left.
    """
    R = _RRR_BASE_SIDE / np.sqrt(3.0)
    return np.array([R * _u(np.deg2rad(240.0 + 120.0 * k)) for k in range(3)])


def _triangle_plate(mass, side):
    """Uniform equilateral triangular plate in the x–y plane, vertex at the origin, edge on +x."""
    c = np.array([side / 2.0, side / (2.0 * np.sqrt(3.0)), 0.0])
    izz = mass * side**2 / 12.0
    return {"mass": mass, "com": c, "inertia": np.diag([izz / 2.0, izz / 2.0, izz])}


@parameters(theta=("rad", "the three actuated angles"))
def three_rrr(theta=THREE_RRR_THETA):
    """The 3-RRR planar parallel manipulator of Sec. 4.2 (7 links, 9 joints, 2 loops, 3 DOF).

    Table 1: proximal links #1, #6, #7 0.4 m, 3 kg; distal links #2, #4, #5 0.6 m,
    4 kg; platform #3: equilateral triangle of side 0.4 m, 8 kg (uniform plate).
    (Until issue 41 the distal links were 0.4 m, 3 kg on a base of side 1.2 m: not
    the paper's.)  Joints:
    1 ground–#1, 2 #1–#2, 3 #2–#3 (platform vertex P1), 4 #3–#4 (P2), 5 #3–#5 (P3),
    8 ground–#6, 9 ground–#7; actuated 1, 8, 9.  The cut joints 6 (#4–#6) and
    7 (#5–#7) close loops 1: 1-2-3-4-6-8-1 and 2: 1-2-3-5-7-9-1.  Subsystems:
    I = {#1, #2, #3, #4, #5} (a tree), II = {#6}, III = {#7}, so
    J = [[J11, J12, O], [J21, O, J23]] (eq. 37).

    q = (θ1, …, θ7) of App. A.2: θ1, θ6, θ7 the absolute proximal angles, θ2, θ3
    relative; the distal links #4, #5 point from the platform vertex to the elbow
    (α5 + π = α7 + θ4, α6 + π = α7 + π/3 + θ5: the paper's offsets).  The platform
    frame sits at P1 with x along P1→P2, P3 at +60°.

    Base chosen here (not in the paper): pivots at the vertices of an equilateral
    triangle of side 1.6 m (``three_rrr_base``), for which Table 2's actuated
    angles ``theta`` = (θ1, θ6, θ7) = (1.04, 4.1883, 5.7637) rad assemble with the
    platform near the centre (P1 ≈ (0.304, -0.248), platform angle ≈ 1.383 rad) and
    elbows away from the serial and parallel singularities (searched among base sides
    0.6–2.0 m and orientations: the smallest of the three elbow sines is 0.64, the
    parallel-singularity measure σ_min/σ_max of the platform Jacobian 0.26, near the
    best found).  ``q0``: that assembly.
    """
    L, Ld, d = _RRR_L, _RRR_LD, _RRR_SIDE
    B = three_rrr_base()
    b = ModelBuilder("three_rrr", gravity=G_PLANAR, planar=True)
    _rrr_proximal(b, "link1", B[0], "j1")
    b.add_body("link2", "link1", Revolute("z"), xyz=(L, 0, 0), joint_name="j2", **rod(_RRR_MD, Ld))
    b.add_body(
        "link3", "link2", Revolute("z"), xyz=(Ld, 0, 0), joint_name="j3",
        **_triangle_plate(8.0, d),
    )  # fmt: skip
    b.add_body("link4", "link3", Revolute("z"), xyz=(d, 0, 0), joint_name="j4", **rod(_RRR_MD, Ld))
    p3 = d * _u(np.pi / 3)
    b.add_body(
        "link5", "link3", Revolute("z"), xyz=(*p3, 0), rpy=(0, 0, np.pi / 3), joint_name="j5",
        **rod(_RRR_MD, Ld),
    )  # fmt: skip
    _rrr_proximal(b, "link6", B[1], "j8")
    _rrr_proximal(b, "link7", B[2], "j9")
    b.add_frame("j6_on_link4", "link4", xyz=(Ld, 0, 0))
    b.add_frame("j6_on_link6", "link6", xyz=(L, 0, 0))
    b.add_frame("j7_on_link5", "link5", xyz=(Ld, 0, 0))
    b.add_frame("j7_on_link7", "link7", xyz=(L, 0, 0))
    b.add_closure("j6", "j6_on_link4", "j6_on_link6", "revolute")
    b.add_closure("j7", "j7_on_link5", "j7_on_link7", "revolute")
    model = b.build()
    th1, th6, th7 = (float(t) for t in theta)
    x = _rrr_platform(B, (th1, th6, th7))
    E = [B[k] + L * _u(t) for k, t in enumerate((th1, th6, th7))]
    P1, a7 = x[:2], x[2]
    P2, P3 = P1 + d * _u(a7), P1 + d * _u(a7 + np.pi / 3)
    al4 = _angle(E[0], P1)
    guess = [
        th1, al4 - th1, a7 - al4, _angle(P2, E[1]) - a7, _angle(P3, E[2]) - a7 - np.pi / 3,
        th6, th7,
    ]  # fmt: skip
    return assembled(
        model, np.array(guess), "3-RRR planar parallel manipulator (reduced-order paper, Sec. 4.2)"
    )


def _rrr_platform(B, theta, x0=(0.3039, -0.2484, 1.3832)):
    """Platform pose (P1x, P1y, α7) closing the three legs at proximal angles ``theta``."""
    from scipy.optimize import fsolve

    L, Ld, d = _RRR_L, _RRR_LD, _RRR_SIDE
    E = [B[k] + L * _u(t) for k, t in enumerate(theta)]

    def F(x):
        P1, a = x[:2], x[2]
        P = (P1, P1 + d * _u(a), P1 + d * _u(a + np.pi / 3))
        return [np.sum((P[k] - E[k]) ** 2) - Ld**2 for k in range(3)]

    return fsolve(F, np.asarray(x0, float), xtol=1e-13)


# excavator after Fig. 1: reference pose (world x–y, m) of every pin, designed here
_EX_PINS = {
    "G1": (-0.35, 0.45),  # joint 1: rear link on the upper structure
    "G6": (0.0, 0.0),  # joint 6: lower boom on the upper structure
    "G9": (0.45, -0.35),  # joint 9: boom cylinder on the upper structure
}
EXCAVATOR_BODIES = {
    "#1": "rear_link",
    "#2": "upper_boom",
    "#3": "bucket_cyl",
    "#4": "bucket_rod",
    "#5": "stick",
    "#6": "lower_boom",
    "#7": "bucket",
    "#8": "stick_rod",
    "#9": "stick_cyl",
    "#10": "boom_cyl",
    "#11": "boom_rod",
}


def _excavator_pins():
    """World positions of the pins (joints 1–15) in the reference pose."""
    P = {k: np.array(v, float) for k, v in _EX_PINS.items()}
    u40, n40 = _u(np.deg2rad(40.0)), _u(np.deg2rad(130.0))
    pins = {1: P["G1"], 6: P["G6"], 9: P["G9"]}
    pins[15] = pins[6] + 2.6 * u40  # upper boom meets the lower boom
    pins[7] = pins[6] + 3.2 * u40  # stick pivot at the lower boom tip
    pins[12] = pins[6] + 1.4 * u40 + 0.25 * n40  # stick cylinder bracket on the lower boom
    pins[2] = pins[1] + 0.5 * _u(np.deg2rad(20.0))  # rear link to upper boom
    ub = _angle(pins[2], pins[15])
    pins[11] = pins[2] + 0.8 * _u(ub) + 0.15 * _u(ub - np.pi / 2)  # boom cylinder rod end
    pins[3] = pins[2] + 1.9 * _u(ub) + 0.2 * _u(ub + np.pi / 2)  # bucket cylinder bracket
    us = _u(np.deg2rad(-70.0))
    pins[8] = pins[7] + 1.9 * us  # bucket pivot at the stick tip
    pins[14] = pins[7] - 0.45 * us  # stick cylinder rod end, behind the stick pivot
    pins[5] = pins[8] + 0.35 * _u(np.deg2rad(200.0))  # bucket cylinder rod end on the bucket
    # the prismatic joints 4, 10, 13 lie on the cylinder axes (between barrel and rod)
    return pins


def excavator():
    """A hydraulic excavator arm after Fig. 1: 11 moving bodies, 15 joints, 4 loops, 3 DOF.

    The paper gives the topology only; this is a plausible machine of that graph
    (dimensions in m, masses in kg, designed here; see ``docs/sslm.md``).  Bodies
    (paper number → name): #1 rear_link (0.5 m, 60 kg), #2 upper_boom (2.15 m,
    350 kg), #3 bucket_cyl barrel (1.0 m, 60 kg), #4 bucket_rod (0.8 m, 30 kg),
    #5 stick (2.35 m, 250 kg), #6 lower_boom (3.2 m, 500 kg), #7 bucket (300 kg,
    0.8 × 0.6 m box), #8 stick_rod (1.0 m, 30 kg), #9 stick_cyl barrel (1.1 m, 60
    kg), #10 boom_cyl barrel (0.8 m, 60 kg), #11 boom_rod (0.8 m, 30 kg).

    Joints: 1 ground–#1, 2 #1–#2, 3 #2–#3, 4 #3–#4 (prismatic, bucket cylinder),
    5 #4–#7, 6 ground–#6, 7 #6–#5, 9 ground–#10, 10 #10–#11 (prismatic, boom
    cylinder), 12 #6–#9, 13 #9–#8 (prismatic, stick cylinder); cut joints 15
    (#2–#6), 14 (#8–#5), 8 (#7–#5) and 11 (#11–#2) close loops 1: 1-2-15-6-1,
    2: 7-14-13-12-7, 3: 3-4-5-8-7-15-3 and 4: 9-10-11-2-1-9.  Ground, #1, #2 and #6
    form a four-bar boom (rear link, upper and lower boom members); the boom
    cylinder lifts it from the upper structure; the stick cylinder, on a bracket
    above the lower boom, swings the stick; the bucket cylinder, anchored on the
    upper boom, turns the bucket at the stick tip.  Actuated: the three cylinders
    (joints 4, 10, 13), whose coordinates are their pin-to-pin lengths.

    Subsystems: I = {#1, #2, #3, #4, #7} (serial), II = {#6, #5, #9, #8} (tree),
    III = {#10, #11} (serial), so J = [[J11, J12, O], [O, J22, O], [J31, J32, O],
    [J41, O, J43]] (eq. 14).  Revolute coordinates are link angles relative to the
    parent body's x axis (absolute for ground-attached links); each body's x axis
    runs along its main line (cylinders: along the cylinder axis, the rod frame
    at the rod-end pin).  ``q0``: the reference pose.
    """
    P = _excavator_pins()
    ang = {
        "rear_link": _angle(P[1], P[2]),
        "upper_boom": _angle(P[2], P[15]),
        "bucket_cyl": _angle(P[3], P[5]),
        "lower_boom": _angle(P[6], P[7]),
        "stick": _angle(P[7], P[8]),
        "stick_cyl": _angle(P[12], P[14]),
        "boom_cyl": _angle(P[9], P[11]),
        "bucket": _angle(P[5], P[8]),
    }
    ang["bucket_rod"] = ang["bucket_cyl"]
    ang["stick_rod"] = ang["stick_cyl"]
    ang["boom_rod"] = ang["boom_cyl"]
    origin = {
        "rear_link": P[1], "upper_boom": P[2], "bucket_cyl": P[3], "bucket_rod": P[5],
        "bucket": P[5], "lower_boom": P[6], "stick": P[7], "stick_cyl": P[12],
        "stick_rod": P[14], "boom_cyl": P[9], "boom_rod": P[11],
    }  # fmt: skip

    def local(body, p):
        """Coordinates (3,) of world point p in ``body``'s reference frame."""
        c, s = np.cos(ang[body]), np.sin(ang[body])
        d = np.asarray(p, float) - origin[body]
        return np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1], 0.0])

    def rel(child, parent):
        return ang[child] - (ang[parent] if parent != "ground" else 0.0)

    bucket_box = 0.8, 0.6
    b = ModelBuilder("excavator", gravity=G_PLANAR, planar=True)
    q0 = []

    def hinge(name, parent, joint, inertia, **kw):
        xyz = (*origin[name], 0.0) if parent == "ground" else local(parent, origin[name])
        b.add_body(name, parent, Revolute("z"), xyz=xyz, joint_name=joint, **inertia, **kw)
        q0.append(rel(name, parent))

    def cylinder_rod(name, barrel, joint, mass, length):
        # rod frame at the rod-end pin, rod along -x; q = pin-to-pin length
        b.add_body(
            name, barrel, Prismatic("x"), joint_name=joint, actuated=True,
            **rod(mass, length, "-x"),
        )  # fmt: skip
        q0.append(float(np.linalg.norm(origin[name] - origin[barrel])))

    # subsystem I: rear link, upper boom, bucket cylinder, bucket
    hinge("rear_link", "ground", "j1", rod(60.0, 0.5))
    ub_len = float(np.linalg.norm(P[15] - P[2]))
    hinge("upper_boom", "rear_link", "j2", rod(350.0, ub_len))
    hinge("bucket_cyl", "upper_boom", "j3", rod(60.0, 1.0))
    cylinder_rod("bucket_rod", "bucket_cyl", "j4", 30.0, 0.8)
    bx, by = bucket_box
    ib = 300.0 / 12.0 * np.array([by * by, bx * bx, bx * bx + by * by])
    bucket_com = local("bucket", P[8] + 0.45 * _u(np.deg2rad(-60.0)))
    b.add_body(
        "bucket", "bucket_rod", Revolute("z"), joint_name="j5", mass=300.0, com=bucket_com,
        inertia=ib,
    )  # fmt: skip
    q0.append(rel("bucket", "bucket_rod"))
    # subsystem II: lower boom, stick, stick cylinder
    hinge("lower_boom", "ground", "j6", rod(500.0, 3.2))
    stick_len = 1.9 + 0.45
    st = rod(250.0, stick_len)
    st["com"] = np.array([stick_len / 2.0 - 0.45, 0.0, 0.0])
    hinge("stick", "lower_boom", "j7", st)
    hinge("stick_cyl", "lower_boom", "j12", rod(60.0, 1.1))
    cylinder_rod("stick_rod", "stick_cyl", "j13", 30.0, 1.0)
    # subsystem III: boom cylinder
    hinge("boom_cyl", "ground", "j9", rod(60.0, 0.8))
    cylinder_rod("boom_rod", "boom_cyl", "j10", 30.0, 0.8)
    # cut joints, in the order of the paper's loops 1–4
    cuts = [
        ("j15", "upper_boom", "lower_boom", 15),
        ("j14", "stick_rod", "stick", 14),
        ("j8", "bucket", "stick", 8),
        ("j11", "boom_rod", "upper_boom", 11),
    ]
    for name, body_a, body_b, pin in cuts:
        b.add_frame(f"{name}_on_{body_a}", body_a, xyz=local(body_a, P[pin]))
        b.add_frame(f"{name}_on_{body_b}", body_b, xyz=local(body_b, P[pin]))
        b.add_closure(name, f"{name}_on_{body_a}", f"{name}_on_{body_b}", "revolute")
    model = b.build()
    return assembled(
        model,
        np.array(q0),
        "excavator arm after Fig. 1 of the reduced-order paper (designed geometry)",
    )


__all__ = [
    "CARPET_SCRAPER_THETA1_DOT",
    "EXCAVATOR_BODIES",
    "THREE_RRR_THETA",
    "carpet_scraper",
    "carpet_scraper_positions",
    "excavator",
    "three_rrr",
    "three_rrr_base",
]
