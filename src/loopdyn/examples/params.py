"""The catalog's parameters: names, units, meaning, defaults, and their validation.

Each catalog factory is decorated with ``@parameters(name=(unit, meaning), ...)``:
the factory then refuses a parameter that is not a finite number of the right
kind with a ``ModelError`` naming it, and ``ld.examples.parameters(name)`` lists
them (``loopdyn models --params``).  Units: ``"rad"`` (angles; on the command line
they need a unit, ``90deg`` or ``1.57rad``), ``"m"``, ``"count"`` (a positive
integer), ``"seed"`` (a non-negative integer), ``"flag"`` (a bool: ``true``/``false``
on the command line), ``"text"`` (a string; the factory checks its choices) and ``"-"``
(other numbers).  ``assembled`` is every factory's last step.
"""

import functools
import inspect
from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ModelError

UNITS = ("rad", "m", "count", "seed", "flag", "text", "-")


@dataclass(frozen=True)
class Parameter:
    """One catalog parameter: ``name``, ``unit``, ``meaning`` and ``default``."""

    name: str
    unit: str
    meaning: str
    default: object


def assembled(model, guess, description):
    """``model`` with ``q0`` assembled from ``guess`` (``ld.assemble``; read-only) and
    its ``description``: the last step of a catalog factory."""
    from loopdyn.analysis.assembly import assemble

    model.q0 = assemble(model, guess)
    model.q0.setflags(write=False)
    model.description = description
    return model


def parameters(**spec):
    """Declare a factory's parameters ``name=(unit, meaning)`` and validate them."""

    def wrap(fn):
        sig = inspect.signature(fn)
        for name, (unit, _) in spec.items():
            assert name in sig.parameters and unit in UNITS, (fn.__name__, name)
        table = tuple(
            Parameter(n, *spec[n], sig.parameters[n].default) for n in sig.parameters if n in spec
        )

        @functools.wraps(fn)
        def factory(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                known = ", ".join(p.name for p in table) or "none"
                raise ModelError(
                    f"{fn.__name__}: unknown or repeated parameter in {sorted(kwargs)}; its "
                    f"parameters are {known}"
                ) from None
            for name, value in bound.arguments.items():
                if name in spec:
                    bound.arguments[name] = _check(fn.__name__, name, spec[name][0], value)
            return fn(*bound.args, **bound.kwargs)

        factory.parameters = table
        return factory

    return wrap


def _check(model, name, unit, value):
    what = f"{model}: parameter {name}"
    if unit in ("count", "seed"):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ModelError(f"{what} must be an integer, got {value!r}")
        if value < (1 if unit == "count" else 0):
            raise ModelError(f"{what} must be {'>= 1' if unit == 'count' else '>= 0'}, got {value}")
        return int(value)
    if unit == "flag":
        if not isinstance(value, (bool, np.bool_)):
            raise ModelError(f"{what} must be True or False, got {value!r}")
        return bool(value)
    if unit == "text":
        if not isinstance(value, str):
            raise ModelError(f"{what} must be a string, got {value!r}")
        return value
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number ({unit}), got {value!r}") from None
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{what} must be finite, got {value!r}")
    if unit == "m" and not np.all(arr > 0):
        raise ModelError(f"{what} is a length and must be positive, got {value!r}")
    return float(arr) if arr.ndim == 0 else arr
