"""Input checks done inside the entries (compiled), and the statuses they return.

An entry checks lengths, finiteness and quaternions of its inputs before any work
and returns a status instead of a result; the Python wrapper then raises the error
that names the culprit (``raise_status``).  The statuses are negative floats (or
ints) so that a method entry can return "a ratio > 0 or a status < 0" in one value.
"""

import numpy as np
from numba import njit

from loopdyn.model.joints import FREE, SPHERICAL

STATE_OK, STATE_NONFINITE, STATE_BAD = 0, -3, -4


@njit(cache=True)
def all_finite(x):
    """True if every entry of the vector x is finite."""
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True


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


@njit(cache=True, inline="always")
def state_status(m, q, v, a, nv_v, nv_a):
    """``STATE_OK`` if ``q`` (nq), ``v`` (``nv_v``) and ``a`` (``nv_a``) have their lengths,
    every entry is finite and no quaternion is zero; else ``STATE_NONFINITE`` or
    ``STATE_BAD`` (the checked path then explains)."""
    if q.shape[0] != m.nq or v.shape[0] != nv_v or a.shape[0] != nv_a:
        return STATE_BAD
    if not (all_finite(q) and all_finite(v) and all_finite(a)):
        return STATE_NONFINITE
    if m.nq != m.nv and bad_quaternion(m.topo, q) >= 0:  # nq = nv: no quaternion
        return STATE_BAD
    return STATE_OK


@njit(cache=True, inline="always")
def wrench_status(m, fext):
    """``STATE_OK`` if ``fext`` is empty or (nb, 6) and finite."""
    if fext.shape[0] != 0 and fext.shape[0] != m.nb:
        return STATE_BAD
    for i in range(fext.shape[0]):
        for r in range(6):
            if not np.isfinite(fext[i, r]):
                return STATE_NONFINITE
    return STATE_OK


def raise_status(model, status, what):
    """Raise the ValueError of a failed input check (``what`` names the inputs)."""
    if status == STATE_NONFINITE:
        raise ValueError(f"{model.name}: {what} holds NaN or inf")
    if status == STATE_BAD:  # pragma: no cover - the checked path rejects such input first
        raise ValueError(f"{model.name}: {what}: wrong shape or zero quaternion")
