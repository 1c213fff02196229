"""Derivatives of one step of ``ld.simulate``'s fixed-step integrator: ``ld.step_derivatives``.

The step is the one ``ld.simulate(..., integrator="RK4", stabilization=...)`` takes
(``loopdyn.sim.integrators.RK4Stepper`` on ``loopdyn.sim.stabilization.System``, the
same arithmetic as the compiled loop): from the state x_k = (q_k, v_k), in the chart
q = q_k ⊕ δ re-anchored at q_k (δ_1 = 0; models without spherical or free joints use
q itself, the same map), with τ held over the step,

    (S1)  y_i = y_1 + c_i h K_{i-1}   (c = 0, ½, ½, 1),  y = (δ, v),
    (S2)  K_i = (J_r(δ_i)⁻¹ v_i,  q̈(q_k ⊕ δ_i, v_i, τ)),
    (S3)  y_e = y_1 + h/6 (K_1 + 2 K_2 + 2 K_3 + K_4),   q_e = q_k ⊕ δ_e,
    (S4)  projection (``stabilization="projection"``): q_{k+1} = Newton's limit on
          Φ = 0 from q_e (minimum-norm steps), v_{k+1} = (I − J⁺J) v_e at q_{k+1}.

Tangent perturbations (the convention of ``ld.forward_dynamics_derivatives``): the
input x_k ⊕ (ε, ν) = (q_k ⊕ ε, v_k + ν), the output likewise, so A = ∂x_{k+1}/∂x_k is
2nv × 2nv and B = ∂x_{k+1}/∂τ is 2nv × nv.  The chain rule through (S1)–(S4), with the
columns (ε, ν, τ) carried together as 3nv directions:

    (S5)  the tangent of q_i at q_i:  η_i = Ad(exp(−δ_i)) ε + J_r(δ_i) dδ_i
          (q_k ⊕ ε ⊕ δ = q_k ⊕ δ ⊕ Ad(exp(−δ)) ε, and ⊕(δ + dδ) = ⊕δ ⊕ J_r(δ) dδ),
    (S6)  dq̈_i = ∂q̈/∂q η_i + ∂q̈/∂v dv_i + ∂q̈/∂τ dτ   (``forward_dynamics_derivatives``),
    (S7)  d(J_r(δ)⁻¹ v) = J_r⁻¹ dv − J_r⁻¹ (D J_r[dδ]) J_r⁻¹ v,
          J_r(δ) = Σ_k (−1)^k ad_δ^k / (k+1)!,
          D J_r[e] = Σ_k (−1)^k/(k+1)! Σ_j ad_δ^j ad_e ad_δ^(k−1−j),
          Ad(exp(−δ)) = Σ_k (−ad_δ)^k / k!
          joint by joint: ad_φ = φ× (spherical, SO(3)), ad_[φ;ρ] = [[φ×, 0], [ρ×, φ×]]
          (free, SE(3), [angular; linear]); the identity (and D J_r = 0) for the others;
          the series are summed until their terms fall below 1e-17 (δ is a stage step,
          |δ| ≪ 1: a few terms),
    (S8)  the projection's derivative at its fixed point: η_{k+1} = N η_e,
          dv_{k+1} = N dv_e − J⁺ ∂(J v_e)/∂q η_{k+1},  N = I − J⁺J, J⁺ = Jᵀ(J Jᵀ)⁻¹,
          J and ∂(J v)/∂q (the kernel's ``hq``) on the independent rows at (q_{k+1}, v_e).

(S8) is the derivative of the projection map at a point of the manifold: Newton's
first step from q on the manifold moved by d is q + N d + O(|d|²), its later steps
O(|d|²).  q_e is off the manifold by the step's own drift |Φ(q_e)| (O(h⁵) for RK4 from a
consistent state) and v_e by |J v_e|: the terms dropped are of that order (the move
from q_e to q_{k+1}, the curvature of the projection at distance |Φ(q_e)|, and
−dJᵀ w − J⁺(dJ Jᵀ + J dJᵀ) w with w = (J Jᵀ)⁻¹ J v_e), far below the 1e-6 of the
tests.  ``stabilization="none"``: x_{k+1} = (q_e, v_e) and (S8) is skipped.

The stages are off the manifold (by O(h²)): ``forward_dynamics_derivatives`` is exact
there for every row kind (the swing and log rotation rows in their own form, (D5)-(D6)
of ``loopdyn.derivatives.closed``), so every closure kind is covered.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.kinematics.configuration import integrate
from loopdyn.model.joints import FREE, SPHERICAL
from loopdyn.validation import configuration, model_arg, vector

INTEGRATORS = ("rk4",)
STABILIZATIONS = ("projection", "none")
_SERIES_TOL = 1e-17
_SERIES_MAX = 60


def _hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _ad(jt, x):
    """ad_x of the joint's Lie algebra: φ× (SO(3)) or [[φ×, 0], [ρ×, φ×]] (SE(3))."""
    if jt == SPHERICAL:
        return _hat(x)
    a = np.zeros((6, 6))
    a[:3, :3] = a[3:, 3:] = _hat(x[:3])
    a[3:, :3] = _hat(x[3:])
    return a


def _series(ad, coef):
    """Σ_k coef(k) ad^k, summed until a term falls below ``_SERIES_TOL`` (S7)."""
    k = ad.shape[0]
    out = np.eye(k)
    P = np.eye(k)
    for i in range(1, _SERIES_MAX):
        P = P @ ad
        term = coef(i) * P
        out += term
        if np.abs(term).max() < _SERIES_TOL:
            return out
    raise ValueError("step_derivatives: a stage rotation is too large for the series (|δ| > 2)")


def _fact(k):
    return float(np.prod(np.arange(1, k + 1))) if k > 0 else 1.0


def _joint_blocks(model):
    """(joint type, first index into v, nv of the joint) of the spherical and free joints."""
    topo = np.asarray(model.topo)
    return [
        (int(topo[i, 1]), int(topo[i, 3]), int(topo[i, 5]))
        for i in range(topo.shape[0])
        if topo[i, 1] in (SPHERICAL, FREE)
    ]


def _chart(blocks, n, delta, vel):
    """(Ad(exp(−δ)), J_r(δ), J_r(δ)⁻¹ v, ∂(J_r(δ)⁻¹ v)/∂δ) of (S5), (S7), nv × nv
    (block-diagonal; the identity, the identity, v, 0 outside spherical/free joints)."""
    Ad, Jr = np.eye(n), np.eye(n)
    rate = np.array(vel, dtype=float)
    T = np.zeros((n, n))
    for jt, iv, k in blocks:
        s = slice(iv, iv + k)
        x = delta[s]
        if not np.any(x):
            # δ = 0: Ad = J_r = I, D J_r[e] = −½ ad_e, so ∂(J_r⁻¹ v)/∂δ e = ½ ad_e v = −½ ad_v e
            T[s, s] = -0.5 * _ad(jt, vel[s])
            continue
        ad = _ad(jt, x)
        Ad[s, s] = _series(-ad, lambda i: 1.0 / _fact(i))
        J = _series(ad, lambda i: (-1.0) ** i / _fact(i + 1))
        Jinv = np.linalg.inv(J)
        Jr[s, s] = J
        u = Jinv @ vel[s]
        rate[s] = u
        # powers of ad for D J_r[e] = Σ_i c_i Σ_j ad^j ad_e ad^(i-1-j)
        pows = [np.eye(k)]
        col = np.zeros((k, k))
        for i in range(1, _SERIES_MAX):
            pows.append(pows[-1] @ ad)
            c = (-1.0) ** i / _fact(i + 1)
            # Σ_j ad^j ad_e ad^(i-1-j) u, as a linear map of e: ad_e w = −ad_w e
            term = np.zeros((k, k))
            for j in range(i):
                w = pows[i - 1 - j] @ u
                term -= pows[j] @ _ad(jt, w)
            col += c * term
            if abs(c) * np.abs(term).max() < _SERIES_TOL:
                break
        T[s, s] = -Jinv @ col
    return Ad, Jr, rate, T


@dataclass
class StepDerivatives:
    """One step x_{k+1} = f(x_k, τ) of ``ld.simulate``'s fixed-step integrator and its
    tangent-space derivatives.  ``q``, ``v``: x_{k+1} (nq, nv); ``A`` (2nv × 2nv) =
    ∂x_{k+1}/∂x_k, ``B`` (2nv × nv) = ∂x_{k+1}/∂τ: rows [δq; δv] of the output, columns
    [δq; δv] of the input, δq in the tangent space (q ⊕ δq = ``ld.integrate``)."""

    q: np.ndarray
    v: np.ndarray
    A: np.ndarray
    B: np.ndarray


def step_system(model, q, v, tau, dt, stabilization="projection", tol=1e-12):
    """(q_{k+1}, v_{k+1}) of one RK4 step of ``ld.simulate``'s Python loop (the objects it
    drives: ``System``, ``RK4Stepper``, ``System.project`` at threshold 0), from (q, v)
    with constant τ (nv) over the step ``dt``.  ``tol``: ``constraint_tol``."""
    from loopdyn.sim.integrators import RK4Stepper
    from loopdyn.sim.stabilization import System, tau_function

    mode = stabilization if model.m else "none"
    sy = System(model, "augmented", tau_function(model, tau), mode, (0.0, 0.0), tol, None, None)
    y = sy.start(np.array(q, dtype=float), np.array(v, dtype=float))
    st = RK4Stepper(sy.fun, 0.0, y, dt, dt, np.array([dt]))
    st.step()
    qe, ve = sy.full(st.y)
    if mode == "projection":
        qe, ve, _ = sy.project(qe, ve)
    return qe, ve


def step_derivatives(
    model, q, v, tau=None, dt=1e-3, integrator="rk4", stabilization="projection", tol=1e-12
):
    """Derivatives of one step of ``ld.simulate(model, ..., integrator="RK4", dt=dt,
    stabilization=...)`` with τ constant over the step: :class:`StepDerivatives`
    (x_{k+1}, A = ∂x_{k+1}/∂x_k, B = ∂x_{k+1}/∂τ), the chain rule (S1)–(S8) of the module
    doc through ``ld.forward_dynamics_derivatives`` at the four stages.

    In: ``q`` (nq), ``v`` (nv), ``tau`` (nv; None: zeros), ``dt`` > 0 (s),
    ``integrator``: ``"rk4"``; ``stabilization``: ``"projection"`` (the Newton projection
    onto Φ = 0 then J v = 0 after the step, ``tol`` its ``constraint_tol``) or ``"none"``.
    (q, v) should be consistent for the projection's derivative to be that of a step of
    the simulation (a state off the manifold is projected all the same).

    Raises ``SingularityError`` where a stage's KKT matrix is singular, ``ValueError``
    for bad arguments."""
    model_arg(model)
    if str(integrator).lower() not in INTEGRATORS:
        raise ValueError(f"integrator must be one of {INTEGRATORS}, got {integrator!r}")
    if stabilization not in STABILIZATIONS:
        raise ValueError(f"stabilization must be one of {STABILIZATIONS}, got {stabilization!r}")
    dt = float(dt)
    if not (np.isfinite(dt) and dt > 0.0):
        raise ValueError(f"dt must be positive and finite, got {dt!r}")
    q = np.array(configuration(model, q), dtype=float)
    v = np.array(vector(v, model.nv, "v", model), dtype=float)
    tau = np.zeros(model.nv) if tau is None else np.array(vector(tau, model.nv, "tau", model))
    from loopdyn.derivatives.closed import forward_dynamics_derivatives

    n, h = model.nv, dt
    blocks = _joint_blocks(model)
    E = np.zeros((n, 3 * n))  # ∂ε of the columns (ε, ν, τ)
    E[:, :n] = np.eye(n)
    Dtau = np.zeros((n, 3 * n))
    Dtau[:, 2 * n :] = np.eye(n)
    d1 = np.zeros(n)
    Dd1 = np.zeros((n, 3 * n))
    Dv1 = np.zeros((n, 3 * n))
    Dv1[:, n : 2 * n] = np.eye(n)
    Kd, Kv, DKd, DKv = [], [], [], []
    for c in (0.0, 0.5, 0.5, 1.0):
        # (S1): the stage state and its sensitivities
        if Kd:
            di, vi = d1 + c * h * Kd[-1], v + c * h * Kv[-1]
            Ddi, Dvi = Dd1 + c * h * DKd[-1], Dv1 + c * h * DKv[-1]
        else:
            di, vi, Ddi, Dvi = d1, v, Dd1, Dv1
        Ad, Jr, rate, T = _chart(blocks, n, di, vi)
        qi = integrate(model, q, di)
        eta = Ad @ E + Jr @ Ddi  # (S5)
        fd = forward_dynamics_derivatives(model, qi, vi, tau, tangent=False)
        Kd.append(rate)
        Kv.append(np.array(fd.qdd))
        DKd.append(T @ Ddi + np.linalg.solve(Jr, Dvi) if blocks else Dvi.copy())  # (S7)
        DKv.append(fd.dqdd_dq @ eta + fd.dqdd_dv @ Dvi + fd.dqdd_dtau @ Dtau)  # (S6)
    w = (h / 6.0, h / 3.0, h / 3.0, h / 6.0)
    de = d1 + sum(wi * k for wi, k in zip(w, Kd, strict=True))
    ve = v + sum(wi * k for wi, k in zip(w, Kv, strict=True))
    Dde = Dd1 + sum(wi * k for wi, k in zip(w, DKd, strict=True))
    Dve = Dv1 + sum(wi * k for wi, k in zip(w, DKv, strict=True))
    Ad, Jr, _, _ = _chart(blocks, n, de, ve)
    qe = integrate(model, q, de)
    eta = Ad @ E + Jr @ Dde  # (S3), (S5) at the end of the step
    if stabilization == "projection" and model.m:
        qe, ve, eta, Dve = _projection(model, q, qe, ve, tau, eta, Dve, tol)
    A = np.vstack([eta[:, : 2 * n], Dve[:, : 2 * n]])
    B = np.vstack([eta[:, 2 * n :], Dve[:, 2 * n :]])
    return StepDerivatives(np.asarray(qe), np.asarray(ve), A, B)


def _projection(model, q0, qe, ve, tau, eta, Dve, tol):
    """(S4), (S8): the projected state (``System.project``'s own arithmetic) and the
    sensitivities carried through the projection's derivative at its fixed point."""
    from loopdyn.derivatives.closed import _work, forward_dynamics_derivatives
    from loopdyn.kinematics.closures import constraint_rank
    from loopdyn.sim.stabilization import System, tau_function

    fn = tau_function(model, tau)
    sy = System(model, "augmented", fn, "projection", (0.0, 0.0), tol, None, None)
    sy.rows = constraint_rank(model, q0).independent  # at the step's start, as System.start
    qp, vp, _ = sy.project(np.array(qe), np.array(ve))
    # J and ∂(J v)/∂q on the kernel's independent rows at (q_{k+1}, v_e)
    fd = forward_dynamics_derivatives(model, qp, ve, tau, tangent=False)
    r = fd.rows.size
    wk = _work(model)
    J = np.array(wk.views["Jk"][:r])
    hq = np.array(wk.views["hq"][:r])
    Jp = J.T @ np.linalg.inv(J @ J.T)
    N = np.eye(model.nv) - Jp @ J
    eta_p = N @ eta
    Dvp = N @ Dve - Jp @ (hq @ eta_p)
    return qp, vp, eta_p, Dvp
