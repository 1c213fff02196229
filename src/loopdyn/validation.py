"""Input conversion and checks at the API edge: clear errors instead of numba typing errors.

The compiled entries accept every float64 vector (contiguous or strided, writable
or read-only) directly and convert lists, ints and float32 themselves
(``loopdyn.kernels.numba_internals.Entry``); what they refuse (complex, strings,
wrong shapes) or what fails their checks comes here, and is converted or explained
with an error that names the model and the argument.
"""

import numpy as np

from loopdyn.errors import NotAModelError
from loopdyn.kernels.checks import bad_quaternion
from loopdyn.kernels.tiers import kernel
from loopdyn.model.data import Data
from loopdyn.model.model import Model

_F64 = np.dtype(np.float64)
_ND = np.ndarray


def model_arg(model):
    """``model`` if it is a loopdyn ``Model``, else :class:`loopdyn.errors.NotAModelError`
    (a ``ModelError`` and a ``TypeError``) saying what was given and where a model comes
    from.  ``workspace`` and ``configuration`` call it: the first check of every entry."""
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        hint = f"; a catalog model: ld.examples.get({model!r}), a file: ld.load(path)"
    elif type(model) is Data:
        hint = "; a Data is a model's workspace: pass data.model, and the Data as data="
    else:
        hint = " (ld.examples.get(name), ld.load(path) or ModelBuilder(...).build())"
    given = "None" if model is None else f"a {type(model).__name__} {_short(model)}"
    raise NotAModelError(f"model: a loopdyn Model is expected, got {given}{hint}")


def _short(x):
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def vector(x, n, what, model, finite=True):
    """``x`` as a float64 vector of length ``n``, finite unless ``finite=False``
    (ValueError naming ``what`` otherwise).

    Arrays that are already float64 vectors of the right length are returned as
    they are (strided and read-only ones too: the entries take them).
    """
    if type(x) is _ND and x.dtype is _F64 and x.ndim == 1 and x.shape[0] == n:
        if finite:
            _finite(x, what, model)
        return x
    if np.iscomplexobj(x):
        raise ValueError(f"{model.name}: {what} must be real, got complex values")
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{model.name}: {what} must be an array of {n} numbers, got {x!r}"
        ) from None
    if x.ndim != 1 and x.size == n and x.ndim == 2 and 1 in x.shape:
        x = x.reshape(-1)
    if x.shape != (n,):
        raise ValueError(f"{model.name}: {what} must have shape ({n},), got {x.shape}")
    if finite:
        _finite(x, what, model)
    return x


def _finite(x, what, model):
    if not np.all(np.isfinite(x)):
        k = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"{model.name}: {what} holds NaN or inf ({what}[{k}] = {x[k]})")


def scalar(x, what, model, positive=False):
    """``x`` as a finite float (positive if asked), else ValueError naming ``what``."""
    try:
        y = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{model.name}: {what} must be a number, got {x!r}") from None
    if not np.isfinite(y) or (positive and not y > 0.0):
        kind = "positive and finite" if positive else "finite"
        raise ValueError(f"{model.name}: {what} must be {kind}, got {x!r}")
    return y


def configuration(model, q):
    """Validated q (nq); rejects a zero or non-finite quaternion (others are normalised in
    kernels)."""
    if type(model) is not Model:
        model_arg(model)
    q = vector(q, model.nq, "q", model)
    if model.has_quaternions:
        k = kernel(bad_quaternion)(model.topo, np.ascontiguousarray(q))
        if k >= 0:
            raise ValueError(f"{model.name}: quaternion at q[{k}:{k + 4}] is zero or not finite")
    return q


def wrenches(model, fext):
    """External wrenches as an (nb, 6) array (body frame, ``[n; f]`` about the body origin).

    Accepts None (an empty (0, 6) array), an (nb, 6) array, or a dict
    ``{body name or index: wrench}``.
    """
    if fext is None:
        return np.zeros((0, 6))
    if isinstance(fext, dict):
        out = np.zeros((model.nbodies, 6))
        for body, w in fext.items():
            i = model.body_index(body)
            if i < 0:
                raise ValueError(f"{model.name}: an external wrench cannot act on the ground")
            out[i] = vector(w, 6, f"wrench on {body!r}", model)
        return out
    if np.iscomplexobj(fext):
        raise ValueError(f"{model.name}: fext must be real, got complex values")
    f = np.ascontiguousarray(fext, dtype=np.float64)
    if f.shape != (model.nbodies, 6):
        raise ValueError(f"{model.name}: fext must have shape ({model.nbodies}, 6), got {f.shape}")
    return f


def workspace(model, data):
    """The ``Data`` to compute in: ``data``, or the model's own (not thread-safe).

    ValueError if ``data`` is not a ``Data`` of this model: kernels index it with
    the model's sizes.
    """
    if type(model) is not Model:
        model_arg(model)
    d = model.data if data is None else data
    if type(d) is not Data or d.model is not model:
        owner = f"model {d.model.name!r}" if type(d) is Data else f"a {type(d).__name__}"
        raise ValueError(
            f"{model.name}: data was created for {owner}; pass model.create_data() or no data"
        )
    return d
