"""The parts of numba loopdyn uses beyond its documented API, in one place.

``tests/test_numba_internals.py`` checks each of them against the installed numba
and fails loudly if a release changes one.

1. ``block`` (an ``@intrinsic`` built with numba's array helpers ``make_array`` /
   ``populate_array``): a C-contiguous view of a slice of a 1-D buffer, optionally
   reinterpreting its 8-byte items as int64.  numba's own ``buf[a:b].reshape(shape)``
   calls a C helper (~20 ns) per view; an entry rebuilds ~50 views per call.
2. ``entry``: an entry kernel is compiled with the option ``_nrt=False`` (no reference
   counting: it only takes views of buffers owned by the caller and allocates nothing;
   with counting, every view costs atomic updates).  A numba that refuses the option
   raises here, at import, instead of silently compiling something slower.
3. ``as_input``: an ``@intrinsic`` retyping an array as read-only 'A' without a copy.
4. ``unliteral``: an ``@intrinsic`` that drops the literal type of a constant argument.
5. ``install_cache_locator``: numba keys a function's disk cache on its own source
   file only, so a kernel that calls a kernel of another file kept running the old
   callee's code after an edit (or a ``git pull``) of that file.  loopdyn's functions
   get cache locators (numba's ``caching`` locator classes, first in its list) whose
   source stamp is a hash of every loopdyn source file: any change recompiles.
6. ``Entry``: a kernel compiled for exactly one signature and then closed to
   compilation.  numba's dispatcher checks the argument types in C; when they do not
   match it calls back two Python methods of the dispatcher,
   ``_search_new_conversions`` and ``_explain_matching_error``, which type every
   argument in Python (~100 µs).  ``Entry`` first lets numba register the
   conversions loopdyn accepts (writable, read-only and strided float64 vectors to the
   read-only 'A' arrays of the signature), then replaces the two callbacks on that one
   dispatcher by a refusal that costs ~1 µs, so that the caller's ``except TypeError``
   path (conversion of lists, ints, float32) stays cheap.
"""

import hashlib
from pathlib import Path

import numpy as np
from numba import njit, types
from numba.core import caching, cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

# argument types of the entries: read-only 'A' float64 vectors accept every float64
# vector (C, strided, read-only, writable) without a copy; outputs are writable C
IN = types.Array(types.float64, 1, "A", readonly=True)
OUT = types.float64[::1]
OUT2 = types.float64[:, ::1]
BUF = types.float64[::1]
INT_OUT = types.int64[::1]


def _view_codegen(dims_ty, as_int):
    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        if isinstance(sig.args[2], types.Integer):
            raw = [args[2]]
        else:
            raw = cgutils.unpack_tuple(builder, args[2], len(dims_ty))
        dims = [context.cast(builder, x, t, types.intp) for x, t in zip(raw, dims_ty, strict=True)]
        first = context.cast(builder, args[1], sig.args[1], types.intp)
        strides = [None] * len(dims)
        acc = src.itemsize
        for k in range(len(dims) - 1, -1, -1):
            strides[k] = acc
            acc = builder.mul(acc, dims[k])
        out = make_array(sig.return_type)(context, builder)
        data = builder.gep(src.data, [first])
        if as_int:
            data = builder.bitcast(data, out.data.type)
        populate_array(
            out,
            data=data,
            shape=dims,
            strides=strides,
            itemsize=src.itemsize,
            meminfo=src.meminfo,
            parent=src.parent,
        )
        return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

    return codegen


def _dims(buf, start, shape):
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"):
        return None
    if not isinstance(start, types.Integer):
        return None
    if isinstance(shape, types.Integer):
        return (shape,)
    if isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer) for t in shape):
        return tuple(shape)
    return None


@intrinsic
def block(typingctx, buf, start, shape):
    """``buf[start : start + prod(shape)].reshape(shape)``, a C-contiguous view.

    ``buf``: a 1-D C-contiguous array; ``start``: an integer; ``shape``: an integer
    or a tuple of integers.  No bounds check: the layouts are built together with
    the buffers they describe (``loopdyn.model.layout``).
    """
    dims_ty = _dims(buf, start, shape)
    if dims_ty is None:
        return None
    retty = buf.copy(ndim=len(dims_ty), layout="C")
    return retty(buf, start, shape), _view_codegen(dims_ty, False)


@intrinsic
def block_int(typingctx, buf, start, shape):
    """Like ``block`` on a float64 buffer, its items read as int64 (same 8 bytes)."""
    dims_ty = _dims(buf, start, shape)
    if dims_ty is None or buf.dtype != types.float64:
        return None
    retty = types.Array(types.int64, len(dims_ty), "C", readonly=not buf.mutable)
    return retty(buf, start, shape), _view_codegen(dims_ty, True)


@intrinsic
def as_input(typingctx, x):
    """``x`` typed as a read-only 'A' array (the type of the entries' inputs), no copy.

    Kernels that take user inputs (q, v, τ, fext) are compiled for that type; a
    workspace array handed to them internally goes through ``as_input`` so that
    every kernel keeps one compiled specialisation.
    """
    if not isinstance(x, types.Array):
        return None
    retty = types.Array(x.dtype, x.ndim, "A", readonly=True)

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        out = make_array(sig.return_type)(context, builder)
        for name in ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "strides"):
            setattr(out, name, getattr(src, name))
        return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

    return retty(x), codegen


@intrinsic
def unliteral(typingctx, x):
    """``x`` typed as a plain value, not a literal: ``f(m, d, 0)`` and ``f(m, d, i)``
    (or ``True`` and a runtime flag) then reach one compiled specialisation of ``f``
    instead of one per constant."""
    if not isinstance(x, (types.Integer, types.Boolean)):
        return None
    retty = types.unliteral(x)

    def codegen(context, builder, sig, args):
        return context.cast(builder, args[0], sig.args[0], sig.return_type)

    return retty(x), codegen


def entry(fn):
    """Compile an entry kernel: cached on disk, without numba's reference counting."""
    return njit(cache=True, _nrt=False)(fn)


_PACKAGE = Path(__file__).resolve().parents[1]  # src/loopdyn


def _package_stamp():
    """sha256 of every loopdyn source file (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class _PackageStamp:
    """Mixin: the cache of a loopdyn function is valid for this exact package source."""

    stamp = None

    def get_source_stamp(self):
        if _PackageStamp.stamp is None:
            _PackageStamp.stamp = _package_stamp()
        return _PackageStamp.stamp

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            Path(py_file).resolve().relative_to(_PACKAGE)
        except ValueError:
            return None  # not loopdyn's: numba's own locators apply
        return super().from_function(py_func, py_file)


class _UserProvided(_PackageStamp, caching.UserProvidedCacheLocator):
    pass


class _InTree(_PackageStamp, caching.InTreeCacheLocator):
    pass


class _UserWide(_PackageStamp, caching.UserWideCacheLocator):
    pass


def install_cache_locator():
    """Put loopdyn's cache locators first in numba's list (idempotent); called by
    ``loopdyn/__init__.py`` before any kernel is defined."""
    classes = caching.CacheImpl._locator_classes
    if classes and classes[0] is _UserProvided:
        return
    classes[:0] = [_UserProvided, _InTree, _UserWide]


def _refuse(*args, **kws):
    raise TypeError("the arguments do not match the compiled entry's signature")


def _no_conversion(*args, **kws):
    return False


def _samples(ndim):
    """float64 arrays of ``ndim`` dimensions of every kind an input accepts: C-contiguous
    and strided, writable and read-only (their conversions are registered once)."""
    out = []
    for step in (1, 2):
        for writable in (True, False):
            x = np.zeros((4,) * ndim)[(slice(None, None, step),) * ndim]
            x.setflags(write=writable)
            out.append(x)
    return out


class Entry:
    """A kernel compiled for one signature at its first call, then closed to compilation.

    ``Entry(kernel, restype, *argtypes)``; ``entry.call(*args)`` runs it.  Arguments
    of another type raise ``TypeError`` (cheaply, see the module docstring): callers
    catch it and take their checked path, which converts or explains.  One signature
    also means one compiled specialisation of every kernel below the entry.
    """

    __slots__ = ("call", "compiled", "kernel", "signature")

    def __init__(self, kernel, restype, *argtypes):
        self.kernel = kernel
        self.signature = restype(*argtypes)
        self.compiled = False
        self.call = self._first

    def compile(self):
        """Compile (or load from the disk cache) now; returns the dispatcher."""
        k = self.kernel
        if not self.compiled:
            k.compile(self.signature)
            k.disable_compile()
            # register the accepted vector conversions with numba's type manager
            # (global, per pair of types), then make refusals cheap on this dispatcher
            formal = self.signature.args
            for pos, t in enumerate(formal):
                if isinstance(t, types.Array) and t.layout == "A" and not t.mutable:
                    for x in _samples(t.ndim):
                        actual = list(formal)
                        actual[pos] = k.typeof_pyval(x)
                        k.typingctx.install_possible_conversions(actual, formal)
            k._search_new_conversions = _no_conversion
            k._explain_matching_error = _refuse
            self.call = k
            self.compiled = True
        return k

    def _first(self, *args):
        return self.compile()(*args)


# an input (fext) of two dimensions
IN2 = types.Array(types.float64, 2, "A", readonly=True)

__all__ = [
    "BUF",
    "IN",
    "IN2",
    "INT_OUT",
    "OUT",
    "OUT2",
    "Entry",
    "as_input",
    "block",
    "block_int",
    "entry",
    "install_cache_locator",
    "unliteral",
]
