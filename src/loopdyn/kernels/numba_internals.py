"""The parts of numba loopdyn uses beyond its documented API, in one place.

``tests/test_numba_internals.py`` checks each of them against the installed numba
and fails loudly if a release changes one.  Each item says what it is for and what it
was measured to buy: items 1-8 are what the kernel convention (views of one buffer,
no reference counting, one compiled signature, methods called at an address) stands
on, and numba's public API offers no equivalent; item 9 only shortens compiling and
was measured again on 2026-11-29, when a former item that no longer paid was removed
(end of this list).

1. ``block`` (an ``@intrinsic`` built with numba's array helpers ``make_array`` /
   ``populate_array``): a C-contiguous view of a slice of a 1-D buffer, optionally
   reinterpreting its 8-byte items as int64.  numba's own ``buf[a:b].reshape(shape)``
   calls a C helper (~20 ns) per view; an entry rebuilds ~50 views per call.  A
   function that *returns* such a view is ``inline="always"``: numba compiles a jitted
   callee once, with the reference-counting flag of its first caller (``_nrt`` is
   inherited) or its own explicit one, and every later caller reuses that code; a view
   returned by code compiled without counting carries no reference, and a caller
   compiled with counting releases it (a double free: a compiled loop in a benchmark
   calling ``sslm.plan_views`` after an entry had compiled it aborted the process).
   Inlined, the view is made with the caller's own flag (test).
2. ``entry``: an entry kernel is compiled with the option ``_nrt=False`` (no reference
   counting: it only takes views of buffers owned by the caller and allocates nothing;
   with counting, every view costs atomic updates).  A numba that refuses the option
   raises here, at import, instead of silently compiling something slower.  Its
   callees inherit the flag where an entry compiles them first; ``counted`` (the
   option ``_nrt=True``) keeps it for a callee that allocates, which would otherwise
   never free what it allocates (test).  The simulation loop's right-hand side
   (``sim.compiled._rhs``, called at every stage) is an ``entry`` too.
3. ``as_input``: an ``@intrinsic`` retyping an array as read-only 'A' without a copy.
   ``row``: row i of a 2-D C-contiguous array as a 1-D view that holds no reference
   (a null ``meminfo``: numba's reference-counting calls on it return at once).  In a
   compiled loop over the rows of a batch, ``Q[i]`` costs an atomic increment and
   decrement of Q's reference count per row and array; with two threads the counts of
   the shared batch arrays move between the cores' caches.  The four-bar SLM batch
   (one thread) took 0.82 µs per state with ``Q[i]`` … ``LAM[i]``, 0.72 µs with ``row``
   (``benchmarks/bench_scale.py --batches``, "batch 1 thread").  The view is borrowed:
   it must not outlive the array (the loops only pass it to the kernels they call).
4. ``unliteral``: an ``@intrinsic`` that drops the literal type of a constant argument.
5. ``install_cache_locator``: numba keys a function's disk cache on its own source
   file only, so a kernel that calls a kernel of another file kept running the old
   callee's code after an edit (or a ``git pull``) of that file.  loopdyn's functions
   get cache locators (numba's ``caching`` locator classes, first in its list) whose
   source stamp is a hash of every loopdyn source file: any change recompiles.  Their
   checks (is the file loopdyn's, is the cache folder writable) run once per file and
   folder, not per kernel (`import loopdyn` defines ~290 kernels: 0.03 s less CPU).
6. ``Entry.is_cached`` reads the dispatcher's cache index (so that the CLI can say
   "compiling kernels" before a long first call).
7. ``Entry``: a kernel compiled for exactly one signature and then closed to
   compilation.  numba's dispatcher checks the argument types in C.  ``Entry`` first
   lets numba register the conversions loopdyn accepts as they are (writable,
   read-only and strided float64 vectors to the read-only 'A' arrays of the
   signature).  For any other argument types the dispatcher, closed to compilation,
   calls ``_search_new_conversions`` (replaced on that one dispatcher by a
   ``return False``) and then its *object-mode fallback* if it has one, with the
   original arguments, from C.  ``Entry`` installs as that fallback (the dispatcher's
   ``_insert(..., objectmode=True)``) a builtin function made with CPython's public
   ``PyCFunction_NewEx`` whose C function is ``PyObject_Call`` itself: calling it
   calls the Python function it wraps (``Entry._retry``), which converts the inputs
   (lists, tuples, ints, float32, columns) to float64 vectors once and calls the
   entry again.  So a converted input costs one failed type match, the fallback's
   call and one conversion (+0.9..1.2 µs on the four-bar, ``benchmarks/bench_core.py``
   section 2), no exception, and the matching path nothing.  Arguments
   that cannot be converted raise ``TypeError`` (callers take their checked path,
   which explains).
8. ``address_of`` / ``Entry.address`` / ``entry_pointer`` and ``call_at``, ``call_at_planned``,
   ``call_controller_at``: the native address of a dispatcher's compiled function (its
   ``CompileResult``'s library, numba's own calling convention) and intrinsics that
   call such an address from compiled code.  A
   compiled loop that takes a method as a runtime address (the batches, the
   simulation loop) is compiled once for every method, and does not link and
   re-optimise the method's kernels into itself (linking them cost 5-100 s of
   compilation per method and per loop on an empty cache).
9. ``install_call_type_memo``: numba types every call of a builtin, operator or
   ``@overload``ed function (``types.BaseFunction.get_call_type``: each ``x * y`` of
   floats) by trying each of its typing templates in turn, numpy's array-operator
   templates raising and catching an error for scalars, and does it again for every
   operator it lowers; nothing is remembered between calls.  The result is a function
   of the function type (its templates), the typing context and the argument types;
   the memo returns it (and restores the implementation key numba records as the
   side effect of typing a call) on the second and later calls.  97 % of these calls
   (7754 of 8026) repeat an earlier one in the four-bar's cold start: import, build and
   first call on an empty cache 28.1, 32.7, 30.0 s -> 21.0, 23.2, 25.5 s (alternated
   processes, 2-core development machine).  Measured again with numba 0.68.1 (load
   ~8 on 2 cores, so CPU time, not wall): with the memo off, 12,775 of the 13,060
   outermost calls repeat an earlier one and take 4.5 s of the 30.1 s of CPU
   (``get_call_type`` timed per call); whole cold starts 21.3, 25.3 s CPU with the
   memo, 24.6, 25.5 s without.  Kept.

Removed: ``install_fast_flag_comparisons`` (formerly item 9: ``TargetConfig.__hash__``
/ ``__eq__`` of numba's compiler ``Flags`` replaced by cached ones; worth 36-38 ->
32-35 s when it came, before the memo of item 9).  With the memo, numba hashes Flags
3,240 times and compares them 588 times in the four-bar's cold start, 29 µs and 48 µs
each: 0.09 s of 23.1 s of CPU, 0.4 % (the patch made a hash 0.1 µs and left unequal
comparisons to numba).  Not worth a patch of a private numba class.
"""

import ctypes
import functools
import hashlib
from pathlib import Path

import numpy as np
from numba import njit, types
from numba.core import caching, cgutils
from numba.core.imputils import impl_ret_borrowed, impl_ret_untracked
from numba.core.types import functions
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
def row(typingctx, A, i):
    """``A[i]`` of a 2-D C-contiguous array, a 1-D view holding no reference to ``A``
    (module docstring, item 3): for loops over the rows of arrays that outlive them.
    No bounds check (nor negative indices)."""
    if not (isinstance(A, types.Array) and A.ndim == 2 and A.layout == "C"):
        return None
    if not isinstance(i, types.Integer):
        return None
    retty = A.copy(ndim=1, layout="C")

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        ncol = builder.extract_value(src.shape, 1)
        k = context.cast(builder, args[1], sig.args[1], types.intp)
        out = make_array(retty)(context, builder)
        populate_array(
            out,
            data=builder.gep(src.data, [builder.mul(k, ncol)]),
            shape=[ncol],
            strides=[src.itemsize],
            itemsize=src.itemsize,
            meminfo=cgutils.get_null_value(out.meminfo.type),
            parent=cgutils.get_null_value(out.parent.type),
        )
        return impl_ret_untracked(context, builder, retty, out._getvalue())

    return retty(A, i), codegen


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


# the tier policy (``loopdyn.kernels.tiers``, which installs itself here when imported):
# which tier runs an ``Entry``; None: compiled
_tier_policy = None


def install_tier_policy(policy):
    """``Entry.callable`` and ``Entry.eager`` ask ``policy`` (``entry_callable(e)``,
    ``eager_entry(e)``) from now on."""
    global _tier_policy
    _tier_policy = policy


def entry(fn):
    """Compile an entry kernel: cached on disk, without numba's reference counting."""
    return njit(cache=True, _nrt=False)(fn)


def counted(fn):
    """Compile a kernel that allocates with numba's reference counting whoever calls it
    first: a callee inherits its first caller's flag, and one first compiled inside an
    uncounted caller (an ``entry``) would never free what it allocates."""
    return njit(cache=True, _nrt=True)(fn)


_PACKAGE = Path(__file__).resolve().parents[1]  # src/loopdyn


def _package_stamp():
    """sha256 of every loopdyn source file (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


_WRITABLE = set()  # cache folders numba's check found writable in this process


@functools.cache
def _in_package(py_file):
    """Whether source file ``py_file`` lies under ``src/loopdyn`` (resolved once per
    file: the ~290 kernels defined at import live in ~40 files)."""
    try:
        Path(py_file).resolve().relative_to(_PACKAGE)
    except ValueError:
        return False
    return True


class _PackageStamp:
    """Mixin: the cache of a loopdyn function is valid for this exact package source."""

    stamp = None

    def get_source_stamp(self):
        if _PackageStamp.stamp is None:
            _PackageStamp.stamp = _package_stamp()
        return _PackageStamp.stamp

    def ensure_cache_path(self):
        # numba makes the folder and writes a temporary file in it for each dispatcher;
        # once per folder and process is the same check
        path = self.get_cache_path()
        if path not in _WRITABLE:
            super().ensure_cache_path()
            _WRITABLE.add(path)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _in_package(py_file):
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


def install_call_type_memo():
    """Memoise ``types.BaseFunction.get_call_type`` (idempotent; see the module
    docstring, item 9).  A call that raises (no template fits, or numba asks for a
    literal argument) is not remembered: it raises again the next time."""
    cls = functions.BaseFunction
    if getattr(cls.get_call_type, "_loopdyn", False):
        return
    numba_get_call_type = cls.get_call_type
    memo = {}

    def get_call_type(self, context, args, kws):
        try:
            key = (self, context, args, tuple(kws.items()) if kws else ())
            hit = memo.get(key)
        except TypeError:  # an unhashable argument type: numba's own path
            return numba_get_call_type(self, context, args, kws)
        if hit is not None:
            sig, impl_key = hit
            self._impl_keys[sig.args] = impl_key  # numba's side effect of typing the call
            return sig
        sig = numba_get_call_type(self, context, args, kws)
        if sig is not None:
            memo[key] = (sig, self._impl_keys[sig.args])
        return sig

    get_call_type._loopdyn = True
    get_call_type.memo = memo
    get_call_type.numba = numba_get_call_type
    cls.get_call_type = get_call_type


def _no_conversion(*args, **kws):
    return False


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``."""

    _fields_ = (
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    )


_METH_VARARGS_KEYWORDS = 0x0001 | 0x0002
# one method definition for every forwarder (it must outlive them: module lifetime)
_FORWARD = _MethodDef(
    b"loopdyn_entry_retry",
    ctypes.cast(ctypes.pythonapi.PyObject_Call, ctypes.c_void_p).value,
    _METH_VARARGS_KEYWORDS,
    None,
)
_new_cfunction = ctypes.pythonapi.PyCFunction_NewEx
_new_cfunction.restype = ctypes.py_object
_new_cfunction.argtypes = (ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)


def builtin_forwarder(fn):
    """A ``builtin_function_or_method`` (what numba's dispatcher accepts as a compiled
    definition) that calls ``fn(*args, **kws)``: its C function is ``PyObject_Call``
    with ``fn`` as its ``self``."""
    return _new_cfunction(ctypes.addressof(_FORWARD), fn, None)


_F64 = np.dtype(np.float64)
_ND = np.ndarray


def as_float64(x, ndim):
    """``x`` (array, list, tuple, number; integer, boolean or floating) as a float64
    array, a vector if ``ndim == 1`` (a column or row is flattened); ``TypeError``
    for anything else (complex, strings, objects)."""
    if type(x) is _ND:
        if x.dtype.kind not in "fiub":
            raise TypeError(f"not real numbers: {x.dtype}")
        a = x.astype(_F64, copy=False)
    else:
        try:
            a = np.array(x, _F64)
        except ValueError as e:
            raise TypeError(str(e)) from None
    return a.reshape(-1) if ndim == 1 and a.ndim != 1 else a


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


def _retry_function(e):
    """numba's fallback for ``Entry`` ``e`` on arguments of no compiled type: its inputs
    as float64 (``as_float64``), then the entry once more; ``TypeError`` if no input
    needed a conversion (another argument is wrong).  Written out for the entry's
    arity (as ``collections.namedtuple`` writes its classes): a loop over the
    arguments would cost as much again as the conversion."""
    names = [f"a{k}" for k in range(len(e.signature.args))]
    new = list(names)
    lines = []
    for k, ndim in e.inputs:
        new[k] = f"b{k}"
        # a float64 array of the right shape as it is, another real array of that shape
        # converted here (astype), anything else by as_float64 (lists, columns, errors)
        lines += [
            f"    if type(a{k}) is _ND and a{k}.ndim == {ndim}:",
            f"        b{k} = a{k} if a{k}.dtype is _F64 else (a{k}.astype(_F64) if"
            f" a{k}.dtype.kind in 'fiub' else as_float64(a{k}, {ndim}))",
            "    else:",
            f"        b{k} = as_float64(a{k}, {ndim})",
        ]
    same = " and ".join(f"b{k} is a{k}" for k, _ in e.inputs) or "True"
    src = "\n".join(
        [
            f"def retry({', '.join(names)}):",
            *lines,
            f"    if {same}:",
            "        raise TypeError(message)",
            f"    return kernel({', '.join(new)})",
        ]
    )
    scope = {
        "_ND": _ND,
        "_F64": _F64,
        "as_float64": as_float64,
        "kernel": e.kernel,
        "message": f"{e.kernel.__name__}: the arguments match no compiled signature {e.signature}",
    }
    exec(src, scope)
    return scope["retry"]


class Entry:
    """A kernel compiled for one signature at its first call, then closed to compilation.

    ``Entry(kernel, restype, *argtypes)``; ``entry.call(*args)`` runs it.  Inputs
    (the read-only 'A' arrays of the signature) of another type are converted to
    float64 once (``as_float64``, from numba's dispatcher: see the module
    docstring); what cannot be converted raises ``TypeError``, which callers catch
    to take their checked path.  One signature also means one compiled
    specialisation of every kernel below the entry.
    """

    __slots__ = (
        "_eager",
        "_pointer",
        "call",
        "compiled",
        "forwarder",
        "inputs",
        "kernel",
        "name",
        "signature",
    )

    def __init__(self, kernel, restype, *argtypes):
        self.kernel = kernel
        self.signature = restype(*argtypes)
        self.compiled = False
        self._pointer = None  # entry_pointer's answer, once asked
        self.call = self._first
        # (position, ndim) of the inputs, the arguments converted on a type mismatch
        self.inputs = tuple(
            (k, t.ndim)
            for k, t in enumerate(argtypes)
            if isinstance(t, types.Array) and t.layout == "A" and not t.mutable
        )
        self.forwarder = None
        self._eager = None
        self.name = None  # qualified_name()

    def callable(self):
        """What runs this entry now: the compiled dispatcher (compiled, or loaded from the
        disk cache, at this first use) or, where the tier policy says so, its eager twin
        (``loopdyn.kernels.tiers.entry_callable``; without a policy installed: compiled)."""
        if _tier_policy is None:
            return self.call if self.compiled else self.build()
        return _tier_policy.entry_callable(self)

    def qualified_name(self):
        """``module:attribute`` naming this entry in its kernel's module (None if none
        does): what a background build imports."""
        if self.name is None:
            import sys

            module = self.kernel.py_func.__module__
            for k, v in vars(sys.modules[module]).items():
                if v is self:
                    self.name = f"{module}:{k}"
                    break
        return self.name

    def eager(self):
        """The entry's eager twin (``loopdyn.kernels.tiers.eager_entry``), made once."""
        if self._eager is None:
            self._eager = _tier_policy.eager_entry(self)
        return self._eager

    def compile(self):
        """What runs this entry now: ``callable()`` (the methods' binders bind it)."""
        return self.callable()

    def build(self):
        """Compile (or load from the disk cache) now, whatever the tier policy; returns
        the dispatcher."""
        k = self.kernel
        if not self.compiled:
            k.compile(self.signature)
            k.disable_compile()
            # register the accepted vector conversions with numba's type manager
            # (global, per pair of types)
            formal = self.signature.args
            for pos, ndim in self.inputs:
                for x in _samples(ndim):
                    actual = list(formal)
                    actual[pos] = k.typeof_pyval(x)
                    k.typingctx.install_possible_conversions(actual, formal)
            # other types: no search (numba's types every argument in Python), then the
            # fallback; the dispatcher borrows the fallback's reference: kept here
            k._search_new_conversions = _no_conversion
            self.forwarder = builtin_forwarder(_retry_function(self))
            k._insert([types.pyobject._code] * len(formal), self.forwarder, objectmode=True)
            self.call = k
            self.compiled = True
        return k

    def _first(self, *args):
        return self.callable()(*args)

    def is_cached(self):
        """True if this entry's compiled code is in numba's disk cache for the current
        package source (its first call then loads instead of compiling)."""
        if self.compiled:
            return True
        try:
            return bool(self.kernel._cache._cache_file._load_index())
        except (AttributeError, OSError, EOFError, ValueError):  # pragma: no cover
            return False

    def address(self):
        """The native address of the compiled entry (compiling or loading it first), for
        ``call_at`` / ``call_at_planned`` in compiled code.  Valid while ``self`` lives
        (the dispatcher keeps its code)."""
        return address_of(self.build(), self.signature.args)


def address_of(dispatcher, argtypes):
    """The native address of ``dispatcher``'s code for ``argtypes`` (compiled or loaded
    already), numba's own calling convention: for the ``call_*`` intrinsics below."""
    cres = dispatcher.overloads[tuple(argtypes)]
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)


def _call_codegen(restype, formal):
    """Code of a call to the address in the first argument, a function compiled by numba
    for the argument types ``formal`` returning ``restype``; a numba exception raised
    there propagates."""

    def codegen(context, builder, sig, args):
        conv = context.call_conv
        fnty = conv.get_function_type(restype, formal)
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        vals = [
            context.cast(builder, a, t, f)
            for a, t, f in zip(args[1:], sig.args[1:], formal, strict=True)
        ]
        status, out = conv.call_function(builder, fn, restype, formal, vals)
        with builder.if_then(status.is_error, likely=False):
            conv.return_status_propagate(builder, status)
        return out

    return codegen


def _call_type(restype, addr, args, formal):
    """The signature of a ``call_*`` intrinsic on ``args`` (None: they do not fit
    ``formal``, the argument types of the function at the address)."""
    if not isinstance(addr, types.Integer) or len(args) != len(formal):
        return None
    for a, f in zip(args, formal, strict=True):
        if isinstance(f, types.Array):  # same data model: same dtype and ndim
            if not (isinstance(a, types.Array) and a.dtype == f.dtype and a.ndim == f.ndim):
                return None
            if (f.mutable and not a.mutable) or (f.layout == "C" and a.layout != "C"):
                return None
        elif not isinstance(a, type(f)):  # a number of the same kind (cast)
            return None
    return restype(addr, *args)


_DENSE = (BUF, IN, IN, IN, OUT, OUT)
_PLANNED = (BUF, BUF, IN, IN, IN, OUT, OUT)
VEC = types.Array(types.float64, 1, "A")
# a compiled controller's adapter: (t, q, v, τ out, actuated coordinates) -> τ usable
CONTROLLER = (types.float64, VEC, VEC, OUT, INT_OUT)


def entry_pointer(e):
    """(``e.address()``, 1 if ``e`` takes a plan buffer else 0) for ``call_at`` /
    ``call_at_planned``; ``TypeError`` if ``e``'s signature is neither of theirs (a
    call at the address would then pass the wrong arguments).  Kept on ``e`` after the
    first call: llvmlite's symbol lookup cost ~0.15 ms on cold caches, in every batch and
    compiled simulation."""
    if e._pointer is None:
        sig = e.signature
        for planned, formal in ((0, _DENSE), (1, _PLANNED)):
            if sig.return_type == types.float64 and tuple(sig.args) == formal:
                e._pointer = (e.address(), planned)
                return e._pointer
        raise TypeError(f"{e.kernel.__name__}: {sig} is not a method entry's signature")
    return e._pointer


@intrinsic
def call_at(typingctx, addr, ctx, q, v, tau, qdd, lam):
    """``entry(ctx, q, v, tau, qdd, lam)`` of the entry whose ``Entry.address`` is
    ``addr`` (a method without a plan buffer), from compiled code."""
    sig = _call_type(types.float64, addr, (ctx, q, v, tau, qdd, lam), _DENSE)
    return None if sig is None else (sig, _call_codegen(types.float64, _DENSE))


@intrinsic
def call_at_planned(typingctx, addr, ctx, pb, q, v, tau, qdd, lam):
    """``entry(ctx, pb, q, v, tau, qdd, lam)`` of the entry at ``addr`` (a method with
    the plan buffer ``pb``), from compiled code."""
    sig = _call_type(types.float64, addr, (ctx, pb, q, v, tau, qdd, lam), _PLANNED)
    return None if sig is None else (sig, _call_codegen(types.float64, _PLANNED))


@intrinsic
def call_controller_at(typingctx, addr, t, q, v, out, act):
    """``adapter(t, q, v, out, act)`` -> bool of a function compiled for ``CONTROLLER``
    at ``addr`` (``address_of``), from compiled code."""
    sig = _call_type(types.boolean, addr, (t, q, v, out, act), CONTROLLER)
    return None if sig is None else (sig, _call_codegen(types.boolean, CONTROLLER))


# the compiled simulation loop's checks of redundant closure rows, compiled only for a
# model that has some (they cost ~4 s of the loop's cold compile): (workspace, dropped
# rows, model size, q, v, q̈) -> the dropped rows hold, and (workspace, dropped rows, λ)
# -> λ over every row
DROPPED_CHECK = (BUF, INT_OUT, types.float64, IN, IN, IN)
DROPPED_LAMBDA = (BUF, INT_OUT, OUT)


@intrinsic
def call_check_at(typingctx, addr, ctx, dropped, size, q, v, qdd):
    """``check(ctx, dropped, size, q, v, qdd)`` -> bool of a function compiled for
    ``DROPPED_CHECK`` at ``addr`` (``address_of``), from compiled code."""
    sig = _call_type(types.boolean, addr, (ctx, dropped, size, q, v, qdd), DROPPED_CHECK)
    return None if sig is None else (sig, _call_codegen(types.boolean, DROPPED_CHECK))


@intrinsic
def call_lambda_at(typingctx, addr, ctx, dropped, lam):
    """``f(ctx, dropped, lam)`` -> bool of a function compiled for ``DROPPED_LAMBDA`` at
    ``addr``, from compiled code."""
    sig = _call_type(types.boolean, addr, (ctx, dropped, lam), DROPPED_LAMBDA)
    return None if sig is None else (sig, _call_codegen(types.boolean, DROPPED_LAMBDA))


# an input (fext) of two dimensions
IN2 = types.Array(types.float64, 2, "A", readonly=True)

__all__ = [
    "BUF",
    "CONTROLLER",
    "DROPPED_CHECK",
    "DROPPED_LAMBDA",
    "IN",
    "IN2",
    "INT_OUT",
    "OUT",
    "OUT2",
    "Entry",
    "address_of",
    "as_float64",
    "as_input",
    "block",
    "block_int",
    "builtin_forwarder",
    "call_at",
    "call_at_planned",
    "call_check_at",
    "call_controller_at",
    "call_lambda_at",
    "entry",
    "entry_pointer",
    "install_cache_locator",
    "install_call_type_memo",
    "install_tier_policy",
    "row",
    "unliteral",
]
