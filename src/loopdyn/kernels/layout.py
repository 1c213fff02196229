"""Packed storage: many named arrays carved out of one contiguous buffer.

A numba kernel pays ~0.1 µs per array argument at every call.  The model's
parameters and the data's workspaces are therefore stored in a few buffers (one
float64 and one int64 each), with their familiar names as numpy views for
Python code; entry kernels take the buffers plus a small int64 layout array and
rebuild the same views inside the compiled code (``model_views``,
``tree_views``, ...) with :func:`block`, which costs nothing but pointer
arithmetic.
"""

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array


def entry_kernel(fn):
    """Compile an entry kernel: cached, and without numba's reference counting.

    An entry kernel only rebuilds views of buffers owned by the caller and calls
    the compiled kernels, which allocate nothing; numba's runtime would otherwise
    count references on every view (~40 ns each, ~1 µs for a multiplier method's
    29 views per call).  ``_nrt=False`` is a numba option outside its public API:
    if a numba release refuses it, the kernel is compiled the ordinary way.
    """
    try:
        return njit(cache=True, _nrt=False)(fn)
    except (TypeError, KeyError, ValueError):  # pragma: no cover - numba without the option
        return njit(cache=True)(fn)


@intrinsic
def block(typingctx, buf, start, shape):
    """``buf[start : start + prod(shape)].reshape(shape)`` as a C-contiguous view.

    ``buf`` is a 1-D C-contiguous array, ``start`` an integer and ``shape`` an
    integer or a tuple of integers.  numba's ``reshape`` calls a C helper
    (``numba_attempt_nocopy_reshape``, ~20 ns) even for a contiguous slice; an
    entry kernel rebuilds up to 29 views per call, so this builds the array
    structure directly: data pointer ``buf.data + start``, C strides, and
    ``buf``'s memory owner (a view, like a slice).  No bounds check: the layouts
    in this module are built together with the buffers they describe.
    """
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"):
        return None
    if not isinstance(start, types.Integer):
        return None
    if isinstance(shape, types.Integer):
        dims_ty = (shape,)
    elif isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer) for t in shape):
        dims_ty = tuple(shape)
    else:
        return None
    retty = buf.copy(ndim=len(dims_ty), layout="C")

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
        populate_array(
            out,
            data=builder.gep(src.data, [first]),
            shape=dims,
            strides=strides,
            itemsize=src.itemsize,
            meminfo=src.meminfo,
            parent=src.parent,
        )
        return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

    return retty(buf, start, shape), codegen


I1, F1, F2 = types.int64[::1], types.float64[::1], types.float64[:, ::1]


class Entry:
    """A packed entry kernel compiled for one signature, typed by numba's dispatcher.

    At the first call the kernel is compiled (or loaded from the disk cache) for
    ``restype(*argtypes)`` only (a ``Data``'s context buffers, then writable
    C-contiguous arrays: ``I1``, ``F1``, ``F2``) and compilation is disabled.
    numba's dispatcher then checks every argument's type in C (~25 ns each), and
    anything else (int or float32 arrays, strided or read-only arrays, lists)
    raises ``TypeError`` instead of compiling a variant: callers catch it and take
    their checked path, which converts the inputs.  One signature also means one
    compiled specialisation of every kernel below the entry.
    """

    __slots__ = ("call", "kernel", "signature")

    def __init__(self, kernel, restype, *argtypes):
        self.kernel = kernel
        self.signature = restype(*argtypes)
        self.call = self._first

    def _first(self, *args):
        self.kernel.compile(self.signature)
        self.kernel.disable_compile()
        self.call = self.kernel
        return self.kernel(*args)


class Arena:
    """One buffer of ``dtype`` holding the arrays ``specs = [(name, shape), ...]`` in order.

    ``views[name]`` is the array; ``offsets`` (len(specs) + 1) the start of each
    (relative to ``buf``, which starts ``lead`` entries into ``whole``).
    """

    def __init__(self, dtype, specs, lead=0):
        sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape in specs]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # ``lead`` free entries before the arrays: ``whole`` is the buffer, ``buf`` the arrays
        self.whole = np.zeros(lead + int(self.offsets[-1]), dtype=dtype)
        self.buf = self.whole[lead:]
        self.views = {
            name: self.buf[self.offsets[k] : self.offsets[k + 1]].reshape(shape)
            for k, (name, shape) in enumerate(specs)
        }


# model arenas: int (topo, cl_body, row_int), float (jgeom, inertia, gravity, cl_X, row_vec);
# model layout: [nb, nc, m, 3 int offsets, 5 float offsets, nq, nv]
MODEL_INT = ("topo", "cl_body", "row_int")
MODEL_FLOAT = ("jgeom", "inertia", "gravity", "cl_X", "row_vec")


def model_specs(nb, nc, m):
    ints = [("topo", (nb, 6)), ("cl_body", (nc, 2)), ("row_int", (m, 2))]
    floats = [
        ("jgeom", (nb, 6, 3)),
        ("inertia", (nb, 6, 6)),
        ("gravity", (3,)),
        ("cl_X", (nc, 2, 4, 3)),
        ("row_vec", (m, 2, 3)),
    ]
    return ints, floats


@njit(cache=True, inline="always")
def model_views(lay, mi, mf):
    """(topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec) from the model buffers."""
    nb, nc, m = lay[0], lay[1], lay[2]
    topo = block(mi, lay[3], (nb, 6))
    cl_body = block(mi, lay[4], (nc, 2))
    row_int = block(mi, lay[5], (m, 2))
    jgeom = block(mf, lay[6], (nb, 6, 3))
    inertia = block(mf, lay[7], (nb, 6, 6))
    gravity = block(mf, lay[8], 3)
    cl_X = block(mf, lay[9], (nc, 2, 4, 3))
    row_vec = block(mf, lay[10], (m, 2, 3))
    return topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec


@njit(cache=True, inline="always")
def model_sizes(lay):
    """(nq, nv) from the model layout."""
    return lay[11], lay[12]


# A Data's context: everything an entry kernel reads besides its inputs, in two
# buffers, so that a fast entry (``loopdyn.tree``) takes two arguments for it:
#   ictx = [len(mlay), len(mi), len(dlay), len(mf) | mlay | mi | dlay]   (int64)
#   fctx = [mf (a copy of the model's floats) | df (the Data's workspaces)]  (float64)
CONTEXT_HEADER = 4


def context_ints(model, dlay):
    """``ictx`` for a Data of ``model`` with data layout ``dlay``."""
    head = [model.mlay.size, model.mi.size, dlay.size, model.mf.size]
    return np.concatenate([head, model.mlay, model.mi, dlay]).astype(np.int64)


@njit(cache=True, inline="always")
def context_buffers(ictx, fctx):
    """(mlay, mi, mf, dlay, df): the entry kernels' leading arguments from a context."""
    a, b, c, f = ictx[0], ictx[1], ictx[2], ictx[3]
    h = CONTEXT_HEADER
    mlay = block(ictx, h, a)
    mi = block(ictx, h + a, b)
    dlay = block(ictx, h + a + b, c)
    return mlay, mi, block(fctx, 0, f), dlay, block(fctx, f, fctx.shape[0] - f)


# data arena (float): tree workspaces, then closure and multiplier-method workspaces.
# data layout: [nb, nc1, m1, m, nv, 21 float offsets]
DATA_FLOAT = (
    "Xrel", "Xw", "S", "vec6", "mat6", "tmp33", "cw", "rw", "zeros_nv", "Phi", "J",
    "gamma", "M", "phi", "K", "rhs", "Y", "Sm", "x", "fext", "lam",
)  # fmt: skip


def data_specs(nb, nc1, m1, m, nv):
    """Data arrays; the dense method blocks (M, K, Y: O(n²)) are empty for a tree
    (m = 0), whose algorithms need O(n) memory only; the closure views are then
    never built (forward dynamics of a tree goes straight to ABA)."""
    nd = nv if m > 0 else 0
    return [
        ("Xrel", (nb, 4, 3)),
        ("Xw", (nb, 4, 3)),
        ("S", (nb, 6, 6)),
        ("vec6", (nb, 10, 6)),
        ("mat6", (nb, 4, 6, 6)),
        ("tmp33", (3, 3, 3)),
        ("cw", (nc1, 16, 3)),
        ("rw", (m1, 3, 3)),
        ("zeros_nv", (nv,)),
        ("Phi", (m,)),
        ("J", (m, nv)),
        ("gamma", (m,)),
        ("M", (nd, nd)),
        ("phi", (nv,)),
        ("K", (nd + m, nd + m)),
        ("rhs", (nd + m,)),
        ("Y", (nd, m1)),
        ("Sm", (m1, m1)),
        ("x", (nv,)),
        ("fext", (nb, 6)),
        ("lam", (m1,)),
    ]


@njit(cache=True, inline="always")
def tree_views(lay, df):
    """(Xrel, Xw, S, vec6, mat6, tmp33) from the data buffer."""
    nb = lay[0]
    Xrel = block(df, lay[5], (nb, 4, 3))
    Xw = block(df, lay[6], (nb, 4, 3))
    S = block(df, lay[7], (nb, 6, 6))
    vec6 = block(df, lay[8], (nb, 10, 6))
    mat6 = block(df, lay[9], (nb, 4, 6, 6))
    tmp33 = block(df, lay[10], (3, 3, 3))
    return Xrel, Xw, S, vec6, mat6, tmp33


@njit(cache=True, inline="always")
def closure_views(lay, df):
    """(cw, rw, zeros_nv, Phi, J, gamma, M, phi) from the data buffer."""
    nc1, m1, m, nv = lay[1], lay[2], lay[3], lay[4]
    cw = block(df, lay[11], (nc1, 16, 3))
    rw = block(df, lay[12], (m1, 3, 3))
    zeros_nv = block(df, lay[13], nv)
    Phi = block(df, lay[14], m)
    J = block(df, lay[15], (m, nv))
    gamma = block(df, lay[16], m)
    M = block(df, lay[17], (nv, nv))
    phi = block(df, lay[18], nv)
    return cw, rw, zeros_nv, Phi, J, gamma, M, phi


@njit(cache=True, inline="always")
def method_views(lay, df):
    """(K, rhs, Y, Sm, x, fext, lam) from the data buffer."""
    nb, m1, m, nv = lay[0], lay[2], lay[3], lay[4]
    K = block(df, lay[19], (nv + m, nv + m))
    rhs = block(df, lay[20], nv + m)
    Y = block(df, lay[21], (nv, m1))
    Sm = block(df, lay[22], (m1, m1))
    x = block(df, lay[23], nv)
    fext = block(df, lay[24], (nb, 6))
    lam = block(df, lay[25], m1)
    return K, rhs, Y, Sm, x, fext, lam
