"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.
"""

import numpy as np

from loopdyn.errors import SingularityError
from loopdyn.tree.aba import aba_kernel
from loopdyn.tree.crba import crba_kernel
from loopdyn.tree.rnea import rnea_kernel
from loopdyn.validation import configuration, vector, wrenches


def rnea(model, q, v, a, fext=None, data=None):
    """Inverse dynamics of the tree: τ = M(q) a + h(q, v) - Σ Jᵀ fext (nv,)."""
    d = model.data if data is None else data
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    a = vector(a, model.nv, "a", model)
    tau = np.empty(model.nv)
    rnea_kernel(
        model.topo, model.jgeom, model.inertia, model.gravity, q, v, a,
        wrenches(model, fext), d.Xrel, d.S, d.vec6, d.tmp33, tau,
    )  # fmt: skip
    return tau


def nonlinear_effects(model, q, v, data=None):
    """Bias forces h(q, v) = C(q, v) v + g(q) (nv,): rnea with zero acceleration."""
    return rnea(model, q, v, np.zeros(model.nv), data=data)


def crba(model, q, data=None):
    """Joint-space inertia matrix M(q) (nv × nv), symmetric positive definite."""
    d = model.data if data is None else data
    q = configuration(model, q)
    M = np.empty((model.nv, model.nv))
    crba_kernel(model.topo, model.jgeom, model.inertia, q, d.Xrel, d.S, d.vec6, d.mat6, d.tmp33, M)
    return M


def aba(model, q, v, tau, fext=None, data=None):
    """Forward dynamics of the tree, O(n): q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) (nv,)."""
    d = model.data if data is None else data
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    tau = vector(tau, model.nv, "tau", model)
    qdd = np.empty(model.nv)
    bad = aba_kernel(
        model.topo, model.jgeom, model.inertia, model.gravity, q, v, tau,
        wrenches(model, fext), d.Xrel, d.S, d.vec6, d.mat6, d.tmp33, qdd,
    )  # fmt: skip
    if bad >= 0:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[bad]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    return qdd


__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
