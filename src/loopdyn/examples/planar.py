"""Planar closed-loop mechanisms of the catalog (x–y plane, hinges along z, gravity -y).

Angles are measured counter-clockwise from +x; a child link's joint coordinate is
its angle relative to its parent link (the papers' θ2 convention).
"""

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.shapes import box, rod
from loopdyn.model import ModelBuilder, Revolute

G_PLANAR = (0.0, -9.81, 0.0)


def circle_intersection(c1, r1, c2, r2, upper=True):
    """Intersection of circles (c1, r1) and (c2, r2) in the plane; the upper (left-turn) one."""
    c1, c2 = np.asarray(c1, float), np.asarray(c2, float)
    d = np.linalg.norm(c2 - c1)
    a = (r1**2 - r2**2 + d**2) / (2 * d)
    h = np.sqrt(max(r1**2 - a**2, 0.0))
    e = (c2 - c1) / d
    n = np.array([-e[1], e[0]])
    return c1 + a * e + (h if upper else -h) * n


def _angle(p_from, p_to):
    d = np.asarray(p_to) - np.asarray(p_from)
    return float(np.arctan2(d[1], d[0]))


@parameters(theta1=("rad", "crank angle from the ground line"))
def four_bar(theta1=np.pi / 6):
    """Saha & Schiehlen's four-bar (Sec. VI.A), crank actuated.

    Ground a4 = 1.0 m (crank pivot at the origin, rocker pivot at (1, 0)), crank
    a1 = 0.3 m (1.5 kg), coupler a2 = 1.0 m (5 kg), rocker a3 = 0.6 m (3 kg),
    uniform slender rods.  q = [θ1 (crank angle from +x), θ2 (coupler relative to
    crank), θ3 (rocker angle from +x)]; the loop is cut at the coupler–rocker hinge
    (planar revolute closure, 2 rows).  ``q0``: the assembly at ``theta1`` with the
    coupler–rocker hinge above the ground line (the paper's Fig. 4).
    """
    a1, a2, a3, a4 = 0.3, 1.0, 0.6, 1.0
    b = ModelBuilder("four_bar", gravity=G_PLANAR, planar=True)
    b.add_body("crank", "ground", Revolute("z"), actuated=True, **rod(1.5, a1))
    b.add_body("coupler", "crank", Revolute("z"), xyz=(a1, 0, 0), **rod(5.0, a2))
    b.add_body("rocker", "ground", Revolute("z"), xyz=(a4, 0, 0), **rod(3.0, a3))
    b.add_frame("coupler_tip", "coupler", xyz=(a2, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(a3, 0, 0))
    b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", "revolute")
    A = a1 * np.array([np.cos(theta1), np.sin(theta1)])
    B = circle_intersection(A, a2, (a4, 0.0), a3)
    guess = [theta1, _angle(A, B) - theta1, _angle((a4, 0.0), B)]
    model = b.build()
    return assembled(model, guess, "four-bar linkage (Saha & Schiehlen Sec. VI.A)")


@parameters(
    theta1=("rad", "first leg's actuated angle"), theta2=("rad", "second leg's actuated angle")
)
def five_bar(theta1=np.pi / 6, theta2=np.pi / 6):
    """Saha & Schiehlen's five-bar parallel manipulator (Sec. VI.B).

    Leg 1 pivots at the origin (a1⁽¹⁾ = 0.6 m, 3 kg; a2⁽¹⁾ = 1.1 m, 1.6 kg), leg 2
    at (a0, 0) = (1.2, 0) (a1⁽²⁾ = 0.7 m, 2 kg; a2⁽²⁾ = 0.8 m, 1.1 kg).
    q = [θ1⁽¹⁾, θ2⁽¹⁾, θ1⁽²⁾, θ2⁽²⁾] (proximal angles from +x, distal relative);
    both proximal joints actuated; the loop is cut where the distal links meet.
    """
    a11, a21, a12, a22, a0 = 0.6, 1.1, 0.7, 0.8, 1.2
    b = ModelBuilder("five_bar", gravity=G_PLANAR, planar=True)
    b.add_body("leg1_proximal", "ground", Revolute("z"), actuated=True, **rod(3.0, a11))
    b.add_body("leg1_distal", "leg1_proximal", Revolute("z"), xyz=(a11, 0, 0), **rod(1.6, a21))
    b.add_body(
        "leg2_proximal", "ground", Revolute("z"), xyz=(a0, 0, 0), actuated=True, **rod(2.0, a12)
    )
    b.add_body("leg2_distal", "leg2_proximal", Revolute("z"), xyz=(a12, 0, 0), **rod(1.1, a22))
    b.add_frame("leg1_tip", "leg1_distal", xyz=(a21, 0, 0))
    b.add_frame("leg2_tip", "leg2_distal", xyz=(a22, 0, 0))
    b.add_closure("end_effector", "leg1_tip", "leg2_tip", "revolute")
    A1 = a11 * np.array([np.cos(theta1), np.sin(theta1)])
    A2 = np.array([a0, 0.0]) + a12 * np.array([np.cos(theta2), np.sin(theta2)])
    P = circle_intersection(A1, a21, A2, a22)
    guess = [theta1, _angle(A1, P) - theta1, theta2, _angle(A2, P) - theta2]
    model = b.build()
    return assembled(model, guess, "five-bar parallel manipulator (Saha & Schiehlen Sec. VI.B)")


@parameters(
    crank=("m", "crank length"), rod_length=("m", "connecting rod length"),
    theta=("rad", "crank angle"),
)  # fmt: skip
def slider_crank(crank=0.15, rod_length=0.5, theta=np.pi / 4):
    """Crank (1 kg) – connecting rod (2 kg) – slider (0.5 kg) along the x axis.

    q = [crank angle, rod relative angle, slider relative angle]; the loop is cut
    at the slider's sliding pair: a planar prismatic closure (axis x) between the
    ground frame ``rail`` at the origin and the slider frame.  Crank actuated.
    """
    b = ModelBuilder("slider_crank", gravity=G_PLANAR, planar=True)
    b.add_body("crank", "ground", Revolute("z"), actuated=True, **rod(1.0, crank))
    b.add_body("rod", "crank", Revolute("z"), xyz=(crank, 0, 0), **rod(2.0, rod_length))
    b.add_body(
        "slider", "rod", Revolute("z"), xyz=(rod_length, 0, 0), **box(0.5, (0.1, 0.05, 0.05))
    )
    b.add_frame("rail", "ground")
    b.add_frame("slider_frame", "slider")
    b.add_closure("slide", "rail", "slider_frame", "prismatic", axis="x")
    A = crank * np.array([np.cos(theta), np.sin(theta)])
    x = A[0] + np.sqrt(rod_length**2 - A[1] ** 2)
    phi = _angle(A, (x, 0.0))
    model = b.build()
    return assembled(model, [theta, phi - theta, -phi], "slider-crank (prismatic closure)")


@parameters(L=("count", "number of rungs (loops)"))
def planar_ladder(L=4):
    """L+1 posts (0.5 m, 1 kg) pinned at x = 0.4 k and L rungs (0.4 m, 0.5 kg).

    Rung k is hinged at the tip of post k and closed (planar revolute) at the tip
    of post k+1; 1 DOF, post 0 actuated.  ``q0``: posts at -60°, rungs horizontal.
    """
    if int(L) < 1:
        raise ValueError("planar_ladder needs L >= 1")
    b = ModelBuilder(f"planar_ladder_{L}", gravity=G_PLANAR, planar=True)
    q0 = []
    for k in range(L + 1):
        b.add_body(
            f"post{k}",
            "ground",
            Revolute("z"),
            xyz=(0.4 * k, 0, 0),
            actuated=k == 0,
            **rod(1.0, 0.5),
        )
        b.add_frame(f"post{k}_tip", f"post{k}", xyz=(0.5, 0, 0))
        q0.append(np.deg2rad(-60.0))
        if k < L:
            b.add_body(f"rung{k}", f"post{k}", Revolute("z"), xyz=(0.5, 0, 0), **rod(0.5, 0.4))
            b.add_frame(f"rung{k}_tip", f"rung{k}", xyz=(0.4, 0, 0))
            q0.append(np.deg2rad(60.0))
    for k in range(L):
        b.add_closure(f"loop{k}", f"rung{k}_tip", f"post{k + 1}_tip", "revolute")
    b.set_q0(q0)
    model = b.build()
    model.description = f"planar ladder, L = {L} loops"
    return model
