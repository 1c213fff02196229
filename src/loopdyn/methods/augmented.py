"""The "system approach": q̈ and λ from one KKT solve, eq. (10) of the reduced-order paper.

    [ M   Jᵀ ] [ q̈ ]   [ φ ]
    [ J   0  ] [ -λ ] = [ γ ],     φ = τ - C q̇ - g,  γ = -J̇ q̇

solved densely by LU with partial pivoting on the independent rows of J.  This is
the oracle every other method is tested against.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.layout import (
    Entry,
    block,
    closure_views,
    context_buffers,
    entry_kernel,
    method_views,
    model_views,
    tree_views,
)
from loopdyn.kernels.linalg import lu_inplace, lu_solve
from loopdyn.methods.common import (
    METHOD_ARGS,
    NONFINITE_INPUT,
    NONFINITE_OUTPUT,
    bound_kernel,
    input_status,
    system_terms,
)
from loopdyn.validation import all_finite


@njit(cache=True)
def augmented_kernel(
    topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, rows, q, v, tau,
    Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, fext_none, Phi, J, gamma, M, phi,
    K, rhs, piv, qdd, lam,
):  # fmt: skip
    """Fill ``qdd`` (nv) and ``lam`` (len(rows)); return the LU pivot ratio (0: singular)."""
    n = phi.shape[0]
    r = rows.shape[0]
    if not (all_finite(q) and all_finite(v) and all_finite(tau)):
        return NONFINITE_INPUT
    system_terms(
        topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, q, v, tau,
        Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, fext_none, Phi, J, gamma, M, phi, True,
    )  # fmt: skip
    N = n + r
    for i in range(n):
        for j in range(n):
            K[i, j] = M[i, j]
        rhs[i] = phi[i]
    for a in range(r):
        ra = rows[a]
        for j in range(n):
            K[n + a, j] = J[ra, j]
            K[j, n + a] = J[ra, j]
        for b in range(r):
            K[n + a, n + b] = 0.0
        rhs[n + a] = gamma[ra]
    ratio = lu_inplace(K, N, piv)
    if ratio < 1e-14:
        return ratio
    lu_solve(K, N, piv, rhs)
    for i in range(n):
        qdd[i] = rhs[i]
    for a in range(r):
        lam[a] = -rhs[n + a]
    if not (all_finite(qdd) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    return ratio


@entry_kernel
def augmented_entry(ictx, fctx, piv, rows, q, v, tau, qdd, lam):
    """``augmented_kernel`` on a Data's context buffers (``kernels.layout``), inputs checked."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    cw, rw, zeros_nv, Phi, J, gamma, M, phi = closure_views(dlay, df)
    status = input_status(mlay, topo, q, v, tau, block(zeros_nv, 0, (0, 6)))
    if status < 0.0:
        return status
    K, rhs, _, _, _, _, _ = method_views(dlay, df)
    return augmented_kernel(
        topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, rows, q, v, tau,
        Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, block(zeros_nv, 0, (0, 6)), Phi, J,
        gamma, M, phi, K, rhs, piv, qdd, lam,
    )  # fmt: skip


ENTRY = Entry(augmented_entry, *METHOD_ARGS)


def run(model, q, v, tau, rows, d):
    """Runner for ``ld.forward_dynamics``: (q̈, λ on ``rows``, pivot ratio or status < 0)."""
    qdd = np.empty(model.nv)
    lam = np.empty(rows.shape[0])
    return qdd, lam, bound_kernel("augmented", ENTRY, d, rows)(q, v, tau, qdd, lam)
