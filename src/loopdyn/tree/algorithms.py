"""The public tree algorithms ``rnea``, ``crba``, ``aba``, ``nonlinear_effects`` and
their compiled entries (re-exported by ``loopdyn.tree`` and ``loopdyn``).

They live here, not in ``loopdyn/tree/__init__.py``, because the kernels' modules
``loopdyn.tree.aba`` / ``.rnea`` / ``.crba`` share their names: documentation tools
(griffe, behind mkdocstrings) let a submodule shadow a package member of the same
name, so ``ld.aba`` was documented as the module (``aba_kernel(m, d, ...)``).

All take an optional ``data`` workspace (default: the model's own, not thread-safe)
and optional external wrenches ``fext``: an (nb, 6) array or a dict ``{body: wrench}``
of wrenches ``[n; f]`` acting on each body, in the body frame, about the body origin.

Each function hands its inputs straight to a compiled entry
(``loopdyn.kernels.numba_internals.Entry``), which accepts every float64 vector,
converts lists, tuples, ints and float32 once, and checks lengths, finiteness and
quaternions itself.  Anything else (complex, strings, a foreign ``data``) or a
failed check takes the checked path, which raises the error that names the culprit.
"""

import numpy as np
from numba import types

from loopdyn.errors import SingularityError
from loopdyn.kernels.checks import STATE_BAD, STATE_OK, raise_status, state_status, wrench_status
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    IN2,
    OUT,
    OUT2,
    Entry,
    as_input,
    entry,
    unliteral,
)
from loopdyn.kernels.views import handles
from loopdyn.model.data import Data
from loopdyn.tree.aba import aba_kernel
from loopdyn.tree.crba import crba_kernel
from loopdyn.tree.rnea import rnea_kernel
from loopdyn.validation import configuration, model_arg, vector, workspace, wrenches

# statuses of the entries: OK (rnea, crba) / -1 (aba: no singular body), or a STATE_*
_DONE = -1
_NO_F = np.zeros((0, 6))
_NO_F.setflags(write=False)


@entry
def aba_entry(ctx, q, v, tau, fext, qdd):
    """``aba_kernel`` on a Data's buffer: -1, the index of a singular body, or a status."""
    m, d = handles(ctx)
    st = state_status(m, q, v, tau, m.nv, m.nv)
    if st == STATE_OK:
        st = wrench_status(m, fext)
    if st != STATE_OK or qdd.shape[0] != m.nv:
        return STATE_BAD if st == STATE_OK else st
    return aba_kernel(m, d, q, v, tau, fext, qdd)


@entry
def aba0_entry(ctx, q, v, tau, qdd):
    """``aba_entry`` without external wrenches (one argument less: the common call)."""
    m, d = handles(ctx)
    st = state_status(m, q, v, tau, m.nv, m.nv)
    if st != STATE_OK or qdd.shape[0] != m.nv:
        return STATE_BAD if st == STATE_OK else st
    return aba_kernel(m, d, q, v, tau, as_input(d.fext[:0]), qdd)


@entry
def rnea0_entry(ctx, q, v, a, tau):
    """``rnea_entry`` without external wrenches."""
    m, d = handles(ctx)
    st = state_status(m, q, v, a, m.nv, m.nv)
    if st != STATE_OK or tau.shape[0] != m.nv:
        return STATE_BAD if st == STATE_OK else st
    rnea_kernel(m, d, q, v, a, as_input(d.fext[:0]), tau)
    return _DONE


@entry
def rnea_entry(ctx, q, v, a, fext, tau):
    """``rnea_kernel`` on a Data's buffer: -1 or a status."""
    m, d = handles(ctx)
    st = state_status(m, q, v, a, m.nv, m.nv)
    if st == STATE_OK:
        st = wrench_status(m, fext)
    if st != STATE_OK or tau.shape[0] != m.nv:
        return STATE_BAD if st == STATE_OK else st
    rnea_kernel(m, d, q, v, a, fext, tau)
    return _DONE


@entry
def crba_entry(ctx, q, M):
    """``crba_kernel`` on a Data's buffer: -1 or a status."""
    m, d = handles(ctx)
    st = state_status(m, q, q[:0], q[:0], unliteral(0), unliteral(0))
    if st != STATE_OK or M.shape[0] != m.nv or M.shape[1] != m.nv:
        return STATE_BAD if st == STATE_OK else st
    crba_kernel(m, d, q, M)
    return _DONE


ABA = Entry(aba_entry, types.int64, BUF, IN, IN, IN, IN2, OUT)
RNEA = Entry(rnea_entry, types.int64, BUF, IN, IN, IN, IN2, OUT)
CRBA = Entry(crba_entry, types.int64, BUF, IN, OUT2)
ABA0 = Entry(aba0_entry, types.int64, BUF, IN, IN, IN, OUT)
RNEA0 = Entry(rnea0_entry, types.int64, BUF, IN, IN, IN, OUT)
_empty = np.empty


def _data_ctx(model, data):
    """The compiled entries' handle on ``data`` if it is a Data of ``model``, else None
    (a TypeError in the entry: the checked path explains)."""
    return data.ctx if type(data) is Data and data.model is model else None


def rnea(model, q, v, a, fext=None, data=None):
    """Inverse dynamics of the tree: τ = M(q) a + h(q, v) - Σ Jᵀ fext (nv,)."""
    if fext is None:
        try:
            tau = _empty(model.nv)
            ctx = model._ctx if data is None else _data_ctx(model, data)
            if RNEA0.call(ctx, q, v, a, tau) == _DONE:
                return tau
        except (TypeError, AttributeError):  # not real numbers, not a model: explained below
            pass
    d = workspace(model, data)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    a = vector(a, model.nv, "a", model)
    f = _NO_F if fext is None else wrenches(model, fext)
    tau = np.empty(model.nv)
    raise_status(model, RNEA.call(d.ctx, q, v, a, f, tau), "q, v, a or fext")
    return tau


def nonlinear_effects(model, q, v, data=None):
    """Bias forces h(q, v) = C(q, v) v + g(q) (nv,): rnea with zero acceleration."""
    return rnea(model_arg(model), q, v, np.zeros(model.nv), data=data)


def crba(model, q, data=None):
    """Joint-space inertia matrix M(q) (nv × nv), symmetric positive definite."""
    try:
        M = _empty((model.nv, model.nv))
        ctx = model._ctx if data is None else _data_ctx(model, data)
        if CRBA.call(ctx, q, M) == _DONE:
            return M
    except (TypeError, AttributeError):  # not real numbers, not a model: explained below
        pass
    d = workspace(model, data)
    q = configuration(model, q)
    M = np.empty((model.nv, model.nv))
    raise_status(model, CRBA.call(d.ctx, q, M), "q")
    return M


def aba(model, q, v, tau, fext=None, data=None):
    """Forward dynamics of the tree, O(n): q̈ = M⁻¹ (τ - h + Σ Jᵀ fext) (nv,)."""
    if fext is None:
        try:
            qdd = _empty(model.nv)
            ctx = model._ctx if data is None else _data_ctx(model, data)
            if ABA0.call(ctx, q, v, tau, qdd) == _DONE:
                return qdd
        except (TypeError, AttributeError):  # not real numbers, not a model: explained below
            pass
    d = workspace(model, data)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    tau = vector(tau, model.nv, "tau", model)
    f = _NO_F if fext is None else wrenches(model, fext)
    qdd = np.empty(model.nv)
    st = ABA.call(d.ctx, q, v, tau, f, qdd)
    raise_status(model, st, "q, v, tau or fext")
    if st >= 0:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[st]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    return qdd


__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
