"""Consistent random states of closed-loop catalog models, shared by the closure tests."""

from functools import cache
from pathlib import Path

import numpy as np

import loopdyn as ld

CLOSED = {
    "four_bar": dict(),
    "five_bar": dict(),
    "slider_crank": dict(),
    "planar_ladder": dict(L=4),
    "spatial_ladder": dict(L=3),
    "hooke_ladder": dict(L=3),
    "pendulum_ladder": dict(L=2),
    "carpet_scraper": dict(),
    "three_rrr": dict(),
    "excavator": dict(),
    "stewart": dict(),
    "delta": dict(),
}
DOF = {
    "four_bar": 1,
    "five_bar": 2,
    "slider_crank": 1,
    "planar_ladder": 1,
    "spatial_ladder": 2,
    "hooke_ladder": 2,
    "pendulum_ladder": 2,
    "carpet_scraper": 1,
    "three_rrr": 3,
    "excavator": 3,
    "stewart": 6,
    "delta": 3,
}


@cache
def closed_model(name):
    return ld.examples.get(name, **CLOSED[name])


def consistent_state(model, rng, spread=0.3):
    """A random consistent (q, v, tau): actuated coordinates perturbed, the rest assembled."""
    q = np.array(model.q0)
    for _ in range(20):
        guess = q.copy()
        act = model.actuated
        guess[act] += rng.uniform(-spread, spread, act.size)  # actuated joints are 1-dof here
        try:
            q = ld.assemble(model, guess)
            break
        except ld.AssemblyError:
            continue
    v = np.zeros(model.nv)
    v[model.actuated] = rng.normal(size=model.actuated.size)
    v = ld.complete_velocity(model, q, v)
    tau = rng.normal(size=model.nv)
    return q, v, tau


def mixed_mechanism(kind, planar=False):
    """A deliberately irregular spatial tree (spherical, universal, free, revolute joints)
    with a closure of ``kind`` between two of its bodies and a ball/revolute to the ground.
    Not assembled: the Φ/J/γ identities hold at any configuration.  ``planar``: its
    counterpart in the x–y plane (hinges about ±z, slides in x–y, placements turned about
    z), the closures of the planar kinds."""
    if planar:
        return _mixed_planar(kind)
    b = ld.ModelBuilder(f"mixed_{kind}")
    b.add_body(
        "a",
        "ground",
        ld.Spherical(),
        xyz=(0, 0, 0.1),
        mass=1,
        com=(0.1, 0.2, 0.3),
        inertia=(1, 1, 1),
    )
    b.add_body(
        "b",
        "a",
        ld.Universal("x", "z"),
        xyz=(0.5, 0.1, 0),
        mass=1,
        com=(0.1, 0, 0),
        inertia=(1, 1.2, 1.1),
    )
    b.add_body("c", "ground", ld.Free(), mass=2, inertia=(1, 1, 1))
    b.add_body("d", "c", ld.Revolute((1, 2, 3)), xyz=(0.2, 0.3, 0.4), mass=1, inertia=(1, 1, 1))
    b.add_frame("fa", "b", xyz=(0.3, 0.2, 0.1), rpy=(0.1, 0.2, 0.3))
    b.add_frame("fb", "d", xyz=(-0.3, 0.1, 0.2), rpy=(0.3, -0.2, 0.5))
    b.add_frame("fg", "ground", xyz=(1, 1, 1))
    b.add_closure("c1", "fa", "fb", kind, translation_axes=[(1, 0, 0)], rotation_axes=[(0, 1, 1)])
    b.add_closure("c2", "fg", "fa", "ball")
    return b.build()


def _mixed_planar(kind):
    b = ld.ModelBuilder(f"mixed_{kind}", planar=True)
    b.add_body("a", "ground", ld.Revolute("z"), xyz=(0, 0.1, 0), mass=1, com=(0.1, 0.2, 0.3),
               inertia=(1, 1, 1))  # fmt: skip
    b.add_body("b", "a", ld.Prismatic((1, 0.3, 0)), xyz=(0.5, 0.1, 0), rpy=(0, 0, 0.4), mass=1,
               com=(0.1, 0, 0), inertia=(1, 1.2, 1.1))  # fmt: skip
    b.add_body("c", "ground", ld.Prismatic("y"), xyz=(0.2, 0, 0), mass=2, inertia=(1, 1, 1))
    b.add_body("d", "c", ld.Revolute("-z"), xyz=(0.2, 0.3, 0), rpy=(0, 0, 0.7), mass=1,
               inertia=(1, 1, 1))  # fmt: skip
    b.add_frame("fa", "b", xyz=(0.3, 0.2, 0), rpy=(0, 0, 0.3))
    b.add_frame("fb", "d", xyz=(-0.3, 0.1, 0), rpy=(0, 0, 0.5))
    b.add_frame("fg", "ground", xyz=(1, 1, 0))
    b.add_closure("c1", "fa", "fb", kind, translation_axes=[(1, 0, 0)], rotation_axes=[(0, 1, 1)])
    b.add_closure("c2", "fg", "fa", "revolute")
    return b.build()


def catalog_states(name, n=4, seed=0):
    """(model, [n consistent random (q, v, tau)]) of catalog model ``name``."""
    model = closed_model(name)
    rng = np.random.default_rng(seed)
    return model, [consistent_state(model, rng) for _ in range(n)]


def flat_four_bar(theta1=0.5):
    """Ground 0.9, crank 0.5, coupler 1, rocker 0.6 (a change-point four-bar: 0.5 + 1 =
    0.6 + 0.9): at θ1 = 0 all pivots are collinear and the loop Jacobian loses rank."""
    b = ld.ModelBuilder("flat_four_bar", gravity=(0, -9.81, 0), planar=True)
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **ld.examples.rod(1, 0.5))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.5, 0, 0), **ld.examples.rod(1, 1))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(0.9, 0, 0), **ld.examples.rod(1, 0.6))
    b.add_frame("ct", "coupler", xyz=(1, 0, 0))
    b.add_frame("rt", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("loop", "ct", "rt", "revolute")
    model = b.build()
    model.q0 = ld.assemble(model, [theta1, -0.4, 0.6])
    return model


def erd_root():
    """example-robot-data's ``robots`` folder (a test extra, installed beside Pinocchio),
    or None."""
    try:
        import pinocchio
    except ImportError:  # pragma: no cover - the test extra installs it
        return None
    for p in Path(pinocchio.__file__).resolve().parents:
        cand = p / "share" / "example-robot-data" / "robots"
        if cand.is_dir():
            return cand
    return None
