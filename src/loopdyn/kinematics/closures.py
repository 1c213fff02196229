"""Constraint kinematics of the loop closures: Φ(q), J(q) (m × nv) and γ = -J̇ q̇.

Rows are those of ``loopdyn.model.closures`` (translation and rotation rows, world
vectors u_w = R_A u, w_w = R_B w, n = w_w × u_w):

    translation:  Φ = u_w·(p_B - p_A),  J v = u_w·(v_B - v_A(p_B))
    rotation:     Φ = u_w·w_w,          J v = n·(ω_B - ω_A)

and γ = -d/dt(J v) at q̈ = 0, from the velocity-product accelerations of the
bodies (no gravity).  Everything is in the world frame.  The point of body a
coinciding with B's origin is used for body a's velocity and acceleration.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from loopdyn.kernels.spatial import motion_to_child
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.validation import configuration, vector

# rows of the closure workspace cw (nc, 16, 3)
_RA, _PA, _RB, _PB = 0, 3, 4, 7
_WA, _VA, _WB, _VB, _AWA, _AA, _AWB, _AB = 8, 9, 10, 11, 12, 13, 14, 15


@njit(cache=True)
def bias_acceleration_kernel(topo, Xrel, vec6):
    """Body spatial accelerations at q̈ = 0 without gravity: a_i = iXλ a_λ + c_i (body frame)."""
    for i in range(topo.shape[0]):
        lam = topo[i, 0]
        a = vec6[i, 1]
        if lam >= 0:
            motion_to_child(Xrel[i, :3], Xrel[i, 3], vec6[lam, 1], a)
            for r in range(6):
                a[r] += vec6[i, 2, r]
        else:
            for r in range(6):
                a[r] = vec6[i, 2, r]


@njit(cache=True)
def _point_motion(b, P, Xw, vec6, with_acc, out):
    """World ω, v, α, a (classical) of the point of body b at world position P.

    out rows: 0 ω, 1 v, 2 α, 3 a.  Ground (b < 0): zeros.
    """
    for r in range(4):
        for c in range(3):
            out[r, c] = 0.0
    if b < 0:
        return
    R = Xw[b, :3]
    o = Xw[b, 3]
    V = vec6[b, 0]
    # r = Rᵀ (P - o), body coordinates
    d0, d1, d2 = P[0] - o[0], P[1] - o[1], P[2] - o[2]
    r0 = R[0, 0] * d0 + R[1, 0] * d1 + R[2, 0] * d2
    r1 = R[0, 1] * d0 + R[1, 1] * d1 + R[2, 1] * d2
    r2 = R[0, 2] * d0 + R[1, 2] * d1 + R[2, 2] * d2
    w0, w1, w2 = V[0], V[1], V[2]
    vp0 = V[3] + w1 * r2 - w2 * r1
    vp1 = V[4] + w2 * r0 - w0 * r2
    vp2 = V[5] + w0 * r1 - w1 * r0
    for k in range(3):
        out[0, k] = R[k, 0] * w0 + R[k, 1] * w1 + R[k, 2] * w2
        out[1, k] = R[k, 0] * vp0 + R[k, 1] * vp1 + R[k, 2] * vp2
    if with_acc:
        A = vec6[b, 1]
        al0, al1, al2 = A[0], A[1], A[2]
        # a_P = a_s + α × r + ω × v_P (body coordinates)
        ap0 = A[3] + al1 * r2 - al2 * r1 + w1 * vp2 - w2 * vp1
        ap1 = A[4] + al2 * r0 - al0 * r2 + w2 * vp0 - w0 * vp2
        ap2 = A[5] + al0 * r1 - al1 * r0 + w0 * vp1 - w1 * vp0
        for k in range(3):
            out[2, k] = R[k, 0] * al0 + R[k, 1] * al1 + R[k, 2] * al2
            out[3, k] = R[k, 0] * ap0 + R[k, 1] * ap1 + R[k, 2] * ap2


@njit(cache=True)
def _add_jacobian_rows(topo, Xw, S, b, P, sign, r0, r1, row_int, uw, nw, J):
    """J[r0:r1] += sign · (rows of closure) · (point Jacobian of body b at P)."""
    j = b
    while j >= 0:
        iv = topo[j, 3]
        R = Xw[j, :3]
        o = Xw[j, 3]
        d0, d1, d2 = P[0] - o[0], P[1] - o[1], P[2] - o[2]
        for k in range(topo[j, 5]):
            w0 = R[0, 0] * S[j, 0, k] + R[0, 1] * S[j, 1, k] + R[0, 2] * S[j, 2, k]
            w1 = R[1, 0] * S[j, 0, k] + R[1, 1] * S[j, 1, k] + R[1, 2] * S[j, 2, k]
            w2 = R[2, 0] * S[j, 0, k] + R[2, 1] * S[j, 1, k] + R[2, 2] * S[j, 2, k]
            u0 = R[0, 0] * S[j, 3, k] + R[0, 1] * S[j, 4, k] + R[0, 2] * S[j, 5, k]
            u1 = R[1, 0] * S[j, 3, k] + R[1, 1] * S[j, 4, k] + R[1, 2] * S[j, 5, k]
            u2 = R[2, 0] * S[j, 3, k] + R[2, 1] * S[j, 4, k] + R[2, 2] * S[j, 5, k]
            v0 = u0 + w1 * d2 - w2 * d1
            v1 = u1 + w2 * d0 - w0 * d2
            v2 = u2 + w0 * d1 - w1 * d0
            for rr in range(r0, r1):
                if row_int[rr, 1] == 0:
                    s = uw[rr, 0] * v0 + uw[rr, 1] * v1 + uw[rr, 2] * v2
                else:
                    s = nw[rr, 0] * w0 + nw[rr, 1] * w1 + nw[rr, 2] * w2
                J[rr, iv + k] += sign * s
        j = topo[j, 0]


@njit(cache=True)
def constraint_kernel(
    topo, jgeom, cl_body, cl_X, row_int, row_vec, q, v, Xrel, Xw, S, vec6, tmp33, cw, rw,
    want_J, Phi, J, gamma,
):  # fmt: skip
    """Φ (m), and J (m × nv) if ``want_J``, and γ (m) if ``v.size > 0``.

    ``cw`` (nc, 16, 3) and ``rw`` (m, 3, 3) are workspaces: closure frame poses and
    point motions, and per-row world vectors u_w, w_w, n.
    """
    fk_kernel(topo, jgeom, q, v, Xrel, Xw, S, vec6, tmp33)
    with_v = v.size > 0
    if with_v:
        bias_acceleration_kernel(topo, Xrel, vec6)
    closure_terms(
        topo, cl_body, cl_X, row_int, row_vec, Xw, S, vec6, cw, rw, with_v, want_J, Phi, J, gamma
    )


@njit(cache=True)
def closure_terms(
    topo, cl_body, cl_X, row_int, row_vec, Xw, S, vec6, cw, rw, with_v, want_J, Phi, J, gamma
):
    """Φ, J (if ``want_J``) and γ (if ``with_v``) from body poses, velocities and bias
    accelerations already in the workspace (``fk_kernel`` + ``bias_acceleration_kernel``)."""
    nc = cl_body.shape[0]
    m = row_int.shape[0]
    # frame poses: R_A, p_A, R_B, p_B (world)
    for k in range(nc):
        for side in range(2):
            b = cl_body[k, side]
            X = cl_X[k, side]
            base = 4 * side
            if b < 0:
                for r in range(3):
                    for c in range(3):
                        cw[k, base + r, c] = X[r, c]
                    cw[k, base + 3, r] = X[3, r]
            else:
                R = Xw[b, :3]
                for r in range(3):
                    for c in range(3):
                        cw[k, base + r, c] = (
                            R[r, 0] * X[0, c] + R[r, 1] * X[1, c] + R[r, 2] * X[2, c]
                        )
                    cw[k, base + 3, r] = (
                        Xw[b, 3, r] + R[r, 0] * X[3, 0] + R[r, 1] * X[3, 1] + R[r, 2] * X[3, 2]
                    )
        if with_v:
            _point_motion(cl_body[k, 0], cw[k, _PB], Xw, vec6, True, cw[k, 8:12])
            _point_motion(cl_body[k, 1], cw[k, _PB], Xw, vec6, True, cw[k, 12:16])
    # world row vectors and residuals
    for rr in range(m):
        k = row_int[rr, 0]
        uw = rw[rr, 0]
        ww = rw[rr, 1]
        nw = rw[rr, 2]
        for r in range(3):
            uw[r] = (
                cw[k, 0 + r, 0] * row_vec[rr, 0, 0]
                + cw[k, r, 1] * row_vec[rr, 0, 1]
                + cw[k, r, 2] * row_vec[rr, 0, 2]
            )
            ww[r] = (
                cw[k, 4 + r, 0] * row_vec[rr, 1, 0]
                + cw[k, 4 + r, 1] * row_vec[rr, 1, 1]
                + cw[k, 4 + r, 2] * row_vec[rr, 1, 2]
            )
        nw[0] = ww[1] * uw[2] - ww[2] * uw[1]
        nw[1] = ww[2] * uw[0] - ww[0] * uw[2]
        nw[2] = ww[0] * uw[1] - ww[1] * uw[0]
        if row_int[rr, 1] == 0:
            Phi[rr] = (
                uw[0] * (cw[k, _PB, 0] - cw[k, _PA, 0])
                + uw[1] * (cw[k, _PB, 1] - cw[k, _PA, 1])
                + uw[2] * (cw[k, _PB, 2] - cw[k, _PA, 2])
            )
        else:
            Phi[rr] = uw[0] * ww[0] + uw[1] * ww[1] + uw[2] * ww[2]
        if with_v:
            # motions: A point (ω, v, α, a) rows 8..11 ; B origin rows 12..15
            wA = cw[k, 8]
            vA = cw[k, 9]
            alA = cw[k, 10]
            aA = cw[k, 11]
            wB = cw[k, 12]
            vB = cw[k, 13]
            alB = cw[k, 14]
            aB = cw[k, 15]
            if row_int[rr, 1] == 0:
                # d/dt [u·(v_B - v_A)] = (ω_A × u)·dv + u·(a_B - a_A - ω_A × dv)
                dv0, dv1, dv2 = vB[0] - vA[0], vB[1] - vA[1], vB[2] - vA[2]
                cu0 = wA[1] * uw[2] - wA[2] * uw[1]
                cu1 = wA[2] * uw[0] - wA[0] * uw[2]
                cu2 = wA[0] * uw[1] - wA[1] * uw[0]
                cd0 = wA[1] * dv2 - wA[2] * dv1
                cd1 = wA[2] * dv0 - wA[0] * dv2
                cd2 = wA[0] * dv1 - wA[1] * dv0
                g = cu0 * dv0 + cu1 * dv1 + cu2 * dv2
                g += (
                    uw[0] * (aB[0] - aA[0] - cd0)
                    + uw[1] * (aB[1] - aA[1] - cd1)
                    + uw[2] * (aB[2] - aA[2] - cd2)
                )
            else:
                # d/dt [n·(ω_B - ω_A)], ṅ = (ω_B × w) × u + w × (ω_A × u)
                bw0 = wB[1] * ww[2] - wB[2] * ww[1]
                bw1 = wB[2] * ww[0] - wB[0] * ww[2]
                bw2 = wB[0] * ww[1] - wB[1] * ww[0]
                au0 = wA[1] * uw[2] - wA[2] * uw[1]
                au1 = wA[2] * uw[0] - wA[0] * uw[2]
                au2 = wA[0] * uw[1] - wA[1] * uw[0]
                nd0 = bw1 * uw[2] - bw2 * uw[1] + ww[1] * au2 - ww[2] * au1
                nd1 = bw2 * uw[0] - bw0 * uw[2] + ww[2] * au0 - ww[0] * au2
                nd2 = bw0 * uw[1] - bw1 * uw[0] + ww[0] * au1 - ww[1] * au0
                g = nd0 * (wB[0] - wA[0]) + nd1 * (wB[1] - wA[1]) + nd2 * (wB[2] - wA[2])
                g += (
                    nw[0] * (alB[0] - alA[0])
                    + nw[1] * (alB[1] - alA[1])
                    + nw[2] * (alB[2] - alA[2])
                )
            gamma[rr] = -g
    if want_J:
        J[:, :] = 0.0
        r0 = 0
        while r0 < m:
            k = row_int[r0, 0]
            r1 = r0
            while r1 < m and row_int[r1, 0] == k:
                r1 += 1
            _add_jacobian_rows(
                topo, Xw, S, cl_body[k, 1], cw[k, _PB], 1.0, r0, r1, row_int, rw[:, 0], rw[:, 2], J
            )
            _add_jacobian_rows(
                topo, Xw, S, cl_body[k, 0], cw[k, _PB], -1.0, r0, r1, row_int, rw[:, 0], rw[:, 2], J
            )
            r0 = r1


def closure_work(model, data=None):
    """(data, its closure workspace ``Data.closure``: cw, rw, Φ, J, γ)."""
    d = model.data if data is None else data
    return d, d.closure


def _evaluate(model, q, v, want_J, data):
    d, w = closure_work(model, data)
    q = configuration(model, q)
    v = np.empty(0) if v is None else vector(v, model.nv, "v", model)
    constraint_kernel(
        model.topo, model.jgeom, model.cl_body, model.cl_X, model.row_int, model.row_vec,
        q, v, d.Xrel, d.Xw, d.S, d.vec6, d.tmp33, w.cw, w.rw, want_J, w.Phi, w.J, w.gamma,
    )  # fmt: skip
    return w


def closure_residual(model, q, data=None):
    """Φ(q) (m,): the position residual of every closure row (m or -, see module doc)."""
    return _evaluate(model, q, None, False, data).Phi.copy()


def constraint_jacobian(model, q, data=None):
    """J(q) (m × nv) with J v = dΦ/dt."""
    return _evaluate(model, q, None, True, data).J.copy()


def constraint_bias(model, q, v, data=None):
    """γ = -J̇(q, v) v (m,), so that consistent accelerations satisfy J q̈ = γ."""
    return _evaluate(model, q, v, False, data).gamma.copy()


def constraints(model, q, v=None, data=None):
    """(Φ, J, γ) in one pass; γ is None when ``v`` is None."""
    w = _evaluate(model, q, v, True, data)
    return w.Phi.copy(), w.J.copy(), (None if v is None else w.gamma.copy())


@dataclass(frozen=True)
class RankInfo:
    """Rank of J at a configuration and the rows kept as an independent set.

    ``independent`` and ``dropped`` index the m rows; ``singular_values`` of J;
    ``condition`` = σ_max / σ_rank of the independent rows.
    """

    rank: int
    independent: np.ndarray
    dropped: np.ndarray
    singular_values: np.ndarray
    condition: float


def constraint_rank(model, q, tol=None, data=None):
    """Numerical rank of J(q) by pivoted QR of Jᵀ, and an independent row set.

    ``tol`` defaults to max(m, nv) · eps · σ_max.  Rows are kept in pivot order
    (greedy: the most independent first), then sorted.
    """
    import scipy.linalg as sla

    J = constraint_jacobian(model, q, data)
    if model.m == 0:
        e = np.zeros(0, dtype=np.int64)
        return RankInfo(0, e, e, np.zeros(0), 1.0)
    sv = np.linalg.svd(J, compute_uv=False)
    smax = sv[0] if sv.size else 0.0
    tol = max(J.shape) * np.finfo(float).eps * max(smax, 1.0) * 10 if tol is None else tol
    rank = int(np.sum(sv > tol))
    _, _, piv = sla.qr(J.T, mode="economic", pivoting=True)
    keep = np.sort(piv[:rank])
    drop = np.sort(piv[rank:])
    cond = float(sv[0] / sv[rank - 1]) if rank > 0 else np.inf
    return RankInfo(rank, keep.astype(np.int64), drop.astype(np.int64), sv, cond)
