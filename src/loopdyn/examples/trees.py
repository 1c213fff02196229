"""Open-chain catalog models: a 6-DOF arm and random trees mixing every joint type."""

import numpy as np

from loopdyn.examples.params import parameters
from loopdyn.examples.shapes import rod
from loopdyn.model import Fixed, Free, ModelBuilder, Prismatic, Revolute, Spherical, Universal


def serial_arm():
    """A 6-DOF anthropomorphic arm (all revolute, every joint actuated), gravity -z.

    Link lengths 0.3/0.4/0.35/0.1/0.1/0.08 m, masses 4/3/2/1/0.5/0.3 kg; joint axes
    z, y, y, x, y, x (a PUMA-like shoulder–elbow–wrist).
    """
    b = ModelBuilder("serial_arm", gravity=(0.0, 0.0, -9.81))
    spec = [
        ("base_yaw", "z", (0.0, 0.0, 0.0), 4.0, 0.3),
        ("shoulder", "y", (0.0, 0.0, 0.3), 3.0, 0.4),
        ("elbow", "y", (0.0, 0.0, 0.4), 2.0, 0.35),
        ("wrist_roll", "x", (0.0, 0.0, 0.35), 1.0, 0.1),
        ("wrist_pitch", "y", (0.0, 0.0, 0.1), 0.5, 0.1),
        ("wrist_yaw", "x", (0.0, 0.0, 0.1), 0.3, 0.08),
    ]
    parent = "ground"
    for name, axis, xyz, m, L in spec:
        b.add_body(name, parent, Revolute(axis), xyz=xyz, actuated=True, **rod(m, L, "z"))
        parent = name
    b.add_frame("tool", parent, xyz=(0.0, 0.0, 0.08))
    model = b.build()
    model.description = "6-DOF serial arm (open chain)"
    return model


def _random_rotation(rng):
    u = rng.normal(size=4)
    w, x, y, z = u / np.linalg.norm(u)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


@parameters(n_bodies=("count", "number of bodies"), seed=("seed", "random seed"))
def random_tree(n_bodies=20, seed=0, joint_types=None):
    """A random tree of ``n_bodies`` bodies mixing every joint type.

    Parents are drawn uniformly among the bodies added before (or the ground);
    joints cycle through revolute, prismatic, universal, spherical, free and fixed
    (``joint_types`` restricts the mix, e.g. ``("revolute", "prismatic")``), with
    random axes and placements; inertias are random rotations of random principal
    moments that satisfy the triangle inequality.  One frame ``tip<k>`` per body.
    """
    rng = np.random.default_rng(seed)
    kinds = joint_types or ("revolute", "prismatic", "universal", "spherical", "free", "fixed")
    b = ModelBuilder(f"random_tree_{n_bodies}_{seed}", gravity=(0.0, 0.0, -9.81))
    for k in range(n_bodies):
        parent = (
            "ground"
            if k == 0
            else (["ground"] + [f"b{j}" for j in range(k)])[rng.integers(0, k + 1)]
        )
        kind = kinds[rng.integers(len(kinds))] if k > 0 else kinds[0]
        axis = rng.normal(size=3)
        if kind == "revolute":
            joint = Revolute(axis)
        elif kind == "prismatic":
            joint = Prismatic(axis)
        elif kind == "universal":
            joint = Universal(axis, np.cross(axis, rng.normal(size=3)))
        elif kind == "spherical":
            joint = Spherical()
        elif kind == "free":
            joint = Free()
        else:
            joint = Fixed()
        # principal moments from a random mass distribution -> triangle inequality holds
        s = rng.uniform(0.05, 0.5, 3) ** 2
        moments = np.array([s[1] + s[2], s[0] + s[2], s[0] + s[1]])
        Rb = _random_rotation(rng)
        mass = rng.uniform(0.5, 3.0)
        b.add_body(
            f"b{k}",
            parent,
            joint,
            xyz=rng.uniform(-0.5, 0.5, 3),
            rotation=_random_rotation(rng),
            mass=mass,
            com=rng.uniform(-0.2, 0.2, 3),
            inertia=mass * Rb @ np.diag(moments) @ Rb.T,
            actuated=kind != "fixed",
        )
        b.add_frame(
            f"tip{k}", f"b{k}", xyz=rng.uniform(-0.3, 0.3, 3), rotation=_random_rotation(rng)
        )
    model = b.build()
    model.description = f"random tree, {n_bodies} bodies, seed {seed}"
    return model
