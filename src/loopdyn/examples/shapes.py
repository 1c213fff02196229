"""Inertias of simple shapes for the catalog (about the centre of mass)."""

import numpy as np

# moment about a slender rod's own axis, as a fraction of m L² (keeps the inertia
# positive definite; DESIGN.md: "a small positive value about the rod axis")
ROD_AXIAL = 1e-4


def rod(mass, length, axis="x"):
    """Uniform slender rod from the body origin along +``axis`` (or -axis with '-x').

    Returns ``dict(mass=, com=, inertia=)`` for ``ModelBuilder.add_body``: centre of
    mass at mid-length, m L²/12 about the two transverse axes, ROD_AXIAL·m L² about
    the rod's own axis.
    """
    sign = -1.0 if axis.startswith("-") else 1.0
    k = "xyz".index(axis[-1])
    com = np.zeros(3)
    com[k] = sign * length / 2.0
    moments = np.full(3, mass * length**2 / 12.0)
    moments[k] = ROD_AXIAL * mass * length**2
    return {"mass": mass, "com": com, "inertia": np.diag(moments)}


def box(mass, size):
    """Solid box with edge lengths ``size`` (3,), centred on the body origin."""
    a, b, c = (float(x) for x in size)
    return {
        "mass": mass,
        "com": np.zeros(3),
        "inertia": np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * mass / 12.0,
    }
