"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.

Each wrapper has a fast path for the common call (the model's own ``Data``, no
``fext``): it hands the inputs straight to the compiled entry (``arena.Entry``),
whose dispatcher checks their types in C and whose kernel checks lengths,
finiteness and quaternions.  Anything else, or any failed check, takes the
checked path, which converts or explains (``loopdyn.validation``) and raises the
error that names the culprit.
"""

import numpy as np
from numba import types

from loopdyn.errors import SingularityError
from loopdyn.kernels.layout import (
    F1,
    F2,
    I1,
    Entry,
    block,
    context_buffers,
    entry_kernel,
    model_sizes,
    model_views,
    tree_views,
)
from loopdyn.model import Data
from loopdyn.tree.aba import aba_kernel
from loopdyn.tree.crba import crba_kernel
from loopdyn.tree.rnea import rnea_kernel
from loopdyn.validation import (
    STATE_BAD,
    STATE_NONFINITE,
    STATE_OK,
    configuration,
    state_status,
    vector,
    workspace,
    wrenches,
    writable,
)


@entry_kernel
def _aba_entry(ictx, fctx, q, v, tau, fext, qdd):
    """``aba_kernel`` on a Data's context buffers (``loopdyn.kernels.layout``); -1 or a status."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, _, _, jgeom, inertia, gravity, _, _ = model_views(mlay, mi, mf)
    nv = model_sizes(mlay)[1]
    status = state_status(mlay, topo, q, v, tau, fext, nv, nv)
    if status != STATE_OK or qdd.shape[0] != nv:
        return STATE_BAD if status == STATE_OK else status
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
    status = state_status(mlay, topo, q, v, a, fext, nv, nv)
    if status != STATE_OK or tau.shape[0] != nv:
        return STATE_BAD if status == STATE_OK else status
    Xrel, _, S, vec6, _, tmp33 = tree_views(dlay, df)
    rnea_kernel(topo, jgeom, inertia, gravity, q, v, a, fext, Xrel, S, vec6, tmp33, tau)
    return -1


@entry_kernel
def _crba_entry(ictx, fctx, q, M):
    """``crba_kernel`` on a Data's context buffers; returns -1 or a status."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, _, _, jgeom, inertia, _, _, _ = model_views(mlay, mi, mf)
    nv = model_sizes(mlay)[1]
    status = state_status(mlay, topo, q, q[:0], q[:0], block(fctx, 0, (0, 6)), 0, 0)
    if status != STATE_OK or M.shape[0] != nv or M.shape[1] != nv:
        return STATE_BAD if status == STATE_OK else status
    Xrel, _, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    crba_kernel(topo, jgeom, inertia, q, Xrel, S, vec6, mat6, tmp33, M)
    return -1


_ABA = Entry(_aba_entry, types.int64, I1, F1, F1, F1, F1, F2, F1)
_RNEA = Entry(_rnea_entry, types.int64, I1, F1, F1, F1, F1, F2, F1)
_CRBA = Entry(_crba_entry, types.int64, I1, F1, F1, F2)


def _raise_status(model, status, what):
    if status == STATE_NONFINITE:
        raise ValueError(f"{model.name}: {what} holds NaN or inf")
    if status == STATE_BAD:  # pragma: no cover - the checked path rejects such input first
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
    d = workspace(model, data)
    nv = model.nv
    q = writable(configuration(model, q))
    v = writable(vector(v, nv, "v", model))
    a = writable(vector(a, nv, "a", model))
    f = d.fext_zero if fext is None else writable(wrenches(model, fext))
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
    d = workspace(model, data)
    q = writable(configuration(model, q))
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
    d = workspace(model, data)
    nv = model.nv
    q = writable(configuration(model, q))
    v = writable(vector(v, nv, "v", model))
    tau = writable(vector(tau, nv, "tau", model))
    f = d.fext_zero if fext is None else writable(wrenches(model, fext))
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
