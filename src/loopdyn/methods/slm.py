"""System-level Lagrange multipliers (SLM), eqs. (11)–(12) of the reduced-order paper.

    λ = Ĩ⁻¹ (γ - J M⁻¹ φ),   Ĩ = J M⁻¹ Jᵀ           (12)
    q̈ = M⁻¹ (φ + Jᵀ λ)                              (11)

M is factored once (Cholesky, the "inversion of I" the paper counts as O(n³));
Ĩ from Y = L⁻¹ Jᵀ as Ĩ = Yᵀ Y.  Then q̈ comes from the O(n) articulated-body
algorithm with λ applied as external wrenches on the cut bodies, as the paper
prescribes ("treated as external forces ... using any algorithm for tree-type
systems").
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
from loopdyn.kernels.linalg import backward_subst_t, cholesky_inplace, cholesky_solve, forward_subst
from loopdyn.methods.common import (
    METHOD_ARGS,
    NONFINITE_INPUT,
    NONFINITE_OUTPUT,
    bound_kernel,
    closure_body_wrenches,
    input_status,
    system_terms,
)
from loopdyn.tree.aba import aba_kernel
from loopdyn.validation import all_finite


@njit(cache=True)
def slm_kernel(
    topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, rows, q, v, tau,
    Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, fext_none, Phi, J, gamma, M, phi,
    Y, Sm, x, fext, qdd, lam,
):  # fmt: skip
    """``lam`` (len(rows)) by eq. (12), ``qdd`` by ABA; returns Ĩ's pivot ratio (0: singular)."""
    r = rows.shape[0]
    if not (all_finite(q) and all_finite(v) and all_finite(tau)):
        return NONFINITE_INPUT
    system_terms(
        topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, q, v, tau,
        Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, fext_none, Phi, J, gamma, M, phi, True,
    )  # fmt: skip
    ratio = slm_multipliers(M, J, phi, gamma, rows, Y, Sm, x, lam)
    if ratio < 1e-14:
        return ratio
    # q̈ by the O(n) tree algorithm with λ as external wrenches (eq. 11)
    closure_body_wrenches(topo, Xw, cl_body, row_int, rw, cw, rows, lam, fext)
    aba_kernel(topo, jgeom, inertia, gravity, q, v, tau, fext, Xrel, S, vec6, mat6, tmp33, qdd)
    if not (all_finite(qdd) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    return ratio


@njit(cache=True)
def slm_multipliers(M, J, phi, gamma, rows, Y, Sm, x, lam):
    """λ on ``rows`` by eq. (12) from M (factored in place), J, φ and γ.

    Cholesky M = L Lᵀ, Y = L⁻¹ Jᵀ, x = M⁻¹ φ, Ĩ = Yᵀ Y, λ = Ĩ⁻¹ (γ - J x).
    Returns Ĩ's pivot ratio (0: M or Ĩ singular).
    """
    n = phi.shape[0]
    r = rows.shape[0]
    if cholesky_inplace(M, n) == 0.0:
        return 0.0
    # Y = L⁻¹ Jᵀ (columns), x = M⁻¹ φ
    for a in range(r):
        ra = rows[a]
        col = Y[:, a]
        for j in range(n):
            col[j] = J[ra, j]
        forward_subst(M, n, col)
    for i in range(n):
        x[i] = phi[i]
    cholesky_solve(M, n, x)
    # Ĩ = Yᵀ Y ; rhs = γ - J x
    for a in range(r):
        for b in range(a + 1):
            s = 0.0
            for j in range(n):
                s += Y[j, a] * Y[j, b]
            Sm[a, b] = s
            Sm[b, a] = s
        ra = rows[a]
        s = gamma[ra]
        for j in range(n):
            s -= J[ra, j] * x[j]
        lam[a] = s
    ratio = cholesky_inplace(Sm, r)
    if ratio < 1e-14:
        return ratio
    forward_subst(Sm, r, lam)
    backward_subst_t(Sm, r, lam)
    return ratio


@entry_kernel
def slm_entry(ictx, fctx, piv, rows, q, v, tau, qdd, lam):
    """``slm_kernel`` on a Data's context buffers (``loopdyn.kernels.layout``), inputs checked."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    cw, rw, zeros_nv, Phi, J, gamma, M, phi = closure_views(dlay, df)
    status = input_status(mlay, topo, q, v, tau, block(zeros_nv, 0, (0, 6)))
    if status < 0.0:
        return status
    _, _, Y, Sm, x, fext, _ = method_views(dlay, df)
    return slm_kernel(
        topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, rows, q, v, tau,
        Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, block(zeros_nv, 0, (0, 6)), Phi, J,
        gamma, M, phi, Y, Sm, x, fext, qdd, lam,
    )  # fmt: skip


ENTRY = Entry(slm_entry, *METHOD_ARGS)


def run(model, q, v, tau, rows, d):
    """Runner for ``ld.forward_dynamics``: (q̈, λ on ``rows``, pivot ratio or status < 0)."""
    qdd = np.empty(model.nv)
    lam = np.empty(rows.shape[0])
    return qdd, lam, bound_kernel("slm", ENTRY, d, rows)(q, v, tau, qdd, lam)
