"""Input checks at the API edge: clear ``ValueError`` instead of numba typing errors.

Each check has a fast path for the common case (an already valid float64 array,
~0.1 µs); anything else goes through the slow path that converts or explains.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.layout import model_sizes
from loopdyn.model.joints import FREE, SPHERICAL

_F64 = np.dtype(np.float64)
_ND = np.ndarray
_S8 = (8,)


def vector(x, n, what, model):
    """``x`` as a contiguous float64 vector of length ``n`` (ValueError otherwise)."""
    # fast path: a 1-D float64 array with unit stride (so C-contiguous) of length n
    if type(x) is _ND and x.dtype is _F64 and x.strides == _S8 and len(x) == n:
        return x
    return _vector(x, n, what, model)


def _vector(x, n, what, model):
    if type(x) is not np.ndarray or x.dtype != _F64 or x.ndim != 1 or not x.flags.c_contiguous:
        try:
            x = np.ascontiguousarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{model.name}: {what} must be an array of {n} numbers, got {x!r}"
            ) from None
        if x.ndim != 1:
            x = x.reshape(-1) if x.size == n and x.ndim == 2 and 1 in x.shape else x
    if x.shape != (n,):
        raise ValueError(f"{model.name}: {what} must have shape ({n},), got {x.shape}")
    return x


@njit(cache=True)
def all_finite(x):
    """True if every entry of the vector x is finite (compiled; for kernels)."""
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


STATE_OK, STATE_NONFINITE, STATE_BAD = -1, -2, -3


@njit(cache=True)
def bad_quaternion(topo, q):
    """Start in q of the first spherical or free joint's quaternion that is zero (or not
    finite), or -1."""
    for i in range(topo.shape[0]):
        jt = topo[i, 1]
        if jt == SPHERICAL or jt == FREE:
            k = topo[i, 2] + (3 if jt == FREE else 0)
            n2 = q[k] ** 2 + q[k + 1] ** 2 + q[k + 2] ** 2 + q[k + 3] ** 2
            if not (n2 > 1e-20 and np.isfinite(n2)):
                return k
    return -1


@njit(cache=True)
def state_status(mlay, topo, q, v, a, fext, nv_v, nv_a):
    """The entry kernels' input check (compiled; the Python fast paths skip theirs).

    ``STATE_OK`` if ``q`` (nq), ``v`` (``nv_v``) and ``a`` (``nv_a``) have their lengths,
    ``fext`` is empty or (nb, 6), every entry is finite and no quaternion is zero;
    else ``STATE_NONFINITE`` or ``STATE_BAD`` (the checked path then explains).
    """
    nq, _ = model_sizes(mlay)
    if q.shape[0] != nq or v.shape[0] != nv_v or a.shape[0] != nv_a:
        return STATE_BAD
    if fext.shape[0] != 0 and fext.shape[0] != topo.shape[0]:
        return STATE_BAD
    if not (all_finite(q) and all_finite(v) and all_finite(a)):
        return STATE_NONFINITE
    for i in range(fext.shape[0]):
        for r in range(6):
            if not np.isfinite(fext[i, r]):
                return STATE_NONFINITE
    if bad_quaternion(topo, q) >= 0:
        return STATE_BAD
    return STATE_OK


def configuration(model, q):
    """Validated q; rejects a zero or non-finite quaternion (others are normalised in kernels)."""
    if not (type(q) is _ND and q.dtype is _F64 and q.strides == _S8 and len(q) == model.nq):
        q = _vector(q, model.nq, "q", model)
    if model.has_quaternions:
        k = bad_quaternion(model.topo, q)
        if k >= 0:
            raise ValueError(f"{model.name}: quaternion at q[{k}:{k + 4}] is zero or not finite")
    return q


def wrenches(model, fext):
    """External wrenches as an (nb, 6) array (body frame, ``[n; f]`` about the body origin).

    Accepts None, an (nb, 6) array, or a dict ``{body name or index: wrench}``.
    """
    if fext is None:
        return model.data.fext_zero
    if isinstance(fext, dict):
        out = np.zeros((model.nbodies, 6))
        for body, w in fext.items():
            i = model.body_index(body)
            if i < 0:
                raise ValueError(f"{model.name}: an external wrench cannot act on the ground")
            out[i] = vector(w, 6, f"wrench on {body!r}", model)
        return out
    f = np.ascontiguousarray(fext, dtype=np.float64)
    if f.shape != (model.nbodies, 6):
        raise ValueError(f"{model.name}: fext must have shape ({model.nbodies}, 6), got {f.shape}")
    return f


def workspace(model, data):
    """The ``Data`` to compute in: ``data``, or the model's own (not thread-safe).

    ValueError if ``data`` is not a ``Data`` of this model: kernels index it with
    the model's sizes.
    """
    from loopdyn.model import Data

    d = (model._data or model.data) if data is None else data
    if type(d) is not Data or d.model is not model:
        owner = f"model {d.model.name!r}" if type(d) is Data else f"a {type(d).__name__}"
        raise ValueError(
            f"{model.name}: data was created for {owner}; pass model.create_data() or no data"
        )
    return d


def writable(x):
    """``x``, or a copy if it is read-only (the entry kernels take writable arrays)."""
    return x if x.flags.writeable else x.copy()
