"""Input checks at the API edge: clear ``ValueError`` instead of numba typing errors."""

import numpy as np

_F64 = np.dtype(np.float64)


def vector(x, n, what, model):
    """``x`` as a contiguous float64 vector of length ``n`` (ValueError otherwise)."""
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


def configuration(model, q):
    """Validated q; rejects a zero or non-finite quaternion (others are normalised in kernels)."""
    q = vector(q, model.nq, "q", model)
    if model.has_quaternions:
        ks = model._quat_starts
        n2 = q[ks] ** 2 + q[ks + 1] ** 2 + q[ks + 2] ** 2 + q[ks + 3] ** 2
        if not np.all(n2 > 1e-20) or not np.all(np.isfinite(n2)):
            bad = int(np.flatnonzero(~(n2 > 1e-20))[0]) if np.any(~(n2 > 1e-20)) else 0
            raise ValueError(
                f"{model.name}: quaternion at q[{ks[bad]}:{ks[bad] + 4}] is zero or not finite"
            )
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
