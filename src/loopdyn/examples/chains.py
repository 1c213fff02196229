"""Mechanisms of local loops for constraint embedding (Jain, Sec. 5): four-bar chains,
both cuts of the four-bar, geared links and a leg with a closed-chain knee.

Planar ones move in the x–y plane (hinges along z, gravity −y), uniform slender rods
(``rod``) unless stated; angles counter-clockwise from +x, a child's coordinate
relative to its parent.  Dimensions of every four-bar are Saha & Schiehlen's
(``four_bar``): ground 1.0 m, crank 0.3 m (1.5 kg), coupler 1.0 m (5 kg), rocker 0.6 m
(3 kg), a Grashof crank-rocker.
"""

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.planar import G_PLANAR, _angle, circle_intersection
from loopdyn.examples.shapes import box, rod
from loopdyn.model import ModelBuilder, Revolute

# Saha & Schiehlen's four-bar (m, kg)
_A1, _A2, _A3, _A4 = 0.3, 1.0, 0.6, 1.0
_M1, _M2, _M3 = 1.5, 5.0, 3.0


def _four_bar_angles(theta1):
    """(θ1, θ2 coupler relative to crank, θ3 rocker from the ground line, B) of the
    four-bar with the ground line along +x from A = 0 to D = (a4, 0), B above it."""
    A = _A1 * np.array([np.cos(theta1), np.sin(theta1)])
    B = circle_intersection(A, _A2, (_A4, 0.0), _A3)
    return theta1, _angle(A, B) - theta1, _angle((_A4, 0.0), B), B


@parameters(
    cut=("text", "where the loop is cut: internal or terminal"),
    theta1=("rad", "crank angle from the ground line"),
)
def four_bar_cut(cut="internal", theta1=np.pi / 6):
    """Saha & Schiehlen's four-bar with the loop cut at the coupler–rocker hinge or at the
    rocker's ground pivot (Jain Sec. 5.2–5.3); both cuts describe the same motion.

    Links: crank (pivot A at the origin, actuated), coupler (hinged at the crank's tip),
    rocker (pivot D = (1, 0)); the closure is a planar revolute (2 rows).

    - ``cut="internal"`` (Sec. 5.3, the same model as ``four_bar``): the tree is
      ground → crank → coupler and ground → rocker; the closure joins the coupler's tip
      to the rocker's tip.  q = [θ1, θ2, θ3] with θ3 the rocker's angle from +x.  The
      aggregated body {crank, coupler, rocker} has two base bodies.
    - ``cut="terminal"`` (Sec. 5.2): the tree is the serial chain ground → crank →
      coupler → rocker (the rocker hinged at the coupler's tip B, its frame's x axis
      along D→B, the rod along −x); the closure joins the rocker's end to the ground at
      D.  q = [θ1, θ2, θ3'] with θ3' = θ3 − θ1 − θ2 (rocker relative to coupler).

    ``q0``: the assembly at crank angle ``theta1`` with B above the ground line.
    """
    th1, th2, th3, _ = _four_bar_angles(theta1)
    if cut == "internal":
        b = ModelBuilder("four_bar_internal", gravity=G_PLANAR, planar=True)
        b.add_body("crank", "ground", Revolute("z"), actuated=True, **rod(_M1, _A1))
        b.add_body("coupler", "crank", Revolute("z"), xyz=(_A1, 0, 0), **rod(_M2, _A2))
        b.add_body("rocker", "ground", Revolute("z"), xyz=(_A4, 0, 0), **rod(_M3, _A3))
        b.add_frame("coupler_tip", "coupler", xyz=(_A2, 0, 0))
        b.add_frame("rocker_tip", "rocker", xyz=(_A3, 0, 0))
        b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", "revolute")
        guess = [th1, th2, th3]
    elif cut == "terminal":
        b = ModelBuilder("four_bar_terminal", gravity=G_PLANAR, planar=True)
        b.add_body("crank", "ground", Revolute("z"), actuated=True, **rod(_M1, _A1))
        b.add_body("coupler", "crank", Revolute("z"), xyz=(_A1, 0, 0), **rod(_M2, _A2))
        b.add_body("rocker", "coupler", Revolute("z"), xyz=(_A2, 0, 0), **rod(_M3, _A3, "-x"))
        b.add_frame("pivot_D", "ground", xyz=(_A4, 0, 0))
        b.add_frame("rocker_end", "rocker", xyz=(-_A3, 0, 0))
        b.add_closure("rocker_ground", "pivot_D", "rocker_end", "revolute")
        guess = [th1, th2, th3 - th1 - th2]
    else:
        raise ModelError(
            f"four_bar_cut: parameter cut must be 'internal' or 'terminal', got {cut!r}"
        )
    return assembled(b.build(), guess, f"four-bar, {cut} cut (Jain Sec. 5.2-5.3)")


@parameters(N=("count", "number of four-bars"), theta1=("rad", "crank angle of each four-bar"))
def four_bar_chain(N=4, theta1=np.pi / 6):
    """N four-bars in series, each one's ground link the previous one's crank.

    Four-bar k (k = 0 … N−1): ``crank{k}``, ``coupler{k}``, ``rocker{k}``, closure
    ``loop{k}`` (planar revolute between the coupler's and the rocker's tips).  Four-bar 0
    stands on the ground (pivots A = (0, 0), D = (1, 0)); four-bar k > 0 on crank k−1:
    its crank is hinged at crank k−1's pivot and its rocker at (1, 0) in crank k−1's
    frame.  So every crank is a 1.0 m rod (1.5 kg) that carries its coupler's hinge at
    0.3 m from its pivot (Saha & Schiehlen's crank length) and the next rocker's pivot at
    its far end (the next ground link, 1.0 m); couplers 1.0 m (5 kg), rockers 0.6 m (3 kg).
    Coordinates: crank k relative to crank k−1 (to +x for k = 0), coupler relative to
    its crank, rocker relative to crank k−1; every crank actuated; N DOF.  ``q0``: each
    four-bar at crank angle ``theta1`` relative to its ground line, hinge B on the
    left-turn side (the configuration of ``four_bar``, repeated).  The aggregation has N
    aggregated bodies {crank k, coupler k, rocker k} in series.
    """
    b = ModelBuilder(f"four_bar_chain_{N}", gravity=G_PLANAR, planar=True)
    th1, th2, th3, _ = _four_bar_angles(theta1)
    parent = "ground"
    guess = []
    for k in range(N):
        crank_mass = rod(_M1, _A4)  # the crank is also the next four-bar's ground link
        b.add_body(f"crank{k}", parent, Revolute("z"), actuated=True, **crank_mass)
        b.add_body(f"coupler{k}", f"crank{k}", Revolute("z"), xyz=(_A1, 0, 0), **rod(_M2, _A2))
        b.add_body(f"rocker{k}", parent, Revolute("z"), xyz=(_A4, 0, 0), **rod(_M3, _A3))
        b.add_frame(f"coupler{k}_tip", f"coupler{k}", xyz=(_A2, 0, 0))
        b.add_frame(f"rocker{k}_tip", f"rocker{k}", xyz=(_A3, 0, 0))
        b.add_closure(f"loop{k}", f"coupler{k}_tip", f"rocker{k}_tip", "revolute")
        parent = f"crank{k}"
    model = b.build()
    # body order is depth-first: crank0, coupler0, crank1, ..., rocker1, rocker0
    guess = np.zeros(model.nq)
    for k in range(N):
        guess[model.q_slice(f"crank{k}")] = th1
        guess[model.q_slice(f"coupler{k}")] = th2
        guess[model.q_slice(f"rocker{k}")] = th3
    return assembled(model, guess, f"{N} four-bars in series (Jain Sec. 5.2)")


@parameters(
    N=("count", "number of geared links"),
    ratio=("-", "gear ratio rotor/link"),
    link_length=("m", "length of each link"),
)
def geared_chain(N=4, ratio=6.0, link_length=0.4):
    """N links, each driven through a gear of ``ratio`` by a motor rotor mounted on the
    link before it (Jain Sec. 5.1, Figs. 6–7).

    Planar: ``link{k}`` (a ``link_length`` rod of 1 kg) hinged on ``link{k-1}``'s tip (on
    the ground at the origin for k = 0); ``rotor{k}`` (a 0.3 kg cylinder of radius
    25 mm and length 50 mm, centred on the hinge) hinged on the same parent, coaxial with
    link k's joint.  The gear is a coupling ``gear{k}``: q_rotor{k} = ratio · q_link{k}.
    Rotors actuated; N DOF; the aggregation has N aggregated bodies {rotor k, link k}
    (two base bodies each, X_𝒮 = [ratio; 1] constant).  ``q0``: link 0 at −60°, then
    each link 15° further, rotors at ratio × their links.
    """
    r_rot, h_rot, m_rot = 0.025, 0.05, 0.3
    rotor = {
        "mass": m_rot,
        "com": (0.0, 0.0, 0.0),
        "inertia": (
            m_rot * (3 * r_rot**2 + h_rot**2) / 12,
            m_rot * (3 * r_rot**2 + h_rot**2) / 12,
            0.5 * m_rot * r_rot**2,
        ),
    }
    b = ModelBuilder(f"geared_chain_{N}", gravity=G_PLANAR, planar=True)
    parent, xyz = "ground", (0.0, 0.0, 0.0)
    for k in range(N):
        b.add_body(f"rotor{k}", parent, Revolute("z"), xyz=xyz, actuated=True, **rotor)
        b.add_body(f"link{k}", parent, Revolute("z"), xyz=xyz, **rod(1.0, link_length))
        b.add_coupling(f"link{k}", f"rotor{k}", float(ratio), name=f"gear{k}")
        parent, xyz = f"link{k}", (link_length, 0.0, 0.0)
    model = b.build()
    q0 = np.zeros(model.nq)
    for k in range(N):
        th = np.deg2rad(-60.0 if k == 0 else 15.0)
        q0[model.q_slice(f"link{k}")] = th
        q0[model.q_slice(f"rotor{k}")] = ratio * th
    model.q0 = q0
    model.q0.setflags(write=False)
    model.description = f"{N} geared links (Jain Sec. 5.1), gear ratio {ratio}"
    return model


@parameters(
    knee_angle=("rad", "knee flexion of q0"),
    geared=("flag", "drive the knee crank through a geared rotor"),
    ratio=("-", "gear ratio rotor/crank when geared"),
)
def closed_knee_leg(knee_angle=0.9, geared=False, ratio=8.0):
    """A legged-robot leg whose knee is driven by a motor at the hip through a four-bar.

    Spatial, gravity −z; x forward, y lateral, the leg hangs along −z.  ``hip``
    (abduction about x at the origin, a 1 kg box 80×60×60 mm), ``thigh`` (flexion about y
    at (0, 0.05, 0) on the hip, a 0.3 m rod of 1 kg along −z), ``shank`` (knee about y at
    the thigh's end, a 0.3 m rod of 0.3 kg along −z).  The knee motor sits at the hip:
    ``knee_crank`` (about y at the thigh's origin, a 60 mm rod of 0.1 kg along +x) drives
    ``pushrod`` (hinged at the crank's tip, a 0.3 m rod of 0.05 kg along −z), whose end
    is hinged to a 45 mm lever on the shank at the knee (closure ``knee_link``, revolute
    about y: 5 rows, 2 independent, the loop being planar).  Thigh, crank, pushrod and
    lever form a four-bar (ground link 0.3 m, crank 60 mm, coupler 0.3 m, rocker 45 mm).
    Actuated: hip abduction, hip flexion, knee crank; 3 DOF.  ``q0``: abduction 0.1 rad,
    flexion 0.3 rad, knee crank at ``knee_angle`` (rad about y from the thigh's +x), the
    lever on the same side as the crank.

    ``geared=True`` adds a ``knee_rotor`` (coaxial with the crank, on the thigh) geared
    to the crank by a coupling ``knee_gear``: rotor angle = ``ratio`` × crank angle; the
    rotor is then
    the actuated one, and the aggregated body {knee_rotor, knee_crank, pushrod, shank}
    embeds a loop and a gear.
    """
    Lt, Ls, Lc, Ll, Lp = 0.3, 0.3, 0.06, 0.045, 0.3
    b = ModelBuilder("closed_knee_leg" + ("_geared" if geared else ""), gravity=(0, 0, -9.81))
    b.add_body("hip", "ground", Revolute("x"), actuated=True, **box(1.0, (0.08, 0.06, 0.06)))
    b.add_body("thigh", "hip", Revolute("y"), xyz=(0, 0.05, 0), actuated=True, **rod(1.0, Lt, "-z"))
    if geared:
        r_rot, m_rot = 0.02, 0.2
        b.add_body(
            "knee_rotor", "thigh", Revolute("y"), actuated=True,
            mass=m_rot, inertia=(m_rot * r_rot**2 / 4 + 1e-6, 0.5 * m_rot * r_rot**2,
                                 m_rot * r_rot**2 / 4 + 1e-6),
        )  # fmt: skip
    b.add_body("knee_crank", "thigh", Revolute("y"), actuated=not geared, **rod(0.1, Lc))
    b.add_body("pushrod", "knee_crank", Revolute("y"), xyz=(Lc, 0, 0), **rod(0.05, Lp, "-z"))
    b.add_body("shank", "thigh", Revolute("y"), xyz=(0, 0, -Lt), **rod(0.3, Ls, "-z"))
    b.add_frame("pushrod_end", "pushrod", xyz=(0, 0, -Lp))
    b.add_frame("knee_lever", "shank", xyz=(Ll, 0, 0))
    b.add_closure("knee_link", "pushrod_end", "knee_lever", "revolute", axis="y")
    if geared:
        b.add_coupling("knee_crank", "knee_rotor", float(ratio), name="knee_gear")
    model = b.build()
    # the four-bar in the thigh's x–z plane: a rotation θ about y maps (x, z) to
    # (x cos θ + z sin θ, −x sin θ + z cos θ)
    c = Lc * np.array([np.cos(knee_angle), -np.sin(knee_angle)])
    knee = np.array([0.0, -Lt])
    # lever tip l = knee + Ll (cos θs, −sin θs) with |l − c| = Lp: the circle intersection
    # on the crank's side
    cands = [circle_intersection(knee, Ll, c, Lp, upper=u) for u in (True, False)]
    lever = max(cands, key=lambda p: p[0] * np.cos(knee_angle) - p[1] * np.sin(knee_angle))
    th_s = float(np.arctan2(-(lever - knee)[1], (lever - knee)[0]))
    dirp = (lever - c) / Lp  # pushrod axis −z rotated by α: (−sin α, −cos α)
    alpha = float(np.arctan2(-dirp[0], -dirp[1]))
    guess = np.zeros(model.nq)
    guess[model.q_slice("hip")] = 0.1
    guess[model.q_slice("thigh")] = 0.3
    guess[model.q_slice("knee_crank")] = knee_angle
    guess[model.q_slice("pushrod")] = alpha - knee_angle
    guess[model.q_slice("shank")] = th_s
    if geared:
        guess[model.q_slice("knee_rotor")] = ratio * knee_angle
        return assembled(model, guess, "leg with a geared four-bar knee")
    return assembled(model, guess, "leg with a four-bar (pushrod) knee")


__all__ = ["closed_knee_leg", "four_bar_chain", "four_bar_cut", "geared_chain"]
