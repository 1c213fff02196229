"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.

The wrappers validate their inputs (``loopdyn.validation``, a ~0.1 µs fast path per
array) and call the compiled kernels through :class:`_Entry`.
"""

import numpy as np
from numba import typeof

from loopdyn.errors import SingularityError
from loopdyn.model import Data
from loopdyn.tree.aba import aba_kernel
from loopdyn.tree.crba import crba_kernel
from loopdyn.tree.rnea import rnea_kernel
from loopdyn.validation import configuration, vector, wrenches


class _Entry:
    """Call a compiled kernel's entry point directly once it has been compiled.

    numba's dispatcher spends ~30 ns per array argument matching argument types to
    an overload (~0.4 µs for ``aba_kernel``).  The wrappers below fix every
    argument's dtype, ndim and layout (validated C-contiguous float64 inputs, the
    model's packed arrays, a ``Data`` workspace); only the read-only flag of an
    input may vary, and that does not change the compiled code.  So the first call
    goes through the dispatcher (compiling or loading the cache) and later calls
    go straight to that overload.  A ``data`` that is not a ``Data`` takes the
    dispatcher path.
    """

    __slots__ = ("call", "kernel")

    def __init__(self, kernel):
        self.kernel = kernel
        self.call = self._first

    def _first(self, *args):
        out = self.kernel(*args)
        cres = self.kernel.overloads.get(tuple(typeof(a) for a in args))
        if cres is not None:
            self.call = cres.entry_point
        return out


_ABA = _Entry(aba_kernel)
_RNEA = _Entry(rnea_kernel)
_CRBA = _Entry(crba_kernel)


def rnea(model, q, v, a, fext=None, data=None):
    """Inverse dynamics of the tree: τ = M(q) a + h(q, v) - Σ Jᵀ fext (nv,)."""
    d = model.data if data is None else data
    nv = model.nv
    q = configuration(model, q)
    v = vector(v, nv, "v", model)
    a = vector(a, nv, "a", model)
    tau = np.empty(nv)
    (_RNEA.call if type(d) is Data else rnea_kernel)(
        model.topo, model.jgeom, model.inertia, model.gravity, q, v, a,
        d.fext_zero if fext is None else wrenches(model, fext),
        d.Xrel, d.S, d.vec6, d.tmp33, tau,
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
    (_CRBA.call if type(d) is Data else crba_kernel)(
        model.topo, model.jgeom, model.inertia, q, d.Xrel, d.S, d.vec6, d.mat6, d.tmp33, M
    )
    return M


def aba(model, q, v, tau, fext=None, data=None):
    """Forward dynamics of the tree, O(n): q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) (nv,)."""
    d = model.data if data is None else data
    nv = model.nv
    q = configuration(model, q)
    v = vector(v, nv, "v", model)
    tau = vector(tau, nv, "tau", model)
    qdd = np.empty(nv)
    bad = (_ABA.call if type(d) is Data else aba_kernel)(
        model.topo, model.jgeom, model.inertia, model.gravity, q, v, tau,
        d.fext_zero if fext is None else wrenches(model, fext),
        d.Xrel, d.S, d.vec6, d.mat6, d.tmp33, qdd,
    )  # fmt: skip
    if bad >= 0:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[bad]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    return qdd


__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
