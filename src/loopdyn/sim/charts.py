"""Charts of the configuration manifold for the integrators: q = q_a ⊕ δ.

The state integrated is y = (δ, v) with q = integrate(q_a, δ) in a chart around an
anchor q_a; δ̇ = J_r(δ)⁻¹ v (the inverse right Jacobian of SO(3)/SE(3) for
spherical/free joints, the identity otherwise), re-anchored after every step
(Runge–Kutta–Munthe-Kaas): quaternions stay unit.  Models without spherical or
free joints use q itself (q_a = 0).
"""

import numpy as np
from numba import njit

from loopdyn.kinematics.configuration import integrate
from loopdyn.model.joints import FREE, SPHERICAL


@njit(cache=True)
def _hat(w0, w1, w2):
    return np.array([[0.0, -w2, w1], [w2, 0.0, -w0], [-w1, w0, 0.0]])


@njit(cache=True)
def _so3_jr_inv(P, th2):
    """J_r(φ)⁻¹ = I + ½ φ^ + c φ^² (P = φ^, θ² = |φ|²)."""
    if th2 < 0.04:
        c = 1.0 / 12.0 + th2 * (1.0 / 720.0 + th2 * (1.0 / 30240.0 + th2 / 1209600.0))
    else:
        th = np.sqrt(th2)
        c = 1.0 / th2 - (1.0 + np.cos(th)) / (2.0 * th * np.sin(th))
    return np.eye(3) + 0.5 * P + c * (P @ P)


@njit(cache=True)
def _se3_q(P, R, th2):
    """Barfoot's Q(ρ, φ) of the SE(3) left Jacobian (P = φ^, R = ρ^)."""
    if th2 < 0.04:
        a = 1.0 / 6.0 - th2 * (1.0 / 120.0 - th2 * (1.0 / 5040.0 - th2 / 362880.0))
        b = 1.0 / 24.0 - th2 * (1.0 / 720.0 - th2 * (1.0 / 40320.0 - th2 / 3628800.0))
        c = 1.0 / 120.0 - th2 * (1.0 / 2520.0 - th2 * (1.0 / 120960.0 - th2 / 9979200.0))
    else:
        th = np.sqrt(th2)
        s, co = np.sin(th), np.cos(th)
        a = (th - s) / (th2 * th)
        b = (th2 + 2.0 * co - 2.0) / (2.0 * th2 * th2)
        c = (2.0 * th - 3.0 * s + th * co) / (2.0 * th2 * th2 * th)
    PR = P @ R
    RP = R @ P
    PRP = PR @ P
    PP = P @ P
    return (
        0.5 * R + a * (PR + RP + PRP) + b * (PP @ R + R @ PP - 3.0 * PRP) + c * (PRP @ P + P @ PRP)
    )


@njit(cache=True)
def chart_rate_kernel(topo, delta, v, out):
    """out = δ̇ for q = q_a ⊕ δ moving with velocity v: δ̇ = J_r(δ)⁻¹ v, joint by joint.

    Spherical: SO(3), δ = φ, v = ω (body frame).  Free: SE(3), δ = [φ; ρ], v = [ω; u]
    (body twist, ld.integrate's convention); J_r(δ) = J_l(-δ) = [[A, 0], [Q, A]] with
    A = J_r(φ) of SO(3) and Q = Barfoot's Q(-ρ, -φ), so δ̇_φ = A⁻¹ω and
    δ̇_ρ = A⁻¹(u - Q δ̇_φ).  Other joints: δ̇ = v.
    """
    for i in range(topo.shape[0]):
        jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
        if jt == SPHERICAL or jt == FREE:
            p0, p1, p2 = delta[iv], delta[iv + 1], delta[iv + 2]
            th2 = p0 * p0 + p1 * p1 + p2 * p2
            Ainv = _so3_jr_inv(_hat(p0, p1, p2), th2)
            w = Ainv @ v[iv : iv + 3]
            out[iv], out[iv + 1], out[iv + 2] = w[0], w[1], w[2]
            if jt == FREE:
                Q = _se3_q(
                    _hat(-p0, -p1, -p2), _hat(-delta[iv + 3], -delta[iv + 4], -delta[iv + 5]), th2
                )
                u = Ainv @ (v[iv + 3 : iv + 6] - Q @ w)
                out[iv + 3], out[iv + 4], out[iv + 5] = u[0], u[1], u[2]
        else:
            for k in range(nvj):
                out[iv + k] = v[iv + k]


class Chart:
    """q = integrate(q_a, δ); Euclidean models use q = δ directly."""

    def __init__(self, model, q):
        self.model = model
        self.euclid = not model.has_quaternions
        self.anchor = None if self.euclid else np.array(q, dtype=float)

    def delta(self, q):
        """Chart coordinates of q: q itself, or 0 after re-anchoring at q."""
        if self.euclid:
            return np.array(q, dtype=float)
        self.anchor = np.array(q, dtype=float)
        return np.zeros(self.model.nv)

    def q(self, delta):
        if self.euclid:
            return delta
        return integrate(self.model, self.anchor, delta)

    def rate(self, delta, v):
        if self.euclid:
            return v
        out = np.empty(self.model.nv)
        chart_rate_kernel(self.model.topo, delta, v, out)
        return out
