"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.

Each wrapper has a fast path for the common call (the model's own ``Data``, no
``fext``): it hands the inputs straight to the compiled entry (:class:`_Fast`),
whose dispatcher checks their types in C and whose kernel checks lengths,
finiteness and quaternions.  Anything else, or any failed check, takes the
checked path, which converts or explains (``loopdyn.validation``) and raises the
error that names the culprit.
"""

import numpy as np
from numba import njit, types

from loopdyn.arena import (
    block,
    context_buffers,
    entry_kernel,
    model_sizes,
    model_views,
    tree_views,
)
from loopdyn.errors import SingularityError
from loopdyn.model import Data
from loopdyn.model.joints import FREE, SPHERICAL
from loopdyn.tree.aba import aba_kernel
from loopdyn.tree.crba import crba_kernel
from loopdyn.tree.rnea import rnea_kernel
from loopdyn.validation import all_finite, configuration, vector, wrenches


class _Fast:
    """A packed entry kernel compiled for one signature, typed by numba's dispatcher.

    At the first call the kernel is compiled (or loaded from the disk cache) for
    ``signature`` only (a ``Data``'s two context buffers, then writable C-contiguous
    float64 arrays) and compilation is disabled.  numba's dispatcher then checks
    every argument's type in C (~25 ns each) and anything else (int or float32
    arrays, strided or read-only arrays, lists) raises ``TypeError`` instead of
    compiling a variant: the wrappers catch it and take the checked path, which
    converts the inputs.  One signature also means one compiled specialisation of
    every kernel below it, whichever path reaches it.
    """

    __slots__ = ("call", "kernel", "signature")

    def __init__(self, kernel, *arrays):
        self.kernel = kernel
        self.signature = types.int64(_I1, _F1, *arrays)
        self.call = self._first

    def _first(self, *args):
        self.kernel.compile(self.signature)
        self.kernel.disable_compile()
        self.call = self.kernel
        return self.kernel(*args)


_I1, _F1, _F2 = types.int64[::1], types.float64[::1], types.float64[:, ::1]
_NONFINITE = -2  # entry status: an input holds NaN or inf
_UNCHECKED = -3  # entry status: a wrong length or a zero quaternion (explained in Python)


@njit(cache=True)
def _finite(q, v, a, fext):
    """True if every entry of the inputs is finite (nothing returns NaN silently)."""
    if not (all_finite(q) and all_finite(v) and all_finite(a)):
        return False
    for i in range(fext.shape[0]):
        for r in range(6):
            if not np.isfinite(fext[i, r]):
                return False
    return True


@njit(cache=True)
def _zero_quaternion(topo, q):
    """True if a spherical or free joint's quaternion is (numerically) zero."""
    for i in range(topo.shape[0]):
        jt = topo[i, 1]
        if jt == SPHERICAL or jt == FREE:
            k = topo[i, 2] + (3 if jt == FREE else 0)
            if not q[k] ** 2 + q[k + 1] ** 2 + q[k + 2] ** 2 + q[k + 3] ** 2 > 1e-20:
                return True
    return False


@njit(cache=True, inline="always")
def _check(mlay, topo, q, v, a, fext, nv_v, nv_a):
    """-1 if the inputs are fine: lengths (``nv_v``, ``nv_a``: what v and a should be),
    ``fext`` empty or (nb, 6), finite entries, non-zero quaternions; else a status."""
    nq, _ = model_sizes(mlay)
    if q.shape[0] != nq or v.shape[0] != nv_v or a.shape[0] != nv_a:
        return _UNCHECKED
    if fext.shape[0] != 0 and fext.shape[0] != topo.shape[0]:
        return _UNCHECKED
    if not _finite(q, v, a, fext):
        return _NONFINITE
    if _zero_quaternion(topo, q):
        return _UNCHECKED
    return -1


@entry_kernel
def _aba_entry(ictx, fctx, q, v, tau, fext, qdd):
    """``aba_kernel`` on a Data's context buffers (``loopdyn.arena``); -1 or a status."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, _, _, jgeom, inertia, gravity, _, _ = model_views(mlay, mi, mf)
    nv = model_sizes(mlay)[1]
    status = _check(mlay, topo, q, v, tau, fext, nv, nv)
    if status != -1 or qdd.shape[0] != nv:
        return _UNCHECKED if status == -1 else status
    Xrel, _, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    return aba_kernel(
        topo, jgeom, inertia, gravity, q, v, tau, fext, Xrel, S, vec6, mat6, tmp33, qdd
    )


@entry_kernel
def _rnea_entry(ictx, fctx, q, v, a, fext, tau):
    """``rnea_kernel`` on a Data's context buffers; returns -1 or a status."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, _, _, jgeom, inertia, gravity, _, _ = model_views(mlay, mi, mf)
    nv = model_sizes(mlay)[1]
    status = _check(mlay, topo, q, v, a, fext, nv, nv)
    if status != -1 or tau.shape[0] != nv:
        return _UNCHECKED if status == -1 else status
    Xrel, _, S, vec6, _, tmp33 = tree_views(dlay, df)
    rnea_kernel(topo, jgeom, inertia, gravity, q, v, a, fext, Xrel, S, vec6, tmp33, tau)
    return -1


@entry_kernel
def _crba_entry(ictx, fctx, q, M):
    """``crba_kernel`` on a Data's context buffers; returns -1 or a status."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, _, _, jgeom, inertia, _, _, _ = model_views(mlay, mi, mf)
    nv = model_sizes(mlay)[1]
    status = _check(mlay, topo, q, q[:0], q[:0], block(fctx, 0, (0, 6)), 0, 0)
    if status != -1 or M.shape[0] != nv or M.shape[1] != nv:
        return _UNCHECKED if status == -1 else status
    Xrel, _, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    crba_kernel(topo, jgeom, inertia, q, Xrel, S, vec6, mat6, tmp33, M)
    return -1


_ABA = _Fast(_aba_entry, _F1, _F1, _F1, _F2, _F1)
_RNEA = _Fast(_rnea_entry, _F1, _F1, _F1, _F2, _F1)
_CRBA = _Fast(_crba_entry, _F1, _F2)


def _workspace(model, data):
    """The ``Data`` to compute in: ``data``, or the model's own (not thread-safe)."""
    d = (model._data or model.data) if data is None else data
    if type(d) is not Data or d.model is not model:
        owner = f"model {d.model.name!r}" if type(d) is Data else f"a {type(d).__name__}"
        raise ValueError(
            f"{model.name}: data was created for {owner}; pass model.create_data() or no data"
        )
    return d


def _writable(x):
    """``x``, or a copy if it is read-only (the entry kernels take writable arrays)."""
    return x if x.flags.writeable else x.copy()


def _raise_status(model, status, what):
    if status == _NONFINITE:
        raise ValueError(f"{model.name}: {what} holds NaN or inf")
    if status == _UNCHECKED:  # pragma: no cover - the checked path rejects such input first
        raise ValueError(f"{model.name}: {what}: wrong shape or zero quaternion")


def rnea(model, q, v, a, fext=None, data=None):
    """Inverse dynamics of the tree: τ = M(q) a + h(q, v) - Σ Jᵀ fext (nv,)."""
    d = (model._data or model.data) if data is None else data
    if fext is None and type(d) is Data and d.model is model:
        tau = np.empty(model.nv)
        try:
            if _RNEA.call(d.ictx, d.fctx, q, v, a, d.fext_zero, tau) == -1:
                return tau
        except TypeError:
            pass
    d = _workspace(model, data)
    nv = model.nv
    q = _writable(configuration(model, q))
    v = _writable(vector(v, nv, "v", model))
    a = _writable(vector(a, nv, "a", model))
    f = d.fext_zero if fext is None else _writable(wrenches(model, fext))
    tau = np.empty(nv)
    status = _RNEA.call(d.ictx, d.fctx, q, v, a, f, tau)
    _raise_status(model, status, "q, v, a or fext")
    return tau


def nonlinear_effects(model, q, v, data=None):
    """Bias forces h(q, v) = C(q, v) v + g(q) (nv,): rnea with zero acceleration."""
    return rnea(model, q, v, np.zeros(model.nv), data=data)


def crba(model, q, data=None):
    """Joint-space inertia matrix M(q) (nv × nv), symmetric positive definite."""
    d = (model._data or model.data) if data is None else data
    if type(d) is Data and d.model is model:
        M = np.empty((model.nv, model.nv))
        try:
            if _CRBA.call(d.ictx, d.fctx, q, M) == -1:
                return M
        except TypeError:
            pass
    d = _workspace(model, data)
    q = _writable(configuration(model, q))
    M = np.empty((model.nv, model.nv))
    _raise_status(model, _CRBA.call(d.ictx, d.fctx, q, M), "q")
    return M


def aba(model, q, v, tau, fext=None, data=None):
    """Forward dynamics of the tree, O(n): q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) (nv,)."""
    d = (model._data or model.data) if data is None else data
    if fext is None and type(d) is Data and d.model is model:
        qdd = np.empty(model.nv)
        try:
            if _ABA.call(d.ictx, d.fctx, q, v, tau, d.fext_zero, qdd) == -1:
                return qdd
        except TypeError:
            pass
    d = _workspace(model, data)
    nv = model.nv
    q = _writable(configuration(model, q))
    v = _writable(vector(v, nv, "v", model))
    tau = _writable(vector(tau, nv, "tau", model))
    f = d.fext_zero if fext is None else _writable(wrenches(model, fext))
    qdd = np.empty(nv)
    bad = _ABA.call(d.ictx, d.fctx, q, v, tau, f, qdd)
    _raise_status(model, bad, "q, v, tau or fext")
    if bad >= 0:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[bad]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    return qdd


__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
