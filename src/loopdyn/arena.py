"""Packed storage: many named arrays carved out of one contiguous buffer.

A numba kernel pays ~0.1 µs per array argument at every call.  The model's
parameters and the data's workspaces are therefore stored in a few buffers (one
float64 and one int64 each), with their familiar names as numpy views for
Python code; entry kernels take the buffers plus a small int64 layout array and
rebuild the same views inside the compiled code (``model_views`` /
``data_views``), which costs nothing but pointer arithmetic.
"""

import numpy as np
from numba import njit


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


class Arena:
    """One buffer of ``dtype`` holding the arrays ``specs = [(name, shape), ...]`` in order.

    ``views[name]`` is the array; ``offsets`` (len(specs) + 1) the start of each.
    """

    def __init__(self, dtype, specs):
        sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape in specs]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.buf = np.zeros(int(self.offsets[-1]), dtype=dtype)
        self.views = {
            name: self.buf[self.offsets[k] : self.offsets[k + 1]].reshape(shape)
            for k, (name, shape) in enumerate(specs)
        }


# model arenas: int (topo, cl_body, row_int), float (jgeom, inertia, gravity, cl_X, row_vec);
# model layout: [nb, nc, m, 3 int offsets, 5 float offsets]
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
    topo = mi[lay[3] : lay[3] + nb * 6].reshape((nb, 6))
    cl_body = mi[lay[4] : lay[4] + nc * 2].reshape((nc, 2))
    row_int = mi[lay[5] : lay[5] + m * 2].reshape((m, 2))
    jgeom = mf[lay[6] : lay[6] + nb * 18].reshape((nb, 6, 3))
    inertia = mf[lay[7] : lay[7] + nb * 36].reshape((nb, 6, 6))
    gravity = mf[lay[8] : lay[8] + 3]
    cl_X = mf[lay[9] : lay[9] + nc * 24].reshape((nc, 2, 4, 3))
    row_vec = mf[lay[10] : lay[10] + m * 6].reshape((m, 2, 3))
    return topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec


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
    Xrel = df[lay[5] : lay[5] + nb * 12].reshape((nb, 4, 3))
    Xw = df[lay[6] : lay[6] + nb * 12].reshape((nb, 4, 3))
    S = df[lay[7] : lay[7] + nb * 36].reshape((nb, 6, 6))
    vec6 = df[lay[8] : lay[8] + nb * 60].reshape((nb, 10, 6))
    mat6 = df[lay[9] : lay[9] + nb * 144].reshape((nb, 4, 6, 6))
    tmp33 = df[lay[10] : lay[10] + 27].reshape((3, 3, 3))
    return Xrel, Xw, S, vec6, mat6, tmp33


@njit(cache=True, inline="always")
def closure_views(lay, df):
    """(cw, rw, zeros_nv, Phi, J, gamma, M, phi) from the data buffer."""
    nc1, m1, m, nv = lay[1], lay[2], lay[3], lay[4]
    cw = df[lay[11] : lay[11] + nc1 * 48].reshape((nc1, 16, 3))
    rw = df[lay[12] : lay[12] + m1 * 9].reshape((m1, 3, 3))
    zeros_nv = df[lay[13] : lay[13] + nv]
    Phi = df[lay[14] : lay[14] + m]
    J = df[lay[15] : lay[15] + m * nv].reshape((m, nv))
    gamma = df[lay[16] : lay[16] + m]
    M = df[lay[17] : lay[17] + nv * nv].reshape((nv, nv))
    phi = df[lay[18] : lay[18] + nv]
    return cw, rw, zeros_nv, Phi, J, gamma, M, phi


@njit(cache=True, inline="always")
def method_views(lay, df):
    """(K, rhs, Y, Sm, x, fext, lam) from the data buffer."""
    nb, m1, m, nv = lay[0], lay[2], lay[3], lay[4]
    K = df[lay[19] : lay[19] + (nv + m) * (nv + m)].reshape((nv + m, nv + m))
    rhs = df[lay[20] : lay[20] + nv + m]
    Y = df[lay[21] : lay[21] + nv * m1].reshape((nv, m1))
    Sm = df[lay[22] : lay[22] + m1 * m1].reshape((m1, m1))
    x = df[lay[23] : lay[23] + nv]
    fext = df[lay[24] : lay[24] + nb * 6].reshape((nb, 6))
    lam = df[lay[25] : lay[25] + m1]
    return K, rhs, Y, Sm, x, fext, lam
