"""Analytic derivatives of closed-loop forward and inverse dynamics.

Forward dynamics (``augmented``, eq. (10) of the reduced-order paper) solves, on the
independent closure rows k (``res.dropped`` removed, the methods' rank logic),

    E1 = RNEA(q, v, q̈) - J_kᵀ μ - τ = 0,      E2 = J_k q̈ - γ_k = Φ̈_k(q, v, q̈) = 0   (D1)

and implicit differentiation with the KKT factors gives, for x = q, v (tangent
directions, q ⊕ δ = ``ld.integrate``) and τ:

    [ M    -J_kᵀ ] [ ∂q̈/∂x ]     [ ∂E1/∂x ]            ∂E1/∂τ = -I,  ∂E2/∂τ = 0    (D2)
    [ J_k   0    ] [ ∂μ/∂x  ] = - [ ∂E2/∂x ],

∂E1/∂q being the RNEA derivative with the closure forces as world wrenches
f_b = Σ_r ξ_r μ_r on body b (-f_b on a) held at fixed μ but moving with q
(``TreeTangents.forces``), and ∂E2/∂q, ∂E2/∂v the derivatives of the acceleration
rows at fixed (v, q̈).

Every non-coupling row has a world "row wrench" ξ_r (6, about the world origin) with
Φ̇_r = ξ_rᵀ (V_b - V_a) (V: world spatial velocities), so

    Φ̈_r = ξ_rᵀ (A_b - A_a) + ξ̇_rᵀ (V_b - V_a)                                    (D3)

and its derivatives follow from those of ξ, ξ̇ and of the body motions
(``TreeTangents``).  Translation row (u fixed in frame A, p_B frame B's origin):
ξ = [p_B × u; u].  Dot-product row Φ = u_A·w_B: ξ = [w × u; 0].

Row forms.  Off the constraint manifold (a q perturbation at fixed v is not a
consistent state) ∂Φ̈/∂q depends on the form of the residual: for Φ1 = T(q) Φ2,
Φ̈1 = T Φ̈2 + 2 Ṫ Φ̇2 + T̈ Φ2, and at a consistent state (Φ2 = Φ̇2 = 0, Φ̈2 = 0 at the
solution) ∂Φ̈1/∂q = T ∂Φ̈2/∂q + 2 Ṫ ∂Φ̇2/∂q + T̈ J2: the forms give the same
derivatives iff Ṫ = T̈ = 0 there.  The hinge's swing Φ = h(c) g (h = θ/sin θ,
``ROT_HINGE``) and the log map Φ = e·log(R_Aᵀ R_B) (``ROT_LOG``, on closures that lock
the relative rotation: φ = 0) are T(θ²) times dot-product forms, and θ² is stationary
to second order on the manifold (θ = θ̇ = 0), so their derivatives at a consistent
state are exactly those of the dot-product rows (the hinge's b_A·a_B, c_A·a_B; the log
row's e·vee(R - Rᵀ)/2 = ½ Σ_i (e × i_A)·i_B): that is what is used for them, and such a
state is required (``AssemblyError`` otherwise).  A ``ROT_LOG`` row of a closure that
leaves the relative rotation free (a generic closure with one rotation axis in 3D:
there θ̇ ≠ 0 and T̈ = -θ̇²/3 ≠ 0) is refused with a ``ModelError``.  Translation,
dot-product and coupling rows are differentiated exactly at any state.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.derivatives.tree import TreeTangents
from loopdyn.errors import AssemblyError, ModelError, SingularityError
from loopdyn.kinematics.closures import evaluate
from loopdyn.model.closures import COUPLING, ROT_DOT, ROT_HINGE, ROT_LOG, TRANSLATION
from loopdyn.validation import configuration, model_arg, vector

# a state is on the manifold for the hinge / log rows' derivatives (module doc) when
# |Φ| <= MANIFOLD_TOL · max(1, model size) and |J v| <= MANIFOLD_TOL · |J| max(|v|, 1):
# the rows' dropped terms are O(|Φ|, |Φ̇|), i.e. relative errors of that order
MANIFOLD_TOL = 1e-7
# 1 / (estimated condition of the KKT matrix) below which (D2) is singular
KKT_RCOND = 1e-14


def _frame(model, tt, k, side):
    """(body index (nb: ground), R, p) of closure k's frame ``side`` in the world."""
    b = int(model.cl_body[k, side])
    X = np.asarray(model.cl_X[k, side])
    if b < 0:
        return tt.nb, X[:3].copy(), X[3].copy()
    return b, tt.R[b] @ X[:3], tt.p[b] + tt.R[b] @ X[3]


def _row_terms(model, r):
    """The elementary terms of non-coupling row r: ("t", u) or a list of ("d", s, u, w)
    dot products s u_A·w_B (u in frame A, w in frame B), module doc."""
    kind, form = int(model.row_int[r, 1]), int(model.row_int[r, 2])
    u, w = np.asarray(model.row_vec[r, 0]), np.asarray(model.row_vec[r, 1])
    if kind == TRANSLATION:
        return [("t", 1.0, u, None)]
    if form in (ROT_DOT, ROT_HINGE):
        return [("d", 1.0, u, w)]
    e = np.cross(w, u)  # the log row's axis (kinematics.closures._log_rows)
    I3 = np.eye(3)
    return [("d", 0.5, np.cross(e, I3[i]), I3[i]) for i in range(3)]


class RowTangents:
    """For rows ``rows``: J (r × nv), ∂Φ̈/∂q, ∂Φ̈/∂v (r × nv) at fixed (v, q̈) (D3),
    ∂Φ̇/∂q (r × nv) at fixed v, and the row wrenches ξ (r, 6), ∂ξ/∂q (r, nv, 6) with
    their bodies (a, b) (nb: the ground; -1 for a coupling row)."""

    def __init__(self, model, tt, rows, tv=None):
        n = tt.n
        r = len(rows)
        self.J = np.zeros((r, n))
        self.gq, self.gv, self.hq = np.zeros((r, n)), np.zeros((r, n)), np.zeros((r, n))
        self.xi, self.dxi = np.zeros((r, 6)), np.zeros((r, n, 6))
        self.body = -np.ones((r, 2), dtype=np.int64)
        self.hq_other = None if tv is None else np.zeros((r, n))
        log_checked = set()
        for t, row in enumerate(rows):
            k, kind = int(model.row_int[row, 0]), int(model.row_int[row, 1])
            if kind == COUPLING:
                ratio = model.row_vec[row, 0, 0]
                self.J[t, model.row_int[row, 3]] += 1.0
                self.J[t, model.row_int[row, 2]] -= ratio
                continue
            a, RA, _ = _frame(model, tt, k, 0)
            b, RB, pB = _frame(model, tt, k, 1)
            is_log = int(model.row_int[row, 2]) == ROT_LOG and kind != TRANSLATION
            if is_log and k not in log_checked:
                log_checked.add(k)
                _check_log_closure(model, k)
            self.body[t] = (a, b)
            xi, dxi, xid, dxid_q, dxid_v = self._wrench(model, tt, row, a, b, RA, RB, pB)
            dV = tt.V[b] - tt.V[a]
            dA = tt.A[b] - tt.A[a]
            ddVq, ddAq = tt.dVq[b] - tt.dVq[a], tt.dAq[b] - tt.dAq[a]
            ddVv, ddAv = tt.dVv[b] - tt.dVv[a], tt.dAv[b] - tt.dAv[a]
            self.xi[t], self.dxi[t] = xi, dxi
            self.J[t] = (tt.eta[b] - tt.eta[a]) @ xi
            # (D3) and its derivatives
            self.gq[t] = dxi @ dA + ddAq @ xi + dxid_q @ dV + ddVq @ xid
            self.gv[t] = ddAv @ xi + dxid_v @ dV + ddVv @ xid
            self.hq[t] = dxi @ dV + ddVq @ xi
            if tv is not None:  # ∂(J y)/∂q for the velocity y of the tangents ``tv``
                self.hq_other[t] = dxi @ (tv.V[b] - tv.V[a]) + (tv.dVq[b] - tv.dVq[a]) @ xi

    @staticmethod
    def _wrench(model, tt, row, a, b, RA, RB, pB):
        """ξ, ∂ξ/∂q, ξ̇, ∂ξ̇/∂q, ∂ξ̇/∂v of row ``row`` (world axes, world origin)."""
        n = tt.n
        wa, wb = tt.V[a, :3], tt.V[b, :3]
        ea, eb = tt.eta[a, :, :3], tt.eta[b, :, :3]  # rotations of the frames per direction
        dwa_q, dwb_q = tt.dVq[a, :, :3], tt.dVq[b, :, :3]
        dwa_v, dwb_v = tt.dVv[a, :, :3], tt.dVv[b, :, :3]
        xi, dxi = np.zeros(6), np.zeros((n, 6))
        xid, dxid_q, dxid_v = np.zeros(6), np.zeros((n, 6)), np.zeros((n, 6))
        cr = np.cross
        for what, s, u0, w0 in _row_terms(model, row):
            u = RA @ u0
            du = cr(ea, u)
            ud = cr(wa, u)
            dud_q = cr(dwa_q, u) + cr(wa, du)
            dud_v = cr(dwa_v, u)
            if what == "t":
                dp = tt.eta[b, :, 3:] + cr(eb, pB)
                pd = tt.V[b, 3:] + cr(wb, pB)
                dpd_q = tt.dVq[b, :, 3:] + cr(dwb_q, pB) + cr(wb, dp)
                dpd_v = tt.dVv[b, :, 3:] + cr(dwb_v, pB)
                xi[:3] += cr(pB, u)
                xi[3:] += u
                dxi[:, :3] += cr(dp, u) + cr(pB, du)
                dxi[:, 3:] += du
                xid[:3] += cr(pd, u) + cr(pB, ud)
                xid[3:] += ud
                dxid_q[:, :3] += cr(dpd_q, u) + cr(pd, du) + cr(dp, ud) + cr(pB, dud_q)
                dxid_q[:, 3:] += dud_q
                dxid_v[:, :3] += cr(dpd_v, u) + cr(pB, dud_v)
                dxid_v[:, 3:] += dud_v
            else:
                w = RB @ w0
                dw = cr(eb, w)
                wd = cr(wb, w)
                dwd_q = cr(dwb_q, w) + cr(wb, dw)
                dwd_v = cr(dwb_v, w)
                xi[:3] += s * cr(w, u)
                dxi[:, :3] += s * (cr(dw, u) + cr(w, du))
                xid[:3] += s * (cr(wd, u) + cr(w, ud))
                dxid_q[:, :3] += s * (cr(dwd_q, u) + cr(wd, du) + cr(dw, ud) + cr(w, dud_q))
                dxid_v[:, :3] += s * (cr(dwd_v, u) + cr(w, dud_v))
        return xi, dxi, xid, dxid_q, dxid_v


def _check_log_closure(model, k):
    """``ModelError`` for log rows of closure k that leave the relative rotation free
    (module doc): they must lock it (three rotation rows, or a planar model's one)."""
    rows = np.flatnonzero((model.row_int[:, 0] == k) & (model.row_int[:, 1] != TRANSLATION))
    if rows.size == 3 or model.planar:
        return
    raise ModelError(
        f"{model.name}: closure {model.closures[k]!r} leaves its frames free to turn "
        f"({rows.size} rotation row of the log map in 3D): the derivatives of such rows are "
        "not implemented (a generic closure with one rotation axis)"
    )


def _check_constant_rank(model, q, rank):
    """``SingularityError`` where the closure rows' rank drops at q only (a dead point, a
    change point), not on the manifold around it: there q̈ is not differentiable.  Rows
    that are redundant everywhere (duplicate closures, implied rows) keep their rank at
    a nearby consistent configuration (the independent coordinates moved by 1e-3,
    seeded, the loops closed again)."""
    from loopdyn.analysis.assembly import assemble, partition
    from loopdyn.kinematics.closures import constraint_rank
    from loopdyn.kinematics.configuration import integrate

    ind = partition(model, q).independent
    step = np.zeros(model.nv)
    step[ind] = np.random.default_rng(0).uniform(-1e-3, 1e-3, ind.size)
    try:
        q1 = assemble(model, integrate(model, q, step), fixed=list(ind))
    except AssemblyError:
        q1 = None
    if q1 is None or constraint_rank(model, q1).rank != rank:
        raise SingularityError(
            f"{model.name}: the closure Jacobian has rank {rank} here and not at the "
            "configurations around it: a singular configuration, the derivatives do not exist"
        )


def _closure_wrenches(tt, rt, mu):
    """World wrenches (nb, 6) of the rows' forces μ on the bodies and their q-derivatives
    (nb, nv, 6) at fixed μ (coupling rows are joint forces: constant, not included)."""
    fext = np.zeros((tt.nb + 1, 6))
    dfext = np.zeros((tt.nb + 1, tt.n, 6))
    for t in range(len(mu)):
        a, b = rt.body[t]
        if b < 0:
            continue
        fext[b] += rt.xi[t] * mu[t]
        fext[a] -= rt.xi[t] * mu[t]
        dfext[b] += rt.dxi[t] * mu[t]
        dfext[a] -= rt.dxi[t] * mu[t]
    return fext[: tt.nb], dfext[: tt.nb]


def _needs_manifold(model, rows):
    forms = model.row_int[rows]
    return bool(
        np.any((forms[:, 1] != TRANSLATION) & (forms[:, 1] != COUPLING) & (forms[:, 2] != ROT_DOT))
    )


def _check_manifold(model, d, v, rows):
    """``AssemblyError`` where the hinge / log rows' derivatives (module doc) need a
    consistent state and (q, v) is not one."""
    if not _needs_manifold(model, rows):
        return
    J = d.J[: model.m]
    size = max(1.0, float(np.abs(model.jgeom[:, 3]).max(initial=0.0)))
    ephi = float(np.abs(d.Phi[: model.m]).max())
    ev = float(np.abs(J @ v).max())
    jmax = max(float(np.abs(J).max()), 1e-300)
    if ephi > MANIFOLD_TOL * size or ev > MANIFOLD_TOL * jmax * max(float(np.abs(v).max()), 1.0):
        raise AssemblyError(
            f"{model.name}: derivatives of its hinge / log closure rows need a consistent state "
            f"(|Φ| = {ephi:.3g}, |J v| = {ev:.3g}); use ld.assemble and ld.complete_velocity"
        )


def _kkt_solve(model, M, Jk, rhs):
    """(D2): solutions of [M, -J_kᵀ; J_k, 0] X = rhs, or a ``SingularityError``."""
    n, r = M.shape[0], Jk.shape[0]
    K = np.zeros((n + r, n + r))
    K[:n, :n] = M
    K[:n, n:] = -Jk.T
    K[n:, :n] = Jk
    # rows scaled to unit size (the augmented method's scaling), then the condition
    s = 1.0 / np.maximum(np.abs(Jk).max(axis=1, initial=0.0), 1e-300)
    K[n:, :] *= s[:, None]
    K[:, n:] *= s[None, :]
    rhs = rhs.copy()
    rhs[n:] *= s[:, None]
    import scipy.linalg as sla

    lu = sla.lu_factor(K, check_finite=False)
    rc = sla.lapack.dgecon(lu[0], np.abs(K).sum(axis=0).max(), norm="1")[0]
    if not rc > KKT_RCOND:
        raise SingularityError(
            f"{model.name}: the KKT matrix [M -Jᵀ; J 0] is singular here (1/cond = {rc:.2g}): "
            "a singular configuration of the mechanism, the derivatives do not exist"
        )
    X = sla.lu_solve(lu, rhs, check_finite=False)
    X[n:] *= s[:, None]
    return X


@dataclass
class ForwardDynamicsDerivatives:
    """Derivatives of ``ld.forward_dynamics`` at (q, v, τ).

    ``qdd`` (nv), ``lam`` (m, as ``forward_dynamics``: minimum-norm over every row);
    ``dqdd_dq``, ``dqdd_dv``, ``dqdd_dtau`` (nv × nv): tangent-space derivatives
    (column j: the direction q ⊕ e_j of ``ld.integrate``, v + e_j, τ + e_j) at fixed
    other arguments; ``dlam_dq``, ``dlam_dv``, ``dlam_dtau`` (m × nv) those of the
    multipliers of the independent rows ``rows`` (the rows the solve kept; a dropped
    redundant row's multiplier is held at 0 and its row of these matrices is 0:
    where rows are dropped λ's split between dependent rows is not differentiable);
    ``mu`` those multipliers (λ on ``rows``).

    The projection on the closures' tangent space, what a reduced-coordinate
    optimiser wants: with ``independent`` the independent coordinates y (indices
    into v, ``ld.partition``), ``dependent`` the others, and ``G`` (nv × f) the
    velocity map v = G(q) ẏ (G[independent] = I, J G = 0), the state (y, ẏ) fixes a
    consistent (q, v); ``dqdd_dy`` (nv × f) = (∂q̈/∂q + ∂q̈/∂v Dv) G is the derivative
    of q̈ along the constraint manifold when y moves at fixed ẏ (Dv = ∂v/∂q at fixed
    ẏ: J Dv = -∂(J v)/∂q, Dv[independent] = 0), ``dqdd_dydot`` = ∂q̈/∂v G.  These do
    not depend on the form of the closure rows (module doc).  None for a tree."""

    qdd: np.ndarray
    lam: np.ndarray
    dqdd_dq: np.ndarray
    dqdd_dv: np.ndarray
    dqdd_dtau: np.ndarray
    dlam_dq: np.ndarray
    dlam_dv: np.ndarray
    dlam_dtau: np.ndarray
    rows: np.ndarray
    mu: np.ndarray
    independent: np.ndarray = None
    dependent: np.ndarray = None
    G: np.ndarray = None
    dqdd_dy: np.ndarray = None
    dqdd_dydot: np.ndarray = None


def _state(model, q, v, x, xname):
    model_arg(model)
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    x = np.zeros(model.nv) if x is None else vector(x, model.nv, xname, model)
    return q, v, x


def _tangents(model, q, v, qdd, data=None):
    d = evaluate(model, q, v, True, data if data is not None else model.create_data())
    return d, TreeTangents(model, d.Xw, d.S, v, qdd)


def forward_dynamics_derivatives(model, q, v, tau=None, method="augmented", tangent=True):
    """Analytic derivatives of closed-loop forward dynamics, (D1)-(D3) of the module
    doc; :class:`ForwardDynamicsDerivatives`.  ``method``: the forward-dynamics method
    that gives q̈ and λ (all agree; the derivatives are of the unique q̈).  Raises
    :class:`SingularityError` at a singular configuration (KKT matrix singular),
    :class:`AssemblyError` off the manifold where the model's hinge / log rows need a
    consistent state, :class:`ModelError` for log rows of a closure free to turn.
    ``tangent=False`` skips the tangent-space projection."""
    from loopdyn.methods.dynamics import forward_dynamics

    q, v, tau = _state(model, q, v, tau, "tau")
    n, m = model.nv, model.m
    res = forward_dynamics(model, q, v, tau, method=method)
    qdd = res.qdd
    d, tt = _tangents(model, q, v, qdd)
    if m == 0:
        M = _mass(model, q)
        dtq, dtv = tt.forces()
        Minv = _inv_spd(model, M)
        e = np.zeros((0, n))
        return ForwardDynamicsDerivatives(
            qdd, None, -Minv @ dtq, -Minv @ dtv, Minv, e, e, e, np.zeros(0, np.int64), np.zeros(0)
        )
    dropped = np.asarray(res.dropped, dtype=np.int64)
    rows = np.setdiff1d(np.arange(m), dropped)
    _check_manifold(model, d, v, rows)
    if dropped.size:
        _check_constant_rank(model, q, rows.size)
    rt = RowTangents(model, tt, rows)
    lam = res.lam
    if dropped.size:
        Jall = d.J[:m]
        mu = np.linalg.lstsq(rt.J.T, Jall.T @ lam, rcond=None)[0]
    else:
        mu = lam[rows]
    fext, dfext = _closure_wrenches(tt, rt, mu)
    dtq, dtv = tt.forces(fext, dfext)
    M = _mass(model, q)
    r = rows.size
    rhs = np.zeros((n + r, 3 * n))
    rhs[:n, :n] = -dtq
    rhs[n:, :n] = -rt.gq
    rhs[:n, n : 2 * n] = -dtv
    rhs[n:, n : 2 * n] = -rt.gv
    rhs[:n, 2 * n :] = np.eye(n)
    X = _kkt_solve(model, M, rt.J, rhs)
    dl = np.zeros((m, 3 * n))
    dl[rows] = X[n:]
    out = ForwardDynamicsDerivatives(
        qdd, lam, X[:n, :n], X[:n, n : 2 * n], X[:n, 2 * n :],
        dl[:, :n], dl[:, n : 2 * n], dl[:, 2 * n :], rows, mu,
    )  # fmt: skip
    if tangent:
        _project(model, q, out, rt)
    return out


def _project(model, q, out, rt):
    """The tangent-space projection of ``ForwardDynamicsDerivatives`` (its docstring)."""
    from loopdyn.analysis.assembly import partition

    part = partition(model, q)
    ind, dep = part.independent, part.dependent
    n = model.nv
    Jk = rt.J
    G = np.zeros((n, ind.size))
    G[ind, np.arange(ind.size)] = 1.0
    Dv = np.zeros((n, n))
    if dep.size:
        Jd = Jk[:, dep]
        if Jd.shape[0] != Jd.shape[1]:
            raise SingularityError(
                f"{model.name}: {Jd.shape[0]} independent closure rows against {dep.size} "
                "dependent coordinates: the partition does not match the rank here"
            )
        G[dep] = -np.linalg.solve(Jd, Jk[:, ind])
        Dv[dep] = -np.linalg.solve(Jd, rt.hq)
    out.independent, out.dependent, out.G = ind, dep, G
    out.dqdd_dy = (out.dqdd_dq + out.dqdd_dv @ Dv) @ G
    out.dqdd_dydot = out.dqdd_dv @ G


def _mass(model, q):
    from loopdyn.tree.algorithms import crba

    return crba(model, q, data=model.create_data())


def _inv_spd(model, M):
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise SingularityError(f"{model.name}: the mass matrix is singular here") from None
    Li = np.linalg.inv(L)
    return Li.T @ Li


def rnea_derivatives(model, q, v, qdd, fext=None):
    """(∂τ/∂q, ∂τ/∂v, ∂τ/∂q̈ = M) (nv × nv) of the tree's inverse dynamics
    τ = RNEA(q, v, q̈) (closures ignored), tangent-space columns (module doc of
    ``loopdyn.derivatives.tree``).  ``fext``: None."""
    q, v, qdd = _state(model, q, v, qdd, "qdd")
    _, tt = _tangents(model, q, v, qdd)
    dtq, dtv = tt.forces()
    return dtq, dtv, _mass(model, q)


def aba_derivatives(model, q, v, tau):
    """(∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ = M⁻¹) (nv × nv) of the tree's forward dynamics
    (closures ignored): q̈ = ABA(q, v, τ), ∂q̈/∂x = -M⁻¹ ∂RNEA/∂x at q̈."""
    from loopdyn.tree.algorithms import aba

    q, v, tau = _state(model, q, v, tau, "tau")
    qdd = aba(model, q, v, tau, data=model.create_data())
    _, tt = _tangents(model, q, v, qdd)
    dtq, dtv = tt.forces()
    Minv = _inv_spd(model, _mass(model, q))
    return -Minv @ dtq, -Minv @ dtv, Minv


@dataclass
class InverseDynamicsDerivatives:
    """Derivatives of ``ld.inverse_dynamics`` (generic: ``[B Jᵀ][u; λ] = RNEA(q, v, q̈)``,
    the minimum-norm solution where not unique): ``tau`` (nv), ``lam`` (m) and
    ``dtau_dq``, ``dtau_dv``, ``dtau_dqdd`` (nv × nv, non-zero rows at the actuated
    coordinates), ``dlam_dq``, ``dlam_dv``, ``dlam_dqdd`` (m × nv); tangent columns."""

    tau: np.ndarray
    lam: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    dtau_dqdd: np.ndarray
    dlam_dq: np.ndarray
    dlam_dv: np.ndarray
    dlam_dqdd: np.ndarray


def inverse_dynamics_derivatives(model, q, v, qdd, actuated=None):
    """Analytic derivatives of ``ld.inverse_dynamics(model, q, v, qdd, actuated)``.

    With A = [B Jᵀ] (nv × (na + m)), b = RNEA(q, v, q̈) and x = [u; λ] = A⁺ b (the exact
    solution, or the minimum-norm one when over-actuated; b in the range of A):

        dx = A⁺ (db - dA x) + (I - A⁺A) dAᵀ (A Aᵀ)⁺ b                            (D4)

    (the derivative of the pseudo-inverse at constant rank), where db - dA x =
    ∂/∂q [RNEA - Jᵀλ] at fixed λ (the closure forces as world wrenches) and
    dAᵀ y = [0; ∂(J y)/∂q] for y = (A Aᵀ)⁺ b.  For v and q̈ dA = 0.
    """
    from loopdyn.analysis.inverse import _indices, inverse_dynamics

    q, v, qdd = _state(model, q, v, qdd, "qdd")
    act = model.actuated if actuated is None else _indices(model, actuated)
    res = inverse_dynamics(model, q, v, qdd, actuated=act)
    n, m, na = model.nv, model.m, act.size
    lam = res.lam
    d, tt = _tangents(model, q, v, qdd)
    rows = np.arange(m)
    A = np.zeros((n, na + m))
    A[act, np.arange(na)] = 1.0
    if m:
        _check_manifold(model, d, v, rows)
        A[:, na:] = d.J[:m].T
    Ap = np.linalg.pinv(A, rcond=1e-10)
    if m:
        rt0 = RowTangents(model, tt, rows)
        fext, dfext = _closure_wrenches(tt, rt0, lam)
        dtq, dtv = tt.forces(fext, dfext)
        # tt.tau = RNEA - Jᵀλ of the non-coupling rows
        cpl = model.row_int[:, 1] == COUPLING
        rnea_b = tt.tau + (rt0.J[~cpl].T @ lam[~cpl])
        y = np.linalg.pinv(A @ A.T, rcond=1e-10) @ rnea_b
        ty = TreeTangents(model, d.Xw, d.S, y, np.zeros(n))
        rty = RowTangents(model, tt, rows, tv=ty)
        dAty = np.zeros((na + m, n))
        dAty[na:] = rty.hq_other
        P = np.eye(na + m) - Ap @ A
        dxq = Ap @ dtq + P @ dAty
    else:
        dtq, dtv = tt.forces()
        dxq = Ap @ dtq
    M = _mass(model, q)
    dxv = Ap @ dtv
    dxa = Ap @ M

    def tau_rows(x):
        out = np.zeros((n, n))
        out[act] = x[:na]
        return out

    return InverseDynamicsDerivatives(
        res.tau, lam, tau_rows(dxq), tau_rows(dxv), tau_rows(dxa), dxq[na:], dxv[na:], dxa[na:]
    )
