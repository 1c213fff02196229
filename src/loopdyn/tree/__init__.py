"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.

The wrappers validate their inputs (``loopdyn.validation``, a ~0.1 µs fast path per
array) and call the compiled kernels through :class:`_Entry`.
"""

import numpy as np
from numba import njit, typeof

from loopdyn.arena import entry_kernel, model_views, tree_views
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


_NONFINITE = -2  # entry status: an input holds NaN or inf


@njit(cache=True)
def _vector_finite(x):
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


@njit(cache=True)
def _finite(q, v, a, fext):
    """True if every entry of the inputs is finite (nothing returns NaN silently)."""
    if not (_vector_finite(q) and _vector_finite(v) and _vector_finite(a)):
        return False
    for i in range(fext.shape[0]):
        for r in range(6):
            if not np.isfinite(fext[i, r]):
                return False
    return True


@entry_kernel
def _aba_entry(mlay, mi, mf, dlay, df, q, v, tau, fext, qdd):
    """``aba_kernel`` on the packed model and data buffers (``loopdyn.arena``)."""
    if not _finite(q, v, tau, fext):
        return _NONFINITE
    topo, _, _, jgeom, inertia, gravity, _, _ = model_views(mlay, mi, mf)
    Xrel, _, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    return aba_kernel(
        topo, jgeom, inertia, gravity, q, v, tau, fext, Xrel, S, vec6, mat6, tmp33, qdd
    )


@entry_kernel
def _rnea_entry(mlay, mi, mf, dlay, df, q, v, a, fext, tau):
    """``rnea_kernel`` on the packed model and data buffers; returns -1 or ``_NONFINITE``."""
    if not _finite(q, v, a, fext):
        return _NONFINITE
    topo, _, _, jgeom, inertia, gravity, _, _ = model_views(mlay, mi, mf)
    Xrel, _, S, vec6, _, tmp33 = tree_views(dlay, df)
    rnea_kernel(topo, jgeom, inertia, gravity, q, v, a, fext, Xrel, S, vec6, tmp33, tau)
    return -1


@entry_kernel
def _crba_entry(mlay, mi, mf, dlay, df, q, M):
    """``crba_kernel`` on the packed model and data buffers; returns -1 or ``_NONFINITE``."""
    if not _finite(q, q[:0], q[:0], M[:0]):
        return _NONFINITE
    topo, _, _, jgeom, inertia, _, _, _ = model_views(mlay, mi, mf)
    Xrel, _, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    crba_kernel(topo, jgeom, inertia, q, Xrel, S, vec6, mat6, tmp33, M)
    return -1


_ABA = _Entry(_aba_entry)
_RNEA = _Entry(_rnea_entry)
_CRBA = _Entry(_crba_entry)


def rnea(model, q, v, a, fext=None, data=None):
    """Inverse dynamics of the tree: τ = M(q) a + h(q, v) - Σ Jᵀ fext (nv,)."""
    d = (model._data or model.data) if data is None else data
    nv = model.nv
    q = configuration(model, q)
    v = vector(v, nv, "v", model)
    a = vector(a, nv, "a", model)
    tau = np.empty(nv)
    status = (_RNEA.call if type(d) is Data else _rnea_entry)(
        model.mlay, model.mi, model.mf, d.dlay, d.df, q, v, a,
        d.fext_zero if fext is None else wrenches(model, fext), tau,
    )  # fmt: skip
    if status == _NONFINITE:
        raise ValueError(f"{model.name}: q, v, a or fext holds NaN or inf")
    return tau


def nonlinear_effects(model, q, v, data=None):
    """Bias forces h(q, v) = C(q, v) v + g(q) (nv,): rnea with zero acceleration."""
    return rnea(model, q, v, np.zeros(model.nv), data=data)


def crba(model, q, data=None):
    """Joint-space inertia matrix M(q) (nv × nv), symmetric positive definite."""
    d = (model._data or model.data) if data is None else data
    q = configuration(model, q)
    M = np.empty((model.nv, model.nv))
    status = (_CRBA.call if type(d) is Data else _crba_entry)(
        model.mlay, model.mi, model.mf, d.dlay, d.df, q, M
    )
    if status == _NONFINITE:
        raise ValueError(f"{model.name}: q holds NaN or inf")
    return M


def aba(model, q, v, tau, fext=None, data=None):
    """Forward dynamics of the tree, O(n): q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) (nv,)."""
    d = (model._data or model.data) if data is None else data
    nv = model.nv
    q = configuration(model, q)
    v = vector(v, nv, "v", model)
    tau = vector(tau, nv, "tau", model)
    qdd = np.empty(nv)
    bad = (_ABA.call if type(d) is Data else _aba_entry)(
        model.mlay, model.mi, model.mf, d.dlay, d.df, q, v, tau,
        d.fext_zero if fext is None else wrenches(model, fext), qdd,
    )  # fmt: skip
    if bad == _NONFINITE:
        raise ValueError(f"{model.name}: q, v, tau or fext holds NaN or inf")
    if bad >= 0:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[bad]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    return qdd


__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
