"""The "standard O(n)" constraint treatment of Anderson & Critchley, eqs. (13)–(32).

The accelerations of the cut tree split into a part free of the closure loads and
a part linear in them (their eq. (13)):

    q̈ = η + ζ λ                                        (13)

η is the tree's forward dynamics with the closures ignored (ABA, their eqs.
(14)–(15), (24), (26)–(27)); column a of ζ is the tree's response to the loads of
closure row a alone: the unit load applied as body wrenches at the cut joint and
carried inward through the articulated-body quantities (their (15)–(17)), then
outward (their (25), (28)–(29)), O(n) per row (``loopdyn.tree.aba.aba_resolve``).
Substituting (13) into the acceleration-level constraints J q̈ = γ (their (31))
gives the m × m system

    [J ζ] λ = γ - J η                                   (32)

solved here by Cholesky (J ζ = J M⁻¹ Jᵀ is symmetric positive definite for
independent rows), then q̈ from (13).  Cost O(n + nm + nm² + m³) (their §2.6).
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
from loopdyn.kernels.linalg import backward_subst_t, cholesky_inplace, forward_subst
from loopdyn.kinematics.closures import bias_acceleration_kernel, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import (
    METHOD_ARGS,
    NONFINITE_INPUT,
    NONFINITE_OUTPUT,
    bound_kernel,
    closure_body_wrenches,
    input_status,
)
from loopdyn.tree.aba import aba_kernel, aba_resolve
from loopdyn.validation import all_finite


@njit(cache=True)
def recursive_lambda_kernel(
    topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, rows, q, v, tau,
    Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, fext_none, Phi, J, gamma, zeta, JZ, unit,
    fext, qdd, lam,
):  # fmt: skip
    """``lam`` (len(rows)) by eq. (32), ``qdd`` by eq. (13); returns J ζ's pivot ratio.

    ``zeta`` (nv, ≥ len(rows)): ζ's columns; ``JZ``: J ζ; ``unit``: one load.
    """
    r = rows.shape[0]
    nv = qdd.shape[0]
    if not (all_finite(q) and all_finite(v) and all_finite(tau)):
        return NONFINITE_INPUT
    # kinematics, closure rows J and γ = -J̇q̇ (world poses Xw place the cut-joint loads)
    fk_kernel(topo, jgeom, q, v, Xrel, Xw, S, vec6, tmp33)
    bias_acceleration_kernel(topo, Xrel, vec6)
    closure_terms(
        topo, cl_body, cl_X, row_int, row_vec, Xw, S, vec6, cw, rw, True, True, Phi, J, gamma
    )
    # η: the tree without its closures (13); leaves the articulated-body factors in mat6
    bad = aba_kernel(
        topo, jgeom, inertia, gravity, q, v, tau, fext_none, Xrel, S, vec6, mat6, tmp33, qdd
    )
    if bad >= 0:
        return 0.0
    # ζ column a: the response to a unit load on row a (15)–(17), (25), (28)–(29)
    for a in range(r):
        unit[0] = 1.0
        closure_body_wrenches(topo, Xw, cl_body, row_int, rw, cw, rows[a : a + 1], unit, fext)
        aba_resolve(topo, Xrel, S, vec6, mat6, fext, zeta[:, a])
    # [J ζ] λ = γ - J η (32); J ζ = J M⁻¹ Jᵀ is symmetric: its lower triangle is used
    for a in range(r):
        ra = rows[a]
        for b in range(a + 1):
            s = 0.0
            for j in range(nv):
                s += J[ra, j] * zeta[j, b]
            JZ[a, b] = s
            JZ[b, a] = s
        s = gamma[ra]
        for j in range(nv):
            s -= J[ra, j] * qdd[j]
        lam[a] = s
    ratio = cholesky_inplace(JZ, r)
    if ratio < 1e-14:
        return ratio
    forward_subst(JZ, r, lam)
    backward_subst_t(JZ, r, lam)
    # q̈ = η + ζ λ (13)
    for j in range(nv):
        s = qdd[j]
        for a in range(r):
            s += zeta[j, a] * lam[a]
        qdd[j] = s
    if not (all_finite(qdd) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    return ratio


@entry_kernel
def recursive_lambda_entry(ictx, fctx, piv, rows, q, v, tau, qdd, lam):
    """``recursive_lambda_kernel`` on a Data's context buffers, inputs checked."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    cw, rw, zeros_nv, Phi, J, gamma, _, phi = closure_views(dlay, df)
    status = input_status(mlay, topo, q, v, tau, block(zeros_nv, 0, (0, 6)))
    if status < 0.0:
        return status
    _, _, Y, Sm, _, fext, _ = method_views(dlay, df)
    return recursive_lambda_kernel(
        topo,
        jgeom,
        inertia,
        gravity,
        cl_body,
        cl_X,
        row_int,
        row_vec,
        rows,
        q,
        v,
        tau,
        Xrel,
        Xw,
        S,
        vec6,
        mat6,
        tmp33,
        cw,
        rw,
        block(zeros_nv, 0, (0, 6)),
        Phi,
        J,
        gamma,
        Y,
        Sm,
        phi,
        fext,
        qdd,
        lam,
    )  # fmt: skip  (φ's buffer, unused by this method, holds the unit load)


ENTRY = Entry(recursive_lambda_entry, *METHOD_ARGS)


def run(model, q, v, tau, rows, d):
    """Runner for ``ld.forward_dynamics``: (q̈, λ on ``rows``, pivot ratio or status < 0)."""
    qdd = np.empty(model.nv)
    lam = np.empty(rows.shape[0])
    out = bound_kernel("recursive_lambda", ENTRY, d, rows)
    return qdd, lam, out(q, v, tau, qdd, lam)
