"""The eager tier: loopdyn's compiled kernels run as the Python they are written in.

Every kernel is a numba dispatcher over plain Python source.  ``twin(dispatcher)`` is
that source as a Python function whose globals name the twins of the kernels it calls
and the Python equivalents of the few intrinsics loopdyn's kernels use (``handles``,
``block``, ``block_int``, ``as_input``, ``row``, ``unliteral``): the same algorithm,
the same floating-point operations in the same order, run by the interpreter.  It
costs no compilation, so a process that finds its kernels missing from numba's disk
cache answers at once (``Entry.callable``), ~100-1000 times slower per call than the
compiled tier, while the compiled tier is built for next time in a background
process (``loopdyn.kernels.tiers``).

The handles are Python objects with the attributes of ``kernels/views.py``: each read
builds the numpy view of the buffer's field from its header (so a resized ``rows``
reads as in compiled code).
"""

import math
import types as _pytypes
import weakref

import numpy as np
from numba.core.dispatcher import Dispatcher

from loopdyn.model.layout import FIELDS, H_OFF, SIZES

# intrinsic (numba object) -> its Python equivalent (register_equivalent)
_EQUIV = {}
# dispatcher -> its Python twin
_TWINS = {}
# id(module globals) -> the twins' globals for that module
_GLOBALS = {}


def register_equivalent(intrinsic_obj, fn):
    """``fn`` is what the eager tier calls where a kernel calls ``intrinsic_obj``."""
    _EQUIV[intrinsic_obj] = fn


class _ModuleTwin:
    """A loopdyn module as the eager tier sees it (``E.kernel(...)`` in a kernel of
    another module): its kernels' twins, its other attributes as they are."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        value = _replacement(getattr(self._module, name))
        setattr(self, name, value)
        return value


_MODULES = {}  # module -> its _ModuleTwin


def _replacement(value):
    if isinstance(value, Dispatcher):
        return twin(value)
    if isinstance(value, _pytypes.ModuleType):
        if not value.__name__.startswith("loopdyn."):
            return value
        hit = _MODULES.get(value)
        if hit is None:
            hit = _MODULES[value] = _ModuleTwin(value)
        return hit
    try:
        return _EQUIV.get(value, value)
    except TypeError:  # unhashable
        return value


def _twin_globals(g):
    out = _GLOBALS.get(id(g))
    if out is None:
        out = _GLOBALS[id(g)] = dict(g)  # registered before filling: cycles terminate
        for k, v in g.items():
            r = _replacement(v)
            if r is not v:
                out[k] = r
    return out


def twin(dispatcher):
    """The Python twin of a numba dispatcher (memoised): its ``py_func`` with every
    kernel it calls replaced by its twin and every intrinsic by its equivalent."""
    f = _TWINS.get(dispatcher)
    if f is not None:
        return f
    py = dispatcher.py_func
    closure = None
    if py.__closure__:
        closure = tuple(_pytypes.CellType(_replacement(c.cell_contents)) for c in py.__closure__)
    f = _pytypes.FunctionType(
        py.__code__, _twin_globals(py.__globals__), py.__name__, py.__defaults__, closure
    )
    f.__kwdefaults__ = py.__kwdefaults__
    f.__doc__ = py.__doc__
    f.__wrapped_kernel__ = dispatcher
    _TWINS[dispatcher] = f
    return f


# ---- the handles (kernels/views.py) as Python objects


def _field_spec(role):
    out = {}
    for k, (name, owner, integer, dims) in enumerate(FIELDS):
        if owner == role:
            dd = []
            for d in dims:
                dd.append(d if isinstance(d, int) else tuple(SIZES.index(p) for p in d.split("+")))
            out[name] = (k, integer, tuple(dd))
    return out


_SPEC = {"m": _field_spec("m"), "d": _field_spec("d")}
_MSIZES = {n: s for s, n in enumerate(SIZES) if n not in ("nrows", "nd", "nrd")}
_DSIZES = {"nrows": SIZES.index("nrows")}


class _PyHandle:
    """``m`` or ``d`` of a buffer in the eager tier: the attributes of compiled code,
    each a numpy view of the buffer (made once per buffer: the layout of a buffer is
    fixed, but for the number of independent rows, read from the header at each use)."""

    def __init__(self, ctx, role):
        head = ctx[: H_OFF + len(FIELDS)].view(np.int64)
        self._ctx = ctx
        self._head = head
        for name, slot in (_MSIZES if role == "m" else {}).items():
            setattr(self, name, int(head[slot]))
        for name, (k, integer, dims) in _SPEC[role].items():
            if name != "rows":
                setattr(self, name, _view(ctx, head, k, integer, dims))


class _PyData(_PyHandle):
    @property
    def nrows(self):
        return int(self._head[_DSIZES["nrows"]])

    @property
    def rows(self):
        k, integer, dims = _SPEC["d"]["rows"]
        return _view(self._ctx, self._head, k, integer, dims)


def _view(ctx, head, k, integer, dims):
    shape = tuple(d if isinstance(d, int) else sum(int(head[s]) for s in d) for d in dims)
    start = int(head[H_OFF + k])
    part = ctx[start : start + math.prod(shape)]
    return (part.view(np.int64) if integer else part).reshape(shape)


# id(ctx) -> (weak reference to ctx, m, d)
_HANDLES = {}


def handles(ctx):
    """``(m, d)`` of a Data's buffer, as Python objects (made once per buffer)."""
    hit = _HANDLES.get(id(ctx))
    if hit is not None and hit[0]() is ctx:
        return hit[1], hit[2]
    m, d = _PyHandle(ctx, "m"), _PyData(ctx, "d")
    key = id(ctx)
    _HANDLES[key] = (weakref.ref(ctx, lambda _, key=key, h=_HANDLES: h.pop(key, None)), m, d)
    return m, d


def block(buf, start, shape):
    n = shape if isinstance(shape, (int, np.integer)) else math.prod(shape)
    return buf[start : start + n].reshape(shape)


def block_int(buf, start, shape):
    n = shape if isinstance(shape, (int, np.integer)) else math.prod(shape)
    return buf[start : start + n].view(np.int64).reshape(shape)


def _identity(x):
    return x


def row(A, i):
    return A[i]


def _install():
    from loopdyn.kernels import numba_internals as ni
    from loopdyn.kernels import views

    register_equivalent(views.handles, handles)
    register_equivalent(ni.block, block)
    register_equivalent(ni.block_int, block_int)
    register_equivalent(ni.as_input, _identity)
    register_equivalent(ni.unliteral, _identity)
    register_equivalent(ni.row, row)


_install()

__all__ = ["handles", "register_equivalent", "twin"]
