"""Mechanical energy of a model: kinetic ½ vᵀ M v and gravitational potential -Σ m g·c."""

import numpy as np

from loopdyn.kinematics.frames import forward_kinematics
from loopdyn.tree import crba
from loopdyn.validation import model_arg, vector


def centres_of_mass(model, q, data=None):
    """World positions (nb, 3) of every body's centre of mass."""
    d = forward_kinematics(model, q, data=data)
    I = model.inertia
    m = I[:, 3, 3]
    c = np.stack([I[:, 2, 4], I[:, 0, 5], I[:, 1, 3]], axis=1) / m[:, None]
    R = d.Xw[: model.nbodies, :3]
    return d.Xw[: model.nbodies, 3] + np.einsum("bij,bj->bi", R, c)


def potential_energy(model, q, data=None):
    """V(q) = -Σ m_i g·c_i (J), zero at the world origin."""
    com = centres_of_mass(model, q, data)
    return float(-(model.masses * (com @ model.gravity)).sum())


def kinetic_energy(model, q, v, data=None):
    """T(q, v) = ½ vᵀ M(q) v (J)."""
    v = vector(v, model_arg(model).nv, "v", model)
    return float(0.5 * v @ crba(model, q, data=data) @ v)


def total_energy(model, q, v, data=None):
    """T + V (J)."""
    return kinetic_energy(model, q, v, data) + potential_energy(model, q, data)
